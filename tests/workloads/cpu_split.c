// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cpu_split [--wait-stdin] [--cpu] SECONDS
 *
 * One thread: main -> dispatch -> work_a | work_b | work_c, spending thread CPU
 * time in the ratio 0.50 / 0.30 / 0.20 until SECONDS of wall time have passed,
 * or with --cpu until it had SECONDS of CPU time (a test's sample floor then
 * holds on a loaded host).
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

#include "split.h"

static void usage(void)
{
	fprintf(stderr, "usage: cpu_split [--wait-stdin] [--cpu] SECONDS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int wait_stdin = 0, on_cpu = 0, i;
	char line[256];
	double secs;

	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--wait-stdin"))
			wait_stdin = 1;
		else if (!strcmp(argv[i], "--cpu"))
			on_cpu = 1;
		else
			usage();
	}
	if (argc < 2)
		usage();
	secs = parse_seconds("cpu_split", argv[argc - 1]);

	print_pid();
	if (wait_stdin && !fgets(line, sizeof(line), stdin) && ferror(stdin)) {
		perror("cpu_split: stdin");
		return 1;
	}
	split_run_until(secs, on_cpu);
	return 0;
}
