// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * vfork_wait SECONDS
 *
 * A thread that vforks a child which sleeps SECONDS before it exits: the
 * thread waits in vfork() all that time, in a wait no signal but a fatal one
 * ends (so no ptrace stop either). Prints "pid PID" (the process) once the
 * child runs; main waits in pthread_join. `bpfprof dump` must show the
 * thread waiting for its child, at once, not stop the process until the
 * child exits.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>

#include "common.h"

static double secs;
static char line[64];
static int len;

static void *spawner(void *arg)
{
	struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };

	(void)arg;
	if (vfork() == 0) {
		/* the child borrows the parent's memory: raw syscalls only */
		syscall(SYS_write, 1, line, len);
		syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc != 2) {
		fprintf(stderr, "usage: vfork_wait SECONDS\n");
		return 2;
	}
	secs = parse_seconds("vfork_wait", argv[1]);
	len = snprintf(line, sizeof(line), "pid %d\n", (int)getpid());
	if (pthread_create(&t, NULL, spawner, NULL))
		return 1;
	pthread_join(t, NULL);
	return 0;
}
