/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * caps: which of the capabilities a run needs this process lacks, named
 * exactly, before anything fails on them. Loading BPF programs and creating
 * their maps needs CAP_BPF; opening a perf event on every CPU and attaching
 * tracing programs needs CAP_PERFMON (CAP_SYS_ADMIN gives both: root, or
 * kernels before 5.8, which have neither). A failure found later says only
 * "Operation not permitted", which named the wrong one: with CAP_PERFMON
 * kept and CAP_BPF dropped the error said "needs root or CAP_PERFMON".
 */
#ifndef BPFPROF_CAPS_H
#define BPFPROF_CAPS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this process's effective set has cap (CAP_*), or -errno. */
int caps__have(int cap);
/*
 * 0 when the effective capabilities can record; else -EPERM, with one
 * error line printed in the user's words: which capabilities are missing,
 * what each is for, and what to do.
 */
int caps__check_record(void);

#endif
