// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * syscall_heavy SECONDS
 *
 * main -> do_syscalls, which reads /dev/zero into a 64 KiB buffer in a loop:
 * nearly all of the CPU time is the kernel zeroing user memory, under
 * do_syscalls. Prints "pid N" at start and "reads N" at the end.
 */
#include <fcntl.h>

#include "common.h"

#define BUF_SIZE (64 * 1024)

static char buf[BUF_SIZE];

NOINLINE long do_syscalls(int fd, double end)
{
	long n = 0;
	int i;

	while (wall_now() < end) {
		/* read(2) issued inline: see raw_syscall3 */
		for (i = 0; i < 64; i++, n++) {
			if (raw_syscall3(SYS_read, fd, (long)buf, BUF_SIZE) != BUF_SIZE)
				return -1;
		}
	}
	BARRIER();
	return n;
}

int main(int argc, char **argv)
{
	double secs;
	long n;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: syscall_heavy SECONDS\n");
		return 2;
	}
	secs = parse_seconds("syscall_heavy", argv[1]);
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("syscall_heavy: /dev/zero");
		return 1;
	}
	print_pid();
	n = do_syscalls(fd, wall_now() + secs);
	if (n < 0) {
		perror("syscall_heavy: read");
		return 1;
	}
	printf("reads %ld\n", n);
	close(fd);
	return 0;
}
