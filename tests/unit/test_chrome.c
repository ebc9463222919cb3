/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The timeline model (user/aggregate/timeline.c) and the Chrome Trace Event
 * Format writer (user/write/chrome.c): JSON that parses, the fields each
 * phase needs, escaping, µs timestamps with ns decimals, event order, GPU
 * tracks, and nested X slices built from CPU sample sequences and off-CPU
 * blocks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aggregate/timeline.h"
#include "write/writers.h"

/* ---- a strict JSON syntax checker (RFC 8259), enough to know a viewer can load it ---- */

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
		p++;
	return p;
}

static const char *value(const char *p, int depth);

static const char *string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
						return NULL;
				p += 5;
				continue;
			}
			if (!*p || !strchr("\"\\/bfnrt", *p))
				return NULL;
		}
		p++;
	}
	return p + 1;
}

static const char *number(const char *p)
{
	const char *s = p;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p > s ? p : NULL;
}

static const char *value(const char *p, int depth)
{
	p = ws(p);
	if (depth > 64)
		return NULL;
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		int obj = *p == '{';

		p = ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				p = string(ws(p));
				if (!p)
					return NULL;
				p = ws(p);
				if (*p++ != ':')
					return NULL;
			}
			p = value(p, depth + 1);
			if (!p)
				return NULL;
			p = ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (*p == '"')
		return string(p);
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	return number(p);
}

static int json_valid(const char *s)
{
	const char *end = value(s, 0);

	return end && !*ws(end);
}

static void test_json_checker_rejects(void **state)
{
	(void)state;
	assert_true(json_valid("{\"a\":[1,2.5,-3,\"x\\n\"],\"b\":{}}"));
	assert_false(json_valid("{\"a\":1,}"));
	assert_false(json_valid("{\"a\":\"\x01\"}"));
	assert_false(json_valid("{\"a\":1.}"));
	assert_false(json_valid("[1] 2"));
}

/* ---- helpers ---- */

static char *render(const struct timeline *tl)
{
	FILE *f = tmpfile();
	char *buf;
	long len;

	assert_non_null(f);
	assert_int_equal(chrome__write(tl, f), 0);
	len = ftell(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	assert_true(json_valid(buf));
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("missing %s in:\n%s", needle, hay);
}

/* ---- writer ---- */

static void test_empty(void **state)
{
	struct timeline *tl = timeline__new();
	char *out;

	(void)state;
	assert_non_null(tl);
	out = render(tl);
	assert_contains(out, "\"traceEvents\":[");
	assert_contains(out, "\"displayTimeUnit\":\"ns\"");
	free(out);
	timeline__free(tl);
}

static void test_metadata_slice_and_args(void **state)
{
	struct timeline *tl = timeline__new();
	struct tl_arg args[] = { { "kernel", "vector_add", 0 }, { "bytes", NULL, 4096 } };
	char *out;

	(void)state;
	assert_int_equal(timeline__set_process_name(tl, 10, "python3"), 0);
	assert_int_equal(timeline__set_thread_name(tl, 10, 11, "worker"), 0);
	assert_int_equal(timeline__set_thread_name(tl, 10, 11, "DataLoader0"), 0);
	assert_int_equal(timeline__set_thread_sort(tl, 10, 11, 3), 0);
	assert_int_equal(timeline__add_slice(tl, 10, 11, 5000000, 1500, "cuLaunchKernel",
					     "cuda_api", args, 2),
			 0);
	out = render(tl);
	assert_contains(out, "{\"ph\":\"M\",\"pid\":10,\"tid\":0,\"name\":\"process_name\","
			     "\"args\":{\"name\":\"python3\"}}");
	/* a rename keeps the latest name, once */
	assert_contains(out, "\"name\":\"thread_name\",\"args\":{\"name\":\"DataLoader0\"}}");
	assert_int_equal(count(out, "thread_name"), 1);
	assert_contains(out, "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":3}}");
	assert_contains(out, "{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":0.000,\"dur\":1.500,"
			     "\"name\":\"cuLaunchKernel\",\"cat\":\"cuda_api\","
			     "\"args\":{\"kernel\":\"vector_add\",\"bytes\":4096}}");
	assert_contains(out, "\"clock_origin_ns\":5000000");
	free(out);
	timeline__free(tl);
}

static void test_escaping(void **state)
{
	struct timeline *tl = timeline__new();
	char *out;

	(void)state;
	/* quote, backslash, newline, tab, a control byte, UTF-8, invalid UTF-8, overlong '/' */
	assert_int_equal(timeline__add_slice(tl, 1, 1, 0, 1,
					     "a\"b\\c\nd\te\x01 caf\xc3\xa9 \xff\xc0\xaf!", NULL,
					     NULL, 0),
			 0);
	out = render(tl);
	assert_contains(out, "\"name\":\"a\\\"b\\\\c\\nd\\te\\u0001 caf\xc3\xa9 "
			     "\\ufffd\\ufffd\\ufffd!\"");
	free(out);
	timeline__free(tl);
}

/* µs with three decimals relative to the earliest event, whatever the order of insertion. */
static void test_timestamps_and_order(void **state)
{
	struct timeline *tl = timeline__new();
	char *out, *a, *b, *c;

	(void)state;
	assert_int_equal(timeline__add_slice(tl, 1, 1, 1001234, 999, "late", NULL, NULL, 0), 0);
	assert_int_equal(timeline__add_slice(tl, 1, 1, 1000000, 7, "short", NULL, NULL, 0), 0);
	assert_int_equal(timeline__add_slice(tl, 1, 1, 1000000, 5000, "long", NULL, NULL, 0), 0);
	out = render(tl);
	a = strstr(out, "\"long\"");
	b = strstr(out, "\"short\"");
	c = strstr(out, "\"late\"");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	/* the parent comes before the slice it contains at the same ts */
	assert_true(a < b && b < c);
	/* in 1/1024 µs: 1234 ns is 1264 steps, its end 2233 ns 2287 */
	assert_contains(out, "\"ts\":1.234375,\"dur\":0.9990234375");
	assert_contains(out, "\"ts\":0.000,\"dur\":5.000");
	free(out);
	timeline__free(tl);
}

static void test_flows_and_gpu_tracks(void **state)
{
	struct timeline *tl = timeline__new();
	uint32_t gpid, gtid, gpid2, gtid2, gpid3, gtid3;
	char *out, *x, *f;

	(void)state;
	assert_int_equal(timeline__gpu_track(tl, 100, "train", 0, 7, &gpid, &gtid), 0);
	assert_int_equal(timeline__gpu_track(tl, 100, "train", 0, 13, &gpid2, &gtid2), 0);
	assert_int_equal(timeline__gpu_track(tl, 200, "other", 0, 7, &gpid3, &gtid3), 0);
	assert_int_equal(gpid, gpid2);
	assert_true(gpid >= TL_GPU_PID_BASE);
	assert_int_not_equal(gpid, gpid3);
	assert_int_not_equal(gtid, gtid2);
	assert_int_equal(gtid, gtid3);

	assert_int_equal(timeline__add_slice(tl, 100, 101, 1000, 2000, "cuLaunchKernel", "cuda_api",
					     NULL, 0),
			 0);
	/* added before the slice it points into: order must still put the slice first */
	assert_int_equal(
		timeline__add_flow(tl, 42, "launch", "cuda_flow", 100, 101, 1000, gpid, gtid, 5000),
		0);
	assert_int_equal(timeline__add_slice(tl, gpid, gtid, 5000, 3000, "vector_add",
					     "cuda_kernel", NULL, 0),
			 0);
	out = render(tl);
	assert_contains(out, "\"args\":{\"name\":\"GPU 0 (train [100])\"}");
	assert_contains(out, "\"args\":{\"name\":\"GPU 0 (other [200])\"}");
	assert_contains(out, "\"args\":{\"name\":\"stream 13\"}");
	assert_contains(out, "{\"ph\":\"s\",\"pid\":100,\"tid\":101,\"ts\":0.000,\"id\":42,");
	assert_contains(out, "\"ts\":4.000,\"id\":42,\"bp\":\"e\"");
	x = strstr(out, "\"vector_add\"");
	f = strstr(out, "\"bp\":\"e\"");
	assert_true(x && f && x < f);
	free(out);
	timeline__free(tl);
}

static void test_counter(void **state)
{
	struct timeline *tl = timeline__new();
	struct tl_arg series[] = { { "inuse_bytes", NULL, 123456 } };
	char *out;

	(void)state;
	assert_int_equal(timeline__add_counter(tl, 7, 2000, "heap", series, 1), 0);
	out = render(tl);
	assert_contains(out, "{\"ph\":\"C\",\"pid\":7,\"ts\":0.000,\"name\":\"heap\","
			     "\"args\":{\"inuse_bytes\":123456}}");
	free(out);
	timeline__free(tl);
}

/* ---- CPU samples and off-CPU blocks → slices ---- */

struct want {
	const char *name;
	uint64_t ts, dur;
	uint16_t depth;
};

static void check_slices(const struct timeline *tl, const struct want *w, size_t n)
{
	assert_int_equal(tl->nevents, n);
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &tl->events[i];

		if (e->ph != 'X' || e->ts != w[i].ts || e->dur != w[i].dur ||
		    e->depth != w[i].depth || strcmp(e->name, w[i].name) || e->nargs)
			fail_msg(
				"event %zu: got %c %s @%lu+%lu d%u (%u args), want X %s @%lu+%lu d%u",
				i, e->ph, e->name ? e->name : "-", (unsigned long)e->ts,
				(unsigned long)e->dur, e->depth, e->nargs, w[i].name,
				(unsigned long)w[i].ts, (unsigned long)w[i].dur, w[i].depth);
	}
}

static void test_sample_slices(void **state)
{
	static const char *abc[] = { "main", "run", "work_c" };
	static const char *abd[] = { "main", "run", "work_d" };
	static const char *ae[] = { "main", "other" };
	static const char *a[] = { "main" };
	/* "work_c" under a different parent is a different slice */
	static const char *axc[] = { "main", "x", "work_c" };
	const struct tl_sample s[] = {
		{ 0, 0, abc, 3, 0 },
		{ 10, 0, abc, 3, 0 },
		{ 20, 0, abd, 3, 0 },
		{ 30, 0, ae, 2, 0 },
		/* gap: off CPU from 40 to 100 */
		{ 100, 0, a, 1, 0 },
		{ 110, 0, axc, 3, 0 },
	};
	/*
	 * in order of opening; each with its end known: what the next sample
	 * does not share closes 1 ns before it, a gap closes a period after
	 */
	const struct want w[] = {
		{ "main", 0, 40, 0 },	{ "run", 0, 29, 1 },	  { "work_c", 0, 19, 2 },
		{ "work_d", 20, 9, 2 }, { "other", 30, 10, 1 },	  { "main", 100, 20, 0 },
		{ "x", 110, 10, 1 },	{ "work_c", 110, 10, 2 },
	};
	struct timeline *tl = timeline__new();
	char *out;

	(void)state;
	assert_int_equal(timeline__add_sample_slices(tl, 5, 6, s, 6, 10, "cpu"), 0);
	check_slices(tl, w, sizeof(w) / sizeof(w[0]));
	out = render(tl);
	assert_int_equal(count(out, "\"ph\":\"X\""), 8);
	assert_int_equal(count(out, "\"ph\":\"B\""), 0);
	assert_int_equal(count(out, "\"ph\":\"E\""), 0);
	assert_contains(out, "\"dur\":0.0400390625,\"name\":\"main\",\"cat\":\"cpu\"}");
	assert_contains(out, "\"cpu_samples\":6}");
	free(out);
	timeline__free(tl);
}

/*
 * A slice and the one after it do not meet at one timestamp (b ends 1 ns,
 * one step of the written times, before c begins), and a parent opens with
 * its child at one ts and one length: in the written order the outer slice
 * comes first and the earlier sibling before the later, whatever the
 * insertion order.
 */
static void test_same_timestamp_nesting(void **state)
{
	static const char *ab[] = { "a", "b" };
	static const char *ac[] = { "a", "c" };
	const struct tl_sample s[] = { { 0, 0, ab, 2, 0 }, { 10, 0, ac, 2, 0 } };
	struct timeline *tl = timeline__new();
	char *out, *pa, *pb, *pc;

	(void)state;
	assert_int_equal(timeline__add_sample_slices(tl, 1, 2, s, 2, 10, "cpu"), 0);
	/* a child of the same length as its parent, inserted first */
	assert_int_equal(timeline__add_slice(tl, 1, 3, 50, 7, "inner", NULL, NULL, 0), 0);
	assert_int_equal(timeline__add_slice(tl, 1, 3, 50, 7, "outer", NULL, NULL, 0), 0);
	tl->events[tl->nevents - 1].depth = 0;
	tl->events[tl->nevents - 2].depth = 1;
	out = render(tl);
	pa = strstr(out, "\"name\":\"a\"");
	pb = strstr(out, "\"name\":\"b\"");
	pc = strstr(out, "\"name\":\"c\"");
	assert_true(pa && pb && pc && pa < pb && pb < pc);
	assert_contains(out, "\"ts\":0.000,\"dur\":0.0087890625,\"name\":\"b\"");
	assert_contains(out, "\"ts\":0.009765625,\"dur\":0.009765625,\"name\":\"c\"");
	assert_true(strstr(out, "\"outer\"") < strstr(out, "\"inner\""));
	free(out);
	timeline__free(tl);
}

/*
 * Off-CPU blocks between CPU runs: the run before a block ends 1 ns before
 * the block begins (not a period after its last sample), the block is one
 * "[off-CPU]" slice holding its stack, a sample stamped inside a block
 * counts from 1 ns after its end, and a sample without frames is "[unknown]".
 */
static void test_offcpu_blocks(void **state)
{
	static const char *m[] = { "main", "spin" };
	static const char *blk[] = { "main", "read", "vfs_read_[k]" };
	const struct tl_sample s[] = {
		{ 0, 0, m, 2, 0 },     { 10, 0, m, 2, 0 },
		{ 14, 30, blk, 3, 0 }, { 40, 0, m, 2, 0 }, /* inside the block: from 45 */
		{ 54, 0, NULL, 0, 0 },
	};
	const struct want w[] = {
		{ "main", 0, 13, 0 },  { "spin", 0, 13, 1 },  { "[off-CPU]", 14, 30, 0 },
		{ "main", 14, 30, 1 }, { "read", 14, 30, 2 }, { "vfs_read_[k]", 14, 30, 3 },
		{ "main", 45, 8, 0 },  { "spin", 45, 8, 1 },  { "[unknown]", 54, 10, 0 },
	};
	struct timeline *tl = timeline__new();
	char *out;

	(void)state;
	assert_int_equal(timeline__add_sample_slices(tl, 5, 6, s, 5, 10, "cpu"), 0);
	check_slices(tl, w, sizeof(w) / sizeof(w[0]));
	out = render(tl);
	assert_contains(out, "\"name\":\"[off-CPU]\",\"cat\":\"off_cpu\"");
	free(out);
	timeline__free(tl);
}

/*
 * Nesting over a long random walk, in the written order (which sorts): on
 * each thread every slice lies inside the slices still open, compared as a
 * viewer does, in doubles, with no slack; no slice is empty, and none
 * begins at the time another one ends (speedscope, which makes B/E pairs
 * of them, may then put the B first: see TL_GAP_NS), also where samples
 * share a timestamp or fall inside a block; cpu_samples counts the samples.
 */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void test_sample_slices_nest_after_sort(void **state)
{
	static const char *names[] = { "f0", "f1", "f2", "f3" };
	struct timeline *tl = timeline__new();
	struct tl_sample s[400];
	const char *frames[400][6];
	unsigned int seed = 12345;
	char *out, *p;
	int64_t samples = 0;
	int maxdepth = 0, nblocks = 0;

	(void)state;
	for (uint32_t tid = 1; tid <= 2; tid++) {
		uint64_t t = 0;

		for (int i = 0; i < 400; i++) {
			uint32_t n = 1 + (uint32_t)(rand_r(&seed) % 6);
			uint64_t dur = rand_r(&seed) % 12 ? 0 : 5 + rand_r(&seed) % 40;

			for (uint32_t d = 0; d < n; d++)
				frames[i][d] = names[rand_r(&seed) % (d ? 4 : 1)];
			/*
			 * mostly one period apart, sometimes a gap, sometimes at the
			 * time of the one before, sometimes a block
			 */
			t += rand_r(&seed) % 10 ? (rand_r(&seed) % 20 ? 10 : 0) : 35;
			s[i] = (struct tl_sample){ t, dur, frames[i], n, 0 };
			nblocks += dur != 0;
		}
		assert_int_equal(timeline__add_sample_slices(tl, 9, tid, s, 400, 10, "cpu"), 0);
	}
	assert_true(nblocks > 20);
	out = render(tl);
	for (uint32_t tid = 1; tid <= 2; tid++) {
		double end[64], begins[800 * 7], ends[800 * 7];
		size_t nb = 0, ne = 0, a = 0, b = 0;
		int depth = 0;
		char key[32];

		snprintf(key, sizeof(key), "\"tid\":%u,", tid);
		for (p = out; (p = strstr(p, "{\"ph\":\"X\"")); p++) {
			char *q = strstr(p, "\"tid\":");
			double ts, dur;

			if (strncmp(q, key, strlen(key)))
				continue;
			ts = strtod(strstr(p, "\"ts\":") + 5, NULL);
			dur = strtod(strstr(p, "\"dur\":") + 6, NULL);
			/* exact: every time is a whole number of 1/1024 µs */
			while (depth && end[depth - 1] <= ts)
				depth--;
			if (depth)
				assert_true(ts + dur <= end[depth - 1]);
			assert_true(depth < 64);
			assert_true(dur > 0);
			end[depth++] = ts + dur;
			begins[nb++] = ts;
			ends[ne++] = ts + dur;
			if (depth > maxdepth)
				maxdepth = depth;
		}
		/* begins are written in order; ends sorted here: no time in both */
		qsort(ends, ne, sizeof(*ends), cmp_double);
		while (a < nb && b < ne) {
			assert_true(begins[a] != ends[b]);
			if (begins[a] < ends[b])
				a++;
			else
				b++;
		}
	}
	samples = atoi(strstr(out, "\"cpu_samples\":") + 14);
	assert_int_equal(samples, 800 - nblocks);
	assert_int_equal(tl->cpu_samples, 800 - nblocks);
	assert_true(maxdepth >= 3);
	free(out);
	timeline__free(tl);
}

static void test_samples_out_of_order(void **state)
{
	static const char *a[] = { "main" };
	const struct tl_sample s[] = { { 20, 0, a, 1, 0 }, { 10, 0, a, 1, 0 } };
	struct timeline *tl = timeline__new();

	(void)state;
	assert_int_equal(timeline__add_sample_slices(tl, 1, 1, s, 2, 10, NULL), -EINVAL);
	timeline__free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_checker_rejects),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_metadata_slice_and_args),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_timestamps_and_order),
		cmocka_unit_test(test_flows_and_gpu_tracks),
		cmocka_unit_test(test_counter),
		cmocka_unit_test(test_sample_slices),
		cmocka_unit_test(test_same_timestamp_nesting),
		cmocka_unit_test(test_offcpu_blocks),
		cmocka_unit_test(test_sample_slices_nest_after_sort),
		cmocka_unit_test(test_samples_out_of_order),
	};

	return cmocka_run_group_tests_name("chrome", tests, NULL, NULL);
}
