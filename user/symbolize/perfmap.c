// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
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

/* A map is looked at again (size, mtime) on a miss, at most this often. */
#define PERFMAP_RECHECK_NS (100 * 1000000ULL)
#define PERFMAP_NAME_MAX   1024
/*
 * What one read of a map may parse: a few ms, so that a map of tens of MiB
 * is read over several rounds and never stalls the agent (a 64 MiB map read
 * whole on every miss once kept a 20 s run going for 8 minutes).
 */
#define PERFMAP_CHUNK (2u << 20)
/* One process's map gets at most 1/PERFMAP_TIME_SHARE of the agent's time. */
#define PERFMAP_TIME_SHARE 10
/* ... and at most 1/PERFMAP_MEM_SHARE of --mem-budget: past it, read no further */
#define PERFMAP_MEM_SHARE 4

/*
 * One process's map. Entries' names stay in the map's own pool (name: offset
 * + 1) until a sample lands in them: only names that frames use are interned
 * (ids live to the end), so a map can be evicted (and read again on the next
 * lookup) without touching what was aggregated. A map is read as it grows:
 * from where the last read stopped (whole lines), one chunk a read.
 */
struct pmap {
	struct perfmap_ent *ents;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	uint64_t dev, ino; /* the file read so far (0: none yet) */
	uint64_t off;	   /* read up to here: whole lines */
	int64_t size;	   /* its size when last read to the end (-1: not read to the end) */
	int64_t mtime_ns;  /* and its mtime then */
	bool full;	   /* over its share of the budget or PERFMAP_MAX_BYTES: read no further */
	bool refused;	   /* not the process's own regular file (counted once) */
	uint32_t nspid;	   /* the pid the process knows itself by (0: not read yet) */
	uint32_t uids[4];  /* its uids: whose map it may read */
	uint64_t checked;  /* mono_ns of the last look at the file */
	uint64_t next_ns;  /* not read again before this: its share of the agent's time */
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
	return sizeof(*m) + m->cap * sizeof(*m->ents) + m->pool_cap;
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

typedef int (*line_fn)(void *ctx, uint64_t start, uint64_t size, const char *name, size_t len);

/*
 * Each "START SIZE name" line of buf (hex numbers, 0x optional, a space
 * each, the name to the end of the line) to fn; other lines counted bad.
 */
static int parse_lines(struct perfmaps *pm, const char *buf, size_t len, line_fn fn, void *ctx)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', end - p), *eol = nl ? nl : end, *name, *line = p;
		char num[2][20];
		uint64_t v[2];
		int ok = 1, err;

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
			err = fn(ctx, v[0], v[1], name, eol - name);
			if (err)
				return err;
		} else if (eol > line) { /* an empty line is no entry, and no error */
			pm->st.bad++;
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *nv;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	nv = realloc(*v, n * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = n;
	return 0;
}

/* perfmaps__parse: every entry, its name interned */
struct array_ctx {
	struct perfmaps *pm;
	struct perfmap_ent *ents;
	size_t n, cap;
};

static int array_line(void *ctx, uint64_t start, uint64_t size, const char *name, size_t len)
{
	struct array_ctx *a = ctx;
	uint32_t id;

	if (grow((void **)&a->ents, &a->cap, a->n + 1, sizeof(*a->ents), 256))
		return -ENOMEM;
	id = intern(a->pm, name, len);
	if (id)
		a->ents[a->n++] =
			(struct perfmap_ent){ .start = start, .end = start + size, .name = id };
	return 0;
}

/* A map's growth: entries appended to it, names copied into its pool. */
static int pmap_line(void *ctx, uint64_t start, uint64_t size, const char *name, size_t len)
{
	struct pmap *m = ctx;

	if (grow((void **)&m->ents, &m->cap, m->n + 1, sizeof(*m->ents), 256) ||
	    grow((void **)&m->pool, &m->pool_cap, m->pool_len + len + 1, 1, 4096))
		return -ENOMEM;
	memcpy(m->pool + m->pool_len, name, len);
	m->pool[m->pool_len + len] = '\0';
	m->ents[m->n++] = (struct perfmap_ent){ .start = start,
						.end = start + size,
						.name = (uint32_t)(m->pool_len + 1) };
	m->pool_len += len + 1;
	return 0;
}

int perfmaps__parse(struct perfmaps *pm, const char *buf, size_t len, struct perfmap_ent **out)
{
	struct array_ctx a = { .pm = pm };
	int err = parse_lines(pm, buf, len, array_line, &a);

	if (err) {
		free(a.ents);
		*out = NULL;
		return err;
	}
	if (a.n)
		qsort(a.ents, a.n, sizeof(*a.ents), ent_cmp);
	*out = a.ents;
	return (int)a.n;
}

/* Forget what was read of m's file (replaced or truncated: read again from the start). */
static void pmap_reset(struct perfmaps *pm, struct pmap *m)
{
	membudget__charge(&pm->mb, -(long long)pmap_bytes(m));
	free(m->ents);
	free(m->pool);
	m->ents = NULL;
	m->pool = NULL;
	m->n = m->cap = m->pool_len = m->pool_cap = 0;
	m->off = 0;
	m->size = -1;
	m->full = false;
	membudget__charge(&pm->mb, pmap_bytes(m));
}

/* Entries [old, n) just read, into the sorted array (a JIT appends mostly ascending). */
static int pmap_merge(struct pmap *m, size_t old)
{
	size_t k = m->n - old, i = old, j = k, w = m->n;
	struct perfmap_ent *add;

	qsort(m->ents + old, k, sizeof(*m->ents), ent_cmp);
	if (!old || !k || m->ents[old - 1].start <= m->ents[old].start)
		return 0;
	add = malloc(k * sizeof(*add));
	if (!add)
		return -ENOMEM;
	memcpy(add, m->ents + old, k * sizeof(*add));
	while (j) /* from the back: the larger of the two tails */
		m->ents[--w] =
			i && m->ents[i - 1].start > add[j - 1].start ? m->ents[--i] : add[--j];
	free(add);
	return 0;
}

static int64_t mtime_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

/* One chunk more of m's file (open at fd), from where the last read stopped. */
static void pmap_read_more(struct perfmaps *pm, struct pmap *m, int fd, const struct stat *st)
{
	uint64_t end = (uint64_t)st->st_size < PERFMAP_MAX_BYTES ? (uint64_t)st->st_size
								 : PERFMAP_MAX_BYTES;
	size_t len, old = m->n, old_pool = m->pool_len, cap = m->cap, pcap = m->pool_cap;
	size_t budget = membudget__get();
	char *buf;
	ssize_t r;

	if (m->off >= end) {
		if ((uint64_t)st->st_size > PERFMAP_MAX_BYTES) {
			m->full = true; /* read no further: counted */
			pm->st.capped++;
		}
		return;
	}
	len = end - m->off < PERFMAP_CHUNK ? (size_t)(end - m->off) : PERFMAP_CHUNK;
	buf = malloc(len);
	if (!buf)
		return;
	r = pread(fd, buf, len, (off_t)m->off);
	if (r <= 0) {
		free(buf);
		return;
	}
	/* a writer appends: the last line may be half written; it comes next time */
	len = (size_t)r;
	while (len && buf[len - 1] != '\n')
		len--;
	if (!len && (size_t)r == PERFMAP_CHUNK) {
		/* no line end in a whole chunk: no entry is that long */
		pm->st.bad++;
		len = (size_t)r;
	}
	if (len) {
		int err = parse_lines(pm, buf, len, pmap_line, m);

		if (!err)
			err = pmap_merge(m, old);
		if (err) { /* out of memory: what this chunk added is dropped */
			m->n = old;
			m->pool_len = old_pool;
		} else {
			m->off += len;
			pm->st.bytes += len;
			pm->st.entries += m->n - old;
		}
	}
	free(buf);
	if (m->off >= (uint64_t)st->st_size) {
		m->size = st->st_size;
		m->mtime_ns = mtime_of(st);
	} else {
		m->size = -1;
	}
	membudget__charge(&pm->mb, (long long)((m->cap - cap) * sizeof(*m->ents)) +
					   (long long)(m->pool_cap - pcap));
	if (budget && pmap_bytes(m) > budget / PERFMAP_MEM_SHARE && m->off < end) {
		m->full = true;
		pm->st.over_budget++;
	}
}

/*
 * Read pid's perf map, through its root, as far as it grew since the last
 * read, if it changed (size, mtime), and if the map's share of the agent's
 * time allows: a read that took T waits (PERFMAP_TIME_SHARE - 1) * T.
 */
static void pmap_load(struct perfmaps *pm, uint32_t pid, struct pmap *m)
{
	uint64_t t0 = mono_ns();
	char path[64];
	struct stat st;
	int root, fd;

	m->checked = t0;
	if (t0 < m->next_ns) {
		pm->st.deferred++;
		return;
	}
	if (!m->nspid) {
		/*
		 * A JIT in a pid namespace (a container) names its map after the pid
		 * it knows itself by; 0: the process is gone.
		 */
		snprintf(path, sizeof(path), "/proc/%u/status", pid);
		m->nspid = procfs__nspid(path, pid);
		if (m->nspid && procfs__uids(path, m->uids))
			m->nspid = 0;
	}
	if (!m->nspid)
		return;
	root = tfile__root(pid);
	if (root < 0)
		return;
	/*
	 * The process's /tmp, under its own pid (its namespace's), read as it
	 * could read it: its own regular file, not a symlink (to a root-only
	 * file, say) nor another user's file bind-mounted there.
	 */
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", m->nspid);
	fd = tfile__open_own(root, path, m->uids, 4, &st);
	close(root);
	if (fd < 0) {
		if (fd == -EPERM && !m->refused) {
			m->refused = true;
			pm->st.refused++;
		}
		return;
	}
	if ((uint64_t)st.st_dev != m->dev || (uint64_t)st.st_ino != m->ino ||
	    (uint64_t)st.st_size < m->off) {
		if (m->dev || m->ino)
			pm->st.replaced++;
		pmap_reset(pm, m);
		m->dev = st.st_dev;
		m->ino = st.st_ino;
	}
	if (!m->full && (st.st_size != m->size || mtime_of(&st) != m->mtime_ns)) {
		pmap_read_more(pm, m, fd, &st);
		pm->st.files++;
	}
	close(fd);
	m->next_ns = mono_ns();
	m->next_ns += (m->next_ns - t0) * (PERFMAP_TIME_SHARE - 1);
	pm->st.read_ns += mono_ns() - t0;
}

static const struct perfmap_ent *find(const struct pmap *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

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
		m->size = -1;
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
