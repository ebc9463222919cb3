// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/match.h"
#include "util/htab.h"

#define DEFAULT_CAP (1u << 16)

struct cm_key {
	uint32_t pid;
	uint32_t pad;
	uint64_t v; /* correlation id, or tid for at-entry launches */
};

/* An entry: its key (borrowed by the hash table), its place in age order, what it holds. */
struct cm_node {
	struct cm_key key;
	struct cm_node *prev, *next;
	union {
		struct cm_launch l;
		struct cm_gpu g;
	};
};

struct cm_table {
	struct htab *h;
	struct cm_node age; /* circular list, oldest first */
	size_t n;
	bool gpu; /* nodes hold struct cm_gpu */
	uint64_t *evicted;
};

struct cuda_match {
	struct cm_table launches, gpu, at_entry;
	size_t cap;
	struct cm_stats st;
};

static uint64_t key_hash(const struct cm_key *k)
{
	return htab__hash(k, sizeof(*k));
}

static void node_free(struct cm_table *t, struct cm_node *n)
{
	if (t->gpu)
		free(n->g.mangled);
	free(n);
}

static void unlink_node(struct cm_table *t, struct cm_node *n)
{
	htab__delete(t->h, &n->key, sizeof(n->key), key_hash(&n->key));
	n->prev->next = n->next;
	n->next->prev = n->prev;
	t->n--;
}

static int table_init(struct cm_table *t, bool gpu, uint64_t *evicted)
{
	t->h = htab__new(1024, 0); /* keys borrowed: they live in the nodes */
	t->age.prev = t->age.next = &t->age;
	t->gpu = gpu;
	t->evicted = evicted;
	return t->h ? 0 : -ENOMEM;
}

static void table_fini(struct cm_table *t)
{
	struct cm_node *n, *next;

	if (!t->h)
		return;
	for (n = t->age.next; n != &t->age; n = next) {
		next = n->next;
		node_free(t, n);
	}
	htab__free(t->h);
}

static struct cm_node *table_find(const struct cm_table *t, const struct cm_key *k)
{
	struct htab_entry *e = htab__find(t->h, k, sizeof(*k), key_hash(k));

	return e ? (struct cm_node *)(uintptr_t)e->val : NULL;
}

/* Insert (or replace) the node for k, the newest; the oldest goes when full. */
static struct cm_node *table_put(struct cuda_match *m, struct cm_table *t, const struct cm_key *k)
{
	struct cm_node *n = table_find(t, k);
	struct htab_entry *e;

	if (n) { /* replaced: its old content goes, it becomes the newest */
		if (t->gpu)
			free(n->g.mangled);
		n->prev->next = n->next;
		n->next->prev = n->prev;
	} else {
		if (t->n >= m->cap) {
			struct cm_node *old = t->age.next;

			unlink_node(t, old);
			node_free(t, old);
			(*t->evicted)++;
		}
		n = calloc(1, sizeof(*n));
		if (!n)
			return NULL;
		n->key = *k;
		if (htab__upsert(t->h, &n->key, sizeof(n->key), key_hash(&n->key), &e) < 0) {
			free(n);
			return NULL;
		}
		e->val = (uintptr_t)n;
		t->n++;
	}
	n->prev = t->age.prev;
	n->next = &t->age;
	t->age.prev->next = n;
	t->age.prev = n;
	return n;
}

int cuda_match__new(struct cuda_match **out, size_t cap)
{
	struct cuda_match *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->cap = cap ? cap : DEFAULT_CAP;
	if (table_init(&m->launches, false, &m->st.launches_evicted) ||
	    table_init(&m->gpu, true, &m->st.gpu_evicted) ||
	    table_init(&m->at_entry, false, &m->st.at_entry_evicted)) {
		cuda_match__free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void cuda_match__free(struct cuda_match *m)
{
	if (!m)
		return;
	table_fini(&m->launches);
	table_fini(&m->gpu);
	table_fini(&m->at_entry);
	free(m);
}

int cuda_match__launch(struct cuda_match *m, uint32_t pid, uint32_t corr, const struct cm_launch *l,
		       struct cm_gpu **gpu)
{
	struct cm_key k = { .pid = pid, .v = corr };
	struct cm_node *n = table_find(&m->gpu, &k);

	*gpu = NULL;
	if (n) { /* its GPU record is already here */
		unlink_node(&m->gpu, n);
		*gpu = malloc(sizeof(**gpu));
		if (!*gpu) {
			node_free(&m->gpu, n);
			return -ENOMEM;
		}
		**gpu = n->g;
		free(n);
		return 0;
	}
	n = table_put(m, &m->launches, &k);
	if (!n)
		return -ENOMEM;
	n->l = *l;
	return 0;
}

static int take(struct cm_table *t, const struct cm_key *k, struct cm_launch *l)
{
	struct cm_node *n = table_find(t, k);

	if (!n)
		return 0;
	*l = n->l;
	unlink_node(t, n);
	node_free(t, n);
	return 1;
}

int cuda_match__take_launch(struct cuda_match *m, uint32_t pid, uint32_t corr, struct cm_launch *l)
{
	return take(&m->launches, &(struct cm_key){ .pid = pid, .v = corr }, l);
}

struct cm_gpu *cuda_match__orphan(struct cuda_match *m, uint32_t pid, uint32_t corr,
				  const struct cm_gpu *g)
{
	struct cm_node *n = table_put(m, &m->gpu, &(struct cm_key){ .pid = pid, .v = corr });

	if (!n) {
		free(g->mangled);
		return NULL;
	}
	n->g = *g;
	return &n->g;
}

void cuda_match__gpu_free(struct cm_gpu *g)
{
	if (g)
		free(g->mangled);
	free(g);
}

int cuda_match__at_entry(struct cuda_match *m, uint32_t pid, const struct cm_launch *l)
{
	struct cm_node *n = table_put(m, &m->at_entry, &(struct cm_key){ .pid = pid, .v = l->tid });

	if (!n)
		return -ENOMEM;
	n->l = *l;
	return 0;
}

int cuda_match__take_at_entry(struct cuda_match *m, uint32_t pid, uint32_t tid, struct cm_launch *l)
{
	return take(&m->at_entry, &(struct cm_key){ .pid = pid, .v = tid }, l);
}

size_t cuda_match__waiting(const struct cuda_match *m)
{
	return m->launches.n;
}

const struct cm_stats *cuda_match__stats(const struct cuda_match *m)
{
	return &m->st;
}
