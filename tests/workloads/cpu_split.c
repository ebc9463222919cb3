// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cpu_split [--wait-stdin] SECONDS
 *
 * One thread: main -> dispatch -> work_a | work_b | work_c, spending thread CPU
 * time in the ratio 0.50 / 0.30 / 0.20 until SECONDS of wall time have passed.
 *
 * Prints "pid N" at start. With --wait-stdin it then waits for a line (or EOF)
 * on stdin before working, so a test can attach first. At the end it prints
 * "cpu work_a=S work_b=S work_c=S", the thread CPU seconds each really got.
 *
 * The split is kept exact over the run, not just per round: each function is
 * owed its share of every round so far and is given only what it is still
 * owed, so the overshoot of one time check is paid back in the next round.
 */
#include <string.h>

#include "common.h"

/* ~10-20 us of work between two clock reads: a syscall every chunk costs ~2%. */
#define CHECK_EVERY 16384

static volatile uint64_t sink;

/* Spins for budget_ns of thread CPU time, returns the time really spent. */
static ALWAYS_INLINE int64_t burn(int64_t budget_ns, uint64_t k)
{
	int64_t start = thread_cpu_ns(), now;
	uint64_t x = k;
	int i;

	do {
		for (i = 0; i < CHECK_EVERY; i++)
			x = mix_step(x, k);
		now = thread_cpu_ns();
	} while (now - start < budget_ns);
	sink += x;
	return now - start;
}

/* Different constants so that no pass can decide the three are one function. */
NOINLINE int64_t work_a(int64_t budget_ns)
{
	return burn(budget_ns, 0x9e3779b97f4a7c15ULL);
}

NOINLINE int64_t work_b(int64_t budget_ns)
{
	return burn(budget_ns, 0xbf58476d1ce4e5b9ULL);
}

NOINLINE int64_t work_c(int64_t budget_ns)
{
	return burn(budget_ns, 0x94d049bb133111ebULL);
}

NOINLINE int64_t dispatch(int which, int64_t budget_ns)
{
	int64_t used;

	switch (which) {
	case 0:
		used = work_a(budget_ns);
		break;
	case 1:
		used = work_b(budget_ns);
		break;
	default:
		used = work_c(budget_ns);
		break;
	}
	BARRIER();
	return used;
}

static void usage(void)
{
	fprintf(stderr, "usage: cpu_split [--wait-stdin] SECONDS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const int64_t share_ns[3] = { 5000000, 3000000, 2000000 };
	int64_t used[3] = { 0, 0, 0 };
	int wait_stdin = 0;
	double secs, end;
	int64_t round;
	char line[256];
	int i;

	if (argc == 3 && !strcmp(argv[1], "--wait-stdin"))
		wait_stdin = 1;
	else if (argc != 2)
		usage();
	secs = parse_seconds("cpu_split", argv[argc - 1]);

	print_pid();
	if (wait_stdin && !fgets(line, sizeof(line), stdin) && ferror(stdin)) {
		perror("cpu_split: stdin");
		return 1;
	}

	end = wall_now() + secs;
	for (round = 1; wall_now() < end; round++) {
		for (i = 0; i < 3; i++) {
			int64_t owed = share_ns[i] * round - used[i];

			if (owed > 0)
				used[i] += dispatch(i, owed);
		}
	}
	printf("cpu work_a=%.3f work_b=%.3f work_c=%.3f\n", used[0] / 1e9, used[1] / 1e9,
	       used[2] / 1e9);
	return 0;
}
