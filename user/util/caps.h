/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * caps: the one place that decides what a permission error says. Every
 * step that needs a privilege (the BPF objects, the perf events, another
 * user's /proc files) passes its errno and the capabilities it needs; when
 * the error is EPERM/EACCES the message names each capability the process's
 * effective set lacks, all of them at once, so that a user who grants what
 * it says is not sent back for the next one. CAP_SYS_ADMIN stands in for
 * CAP_BPF and CAP_PERFMON, as the kernel takes it.
 */
#ifndef BPFPROF_CAPS_H
#define BPFPROF_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum caps_need {
	CAPS_BPF = 1 << 0,     /* load BPF programs, create maps */
	CAPS_PERFMON = 1 << 1, /* tracing programs, perf events on every CPU */
	CAPS_PTRACE = 1 << 2,  /* other users' /proc/PID/maps and memory */
	CAPS_SYSLOG = 1 << 3,  /* kernel addresses in /proc/kallsyms */
};

/* What any recording needs: the BPF objects and the perf events. */
#define CAPS_RECORD (CAPS_BPF | CAPS_PERFMON)

/* The capabilities of need that the process's effective set lacks (CAPS_* bits). */
uint32_t caps__missing(uint32_t need);

/*
 * The end of an error line for err (an -errno or errno): for EPERM/EACCES,
 * ": bpfprof lacks CAP_BPF (to load its BPF programs and maps) and
 * CAP_PERFMON (to sample every CPU and attach probes): run it as root or
 * grant them",
 * or, when nothing of need is missing, what else refuses such a call; for
 * any other error "". Points into buf.
 */
const char *caps__why(int err, uint32_t need, char *buf, size_t len);

#endif
