// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Known heap behaviour, the ground truth of tests/e2e/test_alloc.py. Each
 * pattern runs from its own function, which is what the profile must charge
 * it to:
 *
 *   leak_blocks     LEAK_N blocks of LEAK_SIZE, kept until exit (or SIGKILL)
 *   churn_blocks    CHURN_M blocks of CHURN_SIZE, each freed at once
 *   small_allocs    SMALL_N allocations of 16..256 bytes, freed
 *   realloc_chain   grows one block 1 KiB -> 1 MiB by realloc, then keeps it
 *   aligned_allocs  posix_memalign and memalign blocks, kept; aligned_alloc freed
 *   calloc_blocks   calloc blocks, kept
 *   mmap_regions    anonymous mmaps: MMAP_KEEP kept, the others munmapped
 *
 * Usage: alloc_known [END_WAIT [START_WAIT [--die]]]
 * Waits START_WAIT seconds (time to attach with -p), allocates, prints
 * "ready", waits END_WAIT seconds, and returns -- or with --die is killed by
 * SIGKILL (the profiler sees its target die mid-run).
 */
#include <malloc.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

/*
 * At the default rate (512 KiB) the relative error of an estimate of N
 * blocks of s bytes has a standard deviation of
 * sqrt(exp(-s/rate) / (1 - exp(-s/rate)) / N): 2.8% for the leak and for the
 * churn, so the default-rate test bounds them at 5 of it (14%: a 10% bound
 * fails 4e-4 of runs); other tests sample the leak at 128 KiB. Big blocks are
 * mmapped by malloc and barely touched: little of this is resident.
 */
#define LEAK_N	     200
#define LEAK_SIZE    (1024 * 1024) /* 200 MiB kept */
#define CHURN_M	     2000
#define CHURN_SIZE   (256 * 1024) /* 500 MiB allocated, none kept */
#define SMALL_N	     400000
#define CALLOC_N     50
#define CALLOC_SIZE  (32 * 1024)
#define ALIGNED_N    40
#define ALIGNED_SIZE (100 * 1024)
#define MMAP_N	     30
#define MMAP_KEEP    10
#define MMAP_SIZE    (1024 * 1024)

static void *volatile sink;
/* not static: the compiler must not drop allocations whose result only lands here */
void *leaked[LEAK_N + CALLOC_N + 2 * ALIGNED_N + MMAP_KEEP + 1];
int nleaked;

/*
 * At least LEAK_PACE_S a block: the leak's climb spans >= 4 ms, several of
 * -f chrome's 1 ms heap counter steps, however fast the machine and the probes
 * (unpaced it took 2-3 ms on a slow VM: one part-way point, and none where
 * the 200 calls fit in one step).
 */
#define LEAK_PACE_S 20e-6

static NOINLINE void leak_blocks(void)
{
	for (int i = 0; i < LEAK_N; i++) {
		double t0 = wall_now();
		char *p = malloc(LEAK_SIZE);

		p[0] = 1;
		leaked[nleaked++] = p;
		while (wall_now() - t0 < LEAK_PACE_S)
			BARRIER();
	}
	BARRIER();
}

static NOINLINE void churn_blocks(void)
{
	for (int i = 0; i < CHURN_M; i++) {
		char *p = malloc(CHURN_SIZE);

		p[0] = 1;
		sink = p;
		free(p);
	}
	BARRIER();
}

static NOINLINE void small_allocs(void)
{
	for (int i = 0; i < SMALL_N; i++) {
		char *p = malloc(16 + (i % 16) * 16);

		p[0] = 1;
		sink = p;
		free(p);
	}
	BARRIER();
}

static NOINLINE void realloc_chain(void)
{
	char *p = NULL;

	for (size_t n = 1024; n <= 1024 * 1024; n *= 2) {
		p = realloc(p, n);
		p[n - 1] = 1;
	}
	p = reallocarray(p, 2, 1024 * 1024); /* 2 MiB, kept */
	leaked[nleaked++] = p;
	BARRIER();
}

static NOINLINE void aligned_allocs(void)
{
	for (int i = 0; i < ALIGNED_N; i++) {
		void *p = NULL;

		if (posix_memalign(&p, 4096, ALIGNED_SIZE))
			exit(2);
		leaked[nleaked++] = p;
		leaked[nleaked++] = memalign(256, ALIGNED_SIZE);
		sink = aligned_alloc(64, ALIGNED_SIZE);
		free(sink);
	}
	BARRIER();
}

static NOINLINE void calloc_blocks(void)
{
	for (int i = 0; i < CALLOC_N; i++)
		leaked[nleaked++] = calloc(CALLOC_SIZE / 64, 64);
	BARRIER();
}

static NOINLINE void mmap_regions(void)
{
	for (int i = 0; i < MMAP_N; i++) {
		char *p = mmap(NULL, MMAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED)
			exit(2);
		p[0] = 1;
		if (i < MMAP_KEEP)
			leaked[nleaked++] = p;
		else
			munmap(p, MMAP_SIZE);
	}
	BARRIER();
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	if (s > 0)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	double end_wait = argc > 1 ? atof(argv[1]) : 0;
	double start_wait = argc > 2 ? atof(argv[2]) : 0;
	bool die = argc > 3 && !strcmp(argv[3], "--die");

	sleep_s(start_wait);
	leak_blocks();
	churn_blocks();
	small_allocs();
	realloc_chain();
	aligned_allocs();
	calloc_blocks();
	mmap_regions();
	printf("ready\n");
	fflush(stdout);
	sleep_s(end_wait);
	if (die)
		raise(SIGKILL);
	return 0;
}
