// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* /proc/PID/maps parsing, the mapping table of a process, CPU list parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collect/sampler.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "proc/procmaps.h"

static void test_parse_line(void **state)
{
	char line[] = "7f12a0001000-7f12a0021000 r-xp 00001000 fd:01 1234567    "
		      "/usr/lib/x86_64-linux-gnu/libc.so.6\n";
	struct procmaps_entry e;

	(void)state;
	assert_int_equal(procmaps__parse_line(line, &e), 0);
	assert_true(e.start == 0x7f12a0001000ULL && e.end == 0x7f12a0021000ULL);
	assert_true(e.pgoff == 0x1000);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 1);
	assert_true(e.ino == 1234567);
	assert_true(e.readable && !e.writable && e.exec && !e.shared);
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_false(e.deleted);
}

static void test_parse_special(void **state)
{
	char anon[] = "7ffd1000-7ffd3000 rw-p 00000000 00:00 0 \n";
	char vdso[] = "7ffd5000-7ffd7000 r-xp 00000000 00:00 0                          [vdso]";
	char del[] = "55d0-56d0 r-xs 00000000 00:05 99 /memfd:jit (deleted)\n";
	char spaces[] = "1000-2000 r-xp 00000000 08:02 7 /opt/my app/bin x\n";
	struct procmaps_entry e;

	(void)state;
	assert_int_equal(procmaps__parse_line(anon, &e), 0);
	assert_string_equal(e.path, "");
	assert_false(e.exec);
	assert_int_equal(procmaps__parse_line(vdso, &e), 0);
	assert_string_equal(e.path, "[vdso]");
	assert_true(e.exec);
	assert_int_equal(procmaps__parse_line(del, &e), 0);
	assert_string_equal(e.path, "/memfd:jit");
	assert_true(e.deleted && e.shared);
	assert_int_equal(procmaps__parse_line(spaces, &e), 0);
	assert_string_equal(e.path, "/opt/my app/bin x");
}

static void test_parse_garbage(void **state)
{
	char a[] = "garbage\n", b[] = "2000-1000 r-xp 0 00:00 0 x\n",
	     c[] = "1000-2000 rx 0 0:0 0\n";
	char d[] = "";
	struct procmaps_entry e;

	(void)state;
	assert_int_equal(procmaps__parse_line(a, &e), -EINVAL);
	assert_int_equal(procmaps__parse_line(b, &e), -EINVAL);
	assert_int_equal(procmaps__parse_line(c, &e), -EINVAL);
	assert_int_equal(procmaps__parse_line(d, &e), -EINVAL);
}

static int collect(const struct procmaps_entry *e, void *ctx)
{
	int *n = ctx;

	assert_true(e->exec);
	(*n)++;
	return 0;
}

static void test_for_each_exec(void **state)
{
	const char text[] = "400000-401000 r--p 00000000 fd:01 5 /bin/x\n"
			    "401000-402000 r-xp 00001000 fd:01 5 /bin/x\n"
			    "not a line\n"
			    "7f00-8f00 r-xp 00000000 fd:01 6 /lib/y.so\n";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	int n = 0;

	(void)state;
	assert_non_null(f);
	/* the malformed line is reported, the good ones still delivered */
	assert_int_equal(procmaps__for_each_exec(f, collect, &n), -EINVAL);
	assert_int_equal(n, 2);
	fclose(f);
}

static struct mapping M(uint64_t s, uint64_t e, uint64_t off, uint32_t obj) {
	return (struct mapping){ .start = s, .end = e, .pgoff = off, .obj = obj };
}

static void
test_insert_and_find(void **state)
{
	struct proc p = { 0 };
	struct mapping m;
	const struct mapping *f;

	(void)state;
	m = M(0x1000, 0x2000, 0, 20);
	assert_int_equal(proc__insert_mapping(&p, &m), 0);
	m = M(0x5000, 0x9000, 0x4000, 21);
	assert_int_equal(proc__insert_mapping(&p, &m), 0);
	m = M(0x3000, 0x4000, 0, 22);
	assert_int_equal(proc__insert_mapping(&p, &m), 0);
	assert_int_equal(p.nmaps, 3);
	assert_int_equal(p.maps[1].obj, 22); /* kept sorted */

	assert_null(proc__find(&p, 0xfff));
	assert_int_equal(proc__find(&p, 0x1000)->obj, 20);
	assert_int_equal(proc__find(&p, 0x1fff)->obj, 20);
	assert_null(proc__find(&p, 0x2000));
	assert_int_equal(proc__find(&p, 0x8fff)->obj, 21);
	assert_null(proc__find(&p, 0x9000));

	/* mmap over the middle of a mapping splits it, keeping the offsets right */
	m = M(0x6000, 0x7000, 0, 23);
	assert_int_equal(proc__insert_mapping(&p, &m), 0);
	assert_int_equal(p.nmaps, 5);
	f = proc__find(&p, 0x5800);
	assert_true(f->obj == 21 && f->end == 0x6000 && f->pgoff == 0x4000);
	assert_int_equal(proc__find(&p, 0x6800)->obj, 23);
	f = proc__find(&p, 0x7800);
	assert_true(f->obj == 21 && f->start == 0x7000 && f->pgoff == 0x6000);

	/* a mapping covering several replaces them all */
	m = M(0x0, 0x10000, 0, 24);
	assert_int_equal(proc__insert_mapping(&p, &m), 0);
	assert_int_equal(p.nmaps, 1);
	assert_int_equal(proc__find(&p, 0x6800)->obj, 24);

	m = M(0x10, 0x10, 0, 1);
	assert_int_equal(proc__insert_mapping(&p, &m), -EINVAL);
	free(p.maps);
}

static void test_insert_many(void **state)
{
	struct proc p = { 0 };

	(void)state;
	/* inserted in reverse: every insert goes to the front */
	for (int i = 999; i >= 0; i--) {
		struct mapping m = M(i * 0x2000ULL, i * 0x2000ULL + 0x1000, 0, OBJ_FIRST + i);

		assert_int_equal(proc__insert_mapping(&p, &m), 0);
	}
	assert_int_equal(p.nmaps, 1000);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(proc__find(&p, i * 0x2000ULL + 0x800)->obj, OBJ_FIRST + i);
		assert_null(proc__find(&p, i * 0x2000ULL + 0x1800));
	}
	free(p.maps);
}

static void test_cpu_list(void **state)
{
	bool *m;
	int n;

	(void)state;
	assert_int_equal(parse_cpu_list("0-3,5,7-8\n", &m, &n), 0);
	assert_int_equal(n, 9);
	assert_true(m[0] && m[3] && !m[4] && m[5] && !m[6] && m[7] && m[8]);
	free(m);
	assert_int_equal(parse_cpu_list("0", &m, &n), 0);
	assert_int_equal(n, 1);
	free(m);
	assert_int_equal(parse_cpu_list("", &m, &n), -EINVAL);
	assert_int_equal(parse_cpu_list("3-1", &m, &n), -EINVAL);
	assert_int_equal(parse_cpu_list("a", &m, &n), -EINVAL);
	assert_int_equal(parse_cpu_list("1,,2", &m, &n), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_line),	cmocka_unit_test(test_parse_special),
		cmocka_unit_test(test_parse_garbage),	cmocka_unit_test(test_for_each_exec),
		cmocka_unit_test(test_insert_and_find), cmocka_unit_test(test_insert_many),
		cmocka_unit_test(test_cpu_list),
	};

	return cmocka_run_group_tests_name("procmaps", tests, NULL, NULL);
}
