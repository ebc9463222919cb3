// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cuda/match.c: GPU records joined to their launches in either order, bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda/match.h"

static struct cm_launch launch(uint32_t tid, size_t stack)
{
	return (struct cm_launch){ .stack = stack, .fn = 3, .tid = tid, .start_ns = 1000 + stack };
}

static void test_launch_then_gpu(void **state)
{
	struct cuda_match *m;
	struct cm_launch l = launch(11, 5), got;
	struct cm_gpu *g;

	(void)state;
	assert_int_equal(cuda_match__new(&m, 0), 0);
	assert_int_equal(cuda_match__launch(m, 100, 7, &l, &g), 0);
	assert_null(g);
	assert_int_equal(cuda_match__waiting(m), 1);
	assert_int_equal(cuda_match__take_launch(m, 101, 7, &got), 0); /* another process's id */
	assert_int_equal(cuda_match__take_launch(m, 100, 8, &got), 0);
	assert_int_equal(cuda_match__take_launch(m, 100, 7, &got), 1);
	assert_int_equal(got.stack, 5);
	assert_int_equal(got.tid, 11);
	assert_int_equal(cuda_match__waiting(m), 0);
	assert_int_equal(cuda_match__take_launch(m, 100, 7, &got), 0); /* taken once */
	cuda_match__free(m);
}

static void test_gpu_then_launch(void **state)
{
	struct cuda_match *m;
	struct cm_launch l = launch(11, 5);
	struct cm_gpu *g, *stored;

	(void)state;
	assert_int_equal(cuda_match__new(&m, 0), 0);
	stored = cuda_match__orphan(
		m, 100, 9,
		&(struct cm_gpu){
			.start_ns = 50, .dur_ns = 20, .kind = 1, .mangled = strdup("_Z1kv") });
	assert_non_null(stored);
	stored->gpid = 4; /* the caller fills its track in afterwards */
	assert_int_equal(cuda_match__launch(m, 100, 9, &l, &g), 0);
	assert_non_null(g);
	assert_int_equal(g->dur_ns, 20);
	assert_int_equal(g->gpid, 4);
	assert_string_equal(g->mangled, "_Z1kv");
	cuda_match__gpu_free(g);
	assert_int_equal(cuda_match__waiting(m), 0); /* joined: the launch does not wait */
	assert_int_equal(cuda_match__launch(m, 100, 9, &l, &g), 0);
	assert_null(g); /* the orphan was taken */
	assert_int_equal(cuda_match__waiting(m), 1);
	cuda_match__free(m);
}

static void test_at_entry_then_corr(void **state)
{
	struct cuda_match *m;
	struct cm_launch a = launch(11, 1), b = launch(11, 2), c = launch(12, 3), got;

	(void)state;
	assert_int_equal(cuda_match__new(&m, 0), 0);
	assert_int_equal(cuda_match__at_entry(m, 100, &a), 0);
	assert_int_equal(cuda_match__at_entry(m, 100, &b), 0); /* the thread's next launch */
	assert_int_equal(cuda_match__at_entry(m, 100, &c), 0); /* another thread */
	assert_int_equal(cuda_match__take_at_entry(m, 100, 11, &got), 1);
	assert_int_equal(got.stack, 2);
	assert_int_equal(cuda_match__take_at_entry(m, 100, 11, &got), 0);
	assert_int_equal(cuda_match__take_at_entry(m, 100, 12, &got), 1);
	assert_int_equal(got.stack, 3);
	assert_int_equal(cuda_match__stats(m)->at_entry_evicted, 0);
	cuda_match__free(m);
}

/* CUPTI dropped GPU records: their launches must not wait for ever. */
static void test_bounded(void **state)
{
	struct cuda_match *m;
	struct cm_launch got;
	struct cm_gpu *g;

	(void)state;
	assert_int_equal(cuda_match__new(&m, 4), 0);
	for (uint32_t corr = 1; corr <= 10; corr++) {
		struct cm_launch l = launch(11, corr);

		assert_int_equal(cuda_match__launch(m, 100, corr, &l, &g), 0);
		assert_true(cuda_match__waiting(m) <= 4);
	}
	assert_int_equal(cuda_match__waiting(m), 4);
	assert_int_equal(cuda_match__stats(m)->launches_evicted, 6);
	assert_int_equal(cuda_match__take_launch(m, 100, 6, &got), 0); /* the oldest went */
	assert_int_equal(cuda_match__take_launch(m, 100, 7, &got), 1); /* the newest stayed */
	assert_int_equal(got.stack, 7);
	for (uint32_t corr = 100; corr < 110; corr++)
		cuda_match__orphan(m, 100, corr,
				   &(struct cm_gpu){ .dur_ns = corr, .mangled = strdup("k") });
	assert_int_equal(cuda_match__stats(m)->gpu_evicted, 6);
	cuda_match__free(m); /* frees the names still stored */
}

/* Many launches joined in turn: nothing accumulates. */
static void test_steady_state(void **state)
{
	struct cuda_match *m;
	struct cm_launch got;
	struct cm_gpu *g;

	(void)state;
	assert_int_equal(cuda_match__new(&m, 0), 0);
	for (uint32_t corr = 1; corr <= 200000; corr++) {
		struct cm_launch l = launch(11, corr);

		assert_int_equal(cuda_match__launch(m, 100, corr, &l, &g), 0);
		if (corr > 8)
			assert_int_equal(cuda_match__take_launch(m, 100, corr - 8, &got), 1);
	}
	assert_int_equal(cuda_match__waiting(m), 8);
	assert_int_equal(cuda_match__stats(m)->launches_evicted, 0);
	cuda_match__free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_launch_then_gpu),	   cmocka_unit_test(test_gpu_then_launch),
		cmocka_unit_test(test_at_entry_then_corr), cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_steady_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
