// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/stacks.h"
#include "util/htab.h"
#include "util/membudget.h"

struct stacks {
	struct htab *tab; /* key -> index into vals */
	struct stack_vals *vals;
	size_t n, cap;
	size_t bytes; /* charged to the memory budget's "stacks" (reported, never evicted) */
};

/*
 * The stacks are the profile itself, not a cache: reported in the budget
 * (so the caches give way to them), never evicted, and bounded: once they
 * hold half the budget a new distinct stack is refused (its sample counted
 * lost, "table full"), so that no target can grow the agent without end. A key costs its bytes in
 * the table's arena, its values, and about two hash slots.
 */
static struct membudget_cache mb = { .name = "stacks" };
static unsigned int ntables;
static uint64_t refused;

static size_t stack_bytes(const struct stack_key *key)
{
	return stack_key__size(key) + sizeof(struct stack_vals) + 2 * sizeof(struct htab_entry);
}

struct stacks *stacks__new(void)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->tab = htab__new(4096, HTAB_COPY_KEYS);
	if (!s->tab) {
		free(s);
		return NULL;
	}
	if (!ntables++)
		membudget__add(&mb);
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	membudget__charge(&mb, -(long long)s->bytes);
	mb.entries -= s->n;
	if (!--ntables)
		membudget__remove(&mb);
	htab__free(s->tab);
	free(s->vals);
	free(s);
}

int stacks__intern(struct stacks *s, const struct stack_key *key, size_t *idx)
{
	size_t len = stack_key__size(key);
	struct htab_entry *e;
	int ret;

	if (mb.used + stack_bytes(key) > membudget__get() / 2) {
		/* full: a stack already counted still counts, a new one is refused */
		e = htab__find(s->tab, key, len, htab__hash(key, len));
		if (!e) {
			refused++;
			return -ENOSPC;
		}
		*idx = e->val;
		return 0;
	}
	ret = htab__upsert(s->tab, key, len, htab__hash(key, len), &e);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 4096;
			struct stack_vals *v = realloc(s->vals, cap * sizeof(*v));

			if (!v) {
				htab__delete(s->tab, key, len, e->hash);
				return -ENOMEM;
			}
			s->vals = v;
			s->cap = cap;
		}
		e->val = s->n;
		memset(&s->vals[s->n], 0, sizeof(s->vals[s->n]));
		s->n++;
		s->bytes += stack_bytes(key);
		mb.entries++;
		membudget__charge(&mb, stack_bytes(key));
	}
	*idx = e->val;
	return 0;
}

struct stack_vals *stacks__vals(struct stacks *s, size_t idx)
{
	return idx < s->n ? &s->vals[idx] : NULL;
}

int stacks__add(struct stacks *s, const struct stack_key *key, const int64_t *deltas, uint32_t n)
{
	size_t idx;
	int ret = stacks__intern(s, key, &idx);

	if (ret)
		return ret;
	if (n > STACK_MAX_VALUES)
		n = STACK_MAX_VALUES;
	for (uint32_t i = 0; i < n; i++)
		s->vals[idx].v[i] += deltas[i];
	return 0;
}

size_t stacks__count(const struct stacks *s)
{
	return s->n;
}

size_t stacks__index(const struct stacks *s, const struct stack_vals *vals)
{
	return (size_t)(vals - s->vals);
}

const struct stack_key *stacks__next(const struct stacks *s, size_t *iter,
				     const struct stack_vals **vals)
{
	struct htab_entry *e = htab__next(s->tab, iter);

	if (!e)
		return NULL;
	*vals = &s->vals[e->val];
	return e->key;
}

uint64_t stacks__refused(void)
{
	return refused;
}
