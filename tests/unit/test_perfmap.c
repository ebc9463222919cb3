/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* perfmap: /tmp/perf-PID.map text as a JIT writes it, and as garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbolize/perfmap.h"
#include "util/membudget.h"

static void test_parse_sorted_and_named(void **state)
{
	const char text[] = "7f0000001000 40 JS:*countPrimes file.js:3\n"
			    "0x7f0000000000 100 Interpreter\n"
			    "\n"
			    "7f0000002000 10 JS:*countPrimes file.js:3\n";
	struct perfmaps *pm = perfmaps__new();
	struct perfmap_ent *e;
	int n;

	(void)state;
	assert_non_null(pm);
	n = perfmaps__parse(pm, text, strlen(text), &e);
	assert_int_equal(n, 3);
	assert_true(e[0].start == 0x7f0000000000ULL && e[0].end == 0x7f0000000100ULL);
	assert_string_equal(perfmaps__name(pm, e[0].name), "Interpreter");
	assert_string_equal(perfmaps__name(pm, e[1].name), "JS:*countPrimes file.js:3");
	/* one name, one id: frames of two copies of a function merge */
	assert_int_equal(e[1].name, e[2].name);
	assert_int_equal(perfmaps__stats(pm)->bad, 0);
	assert_null(perfmaps__name(pm, 0));
	assert_null(perfmaps__name(pm, 99));
	free(e);
	perfmaps__free(pm);
}

static void test_garbage_counted_not_fatal(void **state)
{
	const char text[] = "zzz 10 bad\n"
			    "1000 0 empty size\n"
			    "1000 10\n"
			    "ffffffffffffffff 10 wraps\n"
			    "12345678901234567 10 too long\n"
			    "2000 10 good\n"
			    "3000 10 no newline at end";
	struct perfmaps *pm = perfmaps__new();
	struct perfmap_ent *e;
	int n;

	(void)state;
	n = perfmaps__parse(pm, text, strlen(text), &e);
	assert_int_equal(n, 2);
	assert_string_equal(perfmaps__name(pm, e[0].name), "good");
	assert_string_equal(perfmaps__name(pm, e[1].name), "no newline at end");
	assert_int_equal(perfmaps__stats(pm)->bad, 5);
	free(e);
	perfmaps__free(pm);
}

static void test_no_such_process(void **state)
{
	struct perfmaps *pm = perfmaps__new();

	(void)state;
	/* pid 0x7fffffff does not exist: no name, no crash, counted as missed */
	assert_int_equal(perfmaps__lookup(pm, 0x7fffffff, 0x1000), 0);
	assert_int_equal(perfmaps__stats(pm)->missed, 1);
	perfmaps__forget(pm, 0x7fffffff);
	perfmaps__free(pm);
}

/*
 * Our own perf map, evicted by the memory budget and read again: names a
 * frame already took stay valid; only names samples landed in are interned.
 */
static void test_evicted_and_read_again(void **state)
{
	struct perfmaps *pm = perfmaps__new();
	char path[64];
	uint32_t alpha, beta;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("1000 100 alpha\n2000 100 beta\n3000 100 gamma\n", f);
	fclose(f);
	alpha = perfmaps__lookup(pm, getpid(), 0x1010);
	assert_string_equal(perfmaps__name(pm, alpha), "alpha");
	assert_int_equal(perfmaps__stats(pm)->files, 1);
	/* gamma was never looked up: not interned */
	assert_int_equal(perfmaps__lookup(pm, 0x7fffffff, 0x1000), 0);
	/* a budget of one byte: the next map read evicts every other one */
	membudget__set(1);
	assert_int_equal(perfmaps__lookup(pm, 0x7ffffffe, 0x1000), 0);
	membudget__set(0);
	beta = perfmaps__lookup(pm, getpid(), 0x2010);
	assert_string_equal(perfmaps__name(pm, beta), "beta");
	assert_int_equal(perfmaps__stats(pm)->files, 2); /* read again */
	assert_string_equal(perfmaps__name(pm, alpha), "alpha");
	assert_int_equal(perfmaps__lookup(pm, getpid(), 0x1050), alpha);
	assert_null(perfmaps__name(pm, beta + 1));
	unlink(path);
	perfmaps__free(pm);
	assert_int_equal(membudget__used(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_sorted_and_named),
		cmocka_unit_test(test_garbage_counted_not_fatal),
		cmocka_unit_test(test_no_such_process),
		cmocka_unit_test(test_evicted_and_read_again),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
