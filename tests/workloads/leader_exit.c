// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * leader_exit SECONDS
 *
 * Forks a child whose main thread starts a worker and then ends itself
 * (pthread_exit): the process lives on in the worker, which spins in
 * work_after_leader for SECONDS of its CPU time and then ends the process.
 * The parent spins in work_parent for as long, waits for the child, and
 * exits 0 when it exited 0. A profiler following the parent's children
 * must keep the child's samples after its thread group leader's exit: the
 * process is not gone until its last thread is.
 *
 * Prints "pid N" (its own), then "child PID".
 */
#include <pthread.h>
#include <sys/wait.h>

#include "common.h"

static double secs;

static NOINLINE uint64_t spin(double s)
{
	int64_t end = thread_cpu_ns() + (int64_t)(s * 1e9);
	uint64_t x = 1;

	while (thread_cpu_ns() < end)
		for (int i = 0; i < 10000; i++)
			x = mix_step(x, (uint64_t)i);
	return x;
}

/* bodies that differ: -O2 would fold identical ones into one symbol */
static NOINLINE uint64_t work_after_leader(void)
{
	uint64_t x = spin(secs) * 3;

	BARRIER();
	return x;
}

static NOINLINE uint64_t work_parent(void)
{
	uint64_t x = spin(secs) + 7;

	BARRIER();
	return x;
}

static void *worker(void *arg)
{
	(void)arg;
	work_after_leader();
	exit(0); /* the last thread: the process ends here */
}

int main(int argc, char **argv)
{
	pthread_t th;
	int status;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: leader_exit SECONDS\n");
		return 2;
	}
	secs = parse_seconds("leader_exit", argv[1]);
	print_pid();
	pid = fork();
	if (pid < 0) {
		perror("leader_exit: fork");
		return 1;
	}
	if (pid == 0) {
		if (pthread_create(&th, NULL, worker, NULL)) {
			fprintf(stderr, "leader_exit: pthread_create failed\n");
			_exit(1);
		}
		pthread_exit(NULL);
	}
	printf("child %d\n", (int)pid);
	fflush(stdout);
	work_parent();
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "leader_exit: child failed\n");
		return 1;
	}
	return 0;
}
