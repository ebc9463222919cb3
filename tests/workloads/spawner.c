// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * spawner N SECONDS
 *
 * Starts N copies of cpu_split SECONDS (found beside this binary) and one
 * short-lived cpu_split SECONDS/2, then waits for all of them: a profile of the
 * spawner must follow its children, and symbolize the short one after it has
 * exited.
 *
 * Prints "pid N" (its own), then "child PID" for each long child and
 * "short PID" for the short one. The children's own output goes to /dev/null.
 * Exits 0 when every child exited 0.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/wait.h>

#include "common.h"

static pid_t start_child(const char *path, double secs)
{
	char arg[64];
	pid_t pid;
	int fd;

	snprintf(arg, sizeof(arg), "%.3f", secs);
	pid = fork();
	if (pid != 0)
		return pid;

	fd = open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	execl(path, "cpu_split", arg, (char *)NULL);
	fprintf(stderr, "spawner: exec %s: %s\n", path, strerror(errno));
	_exit(127);
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX], path[PATH_MAX + 16];
	int n, i, status, failed = 0;
	ssize_t len;
	double secs;
	char *end;
	pid_t pid;
	long v;

	if (argc != 3) {
		fprintf(stderr, "usage: spawner N SECONDS\n");
		return 2;
	}
	errno = 0;
	v = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || v < 0 || v > 1024) {
		fprintf(stderr, "spawner: bad N '%s': expected an integer in [0, 1024]\n", argv[1]);
		return 2;
	}
	n = (int)v;
	secs = parse_seconds("spawner", argv[2]);

	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0) {
		perror("spawner: /proc/self/exe");
		return 1;
	}
	exe[len] = '\0';
	snprintf(path, sizeof(path), "%s/cpu_split", dirname(exe));

	print_pid();
	for (i = 0; i < n; i++) {
		pid = start_child(path, secs);
		if (pid < 0) {
			perror("spawner: fork");
			return 1;
		}
		printf("child %d\n", (int)pid);
	}
	pid = start_child(path, secs / 2);
	if (pid < 0) {
		perror("spawner: fork");
		return 1;
	}
	printf("short %d\n", (int)pid);
	fflush(stdout);

	while ((pid = wait(&status)) > 0) {
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "spawner: child %d failed (status 0x%x)\n", (int)pid,
				status);
			failed = 1;
		}
	}
	return failed;
}
