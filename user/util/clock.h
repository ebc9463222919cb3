/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CLOCK_MONOTONIC in nanoseconds: the clock BPF's bpf_ktime_get_ns() reads;
 * and the calling thread's or the process's CPU time (what a piece of the
 * agent's work costs).
 */
#ifndef BPFPROF_CLOCK_H
#define BPFPROF_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + t.tv_nsec;
}

static inline uint64_t timespec_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ULL + t->tv_nsec;
}

static inline uint64_t thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + t.tv_nsec;
}

/* CPU seconds the whole process has used so far */
static inline double process_cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

#endif
