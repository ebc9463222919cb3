/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sideband: the kernel's task and mmap records (the ones `perf record` uses to
 * follow exec/fork/exit and every executable mmap), read from one dummy
 * software perf event per CPU and fed to the process table. This is how a
 * process that lived for 50 ms between two looks at /proc still symbolizes.
 *
 * Only the processes the run profiles are tracked (-p, -- CMD, --cgroup): a
 * filter (sideband__set_filter) keeps the records of targets and skips the
 * rest before the process table sees them (no /proc maps read, no file
 * opened for them). A process skipped is unknown to the table, so if it
 * turns out to matter (a sample of it: moved into the cgroup, started there
 * by a parent outside it) its maps are read from /proc, and its records are
 * kept from then on (sideband__mark_target).
 */
#ifndef BPFPROF_SIDEBAND_H
#define BPFPROF_SIDEBAND_H

#include <stdbool.h>
#include <stdint.h>

struct proctab;
struct sideband;

struct sideband_stats {
	uint64_t records;
	uint64_t lost;	       /* records the kernel dropped (buffer full) */
	uint64_t skipped;      /* records of processes the filter does not want */
	uint64_t lookups;      /* verdicts asked of the filter (once per process, mostly) */
	uint64_t leader_exits; /* a leader's exit record while its process ran on */
};

/* Which processes' records are kept (-p, -- CMD). */
struct sideband_filter {
	bool (*is_target)(void *ctx, uint32_t pid); /* asked once per process */
	void *ctx;
	/* a child of a target is one (-- CMD): decided at its fork record */
	bool follow_children;
	/*
	 * A cgroup's membership: a child has its parent's verdict, target or
	 * not (it starts in its parent's cgroup), and one not known a target
	 * is asked again at its exec (a runtime moves a container's entry
	 * point in before the exec).
	 */
	bool by_cgroup;
	/*
	 * by_cgroup: asked instead of is_target at the exec of a process not
	 * known a target (NULL: is_target)
	 */
	bool (*at_exec)(void *ctx, uint32_t pid);
	/* when a target's exit record has been handled (NULL: nothing to do) */
	void (*forget)(void *ctx, uint32_t pid);
};

int sideband__new(struct sideband **out, struct proctab *procs, size_t pages_per_cpu);
/* Keep only the records of processes f wants; before the first consume. */
int sideband__set_filter(struct sideband *sb, const struct sideband_filter *f);
/* pid is a target now (a sample of it came): its records are kept from here on. */
void sideband__mark_target(struct sideband *sb, uint32_t pid);
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
 * whichever order they come in, through filter f (NULL: none); the counts
 * go to *stats (may be NULL). For tests and replays.
 */
struct perf_event_header;
int sideband__replay(struct proctab *procs, const struct sideband_filter *f,
		     const struct perf_event_header *const *recs, size_t n,
		     struct sideband_stats *stats);

#endif
