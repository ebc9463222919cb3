/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Growable arrays: the one doubling realloc every table in user/ uses. */
#ifndef BPFPROF_ARRAY_H
#define BPFPROF_ARRAY_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Make room for element n of *arr (elem bytes each, *cap allocated): doubles
 * the capacity, starting at first. Returns 0, or -ENOMEM (*arr unchanged).
 */
static inline int array_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first)
{
	size_t ncap;
	void *tmp;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : first;
	if (ncap <= n)
		ncap = n + 1;
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	tmp = realloc(*arr, ncap * elem);
	if (!tmp)
		return -ENOMEM;
	*arr = tmp;
	*cap = ncap;
	return 0;
}

#endif
