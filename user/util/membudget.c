// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "util/membudget.h"

#define MAX_CACHES 8

static uint64_t budget = MEMBUDGET_DEFAULT;
static struct membudget_cache *caches[MAX_CACHES];
static unsigned int ncaches;
static size_t total;
static int evicting; /* an evict callback's own uncharges must not recurse */

void membudget__set(uint64_t bytes)
{
	budget = bytes ? bytes : MEMBUDGET_DEFAULT;
}

uint64_t membudget__get(void)
{
	return budget;
}

void membudget__add(struct membudget_cache *c)
{
	if (ncaches < MAX_CACHES)
		caches[ncaches++] = c;
}

void membudget__remove(struct membudget_cache *c)
{
	for (unsigned int i = 0; i < ncaches; i++) {
		if (caches[i] != c)
			continue;
		total -= c->used;
		caches[i] = caches[--ncaches];
		return;
	}
}

static void enforce(void)
{
	size_t target = budget - budget / 8;

	evicting = 1;
	/* the biggest holder first: it is the one that grew */
	while (total > target) {
		struct membudget_cache *big = NULL;

		for (unsigned int i = 0; i < ncaches; i++)
			if (caches[i]->evict && caches[i]->used &&
			    (!big || caches[i]->used > big->used))
				big = caches[i];
		if (!big || !big->evict(big->ctx, total - target))
			break;
	}
	evicting = 0;
}

void membudget__charge(struct membudget_cache *c, long long delta)
{
	if (delta < 0 && (size_t)-delta > c->used)
		delta = -(long long)c->used;
	c->used += delta;
	total += delta;
	if (c->used > c->peak)
		c->peak = c->used;
	if (delta > 0 && total > budget && !evicting)
		enforce();
}

size_t membudget__used(void)
{
	return total;
}

uint64_t membudget__evicted(void)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < ncaches; i++)
		n += caches[i]->evicted;
	return n;
}
