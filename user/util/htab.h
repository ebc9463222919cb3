/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Generic open-addressing hash table (linear probing, power-of-two size):
 * variable-length byte keys with a caller-supplied 64-bit hash, each mapped to
 * a 64-bit value. Used for string interning, frame/mapping dedup and stack
 * aggregation, so it has no opinion about what a key means.
 *
 * Keys are either copied into memory the table owns (HTAB_COPY_KEYS; the copy
 * stays at the same address until htab__free, so it can serve as an interned
 * string) or borrowed (the caller keeps them alive and unchanged).
 *
 * Also here: struct arena, a bump allocator for many small objects freed
 * together.
 */
#ifndef BPFPROF_HTAB_H
#define BPFPROF_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct arena;

struct arena *arena__new(void);
void arena__free(struct arena *a);
/* 8-byte aligned, uninitialized; NULL on allocation failure. */
void *arena__alloc(struct arena *a, size_t size);
void *arena__memdup(struct arena *a, const void *src, size_t size);

struct htab_entry {
	const void *key; /* NULL: empty slot */
	uint64_t hash;
	uint64_t val;
	uint32_t klen;
	uint32_t pad;
};

#define HTAB_COPY_KEYS (1u << 0)

struct htab;

/* cap_hint: expected number of entries (0 = small default). */
struct htab *htab__new(size_t cap_hint, uint32_t flags);
void htab__free(struct htab *h);
size_t htab__count(const struct htab *h);

/* 64-bit hash of key bytes; any hash works as long as it is used consistently. */
uint64_t htab__hash(const void *key, size_t len);

/* Returns the entry for key, or NULL. Valid until the next insert or delete. */
struct htab_entry *htab__find(const struct htab *h, const void *key, size_t len, uint64_t hash);

/*
 * Find key or insert it with value 0. *entry is set to the entry, which is
 * valid until the next insert or delete. Returns 1 if inserted, 0 if it was
 * already there, -ENOMEM or -E2BIG (key longer than 4 GiB).
 */
int htab__upsert(struct htab *h, const void *key, size_t len, uint64_t hash,
		 struct htab_entry **entry);

/* Remove key. Returns 0, or -ENOENT. A copied key's memory is kept until htab__free. */
int htab__delete(struct htab *h, const void *key, size_t len, uint64_t hash);

/*
 * Iterate in slot order: start with *iter = 0; returns NULL at the end.
 * Inserting or deleting while iterating is not supported.
 */
struct htab_entry *htab__next(const struct htab *h, size_t *iter);

#endif
