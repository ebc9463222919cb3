/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* struct profile building blocks and the generic hash table under them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aggregate/profile.h"
#include "aggregate/profile_build.h"
#include "util/htab.h"

/* ---- htab ---- */

static void test_htab_insert_find(void **state)
{
	struct htab *h = htab__new(0, HTAB_COPY_KEYS);
	struct htab_entry *e;
	char key[32];
	size_t len, iter = 0, seen = 0;
	uint64_t sum = 0;
	int i, ret;

	(void)state;
	assert_non_null(h);
	/* far past the initial size: forces several grows */
	for (i = 0; i < 20000; i++) {
		len = (size_t)snprintf(key, sizeof(key), "key-%d", i);
		ret = htab__upsert(h, key, len, htab__hash(key, len), &e);
		assert_int_equal(ret, 1);
		assert_ptr_not_equal(e->key, key); /* copied */
		e->val = (uint64_t)i;
	}
	assert_int_equal(htab__count(h), 20000);
	for (i = 0; i < 20000; i++) {
		len = (size_t)snprintf(key, sizeof(key), "key-%d", i);
		e = htab__find(h, key, len, htab__hash(key, len));
		assert_non_null(e);
		assert_int_equal(e->val, i);
		assert_memory_equal(e->key, key, len);
		ret = htab__upsert(h, key, len, htab__hash(key, len), &e);
		assert_int_equal(ret, 0);
		assert_int_equal(e->val, i);
	}
	/* a prefix of a key is a different key */
	assert_null(htab__find(h, "key-1", 4, htab__hash("key-1", 4)));
	assert_null(htab__find(h, "nope", 4, htab__hash("nope", 4)));

	while ((e = htab__next(h, &iter))) {
		seen++;
		sum += e->val;
	}
	assert_int_equal(seen, 20000);
	assert_int_equal(sum, (uint64_t)19999 * 20000 / 2);
	htab__free(h);
}

/* Every key with the same hash: all in one probe chain, equality decided by bytes. */
static void test_htab_collisions_delete(void **state)
{
	struct htab *h = htab__new(4, 0);
	struct htab_entry *e;
	uint32_t k[64];
	int i, ret;

	(void)state;
	assert_non_null(h);
	for (i = 0; i < 64; i++) {
		k[i] = (uint32_t)i * 7;
		ret = htab__upsert(h, &k[i], sizeof(k[i]), 42, &e);
		assert_int_equal(ret, 1);
		assert_ptr_equal(e->key, &k[i]); /* borrowed */
		e->val = (uint64_t)i + 100;
	}
	/* delete every third, from the middle of the chain: backward shift must keep the rest */
	for (i = 0; i < 64; i += 3)
		assert_int_equal(htab__delete(h, &k[i], sizeof(k[i]), 42), 0);
	assert_int_equal(htab__delete(h, &k[0], sizeof(k[0]), 42), -ENOENT);
	for (i = 0; i < 64; i++) {
		e = htab__find(h, &k[i], sizeof(k[i]), 42);
		if (i % 3 == 0) {
			assert_null(e);
		} else {
			assert_non_null(e);
			assert_int_equal(e->val, i + 100);
		}
	}
	assert_int_equal(htab__count(h), 64 - 22);
	/* a deleted key can come back */
	assert_int_equal(htab__upsert(h, &k[3], sizeof(k[3]), 42, &e), 1);
	htab__free(h);
}

/*
 * Deleting under wrap-around, checked against a plain array: the few hashes
 * all land in the last slots, so every chain runs past the end of the table.
 */
#define WEAK_HASH(k) (~(uint64_t)((k) % 13))

static void test_htab_delete_random(void **state)
{
	struct htab *h = htab__new(0, HTAB_COPY_KEYS);
	static uint8_t present[4096];
	struct htab_entry *e;
	uint32_t x = 12345, key;
	size_t count = 0;
	int i, ret;

	(void)state;
	assert_non_null(h);
	for (i = 0; i < 200000; i++) {
		x = x * 1103515245 + 12345;
		key = (x >> 8) % 4096;
		if ((x >> 4) & 1) {
			ret = htab__upsert(h, &key, sizeof(key), WEAK_HASH(key), &e);
			assert_true(ret >= 0);
			assert_int_equal(ret, !present[key]);
			if (ret)
				count++;
			present[key] = 1;
		} else {
			ret = htab__delete(h, &key, sizeof(key), WEAK_HASH(key));
			assert_int_equal(ret, present[key] ? 0 : -ENOENT);
			if (present[key])
				count--;
			present[key] = 0;
		}
	}
	assert_int_equal(htab__count(h), count);
	for (key = 0; key < 4096; key++)
		assert_int_equal(htab__find(h, &key, sizeof(key), WEAK_HASH(key)) != NULL,
				 present[key]);
	htab__free(h);
}

static void test_htab_empty_key_and_hash(void **state)
{
	struct htab *h = htab__new(0, 0);
	struct htab_entry *e;

	(void)state;
	assert_non_null(h);
	assert_int_equal(htab__upsert(h, NULL, 0, htab__hash("", 0), &e), 1);
	e->val = 7;
	e = htab__find(h, "", 0, htab__hash("", 0));
	assert_non_null(e);
	assert_int_equal(e->val, 7);
	/* the hash sees every byte, including ones past the last full word */
	assert_true(htab__hash("abcdefghi", 9) != htab__hash("abcdefghj", 9));
	assert_true(htab__hash("abcdefgh", 8) != htab__hash("abcdefgi", 8));
	assert_true(htab__hash("a", 1) != htab__hash("a\0", 2));
	htab__free(h);
}

/* ---- profile ---- */

static void test_intern(void **state)
{
	struct profile *p = profile__new();
	char buf[32];
	const char *a, *b, *c;
	const char *first[1000];
	int i;

	(void)state;
	assert_non_null(p);
	strcpy(buf, "PyObject_Call");
	a = profile__intern(p, buf);
	assert_non_null(a);
	assert_ptr_not_equal(a, buf);
	assert_string_equal(a, "PyObject_Call");
	/* the copy does not follow the caller's buffer */
	strcpy(buf, "changed");
	assert_string_equal(a, "PyObject_Call");
	b = profile__intern(p, "PyObject_Call");
	assert_ptr_equal(a, b);
	c = profile__intern(p, "PyObject_Cal");
	assert_ptr_not_equal(a, c);
	assert_string_equal(c, "PyObject_Cal");
	assert_null(profile__intern(p, NULL));
	assert_string_equal(profile__intern(p, ""), "");

	/* interned pointers stay put while the table grows */
	for (i = 0; i < 1000; i++) {
		snprintf(buf, sizeof(buf), "sym%d", i);
		first[i] = profile__intern(p, buf);
	}
	for (i = 0; i < 50000; i++) {
		snprintf(buf, sizeof(buf), "other%d", i);
		assert_non_null(profile__intern(p, buf));
	}
	for (i = 0; i < 1000; i++) {
		snprintf(buf, sizeof(buf), "sym%d", i);
		assert_ptr_equal(profile__intern(p, buf), first[i]);
		assert_string_equal(first[i], buf);
	}
	assert_ptr_equal(profile__intern(p, "PyObject_Call"), a);
	profile__free(p);
}

static void test_value_types_and_period(void **state)
{
	struct profile *p = profile__new();
	char unit[16] = "count";

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", unit), 0);
	strcpy(unit, "XXXX");
	assert_string_equal(p->value_types[0].unit, "count");
	assert_int_equal(profile__add_value_type(p, "cpu", "nanoseconds"), 1);
	assert_int_equal(profile__add_value_type(p, "a", "b"), 2);
	assert_int_equal(profile__add_value_type(p, "c", "d"), 3);
	for (int i = 4; i < PROFILE_MAX_VALUES; i++)
		assert_int_equal(profile__add_value_type(p, "x", "y"), i);
	assert_int_equal(profile__add_value_type(p, "e", "f"), -ENOSPC);
	assert_int_equal(p->nvalues, PROFILE_MAX_VALUES);
	assert_string_equal(p->value_types[1].type, "cpu");

	assert_int_equal(profile__set_period(p, "cpu", "nanoseconds", 10101010), 0);
	assert_string_equal(p->period_type.type, "cpu");
	assert_string_equal(p->period_type.unit, "nanoseconds");
	assert_int_equal(p->period, 10101010);
	profile__free(p);
}

static void test_mappings(void **state)
{
	struct profile *p = profile__new();
	struct pmapping m = {
		.path = "/usr/lib/libc.so.6",
		.build_id = "abc123",
		.start = 0x1000,
		.limit = 0x2000,
		.file_offset = 0x1000,
	};
	char path[64];
	int a, b, c, d;

	(void)state;
	assert_non_null(p);
	a = profile__add_mapping(p, &m);
	assert_int_equal(a, 0);
	assert_ptr_not_equal(p->mappings[0].path, m.path);
	assert_string_equal(p->mappings[0].build_id, "abc123");

	/* the same object elsewhere: same index, range covers both */
	strcpy(path, "/usr/lib/libc.so.6");
	m.path = path;
	m.start = 0x800;
	m.limit = 0x1800;
	m.file_offset = 0x800;
	assert_int_equal(profile__add_mapping(p, &m), a);
	m.start = 0x1800;
	m.limit = 0x5000;
	assert_int_equal(profile__add_mapping(p, &m), a);
	assert_int_equal(p->nmappings, 1);
	assert_int_equal(p->mappings[a].start, 0x800);
	assert_int_equal(p->mappings[a].limit, 0x5000);
	assert_int_equal(p->mappings[a].file_offset, 0x800);

	/* other build id, or none: another object with the same name */
	m.build_id = "def456";
	b = profile__add_mapping(p, &m);
	m.build_id = NULL;
	c = profile__add_mapping(p, &m);
	assert_int_equal(b, 1);
	assert_int_equal(c, 2);
	assert_null(p->mappings[c].build_id);
	assert_int_equal(profile__add_mapping(p, &m), c);
	m.path = "/usr/bin/python3.11";
	d = profile__add_mapping(p, &m);
	assert_int_equal(d, 3);
	assert_int_equal(p->nmappings, 4);

	m.path = NULL;
	assert_int_equal(profile__add_mapping(p, &m), -EINVAL);
	profile__free(p);
}

static void test_frames(void **state)
{
	struct profile *p = profile__new();
	struct pmapping m = { .path = "/bin/x", .start = 0x1000, .limit = 0x9000 };
	struct pframe f = {
		.name = "Model.forward (train.py:42)",
		.file = "train.py",
		.line = 42,
		.kind = FRAME_PYTHON,
		.mapping = -1,
	};
	struct pframe g;
	char name[64];
	int base, i, idx;

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_mapping(p, &m), 0);
	base = profile__add_frame(p, &f);
	assert_int_equal(base, 0);
	strcpy(name, f.name);
	g = f;
	g.name = name;
	assert_int_equal(profile__add_frame(p, &g), base);
	strcpy(name, "clobbered");
	assert_string_equal(p->frames[base].name, "Model.forward (train.py:42)");
	assert_string_equal(p->frames[base].file, "train.py");
	assert_int_equal(p->frames[base].line, 42);
	assert_int_equal(p->frames[base].mapping, -1);

	/* each field on its own makes a different frame */
	for (i = 0; i < 6; i++) {
		g = f;
		switch (i) {
		case 0:
			g.name = "Model.backward (train.py:42)";
			break;
		case 1:
			g.file = "other.py";
			break;
		case 2:
			g.line = 43;
			break;
		case 3:
			g.kind = FRAME_NATIVE;
			break;
		case 4:
			g.mapping = 0;
			break;
		case 5:
			g.addr = 0x1234;
			break;
		}
		idx = profile__add_frame(p, &g);
		assert_int_equal(idx, base + 1 + i);
		assert_int_equal(profile__add_frame(p, &g), idx);
	}
	assert_int_equal(p->nframes, 7);
	g = f;
	g.file = NULL;
	idx = profile__add_frame(p, &g);
	assert_int_equal(idx, 7);
	assert_null(p->frames[idx].file);

	/* no name: shown as "[unknown]", still deduplicated */
	g = f;
	g.name = NULL;
	idx = profile__add_frame(p, &g);
	assert_string_equal(p->frames[idx].name, "[unknown]");
	assert_int_equal(profile__add_frame(p, &g), idx);

	g = f;
	g.mapping = 1; /* no such mapping */
	assert_int_equal(profile__add_frame(p, &g), -EINVAL);
	g.mapping = -2;
	assert_int_equal(profile__add_frame(p, &g), -EINVAL);

	/* many frames: indexes stay dense and lookups stay right after growth */
	for (i = 0; i < 30000; i++) {
		g = f;
		g.kind = FRAME_NATIVE;
		g.mapping = 0;
		g.addr = 0x1000 + (uint64_t)i;
		assert_int_equal(profile__add_frame(p, &g), 9 + i);
	}
	g.addr = 0x1000 + 777;
	assert_int_equal(profile__add_frame(p, &g), 9 + 777);
	assert_int_equal(p->frames[9 + 777].addr, 0x1000 + 777);
	assert_int_equal(p->nframes, 9 + 30000);
	profile__free(p);
}

static void test_samples(void **state)
{
	struct profile *p = profile__new();
	struct pframe f = { .name = "a", .mapping = -1 };
	uint32_t frames[3];
	int64_t values[PROFILE_MAX_VALUES] = { 5, 6, 7, 8 };
	char key[16] = "pid", str[16] = "python3";
	struct plabel labels[PROFILE_MAX_LABELS + 1] = {
		{ .key = key, .str = str },
		{ .key = "bytes", .num = 4096, .unit = "bytes" },
	};
	int i;

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_value_type(p, "cpu", "nanoseconds"), 1);
	frames[0] = (uint32_t)profile__add_frame(p, &f);
	f.name = "b";
	frames[1] = (uint32_t)profile__add_frame(p, &f);
	f.name = "c";
	frames[2] = (uint32_t)profile__add_frame(p, &f);

	assert_int_equal(profile__add_sample(p, frames, 3, values, labels, 2), 0);
	/* the profile keeps its own copies */
	frames[0] = 2;
	strcpy(key, "XXX");
	strcpy(str, "YYY");
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->samples[0].nframes, 3);
	assert_int_equal(p->samples[0].frames[0], 0);
	assert_int_equal(p->samples[0].frames[2], 2);
	assert_int_equal(p->samples[0].values[0], 5);
	assert_int_equal(p->samples[0].values[1], 6);
	/* only nvalues values are taken: the sample's arrays hold what it has, no more */
	assert_true((const char *)p->samples[0].labels >=
		    (const char *)(p->samples[0].values + p->nvalues));
	assert_true(profile__bytes(p) > 0);
	assert_int_equal(p->samples[0].nlabels, 2);
	assert_string_equal(p->samples[0].labels[0].key, "pid");
	assert_string_equal(p->samples[0].labels[0].str, "python3");
	assert_null(p->samples[0].labels[1].str);
	assert_int_equal(p->samples[0].labels[1].num, 4096);
	assert_string_equal(p->samples[0].labels[1].unit, "bytes");
	assert_ptr_equal(p->samples[0].labels[1].key, profile__intern(p, "bytes"));

	/* no frames is allowed: the sample still counts */
	assert_int_equal(profile__add_sample(p, NULL, 0, values, NULL, 0), 0);
	assert_int_equal(p->samples[1].nframes, 0);

	frames[0] = 3; /* no such frame */
	assert_int_equal(profile__add_sample(p, frames, 3, values, NULL, 0), -EINVAL);
	frames[0] = 0;
	assert_int_equal(profile__add_sample(p, frames, 3, values, labels, PROFILE_MAX_LABELS + 1),
			 -E2BIG);
	assert_int_equal(p->nsamples, 2);

	for (i = 0; i < 100000; i++) {
		values[0] = i;
		assert_int_equal(
			profile__add_sample(p, frames, (uint32_t)(i % 3) + 1, values, NULL, 0), 0);
	}
	assert_int_equal(p->nsamples, 100002);
	assert_int_equal(p->samples[2 + 99999].values[0], 99999);
	assert_int_equal(p->samples[2 + 99999].nframes, 99999 % 3 + 1);
	assert_int_equal(p->samples[2 + 50000].frames[0], 0);
	profile__free(p);
}

static void test_comments(void **state)
{
	struct profile *p = profile__new();
	char buf[32];
	int i;

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_comment(p, "bpfprof 0.1.0"), 0);
	for (i = 0; i < 100; i++) {
		snprintf(buf, sizeof(buf), "line %d", i);
		assert_int_equal(profile__add_comment(p, buf), 0);
	}
	assert_int_equal(p->ncomments, 101);
	assert_string_equal(p->comments[0], "bpfprof 0.1.0");
	assert_string_equal(p->comments[100], "line 99");
	assert_int_equal(profile__add_comment(p, NULL), -EINVAL);
	profile__free(p);
	profile__free(NULL);
}

/* issue 15: a Python file's name in frames, from its path alone */
static void test_short_path(void **state)
{
	(void)state;
	assert_string_equal(
		profile__short_path("/usr/lib/python3/dist-packages/torch/autograd/__init__.py"),
		"torch/autograd/__init__.py");
	assert_string_equal(
		profile__short_path("/venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py"),
		"numpy/core/fromnumeric.py");
	/* the last packages directory wins (a venv inside a site-packages) */
	assert_string_equal(profile__short_path("/a/site-packages/x/site-packages/pkg/mod.py"),
			    "pkg/mod.py");
	assert_string_equal(profile__short_path("/usr/lib/python3.11/json/decoder.py"),
			    "json/decoder.py");
	assert_string_equal(
		profile__short_path("/root/.pyenv/versions/3.8.18/lib/python3.8/threading.py"),
		"threading.py");
	assert_string_equal(profile__short_path("/home/u/proj/train.py"), "train.py");
	assert_string_equal(profile__short_path("/home/u/proj/mypkg/__init__.py"),
			    "mypkg/__init__.py");
	assert_string_equal(profile__short_path("/home/u/proj/app/__main__.py"), "app/__main__.py");
	assert_string_equal(profile__short_path("/__init__.py"), "__init__.py");
	assert_string_equal(profile__short_path("<frozen importlib._bootstrap>"),
			    "<frozen importlib._bootstrap>");
	assert_string_equal(profile__short_path("rel/x.py"), "x.py");
	/* "lib/python" must be followed by a version and a slash */
	assert_string_equal(profile__short_path("/srv/lib/pythonic/app.py"), "app.py");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_htab_insert_find),
		cmocka_unit_test(test_htab_collisions_delete),
		cmocka_unit_test(test_htab_delete_random),
		cmocka_unit_test(test_htab_empty_key_and_hash),
		cmocka_unit_test(test_intern),
		cmocka_unit_test(test_value_types_and_period),
		cmocka_unit_test(test_mappings),
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_samples),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_short_path),
	};

	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
