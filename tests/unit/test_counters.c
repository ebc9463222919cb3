// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The counter tables (include/bpfprof.h X-macros) and how the summary prints them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <linux/types.h>

#include "bpfprof.h"
#include "util/counters.h"

static void check_family(const struct counter_family *f, uint32_t n)
{
	assert_int_equal(f->n, n);
	for (uint32_t i = 0; i < f->n; i++) {
		assert_non_null(f->d[i].name);
		assert_true(strlen(f->d[i].name) > 0);
		assert_non_null(f->d[i].desc);
		for (uint32_t j = 0; j < i; j++)
			assert_string_not_equal(f->d[i].name, f->d[j].name);
	}
}

static void test_tables_complete(void **state)
{
	(void)state;
	check_family(&counters_bpf, CNT__MAX);
	check_family(&counters_cuda, CUDA_CNT__MAX);
	check_family(&counters_offcpu, OFFCPU_CNT__MAX);
	check_family(&counters_alloc, sizeof(struct alloc_counters) / sizeof(__u64));
	assert_true(counters_alloc.one_struct);
	assert_false(counters_bpf.one_struct);
	/* the ids index the table: spot-check that the X-macro kept the order */
	assert_string_equal(counters_bpf.d[CNT_RB_FULL].name, "ring buffer full");
	assert_true(counters_bpf.d[CNT_RB_FULL].loss);
	assert_true(counters_bpf.d[CNT_FILTER_FULL].loss);
	assert_false(counters_bpf.d[CNT_SAMPLES].loss);
	assert_true(counters_cuda.d[CUDA_CNT_OVERWRITTEN].loss);
	assert_true(counters_offcpu.d[OFFCPU_CNT_LOST].loss);
	/* the heap family is a struct: its table follows the field order */
	assert_string_equal(counters_alloc.d[offsetof(struct alloc_counters, live_full) / 8].name,
			    "live table full");
	assert_true(counters_alloc.d[offsetof(struct alloc_counters, lost_free) / 8].loss);
	assert_false(counters_alloc.d[offsetof(struct alloc_counters, calls) / 8].loss);
}

static void test_losses_only(void **state)
{
	uint64_t v[CNT__MAX] = { 0 };
	char buf[512] = "";

	(void)state;
	v[CNT_SAMPLES] = 1000;
	v[CNT_RB_FULL] = 3;
	v[CNT_FILTER_FULL] = 1;
	assert_int_equal(counters__format(buf, sizeof(buf), &counters_bpf, v, true), 2);
	assert_string_equal(buf, "bpf ring buffer full 3, bpf pid filter full 1");
	buf[0] = '\0';
	assert_int_equal(counters__format(buf, sizeof(buf), &counters_bpf, v, false), 3);
	assert_string_equal(buf, "bpf events 1000, bpf ring buffer full 3, bpf pid filter full 1");
}

static void test_families_append(void **state)
{
	uint64_t b[CNT__MAX] = { 0 }, c[CUDA_CNT__MAX] = { 0 };
	char buf[512] = "";

	(void)state;
	b[CNT_KSTACK_ERR] = 2;
	c[CUDA_CNT_INFLIGHT_FULL] = 7;
	counters__format(buf, sizeof(buf), &counters_bpf, b, true);
	counters__format(buf, sizeof(buf), &counters_cuda, c, true);
	assert_string_equal(buf, "bpf kernel stack unreadable 2, cuda too many in flight 7");
	buf[0] = '\0';
	memset(b, 0, sizeof(b));
	assert_int_equal(counters__format(buf, sizeof(buf), &counters_bpf, b, true), 0);
	assert_string_equal(buf, "");
}

static void test_cut_never_overruns(void **state)
{
	uint64_t v[CNT__MAX];
	char buf[40];

	(void)state;
	for (uint32_t i = 0; i < CNT__MAX; i++)
		v[i] = 123456789;
	memset(buf, 'x', sizeof(buf));
	buf[0] = '\0';
	counters__format(buf, 24, &counters_bpf, v, false);
	assert_true(strlen(buf) < 24);
	assert_int_equal(buf[30], 'x'); /* nothing written past len */
}

/* -v's histogram of sample times: every ns has one bucket, and buckets tile the line in order. */
static void test_sample_hist_buckets(void **state)
{
	static const __u64 probe[] = { 0,   1,	 15,   16,   17,    31,		32,   33,
				       100, 999, 1000, 2100, 65535, 1ull << 33, ~0ull };

	(void)state;
	for (__u32 b = 0; b + 1 < SAMPLE_HIST_BUCKETS; b++) {
		__u64 lo = sample_hist_floor(b), hi = sample_hist_floor(b + 1);

		assert_true(lo < hi);
		assert_int_equal(sample_hist_bucket(lo), b);
		assert_int_equal(sample_hist_bucket(hi - 1), b);
		/* 16 buckets per power of two: at most 1/16 of the value wide */
		assert_true(b < SAMPLE_HIST_SUB || (hi - lo) * SAMPLE_HIST_SUB <= lo);
	}
	for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++) {
		__u32 b = sample_hist_bucket(probe[i]);

		assert_true(b < SAMPLE_HIST_BUCKETS);
		assert_true(sample_hist_floor(b) <= probe[i]);
		if (b + 1 < SAMPLE_HIST_BUCKETS)
			assert_true(probe[i] < sample_hist_floor(b + 1));
	}
	assert_int_equal(sample_hist_bucket(~0ull), SAMPLE_HIST_BUCKETS - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_complete),
		cmocka_unit_test(test_losses_only),
		cmocka_unit_test(test_families_append),
		cmocka_unit_test(test_cut_never_overruns),
		cmocka_unit_test(test_sample_hist_buckets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
