// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap ground truth for allocations libc makes on the program's behalf
 * (issue 25): each function keeps 64 blocks of about 256 KiB until exit.
 *
 *   leak_keep     malloc itself
 *   leak_strdup   strdup of a 256 KiB string (libc's strdup calls malloc)
 *   leak_getline  getline of 256 KiB lines (libc grows its buffer by realloc)
 *   threads       4 threads started and joined: glibc keeps their stacks
 *                 cached (mmap'd by libc itself, not by the program)
 *
 * Prints "NAME BYTES" for each leak (getline's buffers are as big as libc
 * made them), then the threads' count.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N    64
#define SIZE (256 * 1024)

static void *volatile keep[3][N];

static NOINLINE size_t leak_keep(void)
{
	for (int i = 0; i < N; i++) {
		keep[0][i] = malloc(SIZE);
		memset(keep[0][i], 1, 64);
	}
	return (size_t)N * SIZE;
}

static NOINLINE size_t leak_strdup(const char *s)
{
	for (int i = 0; i < N; i++)
		keep[1][i] = strdup(s);
	return (size_t)N * (strlen(s) + 1);
}

static NOINLINE size_t leak_getline(FILE *f)
{
	size_t total = 0;

	for (int i = 0; i < N; i++) {
		char *line = NULL;
		size_t n = 0;

		if (getline(&line, &n, f) < 0)
			exit(2);
		keep[2][i] = line;
		total += n; /* what getline made the buffer */
	}
	return total;
}

static void *idle(void *arg)
{
	return arg;
}

int main(void)
{
	char *s = malloc(SIZE), path[] = "/tmp/libc_leak.XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	size_t a, b, c;

	if (!s || fd < 0)
		return 1;
	memset(s, 'x', SIZE - 1);
	s[SIZE - 1] = '\0';
	f = fdopen(fd, "w+");
	for (int i = 0; i < N; i++)
		fprintf(f, "%s\n", s);
	rewind(f);
	unlink(path);
	a = leak_keep();
	b = leak_strdup(s);
	c = leak_getline(f);
	fclose(f);
	free(s);
	for (int i = 0; i < 4; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, idle, NULL) || pthread_join(t, NULL))
			return 1;
	}
	printf("leak_keep %zu\nleak_strdup %zu\nleak_getline %zu\nthreads 4\n", a, b, c);
	return 0;
}
