// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bench_cpu [ITERS]
 *
 * A fixed amount of CPU work on every online CPU: one thread per CPU, each
 * running ITERS steps of a register-only hash chain (no memory traffic, so
 * the result measures stolen CPU time, not cache pollution). Prints the wall
 * time it took as "elapsed SECONDS". The default ITERS runs about 2 s.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

#define DEFAULT_ITERS 1300000000ULL

struct worker {
	pthread_t thread;
	uint64_t iters;
	uint64_t seed;
};

static volatile uint64_t sink;

NOINLINE uint64_t bench_loop(uint64_t iters, uint64_t seed)
{
	uint64_t x = seed, i;

	for (i = 0; i < iters; i++)
		x = mix_step(x, 0x9e3779b97f4a7c15ULL);
	return x;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	sink += bench_loop(w->iters, w->seed);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t iters = DEFAULT_ITERS;
	struct worker *workers;
	double start;
	long ncpu, i;
	char *end;
	int err;

	if (argc > 2) {
		fprintf(stderr, "usage: bench_cpu [ITERS]\n");
		return 2;
	}
	if (argc == 2) {
		errno = 0;
		iters = strtoull(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || argv[1][0] == '-' || iters == 0) {
			fprintf(stderr, "bench_cpu: bad ITERS '%s': expected a positive integer\n",
				argv[1]);
			return 2;
		}
	}
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	workers = calloc(ncpu, sizeof(*workers));
	if (!workers) {
		perror("bench_cpu");
		return 1;
	}

	start = wall_now();
	for (i = 0; i < ncpu; i++) {
		workers[i].iters = iters;
		workers[i].seed = (uint64_t)i + 1;
		err = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
		if (err) {
			fprintf(stderr, "bench_cpu: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	for (i = 0; i < ncpu; i++)
		pthread_join(workers[i].thread, NULL);
	printf("elapsed %.6f\n", wall_now() - start);
	free(workers);
	return 0;
}
