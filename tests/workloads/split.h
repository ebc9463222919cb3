/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The known CPU split (work_a 0.50, work_b 0.30, work_c 0.20 of thread CPU
 * time, reached through dispatch()) as a function, for workloads that are
 * built differently from cpu_split: without frame pointers, or in a shared
 * library loaded with dlopen.
 */
#ifndef WORKLOADS_SPLIT_H
#define WORKLOADS_SPLIT_H

#include "common.h"

#define SPLIT_CHECK_EVERY 16384

static volatile uint64_t split_sink;

static ALWAYS_INLINE int64_t split_burn(int64_t budget_ns, uint64_t k)
{
	int64_t start = thread_cpu_ns(), now;
	uint64_t x = k;

	do {
		for (int i = 0; i < SPLIT_CHECK_EVERY; i++)
			x = mix_step(x, k);
		now = thread_cpu_ns();
	} while (now - start < budget_ns);
	split_sink += x;
	return now - start;
}

/*
 * SPLIT_WORK_EXTERN: work_X are defined elsewhere (partial_cfi_work.c, built
 * without CFI); SPLIT_WORK_ONLY: only work_X are wanted here.
 */
#ifdef SPLIT_WORK_EXTERN
int64_t work_a(int64_t ns);
int64_t work_b(int64_t ns);
int64_t work_c(int64_t ns);
#else
NOINLINE int64_t work_a(int64_t ns)
{
	return split_burn(ns, 0x9e3779b97f4a7c15ULL);
}

NOINLINE int64_t work_b(int64_t ns)
{
	return split_burn(ns, 0xbf58476d1ce4e5b9ULL);
}

NOINLINE int64_t work_c(int64_t ns)
{
	return split_burn(ns, 0x94d049bb133111ebULL);
}
#endif

#ifndef SPLIT_WORK_ONLY
NOINLINE int64_t dispatch(int which, int64_t ns)
{
	int64_t used = which == 0 ? work_a(ns) : which == 1 ? work_b(ns) : work_c(ns);

	BARRIER(); /* no sibling call: dispatch keeps its frame */
	return used;
}

/*
 * Runs rounds of 5/3/2 ms owed CPU time until secs of wall time passed, or
 * with on_cpu until the thread had secs of CPU time: as many samples however
 * loaded the host (a test's floor on them holds), the wall time stretching.
 */
static inline void split_run_until(double secs, int on_cpu)
{
	static const int64_t round_ns[3] = { 5000000, 3000000, 2000000 };
	int64_t owed[3] = { 0, 0, 0 }, used[3] = { 0, 0, 0 };
	double end = (on_cpu ? thread_cpu_ns() / 1e9 : wall_now()) + secs;

	while ((on_cpu ? thread_cpu_ns() / 1e9 : wall_now()) < end) {
		for (int w = 0; w < 3; w++) {
			owed[w] += round_ns[w];
			if (owed[w] > used[w])
				used[w] += dispatch(w, owed[w] - used[w]);
		}
	}
	printf("cpu work_a=%.3f work_b=%.3f work_c=%.3f\n", used[0] / 1e9, used[1] / 1e9,
	       used[2] / 1e9);
	fflush(stdout);
}

static inline void split_run_for(double secs)
{
	split_run_until(secs, 0);
}

#endif /* SPLIT_WORK_ONLY */

#endif
