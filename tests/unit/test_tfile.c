/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tfile (files opened for a target) and membudget (the caches' memory
 * budget): pure logic on a scratch directory, no root needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/membudget.h"
#include "util/tfile.h"

static char dir[PATH_MAX];

static int mk(void **state)
{
	char p[PATH_MAX + 32];
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/bpfprof-tfile-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(p, sizeof(p), "%s/regular", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || write(fd, "x", 1) != 1)
		return -1;
	close(fd);
	snprintf(p, sizeof(p), "%s/empty", dir);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	snprintf(p, sizeof(p), "%s/fifo", dir);
	if (mkfifo(p, 0600))
		return -1;
	snprintf(p, sizeof(p), "%s/to-dev", dir);
	if (symlink("/dev/null", p))
		return -1;
	snprintf(p, sizeof(p), "%s/to-self", dir);
	return symlink("/proc/self/exe", p);
}

static int rm(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static void test_open_in_root(void **state)
{
	int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;
	struct tfile_stats before = *tfile__stats();
	struct stat st;

	(void)state;
	assert_true(root >= 0);
	fd = tfile__open(root, "/regular", &st);
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY | O_NONBLOCK);
	close(fd);
	/* relative and with .. that would climb out: clamped to the root */
	fd = tfile__open(root, "../../../regular", NULL);
	assert_true(fd >= 0);
	close(fd);
	/* a FIFO: refused without waiting for a writer */
	assert_int_equal(tfile__open(root, "fifo", NULL), -EPERM);
	/* an absolute symlink resolves inside the root: /dev/null is not there */
	assert_int_equal(tfile__open(root, "to-dev", NULL), -ENOENT);
	/* a magic link of /proc cannot be reached from inside the root either */
	assert_true(tfile__open(root, "to-self", NULL) < 0);
	assert_int_equal(tfile__open(root, "empty", NULL), -EFBIG);
	assert_int_equal(tfile__stats()->refused_type, before.refused_type + 1);
	assert_int_equal(tfile__stats()->refused_size, before.refused_size + 1);
	close(root);
}

static void test_open_host_and_links(void **state)
{
	char p[PATH_MAX + 32];
	int fd;

	(void)state;
	/* root_fd < 0: the host's "/"; a device is refused */
	assert_int_equal(tfile__open(-1, "/dev/null", NULL), -EPERM);
	snprintf(p, sizeof(p), "%s/regular", dir);
	fd = tfile__open(-1, p, NULL);
	assert_true(fd >= 0);
	close(fd);
	/* a procfs link to a file (what map_files entries are) is followed, and checked */
	fd = tfile__open_link("/proc/self/exe", NULL);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(tfile__open_link(p, NULL), -EPERM);
}

struct fake_cache {
	struct membudget_cache c;
	size_t items; /* 1 MiB each */
};

static size_t fake_evict(void *ctx, size_t want)
{
	struct fake_cache *f = ctx;
	size_t freed = 0;

	while (freed < want && f->items) {
		f->items--;
		freed += 1 << 20;
		f->c.evicted++;
		membudget__charge(&f->c, -(1 << 20));
	}
	return freed;
}

static void test_budget_evicts(void **state)
{
	struct fake_cache f = { .c = { .name = "fake", .evict = fake_evict, .ctx = &f } };

	(void)state;
	f.c.ctx = &f;
	membudget__set(8 << 20);
	membudget__add(&f.c);
	for (int i = 0; i < 100; i++) {
		f.items++;
		membudget__charge(&f.c, 1 << 20);
		assert_true(membudget__used() <= (8 << 20));
	}
	assert_int_equal(f.c.evicted + f.items, 100);
	assert_true(f.c.evicted >= 92);
	assert_int_equal(membudget__evicted(), f.c.evicted);
	membudget__remove(&f.c);
	assert_int_equal(membudget__used(), 0);
	membudget__set(0);
	assert_int_equal(membudget__get(), MEMBUDGET_DEFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_in_root),
		cmocka_unit_test(test_open_host_and_links),
		cmocka_unit_test(test_budget_evicts),
	};

	return cmocka_run_group_tests_name("tfile", tests, mk, rm);
}
