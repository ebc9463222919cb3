// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap benchmark: THREADS threads each make PAIRS malloc/free pairs of small
 * blocks (16..512 bytes), keeping a window of 64 blocks alive so that the
 * frees are not always of the block just allocated. Prints the wall time and
 * the number of calls: "elapsed S calls N".
 *
 * Usage: bench_malloc [PAIRS_PER_THREAD [THREADS [DELAY]]]   (default 2000000 2 0)
 * DELAY: seconds to sleep first (untimed), so that a profiler can attach
 * with -p before the first call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define WINDOW 64

static long pairs = 2000000;

static void *worker(void *arg)
{
	void *win[WINDOW] = { 0 };
	unsigned int x = (unsigned int)(uintptr_t)arg * 2654435761u + 1;

	for (long i = 0; i < pairs; i++) {
		unsigned int slot = i % WINDOW;
		char *p;

		x = x * 1103515245u + 12345u;
		free(win[slot]);
		p = malloc(16 + (x >> 16) % 497);
		p[0] = (char)i;
		win[slot] = p;
	}
	for (int i = 0; i < WINDOW; i++)
		free(win[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 2 ? atoi(argv[2]) : 2;
	pthread_t t[64];
	struct timespec a, b;

	double delay = argc > 3 ? atof(argv[3]) : 0;

	if (argc > 1)
		pairs = atol(argv[1]);
	if (pairs <= 0 || nthreads <= 0 || nthreads > 64) {
		fprintf(stderr, "usage: bench_malloc [PAIRS_PER_THREAD] [THREADS<=64]\n");
		return 2;
	}
	if (delay > 0) {
		struct timespec d = { (time_t)delay, (long)((delay - (time_t)delay) * 1e9) };

		nanosleep(&d, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("elapsed %.3f calls %ld\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9,
	       2 * pairs * nthreads);
	return 0;
}
