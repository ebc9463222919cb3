/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* perfmap: /tmp/perf-PID.map text as a JIT writes it, and as garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static void append(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void past_recheck(void)
{
	struct timespec ts = { 0, 150 * 1000000L }; /* PERFMAP_RECHECK_NS and the time share */

	nanosleep(&ts, NULL);
}

/*
 * A map that grows is read from where the last read stopped, never again
 * from the start; an unchanged one (size, mtime) is not read again; one
 * replaced is read again whole.
 */
static void test_read_as_it_grows(void **state)
{
	struct perfmaps *pm = perfmaps__new();
	const char *a = "1000 100 alpha\n", *b = "2000 100 beta\n", *c = "0500 10 early\n";
	char path[64];
	uint32_t id;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	unlink(path);
	append(path, a);
	id = perfmaps__lookup(pm, getpid(), 0x1010);
	assert_string_equal(perfmaps__name(pm, id), "alpha");
	assert_int_equal(perfmaps__stats(pm)->bytes, strlen(a));
	/* half a line: not taken until it is whole */
	append(path, "2000 100 be");
	past_recheck();
	assert_int_equal(perfmaps__lookup(pm, getpid(), 0x2010), 0);
	append(path, "ta\n");
	append(path, c); /* an address below the others: merged in order */
	past_recheck();
	id = perfmaps__lookup(pm, getpid(), 0x2010);
	assert_string_equal(perfmaps__name(pm, id), "beta");
	assert_string_equal(perfmaps__name(pm, perfmaps__lookup(pm, getpid(), 0x505)), "early");
	assert_string_equal(perfmaps__name(pm, perfmaps__lookup(pm, getpid(), 0x1001)), "alpha");
	assert_int_equal(perfmaps__stats(pm)->bytes, strlen(a) + strlen(b) + strlen(c));
	assert_int_equal(perfmaps__stats(pm)->entries, 3);
	/* unchanged: a miss does not read it again */
	past_recheck();
	assert_int_equal(perfmaps__lookup(pm, getpid(), 0x9000), 0);
	assert_int_equal(perfmaps__stats(pm)->bytes, strlen(a) + strlen(b) + strlen(c));
	/* replaced by a shorter file: read again from its start */
	unlink(path);
	append(path, "9000 10 other\n");
	past_recheck();
	assert_string_equal(perfmaps__name(pm, perfmaps__lookup(pm, getpid(), 0x9001)), "other");
	assert_int_equal(perfmaps__stats(pm)->replaced, 1);
	assert_int_equal(perfmaps__lookup(pm, getpid(), 0x1010), 0);
	unlink(path);
	perfmaps__free(pm);
}

/* A symlink where the map should be is refused, even to a file of the process's own. */
static void test_symlink_refused(void **state)
{
	struct perfmaps *pm = perfmaps__new();
	char path[64], real[64];

	(void)state;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	snprintf(real, sizeof(real), "/tmp/perf-%d.map.real", getpid());
	unlink(path);
	append(real, "1000 100 alpha\n");
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(perfmaps__lookup(pm, getpid(), 0x1010), 0);
	assert_int_equal(perfmaps__stats(pm)->refused, 1);
	unlink(path);
	unlink(real);
	perfmaps__free(pm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_sorted_and_named),
		cmocka_unit_test(test_garbage_counted_not_fatal),
		cmocka_unit_test(test_no_such_process),
		cmocka_unit_test(test_evicted_and_read_again),
		cmocka_unit_test(test_read_as_it_grows),
		cmocka_unit_test(test_symlink_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
