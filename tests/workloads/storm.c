// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * storm SECONDS [PARALLEL] [vdso]
 *
 * A storm of short-lived processes: for SECONDS, keeps PARALLEL (default 2)
 * copies of itself running as "storm --child", each a fresh exec that spends
 * 2 ms of CPU in storm_work() called from main() and exits. Built without
 * frame pointers, as most programs are: a sample of a child is walked from
 * its unwind tables, which must be ready within its 2 ms of life.
 * With "vdso" the children spend their 2 ms in storm_clock(), which calls
 * clock_gettime(CLOCK_MONOTONIC) through libc in a loop, as any timing loop
 * does: most of their samples are in the vDSO.
 *
 * Prints "pid N" (its own) first and "spawned N in S s" at the end. Exits 0 when every child exited 0.
 */
#include <limits.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"

NOINLINE static uint64_t storm_work(double secs)
{
	int64_t end = thread_cpu_ns() + (int64_t)(secs * 1e9);
	uint64_t x = 1;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 1000; i++)
			x = mix_step(x, i);
	return x;
}

/* clock_gettime through libc into the vDSO until secs of CPU time are spent */
NOINLINE static uint64_t storm_clock(double secs)
{
	int64_t end = thread_cpu_ns() + (int64_t)(secs * 1e9);
	struct timespec ts;
	uint64_t x = 1;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 100; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			x = mix_step(x, (uint64_t)ts.tv_nsec);
		}
	return x;
}

static pid_t spawn(const char *self, const char *mode)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	return pid;
}

int main(int argc, char **argv)
{
	double secs, start;
	long spawned = 0, failed = 0, running = 0;
	const char *mode = "--child";
	int parallel = 2, status;
	char self[PATH_MAX];
	ssize_t n;

	if (argc == 2 && (!strcmp(argv[1], "--child") || !strcmp(argv[1], "--child-vdso"))) {
		uint64_t x = argv[1][7] ? storm_clock(0.002) : storm_work(0.002);

		BARRIER();
		return x == 42; /* never: keeps x alive */
	}
	if (argc == 4 && !strcmp(argv[3], "vdso")) {
		mode = "--child-vdso";
		argc--;
	}
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: storm SECONDS [PARALLEL] [vdso]\n");
		return 2;
	}
	secs = parse_seconds("storm", argv[1]);
	if (argc == 3 && ((parallel = atoi(argv[2])) < 1 || parallel > 64)) {
		fprintf(stderr, "storm: bad PARALLEL '%s': expected 1-64\n", argv[2]);
		return 2;
	}
	print_pid();
	/* its own path, not /proc/self/exe: the children's comm is "storm" */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	start = wall_now();
	while (wall_now() - start < secs || running) {
		while (running < parallel && wall_now() - start < secs) {
			if (spawn(self, mode) < 0)
				return 1;
			running++;
			spawned++;
		}
		if (wait(&status) < 0)
			break;
		running--;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	printf("spawned %ld in %.2f s\n", spawned, wall_now() - start);
	return failed ? 1 : 0;
}
