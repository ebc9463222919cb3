/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * membudget: one memory budget for the agent's caches of what targets
 * control (Python line tables today; symbols and process state report what
 * they hold). Each cache charges what it keeps and can give memory back,
 * least recently used first; when the total passes the budget, caches are
 * asked in turn until it is back under 7/8 of it. Every eviction is counted.
 * (The unwind-row budget, --unwind-mem, is separate: BPF map rows, not heap.)
 */
#ifndef BPFPROF_MEMBUDGET_H
#define BPFPROF_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

#define MEMBUDGET_DEFAULT (128ULL << 20)

struct membudget_cache {
	const char *name;
	/* Free at least want bytes, least recently used first; returns bytes freed. */
	size_t (*evict)(void *ctx, size_t want);
	void *ctx;
	size_t used;	  /* bytes held now (maintained by membudget__charge) */
	size_t peak;	  /* most ever held */
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

#endif
