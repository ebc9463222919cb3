// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap benchmark: PAIRS malloc/free pairs of 64 bytes in one thread, the
 * cheapest allocation pattern there is (what a profiler adds shows in full).
 * Prints "elapsed S calls N cpu C": C is the loop's thread CPU time, which a
 * busy shared machine inflates less than the wall time S.
 *
 * Usage: malloc_loop [PAIRS [DELAY]]   (default 2000000 0)
 * DELAY: seconds to sleep first (untimed), for a profiler attaching with -p;
 * -1: wait for SIGUSR1 (sent once the profiler says it is attached).
 */
#include <signal.h>
#include <stdlib.h>

#include "common.h"

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 2000000;
	int delay = argc > 2 ? atoi(argv[2]) : 0;
	struct timespec a, b, ca, cb;
	char *volatile p;

	if (delay < 0) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("waiting\n");
		fflush(stdout);
		sigwait(&set, &sig);
	}
	if (delay > 0)
		sleep(delay);
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
	for (long i = 0; i < pairs; i++) {
		p = malloc(64);
		p[0] = (char)i;
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
	printf("elapsed %.6f calls %ld cpu %.6f\n",
	       (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, 2 * pairs,
	       (cb.tv_sec - ca.tv_sec) + (cb.tv_nsec - ca.tv_nsec) / 1e9);
	return 0;
}
