/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/htab.h"
#include "write/writers.h"

/* A frame name as it appears in the output, made safe for the line format. */
struct fname {
	const char *s;
	size_t len;
};

struct fstack {
	const uint32_t *ids; /* name ids, root first */
	size_t n;
	int64_t val;
};

/* Output goes through a large private buffer: one fwrite per 256 KiB, not per frame. */
#define OBUF_SIZE (256 * 1024)

struct obuf {
	FILE *out;
	char *buf;
	size_t len;
	int err;
};

struct folded_ctx {
	const struct profile *p;
	struct htab *names;    /* sanitized name -> name id */
	struct fname *name_of; /* by name id */
	size_t nnames;
	uint32_t *frame_name; /* frame index -> name id */
	struct arena *arena;  /* sanitized copies */
	struct htab *stacks;  /* uint32_t name ids, root first -> summed value */
	struct fstack *lines;
	size_t nlines;
};

static const char unknown_name[] = "[unknown]";

static int needs_sanitize(const char *s)
{
	return strpbrk(s, ";\n\r") != NULL;
}

/*
 * ';' separates frames and '\n' ends the line; a name carrying either would
 * split a stack or a line in every parser of this format.
 */
static char *sanitize(struct arena *a, const char *s, size_t len)
{
	char *d = arena__alloc(a, len + 1);
	size_t i;

	if (!d)
		return NULL;
	for (i = 0; i < len; i++) {
		if (s[i] == ';')
			d[i] = ':';
		else if (s[i] == '\n' || s[i] == '\r')
			d[i] = ' ';
		else
			d[i] = s[i];
	}
	d[len] = '\0';
	return d;
}

static int name_id(struct folded_ctx *c, const char *s, uint32_t *id)
{
	struct htab_entry *e;
	size_t len;
	int ret;

	/* a blank name would leave a line of spaces that readers take as no frame at all */
	if (!s || !s[strspn(s, " \t")])
		s = unknown_name;
	len = strlen(s);
	if (needs_sanitize(s)) {
		s = sanitize(c->arena, s, len);
		if (!s)
			return -ENOMEM;
	}
	/* keys are borrowed: interned profile strings or arena copies, both outlive the table */
	ret = htab__upsert(c->names, s, len, htab__hash(s, len), &e);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		e->val = c->nnames;
		c->name_of[c->nnames].s = s;
		c->name_of[c->nnames].len = len;
		c->nnames++;
	}
	*id = (uint32_t)e->val;
	return 0;
}

static int map_frame_names(struct folded_ctx *c)
{
	const struct profile *p = c->p;
	size_t i;
	int err;

	/* one extra slot: the name of an empty stack */
	c->name_of = calloc(p->nframes + 1, sizeof(*c->name_of));
	c->frame_name = calloc(p->nframes ? p->nframes : 1, sizeof(*c->frame_name));
	c->names = htab__new(p->nframes, 0);
	c->arena = arena__new();
	if (!c->name_of || !c->frame_name || !c->names || !c->arena)
		return -ENOMEM;
	for (i = 0; i < p->nframes; i++) {
		err = name_id(c, p->frames[i].name, &c->frame_name[i]);
		if (err)
			return err;
	}
	return 0;
}

static int merge_stacks(struct folded_ctx *c, uint32_t value_index)
{
	const struct profile *p = c->p;
	uint32_t *ids = NULL, empty_id;
	size_t cap = 0, i, j, len;
	struct htab_entry *e;
	int ret = 0;

	c->stacks = htab__new(p->nsamples, HTAB_COPY_KEYS);
	if (!c->stacks)
		return -ENOMEM;
	for (i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		int64_t v = s->values[value_index];

		if (!v)
			continue;
		len = s->nframes ? s->nframes : 1;
		if (len > cap) {
			free(ids);
			cap = len * 2;
			ids = malloc(cap * sizeof(*ids));
			if (!ids)
				return -ENOMEM;
		}
		if (s->nframes) {
			for (j = 0; j < s->nframes; j++) {
				if (s->frames[j] >= p->nframes) {
					ret = -EINVAL;
					goto out;
				}
				ids[j] = c->frame_name[s->frames[j]];
			}
		} else {
			/* a sample without frames still counts: it must not vanish */
			ret = name_id(c, unknown_name, &empty_id);
			if (ret)
				goto out;
			ids[0] = empty_id;
		}
		len *= sizeof(*ids);
		ret = htab__upsert(c->stacks, ids, len, htab__hash(ids, len), &e);
		if (ret < 0)
			goto out;
		/* unsigned add: wraps like two's complement instead of overflowing */
		e->val += (uint64_t)v;
	}
	ret = 0;
out:
	free(ids);
	return ret;
}

static int collect_lines(struct folded_ctx *c)
{
	size_t iter = 0, n = htab__count(c->stacks);
	struct htab_entry *e;
	struct fstack *l;

	c->lines = malloc((n ? n : 1) * sizeof(*c->lines));
	if (!c->lines)
		return -ENOMEM;
	while ((e = htab__next(c->stacks, &iter))) {
		if (!e->val)
			continue;
		l = &c->lines[c->nlines++];
		l->ids = e->key;
		l->n = e->klen / sizeof(*l->ids);
		l->val = (int64_t)e->val;
	}
	return 0;
}

/*
 * Byte order of the joined "a;b;c" text, without building it: the texts agree
 * up to the first frame whose name differs, and there the names decide unless
 * one is a prefix of the other, in which case what follows the shorter name
 * (';' or the end of the stack, which sorts first) is compared instead.
 */
static int cmp_lines(const void *a, const void *b, void *arg)
{
	const struct fstack *x = a, *y = b;
	const struct fname *names = arg, *nx, *ny;
	size_t i, n = x->n < y->n ? x->n : y->n, m;
	int r, cx, cy;

	for (i = 0; i < n && x->ids[i] == y->ids[i]; i++)
		;
	if (i == n)
		return (x->n > y->n) - (x->n < y->n);
	nx = &names[x->ids[i]];
	ny = &names[y->ids[i]];
	m = nx->len < ny->len ? nx->len : ny->len;
	r = memcmp(nx->s, ny->s, m);
	if (r)
		return r;
	cx = nx->len > m ? (unsigned char)nx->s[m] : (i + 1 < x->n ? ';' : -1);
	cy = ny->len > m ? (unsigned char)ny->s[m] : (i + 1 < y->n ? ';' : -1);
	return (cx > cy) - (cx < cy);
}

static void obuf_flush(struct obuf *o)
{
	if (o->len && !o->err && fwrite(o->buf, 1, o->len, o->out) != o->len)
		o->err = errno ? -errno : -EIO;
	o->len = 0;
}

static void obuf_put(struct obuf *o, const char *s, size_t len)
{
	if (o->len + len > OBUF_SIZE) {
		obuf_flush(o);
		if (len > OBUF_SIZE) {
			if (!o->err && fwrite(s, 1, len, o->out) != len)
				o->err = errno ? -errno : -EIO;
			return;
		}
	}
	memcpy(o->buf + o->len, s, len);
	o->len += len;
}

static int emit(struct folded_ctx *c, FILE *out)
{
	struct obuf o = { .out = out };
	char num[32];
	size_t i, k;
	int n;

	o.buf = malloc(OBUF_SIZE);
	if (!o.buf)
		return -ENOMEM;
	for (i = 0; i < c->nlines && !o.err; i++) {
		const struct fstack *l = &c->lines[i];

		for (k = 0; k < l->n; k++) {
			const struct fname *nm = &c->name_of[l->ids[k]];

			if (k)
				obuf_put(&o, ";", 1);
			obuf_put(&o, nm->s, nm->len);
		}
		n = snprintf(num, sizeof(num), " %" PRId64 "\n", l->val);
		obuf_put(&o, num, (size_t)n);
	}
	obuf_flush(&o);
	free(o.buf);
	if (o.err)
		return o.err;
	if (fflush(out) || ferror(out))
		return errno ? -errno : -EIO;
	return 0;
}

int folded__write(const struct profile *p, uint32_t value_index, FILE *out)
{
	struct folded_ctx c = { .p = p };
	int err;

	if (!p || !out || value_index >= p->nvalues || value_index >= PROFILE_MAX_VALUES)
		return -EINVAL;
	err = map_frame_names(&c);
	if (err)
		goto cleanup;
	err = merge_stacks(&c, value_index);
	if (err)
		goto cleanup;
	err = collect_lines(&c);
	if (err)
		goto cleanup;
	qsort_r(c.lines, c.nlines, sizeof(*c.lines), cmp_lines, c.name_of);
	errno = 0;
	err = emit(&c, out);
cleanup:
	free(c.lines);
	htab__free(c.stacks);
	arena__free(c.arena);
	htab__free(c.names);
	free(c.frame_name);
	free(c.name_of);
	return err;
}
