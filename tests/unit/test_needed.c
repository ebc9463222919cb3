/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * needed: the files a command maps at start, compared with what the dynamic
 * loader itself reports (ldd, i.e. ld.so --list) for the same binaries.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unwind/needed.h"

static bool has(char **files, size_t n, const char *path)
{
	char real[PATH_MAX];

	if (!realpath(path, real))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(files[i], real))
			return true;
	return false;
}

/* Every file ldd names (with a path) is in the list, and the executable first. */
static void check_against_ldd(const char *exe)
{
	char cmd[PATH_MAX + 64], line[PATH_MAX + 128], real[PATH_MAX];
	char **files;
	size_t n, seen = 0;
	FILE *p;

	assert_int_equal(needed__files(exe, &files, &n), 0);
	assert_non_null(realpath(exe, real));
	assert_true(n >= 2);
	assert_string_equal(files[0], real);
	snprintf(cmd, sizeof(cmd), "ldd '%s'", real);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *slash = strchr(line, '/'), *end;

		if (!slash || strstr(line, "linux-vdso"))
			continue;
		end = strpbrk(slash, " \t\n");
		if (end)
			*end = 0;
		assert_true(has(files, n, slash));
		seen++;
	}
	pclose(p);
	assert_true(seen >= 1);
	assert_int_equal(seen, n - 1); /* nothing more than the loader's own list */
	needed__free(files, n);
}

static void test_fixture_program(void **state)
{
	char path[PATH_MAX];

	(void)state;
	snprintf(path, sizeof(path), "%s/prog", getenv("FIXTURES"));
	check_against_ldd(path);
}

/* Found in PATH as execvp finds it; libraries of libraries (python3: libm, libz, libexpat...) */
static void test_path_search_and_transitive(void **state)
{
	(void)state;
	check_against_ldd("/usr/bin/python3");
	{
		char **files;
		size_t n;

		assert_int_equal(needed__files("sh", &files, &n), 0);
		assert_true(n >= 2);
		needed__free(files, n);
	}
}

static void test_bad_commands(void **state)
{
	char **files = (char **)1;
	size_t n = 1;
	char path[PATH_MAX];

	(void)state;
	assert_int_equal(needed__files("no-such-command-bpfprof", &files, &n), -ENOENT);
	assert_null(files);
	assert_int_equal(n, 0);
	assert_int_equal(needed__files("/nonexistent/prog", &files, &n), -ENOENT);
	snprintf(path, sizeof(path), "%s/garbage.bin", getenv("FIXTURES"));
	assert_int_equal(needed__files(path, &files, &n), -ENOEXEC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_program),
		cmocka_unit_test(test_path_search_and_transitive),
		cmocka_unit_test(test_bad_commands),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
