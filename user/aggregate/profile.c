/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/profile.h"
#include "util/strsafe.h"
#include "util/array.h"
#include "util/htab.h"

struct profile_priv {
	struct htab *strings;  /* "s\0" -> (unused); the key copy is the interned string */
	struct htab *frames;   /* struct frame_key -> index */
	struct htab *mappings; /* struct mapping_key -> index */
	struct arena *arena;   /* sample frame, value and label arrays */
	size_t bytes;	       /* in the arena and the strings */
	const char **comments;
	size_t cap_comments;
};

/* Strings are interned first, so pointer equality is string equality. */
struct frame_key {
	const char *name;
	const char *func;
	const char *sysname;
	const char *file;
	uint32_t line;
	uint32_t start_line;
	uint32_t kind;
	int32_t mapping;
	uint64_t addr;
};

struct mapping_key {
	const char *path;
	const char *build_id;
};

struct profile *profile__new(void)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->priv = calloc(1, sizeof(*p->priv));
	if (!p->priv)
		goto err;
	p->priv->strings = htab__new(1024, HTAB_COPY_KEYS);
	p->priv->frames = htab__new(1024, HTAB_COPY_KEYS);
	p->priv->mappings = htab__new(64, HTAB_COPY_KEYS);
	p->priv->arena = arena__new();
	if (!p->priv->strings || !p->priv->frames || !p->priv->mappings || !p->priv->arena)
		goto err;
	return p;
err:
	profile__free(p);
	return NULL;
}

void profile__free(struct profile *p)
{
	if (!p)
		return;
	if (p->priv) {
		free(p->priv->comments);
		arena__free(p->priv->arena);
		htab__free(p->priv->mappings);
		htab__free(p->priv->frames);
		htab__free(p->priv->strings);
		free(p->priv);
	}
	free(p->samples);
	free(p->frames);
	free(p->mappings);
	free(p);
}

/* Grow *arr (of elem-sized items, *cap of them) so that it holds at least n + 1. */
static int grow_array(void **arr, size_t *cap, size_t n, size_t elem)
{
	return array_grow(arr, cap, n, elem, 64);
}

/*
 * Every string of a profile enters here, and many are chosen by processes
 * (comm, thread names, qualnames, paths, symbols): stored escaped, so no
 * writer and no terminal ever gets a raw control character (util/strsafe.h).
 */
const char *profile__intern(struct profile *p, const char *s)
{
	struct htab_entry *e;
	char *safe = NULL;
	size_t len;
	int ret;

	if (!s)
		return NULL;
	if (!strsafe__clean(s)) {
		len = strsafe__escape(NULL, 0, s) + 1;
		safe = malloc(len);
		if (!safe)
			return NULL;
		strsafe__escape(safe, len, s);
		s = safe;
	}
	/* the NUL goes into the key so the stored copy is a C string */
	len = strlen(s) + 1;
	ret = htab__upsert(p->priv->strings, s, len, htab__hash(s, len), &e);
	if (ret > 0)
		p->priv->bytes += len + 32; /* the key copy and its entry */
	free(safe);
	return ret < 0 ? NULL : e->key;
}

/* Intern a string that may be NULL; -ENOMEM only if a non-NULL string could not be stored. */
static int intern_opt(struct profile *p, const char *s, const char **out)
{
	*out = profile__intern(p, s);
	return s && !*out ? -ENOMEM : 0;
}

int profile__add_value_type(struct profile *p, const char *type, const char *unit)
{
	struct pvaluetype *vt;

	if (p->nvalues >= PROFILE_MAX_VALUES)
		return -ENOSPC;
	if (!type || !unit)
		return -EINVAL;
	vt = &p->value_types[p->nvalues];
	if (intern_opt(p, type, &vt->type) || intern_opt(p, unit, &vt->unit))
		return -ENOMEM;
	return (int)p->nvalues++;
}

int profile__set_period(struct profile *p, const char *type, const char *unit, int64_t period)
{
	const char *t, *u;

	if (intern_opt(p, type, &t) || intern_opt(p, unit, &u))
		return -ENOMEM;
	p->period_type.type = t;
	p->period_type.unit = u;
	p->period = period;
	return 0;
}

static int is_empty_range(const struct pmapping *m)
{
	return m->start == 0 && m->limit == 0;
}

int profile__add_mapping(struct profile *p, const struct pmapping *m)
{
	struct mapping_key key = {};
	struct pmapping *dst;
	struct htab_entry *e;
	uint64_t hash;
	int ret;

	if (!m || !m->path)
		return -EINVAL;
	if (intern_opt(p, m->path, &key.path) || intern_opt(p, m->build_id, &key.build_id))
		return -ENOMEM;
	hash = htab__hash(&key, sizeof(key));
	e = htab__find(p->priv->mappings, &key, sizeof(key), hash);
	if (e) {
		/*
		 * Same object seen again (another process, another range):
		 * widen to cover both so every location stays inside it.
		 */
		dst = &p->mappings[e->val];
		if ((m->flags & PMAP_RUNTIME) && !(dst->flags & PMAP_RUNTIME)) {
			dst->start = m->start;
			dst->limit = m->limit;
			dst->file_offset = m->file_offset;
		}
		dst->flags |= m->flags;
		if (dst->flags & PMAP_RUNTIME) {
			/* one real range: an address past it only widens the limit */
			if (m->limit > dst->limit)
				dst->limit = m->limit;
			return (int)e->val;
		}
		if (is_empty_range(m))
			return (int)e->val;
		if (is_empty_range(dst)) {
			dst->start = m->start;
			dst->limit = m->limit;
			dst->file_offset = m->file_offset;
			return (int)e->val;
		}
		if (m->start < dst->start) {
			dst->start = m->start;
			dst->file_offset = m->file_offset;
		}
		if (m->limit > dst->limit)
			dst->limit = m->limit;
		return (int)e->val;
	}
	if (p->nmappings >= INT_MAX)
		return -E2BIG;
	ret = grow_array((void **)&p->mappings, &p->cap_mappings, p->nmappings,
			 sizeof(*p->mappings));
	if (ret)
		return ret;
	ret = htab__upsert(p->priv->mappings, &key, sizeof(key), hash, &e);
	if (ret < 0)
		return ret;
	e->val = p->nmappings;
	dst = &p->mappings[p->nmappings];
	*dst = *m;
	dst->path = key.path;
	dst->build_id = key.build_id;
	return (int)p->nmappings++;
}

int profile__add_frame(struct profile *p, const struct pframe *f)
{
	struct frame_key key = {};
	struct pframe *dst;
	struct htab_entry *e;
	uint64_t hash;
	int ret;

	if (!f)
		return -EINVAL;
	if (f->mapping < -1 || (f->mapping >= 0 && (size_t)f->mapping >= p->nmappings))
		return -EINVAL;
	/* a frame without a name is still a frame: show it the way DESIGN.md says */
	if (intern_opt(p, f->name ? f->name : "[unknown]", &key.name) ||
	    intern_opt(p, f->file, &key.file))
		return -ENOMEM;
	if ((f->func && intern_opt(p, f->func, &key.func)) ||
	    (f->sysname && intern_opt(p, f->sysname, &key.sysname)))
		return -ENOMEM;
	key.line = f->line;
	key.start_line = f->start_line;
	key.kind = f->kind;
	key.mapping = f->mapping;
	key.addr = f->addr;
	hash = htab__hash(&key, sizeof(key));

	e = htab__find(p->priv->frames, &key, sizeof(key), hash);
	if (e)
		return (int)e->val;
	if (p->nframes >= INT_MAX)
		return -E2BIG;
	ret = grow_array((void **)&p->frames, &p->cap_frames, p->nframes, sizeof(*p->frames));
	if (ret)
		return ret;
	ret = htab__upsert(p->priv->frames, &key, sizeof(key), hash, &e);
	if (ret < 0)
		return ret;
	e->val = p->nframes;
	dst = &p->frames[p->nframes];
	memset(dst, 0, sizeof(*dst));
	dst->name = key.name;
	dst->func = key.func ? key.func : key.name;
	dst->sysname = key.sysname ? key.sysname : dst->func;
	dst->file = key.file;
	dst->line = key.line;
	dst->start_line = key.start_line;
	dst->kind = key.kind;
	dst->mapping = key.mapping;
	dst->addr = key.addr;
	return (int)p->nframes++;
}

int profile__add_sample(struct profile *p, const uint32_t *frames, uint32_t nframes,
			const int64_t *values, const struct plabel *labels, uint32_t nlabels)
{
	struct psample *s;
	uint32_t i;
	int err;

	if (nlabels > PROFILE_MAX_LABELS)
		return -E2BIG;
	if ((nframes && !frames) || (nlabels && !labels))
		return -EINVAL;
	for (i = 0; i < nframes; i++)
		if (frames[i] >= p->nframes)
			return -EINVAL;
	for (i = 0; i < nlabels; i++)
		if (!labels[i].key)
			return -EINVAL;
	err = grow_array((void **)&p->samples, &p->cap_samples, p->nsamples, sizeof(*p->samples));
	if (err)
		return err;

	s = &p->samples[p->nsamples];
	memset(s, 0, sizeof(*s));
	if (nframes) {
		s->frames = arena__memdup(p->priv->arena, frames, nframes * sizeof(*frames));
		if (!s->frames)
			return -ENOMEM;
	}
	s->nframes = nframes;
	s->values =
		arena__alloc(p->priv->arena, (p->nvalues ? p->nvalues : 1) * sizeof(*s->values));
	if (!s->values)
		return -ENOMEM;
	if (nlabels) {
		s->labels = arena__alloc(p->priv->arena, nlabels * sizeof(*s->labels));
		if (!s->labels)
			return -ENOMEM;
	}
	p->priv->bytes += nframes * sizeof(*frames) + p->nvalues * sizeof(*s->values) +
			  nlabels * sizeof(*s->labels);
	for (i = 0; i < p->nvalues; i++)
		s->values[i] = values ? values[i] : 0;
	for (i = 0; i < nlabels; i++) {
		struct plabel *l = &s->labels[i];

		if (intern_opt(p, labels[i].key, &l->key) ||
		    intern_opt(p, labels[i].str, &l->str) ||
		    intern_opt(p, labels[i].unit, &l->unit))
			return -ENOMEM;
		l->num = labels[i].num;
	}
	s->nlabels = nlabels;
	p->nsamples++;
	return 0;
}

int profile__add_comment(struct profile *p, const char *line)
{
	struct profile_priv *pv = p->priv;
	const char *s;
	int err;

	if (!line)
		return -EINVAL;
	s = profile__intern(p, line);
	if (!s)
		return -ENOMEM;
	err = grow_array((void **)&pv->comments, &pv->cap_comments, p->ncomments,
			 sizeof(*pv->comments));
	if (err)
		return err;
	pv->comments[p->ncomments++] = s;
	p->comments = pv->comments;
	return 0;
}

size_t profile__bytes(const struct profile *p)
{
	if (!p || !p->priv)
		return 0;
	return p->priv->bytes + p->cap_samples * sizeof(*p->samples) +
	       p->cap_frames * (sizeof(*p->frames) + sizeof(struct frame_key) + 32) +
	       p->cap_mappings * sizeof(*p->mappings);
}
