// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>

#include "util/membudget.h"

#define MAX_CACHES 16

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

	unsigned int dry = 0; /* caches that had nothing more to give */

	evicting = 1;
	/* the biggest holder first: it is the one that grew */
	while (total > target) {
		struct membudget_cache *big = NULL;
		unsigned int bi = 0;

		for (unsigned int i = 0; i < ncaches; i++)
			if (caches[i]->evict && caches[i]->used && !(dry & (1u << i)) &&
			    (!big || caches[i]->used > big->used))
				big = caches[i], bi = i;
		if (!big)
			break;
		if (!big->evict(big->ctx, total - target))
			dry |= 1u << bi;
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

static int human(char *buf, size_t len, size_t bytes)
{
	if (bytes >= 10 << 20)
		return snprintf(buf, len, "%.0f MiB", bytes / 1048576.0);
	if (bytes >= 1 << 20)
		return snprintf(buf, len, "%.1f MiB", bytes / 1048576.0);
	return snprintf(buf, len, "%.0f KiB", bytes / 1024.0);
}

void membudget__report(char *buf, size_t len, int evicted_only)
{
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned int i = 0; i < ncaches && n < len; i++) {
		const struct membudget_cache *c = caches[i];
		const char *sep = n ? ", " : "";

		if (evicted_only) {
			if (c->evicted)
				n += snprintf(buf + n, len - n, "%s%s %llu", sep, c->name,
					      (unsigned long long)c->evicted);
			continue;
		}
		n += snprintf(buf + n, len - n, "%s%s ", sep, c->name);
		if (n < len)
			n += human(buf + n, len - n, c->used);
		if (n < len)
			n += snprintf(buf + n, len - n, "/%zu", c->entries);
		if (n < len && c->evicted)
			n += snprintf(buf + n, len - n, " (%llu evicted)",
				      (unsigned long long)c->evicted);
	}
}
