/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* folded__write: the stackcollapse line format flamegraph.pl and speedscope read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "aggregate/profile.h"
#include "write/writers.h"

/*
 * Write p with folded__write to a real file, as bpfprof does, and read it
 * back; returns the text (caller frees) and how long the write took.
 */
static char *fold_timed(const struct profile *p, uint32_t value_index, int *ret, double *secs)
{
	struct timespec t0, t1;
	FILE *f = tmpfile();
	char *buf;
	long len;

	assert_non_null(f);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	*ret = folded__write(p, value_index, f);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	len = ftell(f);
	assert_true(len >= 0);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	assert_int_equal(fclose(f), 0);
	return buf;
}

static char *fold(const struct profile *p, uint32_t value_index, int *ret)
{
	double secs;

	return fold_timed(p, value_index, ret, &secs);
}

static uint32_t frame(struct profile *p, const char *name, uint32_t kind, uint64_t addr)
{
	struct pframe f = { .name = name, .kind = kind, .mapping = -1, .addr = addr };
	int idx = profile__add_frame(p, &f);

	assert_true(idx >= 0);
	return (uint32_t)idx;
}

/* Add a sample given as "a;b;c" (root first) with one or two values. */
static void sample(struct profile *p, const char *stack, int64_t v0, int64_t v1)
{
	uint32_t frames[64], n = 0;
	int64_t values[PROFILE_MAX_VALUES] = { v0, v1 };
	char *copy = strdup(stack), *save = NULL, *tok;

	for (tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save))
		frames[n++] = frame(p, tok, FRAME_NATIVE, 0);
	assert_int_equal(profile__add_sample(p, frames, n, values, NULL, 0), 0);
	free(copy);
}

static struct profile *new_profile(void)
{
	struct profile *p = profile__new();

	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_value_type(p, "cpu", "nanoseconds"), 1);
	return p;
}

static void test_merge_and_sort(void **state)
{
	struct profile *p = new_profile();
	char *out;
	int ret;

	(void)state;
	/* added out of order, with repeats */
	sample(p, "python3;main;work;leaf", 3, 0);
	sample(p, "python3;main", 2, 0);
	sample(p, "bash;main", 1, 0);
	sample(p, "python3;main;work;leaf", 4, 0);
	sample(p, "python3;main;work", 10, 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "bash;main 1\n"
				 "python3;main 2\n"
				 "python3;main;work 10\n"
				 "python3;main;work;leaf 7\n");
	free(out);
	profile__free(p);
}

/* Different frames (other address, other kind) with one display name are one frame here. */
/* Order is plain byte order of the stack text, as `LC_ALL=C sort` gives. */
static void test_byte_order(void **state)
{
	struct profile *p = new_profile();
	char *out;
	int ret;

	(void)state;
	sample(p, "r;a;x", 1, 0);
	sample(p, "r;a!", 2, 0); /* '!' < ';': before "r;a;x" */
	sample(p, "r;a", 3, 0);	 /* end of stack sorts first */
	sample(p, "r;ab", 4, 0); /* 'b' > ';' */
	sample(p, "r;B", 5, 0);	 /* upper case first */
	sample(p, "r", 6, 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "r 6\n"
				 "r;B 5\n"
				 "r;a 3\n"
				 "r;a! 2\n"
				 "r;a;x 1\n"
				 "r;ab 4\n");
	free(out);
	profile__free(p);
}

static void test_merge_by_name(void **state)
{
	struct profile *p = new_profile();
	uint32_t s1[2], s2[2];
	int64_t v[PROFILE_MAX_VALUES] = { 5 };
	char *out;
	int ret;

	(void)state;
	s1[0] = frame(p, "python3", FRAME_ROOT, 0);
	s1[1] = frame(p, "PyObject_Call", FRAME_NATIVE, 0x1000);
	s2[0] = s1[0];
	s2[1] = frame(p, "PyObject_Call", FRAME_NATIVE, 0x1040);
	assert_int_not_equal(s1[1], s2[1]);
	assert_int_equal(profile__add_sample(p, s1, 2, v, NULL, 0), 0);
	v[0] = 6;
	assert_int_equal(profile__add_sample(p, s2, 2, v, NULL, 0), 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "python3;PyObject_Call 11\n");
	free(out);
	profile__free(p);
}

static void test_sanitize(void **state)
{
	struct profile *p = new_profile();
	uint32_t s[4];
	int64_t v[PROFILE_MAX_VALUES] = { 1 };
	char *out;
	int ret;

	(void)state;
	s[0] = frame(p, "python3", FRAME_ROOT, 0);
	s[1] = frame(p, "std::map<int;int>::find", FRAME_NATIVE, 0);
	s[2] = frame(p, "weird\nname\r", FRAME_NATIVE, 0);
	s[3] = frame(p, "Model.forward (train.py:42)", FRAME_PYTHON, 0);
	assert_int_equal(profile__add_sample(p, s, 4, v, NULL, 0), 0);
	/* a name that only becomes equal after sanitizing merges with it */
	s[1] = frame(p, "std::map<int:int>::find", FRAME_NATIVE, 0);
	v[0] = 2;
	assert_int_equal(profile__add_sample(p, s, 4, v, NULL, 0), 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	/* control characters arrive escaped by the profile (util/strsafe.h) */
	assert_string_equal(out, "python3;std::map<int:int>::find;weird\\x0aname\\x0d;"
				 "Model.forward (train.py:42) 3\n");
	free(out);
	profile__free(p);
}

static void test_zero_and_value_index(void **state)
{
	struct profile *p = new_profile();
	char *out;
	int ret;

	(void)state;
	sample(p, "a;only_samples", 4, 0);
	sample(p, "a;only_cpu", 0, 1000);
	sample(p, "a;both", 1, 2000);
	/* cancels out to zero: no line */
	sample(p, "a;cancel", 5, 0);
	sample(p, "a;cancel", -5, 0);
	sample(p, "a;neg", -3, 0);

	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "a;both 1\na;neg -3\na;only_samples 4\n");
	free(out);

	out = fold(p, 1, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "a;both 2000\na;only_cpu 1000\n");
	free(out);

	out = fold(p, 2, &ret);
	assert_int_equal(ret, -EINVAL);
	assert_string_equal(out, "");
	free(out);
	profile__free(p);
}

static void test_empty(void **state)
{
	struct profile *p = new_profile();
	int64_t v[PROFILE_MAX_VALUES] = { 9 };
	char *out;
	int ret;

	(void)state;
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "");
	free(out);

	/* a sample without frames still shows up, not silently dropped */
	assert_int_equal(profile__add_sample(p, NULL, 0, v, NULL, 0), 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "[unknown] 9\n");
	free(out);
	profile__free(p);
}

/* A blank name (spaces; control characters are already escaped visibly) would make a line of spaces: readers see no frame, or no count. */
static void test_blank_name(void **state)
{
	struct profile *p = new_profile();
	int64_t v[PROFILE_MAX_VALUES] = { 3 };
	uint32_t s[2];
	char *out;
	int ret;

	(void)state;
	s[0] = frame(p, " ", FRAME_ROOT, 0);
	assert_int_equal(profile__add_sample(p, s, 1, v, NULL, 0), 0);
	s[1] = frame(p, "   ", FRAME_NATIVE, 0x10);
	assert_int_equal(profile__add_sample(p, s, 2, v, NULL, 0), 0);
	out = fold(p, 0, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(out, "[unknown] 3\n[unknown];[unknown] 3\n");
	free(out);
	profile__free(p);
}

/* 100k distinct stacks of depth 24 out of a shared frame pool: how a real machine looks. */
static void test_100k_stacks_fast(void **state)
{
	struct profile *p = new_profile();
	uint32_t pool[2048], s[24];
	int64_t v[PROFILE_MAX_VALUES] = { 0 };
	char name[64], *out, *line, *eol, *sp, *prev = NULL;
	size_t nlines = 0, prev_len = 0;
	int64_t total = 0;
	double t;
	uint32_t x = 1;
	int i, j, ret, cmp;

	(void)state;
	for (i = 0; i < 2048; i++) {
		snprintf(name, sizeof(name), "ns::Class::method_%d(int)", i);
		pool[i] = frame(p, name, FRAME_NATIVE, 0x400000 + (uint64_t)i * 16);
	}
	for (i = 0; i < 100000; i++) {
		s[0] = pool[i % 7];
		for (j = 1; j < 23; j++) {
			x = x * 1664525 + 1013904223;
			s[j] = pool[x >> 21];
		}
		s[23] = pool[i % 2048];
		v[0] = i % 5 + 1;
		assert_int_equal(profile__add_sample(p, s, 24, v, NULL, 0), 0);
	}
	out = fold_timed(p, 0, &ret, &t);
	assert_int_equal(ret, 0);
	print_message("folded: 100000 stacks in %.3f s\n", t);
	print_message(
		"folded: 100,000 stacks in %.2f s (reported, not asserted: speed is for make bench)\n",
		t);

	/* every line "stack value", strictly increasing by stack: merged and sorted */
	for (line = out; *line; line = eol + 1) {
		eol = strchr(line, '\n');
		assert_non_null(eol);
		sp = memrchr(line, ' ', (size_t)(eol - line));
		assert_non_null(sp);
		total += strtoll(sp + 1, NULL, 10);
		if (prev) {
			assert_true(prev_len != (size_t)(sp - line) ||
				    memcmp(prev, line, prev_len) != 0);
			cmp = memcmp(prev, line,
				     prev_len < (size_t)(sp - line) ? prev_len
								    : (size_t)(sp - line));
			assert_true(cmp < 0 || (cmp == 0 && prev_len < (size_t)(sp - line)));
		}
		prev = line;
		prev_len = (size_t)(sp - line);
		nlines++;
	}
	assert_int_equal(nlines, 100000);
	/* sum of i % 5 + 1 over 100000 */
	assert_int_equal(total, 300000);
	free(out);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_and_sort),
		cmocka_unit_test(test_byte_order),
		cmocka_unit_test(test_merge_by_name),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_zero_and_value_index),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_blank_name),
		cmocka_unit_test(test_100k_stacks_fast),
	};

	return cmocka_run_group_tests_name("folded", tests, NULL, NULL);
}
