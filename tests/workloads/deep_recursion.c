// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * deep_recursion [--cpu] DEPTH SECONDS
 *
 * main -> recurse x DEPTH -> spin: a user stack deeper than the unwinder's
 * frame limit, which must be reported as truncated rather than made up.
 * Spins for SECONDS of wall time, or with --cpu of its own CPU time: a test
 * that wants a number of samples gets them however loaded the host is.
 */
#include <string.h>

#include "common.h"

static volatile uint64_t sink;
static int on_cpu_time;

static double now(void)
{
	return on_cpu_time ? thread_cpu_ns() / 1e9 : wall_now();
}

NOINLINE void spin(double secs)
{
	double end = now() + secs;
	uint64_t x = 1;

	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x = mix_step(x, 7);
	sink = x;
}

NOINLINE int recurse(int depth, double secs)
{
	volatile char pad[32];

	pad[0] = (char)depth;
	if (depth <= 1)
		spin(secs);
	else
		recurse(depth - 1, secs);
	BARRIER(); /* not a tail call: every level keeps its frame */
	return pad[0];
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--cpu")) {
		on_cpu_time = 1;
		argv++;
		argc--;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: deep_recursion [--cpu] DEPTH SECONDS\n");
		return 2;
	}
	print_pid();
	recurse(atoi(argv[1]), parse_seconds("deep_recursion", argv[2]));
	return 0;
}
