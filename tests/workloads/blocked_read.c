// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * blocked_read
 *
 * A hung program for bpfprof dump: the main thread blocks in read() on a
 * pipe nobody writes, inside wait_for_input(); a thread named "napper"
 * sleeps in nanosleep() inside nap_forever(); a thread named "spinner"
 * spins in spin_forever(). Prints "pid N" once all three are in place;
 * runs until killed.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

static volatile uint64_t sink;
static volatile int started;

static NOINLINE void *spin_forever(void *arg)
{
	uint64_t x = 1;

	(void)arg;
	pthread_setname_np(pthread_self(), "spinner");
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		for (int i = 0; i < 100000; i++)
			x = mix_step(x, i);
		sink = x;
	}
	return NULL;
}

static NOINLINE void *nap_forever(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "napper");
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		struct timespec ts = { .tv_sec = 100 };

		nanosleep(&ts, NULL);
		BARRIER();
	}
	return NULL;
}

static NOINLINE long wait_for_input(int fd)
{
	char buf[64];
	long n = read(fd, buf, sizeof(buf));

	BARRIER();
	return n;
}

int main(void)
{
	pthread_t a, b;
	int p[2];

	if (pipe(p) || pthread_create(&a, NULL, spin_forever, NULL) ||
	    pthread_create(&b, NULL, nap_forever, NULL))
		return 1;
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < 2)
		usleep(1000);
	print_pid();
	for (;;)
		wait_for_input(p[0]);
	return 0;
}
