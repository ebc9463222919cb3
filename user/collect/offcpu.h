/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Off-CPU and wall-clock time (bpf/offcpu.bpf.c); its BPF object also serves bpfprof dump. */
#ifndef BPFPROF_OFFCPU_H
#define BPFPROF_OFFCPU_H

#include <stdbool.h>
#include <stdint.h>

#include "bpfprof.h"

struct recorder;
struct offcpu_bpf;

/*
 * Open, share the recorder's maps, set rodata and load the off-CPU object:
 * the scheduler-switch timing programs, or (dump) the ptrace-stop capture.
 * Errors are printed. Returns 0 or -errno.
 */
int offcpu__open(struct recorder *r, struct offcpu_bpf **out, bool dump);
/* Sum of one of the object's per-CPU counters. */
uint64_t offcpu__counter(struct offcpu_bpf *skel, enum offcpu_counter c);
/* Set v_wall = cpu nanoseconds + v_off on every stack of the recorder (no-op if v_wall < 0). */
void offcpu__wall(struct recorder *r, int v_off, int v_wall);

#endif
