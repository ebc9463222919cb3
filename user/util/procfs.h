/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * procfs: small readers of /proc files that any module may need without
 * the process table (proc/), e.g. the symbolizers (perf maps named after a
 * namespace's pid) and the Python readers.
 */
#ifndef BPFPROF_PROCFS_H
#define BPFPROF_PROCFS_H

#include <stdint.h>

/*
 * The innermost (last) NSpid of a /proc/PID[/task/TID]/status file: the id
 * the task knows itself by in its own pid namespace. 0 when the file cannot
 * be read; no_line when it has no NSpid line (kernels before 4.1).
 */
uint32_t procfs__nspid(const char *status_path, uint32_t no_line);
/*
 * The real, effective, saved and file-system uids of a /proc/PID/status
 * file (as this process's user namespace sees them) into uids; 0, or -errno
 * when the file cannot be read or has no Uid line.
 */
int procfs__uids(const char *status_path, uint32_t uids[4]);
/*
 * This process's resident set and its high-water mark since the exec (or
 * since a reset through /proc/self/clear_refs), in KiB, from
 * /proc/self/status (VmRSS, VmHWM); -1 each when unknown. Not getrusage's
 * ru_maxrss: the kernel folds into it the peak of the image the exec
 * replaced, i.e. of whatever forked us (a pytest of 150 MiB, a Python
 * supervisor), so it says more about the parent than about the agent.
 */
void procfs__self_rss(long *rss_kib, long *hwm_kib);

#endif
