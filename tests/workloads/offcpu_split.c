// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * offcpu_split SECONDS
 *
 * One thread: main -> run -> sleep_phase (nanosleep) | compute_phase (spins),
 * spending 0.70 / 0.30 of its wall time in them until SECONDS have passed.
 * Kept exact over the run, not per round: each phase is owed its share of
 * the time so far and gets only what it is still owed.
 *
 * Prints "pid N" at start and "wall sleep_phase=S compute_phase=S" at the end:
 * the wall seconds each really took.
 */
#include <stdint.h>
#include <time.h>

#include "common.h"

static volatile uint64_t sink;

static NOINLINE double sleep_phase(double secs)
{
	double t0 = wall_now();
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)(secs * 1e9) };

	if (ts.tv_nsec > 0)
		nanosleep(&ts, NULL);
	BARRIER();
	return wall_now() - t0;
}

static NOINLINE double compute_phase(double secs)
{
	double t0 = wall_now(), t;
	uint64_t x = sink;

	do {
		for (int i = 0; i < 2000; i++)
			x = mix_step(x, i);
		t = wall_now();
	} while (t - t0 < secs);
	sink = x;
	return t - t0;
}

static NOINLINE void run(double secs, double used[2])
{
	const double share[2] = { 0.70, 0.30 };
	double owed[2] = { 0, 0 }, end = wall_now() + secs;
	unsigned int seed = 1;

	while (wall_now() < end) {
		/*
		 * Rounds of 5-15 ms: a fixed round beats against the sampler's
		 * fixed period and moves the sampled CPU time by +-30% per run.
		 */
		double round = 0.005 + 0.010 * (rand_r(&seed) / (double)RAND_MAX);

		owed[0] += share[0] * round;
		owed[1] += share[1] * round;
		if (owed[0] > used[0])
			used[0] += sleep_phase(owed[0] - used[0]);
		if (owed[1] > used[1])
			used[1] += compute_phase(owed[1] - used[1]);
	}
	BARRIER();
}

int main(int argc, char **argv)
{
	double used[2] = { 0, 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: offcpu_split SECONDS\n");
		return 2;
	}
	print_pid();
	run(parse_seconds("offcpu_split", argv[1]), used);
	printf("wall sleep_phase=%.3f compute_phase=%.3f\n", used[0], used[1]);
	return 0;
}
