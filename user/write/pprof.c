/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "util/htab.h"
#include "write/writers.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__ValueType PbValueType;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Label PbLabel;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;

/*
 * Everything the message points to lives in a few flat arrays owned here,
 * so building 100k samples costs a handful of allocations, not millions.
 */
struct pprof_ctx {
	const struct profile *p;
	PbProfile prof;

	struct htab *strings; /* string bytes -> string table index */
	char **strtab;
	size_t nstr, cap_str;

	PbValueType vtypes[PROFILE_MAX_VALUES], *vtype_ptrs[PROFILE_MAX_VALUES];
	PbValueType period_type;
	int64_t *comments;

	PbMapping *maps, **map_ptrs;
	uint64_t *map_id; /* profile mapping index -> pprof mapping id (main executables first) */

	uint64_t *loc_of;   /* frame index -> location id, 0 = not used by any sample */
	uint32_t *frame_of; /* location id - 1 -> frame index */
	size_t nlocs;
	PbLocation *locs, **loc_ptrs;
	PbLine *lines, **line_ptrs;

	struct htab *funcs; /* (name, file) string indexes -> function id */
	PbFunction *fns, **fn_ptrs;
	size_t nfns;

	PbSample *samples, **sample_ptrs;
	uint64_t *loc_ids;
	int64_t *values;
	PbLabel *labels, **label_ptrs;
};

/* Index of s in the string table, adding it if new. NULL and "" are index 0. */
static int64_t str_index(struct pprof_ctx *c, const char *s, int *err)
{
	struct htab_entry *e;
	size_t len;
	char **tmp;
	int ret;

	if (!s || !*s)
		return 0;
	len = strlen(s);
	ret = htab__upsert(c->strings, s, len, htab__hash(s, len), &e);
	if (ret < 0) {
		*err = ret;
		return 0;
	}
	if (ret == 0)
		return (int64_t)e->val;
	if (c->nstr == c->cap_str) {
		tmp = realloc(c->strtab, c->cap_str * 2 * sizeof(*tmp));
		if (!tmp) {
			*err = -ENOMEM;
			return 0;
		}
		c->strtab = tmp;
		c->cap_str *= 2;
	}
	/* borrowed: the profile owns the bytes and outlives this writer */
	c->strtab[c->nstr] = (char *)s;
	e->val = c->nstr;
	return (int64_t)c->nstr++;
}

static int init_strings(struct pprof_ctx *c)
{
	c->strings = htab__new(c->p->nframes * 2 + 64, 0);
	c->cap_str = 1024;
	c->strtab = malloc(c->cap_str * sizeof(*c->strtab));
	if (!c->strings || !c->strtab)
		return -ENOMEM;
	/* pprof requires string_table[0] == "" */
	c->strtab[0] = (char *)"";
	c->nstr = 1;
	return 0;
}

static int build_header(struct pprof_ctx *c)
{
	const struct profile *p = c->p;
	PbProfile *prof = &c->prof;
	uint32_t i;
	int err = 0;

	for (i = 0; i < p->nvalues; i++) {
		perftools__profiles__value_type__init(&c->vtypes[i]);
		c->vtypes[i].type = str_index(c, p->value_types[i].type, &err);
		c->vtypes[i].unit = str_index(c, p->value_types[i].unit, &err);
		c->vtype_ptrs[i] = &c->vtypes[i];
	}
	prof->n_sample_type = p->nvalues;
	prof->sample_type = c->vtype_ptrs;

	if (p->period_type.type || p->period_type.unit) {
		perftools__profiles__value_type__init(&c->period_type);
		c->period_type.type = str_index(c, p->period_type.type, &err);
		c->period_type.unit = str_index(c, p->period_type.unit, &err);
		prof->period_type = &c->period_type;
	}
	prof->period = p->period;
	prof->time_nanos = p->time_ns;
	prof->duration_nanos = p->duration_ns;
	if (p->default_value < p->nvalues)
		prof->default_sample_type =
			str_index(c, p->value_types[p->default_value].type, &err);

	if (p->ncomments) {
		c->comments = calloc(p->ncomments, sizeof(*c->comments));
		if (!c->comments)
			return -ENOMEM;
		for (i = 0; i < p->ncomments; i++)
			c->comments[i] = str_index(c, p->comments[i], &err);
		prof->n_comment = p->ncomments;
		prof->comment = c->comments;
	}
	return err;
}

/*
 * How much of the default value each mapping's code is on the stack of
 * (each sample counted once per mapping): w[mapping index].
 */
static int mapping_weights(const struct profile *p, uint64_t *w)
{
	uint32_t *seen = calloc(p->nmappings, sizeof(*seen));
	uint32_t dv = p->default_value < p->nvalues ? p->default_value : 0;

	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		int64_t v = s->values[dv] > 0 ? s->values[dv] : 0;

		for (uint32_t j = 0; j < s->nframes; j++) {
			int32_t m = p->frames[s->frames[j]].mapping;

			if (m < 0 || (size_t)m >= p->nmappings || seen[m] == i + 1)
				continue;
			seen[m] = (uint32_t)(i + 1);
			w[m] += (uint64_t)v;
		}
	}
	free(seen);
	return 0;
}

/*
 * The main executable's mapping comes first (pprof takes mapping 1 for the
 * program: its "File:" header, its symbolization): programs before
 * libraries, the program most of the profile ran in first (a pyenv shim's
 * bash before exec'ing python is a program too), the rest in the order the
 * profile met them.
 */
static int build_mappings(struct pprof_ctx *c)
{
	const struct profile *p = c->p;
	size_t i, k = 0, n = p->nmappings, best = n;
	uint64_t *w;
	int err = 0, pass;

	if (!n)
		return 0;
	c->maps = calloc(n, sizeof(*c->maps));
	c->map_ptrs = calloc(n, sizeof(*c->map_ptrs));
	c->map_id = calloc(n, sizeof(*c->map_id));
	w = calloc(n, sizeof(*w));
	if (!c->maps || !c->map_ptrs || !c->map_id || !w || mapping_weights(p, w)) {
		free(w);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		if ((p->mappings[i].flags & PMAP_MAIN) && (best == n || w[i] > w[best]))
			best = i;
	free(w);
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < n; i++) {
			const struct pmapping *m = &p->mappings[i];
			PbMapping *pm = &c->maps[k];
			bool is_main = m->flags & PMAP_MAIN;

			if ((pass == 0 && i != best) || (pass == 1 && (i == best || !is_main)) ||
			    (pass == 2 && is_main))
				continue;
			perftools__profiles__mapping__init(pm);
			pm->id = k + 1;
			pm->memory_start = m->start;
			pm->memory_limit = m->limit;
			pm->file_offset = m->file_offset;
			pm->filename = str_index(c, m->path, &err);
			pm->build_id = str_index(c, m->build_id, &err);
			/* named here: pprof may name again only what we could not */
			pm->has_functions = !(m->flags & PMAP_UNNAMED);
			pm->has_line_numbers = !!(m->flags & PMAP_LINES);
			c->map_ptrs[k] = pm;
			c->map_id[i] = ++k;
		}
	}
	c->prof.n_mapping = n;
	c->prof.mapping = c->map_ptrs;
	return err;
}

/* Give every frame that a sample uses a location id, in first-use order. */
static int assign_locations(struct pprof_ctx *c)
{
	const struct profile *p = c->p;
	size_t i, j;

	c->loc_of = calloc(p->nframes ? p->nframes : 1, sizeof(*c->loc_of));
	c->frame_of = calloc(p->nframes ? p->nframes : 1, sizeof(*c->frame_of));
	if (!c->loc_of || !c->frame_of)
		return -ENOMEM;
	for (i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];

		for (j = 0; j < s->nframes; j++) {
			uint32_t f = s->frames[j];

			if (f >= p->nframes)
				return -EINVAL;
			if (c->loc_of[f])
				continue;
			c->frame_of[c->nlocs] = f;
			c->loc_of[f] = ++c->nlocs;
		}
	}
	return 0;
}

/* One function per (name, file): its locations differ by line only. */
static uint64_t function_id(struct pprof_ctx *c, const struct pframe *f, int *err)
{
	struct htab_entry *e;
	int64_t key[2];
	PbFunction *fn;
	int ret;

	key[0] = str_index(c, f->func ? f->func : f->name, err);
	key[1] = str_index(c, f->file, err);
	ret = htab__upsert(c->funcs, key, sizeof(key), htab__hash(key, sizeof(key)), &e);
	if (ret < 0) {
		*err = ret;
		return 0;
	}
	if (ret == 0) {
		fn = c->fn_ptrs[e->val - 1];
		if (!fn->start_line && f->start_line)
			fn->start_line = f->start_line;
		return e->val;
	}
	fn = &c->fns[c->nfns];
	perftools__profiles__function__init(fn);
	fn->id = c->nfns + 1;
	fn->name = key[0];
	fn->system_name = f->sysname ? str_index(c, f->sysname, err) : key[0];
	fn->filename = key[1];
	fn->start_line = f->start_line;
	c->fn_ptrs[c->nfns++] = fn;
	e->val = fn->id;
	return e->val;
}

static int has_address(const struct pframe *f)
{
	/* synthetic roots, Python and CUDA frames have no native code address */
	return f->kind == FRAME_KERNEL || f->kind == FRAME_NATIVE;
}

static int build_locations(struct pprof_ctx *c)
{
	const struct profile *p = c->p;
	size_t i, n = c->nlocs;
	int err = 0;

	if (!n)
		return 0;
	c->locs = calloc(n, sizeof(*c->locs));
	c->loc_ptrs = calloc(n, sizeof(*c->loc_ptrs));
	c->lines = calloc(n, sizeof(*c->lines));
	c->line_ptrs = calloc(n, sizeof(*c->line_ptrs));
	c->fns = calloc(n, sizeof(*c->fns));
	c->fn_ptrs = calloc(n, sizeof(*c->fn_ptrs));
	/* copied keys: function_id() builds each key on its stack */
	c->funcs = htab__new(n, HTAB_COPY_KEYS);
	if (!c->locs || !c->loc_ptrs || !c->lines || !c->line_ptrs || !c->fns || !c->fn_ptrs ||
	    !c->funcs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct pframe *f = &p->frames[c->frame_of[i]];
		PbLocation *loc = &c->locs[i];
		PbLine *line = &c->lines[i];

		perftools__profiles__location__init(loc);
		perftools__profiles__line__init(line);
		loc->id = i + 1;
		if (has_address(f)) {
			loc->address = f->addr;
			if (f->mapping >= 0 && (size_t)f->mapping < p->nmappings) {
				PbMapping *pm = &c->maps[c->map_id[f->mapping] - 1];

				loc->mapping_id = c->map_id[f->mapping];
				if (f->file)
					pm->has_filenames = 1;
				if (f->line)
					pm->has_line_numbers = 1;
			}
		}
		line->function_id = function_id(c, f, &err);
		line->line = f->line;
		c->line_ptrs[i] = line;
		loc->n_line = 1;
		loc->line = &c->line_ptrs[i];
		c->loc_ptrs[i] = loc;
	}
	c->prof.n_location = n;
	c->prof.location = c->loc_ptrs;
	c->prof.n_function = c->nfns;
	c->prof.function = c->fn_ptrs;
	return err;
}

static int build_samples(struct pprof_ctx *c)
{
	const struct profile *p = c->p;
	size_t i, j, ns = p->nsamples, nframes = 0, nlabels = 0, fi = 0, li = 0;
	int err = 0;

	if (!ns)
		return 0;
	for (i = 0; i < ns; i++) {
		nframes += p->samples[i].nframes;
		nlabels += p->samples[i].nlabels;
	}
	c->samples = calloc(ns, sizeof(*c->samples));
	c->sample_ptrs = calloc(ns, sizeof(*c->sample_ptrs));
	c->loc_ids = calloc(nframes ? nframes : 1, sizeof(*c->loc_ids));
	c->values = calloc(ns * p->nvalues, sizeof(*c->values));
	c->labels = calloc(nlabels ? nlabels : 1, sizeof(*c->labels));
	c->label_ptrs = calloc(nlabels ? nlabels : 1, sizeof(*c->label_ptrs));
	if (!c->samples || !c->sample_ptrs || !c->loc_ids || !c->values || !c->labels ||
	    !c->label_ptrs)
		return -ENOMEM;

	for (i = 0; i < ns; i++) {
		const struct psample *s = &p->samples[i];
		PbSample *ps = &c->samples[i];

		perftools__profiles__sample__init(ps);
		/* pprof wants the leaf first; the profile stores the root first */
		ps->n_location_id = s->nframes;
		ps->location_id = &c->loc_ids[fi];
		for (j = 0; j < s->nframes; j++)
			c->loc_ids[fi++] = c->loc_of[s->frames[s->nframes - 1 - j]];

		ps->n_value = p->nvalues;
		ps->value = &c->values[i * p->nvalues];
		memcpy(ps->value, s->values, p->nvalues * sizeof(*ps->value));

		ps->n_label = s->nlabels;
		ps->label = &c->label_ptrs[li];
		for (j = 0; j < s->nlabels && j < PROFILE_MAX_LABELS; j++) {
			const struct plabel *l = &s->labels[j];
			PbLabel *pl = &c->labels[li];

			perftools__profiles__label__init(pl);
			pl->key = str_index(c, l->key, &err);
			if (l->str) {
				pl->str = str_index(c, l->str, &err);
			} else {
				pl->num = l->num;
				pl->num_unit = str_index(c, l->unit, &err);
			}
			c->label_ptrs[li++] = pl;
		}
		c->sample_ptrs[i] = ps;
	}
	c->prof.n_sample = ns;
	c->prof.sample = c->sample_ptrs;
	return err;
}

/*
 * The packed message goes straight into gzip (not raw zlib: pprof and every
 * tool that reads .pb.gz expect the gzip header), piece by piece as
 * protobuf-c packs it: no buffer of the whole message (as big as the
 * profile itself) at the end of a run.
 */
struct gz_sink {
	ProtobufCBuffer base; /* first: protobuf-c calls append with it */
	z_stream zs;
	FILE *out;
	int err;
};

static void gz_feed(struct gz_sink *g, const uint8_t *data, size_t len, int flush)
{
	unsigned char chunk[64 * 1024];
	size_t have;
	int zret;

	g->zs.next_in = (uint8_t *)data;
	g->zs.avail_in = (uInt)len;
	do {
		g->zs.next_out = chunk;
		g->zs.avail_out = sizeof(chunk);
		zret = deflate(&g->zs, flush);
		if (zret == Z_STREAM_ERROR) {
			g->err = -EIO;
			return;
		}
		have = sizeof(chunk) - g->zs.avail_out;
		if (have && fwrite(chunk, 1, have, g->out) != have) {
			g->err = errno ? -errno : -EIO;
			return;
		}
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zret != Z_STREAM_END));
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)b;

	/* avail_in is 32-bit: feed huge pieces in parts */
	while (len && !g->err) {
		size_t step = len > (1u << 30) ? (1u << 30) : len;

		gz_feed(g, data, step, Z_NO_FLUSH);
		data += step;
		len -= step;
	}
}

static int gzip_pack(const PbProfile *prof, FILE *out)
{
	struct gz_sink g = { .base = { .append = gz_append }, .out = out };

	/*
	 * Best speed, as Go's runtime/pprof does: stacks of varint ids compress
	 * about as well at level 1 and it is a third faster on big profiles.
	 */
	if (deflateInit2(&g.zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	perftools__profiles__profile__pack_to_buffer(prof, &g.base);
	if (!g.err)
		gz_feed(&g, NULL, 0, Z_FINISH);
	deflateEnd(&g.zs);
	return g.err;
}

static void ctx_free(struct pprof_ctx *c)
{
	free(c->label_ptrs);
	free(c->labels);
	free(c->values);
	free(c->loc_ids);
	free(c->sample_ptrs);
	free(c->samples);
	htab__free(c->funcs);
	free(c->fn_ptrs);
	free(c->fns);
	free(c->line_ptrs);
	free(c->lines);
	free(c->loc_ptrs);
	free(c->locs);
	free(c->frame_of);
	free(c->loc_of);
	free(c->map_id);
	free(c->map_ptrs);
	free(c->maps);
	free(c->comments);
	free(c->strtab);
	htab__free(c->strings);
}

int pprof__write(const struct profile *p, FILE *out)
{
	struct pprof_ctx c = { .p = p };
	int err;

	if (!p || !out || !p->nvalues || p->nvalues > PROFILE_MAX_VALUES)
		return -EINVAL;
	perftools__profiles__profile__init(&c.prof);
	err = init_strings(&c);
	if (err)
		goto cleanup;
	err = build_header(&c);
	if (err)
		goto cleanup;
	err = build_mappings(&c);
	if (err)
		goto cleanup;
	err = assign_locations(&c);
	if (err)
		goto cleanup;
	err = build_locations(&c);
	if (err)
		goto cleanup;
	err = build_samples(&c);
	if (err)
		goto cleanup;
	c.prof.n_string_table = c.nstr;
	c.prof.string_table = c.strtab;

	errno = 0;
	err = gzip_pack(&c.prof, out);
	if (err)
		goto cleanup;
	if (fflush(out) || ferror(out))
		err = errno ? -errno : -EIO;
cleanup:
	ctx_free(&c);
	return err;
}
