// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * many_live N SIZE: allocates N blocks of SIZE bytes in hold_many() and
 * keeps every one until exit, a few at a time freed and allocated again in
 * churn_some() on the way (so frees of sampled blocks are looked up among
 * many). Ground truth for `--alloc-rate 1` at any number of live blocks
 * (issue 25): in use at the end is exactly N * SIZE at hold_many.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static NOINLINE void churn_some(void **blocks, long n, size_t size)
{
	for (long i = 0; i < n; i += 97) {
		free(blocks[i]);
		blocks[i] = NULL;
	}
	for (long i = 0; i < n; i += 97)
		blocks[i] = malloc(size);
}

static NOINLINE void **hold_many(long n, size_t size)
{
	void **blocks = calloc(n, sizeof(*blocks));

	for (long i = 0; blocks && i < n; i++)
		blocks[i] = malloc(size);
	return blocks;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
	void **blocks = hold_many(n, size);

	if (!blocks)
		return 1;
	churn_some(blocks, n, size);
	printf("many_live %ld x %zu\n", n, size);
	return 0; /* everything still held */
}
