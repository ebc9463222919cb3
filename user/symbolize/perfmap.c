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
#include "util/tfile.h"

/* A map is looked at again (size) on a miss, at most this often. */
#define PERFMAP_RECHECK_NS (100 * 1000000ULL)
#define PERFMAP_NAME_MAX   1024

struct pmap {
	struct perfmap_ent *ents;
	int n;
	off_t size;	  /* of the file when read */
	uint32_t nspid;	  /* the pid the process knows itself by (0: not read yet) */
	uint64_t checked; /* mono_ns of the last look at the file */
};

struct perfmaps {
	struct htab *procs; /* pid -> struct pmap * */
	struct htab *names; /* name -> id */
	char **byid;	    /* id - 1 -> name */
	uint32_t nnames, capnames;
	struct perfmap_stats st;
};

struct perfmaps *perfmaps__new(void)
{
	struct perfmaps *pm = calloc(1, sizeof(*pm));

	if (!pm)
		return NULL;
	pm->procs = htab__new(0, HTAB_COPY_KEYS);
	pm->names = htab__new(0, HTAB_COPY_KEYS);
	if (!pm->procs || !pm->names) {
		perfmaps__free(pm);
		return NULL;
	}
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

		if (m)
			free(m->ents);
		free(m);
	}
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

int perfmaps__parse(struct perfmaps *pm, const char *buf, size_t len, struct perfmap_ent **out)
{
	struct perfmap_ent *ents = NULL, *tmp;
	size_t n = 0, cap = 0;
	const char *p = buf, *end = buf + len;

	*out = NULL;
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
					return -ENOMEM;
				}
				ents = tmp;
			}
			ents[n] = (struct perfmap_ent){ .start = v[0], .end = v[0] + v[1] };
			ents[n].name = intern(pm, name, eol - name);
			if (ents[n].name)
				n++;
		} else if (eol > line) { /* an empty line is no entry, and no error */
			pm->st.bad++;
		}
		p = nl ? nl + 1 : end;
	}
	if (n)
		qsort(ents, n, sizeof(*ents), ent_cmp);
	*out = ents;
	return (int)n;
}

/*
 * pid as the process itself sees it: the last NSpid of /proc/PID/status. A
 * JIT in a container (a pid namespace) names its map after that pid, not the
 * host's. 0 when the status cannot be read (the process is gone).
 */
static uint32_t ns_pid(uint32_t pid)
{
	char path[64], line[256];
	uint32_t last;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	last = pid; /* a kernel without NSpid (before 4.1) has no pid namespaces to speak of */
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p || v > UINT32_MAX)
				break;
			last = (uint32_t)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return last;
}

/* (Re)read pid's perf map, through its root, if it changed size. */
static void pmap_load(struct perfmaps *pm, uint32_t pid, struct pmap *m)
{
	char path[64], *buf = NULL;
	struct perfmap_ent *ents;
	struct stat st;
	size_t len = 0;
	int root, fd, n;
	ssize_t r;

	m->checked = mono_ns();
	if (!m->nspid)
		m->nspid = ns_pid(pid);
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
	n = perfmaps__parse(pm, buf, len, &ents);
	if (n < 0)
		goto out;
	free(m->ents);
	m->ents = ents;
	m->n = n;
	m->size = st.st_size;
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
		he->val = (uintptr_t)m;
		pmap_load(pm, pid, m);
	}
	m = (struct pmap *)(uintptr_t)he->val;
	e = find(m, addr);
	if (!e && mono_ns() - m->checked > PERFMAP_RECHECK_NS) {
		pmap_load(pm, pid, m); /* the JIT may have written it since */
		e = find(m, addr);
	}
	if (!e) {
		pm->st.missed++;
		return 0;
	}
	pm->st.found++;
	return e->name;
}

const char *perfmaps__name(const struct perfmaps *pm, uint32_t id)
{
	return pm && id && id <= pm->nnames ? pm->byid[id - 1] : NULL;
}

void perfmaps__forget(struct perfmaps *pm, uint32_t pid)
{
	struct htab_entry *he =
		htab__find(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	if (!he)
		return;
	if (he->val) {
		free(((struct pmap *)(uintptr_t)he->val)->ents);
		free((void *)(uintptr_t)he->val);
	}
	htab__delete(pm->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
}

const struct perfmap_stats *perfmaps__stats(const struct perfmaps *pm)
{
	return &pm->st;
}
