// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * churn_hold MIB BLOCK_KIB ROUNDS: holds exactly MIB MiB in blocks of
 * BLOCK_KIB KiB (hold_set), then replaces a random block ROUNDS times
 * (replace: free it, allocate another of the same size), so that what is in
 * use never moves from MIB MiB; then frees everything. The true peak is
 * MIB MiB (plus the pointer array): the ground truth for an unbiased
 * peak_space on a churn-heavy program (issue 25; heaptrack reads 100.08
 * MiB for 100 MiB).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static NOINLINE void *hold_one(size_t size)
{
	char *p = malloc(size);

	if (p)
		p[0] = 1;
	return p;
}

static NOINLINE void *replace(void *old, size_t size)
{
	free(old);
	return hold_one(size);
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 100, kib = argc > 2 ? atol(argv[2]) : 64;
	long rounds = argc > 3 ? atol(argv[3]) : 1000000;
	size_t size = (size_t)kib * 1024, n = (size_t)mib * 1024 / (size_t)kib;
	void **blocks = malloc(n * sizeof(*blocks));
	uint64_t x = 88172645463325252ULL;

	if (!blocks)
		return 1;
	for (size_t i = 0; i < n; i++)
		blocks[i] = hold_one(size);
	for (long r = 0; r < rounds; r++) {
		size_t i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (size_t)(x % n);
		blocks[i] = replace(blocks[i], size);
	}
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	printf("churn_hold %ld MiB in %zu blocks of %ld KiB, %ld replaced\n", mib, n, kib, rounds);
	return 0;
}
