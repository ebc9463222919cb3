/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* setup: a recording's BPF objects, filters and limits (collect/setup.c). */
#ifndef BPFPROF_SETUP_H
#define BPFPROF_SETUP_H

#include <stddef.h>
#include <stdint.h>

struct recorder;
struct rec_feature;

/* Before anything is opened: RLIMIT_NOFILE raised, libbpf's messages routed (-vv). */
void setup__process(void);
/* fds the object table may hold for mapped files (from --mem-budget and RLIMIT_NOFILE) */
uint32_t setup__fd_cap(void);
/* CPU object, filters, unwind tables, then each feature's setup(). 0 or -errno (printed). */
int setup__bpf(struct recorder *r, const struct rec_feature **feats, size_t nfeats);
/* The side band's filter for -p, -- CMD, --cgroup. 0 or -errno (printed). */
int setup__sideband_filter(struct recorder *r);
/* After the run: write the CO-RE types file the next runs load with. */
void setup__save_core_btf(struct recorder *r);

#endif
