// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * many_threads N
 *
 * A process of N threads: N - 3 idle ones blocked in read() on a pipe, two
 * busy ones named "busy-1" and "busy-2" spinning in busy_spin(), and main
 * waiting for them; prints "pid PID" once all exist and runs until killed.
 * `bpfprof dump` must show every thread (it used to stop at 4096 without a
 * word), the busy two included, whatever their place in /proc's list.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

static int pipefd[2];
static volatile uint64_t sink;

static void *idle(void *arg)
{
	char c;

	(void)arg;
	while (read(pipefd[0], &c, 1) < 0)
		;
	return NULL;
}

NOINLINE void busy_spin(void)
{
	uint64_t x = 1;

	for (;;) {
		for (int i = 0; i < 100000; i++)
			x = mix_step(x, 3);
		sink = x;
	}
}

static void *busy(void *arg)
{
	(void)arg;
	busy_spin();
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc == 2 ? strtol(argv[1], NULL, 10) : 0;
	pthread_attr_t small;
	pthread_t t;

	if (n < 3 || n > 100000) {
		fprintf(stderr, "usage: many_threads N (3..100000)\n");
		return 2;
	}
	if (pipe(pipefd))
		return 1;
	pthread_attr_init(&small);
	pthread_attr_setstacksize(&small, 64 << 10);
	for (long i = 0; i < n - 3; i++)
		if (pthread_create(&t, &small, idle, NULL)) {
			fprintf(stderr, "many_threads: thread %ld: %s\n", i, strerror(errno));
			return 1;
		}
	for (int i = 1; i <= 2; i++) {
		char name[16];

		if (pthread_create(&t, NULL, busy, NULL))
			return 1;
		snprintf(name, sizeof(name), "busy-%d", i);
		pthread_setname_np(t, name);
	}
	print_pid();
	pthread_join(t, NULL);
	return 0;
}
