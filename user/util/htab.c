/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/htab.h"

/* ---- arena ---- */

#define ARENA_CHUNK (64 * 1024)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	/* max_align_t keeps data suitably aligned for anything */
	max_align_t data[];
};

struct arena {
	struct arena_chunk *head;
};

struct arena *arena__new(void)
{
	return calloc(1, sizeof(struct arena));
}

void arena__free(struct arena *a)
{
	struct arena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

void *arena__alloc(struct arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	size_t chunk;
	void *ret;

	size = (size + 7) & ~(size_t)7;
	if (!size)
		size = 8;
	if (c && c->size - c->used >= size) {
		ret = (char *)c->data + c->used;
		c->used += size;
		return ret;
	}
	chunk = size > ARENA_CHUNK / 4 ? size : ARENA_CHUNK;
	c = malloc(sizeof(*c) + chunk);
	if (!c)
		return NULL;
	c->size = chunk;
	c->used = size;
	/*
	 * A big private chunk goes behind the current one so the current
	 * chunk's free space stays usable for small allocations.
	 */
	if (chunk != ARENA_CHUNK && a->head) {
		c->next = a->head->next;
		a->head->next = c;
	} else {
		c->next = a->head;
		a->head = c;
	}
	return c->data;
}

void *arena__memdup(struct arena *a, const void *src, size_t size)
{
	void *dst = arena__alloc(a, size);

	if (dst && size)
		memcpy(dst, src, size);
	return dst;
}

/* ---- hash ---- */

#define P1 0x9e3779b185ebca87ULL
#define P2 0xc2b2ae3d27d4eb4fULL
#define P3 0x165667b19e3779f9ULL

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

uint64_t htab__hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = P3 ^ (len * P1);
	uint64_t k;
	size_t i;

	for (; len >= 8; p += 8, len -= 8) {
		k = rotl64(read64(p) * P2, 31) * P1;
		h = rotl64(h ^ k, 27) * P1 + P3;
	}
	if (len) {
		k = 0;
		for (i = 0; i < len; i++)
			k |= (uint64_t)p[i] << (8 * i);
		k = rotl64(k * P2, 31) * P1;
		h = rotl64(h ^ k, 27) * P1 + P3;
	}
	/* murmur3 finalizer: every input bit reaches the low bits used as index */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* ---- table ---- */

struct htab {
	struct htab_entry *slots;
	size_t mask; /* nslots - 1 */
	size_t count;
	uint32_t flags;
	struct arena *keys; /* HTAB_COPY_KEYS only */
};

/* Borrowed zero-length keys may be NULL; a slot needs a non-NULL key to be in use. */
static const char empty_key[1];

#define HTAB_MIN_SLOTS 16

static size_t slots_for(size_t n)
{
	size_t s = HTAB_MIN_SLOTS;

	/* keep load factor at or below 3/4 */
	while (s - s / 4 < n) {
		if (s > SIZE_MAX / 2 / sizeof(struct htab_entry))
			return 0;
		s <<= 1;
	}
	return s;
}

struct htab *htab__new(size_t cap_hint, uint32_t flags)
{
	struct htab *h;
	size_t n = slots_for(cap_hint);

	if (!n)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->flags = flags;
	h->slots = calloc(n, sizeof(*h->slots));
	if (!h->slots)
		goto err;
	h->mask = n - 1;
	if (flags & HTAB_COPY_KEYS) {
		h->keys = arena__new();
		if (!h->keys)
			goto err;
	}
	return h;
err:
	free(h->slots);
	free(h);
	return NULL;
}

void htab__free(struct htab *h)
{
	if (!h)
		return;
	arena__free(h->keys);
	free(h->slots);
	free(h);
}

size_t htab__count(const struct htab *h)
{
	return h->count;
}

static inline int entry_matches(const struct htab_entry *e, const void *key, size_t len,
				uint64_t hash)
{
	return e->hash == hash && e->klen == len && (len == 0 || !memcmp(e->key, key, len));
}

struct htab_entry *htab__find(const struct htab *h, const void *key, size_t len, uint64_t hash)
{
	size_t i = hash & h->mask;
	struct htab_entry *e;

	for (;;) {
		e = &h->slots[i];
		if (!e->key)
			return NULL;
		if (entry_matches(e, key, len, hash))
			return e;
		i = (i + 1) & h->mask;
	}
}

static int grow(struct htab *h)
{
	size_t n = (h->mask + 1) * 2, i, j;
	struct htab_entry *slots;

	if (n > SIZE_MAX / sizeof(*slots))
		return -ENOMEM;
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i <= h->mask; i++) {
		if (!h->slots[i].key)
			continue;
		j = h->slots[i].hash & (n - 1);
		while (slots[j].key)
			j = (j + 1) & (n - 1);
		slots[j] = h->slots[i];
	}
	free(h->slots);
	h->slots = slots;
	h->mask = n - 1;
	return 0;
}

int htab__upsert(struct htab *h, const void *key, size_t len, uint64_t hash,
		 struct htab_entry **entry)
{
	struct htab_entry *e;
	const void *stored;
	size_t i;
	int err;

	if (len > UINT32_MAX)
		return -E2BIG;
	e = htab__find(h, key, len, hash);
	if (e) {
		*entry = e;
		return 0;
	}
	if (h->count + 1 > (h->mask + 1) - (h->mask + 1) / 4) {
		err = grow(h);
		if (err)
			return err;
	}
	if (h->flags & HTAB_COPY_KEYS) {
		stored = arena__memdup(h->keys, key, len);
		if (!stored)
			return -ENOMEM;
	} else {
		stored = len ? key : empty_key;
	}
	i = hash & h->mask;
	while (h->slots[i].key)
		i = (i + 1) & h->mask;
	e = &h->slots[i];
	e->key = stored;
	e->hash = hash;
	e->klen = (uint32_t)len;
	e->val = 0;
	h->count++;
	*entry = e;
	return 1;
}

int htab__delete(struct htab *h, const void *key, size_t len, uint64_t hash)
{
	struct htab_entry *e = htab__find(h, key, len, hash);
	size_t i, j, home;

	if (!e)
		return -ENOENT;
	/* backward-shift deletion: no tombstones, probe chains stay short */
	i = (size_t)(e - h->slots);
	j = i;
	for (;;) {
		j = (j + 1) & h->mask;
		if (!h->slots[j].key)
			break;
		home = h->slots[j].hash & h->mask;
		/* move j into the hole at i unless its home lies cyclically in (i, j] */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		h->slots[i] = h->slots[j];
		i = j;
	}
	memset(&h->slots[i], 0, sizeof(h->slots[i]));
	h->count--;
	return 0;
}

struct htab_entry *htab__next(const struct htab *h, size_t *iter)
{
	size_t i;

	for (i = *iter; i <= h->mask; i++) {
		if (h->slots[i].key) {
			*iter = i + 1;
			return &h->slots[i];
		}
	}
	*iter = i;
	return NULL;
}
