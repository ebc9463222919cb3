// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * mp_server NWORKERS SECONDS [MAX_US]
 *
 * A multi-process server in miniature: NWORKERS forked worker processes, each
 * answering requests on a socketpair with a short burst of CPU (MAX_US/10 to
 * MAX_US, varied; default 500), and the parent as the client that keeps one request in flight per
 * worker for SECONDS. Workers sleep between requests, so they are woken (often
 * on an idle CPU) thousands of times a second: what a server looks like to a
 * profiler's CPU time.
 *
 * Prints "workers PID,PID,..." and waits for a line on stdin before it starts
 * (the workers are blocked, using no CPU); prints "done" when the SECONDS are
 * over (the workers blocked again) and waits for stdin to close before it ends
 * them. Between the two lines only the workers' requests ran in them: their
 * /proc/PID/schedstat read before and after is the kernel's own account of
 * what a profile of them should show.
 */
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common.h"

#define MAX_WORKERS 16

NOINLINE static uint64_t handle_request(uint32_t us)
{
	double end = wall_now() + us / 1e6;
	uint64_t x = us;

	while (wall_now() < end)
		for (int i = 0; i < 200; i++)
			x = mix_step(x, i);
	return x;
}

NOINLINE static void serve(int fd)
{
	uint32_t us;
	uint64_t x;

	while (read(fd, &us, sizeof(us)) == sizeof(us)) {
		x = handle_request(us);
		if (write(fd, &x, sizeof(x)) != sizeof(x))
			break;
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	int fds[MAX_WORKERS], nworkers;
	pid_t pids[MAX_WORKERS];
	uint32_t seed = 1, max_us = 500;
	char line[64];
	double end;

	if (argc < 3 || argc > 4 || (nworkers = atoi(argv[1])) < 1 || nworkers > MAX_WORKERS ||
	    (argc == 4 && (max_us = atoi(argv[3])) < 10)) {
		fprintf(stderr, "usage: mp_server NWORKERS(1-%d) SECONDS [MAX_US(>=10)]\n",
			MAX_WORKERS);
		return 2;
	}
	end = parse_seconds("mp_server", argv[2]);
	for (int i = 0; i < nworkers; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			return 1;
		pids[i] = fork();
		if (pids[i] < 0)
			return 1;
		if (pids[i] == 0) {
			/* the earlier workers' sockets too, or they would never see EOF */
			for (int j = 0; j < i; j++)
				close(fds[j]);
			close(sv[0]);
			serve(sv[1]);
		}
		close(sv[1]);
		fds[i] = sv[0];
	}
	printf("workers");
	for (int i = 0; i < nworkers; i++)
		printf("%c%d", i ? ',' : ' ', (int)pids[i]);
	printf("\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	end += wall_now();
	while (wall_now() < end) {
		for (int i = 0; i < nworkers; i++) {
			uint32_t us;

			seed = seed * 1103515245 + 12345;
			us = max_us / 10 + (seed >> 16) % (max_us - max_us / 10 + 1);
			if (write(fds[i], &us, sizeof(us)) != sizeof(us))
				return 1;
		}
		for (int i = 0; i < nworkers; i++) {
			uint64_t x;

			if (read(fds[i], &x, sizeof(x)) != sizeof(x))
				return 1;
		}
	}
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	for (int i = 0; i < nworkers; i++) {
		close(fds[i]);
		waitpid(pids[i], NULL, 0);
	}
	return 0;
}
