/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Helpers shared by the test workloads. The workloads are the ground truth the
 * end-to-end tests compare profiles against, so everything here is about
 * keeping the compiler from moving work out of the function it is meant to be
 * charged to.
 */
#ifndef WORKLOADS_COMMON_H
#define WORKLOADS_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* noclone keeps gcc from making work_a.constprop.0 out of work_a */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Keeps a call from becoming a tail jump (which would drop the caller's frame). */
#define BARRIER() __asm__ __volatile__("" ::: "memory")

/*
 * The syscall instruction is emitted inline, in the calling function: a libc
 * wrapper has no frame of its own, so a frame-pointer walk that starts inside
 * it skips the wrapper's caller, and the kernel time would be charged to the
 * caller's caller instead of the function under test.
 */
static ALWAYS_INLINE long raw_syscall3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;

	__asm__ __volatile__("syscall"
			     : "=a"(ret)
			     : "a"(nr), "D"(a), "S"(b), "d"(c)
			     : "rcx", "r11", "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
#else
	return syscall(nr, a, b, c);
#endif
}

static ALWAYS_INLINE int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	raw_syscall3(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, (long)&ts, 0);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A dependent multiply/xor-shift chain: register-only, cannot be folded. */
static ALWAYS_INLINE uint64_t mix_step(uint64_t x, uint64_t k)
{
	x = x * 6364136223846793005ULL + k;
	x ^= x >> 29;
	__asm__ __volatile__("" : "+r"(x));
	return x;
}

/* Parses a positive number of seconds; exits 2 naming the bad value. */
static inline double parse_seconds(const char *prog, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 86400) {
		fprintf(stderr, "%s: bad SECONDS '%s': expected a number in (0, 86400]\n", prog, s);
		exit(2);
	}
	return v;
}

static inline void print_pid(void)
{
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
}

#endif /* WORKLOADS_COMMON_H */
