// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/perfmap.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/membudget.h"
#include "util/procfs.h"
#include "util/tfile.h"

/* A map is looked at again (size) on a miss, at most this often. */
#define PERFMAP_RECHECK_NS (100 * 1000000ULL)
#define PERFMAP_NAME_MAX   1024

/*
 * One process's map. Entries' names stay in the map's own pool (name: offset
 * + 1) until a sample lands in them: only names that frames use are interned
 * (ids live to the end), so a map can be evicted (and read again on the next
 * lookup) without touching what was aggregated.
 */
struct pmap {
	struct perfmap_ent *ents;
	int n;
	char *pool;
	size_t pool_len;
	off_t size;	  /* of the file when read */
	uint32_t nspid;	  /* the pid the process knows itself by (0: not read yet) */
	uint64_t checked; /* mono_ns of the last look at the file */
	uint64_t last_use;
	uint32_t pid;
};

struct perfmaps {
	struct htab *procs; /* pid -> struct pmap * */
	struct htab *names; /* name -> id */
	char **byid;	    /* id - 1 -> name */
	uint32_t nnames, capnames;
	uint64_t tick;
	struct pmap *busy; /* being read: never evicted by its own charge */
	struct perfmap_stats st;
	struct membudget_cache mb; /* maps (evicted least recently used first) and names */
};

static size_t pmap_bytes(const struct pmap *m)
{
	return sizeof(*m) + m->n * sizeof(*m->ents) + m->pool_len;
}

static size_t maps_evict(void *ctx, size_t want);

struct perfmaps *perfmaps__new(void)
{
	struct perfmaps *pm = calloc(1, sizeof(*pm));

	if (!pm)
		return NULL;
	/* keys borrowed from each map's pid: a forgotten map leaves no key copy behind */
	pm->procs = htab__new(0, 0);
	pm->names = htab__new(0, HTAB_COPY_KEYS);
	if (!pm->procs || !pm->names) {
		perfmaps__free(pm);
		return NULL;
	}
	pm->mb = (struct membudget_cache){ .name = "perf maps", .evict = maps_evict, .ctx = pm };
	membudget__add(&pm->mb);
	return pm;
}

void perfmaps__free(struct perfmaps *pm)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!pm)
		return;
	while (pm->procs && (e = htab__next(pm->procs, &it))) {
		struct pmap *m = (struct pmap *)(uintptr_t)e->val;

		if (m) {
			free(m->ents);
			free(m->pool);
		}
		free(m);
	}
	membudget__remove(&pm->mb);
	htab__free(pm->procs);
	htab__free(pm->names);
	for (uint32_t i = 0; i < pm->nnames; i++)
		free(pm->byid[i]);
	free(pm->byid);
	free(pm);
}

static uint32_t intern(struct perfmaps *pm, const char *name, size_t len)
{
	struct htab_entry *e;
	char *copy;
	int ret;

	ret = htab__upsert(pm->names, name, len, htab__hash(name, len), &e);
	if (ret < 0)
		return 0;
	if (ret == 0)
		return (uint32_t)e->val;
	if (pm->nnames == pm->capnames) {
		uint32_t cap = pm->capnames ? pm->capnames * 2 : 64;
		char **n = realloc(pm->byid, cap * sizeof(*n));

		if (!n)
			goto undo;
		pm->byid = n;
		pm->capnames = cap;
	}
	copy = strndup(name, len);
	if (!copy)
		goto undo;
	pm->byid[pm->nnames++] = copy;
	e->val = pm->nnames;
	membudget__charge(&pm->mb, len + 1 + sizeof(*pm->byid));
	return pm->nnames;
undo:
	htab__delete(pm->names, name, len, htab__hash(name, len));
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct perfmap_ent *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Names interned, or with pool, copied into *pool (name: offset + 1). */
static int parse(struct perfmaps *pm, const char *buf, size_t len, struct perfmap_ent **out,
		 char **pool, size_t *pool_len)
{
	struct perfmap_ent *ents = NULL, *tmp;
	size_t n = 0, cap = 0, plen = 0;
	const char *p = buf, *end = buf + len;

	*out = NULL;
	if (pool) {
		/* the names are in buf: the pool never needs more than it */
		*pool = malloc(len + 1);
		if (!*pool)
			return -ENOMEM;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p), *eol = nl ? nl : end, *name, *line = p;
		char num[2][20];
		uint64_t v[2];
		int ok = 1;

		/* two hex numbers, a space each, then the name to the end of the line */
		for (int i = 0; i < 2 && ok; i++) {
			size_t k = 0;

			if (p + 2 <= eol && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
				p += 2;
			while (p < eol && k < sizeof(num[i]) - 1 &&
			       ((*p >= '0' && *p <= '9') ||
				((*p | 0x20) >= 'a' && (*p | 0x20) <= 'f')))
				num[i][k++] = *p++;
			num[i][k] = '\0';
			ok = k > 0 && k <= 16 && p < eol && *p == ' ';
			if (ok) {
				v[i] = strtoull(num[i], NULL, 16);
				p++;
			}
		}
		name = p;
		if (ok && eol > name && eol - name < PERFMAP_NAME_MAX && v[1] &&
		    v[0] + v[1] > v[0]) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				tmp = realloc(ents, cap * sizeof(*ents));
				if (!tmp) {
					free(ents);
					if (pool) {
						free(*pool);
						*pool = NULL;
					}
					return -ENOMEM;
				}
				ents = tmp;
			}
			ents[n] = (struct perfmap_ent){ .start = v[0], .end = v[0] + v[1] };
			if (pool) {
				memcpy(*pool + plen, name, eol - name);
				(*pool)[plen + (eol - name)] = '\0';
				ents[n].name = plen + 1;
				plen += eol - name + 1;
			} else {
				ents[n].name = intern(pm, name, eol - name);
			}
			if (ents[n].name)
				n++;
		} else if (eol > line) { /* an empty line is no entry, and no error */
			pm->st.bad++;
		}
		p = nl ? nl + 1 : end;
	}
	if (n)
		qsort(ents, n, sizeof(*ents), ent_cmp);
	if (pool) {
		char *shrunk = realloc(*pool, plen ? plen : 1);

		if (shrunk)
			*pool = shrunk;
		*pool_len = plen;
	}
	*out = ents;
	return (int)n;
}

int perfmaps__parse(struct perfmaps *pm, const char *buf, size_t len, struct perfmap_ent **out)
{
	return parse(pm, buf, len, out, NULL, NULL);
}

/* (Re)read pid's perf map, through its root, if it changed size. */
static void pmap_load(struct perfmaps *pm, uint32_t pid, struct pmap *m)
{
	char path[64], *buf = NULL, *pool;
	struct perfmap_ent *ents;
	struct stat st;
	size_t len = 0, pool_len;
	int root, fd, n;
	ssize_t r;

	m->checked = mono_ns();
	if (!m->nspid) {
		/*
		 * A JIT in a pid namespace (a container) names its map after the pid
		 * it knows itself by; 0: the process is gone.
		 */
		snprintf(path, sizeof(path), "/proc/%u/status", pid);
		m->nspid = procfs__nspid(path, pid);
	}
	if (!m->nspid)
		return;
	root = tfile__root(pid);
	if (root < 0)
		return;
	/* the process's /tmp, under its own pid (its namespace's) */
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", m->nspid);
	fd = tfile__open(root, path, &st);
	close(root);
	if (fd < 0)
		return;
	if (st.st_size == m->size)
		goto out;
	len = st.st_size < PERFMAP_MAX_BYTES ? (size_t)st.st_size : PERFMAP_MAX_BYTES;
	buf = malloc(len + 1);
	if (!buf)
		goto out;
	r = pread(fd, buf, len, 0);
	if (r < 0)
		goto out;
	/* a writer appends: the last line may be half written; it comes next time */
	len = r;
	while (len && buf[len - 1] != '\n')
		len--;
	n = parse(pm, buf, len, &ents, &pool, &pool_len);
	if (n < 0)
		goto out;
	membudget__charge(&pm->mb, -(long long)pmap_bytes(m));
	free(m->ents);
	free(m->pool);
	m->ents = ents;
	m->n = n;
	m->pool = pool;
	m->pool_len = pool_len;
	m->size = st.st_size;
	membudget__charge(&pm->mb, pmap_bytes(m));
	pm->st.files++;
	pm->st.entries += n;
out:
	free(buf);
	close(fd);
}

static const struct perfmap_ent *find(const struct pmap *m, uint64_t addr)
{
	int lo = 0, hi = m->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (m->ents[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= m->ents[lo - 1].end)
		return NULL;
	return &m->ents[lo - 1];
}

uint32_t perfmaps__lookup(struct perfmaps *pm, uint32_t pid, uint64_t addr)
{
	const struct perfmap_ent *e;
	struct htab_entry *he;
	struct pmap *m;
	int ret;

	ret = htab__upsert(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &he);
	if (ret < 0)
		return 0;
	if (ret == 1) {
		m = calloc(1, sizeof(*m));
		if (!m) {
			htab__delete(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
			return 0;
		}
		m->pid = pid;
		he->key = &m->pid;
		he->val = (uintptr_t)m;
		pm->mb.entries++;
	}
	m = (struct pmap *)(uintptr_t)he->val;
	m->last_use = ++pm->tick;
	/* what the budget evicts while m is read is other processes' maps, never m */
	pm->busy = m;
	if (ret == 1) {
		membudget__charge(&pm->mb, pmap_bytes(m));
		pmap_load(pm, pid, m);
	}
	e = find(m, addr);
	if (!e && mono_ns() - m->checked > PERFMAP_RECHECK_NS) {
		pmap_load(pm, pid, m); /* the JIT may have written it since */
		e = find(m, addr);
	}
	pm->busy = NULL;
	if (!e) {
		pm->st.missed++;
		return 0;
	}
	pm->st.found++;
	/* a frame names it: interned now, for the whole run */
	return intern(pm, m->pool + e->name - 1, strlen(m->pool + e->name - 1));
}

const char *perfmaps__name(const struct perfmaps *pm, uint32_t id)
{
	return pm && id && id <= pm->nnames ? pm->byid[id - 1] : NULL;
}

void perfmaps__forget(struct perfmaps *pm, uint32_t pid)
{
	struct htab_entry *he =
		htab__find(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	struct pmap *m;

	if (!he)
		return;
	m = (struct pmap *)(uintptr_t)he->val;
	/* the key lives in m: out of the table first */
	htab__delete(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	if (m) {
		membudget__charge(&pm->mb, -(long long)pmap_bytes(m));
		pm->mb.entries--;
		free(m->ents);
		free(m->pool);
		free(m);
	}
}

static int last_use_cmp(const void *pa, const void *pb)
{
	const struct pmap *a = *(struct pmap *const *)pa, *b = *(struct pmap *const *)pb;

	return a->last_use < b->last_use ? -1 : a->last_use > b->last_use;
}

/* Least recently used maps first; a later lookup of the process reads its map again. */
static size_t maps_evict(void *ctx, size_t want)
{
	struct perfmaps *pm = ctx;
	size_t n = 0, k = htab__count(pm->procs), it = 0, freed = 0;
	struct htab_entry *e;
	struct pmap **v;

	if (!k)
		return 0;
	v = malloc(k * sizeof(*v));
	if (!v)
		return 0;
	while ((e = htab__next(pm->procs, &it)) && n < k)
		if (e->val && (struct pmap *)(uintptr_t)e->val != pm->busy)
			v[n++] = (struct pmap *)(uintptr_t)e->val;
	qsort(v, n, sizeof(*v), last_use_cmp);
	for (size_t i = 0; i < n && freed < want; i++) {
		freed += pmap_bytes(v[i]);
		pm->mb.evicted++;
		perfmaps__forget(pm, v[i]->pid);
	}
	free(v);
	return freed;
}

const struct perfmap_stats *perfmaps__stats(const struct perfmaps *pm)
{
	return &pm->st;
}
