/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tfile (files opened for a target) and membudget (the caches' memory
 * budget, and the ELF symbols it evicts): pure logic on a scratch directory
 * and this test's own executable, no root needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
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
#include "proc/procmaps.h"
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

__attribute__((noinline)) int budget_probe_one(int x)
{
	return x * 7 + 1;
}

__attribute__((noinline)) int budget_probe_two(int x)
{
	return x * 11 + budget_probe_one(x);
}

struct find_map {
	uintptr_t addr;
	struct procmaps_entry e;
	char path[PATH_MAX];
};

static int find_cb(const struct procmaps_entry *e, void *ctx)
{
	struct find_map *f = ctx;

	if (f->addr < e->start || f->addr >= e->end)
		return 0;
	f->e = *e;
	snprintf(f->path, sizeof(f->path), "%s", e->path);
	f->e.path = f->path;
	return 1;
}

/* Our own mapping of fn's code, as the process table would see it. */
static void find_mapping(void *fn, struct find_map *f)
{
	FILE *m = fopen("/proc/self/maps", "r");

	assert_non_null(m);
	f->addr = (uintptr_t)fn;
	assert_int_equal(procmaps__for_each_exec(m, find_cb, f), 1);
	fclose(m);
}

struct frames {
	uint32_t obj;
	uint64_t offs[2];
};

static void visit_frames(void *ctx, objtab_visit_fn visit, void *arg)
{
	struct frames *fr = ctx;

	for (int i = 0; i < 2; i++)
		visit(arg, fr->obj, fr->offs[i]);
}

/*
 * Symbols evicted by the budget give the same names afterwards: read again
 * from the open file, or, once the file is closed (its processes gone), from
 * the names kept for the frames the stacks hold.
 */
static void test_symbols_evicted_and_reread(void **state)
{
	struct find_map f;
	struct objtab *t = objtab__new();
	struct objfile *o;
	struct frames fr;
	const char *name;
	char one[64], two[64];
	uint64_t va, va2;

	(void)state;
	assert_non_null(t);
	find_mapping((void *)budget_probe_one, &f);
	o = objtab__get(t, f.e.dev_major, f.e.dev_minor, f.e.ino, f.path, getpid(), f.e.start,
			f.e.end);
	assert_non_null(o);
	assert_true(o->fd >= 0);
	fr.obj = o->id;
	fr.offs[0] = (uintptr_t)budget_probe_one - f.e.start + f.e.pgoff;
	fr.offs[1] = (uintptr_t)budget_probe_two - f.e.start + f.e.pgoff;
	objtab__set_frames(t, visit_frames, &fr);

	assert_int_equal(objfile__symbolize(o, fr.offs[0], &name, &va), 0);
	assert_string_equal(name, "budget_probe_one");
	snprintf(one, sizeof(one), "%s", name);
	assert_int_equal(objfile__symbolize(o, fr.offs[1], &name, &va2), 0);
	snprintf(two, sizeof(two), "%s", name);
	assert_string_equal(two, "budget_probe_two");
	assert_true(membudget__used() > 0);

	/* evicted while the file is open: read again */
	assert_true(objtab__evict_syms(t, o) > 0);
	assert_null(o->syms);
	assert_int_equal(objtab__stats(t)->syms_evicted, 1);
	assert_int_equal(objfile__symbolize(o, fr.offs[0], &name, &va), 0);
	assert_string_equal(name, one);
	assert_int_equal(objtab__stats(t)->syms_reread, 1);

	/* its process gone: the file is closed (symbols loaded first), then evicted */
	objtab__sampled(t, o->id);
	objtab__mark_unused(t);
	assert_int_equal(objtab__close_unused(t), 1);
	assert_true(o->fd < 0);
	assert_non_null(o->syms);
	assert_true(objtab__evict_syms(t, o) > 0);
	assert_null(o->syms);
	assert_int_equal(o->nmemo, 4); /* each frame, and each one byte before it */
	assert_int_equal(objfile__symbolize(o, fr.offs[0], &name, &va), 0);
	assert_string_equal(name, one);
	assert_int_equal(objfile__symbolize(o, fr.offs[1], &name, &va), 0);
	assert_string_equal(name, two);
	assert_int_equal(va, va2);
	/* a caller's lookup at the return address - 1 is kept too */
	assert_int_equal(objfile__symbolize(o, fr.offs[1] - 1, &name, &va), 0);
	assert_int_equal(objtab__stats(t)->syms_lost, 0);
	/* an offset no stack held is lost, and counted */
	assert_true(objfile__symbolize(o, fr.offs[1] + 2, &name, &va) < 0);
	assert_null(name);
	assert_int_equal(objtab__stats(t)->syms_lost, 1);

	/* the next interval needs neither the names nor a closed file's symbols */
	objtab__interval(t);
	assert_int_equal(o->nmemo, 0);
	objtab__free(t);
	assert_int_equal(membudget__used(), 0);
}

/* Past the budget, the least recently used symbol tables go first. */
static void test_symbols_lru(void **state)
{
	struct find_map f;
	struct objtab *t = objtab__new();
	struct objfile *o, *vdso;
	const char *name;
	uint64_t va, off;

	(void)state;
	find_mapping((void *)budget_probe_one, &f);
	o = objtab__get(t, f.e.dev_major, f.e.dev_minor, f.e.ino, f.path, getpid(), f.e.start,
			f.e.end);
	vdso = objtab__vdso(t);
	assert_non_null(o);
	assert_non_null(vdso);
	off = (uintptr_t)budget_probe_one - f.e.start + f.e.pgoff;
	assert_int_equal(objfile__symbolize(o, off, &name, &va), 0);
	assert_non_null(o->syms);
	/* a budget just above what this file holds: loading another evicts the older */
	membudget__set(membudget__used() + 1);
	objfile__symbolize(vdso, 0, &name, &va);
	assert_non_null(vdso->syms);
	assert_null(o->syms);
	assert_int_equal(objtab__stats(t)->syms_evicted, 1);
	assert_int_equal(objfile__symbolize(o, off, &name, &va), 0);
	assert_string_equal(name, "budget_probe_one");
	membudget__set(0);
	objtab__free(t);
}

/*
 * The end of a run: every frame named file by file, the symbols freed, the
 * names (and what mappings need: executable or not, build id) kept.
 */
static void test_name_frames(void **state)
{
	struct find_map f;
	struct objtab *t = objtab__new();
	struct objfile *o;
	struct frames fr;
	const char *name;
	bool exec;
	uint64_t va;

	(void)state;
	find_mapping((void *)budget_probe_one, &f);
	o = objtab__get(t, f.e.dev_major, f.e.dev_minor, f.e.ino, f.path, getpid(), f.e.start,
			f.e.end);
	assert_non_null(o);
	fr.obj = o->id;
	fr.offs[0] = (uintptr_t)budget_probe_one - f.e.start + f.e.pgoff;
	fr.offs[1] = (uintptr_t)budget_probe_two - f.e.start + f.e.pgoff;
	objtab__set_frames(t, visit_frames, &fr);
	exec = objfile__executable(o);
	assert_non_null(o->syms);

	assert_int_equal(objtab__name_frames(t, false), 1);
	assert_null(o->syms);
	assert_int_equal(o->nmemo, 4); /* each frame, and each one byte before it */
	assert_int_equal(objfile__symbolize(o, fr.offs[0], &name, &va), 0);
	assert_string_equal(name, "budget_probe_one");
	assert_int_equal(objfile__symbolize(o, fr.offs[1] - 1, &name, &va), 0);
	assert_int_equal(objfile__symbolize(o, fr.offs[1], &name, &va), 0);
	assert_string_equal(name, "budget_probe_two");
	/* from the memo and what was kept: the symbols were not read again */
	assert_int_equal(objfile__executable(o), exec);
	assert_null(o->syms);
	objfile__build_id(o);
	assert_null(o->syms);

	objtab__release(t);
	assert_int_equal(o->nmemo, 0);
	objtab__free(t);
	assert_int_equal(membudget__used(), 0);
}

/* A scratch file of dir for the fd cap: created (or replaced: a new inode), its stat in *st. */
static void cap_file(int i, char *path, size_t len, struct stat *st)
{
	char tmp[PATH_MAX + 32];
	int fd;

	/* created beside it, then renamed over: the old inode still exists, so a new number */
	snprintf(path, len, "%s/cap%d", dir, i);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	assert_int_equal(rename(tmp, path), 0);
	assert_int_equal(stat(path, st), 0);
}

static bool same_inode(int fd, const struct stat *st)
{
	struct stat s;

	return fd >= 0 && !fstat(fd, &s) && s.st_ino == st->st_ino && s.st_dev == st->st_dev;
}

/*
 * The fd cap: past it the least recently used fds are closed ("parked"),
 * opened again on demand with the inode checked, pinned ones never; a file
 * replaced meanwhile is a counted reopen failure.
 */
static void test_fd_cap_lru(void **state)
{
	struct objtab *t = objtab__new();
	struct objfile *o[10];
	struct stat st[10];
	char path[PATH_MAX + 16];
	const struct objtab_stats *s;

	(void)state;
	assert_non_null(t);
	s = objtab__stats(t);
	objtab__set_fd_cap(t, 4);
	for (int i = 0; i < 8; i++) {
		cap_file(i, path, sizeof(path), &st[i]);
		/* no such mapping of ours: opened by path, device and inode checked */
		o[i] = objtab__get(t, major(st[i].st_dev), minor(st[i].st_dev), st[i].st_ino, path,
				   getpid(), 0x1000, 0x2000);
		assert_non_null(o[i]);
		assert_true(same_inode(o[i]->fd, &st[i]));
		assert_true(s->fds <= 4);
	}
	assert_int_equal(s->fds_peak, 4);
	assert_true(s->parked >= 4);
	/* the oldest went first */
	assert_true(o[0]->parked);
	assert_true(o[0]->fd < 0);
	assert_true(o[7]->fd >= 0);

	/* used again: opened again, the same file; still under the cap */
	assert_true(same_inode(objfile__fd(o[0]), &st[0]));
	assert_int_equal(s->reopened, 1);
	assert_true(s->fds <= 4);
	assert_false(o[0]->parked);

	/* a use counts: o[7], used now, outlives o[6] when the next files come */
	assert_true(objfile__fd(o[6]) >= 0);
	assert_true(objfile__fd(o[7]) >= 0);
	assert_true(same_inode(objfile__fd(o[1]), &st[1]));
	objfile__pin(o[1]);
	for (int i = 8; i < 10; i++) {
		cap_file(i, path, sizeof(path), &st[i]);
		o[i] = objtab__get(t, major(st[i].st_dev), minor(st[i].st_dev), st[i].st_ino, path,
				   getpid(), 0x1000, 0x2000);
		assert_non_null(o[i]);
		assert_true(s->fds <= 4);
	}
	assert_true(o[6]->parked);
	assert_true(o[7]->fd >= 0 || o[7]->parked); /* the cap is small: 7 may go, after 6 */
	/* pinned: its /proc/self/fd/N path is in use, never closed by the cap */
	assert_true(same_inode(o[1]->fd, &st[1]));
	for (int i = 2; i < 10; i++)
		assert_true(objfile__fd(o[i]) >= 0);
	assert_true(same_inode(o[1]->fd, &st[1]));
	assert_true(s->fds <= 4);

	/* replaced on disk while parked: not opened again, counted, and no more retried */
	assert_true(o[2]->parked);
	cap_file(2, path, sizeof(path), &st[2]);
	assert_int_equal(objfile__fd(o[2]), -1);
	assert_int_equal(s->reopen_failed, 1);
	assert_false(o[2]->parked);
	assert_true(o[2]->closed);

	objtab__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_in_root),
		cmocka_unit_test(test_open_host_and_links),
		cmocka_unit_test(test_budget_evicts),
		cmocka_unit_test(test_symbols_evicted_and_reread),
		cmocka_unit_test(test_symbols_lru),
		cmocka_unit_test(test_fd_cap_lru),
		cmocka_unit_test(test_name_frames),
	};

	return cmocka_run_group_tests_name("tfile", tests, mk, rm);
}
