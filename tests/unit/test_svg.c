/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* svg__write (the flame graph) and folded__read (folded stacks back into a profile). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aggregate/profile.h"
#include "write/folded_read.h"
#include "write/writers.h"

/* One drawn frame as the SVG states it. */
struct gframe {
	char kind[4];
	uint64_t o, v;
	unsigned d;
	char name[256];
	char value[96]; /* the tooltip's second line */
	double x, y, w;
	int rgb[3];
};

struct svgdoc {
	char *text;
	struct gframe *f;
	size_t n;
};

static char *render(const struct profile *p, const struct svg_opts *o)
{
	FILE *f = tmpfile();
	char *buf;
	long len;

	assert_non_null(f);
	assert_int_equal(svg__write(p, o, f), 0);
	len = ftell(f);
	assert_true(len > 0);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* Every byte sequence is valid UTF-8 (the browser refuses the document otherwise). */
static bool valid_utf8(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n, i;

	while (*s) {
		if (*s < 0x80) {
			s++;
			continue;
		}
		n = *s >= 0xf0 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc2 ? 2 : 0;
		if (!n || *s > 0xf4)
			return false;
		for (i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return false;
		s += n;
	}
	return true;
}

static struct svgdoc parse(char *text)
{
	struct svgdoc d = { .text = text };
	const char *p = strstr(text, "<g id=\"frames\">");
	size_t cap = 0;

	assert_non_null(p);
	while ((p = strstr(p, "<g class=\""))) {
		struct gframe g = { 0 };
		const char *t, *nl;
		int got;

		got = sscanf(p, "<g class=\"%3[a-z]\" data-o=\"%lu\" data-v=\"%lu\" data-d=\"%u\">",
			     g.kind, &g.o, &g.v, &g.d);
		assert_int_equal(got, 4);
		t = strstr(p, "<title>") + 7;
		nl = strchr(t, '\n');
		assert_true(nl - t < (long)sizeof(g.name));
		memcpy(g.name, t, nl - t);
		t = nl + 1;
		nl = strstr(t, "</title>");
		memcpy(g.value, t, nl - t);
		t = strstr(nl, "<rect ");
		got = sscanf(t,
			     "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"15\" "
			     "fill=\"rgb(%d,%d,%d)\"",
			     &g.x, &g.y, &g.w, &g.rgb[0], &g.rgb[1], &g.rgb[2]);
		assert_int_equal(got, 6);
		if (d.n == cap) {
			cap = cap ? cap * 2 : 64;
			d.f = realloc(d.f, cap * sizeof(*d.f));
			assert_non_null(d.f);
		}
		d.f[d.n++] = g;
		p = t;
	}
	assert_true(valid_utf8(text));
	return d;
}

static void doc_free(struct svgdoc *d)
{
	free(d->f);
	free(d->text);
}

/* The frame at this depth with this name (unique in the small tests). */
static const struct gframe *find(const struct svgdoc *d, const char *name, unsigned depth)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->f[i].d == depth && !strcmp(d->f[i].name, name))
			return &d->f[i];
	return NULL;
}

static uint32_t frame(struct profile *p, const char *name, uint32_t kind, uint64_t addr)
{
	struct pframe f = { .name = name, .kind = kind, .mapping = -1, .addr = addr };
	int idx = profile__add_frame(p, &f);

	assert_true(idx >= 0);
	return (uint32_t)idx;
}

/* "a;b;c" root first; the first frame is a root, the others native. */
static void sample(struct profile *p, const char *stack, int64_t v0, uint64_t addr)
{
	uint32_t frames[64], n = 0;
	int64_t values[PROFILE_MAX_VALUES] = { v0 };
	char *copy = strdup(stack), *save = NULL, *tok;

	for (tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save), n++)
		frames[n] = frame(p, tok, n ? FRAME_NATIVE : FRAME_ROOT, addr);
	assert_int_equal(profile__add_sample(p, frames, n, values, NULL, 0), 0);
	free(copy);
}

static struct profile *new_profile(void)
{
	struct profile *p = profile__new();

	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	return p;
}

static void test_merge_and_totals(void **state)
{
	struct profile *p = new_profile();
	const struct gframe *all, *main_, *a, *b, *q;
	struct svgdoc d;

	(void)state;
	sample(p, "p;main;b", 2, 0);
	sample(p, "p;main;a", 3, 0x10);
	sample(p, "q;x", 1, 0);
	sample(p, "p;main;a", 4, 0x20); /* another address, same name: one frame */
	sample(p, "p;main", 1, 0);
	sample(p, "p;zero", 0, 0); /* no width: not drawn */
	d = parse(render(p, NULL));
	assert_non_null(strstr(d.text, "Total: 11 samples"));
	assert_non_null(strstr(d.text, ">Flame Graph</text>"));
	assert_int_equal(d.n, 7); /* all p main a b q x */
	all = find(&d, "all", 0);
	main_ = find(&d, "main", 2);
	a = find(&d, "a", 3);
	b = find(&d, "b", 3);
	q = find(&d, "q", 1);
	assert_non_null(all);
	assert_non_null(main_);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(q);
	assert_null(find(&d, "zero", 2));
	assert_int_equal(all->v, 11);
	assert_int_equal(find(&d, "p", 1)->v, 10);
	assert_int_equal(main_->v, 10);
	/* children in name order, each starting where the previous ended */
	assert_int_equal(a->v, 7);
	assert_int_equal(a->o, 0);
	assert_int_equal(b->v, 2);
	assert_int_equal(b->o, 7);
	assert_int_equal(q->o, 10);
	assert_int_equal(find(&d, "x", 2)->o, 10);
	assert_string_equal(a->value, "7 samples (63.64%)");
	assert_string_equal(q->value, "1 sample (9.09%)");
	/* geometry: 1180 px for 11 samples, roots at the bottom */
	assert_true(all->w > 1179.9 && all->w < 1180.1);
	assert_true(a->w > 750.8 && a->w < 751.0);
	assert_true(b->x > a->x + a->w - 0.02 && b->x < a->x + a->w + 0.02);
	assert_true(a->y < main_->y && main_->y < all->y);
	assert_non_null(strstr(d.text, "data-inv=\"0\""));
	assert_non_null(strstr(d.text, "data-hidden=\"0\""));
	/* self-contained: no external reference */
	assert_null(strstr(d.text, "href"));
	for (const char *h = strstr(d.text, "http"); h; h = strstr(h + 1, "http"))
		assert_memory_equal(h, "http://www.w3.org/2000/svg", 26);
	doc_free(&d);
	profile__free(p);
}

static void test_escaping(void **state)
{
	struct profile *p = new_profile();
	uint32_t s[6];
	int64_t v[PROFILE_MAX_VALUES] = { 5 };
	struct svgdoc d;
	const char *long_utf8;
	const struct gframe *g;
	char *t;

	(void)state;
	s[0] = frame(p, "a&b", FRAME_ROOT, 0);
	s[1] = frame(p, "std::map<int, std::string>::operator[]", FRAME_NATIVE, 0);
	s[2] = frame(p, "say \"hi\" 'there' ]]> </g>", FRAME_NATIVE, 0);
	s[3] = frame(p, "bad\xff\xfe utf8\x01\x1f", FRAME_NATIVE, 0);
	/* long, multi-byte, in a frame too narrow for it: cut between characters */
#define CAFE "caf\xc3\xa9_"
	long_utf8 = "\xc3\xa9\xc3\xa8\xe2\x82\xac\xf0\x9f\x94\xa5 " CAFE CAFE CAFE CAFE CAFE CAFE
		CAFE CAFE CAFE "caf\xc3\xa9";
	s[4] = frame(p, long_utf8, FRAME_NATIVE, 0);
	assert_int_equal(profile__add_sample(p, s, 5, v, NULL, 0), 0);
	s[1] = frame(p, "wide", FRAME_NATIVE, 0);
	v[0] = 40; /* the long name's frame gets 5/45 of 1180 px: ~131 px, 17 chars */
	assert_int_equal(profile__add_sample(p, s, 2, v, NULL, 0), 0);
	profile__add_comment(p, "cmd: ./run <in >out & wait");
	d = parse(render(p, &(struct svg_opts){ .title = "x < y & \"z\"" }));
	assert_non_null(strstr(d.text, ">x &lt; y &amp; &quot;z&quot;</text>"));
	assert_non_null(strstr(d.text, ">cmd: ./run &lt;in &gt;out &amp; wait</text>"));
	assert_non_null(find(&d, "a&amp;b", 1));
	assert_non_null(find(&d, "std::map&lt;int, std::string&gt;::operator[]", 2));
	assert_non_null(find(&d, "say &quot;hi&quot; &#39;there&#39; ]]&gt; &lt;/g&gt;", 3));
	/*
	 * the profile stores invalid bytes and control characters escaped
	 * (util/strsafe.h); the SVG writer's own U+FFFD and spaces stay for
	 * strings that reach it any other way
	 */
	assert_non_null(find(&d, "bad\\xff\\xfe utf8\\x01\\x1f", 4));
	g = find(&d, long_utf8, 5);
	assert_non_null(g);
	t = strstr(d.text, "<title>\xc3\xa9\xc3\xa8");
	assert_non_null(t);
	t = strstr(t, "<text");
	assert_non_null(t);
	/* 17 characters fit: 15 of the name and ".." */
	assert_non_null(
		strstr(t, ">\xc3\xa9\xc3\xa8\xe2\x82\xac\xf0\x9f\x94\xa5 " CAFE CAFE "..</text>"));
	/* the only CDATA section is the script's */
	t = strstr(d.text, "]]>");
	assert_non_null(t);
	assert_non_null(strstr(t, "</script>"));
	assert_true(strstr(t, "</script>") - t < 20);
	doc_free(&d);
	profile__free(p);
}

static void test_inverted(void **state)
{
	struct profile *p = new_profile();
	const struct gframe *a, *b, *main_, *x, *pp;
	struct svgdoc d;

	(void)state;
	sample(p, "p;main;a", 3, 0);
	sample(p, "q;x;a", 2, 0);
	sample(p, "p;main;b", 1, 0);
	d = parse(render(p, &(struct svg_opts){ .inverted = true }));
	assert_non_null(strstr(d.text, "data-inv=\"1\""));
	assert_non_null(strstr(d.text, ">Icicle Graph</text>"));
	/* leaves first: a (both callers), then who called it */
	a = find(&d, "a", 1);
	b = find(&d, "b", 1);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->v, 5);
	assert_int_equal(b->v, 1);
	assert_int_equal(b->o, 5);
	main_ = find(&d, "main", 2);
	x = find(&d, "x", 2);
	assert_int_equal(main_->o, 0);
	assert_int_equal(main_->v, 3);
	assert_int_equal(x->o, 3);
	assert_int_equal(x->v, 2);
	pp = find(&d, "p", 3);
	assert_int_equal(pp->v, 3);
	assert_int_equal(find(&d, "q", 3)->o, 3);
	/* two "main" nodes: under a and under b */
	{
		uint64_t sum = 0;
		int n = 0;

		for (size_t i = 0; i < d.n; i++)
			if (d.f[i].d == 2 && !strcmp(d.f[i].name, "main"))
				sum += d.f[i].v, n++;
		assert_int_equal(n, 2);
		assert_int_equal(sum, 4);
	}
	/* top down */
	assert_true(find(&d, "all", 0)->y < a->y && a->y < main_->y && main_->y < pp->y);
	doc_free(&d);
	profile__free(p);
}

static void test_prune_tiny_stacks(void **state)
{
	struct profile *p = new_profile();
	struct svgdoc d;
	char stack[64];
	size_t len;
	int i;

	(void)state;
	sample(p, "p;main;hot", 1000000, 0);
	for (i = 0; i < 10000; i++) {
		snprintf(stack, sizeof(stack), "p;main;tiny_%d;leaf", i);
		sample(p, stack, 1, 0);
	}
	d = parse(render(p, NULL));
	len = strlen(d.text);
	/* drawn: all, p, main, hot; tiny_N and their leaves merged */
	assert_int_equal(d.n, 4);
	assert_int_equal(find(&d, "main", 2)->v, 1010000);
	assert_int_equal(find(&d, "hot", 3)->v, 1000000);
	assert_non_null(strstr(d.text, "data-hidden=\"20000\""));
	assert_non_null(strstr(d.text, "20,000 frames narrower than 0.1% of the width (1.2 px) "
				       "merged into their parents: 0.99% of the total"));
	/*
	 * The merged frames are carried for search and zoom, compactly: their
	 * names once each, then four numbers a frame (tiny_N is a new name
	 * every time, the worst case)
	 */
	assert_non_null(strstr(d.text, "<script type=\"application/json\" id=\"merged\">"));
	assert_non_null(strstr(d.text, "[\"tiny_9999\",\"n\",\"rgb("));
	printf("prune: %zu bytes for 4 frames drawn and 20000 merged\n", len);
	assert_true(len < 16384 + 20000 * 48);
	doc_free(&d);

	/* a finer threshold draws them all */
	d = parse(render(p, &(struct svg_opts){ .min_frac = 1e-7 }));
	assert_int_equal(d.n, 4 + 20000);
	assert_non_null(strstr(d.text, "data-hidden=\"0\""));
	assert_null(strstr(d.text, "merged into their parents"));
	doc_free(&d);
	profile__free(p);
}

/*
 * The merged frames' record: names once, then (parent, name, offset from
 * the parent, value) per frame, parents first; a parent < 0 is drawn frame
 * -1 - parent in document order (all, a, b here), one >= 0 a merged one.
 * A name with a quote and a '>' is JSON-escaped, so CDATA cannot end early.
 */
static void test_merged_record(void **state)
{
	struct profile *p = new_profile();
	char *out, *js;

	(void)state;
	sample(p, "a;b", 100000, 0);
	sample(p, "a;c\">]]>", 50, 0);
	sample(p, "a;c\">]]>;d", 20, 0);
	out = render(p, NULL);
	js = strstr(out, "<script type=\"application/json\" id=\"merged\"><![CDATA[");
	assert_non_null(js);
	assert_non_null(strstr(js, "{\"names\":[\n[\"c\\\"\\u003e]]\\u003e\",\"n\",\"rgb("));
	assert_non_null(strstr(js, "[\"d\",\"n\",\"rgb("));
	/* c under a (drawn #1) after b: offset 100000, value 70; d under c (merged #0) */
	assert_non_null(strstr(js, "\"n\":[-2,0,100000,70,0,1,0,20]}"));
	assert_non_null(strstr(out, "data-hidden=\"2\""));
	free(out);
	profile__free(p);
}

static void test_kind_colours(void **state)
{
	static const struct {
		const char *name;
		uint32_t kind;
	} fr[] = {
		{ "python3", FRAME_ROOT },
		{ "Worker [42]", FRAME_ROOT },
		{ "PyEval_X", FRAME_NATIVE },
		{ "Model.forward (train.py:42)", FRAME_PYTHON },
		{ "do_syscall_64_[k]", FRAME_KERNEL },
		{ "[cuda] sgemm", FRAME_CUDA },
	};
	struct profile *p = new_profile();
	int64_t v[PROFILE_MAX_VALUES] = { 1 };
	uint32_t s[6];
	struct svgdoc d;
	size_t i;

	(void)state;
	for (i = 0; i < 6; i++)
		s[i] = frame(p, fr[i].name, fr[i].kind, 0);
	assert_int_equal(profile__add_sample(p, s, 6, v, NULL, 0), 0);
	d = parse(render(p, NULL));
	assert_int_equal(d.n, 7);
	for (i = 0; i < d.n; i++) {
		const struct gframe *g = &d.f[i];
		int r = g->rgb[0], gr = g->rgb[1], b = g->rgb[2];

		switch (g->kind[0]) {
		case 'r': /* grey */
			assert_true(r == gr && b >= r && b - r < 30);
			break;
		case 'n': /* red */
			assert_true(r >= 200 && gr < 100 && b < 100);
			break;
		case 'p': /* green */
			assert_true(gr > r + 50 && gr > b + 50);
			break;
		case 'k': /* orange */
			assert_true(r >= 230 && gr >= 140 && gr < r && b < 50);
			break;
		case 'c': /* blue-violet */
			assert_true(b > r + 50 && b > gr + 50);
			break;
		default:
			fail_msg("unknown kind class '%s'", g->kind);
		}
	}
	assert_string_equal(find(&d, "python3", 1)->kind, "r");
	assert_string_equal(find(&d, "PyEval_X", 3)->kind, "n");
	assert_string_equal(find(&d, "Model.forward (train.py:42)", 4)->kind, "p");
	assert_string_equal(find(&d, "do_syscall_64_[k]", 5)->kind, "k");
	assert_string_equal(find(&d, "[cuda] sgemm", 6)->kind, "c");
	/* the legend names each kind drawn */
	assert_non_null(strstr(d.text, ">kernel</text>"));
	assert_non_null(strstr(d.text, ">CUDA</text>"));
	doc_free(&d);
	profile__free(p);
}

/* The default value is shown, in its unit, made readable. */
static void test_units(void **state)
{
	struct profile *p = profile__new();
	struct svgdoc d;
	uint32_t s[2];
	int64_t v[PROFILE_MAX_VALUES] = { 3, 3 * 1048576 / 2 };

	(void)state;
	assert_int_equal(profile__add_value_type(p, "alloc_objects", "count"), 0);
	assert_int_equal(profile__add_value_type(p, "alloc_space", "bytes"), 1);
	p->default_value = 1;
	s[0] = frame(p, "app", FRAME_ROOT, 0);
	s[1] = frame(p, "malloc", FRAME_NATIVE, 0);
	assert_int_equal(profile__add_sample(p, s, 2, v, NULL, 0), 0);
	d = parse(render(p, NULL));
	assert_non_null(strstr(d.text, "Total: 1.50 MiB alloc_space"));
	assert_string_equal(find(&d, "malloc", 2)->value, "1.50 MiB (100.00%)");
	doc_free(&d);
	profile__free(p);

	p = profile__new();
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_value_type(p, "cpu", "nanoseconds"), 1);
	profile__set_period(p, "cpu", "nanoseconds", 10000000);
	p->duration_ns = 2500000000LL;
	p->time_ns = 1700000000LL * 1000000000LL;
	s[0] = frame(p, "app", FRAME_ROOT, 0);
	v[0] = 1234;
	v[1] = 9870000000LL; /* each sample weighs its thread's CPU time, not the period */
	assert_int_equal(profile__add_sample(p, s, 1, v, NULL, 0), 0);
	d = parse(render(p, NULL));
	/* samples with the time they stand for (the cpu value), the run's length and start */
	assert_non_null(strstr(d.text, "Total: 1,234 samples (\xe2\x89\x88 9.87 s cpu) "
				       "\xc2\xb7 over 2.50 s \xc2\xb7 2023-11-14 22:13:20 UTC"));
	doc_free(&d);
	p->default_value = 1;
	d = parse(render(p, NULL));
	assert_string_equal(find(&d, "app", 1)->value, "9.87 s (100.00%)");
	doc_free(&d);
	profile__free(p);

	p = profile__new();
	assert_int_equal(profile__add_value_type(p, "gpu_time", "nanoseconds"), 0);
	s[0] = frame(p, "k", FRAME_ROOT, 0);
	v[0] = 4200;
	assert_int_equal(profile__add_sample(p, s, 1, v, NULL, 0), 0);
	d = parse(render(p, NULL));
	assert_string_equal(find(&d, "k", 1)->value, "4.20 \xc2\xb5s (100.00%)");
	doc_free(&d);
	profile__free(p);
}

static void test_empty_profile(void **state)
{
	struct profile *p = new_profile();
	char *t;

	(void)state;
	t = render(p, NULL);
	assert_non_null(strstr(t, ">No samples</text>"));
	assert_non_null(strstr(t, "</svg>\n"));
	free(t);
	profile__free(p);
}

static struct profile *read_text(const char *text, struct folded_read_stats *st, int *err)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct profile *p = NULL;

	assert_non_null(f);
	*err = folded__read(f, &p, st);
	fclose(f);
	return p;
}

static void test_folded_read(void **state)
{
	const char *text = "cpu_split;main;dispatch;work_a 500\n"
			   "cpu_split;main;dispatch;work_b 300\r\n"
			   "\n"
			   "cpu_split;main;dispatch;work_c   200  \t\r\n"
			   "   \r\n"
			   "python3 [77];MainThread [77];run (x.py:3);zlib_[k] 7\n"
			   "python3 [77];[cuda] sgemm_128;;x 1\n"
			   "no count here\n"
			   "bad count 12x\n"
			   "neg -3\n"
			   "zero;count 0\n"
			   " 5\n";
	struct folded_read_stats st;
	struct profile *p;
	struct svgdoc d;
	int err;
	size_t i;

	(void)state;
	p = read_text(text, &st, &err);
	assert_int_equal(err, 0);
	assert_non_null(p);
	assert_int_equal(st.lines, 10);
	assert_int_equal(st.stacks, 6);
	assert_int_equal(st.bad, 4);
	assert_int_equal(st.first_bad, 8);
	assert_int_equal(p->nvalues, 1);
	assert_string_equal(p->value_types[0].type, "samples");
	for (i = 0; i < p->nframes; i++) {
		const struct pframe *f = &p->frames[i];

		if (!strcmp(f->name, "work_c") || !strcmp(f->name, "x"))
			assert_int_equal(f->kind, FRAME_NATIVE);
		else if (!strcmp(f->name, "run (x.py:3)"))
			assert_int_equal(f->kind, FRAME_PYTHON);
		else if (!strcmp(f->name, "zlib_[k]"))
			assert_int_equal(f->kind, FRAME_KERNEL);
		else if (!strcmp(f->name, "[cuda] sgemm_128"))
			assert_int_equal(f->kind, FRAME_CUDA);
		else if (!strcmp(f->name, "python3 [77]") || !strcmp(f->name, "MainThread [77]") ||
			 !strcmp(f->name, "cpu_split"))
			assert_int_equal(f->kind, FRAME_ROOT);
	}
	d = parse(render(p, &(struct svg_opts){ .min_frac = 1e-6 }));
	assert_int_equal(find(&d, "all", 0)->v, 1008);
	assert_int_equal(find(&d, "work_c", 4)->v, 200);
	assert_int_equal(find(&d, "dispatch", 3)->v, 1000);
	assert_string_equal(find(&d, "run (x.py:3)", 3)->kind, "p");
	assert_non_null(find(&d, "[unknown]", 3)); /* the empty frame */
	assert_null(find(&d, "zero", 1));
	doc_free(&d);
	profile__free(p);

	/* stacks folded by us read back to the same lines */
	p = read_text("a;b 3\na;b 4\n", &st, &err);
	assert_int_equal(err, 0);
	assert_int_equal(p->nframes, 2);
	assert_int_equal(p->nsamples, 2);
	profile__free(p);

	p = read_text("", &st, &err);
	assert_int_equal(err, -ENODATA);
	assert_null(p);
	assert_int_equal(st.lines, 0);
	p = read_text("\n\r\n  \n", &st, &err);
	assert_int_equal(err, -ENODATA);
	assert_int_equal(st.lines, 0);
	p = read_text("just words\nmore words\n", &st, &err);
	assert_int_equal(err, -ENODATA);
	assert_null(p);
	assert_int_equal(st.bad, 2);
	assert_int_equal(st.first_bad, 1);
}

static void test_guess_kind(void **state)
{
	static const struct {
		const char *name;
		uint32_t depth, kind;
	} c[] = {
		{ "anything", 0, FRAME_ROOT },
		{ "do_syscall_64_[k]", 3, FRAME_KERNEL },
		{ "[cuda] ampere_sgemm", 9, FRAME_CUDA },
		{ "Model.forward (train.py:42)", 4, FRAME_PYTHON },
		{ "<module> (/a b/c.py:1)", 4, FRAME_PYTHON },
		{ "f (x.py:)", 4, FRAME_NATIVE },
		{ "f (:12)", 4, FRAME_NATIVE },
		{ "operator() (int)", 4, FRAME_NATIVE },
		{ "DataLoader0 [4121]", 1, FRAME_ROOT },
		{ "arr[12]", 2, FRAME_NATIVE },
		{ "libc.so.6+0x1234", 2, FRAME_NATIVE },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint32_t k = folded__guess_kind(c[i].name, strlen(c[i].name), c[i].depth);

		if (k != c[i].kind)
			fail_msg("%s: kind %u, expected %u", c[i].name, k, c[i].kind);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_and_totals),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_inverted),
		cmocka_unit_test(test_prune_tiny_stacks),
		cmocka_unit_test(test_merged_record),
		cmocka_unit_test(test_kind_colours),
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_empty_profile),
		cmocka_unit_test(test_folded_read),
		cmocka_unit_test(test_guess_kind),
	};

	return cmocka_run_group_tests_name("svg", tests, NULL, NULL);
}
