// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pingpong [ROUNDS]
 *
 * Two threads pass one byte back and forth through two pipes ROUNDS times
 * (default 200000): every round is two blocking reads, so two context
 * switches or more. The off-CPU benchmark: prints "elapsed S rounds N".
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

static int ab[2], ba[2];
static long rounds = 200000;

static void *pong(void *arg)
{
	char c;

	(void)arg;
	for (long i = 0; i < rounds; i++)
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			exit(1);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	double t0;
	char c = 'x';

	if (argc > 1 && (rounds = strtol(argv[1], NULL, 10)) <= 0) {
		fprintf(stderr, "pingpong: bad ROUNDS '%s'\n", argv[1]);
		return 2;
	}
	if (pipe(ab) || pipe(ba) || pthread_create(&t, NULL, pong, NULL))
		return 1;
	t0 = wall_now();
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	pthread_join(t, NULL);
	printf("elapsed %.3f rounds %ld\n", wall_now() - t0, rounds);
	return 0;
}
