// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * signal_spin SECONDS
 *
 * main -> main_work spins for SECONDS of the thread's CPU time (handlers
 * included: a test's sample floor holds however loaded the host); a SIGPROF
 * every 10 ms of CPU runs on_prof ->
 * handler_work, which spins ~3 ms. Samples in handler_work must unwind
 * through the signal frame (__restore_rt) back into main_work and main.
 */
#include <signal.h>
#include <sys/time.h>

#include "common.h"

static volatile uint64_t sink;

NOINLINE void handler_work(void)
{
	int64_t end = thread_cpu_ns() + 3000000;
	uint64_t x = 3;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 20000; i++)
			x = mix_step(x, 11);
	sink += x;
}

NOINLINE void on_prof(int sig)
{
	(void)sig;
	handler_work();
	BARRIER();
}

NOINLINE void main_work(double secs)
{
	int64_t end = thread_cpu_ns() + (int64_t)(secs * 1e9);
	uint64_t x = 5;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 100000; i++)
			x = mix_step(x, 13);
	sink += x;
	BARRIER();
}

int main(int argc, char **argv)
{
	struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
	struct sigaction sa = { .sa_handler = on_prof };

	if (argc != 2) {
		fprintf(stderr, "usage: signal_spin SECONDS\n");
		return 2;
	}
	print_pid();
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	main_work(parse_seconds("signal_spin", argv[1]));
	BARRIER();
	return 0;
}
