/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The run's timeline for -f chrome: every CPU sample as (time, thread,
 * stack), stacks interned once, names resolved once at the end by the same
 * profile builder folded/pprof use; features (CUDA) add their slices to
 * tl_log__timeline() as their records arrive.
 */
#ifndef BPFPROF_TIMELINE_LOG_H
#define BPFPROF_TIMELINE_LOG_H

#include <stdint.h>
#include <stdio.h>

#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "aggregate/timeline.h"

struct tl_log;
struct objtab;
struct ksyms;

/* period_ns: CPU time one sample stands for. */
struct tl_log *tl_log__new(uint64_t period_ns);
void tl_log__free(struct tl_log *l);
struct timeline *tl_log__timeline(struct tl_log *l);

/* One CPU sample of (pid, tid) at ts: key is its stack (copied). */
int tl_log__cpu(struct tl_log *l, const struct stack_key *key, uint64_t ts, uint32_t tid,
		const char *tcomm);
/*
 * One off-CPU block of (pid, tid) from start for dur ns, blocked in key's
 * stack; weight: what its frames count for in the unresolved share (0 where
 * the run samples the CPU: the summary then weighs by CPU samples, as the
 * profile formats do; the block's nanoseconds in an --off-cpu-only run).
 */
int tl_log__offcpu(struct tl_log *l, const struct stack_key *key, uint64_t start, uint64_t dur,
		   uint64_t weight, uint32_t tid, const char *tcomm);

/*
 * Name the sampled stacks (o: as for the profile; per_pid/per_thread are
 * ignored, the tracks say which process and thread) and turn each thread's
 * samples into slices of tl_log__timeline(), which write/chrome.c writes
 * (blocks and features' slices are there already). *bs: frames and
 * unresolved frames weighted by CPU samples (or blocks' weights), as
 * profile__build counts them for folded/pprof/svg; *samples: the CPU
 * samples written. Returns 0 or
 * -errno.
 */
int tl_log__build(struct tl_log *l, struct objtab *objs, const struct ksyms *ks,
		  const struct build_opts *o, struct build_stats *bs, uint64_t *samples);

#endif
