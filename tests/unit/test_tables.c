/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * unwinder (tables.c) against an in-memory store standing in for the BPF
 * maps: which files get rows (only those samples land in, or with eager
 * targets all that fit), eviction of the least recently sampled table when
 * the row budget is full, a refused file built once room appears, coalescing
 * of freed rows, one table shared by every process mapping the file and by
 * files with the same build id, and process descriptions rewritten whenever
 * a table they use appears or goes. Real ELF files give the tables.
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>
#include <gelf.h>
#include <libelf.h>

#include "proc/objfile.h"
#include "proc/proc.h"
#include "unwind/cfi.h"
#include "unwind/tables.h"
#include "util/clock.h"

#define SEC  1000000000ULL
#define MAXP 8

/* What BPF would see. */
struct mem_store {
	struct bpf_urow *rows;
	uint32_t cap;
	uint32_t pids[MAXP];
	struct bpf_proc_unwind procs[MAXP];
	uint32_t gen;
	uint32_t row_writes;
};

static int mem_write_rows(void *ctx, uint32_t first, const struct bpf_urow *rows, uint32_t n)
{
	struct mem_store *m = ctx;

	assert_true((uint64_t)first + n <= m->cap);
	memcpy(&m->rows[first], rows, n * sizeof(*rows));
	m->row_writes++;
	return 0;
}

static struct bpf_proc_unwind *mem_proc(struct mem_store *m, uint32_t pid, bool create)
{
	for (int i = 0; i < MAXP; i++)
		if (m->pids[i] == pid)
			return &m->procs[i];
	if (!create)
		return NULL;
	for (int i = 0; i < MAXP; i++)
		if (!m->pids[i]) {
			m->pids[i] = pid;
			return &m->procs[i];
		}
	return NULL;
}

static int mem_write_proc(void *ctx, uint32_t pid, const struct bpf_proc_unwind *b)
{
	struct bpf_proc_unwind *p = mem_proc(ctx, pid, true);

	if (!p)
		return -E2BIG;
	*p = *b;
	return 0;
}

static void mem_delete_proc(void *ctx, uint32_t pid)
{
	struct mem_store *m = ctx;

	for (int i = 0; i < MAXP; i++)
		if (m->pids[i] == pid)
			m->pids[i] = 0;
}

static int mem_write_gen(void *ctx, uint32_t gen)
{
	((struct mem_store *)ctx)->gen = gen;
	return 0;
}

/* Files with CFI: distinct inodes, and two with the same build id. */
enum {
	F_LIBC,
	F_STDCXX,
	F_LIBFX,
	F_LIBCXX,
	F_NOPIE,
	F_PROG,
	F_PROG_STRIPPED,
	F_PAD,
	NFILES
};

static const char *names[NFILES] = {
	[F_LIBC] = "/usr/lib/x86_64-linux-gnu/libc.so.6",
	[F_STDCXX] = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	[F_LIBFX] = "libfx.so",
	[F_LIBCXX] = "libcxx.so",
	[F_NOPIE] = "prog.nopie",
	[F_PROG] = "prog",
	[F_PROG_STRIPPED] = "prog.stripped",
	[F_PAD] = "libpad.so",
};

struct fixture {
	struct mem_store m;
	struct objtab *objs;
	uint32_t id[NFILES];
	uint32_t rows[NFILES]; /* the table each file needs */
	struct unwinder *u;
};

static uint32_t rows_of(const char *path)
{
	struct unwind_row *rows = NULL;
	struct cfi_stats cs = { 0 };
	size_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(cfi__build(fd, &rows, &n, &cs), 0);
	close(fd);
	free(rows);
	assert_true(n > 0);
	return n;
}

static struct fixture *fixture_new(uint32_t cap)
{
	const char *dir = getenv("FIXTURES");
	struct fixture *f = calloc(1, sizeof(*f));
	struct unwind_store s = {
		.write_rows = mem_write_rows,
		.write_proc = mem_write_proc,
		.delete_proc = mem_delete_proc,
		.write_gen = mem_write_gen,
	};

	assert_non_null(dir);
	assert_non_null(f);
	f->objs = objtab__new();
	assert_non_null(f->objs);
	for (int i = 0; i < NFILES; i++) {
		char path[PATH_MAX];
		struct objfile *o;
		struct stat st;

		if (names[i][0] == '/')
			snprintf(path, sizeof(path), "%s", names[i]);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		assert_int_equal(stat(path, &st), 0);
		o = objtab__get(f->objs, major(st.st_dev), minor(st.st_dev), st.st_ino, path,
				getpid(), 0, 0);
		assert_non_null(o);
		assert_true(o->fd >= 0);
		f->id[i] = o->id;
		f->rows[i] = rows_of(path);
	}
	f->m.cap = cap;
	f->m.rows = calloc(cap, sizeof(*f->m.rows));
	assert_non_null(f->m.rows);
	s.ctx = &f->m;
	assert_int_equal(unwinder__new(&f->u, &s, cap, f->objs), 0);
	return f;
}

static void fixture_free(struct fixture *f)
{
	unwinder__free(f->u);
	objtab__free(f->objs);
	free(f->m.rows);
	free(f);
}

/* A process mapping files[0..n) at 1 GiB apart, each from file offset 0. */
static void proc_sync(struct fixture *f, uint32_t pid, const int *files, uint32_t n)
{
	struct mapping maps[NFILES];
	struct proc p = { .pid = pid, .maps = maps, .nmaps = n };

	for (uint32_t i = 0; i < n; i++)
		maps[i] = (struct mapping){ .start = (i + 1ULL) << 30,
					    .end = ((i + 1ULL) << 30) + (1 << 20),
					    .pgoff = 0,
					    .obj = f->id[files[i]] };
	assert_int_equal(unwinder__sync(f->u, &p), 0);
}

/* The description BPF has of pid's i-th mapping. */
static const struct bpf_umap *umap(struct fixture *f, uint32_t pid, uint32_t i)
{
	struct bpf_proc_unwind *b = mem_proc(&f->m, pid, false);

	assert_non_null(b);
	assert_true(i < b->nmaps);
	return &b->maps[i];
}

static void hit(struct fixture *f, int file, uint64_t t)
{
	unwinder__hit(f->u, f->id[file], t);
}

static void balance(struct fixture *f, uint64_t t)
{
	unwinder__balance(f->u, t, 10 * SEC);
}

/*
 * Only files samples land in get rows, and the executable (first file) of a
 * process described; processes are rewritten when a table they use appears.
 */
static void test_demand_only(void **state)
{
	struct fixture *f = fixture_new(1 << 20);
	int files[] = { F_NOPIE, F_STDCXX, F_LIBFX, F_LIBC };

	(void)state;
	proc_sync(f, 100, files, 4);
	/* no table yet, none refused: pending (a sample through one wakes user space) */
	for (int i = 0; i < 4; i++)
		assert_int_equal(umap(f, 100, i)->kind, UMAP_PENDING);
	assert_int_equal(unwinder__stats(f->u)->tables, 0);

	hit(f, F_LIBFX, 1 * SEC);
	hit(f, F_LIBFX, 1 * SEC);
	balance(f, 1 * SEC);
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_true(unwinder__ready(f->u, f->id[F_NOPIE]));
	assert_false(unwinder__ready(f->u, f->id[F_LIBC]));
	assert_false(unwinder__ready(f->u, f->id[F_STDCXX]));
	assert_int_equal(umap(f, 100, 2)->kind, UMAP_TABLE);
	assert_int_equal(umap(f, 100, 2)->count, f->rows[F_LIBFX]);
	assert_int_equal(umap(f, 100, 0)->kind, UMAP_TABLE);
	assert_int_equal(umap(f, 100, 1)->kind, UMAP_PENDING);
	assert_int_equal(umap(f, 100, 3)->kind, UMAP_PENDING);
	assert_int_equal(unwinder__stats(f->u)->rows_used, f->rows[F_LIBFX] + f->rows[F_NOPIE]);
	/* the rows BPF reads are the file's, sorted */
	for (uint32_t i = 1; i < f->rows[F_LIBFX]; i++)
		assert_true(f->m.rows[umap(f, 100, 2)->first + i - 1].pc <
			    f->m.rows[umap(f, 100, 2)->first + i].pc);
	fixture_free(f);
}

/* The 500th process of a binary: described with the table from the start. */
static void test_shared_by_processes_and_build_id(void **state)
{
	struct fixture *f = fixture_new(1 << 20);
	int a[] = { F_PROG }, b[] = { F_PROG_STRIPPED, F_PROG };

	(void)state;
	proc_sync(f, 1, a, 1);
	hit(f, F_PROG, SEC);
	balance(f, SEC);
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_TABLE);
	for (uint32_t pid = 2; pid < 6; pid++) {
		proc_sync(f, pid, a, 1);
		assert_int_equal(umap(f, pid, 0)->kind, UMAP_TABLE);
		assert_int_equal(umap(f, pid, 0)->first, umap(f, 1, 0)->first);
	}
	/* prog.stripped: another inode, same build id: the same rows once wanted */
	proc_sync(f, 6, b, 2);
	assert_int_equal(umap(f, 6, 0)->kind, UMAP_PENDING);
	hit(f, F_PROG_STRIPPED, 2 * SEC);
	balance(f, 2 * SEC);
	assert_int_equal(umap(f, 6, 0)->kind, UMAP_TABLE);
	assert_int_equal(umap(f, 6, 0)->first, umap(f, 1, 0)->first);
	assert_int_equal(unwinder__stats(f->u)->tables, 1);
	assert_int_equal(unwinder__stats(f->u)->tables_shared, 1);
	assert_int_equal(unwinder__stats(f->u)->rows_used, f->rows[F_PROG]);
	/* a process gone leaves the table for the next one */
	for (uint32_t pid = 1; pid < 7; pid++)
		unwinder__forget(f->u, pid);
	assert_true(unwinder__ready(f->u, f->id[F_PROG]));
	proc_sync(f, 7, a, 1);
	assert_int_equal(umap(f, 7, 0)->kind, UMAP_TABLE);
	fixture_free(f);
}

/* Full: the least recently sampled cold table goes, its users are rewritten first. */
static void test_evicts_least_recently_sampled(void **state)
{
	struct fixture *tmp = fixture_new(1 << 20);
	uint32_t cap, gen;
	struct fixture *f;
	int files[] = { F_LIBCXX, F_LIBFX, F_NOPIE };

	(void)state;
	/* libcxx's rows are enough for nopie's; room for two of the three */
	assert_true(tmp->rows[F_LIBCXX] >= tmp->rows[F_NOPIE]);
	cap = tmp->rows[F_LIBCXX] + tmp->rows[F_LIBFX];
	fixture_free(tmp);
	f = fixture_new(cap);
	proc_sync(f, 1, files, 3);
	hit(f, F_LIBCXX, 1 * SEC);
	balance(f, 1 * SEC);
	hit(f, F_LIBFX, 1 * SEC);
	balance(f, 1 * SEC);
	hit(f, F_LIBFX, 3 * SEC); /* libcxx: last sampled at 1 s, libfx at 3 s */
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_TABLE);
	gen = f->m.gen;

	hit(f, F_NOPIE, 10 * SEC);
	balance(f, 10 * SEC);
	assert_true(unwinder__ready(f->u, f->id[F_NOPIE]));
	assert_false(unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_int_equal(unwinder__stats(f->u)->tables_evicted, 1);
	assert_int_not_equal(f->m.gen, gen); /* BPF's row cache is void */
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_PENDING);
	assert_int_equal(umap(f, 1, 1)->kind, UMAP_TABLE);
	assert_int_equal(umap(f, 1, 2)->kind, UMAP_TABLE);
	/* nopie took libcxx's rows; no two tables described share a row */
	assert_int_equal(umap(f, 1, 2)->first, 0);
	assert_true(umap(f, 1, 2)->count <= umap(f, 1, 1)->first);
	fixture_free(f);
}

/* Hot tables are not evicted: the newcomer is refused, then built once room appears. */
static void test_refused_then_built(void **state)
{
	struct fixture *tmp = fixture_new(1 << 20);
	struct fixture *f;
	uint32_t cap;
	int files[] = { F_LIBFX, F_LIBCXX };

	(void)state;
	cap = tmp->rows[F_LIBFX] > tmp->rows[F_LIBCXX] ? tmp->rows[F_LIBFX] : tmp->rows[F_LIBCXX];
	fixture_free(tmp);
	f = fixture_new(cap); /* one of the two at a time */
	proc_sync(f, 1, files, 2);
	hit(f, F_LIBFX, 1 * SEC);
	balance(f, 1 * SEC);
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));

	/* libfx is hot (sampled 0.5 s ago): libcxx must wait */
	assert_false(unwinder__hit(f->u, f->id[F_LIBCXX], 1 * SEC + SEC / 2));
	balance(f, 1 * SEC + SEC / 2);
	assert_false(unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_int_equal(unwinder__stats(f->u)->tables_refused, 1);
	/* its frames now fall back for lack of room: counted by the caller */
	assert_true(unwinder__hit(f->u, f->id[F_LIBCXX], 2 * SEC));
	balance(f, 2 * SEC); /* libfx still hot: refused again, not compiled again */
	assert_false(unwinder__ready(f->u, f->id[F_LIBCXX]));

	/* libfx not sampled for a while: room appears */
	hit(f, F_LIBCXX, 5 * SEC);
	balance(f, 5 * SEC);
	assert_true(unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_false(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_int_equal(umap(f, 1, 1)->kind, UMAP_TABLE);
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_PENDING);
	assert_int_equal(unwinder__stats(f->u)->tables_retried, 1);
	assert_int_equal(unwinder__stats(f->u)->tables_evicted, 1);
	/* what the budget should have held: both */
	assert_int_equal(unwinder__rows_wanted(f->u), f->rows[F_LIBCXX] + f->rows[F_LIBFX]);
	fixture_free(f);
}

/* Freed neighbours merge: a table bigger than either evicted one fits in both. */
static void test_freed_rows_coalesce(void **state)
{
	struct fixture *tmp = fixture_new(1 << 20);
	struct fixture *f;
	uint32_t a, b, c;
	int files[] = { F_LIBFX, F_NOPIE, F_PROG, F_LIBCXX };

	(void)state;
	a = tmp->rows[F_LIBFX];
	b = tmp->rows[F_NOPIE];
	c = tmp->rows[F_PROG];
	/* libcxx needs more than libfx or nopie alone, not more than both */
	assert_true(tmp->rows[F_LIBCXX] > a && tmp->rows[F_LIBCXX] > b);
	assert_true(tmp->rows[F_LIBCXX] <= a + b);
	fixture_free(tmp);
	f = fixture_new(a + b + c);
	proc_sync(f, 1, files, 4);
	hit(f, F_LIBFX, 1 * SEC);
	balance(f, 1 * SEC);
	hit(f, F_NOPIE, 2 * SEC);
	balance(f, 2 * SEC);
	hit(f, F_PROG, 3 * SEC);
	balance(f, 3 * SEC);
	assert_int_equal(umap(f, 1, 1)->first, umap(f, 1, 0)->first + a);

	hit(f, F_PROG, 9 * SEC); /* hot; libfx and nopie cold */
	hit(f, F_LIBCXX, 10 * SEC);
	balance(f, 10 * SEC);
	assert_true(unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_true(unwinder__ready(f->u, f->id[F_PROG]));
	assert_int_equal(unwinder__stats(f->u)->tables_evicted, 2);
	assert_int_equal(umap(f, 1, 3)->first, 0);
	fixture_free(f);
}

/* Named targets: their tables at description, but never by evicting a used one. */
static void test_eager_targets(void **state)
{
	struct fixture *f = fixture_new(1 << 20);
	int files[] = { F_LIBFX, F_LIBCXX, F_NOPIE };

	(void)state;
	unwinder__set_eager(f->u, true);
	proc_sync(f, 1, files, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(umap(f, 1, i)->kind, UMAP_TABLE);
	assert_int_equal(unwinder__stats(f->u)->tables, 3);
	fixture_free(f);
}

/*
 * A fixture whose budget the tables of files[0..2] fill exactly, built
 * eagerly (a named target's) for pid 1; files[0] is its executable.
 */
static struct fixture *eager_full(const int *files)
{
	struct fixture *tmp = fixture_new(1 << 20);
	struct fixture *f;
	uint32_t cap = tmp->rows[files[0]] + tmp->rows[files[1]] + tmp->rows[files[2]];

	fixture_free(tmp);
	f = fixture_new(cap);
	unwinder__set_eager(f->u, true);
	proc_sync(f, 1, files, 3);
	assert_int_equal(unwinder__stats(f->u)->tables, 3);
	return f;
}

/*
 * Named targets' tables no sample has used are cold after 0.2 s, and once
 * evicted they are built again for a sample only, not at the next rewrite
 * of the description (each dlopen: `import torch` compiled most of its
 * ~315 libraries twice).
 */
static void test_eager_evicted_not_rebuilt(void **state)
{
	struct fixture *f;
	uint64_t t0;
	int files[] = { F_PROG, F_LIBFX, F_LIBCXX };

	(void)state;
	t0 = mono_ns(); /* descriptions are made at the real time */
	f = eager_full(files);
	/* nopie fits in neither libfx's nor libcxx's rows alone; libfx fits in what nopie leaves */
	assert_true(f->rows[F_NOPIE] > f->rows[F_LIBFX]);
	assert_true(f->rows[F_LIBFX] + f->rows[F_NOPIE] <= f->rows[F_LIBFX] + f->rows[F_LIBCXX]);

	/* 0.6 s later a sample wants nopie: the two tables no sample used make room */
	hit(f, F_PROG, t0 + 6 * SEC / 10);
	hit(f, F_NOPIE, t0 + 6 * SEC / 10);
	balance(f, t0 + 6 * SEC / 10);
	assert_true(unwinder__ready(f->u, f->id[F_NOPIE]));
	assert_true(unwinder__ready(f->u, f->id[F_PROG]));
	assert_false(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_false(unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_int_equal(unwinder__stats(f->u)->tables_evicted, 2);

	/* the description rewritten (a dlopen): libfx would fit, nothing is built */
	proc_sync(f, 1, files, 3);
	assert_false(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_int_equal(unwinder__stats(f->u)->tables, 4);
	assert_int_equal(unwinder__stats(f->u)->tables_rebuilt, 0);

	/* a sample in libfx: built again */
	hit(f, F_LIBFX, t0 + 7 * SEC / 10);
	balance(f, t0 + 7 * SEC / 10);
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_int_equal(unwinder__stats(f->u)->tables_rebuilt, 1);
	assert_int_equal(umap(f, 1, 1)->kind, UMAP_TABLE);
	fixture_free(f);
}

/*
 * -p on a running process: its files' tables are built before the first
 * sample and fill the budget. A sample 0.3 s later (its hot file was left
 * out: no room) finds them cold (0.2 s for a table no sample used; it was
 * 0.5 s, and `bpfprof -p` on a PyTorch loop lost the first half second of
 * stacks), but not the executable's: it is on every stack, wanted from
 * the description on, so the libraries go first.
 */
static void test_eager_tables_make_room_soon(void **state)
{
	struct fixture *f;
	uint64_t t0;
	/* the first file mapped is the executable: libfx here (the lowest id, first of equals) */
	int files[] = { F_LIBFX, F_PROG, F_LIBCXX };

	(void)state;
	t0 = mono_ns();
	f = eager_full(files);
	/* nopie fits where the two others were */
	assert_true(f->rows[F_NOPIE] <= f->rows[F_PROG] + f->rows[F_LIBCXX]);

	hit(f, F_NOPIE, t0 + 3 * SEC / 10);
	balance(f, t0 + 3 * SEC / 10);
	assert_true(unwinder__ready(f->u, f->id[F_NOPIE]));
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX]));
	assert_false(unwinder__ready(f->u, f->id[F_PROG]) &&
		     unwinder__ready(f->u, f->id[F_LIBCXX]));
	assert_true(unwinder__stats(f->u)->tables_evicted >= 1);
	fixture_free(f);
}

/*
 * Tables built for a named target before the events started counting are
 * cold from then on (no sample in flight can need them): a sample 1 ms
 * after the start finds room (with the cache, -p's tables load in ~90 ms
 * and were still young at the ready line); one built after the start
 * waits SPECULATIVE_COLD_NS as before.
 */
static void test_eager_tables_cold_at_start(void **state)
{
	struct fixture *f;
	uint64_t t0;
	int files[] = { F_LIBFX, F_PROG, F_LIBCXX };

	(void)state;
	f = eager_full(files);
	t0 = mono_ns(); /* after the builds, whatever they took */
	assert_true(f->rows[F_NOPIE] <= f->rows[F_PROG] + f->rows[F_LIBCXX]);

	/* not said when sampling started: young, not cold */
	hit(f, F_NOPIE, t0 + SEC / 1000);
	balance(f, t0 + SEC / 1000);
	assert_false(unwinder__ready(f->u, f->id[F_NOPIE]));

	unwinder__sampling_started(f->u, t0 + 2 * SEC / 1000);
	hit(f, F_NOPIE, t0 + 3 * SEC / 1000);
	balance(f, t0 + 3 * SEC / 1000);
	assert_true(unwinder__ready(f->u, f->id[F_NOPIE]));
	assert_true(unwinder__ready(f->u, f->id[F_LIBFX])); /* the executable */
	assert_false(unwinder__ready(f->u, f->id[F_PROG]) &&
		     unwinder__ready(f->u, f->id[F_LIBCXX]));
	fixture_free(f);
}

/* A file bigger than the whole budget: refused, counted, never uploaded. */
static void test_too_big_for_budget(void **state)
{
	struct fixture *f = fixture_new(64);
	int files[] = { F_STDCXX };

	(void)state;
	proc_sync(f, 1, files, 1);
	hit(f, F_STDCXX, SEC);
	balance(f, SEC);
	assert_false(unwinder__ready(f->u, f->id[F_STDCXX]));
	assert_true(unwinder__hit(f->u, f->id[F_STDCXX], 2 * SEC));
	assert_int_equal(f->m.row_writes, 0);
	assert_int_equal(unwinder__rows_wanted(f->u), f->rows[F_STDCXX]);
	/* refused: frame pointers, and no wakeup per sample until room appears */
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_FP);
	fixture_free(f);
}

/*
 * .eh_frame_hdr's FDE i of path: its initial location (ELF vaddr) and that
 * address's file offset (in the executable PT_LOAD); *n: the FDE count.
 */
static uint64_t hdr_fde(const char *path, uint32_t i, uint64_t *off, uint32_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	GElf_Phdr ph, hdr = { 0 }, text = { 0 };
	size_t np;
	uint8_t h[12];
	int32_t ent[2];
	uint64_t vaddr;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getphdrnum(elf, &np), 0);
	for (size_t k = 0; k < np; k++) {
		assert_non_null(gelf_getphdr(elf, (int)k, &ph));
		if (ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			text = ph;
	}
	elf_end(elf);
	assert_true(hdr.p_filesz > sizeof(h));
	assert_int_equal(pread(fd, h, sizeof(h), (off_t)hdr.p_offset), sizeof(h));
	assert_int_equal(h[3], 0x3b); /* datarel sdata4 pairs */
	memcpy(n, h + 8, sizeof(*n));
	assert_true(i < *n);
	assert_int_equal(pread(fd, ent, sizeof(ent), (off_t)(hdr.p_offset + 12 + 8ULL * i)),
			 sizeof(ent));
	close(fd);
	vaddr = hdr.p_vaddr + (int64_t)ent[0];
	assert_true(vaddr >= text.p_vaddr && vaddr < text.p_vaddr + text.p_filesz);
	*off = vaddr - text.p_vaddr + text.p_offset;
	return vaddr;
}

/* The row BPF finds for ELF vaddr in the table m describes (NULL: none). */
static const struct bpf_urow *bpf_row(struct fixture *f, const struct bpf_umap *m, uint64_t vaddr)
{
	/* mapped from offset 0, and the first PT_LOAD has vaddr == offset 0 */
	uint64_t pc = (m->start + vaddr) - m->bias;
	const struct bpf_urow *r = NULL;

	for (uint32_t i = m->first; i < m->first + m->count && f->m.rows[i].pc <= pc; i++)
		r = &f->m.rows[i];
	return r;
}

/* The whole table's rule at vaddr, as cfi__build compiles it. */
static void assert_row_as_whole(const struct bpf_urow *r, const struct unwind_row *whole, size_t n,
				uint64_t vaddr)
{
	const struct unwind_row *w = cfi__find(whole, n, vaddr);

	assert_non_null(r);
	assert_non_null(w);
	assert_int_equal(r->rules & 15, w->cfa_rule);
	assert_int_equal(r->cfa_off, w->cfa_off);
}

/*
 * A huge file (more FDEs than unwinder__set_partial's threshold) gets rows
 * only for the functions samples land in: the rest is a gap (UROW_CFA_GAP);
 * a frame in a new function grows the table into a new range, the process
 * rewritten to it, the old rows freed (a new generation), and both
 * functions' rows are the whole table's.
 */
static void test_partial_table(void **state)
{
	/* room for half of its whole table: partial (where it fits, whole: below) */
	struct fixture *f = fixture_new(rows_of(names[F_STDCXX]) / 2);
	int files[] = { F_STDCXX };
	uint32_t id = f->id[F_STDCXX], nfdes, first, gen;
	uint64_t a, b, c, aoff, boff, coff;
	struct unwind_row *whole = NULL;
	struct cfi_stats cs;
	size_t nwhole = 0;
	const struct unwinder_stats *st = unwinder__stats(f->u);
	const struct bpf_umap *m;
	int fd;

	(void)state;
	a = hdr_fde(names[F_STDCXX], 100, &aoff, &nfdes);
	b = hdr_fde(names[F_STDCXX], nfdes / 2, &boff, &nfdes);
	c = hdr_fde(names[F_STDCXX], nfdes - 10, &coff, &nfdes);
	fd = open(names[F_STDCXX], O_RDONLY | O_CLOEXEC);
	assert_int_equal(cfi__build(fd, &whole, &nwhole, &cs), 0);
	close(fd);
	unwinder__set_partial(f->u, nfdes - 1);

	proc_sync(f, 1, files, 1);
	assert_int_equal(umap(f, 1, 0)->kind, UMAP_PENDING);
	/* a leaf in FDE 100, no table yet (not a partial table's gap) */
	assert_false(unwinder__hit_pc(f->u, id, aoff + 1, SEC));
	balance(f, SEC);
	assert_true(unwinder__ready(f->u, id));
	m = umap(f, 1, 0);
	assert_int_equal(m->kind, UMAP_TABLE);
	assert_true(m->count >= 2 && m->count < 200);
	assert_int_equal(st->partial_files, 1);
	assert_int_equal(st->partial_fdes, 1);
	assert_int_equal(st->partial_rows, m->count);
	assert_int_equal(st->rows_used, m->count);
	/* the code below the first chosen FDE is a gap too */
	assert_int_equal(f->m.rows[m->first].rules & 15, UROW_CFA_GAP);
	assert_row_as_whole(bpf_row(f, m, a + 1), whole, nwhole, a + 1);
	assert_int_equal(bpf_row(f, m, b)->rules & 15, UROW_CFA_GAP);
	assert_int_equal(bpf_row(f, m, c)->rules & 15, UROW_CFA_GAP);
	assert_false(unwinder__hit_pc(f->u, id, aoff + 1, 2 * SEC)); /* in the rows now */

	/* a caller in FDE nfdes/2: the table grows into a new range */
	first = m->first;
	gen = f->m.gen;
	assert_true(unwinder__hit_pc(f->u, id, boff, 2 * SEC));
	balance(f, 2 * SEC);
	m = umap(f, 1, 0);
	assert_int_not_equal(m->first, first);
	assert_int_not_equal(f->m.gen, gen);
	assert_int_equal(st->partial_fdes, 2);
	assert_int_equal(st->partial_grown, 1);
	assert_int_equal(st->rows_used, m->count);
	assert_int_equal(st->tables, 1);
	assert_row_as_whole(bpf_row(f, m, a + 1), whole, nwhole, a + 1);
	assert_row_as_whole(bpf_row(f, m, b), whole, nwhole, b);
	assert_int_equal(bpf_row(f, m, c)->rules & 15, UROW_CFA_GAP);
	assert_true(m->count < 400);
	/* nothing new: no third build */
	assert_false(unwinder__hit_pc(f->u, id, boff, 3 * SEC));
	balance(f, 3 * SEC);
	assert_int_equal(st->partial_grown, 1);
	/* under the threshold a file is whole, and hit_pc does nothing */
	assert_false(unwinder__hit_pc(f->u, f->id[F_LIBFX], 0x1000, 3 * SEC));
	fixture_free(f);

	/* a huge file whose whole table fits gets it, and then wants nothing */
	f = fixture_new(1 << 20);
	unwinder__set_partial(f->u, nfdes - 1);
	proc_sync(f, 1, files, 1);
	assert_false(unwinder__hit_pc(f->u, f->id[F_STDCXX], aoff + 1, SEC));
	hit(f, F_STDCXX, SEC);
	balance(f, SEC);
	m = umap(f, 1, 0);
	assert_int_equal(m->count, f->rows[F_STDCXX]);
	assert_false(unwinder__hit_pc(f->u, f->id[F_STDCXX], boff, 2 * SEC));
	assert_int_equal(unwinder__stats(f->u)->partial_rows, 0);
	free(whole);
	fixture_free(f);
}

/*
 * A partial table made because the whole one had no room becomes the whole
 * table once room appears, where that takes at most half the budget: the
 * hot table that held the budget goes cold, the huge file's next sample
 * builds it whole; the process moves onto the whole rows and the partial
 * ones are freed.
 */
static void test_partial_made_whole(void **state)
{
	struct fixture *tmp = fixture_new(1 << 20);
	int files[] = { F_PAD, F_STDCXX };
	uint32_t w = tmp->rows[F_STDCXX], pad = tmp->rows[F_PAD], cap = 2 * w + 16, nfdes;
	const struct unwinder_stats *st;
	const struct bpf_umap *m;
	struct fixture *f;
	uint64_t aoff, t0;

	(void)state;
	fixture_free(tmp);
	/* libpad (40 FDEs) is not huge; with its table in, libstdc++'s has no room */
	assert_true(pad + w > cap);
	hdr_fde(names[F_STDCXX], 100, &aoff, &nfdes);
	f = fixture_new(cap);
	st = unwinder__stats(f->u);
	unwinder__set_partial(f->u, nfdes - 1);
	/* described at the real time; the executable, libpad, is wanted at once */
	t0 = mono_ns();
	proc_sync(f, 1, files, 2);
	balance(f, t0 + SEC);
	assert_true(unwinder__ready(f->u, f->id[F_PAD]));

	/* a leaf in libstdc++ while libpad is sampled: a partial table */
	hit(f, F_PAD, t0 + 2 * SEC);
	assert_false(unwinder__hit_pc(f->u, f->id[F_STDCXX], aoff + 1, t0 + 2 * SEC));
	hit(f, F_STDCXX, t0 + 2 * SEC);
	balance(f, t0 + 2 * SEC);
	m = umap(f, 1, 1);
	assert_int_equal(m->kind, UMAP_TABLE);
	assert_true(m->count >= 2 && m->count < 200);
	assert_int_equal(st->partial_made, 1);
	assert_int_equal(st->partial_whole, 0);
	assert_int_equal(st->rows_used, pad + m->count);

	/* libpad unsampled for 2 s (cold): the next sample of libstdc++ makes it whole */
	hit(f, F_STDCXX, t0 + 5 * SEC);
	balance(f, t0 + 5 * SEC);
	m = umap(f, 1, 1);
	assert_int_equal(m->kind, UMAP_TABLE);
	assert_int_equal(m->count, w);
	assert_int_equal(st->partial_whole, 1);
	assert_int_equal(st->partial_rows, 0);
	assert_int_equal(st->partial_fdes, 0);
	assert_int_equal(st->tables_evicted, 1); /* libpad, for the room */
	assert_int_equal(st->rows_used, w);
	assert_false(unwinder__ready(f->u, f->id[F_PAD]));
	/* whole: no function of it is wanted any more */
	assert_false(unwinder__hit_pc(f->u, f->id[F_STDCXX], aoff + 1, t0 + 6 * SEC));
	fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demand_only),
		cmocka_unit_test(test_shared_by_processes_and_build_id),
		cmocka_unit_test(test_evicts_least_recently_sampled),
		cmocka_unit_test(test_refused_then_built),
		cmocka_unit_test(test_freed_rows_coalesce),
		cmocka_unit_test(test_eager_targets),
		cmocka_unit_test(test_eager_evicted_not_rebuilt),
		cmocka_unit_test(test_eager_tables_make_room_soon),
		cmocka_unit_test(test_eager_tables_cold_at_start),
		cmocka_unit_test(test_too_big_for_budget),
		cmocka_unit_test(test_partial_table),
		cmocka_unit_test(test_partial_made_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
