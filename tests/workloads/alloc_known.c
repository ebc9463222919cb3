// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Known heap behaviour, the ground truth of tests/e2e/test_alloc.py. Each
 * pattern runs from its own function, which is what the profile must charge
 * it to:
 *
 *   leak_blocks     LEAK_N blocks of LEAK_SIZE, kept until exit
 *   churn_blocks    CHURN_M blocks of CHURN_SIZE, each freed at once
 *   small_allocs    SMALL_N allocations of 16..256 bytes, freed
 *   realloc_chain   grows one block 1 KiB -> 1 MiB by realloc, then keeps it
 *   aligned_allocs  posix_memalign and memalign blocks, kept; aligned_alloc freed
 *   calloc_blocks   calloc blocks, kept
 *   mmap_regions    anonymous mmaps: MMAP_KEEP kept, the others munmapped
 *
 * Usage: alloc_known [SECONDS_TO_WAIT_AT_END] [--die]
 * Prints "ready" when everything is allocated; with --die it is killed by
 * SIGKILL instead of returning (the profiler sees an exit mid-run).
 */
#include <malloc.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

#define LEAK_N 200
#define LEAK_SIZE (64 * 1024)		/* 12.5 MiB kept */
#define CHURN_M 2000
#define CHURN_SIZE (256 * 1024)		/* 500 MiB allocated, none kept */
#define SMALL_N 400000
#define CALLOC_N 50
#define CALLOC_SIZE (32 * 1024)
#define ALIGNED_N 40
#define ALIGNED_SIZE (100 * 1024)
#define MMAP_N 30
#define MMAP_KEEP 10
#define MMAP_SIZE (1024 * 1024)

static void *volatile sink;
/* not static: the compiler must not drop allocations whose result only lands here */
void *leaked[LEAK_N + CALLOC_N + 2 * ALIGNED_N + MMAP_KEEP + 1];
int nleaked;

static NOINLINE void leak_blocks(void)
{
	for (int i = 0; i < LEAK_N; i++) {
		char *p = malloc(LEAK_SIZE);

		p[0] = 1;
		leaked[nleaked++] = p;
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
	p = reallocarray(p, 2, 1024 * 1024);	/* 2 MiB, kept */
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

int main(int argc, char **argv)
{
	double wait = argc > 1 ? atof(argv[1]) : 0;
	bool die = argc > 2 && !strcmp(argv[2], "--die");

	leak_blocks();
	churn_blocks();
	small_allocs();
	realloc_chain();
	aligned_allocs();
	calloc_blocks();
	mmap_regions();
	printf("ready\n");
	fflush(stdout);
	if (wait > 0) {
		struct timespec ts = { (time_t)wait, (long)((wait - (time_t)wait) * 1e9) };

		nanosleep(&ts, NULL);
	}
	if (die)
		raise(SIGKILL);
	return 0;
}
