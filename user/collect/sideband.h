/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sideband: the kernel's task and mmap records (the ones `perf record` uses to
 * follow exec/fork/exit and every executable mmap), read from one dummy
 * software perf event per CPU and fed to the process table. This is how a
 * process that lived for 50 ms between two looks at /proc still symbolizes.
 */
#ifndef BPFPROF_SIDEBAND_H
#define BPFPROF_SIDEBAND_H

#include <stdint.h>

struct proctab;
struct sideband;

struct sideband_stats {
	uint64_t records;
	uint64_t lost; /* records the kernel dropped (buffer full) */
};

int sideband__new(struct sideband **out, struct proctab *procs, size_t pages_per_cpu);
void sideband__free(struct sideband *sb);
int sideband__epoll_fd(const struct sideband *sb);
/* Read every pending record (cheap when none: no syscall). */
int sideband__consume(struct sideband *sb);
/* CLOCK_MONOTONIC ns when the last consume started: records before it are in. */
uint64_t sideband__consumed_until(const struct sideband *sb);
const struct sideband_stats *sideband__stats(const struct sideband *sb);
/*
 * Handle perf records (FORK, EXIT, COMM, MMAP2 with sample_id_all TID|TIME,
 * as sideband__new asks for) the way one consume does: in time order,
 * whichever order they come in. For tests and replays.
 */
struct perf_event_header;
int sideband__replay(struct proctab *procs, const struct perf_event_header *const *recs, size_t n);

#endif
