// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * dwlines: source lines of this test's own code (built -g), through libdw,
 * and objtab__lines' memory budget: an object's DWARF is charged while held
 * and given back, least recently used first, when the budget is passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "proc/objfile.h"
#include "symbolize/dwlines.h"
#include "symbolize/elfsym.h"
#include "util/membudget.h"

/* clang-format off */
enum { PROBE_DEF_LINE = __LINE__ + 2 }; /* the line of probe's name */
/* clang-format on */
static __attribute__((noinline)) int probe(volatile int *x)
{
	int n = *x;	/* not the line asked for */
	*x = n * 3 + 1; /* LINE_BODY: the one asked for */
	return *x;
}
enum {
	PROBE_BODY_LINE = PROBE_DEF_LINE + 3
};

static uint64_t load_bias;

static int first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	load_bias = info->dlpi_addr; /* the main program comes first */
	return 1;
}

/* The ELF address of the instruction that stores *x in probe(). */
static uint64_t probe_store_vaddr(struct dwlines *d)
{
	uint64_t start = (uint64_t)(uintptr_t)&probe - load_bias;
	struct dwline dl;

	/* scan probe's first bytes for an address on the body line */
	for (uint64_t a = start; a < start + 64; a++)
		if (!dwlines__lookup(d, a, &dl) && dl.line == PROBE_BODY_LINE)
			return a;
	return 0;
}

static void test_own_lines(void **state)
{
	struct dwlines *d = NULL;
	struct dwline dl;
	uint64_t vaddr;
	int fd, dfd;

	(void)state;
	dl_iterate_phdr(first_object, NULL);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	dfd = elfsym__dwarf_fd(fd, NULL, NULL);
	close(fd);
	assert_true(dfd >= 0);
	/* more than the limit would be held: refused before libdw reads it */
	assert_int_equal(dwlines__open(&d, fcntl(dfd, F_DUPFD_CLOEXEC, 0), 4096), -EFBIG);
	assert_null(d);
	assert_int_equal(dwlines__open(&d, dfd, 0), 0);
	assert_true(dwlines__bytes(d) > 0);

	assert_int_equal(dwlines__lookup(d, (uint64_t)(uintptr_t)&probe - load_bias, &dl), 0);
	assert_non_null(strstr(dl.file, "test_dwlines.c"));
	assert_int_equal(dl.start_line, PROBE_DEF_LINE);
	vaddr = probe_store_vaddr(d);
	assert_true(vaddr != 0);
	assert_int_equal(dwlines__lookup(d, vaddr, &dl), 0);
	assert_int_equal(dl.line, PROBE_BODY_LINE);
	assert_int_equal(dl.start_line, PROBE_DEF_LINE);
	/* not code: no line */
	assert_int_equal(dwlines__lookup(d, 0x10, &dl), -ENOENT);
	dwlines__free(d);
	{
		volatile int x = 1;

		assert_int_equal(probe(&x), 4);
	}
}

/* A file without DWARF and without a debug file: -ENOENT, not a crash. */
static void test_no_dwarf(void **state)
{
	char path[] = "/tmp/bpfprof-dwlines-XXXXXX";
	int fd, dfd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an ELF file, just text\n", 27), 27);
	dfd = elfsym__dwarf_fd(fd, path, NULL);
	assert_true(dfd < 0);
	close(fd);
	unlink(path);
}

static void test_budget_gives_back(void **state)
{
	size_t base = membudget__used(); /* before the table: it charges its own objects too */
	struct objtab *t = objtab__new();
	struct objfile *o;
	struct dwline dl;
	struct stat st;
	char exe[PATH_MAX];
	uint64_t evicted;
	size_t before;

	(void)state;
	dl_iterate_phdr(first_object, NULL);
	assert_non_null(t);
	assert_non_null(realpath("/proc/self/exe", exe));
	assert_int_equal(stat(exe, &st), 0);
	o = objtab__get(t, major(st.st_dev), minor(st.st_dev), st.st_ino, exe, getpid(), 0, 0);
	assert_true(o->fd >= 0);
	assert_non_null(o);
	before = membudget__used();
	/* a budget smaller than one object's DWARF: it is given back at once */
	membudget__set(1);
	evicted = membudget__evicted();
	assert_int_equal(objtab__lines(t, o, (uint64_t)(uintptr_t)&probe - load_bias, &dl),
			 -ENOENT);
	assert_null(o->dw);
	assert_int_equal(membudget__evicted(), evicted + 1);
	assert_int_equal(membudget__used(), before);
	/* within the budget: held, charged, and a later lookup reopens nothing */
	membudget__set(0);
	assert_int_equal(objtab__lines(t, o, (uint64_t)(uintptr_t)&probe - load_bias, &dl), 0);
	assert_non_null(o->dw);
	assert_true(membudget__used() > before);
	assert_int_equal(dl.start_line, PROBE_DEF_LINE);
	objtab__free(t);
	assert_int_equal(membudget__used(), base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_lines),
		cmocka_unit_test(test_no_dwarf),
		cmocka_unit_test(test_budget_gives_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
