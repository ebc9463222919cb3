/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Reading BPF maps the same way everywhere. */
#ifndef BPFPROF_BPFMAP_H
#define BPFPROF_BPFMAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * A per-CPU array's value at key, each CPU's copy (value_size bytes) added
 * into out as n_u64 64-bit counters. Returns 0 or -errno (out then zero).
 */
int bpfmap__percpu_sum(int map_fd, uint32_t key, uint64_t *out, size_t n_u64);

/* A per-CPU array of single u64 counters: the sum over CPUs at key (0 on error). */
uint64_t bpfmap__percpu_counter(int map_fd, uint32_t key);

#endif
