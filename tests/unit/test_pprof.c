/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pprof__write: read the output back the way pprof does (gunzip, unpack
 * profile.proto) and check the structure; then, where Go is installed, let
 * `go tool pprof` itself read it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "skip.h"

#include "aggregate/profile.h"
#include "profile.pb-c.h"
#include "write/writers.h"

typedef Perftools__Profiles__Profile PbProfile;

/* Write p to a temporary file; returns its bytes (caller frees) and size. */
static uint8_t *write_pprof(const struct profile *p, int *ret, size_t *len, double *secs)
{
	struct timespec t0, t1;
	FILE *f = tmpfile();
	uint8_t *buf;
	long n;

	assert_non_null(f);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	*ret = pprof__write(p, f);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (secs)
		*secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	n = ftell(f);
	assert_true(n >= 0);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	assert_int_equal(fclose(f), 0);
	*len = (size_t)n;
	return buf;
}

static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
	z_stream zs = {};
	size_t cap = len * 8 + 1024, n = 0;
	uint8_t *out = malloc(cap);
	int zret;

	assert_non_null(out);
	/* 15 + 16: accept only a gzip wrapper, as pprof's reader does */
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (uint8_t *)in;
	zs.avail_in = (uInt)len;
	do {
		if (n == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + n;
		zs.avail_out = (uInt)(cap - n);
		zret = inflate(&zs, Z_NO_FLUSH);
		assert_true(zret == Z_OK || zret == Z_STREAM_END);
		n = cap - zs.avail_out;
	} while (zret != Z_STREAM_END);
	/* one gzip member, nothing after it */
	assert_int_equal(zs.avail_in, 0);
	inflateEnd(&zs);
	*out_len = n;
	return out;
}

static PbProfile *decode(const uint8_t *gz, size_t len)
{
	size_t raw_len;
	uint8_t *raw;
	PbProfile *prof;

	assert_true(len > 18);
	assert_int_equal(gz[0], 0x1f);
	assert_int_equal(gz[1], 0x8b);
	raw = gunzip(gz, len, &raw_len);
	prof = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	free(raw);
	assert_non_null(prof);
	return prof;
}

static const char *str(const PbProfile *prof, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < prof->n_string_table);
	return prof->string_table[i];
}

static const Perftools__Profiles__Location *location(const PbProfile *prof, uint64_t id)
{
	size_t i;

	for (i = 0; i < prof->n_location; i++)
		if (prof->location[i]->id == id)
			return prof->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Function *function(const PbProfile *prof, uint64_t id)
{
	size_t i;

	for (i = 0; i < prof->n_function; i++)
		if (prof->function[i]->id == id)
			return prof->function[i];
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

static const char *loc_name(const PbProfile *prof, uint64_t loc_id)
{
	const Perftools__Profiles__Location *l = location(prof, loc_id);

	assert_int_equal(l->n_line, 1);
	return str(prof, function(prof, l->line[0]->function_id)->name);
}

/* The sample whose leaf has this name. */
static const Perftools__Profiles__Sample *sample_by_leaf(const PbProfile *prof, const char *leaf)
{
	size_t i;

	for (i = 0; i < prof->n_sample; i++)
		if (prof->sample[i]->n_location_id &&
		    !strcmp(loc_name(prof, prof->sample[i]->location_id[0]), leaf))
			return prof->sample[i];
	fail_msg("no sample with leaf %s", leaf);
	return NULL;
}

static void assert_stack(const PbProfile *prof, const Perftools__Profiles__Sample *s,
			 const char *const *leaf_first, size_t n)
{
	size_t i;

	assert_int_equal(s->n_location_id, n);
	for (i = 0; i < n; i++)
		assert_string_equal(loc_name(prof, s->location_id[i]), leaf_first[i]);
}

static const Perftools__Profiles__Label *label(const Perftools__Profiles__Sample *s,
					       const PbProfile *prof, const char *key)
{
	size_t i;

	for (i = 0; i < s->n_label; i++)
		if (!strcmp(str(prof, s->label[i]->key), key))
			return s->label[i];
	fail_msg("no label %s", key);
	return NULL;
}

static int add_frame(struct profile *p, const char *name, const char *file, uint32_t line,
		     uint32_t kind, int32_t mapping, uint64_t addr)
{
	struct pframe f = {
		.name = name,
		.file = file,
		.line = line,
		.kind = kind,
		.mapping = mapping,
		.addr = addr,
	};
	int idx = profile__add_frame(p, &f);

	assert_true(idx >= 0);
	return idx;
}

/*
 * A small mixed profile: Python over native over kernel, a CUDA leaf, two
 * mappings, labels of both kinds. Returns the sample totals through *total.
 */
static struct profile *mixed_profile(int64_t total[2])
{
	struct profile *p = profile__new();
	struct pmapping py = {
		.path = "/usr/bin/python3.11",
		.build_id = "0123456789abcdef",
		.start = 0x400000,
		.limit = 0x800000,
		.file_offset = 0,
	};
	struct pmapping libc = {
		.path = "/usr/lib/x86_64-linux-gnu/libc.so.6",
		.build_id = "fedcba9876543210",
		.start = 0x20000,
		.limit = 0x1a0000,
		.file_offset = 0x20000,
	};
	struct plabel labels[3] = {
		{ .key = "thread", .str = "MainThread" },
		{ .key = "pid", .num = 4121 },
		{ .key = "bytes", .num = 4096, .unit = "bytes" },
	};
	int mpy, mlibc, root, main_, fwd, call1, call2, mall, sys, cuda;
	uint32_t s1[5], s2[4], s3[2];
	int64_t v1[2] = { 3, 30000000 }, v2[2] = { 2, 20000000 }, v3[2] = { 1, 5 };

	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_value_type(p, "cpu", "nanoseconds"), 1);
	p->default_value = 1;
	assert_int_equal(profile__set_period(p, "cpu", "nanoseconds", 10101010), 0);
	p->time_ns = 1700000000123456789LL;
	p->duration_ns = 5000000000LL;
	assert_int_equal(profile__add_comment(p, "bpfprof 0.1.0"), 0);
	assert_int_equal(profile__add_comment(p, "lost 3 samples: ring buffer full"), 0);

	mpy = profile__add_mapping(p, &py);
	mlibc = profile__add_mapping(p, &libc);
	assert_int_equal(mpy, 0);
	assert_int_equal(mlibc, 1);

	root = add_frame(p, "python3", NULL, 0, FRAME_ROOT, -1, 0);
	main_ = add_frame(p, "main (app.py:10)", "app.py", 10, FRAME_PYTHON, -1, 0);
	/* a Python frame never gets a native address, whatever the caller passed */
	fwd = add_frame(p, "Model.forward (train.py:42)", "train.py", 42, FRAME_PYTHON, mpy,
			0xdead);
	call1 = add_frame(p, "PyObject_Call", NULL, 0, FRAME_NATIVE, mpy, 0x401000);
	call2 = add_frame(p, "PyObject_Call", NULL, 0, FRAME_NATIVE, mpy, 0x401040);
	mall = add_frame(p, "malloc", "malloc.c", 3287, FRAME_NATIVE, mlibc, 0x9a0c0);
	sys = add_frame(p, "do_syscall_64_[k]", NULL, 0, FRAME_KERNEL, -1, 0xffffffff81e3a5b0ULL);
	cuda = add_frame(p, "[cuda] ampere_sgemm_128x64_nn", NULL, 0, FRAME_CUDA, -1, 0);

	s1[0] = (uint32_t)root;
	s1[1] = (uint32_t)main_;
	s1[2] = (uint32_t)fwd;
	s1[3] = (uint32_t)call1;
	s1[4] = (uint32_t)mall;
	assert_int_equal(profile__add_sample(p, s1, 5, v1, labels, 3), 0);
	s2[0] = (uint32_t)root;
	s2[1] = (uint32_t)main_;
	s2[2] = (uint32_t)call2;
	s2[3] = (uint32_t)sys;
	assert_int_equal(profile__add_sample(p, s2, 4, v2, labels, 1), 0);
	s3[0] = (uint32_t)root;
	s3[1] = (uint32_t)cuda;
	assert_int_equal(profile__add_sample(p, s3, 2, v3, NULL, 0), 0);
	total[0] = 6;
	total[1] = 50000005;
	return p;
}

static void test_structure(void **state)
{
	static const char *const st1[] = {
		"malloc",	    "PyObject_Call", "Model.forward (train.py:42)",
		"main (app.py:10)", "python3",
	};
	static const char *const st2[] = {
		"do_syscall_64_[k]",
		"PyObject_Call",
		"main (app.py:10)",
		"python3",
	};
	static const char *const st3[] = { "[cuda] ampere_sgemm_128x64_nn", "python3" };
	const Perftools__Profiles__Sample *s1, *s2, *s3;
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Function *fn;
	const Perftools__Profiles__Label *lb;
	int64_t total[2], sum[2] = { 0, 0 };
	struct profile *p = mixed_profile(total);
	uint8_t *gz;
	PbProfile *prof;
	size_t len, i, j;
	int ret;

	(void)state;
	gz = write_pprof(p, &ret, &len, NULL);
	assert_int_equal(ret, 0);
	prof = decode(gz, len);

	/* header */
	assert_true(prof->n_string_table > 1);
	assert_string_equal(prof->string_table[0], "");
	for (i = 1; i < prof->n_string_table; i++) {
		assert_true(prof->string_table[i][0] != '\0');
		for (j = 1; j < i; j++)
			assert_string_not_equal(prof->string_table[i], prof->string_table[j]);
	}
	assert_int_equal(prof->n_sample_type, 2);
	assert_string_equal(str(prof, prof->sample_type[0]->type), "samples");
	assert_string_equal(str(prof, prof->sample_type[0]->unit), "count");
	assert_string_equal(str(prof, prof->sample_type[1]->type), "cpu");
	assert_string_equal(str(prof, prof->sample_type[1]->unit), "nanoseconds");
	assert_string_equal(str(prof, prof->default_sample_type), "cpu");
	assert_non_null(prof->period_type);
	assert_string_equal(str(prof, prof->period_type->type), "cpu");
	assert_string_equal(str(prof, prof->period_type->unit), "nanoseconds");
	assert_int_equal(prof->period, 10101010);
	assert_int_equal(prof->time_nanos, 1700000000123456789LL);
	assert_int_equal(prof->duration_nanos, 5000000000LL);
	assert_int_equal(prof->n_comment, 2);
	assert_string_equal(str(prof, prof->comment[0]), "bpfprof 0.1.0");
	assert_string_equal(str(prof, prof->comment[1]), "lost 3 samples: ring buffer full");

	/* mappings */
	assert_int_equal(prof->n_mapping, 2);
	for (i = 0; i < 2; i++) {
		assert_int_equal(prof->mapping[i]->id, i + 1);
		assert_true(prof->mapping[i]->has_functions);
	}
	assert_string_equal(str(prof, prof->mapping[0]->filename), "/usr/bin/python3.11");
	assert_string_equal(str(prof, prof->mapping[0]->build_id), "0123456789abcdef");
	assert_int_equal(prof->mapping[0]->memory_start, 0x400000);
	assert_int_equal(prof->mapping[0]->memory_limit, 0x800000);
	assert_string_equal(str(prof, prof->mapping[1]->filename),
			    "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_string_equal(str(prof, prof->mapping[1]->build_id), "fedcba9876543210");
	assert_int_equal(prof->mapping[1]->file_offset, 0x20000);

	/* samples: totals, stacks leaf first */
	assert_int_equal(prof->n_sample, 3);
	for (i = 0; i < prof->n_sample; i++) {
		assert_int_equal(prof->sample[i]->n_value, 2);
		sum[0] += prof->sample[i]->value[0];
		sum[1] += prof->sample[i]->value[1];
	}
	assert_int_equal(sum[0], total[0]);
	assert_int_equal(sum[1], total[1]);
	s1 = sample_by_leaf(prof, "malloc");
	s2 = sample_by_leaf(prof, "do_syscall_64_[k]");
	s3 = sample_by_leaf(prof, "[cuda] ampere_sgemm_128x64_nn");
	assert_stack(prof, s1, st1, 5);
	assert_stack(prof, s2, st2, 4);
	assert_stack(prof, s3, st3, 2);
	assert_int_equal(s1->value[0], 3);
	assert_int_equal(s1->value[1], 30000000);
	assert_int_equal(s3->value[1], 5);

	/* locations: native ones carry mapping and address, the rest neither */
	assert_int_equal(prof->n_location, 8);
	l = location(prof, s1->location_id[0]); /* malloc */
	assert_int_equal(l->mapping_id, 2);
	assert_int_equal(l->address, 0x9a0c0);
	assert_int_equal(l->line[0]->line, 3287);
	l = location(prof, s1->location_id[1]); /* PyObject_Call */
	assert_int_equal(l->mapping_id, 1);
	assert_int_equal(l->address, 0x401000);
	assert_int_not_equal(s1->location_id[1], s2->location_id[1]);
	assert_int_equal(location(prof, s2->location_id[1])->address, 0x401040);
	l = location(prof, s1->location_id[2]); /* Model.forward */
	assert_int_equal(l->mapping_id, 0);
	assert_int_equal(l->address, 0);
	assert_int_equal(l->line[0]->line, 42);
	fn = function(prof, l->line[0]->function_id);
	assert_string_equal(str(prof, fn->filename), "train.py");
	assert_string_equal(str(prof, fn->system_name), "Model.forward (train.py:42)");
	l = location(prof, s2->location_id[0]); /* kernel */
	assert_int_equal(l->mapping_id, 0);
	assert_int_equal(l->address, 0xffffffff81e3a5b0ULL);
	l = location(prof, s3->location_id[0]); /* cuda */
	assert_int_equal(l->mapping_id, 0);
	assert_int_equal(l->address, 0);
	l = location(prof, s3->location_id[1]); /* root */
	assert_int_equal(l->mapping_id, 0);
	assert_int_equal(l->address, 0);
	/* the same root frame in every sample is one location */
	assert_int_equal(s1->location_id[4], s3->location_id[1]);

	/* functions: one per (name, file); both PyObject_Call locations share it */
	assert_int_equal(prof->n_function, 7);
	assert_int_equal(location(prof, s1->location_id[1])->line[0]->function_id,
			 location(prof, s2->location_id[1])->line[0]->function_id);

	/* labels */
	assert_int_equal(s1->n_label, 3);
	lb = label(s1, prof, "thread");
	assert_string_equal(str(prof, lb->str), "MainThread");
	lb = label(s1, prof, "pid");
	assert_int_equal(lb->str, 0);
	assert_int_equal(lb->num, 4121);
	assert_int_equal(lb->num_unit, 0);
	lb = label(s1, prof, "bytes");
	assert_int_equal(lb->num, 4096);
	assert_string_equal(str(prof, lb->num_unit), "bytes");
	assert_int_equal(s2->n_label, 1);
	assert_int_equal(s3->n_label, 0);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	profile__free(p);
}

/*
 * issue 15: a Function is the function (name alone, full path, first line),
 * its Locations differ by Line; the program's mapping comes first, and the
 * has_* flags say what is true of every frame in the mapping.
 */
static void test_function_model(void **state)
{
	struct profile *p = profile__new();
	struct pmapping libc = { .path = "/lib/libc.so.6",
				 .start = 0x7f0000001000,
				 .limit = 0x7f0000100000,
				 .file_offset = 0x1000,
				 .flags = PMAP_RUNTIME | PMAP_UNNAMED };
	struct pmapping exe = { .path = "/usr/bin/app",
				.start = 0x555500001000,
				.limit = 0x555500002000,
				.file_offset = 0x1000,
				.flags = PMAP_RUNTIME | PMAP_MAIN | PMAP_LINES };
	struct pframe a = { .name = "train_step (train.py:42)",
			    .func = "train_step",
			    .sysname = "train.train_step",
			    .file = "/app/train.py",
			    .line = 42,
			    .start_line = 40,
			    .kind = FRAME_PYTHON,
			    .mapping = -1 };
	struct pframe b = a, m = { .name = "<module> (train.py:7)",
				   .func = "<module>",
				   .sysname = "train.<module>",
				   .file = "/app/train.py",
				   .line = 7,
				   .start_line = 1,
				   .kind = FRAME_PYTHON,
				   .mapping = -1 };
	struct pframe n = { .name = "main",
			    .file = "/src/app.c",
			    .line = 12,
			    .start_line = 10,
			    .kind = FRAME_NATIVE,
			    .addr = 0x555500001234 };
	struct pframe u = { .name = "libc.so.6+0x1234",
			    .kind = FRAME_NATIVE,
			    .addr = 0x7f0000001234 };
	const Perftools__Profiles__Function *fa, *fb, *fm;
	const Perftools__Profiles__Sample *s;
	uint32_t st1[4], st2[2];
	int64_t v[2] = { 1, 1 };
	PbProfile *prof;
	uint8_t *gz;
	size_t len;
	int ret;

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_mapping(p, &libc), 0); /* met first */
	assert_int_equal(profile__add_mapping(p, &exe), 1);
	b.name = "train_step (train.py:45)";
	b.line = 45;
	n.mapping = 1;
	u.mapping = 0;
	st1[0] = (uint32_t)profile__add_frame(p, &n);
	st1[1] = (uint32_t)profile__add_frame(p, &m);
	st1[2] = (uint32_t)profile__add_frame(p, &a);
	st1[3] = (uint32_t)profile__add_frame(p, &u);
	st2[0] = st1[1];
	st2[1] = (uint32_t)profile__add_frame(p, &b);
	assert_int_equal(profile__add_sample(p, st1, 4, v, NULL, 0), 0);
	assert_int_equal(profile__add_sample(p, st2, 2, v, NULL, 0), 0);
	gz = write_pprof(p, &ret, &len, NULL);
	assert_int_equal(ret, 0);
	prof = decode(gz, len);

	/* the program first, whatever the order the profile met them in */
	assert_int_equal(prof->n_mapping, 2);
	assert_string_equal(str(prof, prof->mapping[0]->filename), "/usr/bin/app");
	assert_int_equal(prof->mapping[0]->memory_start, 0x555500001000);
	assert_int_equal(prof->mapping[0]->file_offset, 0x1000);
	assert_true(prof->mapping[0]->has_functions);
	assert_true(prof->mapping[0]->has_filenames);
	assert_true(prof->mapping[0]->has_line_numbers);
	assert_false(prof->mapping[1]->has_functions); /* one frame unnamed */
	assert_false(prof->mapping[1]->has_line_numbers);

	s = sample_by_leaf(prof, "libc.so.6+0x1234");
	assert_int_equal(location(prof, s->location_id[0])->mapping_id, 2);
	assert_int_equal(location(prof, s->location_id[0])->address, 0x7f0000001234);
	assert_int_equal(location(prof, s->location_id[3])->mapping_id, 1);
	/* two lines of train_step: two Locations, one Function */
	fa = function(prof, location(prof, s->location_id[1])->line[0]->function_id);
	assert_int_equal(location(prof, s->location_id[1])->line[0]->line, 42);
	s = sample_by_leaf(prof, "train_step");
	assert_int_equal(location(prof, s->location_id[0])->line[0]->line, 45);
	fb = function(prof, location(prof, s->location_id[0])->line[0]->function_id);
	assert_ptr_equal(fa, fb);
	assert_string_equal(str(prof, fa->name), "train_step");
	assert_string_equal(str(prof, fa->system_name), "train.train_step");
	assert_string_equal(str(prof, fa->filename), "/app/train.py");
	assert_int_equal(fa->start_line, 40);
	fm = function(prof, location(prof, s->location_id[1])->line[0]->function_id);
	assert_string_equal(str(prof, fm->name), "<module>");
	assert_int_equal(fm->start_line, 1);
	assert_int_equal(prof->n_function, 4);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	profile__free(p);
}

static void test_empty_and_invalid(void **state)
{
	struct profile *p = profile__new();
	PbProfile *prof;
	uint8_t *gz;
	size_t len;
	int ret;

	(void)state;
	assert_non_null(p);
	/* pprof needs at least one sample type */
	gz = write_pprof(p, &ret, &len, NULL);
	assert_int_equal(ret, -EINVAL);
	free(gz);

	assert_int_equal(profile__add_value_type(p, "alloc_space", "bytes"), 0);
	gz = write_pprof(p, &ret, &len, NULL);
	assert_int_equal(ret, 0);
	prof = decode(gz, len);
	assert_int_equal(prof->n_sample, 0);
	assert_int_equal(prof->n_sample_type, 1);
	assert_string_equal(prof->string_table[0], "");
	assert_string_equal(str(prof, prof->sample_type[0]->type), "alloc_space");
	assert_null(prof->period_type);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	profile__free(p);
}

/* 100k distinct stacks of depth 24 over a pool of 2048 native frames. */
static void test_100k_stacks_fast(void **state)
{
	struct profile *p = profile__new();
	struct pmapping m = { .path = "/usr/bin/app", .build_id = "aa", .limit = 0x100000 };
	uint32_t pool[2048], s[24], x = 1;
	int64_t v[PROFILE_MAX_VALUES] = { 0 }, sum = 0;
	char name[64];
	PbProfile *prof;
	uint8_t *gz;
	size_t len, i;
	double t;
	int ret, j;

	(void)state;
	assert_non_null(p);
	assert_int_equal(profile__add_value_type(p, "samples", "count"), 0);
	assert_int_equal(profile__add_mapping(p, &m), 0);
	for (i = 0; i < 2048; i++) {
		snprintf(name, sizeof(name), "ns::Class::method_%zu(int)", i);
		pool[i] = (uint32_t)add_frame(p, name, NULL, 0, FRAME_NATIVE, 0, 0x1000 + i * 16);
	}
	for (i = 0; i < 100000; i++) {
		s[0] = pool[i % 7];
		for (j = 1; j < 23; j++) {
			x = x * 1664525 + 1013904223;
			s[j] = pool[x >> 21];
		}
		s[23] = pool[i % 2048];
		v[0] = (int64_t)(i % 5) + 1;
		assert_int_equal(profile__add_sample(p, s, 24, v, NULL, 0), 0);
	}
	gz = write_pprof(p, &ret, &len, &t);
	assert_int_equal(ret, 0);
	print_message("pprof: 100000 stacks in %.3f s, %zu bytes\n", t, len);
	print_message(
		"pprof: 100,000 stacks in %.2f s (reported, not asserted: speed is for make bench)\n",
		t);

	prof = decode(gz, len);
	assert_int_equal(prof->n_sample, 100000);
	assert_int_equal(prof->n_location, 2048);
	assert_int_equal(prof->n_function, 2048);
	for (i = 0; i < prof->n_sample; i++)
		sum += prof->sample[i]->value[0];
	assert_int_equal(sum, 300000);
	/* sample 7: leaf is pool[7], root pool[0] */
	assert_string_equal(loc_name(prof, prof->sample[7]->location_id[0]),
			    "ns::Class::method_7(int)");
	assert_string_equal(loc_name(prof, prof->sample[7]->location_id[23]),
			    "ns::Class::method_0(int)");
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(gz);
	profile__free(p);
}

/* ---- the real reader ---- */

static char *run_capture(const char *cmd)
{
	size_t cap = 65536, n = 0, r;
	char *out = malloc(cap);
	FILE *f = popen(cmd, "r");

	assert_non_null(out);
	assert_non_null(f);
	while ((r = fread(out + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (n + 1 == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
	}
	out[n] = '\0';
	assert_int_equal(pclose(f), 0);
	return out;
}

static void test_go_tool_pprof(void **state)
{
	char dir[] = "/tmp/bpfprof-test-pprof-XXXXXX", path[128], cmd[512];
	int64_t total[2];
	struct profile *p;
	char *out, *s;
	FILE *f;

	(void)state;
	if (system("command -v go >/dev/null 2>&1 && go tool -n pprof >/dev/null 2>&1")) {
		skip_because("go tool pprof not available (make test-deps installs golang-go)");
	}
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cpu.pb.gz", dir);
	p = mixed_profile(total);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(pprof__write(p, f), 0);
	assert_int_equal(fclose(f), 0);

	/* local caches only, no network, no toolchain switching */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && GOTOOLCHAIN=local GOFLAGS= GOCACHE=%s/cache PPROF_TMPDIR=%s "
		 "go tool pprof -raw -symbolize=none %s 2>&1",
		 dir, dir, dir, path);
	out = run_capture(cmd);
	/* -raw: header, per-sample values with location ids, locations, mappings */
	assert_non_null(strstr(out, "PeriodType: cpu nanoseconds"));
	assert_non_null(strstr(out, "Period: 10101010"));
	assert_non_null(strstr(out, "samples/count cpu/nanoseconds[dflt]"));
	assert_non_null(strstr(out, "3   30000000:"));
	assert_non_null(strstr(out, "2   20000000:"));
	assert_non_null(strstr(out, "Model.forward (train.py:42) train.py:42"));
	assert_non_null(strstr(out, "do_syscall_64_[k]"));
	assert_non_null(strstr(out, "/usr/bin/python3.11 0123456789abcdef"));
	assert_non_null(strstr(out, "thread:[MainThread]"));
	assert_non_null(strstr(out, "bytes:[4096 bytes]"));
	free(out);

	/* -traces: stacks as pprof shows them, leaf on top */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && GOTOOLCHAIN=local GOFLAGS= GOCACHE=%s/cache PPROF_TMPDIR=%s "
		 "go tool pprof -traces -symbolize=none %s 2>&1",
		 dir, dir, dir, path);
	out = run_capture(cmd);
	s = strstr(out, "malloc");
	assert_non_null(s);
	s = strstr(s, "PyObject_Call");
	assert_non_null(s);
	s = strstr(s, "Model.forward (train.py:42)");
	assert_non_null(s);
	s = strstr(s, "main (app.py:10)");
	assert_non_null(s);
	assert_non_null(strstr(s, "python3"));
	assert_non_null(strstr(out, "30ms"));
	free(out);

	/* -top: the flat total covers every sample */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && GOTOOLCHAIN=local GOFLAGS= GOCACHE=%s/cache PPROF_TMPDIR=%s "
		 "go tool pprof -top -sample_index=samples -symbolize=none %s 2>&1",
		 dir, dir, dir, path);
	out = run_capture(cmd);
	assert_non_null(strstr(out, "6 total"));
	free(out);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_structure),	  cmocka_unit_test(test_function_model),
		cmocka_unit_test(test_empty_and_invalid), cmocka_unit_test(test_100k_stacks_fast),
		cmocka_unit_test(test_go_tool_pprof),
	};

	return cmocka_run_group_tests_name("pprof", tests, NULL, NULL);
}
