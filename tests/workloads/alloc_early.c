// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap ground truth for allocators and early probes: leak_early() leaks
 * 16 MiB in 64 blocks of 256 KiB as the first thing main does, then the
 * program exits at once (no sleep: the whole run is a few milliseconds).
 * `alloc_early MS`: it waits MS milliseconds first (a process the agent
 * must find and probe while it runs).
 * Run under LD_PRELOAD=libtcmalloc_minimal.so.4, libjemalloc.so.2 or
 * libmimalloc.so.2, the blocks come from that allocator, which maps its
 * own arenas for them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define LEAK_BLOCKS 64
#define LEAK_SIZE   (256 * 1024)

static void *volatile keep[LEAK_BLOCKS];

static NOINLINE void leak_early(void)
{
	for (int i = 0; i < LEAK_BLOCKS; i++) {
		keep[i] = malloc(LEAK_SIZE);
		if (keep[i])
			memset(keep[i], 1, 64);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		long ms = atol(argv[1]);
		struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };

		nanosleep(&ts, NULL);
	}
	leak_early();
	printf("leaked %d x %d bytes\n", LEAK_BLOCKS, LEAK_SIZE);
	return 0;
}
