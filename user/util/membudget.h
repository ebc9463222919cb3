/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * membudget: one memory budget for the agent's caches of what targets
 * control (Python line tables, ELF symbols, perf maps, process state, ...).
 * Each cache charges what it keeps; a cache that can give memory back (least
 * recently used first) has an evict callback, one that cannot (what the
 * profile itself refers to) only reports. When the total passes the budget,
 * evictable caches are asked, biggest first, until it is back under 7/8 of
 * it. Every eviction is counted.
 * (The unwind-row budget, --unwind-mem, is separate: BPF map rows, not heap.)
 */
#ifndef BPFPROF_MEMBUDGET_H
#define BPFPROF_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

#define MEMBUDGET_DEFAULT (128ULL << 20)

struct membudget_cache {
	const char *name;
	/*
	 * Free at least want bytes, least recently used first; returns bytes
	 * freed. NULL: the cache only reports what it holds.
	 */
	size_t (*evict)(void *ctx, size_t want);
	void *ctx;
	size_t used;	  /* bytes held now (maintained by membudget__charge) */
	size_t peak;	  /* most ever held */
	size_t entries;	  /* items held now (the cache keeps it, for -vv) */
	uint64_t evicted; /* items given back (counted by the cache's evict) */
};

/* The budget in bytes (0: the default). */
void membudget__set(uint64_t bytes);
uint64_t membudget__get(void);
/* A cache joins (c stays the caller's until membudget__remove). */
void membudget__add(struct membudget_cache *c);
void membudget__remove(struct membudget_cache *c);
/* c now holds delta more (or fewer) bytes; over budget, caches are asked to evict. */
void membudget__charge(struct membudget_cache *c, long long delta);
/* Bytes all caches hold, and items they evicted. */
size_t membudget__used(void);
uint64_t membudget__evicted(void);
/*
 * One line, "NAME BYTES/ENTRIES[ (N evicted)], ..." for every cache (-vv),
 * or with evicted_only, "NAME N, ..." for the caches that evicted anything.
 */
void membudget__report(char *buf, size_t len, int evicted_only);

#endif
