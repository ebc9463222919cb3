// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "bpfprof.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/elfsym.h"
#include "unwind/anoncode.h"
#include "unwind/cfi.h"
#include "unwind/cfidigest.h"
#include "unwind/tables.h"
#include "unwind/tcache.h"
#include "util/array.h"
#include "util/htab.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/membudget.h"

#define MAX_SEGS 16

/*
 * A table no sample has touched for this long may be evicted for a file that
 * samples want now. Shorter, and two working sets that alternate faster than
 * this would rebuild each other's tables all the time; longer, and a process
 * that moved on keeps rows it no longer needs.
 */
#define COLD_NS 2000000000ULL
/*
 * A table built for a named target before any sample asked for it (when
 * its process was described) and not sampled since: cold this soon, since
 * a sample reaches user space within ~100 ms. Under COLD_NS, `import torch`
 * (~315 libraries built as they were mapped, more than the default budget)
 * kept libtorch_cpu, sampled all the time, refused for 2 s. At 0.5 s,
 * `bpfprof -p` on a running PyTorch loop (its ~290 files' tables built
 * before the first sample, the budget full) walked the loop's first
 * 0.35-0.5 s of samples by frame pointers through libblas, libtorch_cpu
 * and libtorch_python, each found wanting a drain after the one before:
 * 21-30% of a 3 s profile's samples with missing frames, 13-21% at 0.2 s,
 * 7-11% with the pending files below (bench/history/2026-11.md, "`-p` on a
 * running PyTorch process").
 */
#define SPECULATIVE_COLD_NS 200000000ULL

/* A huge file's whole table is guessed at this many rows an FDE until compiled (libtorch_cpu: 6.4). */
#define PARTIAL_GUESS_ROWS 4

/*
 * A huge file's partial table: .eh_frame_hdr's sorted table (initial
 * location, FDE address, both relative to the header) tells which FDE
 * holds a pc without reading .eh_frame; a bit per FDE says which are
 * wanted, another which are in the rows now.
 */
struct partial {
	int32_t (*hdr)[2];
	uint32_t n;
	uint64_t hdr_vaddr;
	uint64_t *chosen, *inrows; /* bitmaps of n bits */
	uint32_t nchosen, nbuilt;
};

enum otable_state {
	OT_NONE = 0, /* no table: not wanted yet, or evicted */
	OT_READY,    /* rows [first, first + count) */
	OT_NO_TABLE, /* no usable CFI or unreadable: frame pointers, for good */
	OT_REFUSED,  /* wanted, no room: frame pointers until room appears */
};

struct otable {
	uint32_t state;
	uint32_t first, count;
	uint32_t want;	    /* rows the file needs, once compiled (0: not known yet) */
	uint32_t owner;	    /* objfile id whose table serves this file (same CFI bytes), 0: own */
	uint32_t demand;    /* samples since it was queued */
	uint64_t wanted_ns; /* when it was queued */
	uint32_t users;	    /* mappings in process descriptions that use these rows */
	bool queued;	    /* in wanted[] */
	bool sampled;	    /* a sample ever landed in the file */
	bool refused;	    /* refused at least once (for tables_retried) */
	bool speculative;   /* built before a sample asked for it, none since */
	bool evicted;	    /* evicted once: built again for a sample, never speculatively */
	bool pinned;	    /* never cold, never evicted (the vDSO's: see unwinder__set_vdso) */
	uint64_t last_ns;   /* last sample in the file, or when the table was built */
	uint64_t size;	    /* the file's size: what compiling it costs, roughly */
	uint32_t fdes;	    /* FDEs .eh_frame_hdr counts (0: unknown); rarely more than rows */
	int fd;		    /* opened here when the objfile has none (0: not tried, -1: failed) */
	uint64_t base;	    /* vaddr of row pc 0 */
	uint32_t nsegs;
	struct {
		uint64_t off, filesz, vaddr;
		bool exec;
	} segs[MAX_SEGS];      /* PT_LOAD */
	uint32_t fentry;       /* table id the file's file_unwind entry names (0: none) */
	bool probed;	       /* whether it is huge was looked at (partial_probe) */
	bool partial_now;      /* a huge file's rows now are a partial table (not its whole one) */
	bool partial_once;     /* it had one at some time (unwinder_stats.partial_made) */
	uint32_t whole;	       /* a huge file's whole table's rows, once compiled (0: not known) */
	uint64_t whole_try_ns; /* when a partial table was last queued to be made whole */
	struct partial *pt;    /* a huge file's: rows for sampled functions only, else NULL */
	uint64_t hdr_off, hdr_vaddr; /* PT_GNU_EH_FRAME, when its table is the usual one */
	bool hdr_table;

	/* digest of what its table is made from (cfidigest.h), when computed */
	uint8_t digest[CFI_DIGEST_SIZE];
	bool digest_ok;
	int64_t digest_ctime_ns; /* the file's change time then: a rebuild reuses it */
};

struct extent {
	uint32_t first, count;
};

enum anon_state {
	ANON_UNKNOWN = 0, /* not looked at yet */
	ANON_TRAMP,	  /* copies of a trampoline (anoncode.h): UMAP_TRAMP */
	ANON_PLAIN,	  /* anything else: UMAP_ANON */
};

/* A process's executable mapping as described to BPF. */
struct pmap {
	uint64_t start, end, pgoff;
	uint32_t obj;		 /* objfile id, 0: anonymous */
	uint32_t tab;		 /* table id its description uses, 0: none */
	uint8_t anon;		 /* enum anon_state, for obj 0 */
	struct anon_tramp tramp; /* ANON_TRAMP's frame */
};

struct pentry {
	struct pmap *maps;
	uint32_t nmaps;
	uint32_t pid; /* u->procs' key (borrowed: an exit leaves no key copy behind) */
};

struct bpf_store {
	int rows_fd; /* the array of chunks (unwind_rows) */
	int procs_fd, gen_fd, file_fd;
	int *chunk_fds; /* chunk k's array */
	int chunk0;	/* the first chunk, made before: its template (or -1) */
	uint32_t nchunks, chunk_rows;
	bool rows_mmap; /* the chunks are BPF_F_MMAPABLE: rows are copied in, not updated */
};

struct unwinder {
	struct unwind_store store;
	struct bpf_store bpf; /* the store's ctx when the BPF maps are the store */
	bool eager;
	uint64_t sampling_ns;  /* when the events started counting (0: not said) */
	uint32_t partial_fdes; /* files with more FDEs get partial tables (0: none) */
	uint32_t gen;	       /* unwind_gen: bumped when rows are freed (BPF's row cache) */
	uint32_t vdso;	       /* the vDSO's objfile id (0: none): its own file_unwind key */
	uint32_t cap;	       /* rows in the chunks made so far */
	/*
	 * The rows come in chunks of chunk_rows (include/bpfprof.h): nchunks
	 * made, up to max_chunks as sampled files need room (unwinder_grow).
	 * A table takes rows of one chunk.
	 */
	uint32_t chunk_rows, nchunks, max_chunks;
	struct extent *free; /* free rows, sorted by first, never adjacent */
	uint32_t nfree, capfree;
	struct otable *tables; /* by objfile id */
	uint32_t ntables;
	uint32_t *wanted; /* table ids hit with no table since the last balance */
	uint32_t nwanted, capwanted;
	struct objtab *objs;
	struct htab *procs;  /* pid -> struct pentry * */
	struct htab *by_dig; /* CFI digest -> objfile id owning its rows (trusted files only) */
	struct bpf_proc_unwind *buf;
	struct unwinder_stats st;
	struct tcache *cache; /* tables kept between runs (--unwind-cache), NULL: off */
	/*
	 * Its bookkeeping in the memory budget ("unwinder", reported): the
	 * table of every file, every process's mappings, build ids. The rows
	 * themselves are BPF map memory, bounded by --unwind-mem.
	 */
	struct membudget_cache mb;
};

/*
 * Rows through a shared mapping of the array: a memcpy. Through
 * bpf_map_update_batch every 8-byte row was two copies from user space and
 * an element update in the kernel (~100 ns a row: three times what
 * compiling the CFI cost, the bulk of a whole-machine agent's steady
 * state). A window of at most MMAP_CHUNK is mapped at a time and unmapped
 * right after, so that the rows never count in the agent's RSS.
 */
static int mmap_write_rows(struct bpf_store *s, uint32_t k, uint32_t first,
			   const struct bpf_urow *rows, uint32_t n)
{
	enum {
		MMAP_CHUNK = 1 << 20
	};
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t b = (uint64_t)first * sizeof(*rows), e = b + (uint64_t)n * sizeof(*rows);
	const char *src = (const char *)rows;

	while (b < e) {
		uint64_t off = b & ~(pg - 1), end = e - off > MMAP_CHUNK ? off + MMAP_CHUNK : e;
		size_t len = (end - off + pg - 1) & ~(pg - 1);
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->chunk_fds[k],
			       (off_t)off);

		if (p == MAP_FAILED)
			return -errno;
		memcpy(p + (b - off), src, end - b);
		munmap(p, len);
		src += end - b;
		b = end;
	}
	return 0;
}

#define HTAB_ENTRY_BYTES 48 /* an entry and its share of the buckets, roughly */

static void charge(struct unwinder *u, long long delta)
{
	membudget__charge(&u->mb, delta);
}

static bool bit(const uint64_t *v, uint32_t i)
{
	return v[i / 64] >> (i % 64) & 1;
}

/* A partial table with FDEs wanted that its rows do not hold yet. */
static bool partial_stale(const struct otable *t)
{
	return t->pt && t->partial_now && t->pt->nchosen != t->pt->nbuilt;
}

/* A huge file's whole table's rows: known once compiled, else guessed. */
static uint64_t whole_rows(const struct otable *t)
{
	return t->whole ? t->whole : (uint64_t)t->fdes * PARTIAL_GUESS_ROWS;
}

/*
 * A partial table made while its whole one had no room, whose whole one
 * would take at most half the budget: tried whole again every
 * WHOLE_RETRY_NS (a sample wants it), as a refused file is. A try that
 * finds no room costs a walk over the tables (rows_available), not a
 * compile: as often as speculative tables go cold.
 */
#define WHOLE_RETRY_NS 200000000ULL

/*
 * Half the budget, or one chunk if that is less: the most a huge file's
 * whole table may take (over it, a partial table, room or not). With a
 * fixed budget of one chunk, as before the rows came in chunks: half of it.
 */
static uint64_t half_budget(const struct unwinder *u)
{
	uint64_t half = (uint64_t)u->max_chunks * u->chunk_rows / 2;

	return half < u->chunk_rows ? half : u->chunk_rows;
}

/* Rows the budget may still grow by (chunks not made yet). */
static uint64_t growable(const struct unwinder *u)
{
	return (uint64_t)(u->max_chunks - u->nchunks) * u->chunk_rows;
}

static bool whole_due(const struct unwinder *u, const struct otable *t, uint64_t now_ns)
{
	return t->partial_now && whole_rows(t) <= half_budget(u) &&
	       now_ns - t->whole_try_ns >= WHOLE_RETRY_NS;
}

/* Rows a table takes now, counted in the partial ones' total when it is partial. */
static void partial_rows(struct unwinder *u, const struct otable *t, long long delta)
{
	if (t->partial_now)
		u->st.partial_rows += delta;
}

/* Its partial rows are gone (evicted, or replaced by the whole table): none of its FDEs is in. */
static void partial_emptied(struct unwinder *u, struct otable *t)
{
	u->st.partial_fdes -= t->pt->nbuilt;
	t->pt->nbuilt = 0;
	memset(t->pt->inrows, 0, (t->pt->n + 63) / 64 * sizeof(uint64_t));
}

static void partial_free(struct partial *pt)
{
	if (!pt)
		return;
	free(pt->hdr);
	free(pt->chosen);
	free(pt->inrows);
	free(pt);
}

static int bpf_write_rows(void *ctx, uint32_t first, const struct bpf_urow *rows, uint32_t n)
{
	enum {
		CHUNK = 65536
	};
	struct bpf_store *s = ctx;
	uint32_t k = first >> UNWIND_CHUNK_SHIFT;
	uint32_t *keys;
	uint32_t done = 0;
	int err = 0;

	if (k >= s->nchunks || (first & UNWIND_CHUNK_MASK) + (uint64_t)n > s->chunk_rows)
		return -EINVAL; /* a table never spans two chunks */
	first &= UNWIND_CHUNK_MASK;
	if (s->rows_mmap) {
		err = mmap_write_rows(s, k, first, rows, n);
		if (!err)
			return 0;
		/* nothing is half written that the batch below does not write again */
		pr_verbose("unwind rows: mapping the row array failed (%s); updating it instead",
			   strerror(-err));
		s->rows_mmap = false;
		err = 0;
	}
	keys = malloc(CHUNK * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	/* one syscall per 64k rows */
	while (done < n) {
		uint32_t cnt = n - done < CHUNK ? n - done : CHUNK;

		for (uint32_t i = 0; i < cnt; i++)
			keys[i] = first + done + i;
		if (bpf_map_update_batch(s->chunk_fds[k], keys, rows + done, &cnt, NULL)) {
			err = -errno;
			break;
		}
		done += cnt;
	}
	free(keys);
	return err;
}

/*
 * Chunk k of rows rows: a new array, put in the array of chunks. BPF finds
 * it there from the next lookup on; the kernel allocates all of its memory
 * now (that is why the rows come in chunks). 0 or -errno.
 */
static int bpf_add_chunk(void *ctx, uint32_t k, uint32_t rows)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
	struct bpf_store *s = ctx;
	int *v, fd, err;

	if (k != s->nchunks || rows != s->chunk_rows)
		return -EINVAL;
	v = realloc(s->chunk_fds, (k + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->chunk_fds = v;
	if (s->chunk0 >= 0) { /* made before the load: the chunks' template */
		fd = s->chunk0;
		s->chunk0 = -1;
	} else {
		fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(__u32),
				    sizeof(struct bpf_urow), rows, &opts);
	}
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(s->rows_fd, &k, &fd, BPF_ANY)) {
		err = -errno;
		close(fd);
		return err;
	}
	s->chunk_fds[k] = fd;
	s->nchunks++;
	return 0;
}

static int bpf_write_proc(void *ctx, uint32_t pid, const struct bpf_proc_unwind *b)
{
	struct bpf_store *s = ctx;

	/* only the used part of maps[] matters to BPF, but the value is fixed-size */
	return bpf_map_update_elem(s->procs_fd, &pid, b, BPF_ANY) ? -errno : 0;
}

/* BPFPROF_TEST_UNDESCRIBED: BPF never gets a description (tests of its early path). */
static int bpf_write_proc_none(void *ctx, uint32_t pid, const struct bpf_proc_unwind *b)
{
	(void)ctx;
	(void)pid;
	(void)b;
	return 0;
}

static void bpf_delete_proc(void *ctx, uint32_t pid)
{
	struct bpf_store *s = ctx;

	bpf_map_delete_elem(s->procs_fd, &pid);
}

static int bpf_write_gen(void *ctx, uint32_t gen)
{
	struct bpf_store *s = ctx;
	uint32_t zero = 0;

	if (s->gen_fd < 0)
		return -ENOENT;
	return bpf_map_update_elem(s->gen_fd, &zero, &gen, BPF_ANY) ? -errno : 0;
}

static int bpf_write_file(void *ctx, const struct file_unwind_key *k, const struct file_unwind *v)
{
	struct bpf_store *s = ctx;

	return bpf_map_update_elem(s->file_fd, k, v, BPF_ANY) ? -errno : 0;
}

static void bpf_delete_file(void *ctx, const struct file_unwind_key *k)
{
	struct bpf_store *s = ctx;

	bpf_map_delete_elem(s->file_fd, k);
}

/* A new generation of rows: BPF's cached row lookups made before are void. */
static void bump_gen(struct unwinder *u)
{
	if (!u->store.write_gen)
		return;
	if (++u->gen == 0)
		u->gen = 1;
	if (u->store.write_gen(u->store.ctx, u->gen)) {
		/* cannot tell BPF: turn its cache off (gen 0) rather than trust it */
		u->gen = 0;
		u->store.write_gen(u->store.ctx, 0);
		u->store.write_gen = NULL;
	}
}

static int unwinder_alloc(struct unwinder **out, const struct unwind_store *store,
			  uint32_t chunk_rows, struct objtab *objs)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->store = *store;
	u->chunk_rows = chunk_rows;
	u->objs = objs;
	u->procs = htab__new(256, 0);
	u->by_dig = htab__new(256, HTAB_COPY_KEYS);
	u->buf = calloc(1, sizeof(*u->buf));
	u->capfree = 64;
	u->free = malloc(u->capfree * sizeof(*u->free));
	if (!u->procs || !u->by_dig || !u->buf || !u->free) {
		unwinder__free(u);
		return -ENOMEM;
	}
	u->mb.name = "unwinder";
	membudget__add(&u->mb);
	charge(u, sizeof(*u) + sizeof(*u->buf) + u->capfree * sizeof(*u->free));
	elf_version(EV_CURRENT);
	*out = u;
	return 0;
}

static void rows_free(struct unwinder *u, uint32_t first, uint32_t n);

/*
 * One more chunk of rows, free from now on; not past max_chunks. The kernel
 * gives it all its memory at once: only for files samples want (a table
 * that has no room even with every cold one evicted), never speculatively.
 * 0 or -errno.
 */
static int unwinder_grow(struct unwinder *u)
{
	uint32_t k = u->nchunks;
	int err;

	if (k >= u->max_chunks || !u->chunk_rows)
		return -ENOSPC;
	if (u->store.add_chunk) {
		err = u->store.add_chunk(u->store.ctx, k, u->chunk_rows);
		if (err) {
			pr_verbose(
				"unwind tables: cannot add %u MiB of rows (%s): the budget stays "
				"%u MiB",
				(unsigned)(((uint64_t)u->chunk_rows * UNWIND_ROW_BYTES) >> 20),
				strerror(-err),
				(unsigned)(((uint64_t)u->cap * UNWIND_ROW_BYTES) >> 20));
			u->max_chunks = k; /* not tried again */
			return err;
		}
	}
	u->nchunks++;
	u->cap += u->chunk_rows;
	u->st.rows_cap = u->cap;
	u->st.rows_max = (uint64_t)u->max_chunks * u->chunk_rows;
	if (k)
		u->st.chunks_added++;
	rows_free(u, k << UNWIND_CHUNK_SHIFT, u->chunk_rows);
	return 0;
}

int unwinder__new(struct unwinder **out, const struct unwind_store *store, uint32_t rows_cap,
		  struct objtab *objs)
{
	int err = unwinder_alloc(out, store, rows_cap, objs);

	if (!err) {
		(*out)->max_chunks = rows_cap ? 1 : 0;
		if (rows_cap)
			unwinder_grow(*out);
		bump_gen(*out);
	}
	return err;
}

int unwinder__new_bpf(struct unwinder **out, int rows_map_fd, int chunk0_fd, uint32_t chunk_rows,
		      uint32_t chunks, uint32_t max_chunks, int procs_map_fd, int gen_map_fd,
		      struct objtab *objs)
{
	struct unwind_store s = {
		.write_rows = bpf_write_rows,
		.write_proc = bpf_write_proc,
		.delete_proc = bpf_delete_proc,
		.write_gen = gen_map_fd >= 0 ? bpf_write_gen : NULL,
		.add_chunk = bpf_add_chunk,
	};
	struct unwinder *u;
	int err = 0;

	if (getenv("BPFPROF_TEST_UNDESCRIBED"))
		s.write_proc = bpf_write_proc_none;
	if (!chunk_rows || chunk_rows > UNWIND_CHUNK_MASK + 1 || !chunks || max_chunks < chunks) {
		if (chunk0_fd >= 0)
			close(chunk0_fd);
		return -EINVAL;
	}
	err = unwinder_alloc(&u, &s, chunk_rows, objs);
	if (err) {
		if (chunk0_fd >= 0)
			close(chunk0_fd);
		return err;
	}
	u->bpf = (struct bpf_store){ .rows_fd = rows_map_fd,
				     .procs_fd = procs_map_fd,
				     .gen_fd = gen_map_fd,
				     .file_fd = -1,
				     .chunk_rows = chunk_rows,
				     .chunk0 = chunk0_fd,
				     .rows_mmap = true };
	u->store.ctx = &u->bpf;
	u->max_chunks = chunks;
	for (uint32_t k = 0; k < chunks && !err; k++)
		err = unwinder_grow(u);
	if (err) {
		unwinder__free(u);
		return err;
	}
	u->max_chunks = max_chunks;
	u->st.rows_max = (uint64_t)max_chunks * chunk_rows;
	bump_gen(u);
	*out = u;
	return 0;
}

void unwinder__set_file_map(struct unwinder *u, int file_map_fd)
{
	u->bpf.file_fd = file_map_fd;
	u->store.write_file = file_map_fd >= 0 ? bpf_write_file : NULL;
	u->store.delete_file = file_map_fd >= 0 ? bpf_delete_file : NULL;
}

void unwinder__free(struct unwinder *u)
{
	size_t it = 0;
	struct htab_entry *e;

	if (!u)
		return;
	if (u->mb.name)
		membudget__remove(&u->mb);
	for (uint32_t k = 0; k < u->bpf.nchunks; k++)
		close(u->bpf.chunk_fds[k]);
	if (u->bpf.chunk0 > 0)
		close(u->bpf.chunk0);
	free(u->bpf.chunk_fds);
	if (u->procs) {
		while ((e = htab__next(u->procs, &it))) {
			struct pentry *pe = (struct pentry *)(uintptr_t)e->val;

			free(pe->maps);
			free(pe);
		}
		htab__free(u->procs);
	}
	htab__free(u->by_dig);
	for (uint32_t i = 0; u->tables && i < u->ntables; i++) {
		if (u->tables[i].fd > 0)
			close(u->tables[i].fd);
		partial_free(u->tables[i].pt);
	}
	free(u->tables);
	free(u->wanted);
	free(u->free);
	free(u->buf);
	free(u);
}

void unwinder__set_eager(struct unwinder *u, bool eager)
{
	u->eager = eager;
}

void unwinder__sampling_started(struct unwinder *u, uint64_t now_ns)
{
	u->sampling_ns = now_ns;
}

void unwinder__set_partial(struct unwinder *u, uint32_t fdes)
{
	u->partial_fdes = fdes;
}

/* First-fit allocation of n rows; returns the first index or -ENOSPC. */
static int64_t rows_alloc(struct unwinder *u, uint32_t n)
{
	for (uint32_t i = 0; i < u->nfree; i++) {
		struct extent *x = &u->free[i];

		if (x->count >= n) {
			uint32_t first = x->first;

			x->first += n;
			x->count -= n;
			if (!x->count) {
				memmove(x, x + 1, (u->nfree - i - 1) * sizeof(*x));
				u->nfree--;
			}
			return first;
		}
	}
	return -ENOSPC;
}

/* Give rows back, merged with free neighbours so that large tables fit again. */
static void rows_free(struct unwinder *u, uint32_t first, uint32_t n)
{
	uint32_t i = 0;

	if (!n)
		return;
	bump_gen(u);
	while (i < u->nfree && u->free[i].first < first)
		i++;
	/* never across chunks: a table's rows are one chunk's */
	if (i > 0 && u->free[i - 1].first + u->free[i - 1].count == first &&
	    u->free[i - 1].first >> UNWIND_CHUNK_SHIFT == first >> UNWIND_CHUNK_SHIFT) {
		u->free[i - 1].count += n;
		if (i < u->nfree && first + n == u->free[i].first &&
		    u->free[i].first >> UNWIND_CHUNK_SHIFT == first >> UNWIND_CHUNK_SHIFT) {
			u->free[i - 1].count += u->free[i].count;
			memmove(&u->free[i], &u->free[i + 1],
				(u->nfree - i - 1) * sizeof(*u->free));
			u->nfree--;
		}
		return;
	}
	if (i < u->nfree && first + n == u->free[i].first &&
	    u->free[i].first >> UNWIND_CHUNK_SHIFT == first >> UNWIND_CHUNK_SHIFT) {
		u->free[i].first = first;
		u->free[i].count += n;
		return;
	}
	if (u->nfree == u->capfree) {
		uint32_t cap = u->capfree * 2;
		struct extent *v = realloc(u->free, cap * sizeof(*v));

		if (!v)
			return; /* leaked until exit: only capacity is lost */
		charge(u, (long long)(cap - u->capfree) * sizeof(*v));
		u->free = v;
		u->capfree = cap;
	}
	memmove(&u->free[i + 1], &u->free[i], (u->nfree - i) * sizeof(*u->free));
	u->free[i] = (struct extent){ first, n };
	u->nfree++;
}

static struct otable *otable_of(struct unwinder *u, uint32_t id)
{
	if (id >= u->ntables) {
		uint32_t n = id * 2 + 64;
		struct otable *v = realloc(u->tables, n * sizeof(*v));

		if (!v)
			return NULL;
		memset(v + u->ntables, 0, (n - u->ntables) * sizeof(*v));
		charge(u, (long long)(n - u->ntables) * sizeof(*v));
		u->tables = v;
		u->ntables = n;
	}
	return &u->tables[id];
}

/* The fd to compile file id from: the objfile's, else one opened here (or -1). */
static int table_fd(const struct unwinder *u, struct objfile *o)
{
	const struct otable *t = &u->tables[o->id];

	if (objfile__fd(o) >= 0) /* opened again if the fd cap had closed it */
		return o->fd;
	return t->fd > 0 ? t->fd : -1;
}

/*
 * The objfile could not be opened (its first process had exited when it was
 * looked at): open it through a live process that maps it, checking it is
 * the same inode, so that every later process of it still gets a table.
 */
static void open_through(struct unwinder *u, const struct objfile *o, uint32_t pid,
			 const struct mapping *m)
{
	struct otable *t = &u->tables[o->id];
	char path[96];
	struct stat st;
	int fd;

	if (o->fd >= 0 || o->parked || t->fd)
		return;
	snprintf(path, sizeof(path), "/proc/%u/map_files/%llx-%llx", pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_ino != o->ino)) {
		close(fd);
		fd = -1;
	}
	t->fd = fd >= 0 ? fd : 0; /* 0: tried again through the next process */
}

/* The id of the table that serves file id now (its own, or an identical file's). */
static uint32_t serving(const struct unwinder *u, uint32_t id)
{
	const struct otable *t;

	if (id >= u->ntables)
		return 0;
	t = &u->tables[id];
	if (t->owner && t->owner < u->ntables && u->tables[t->owner].state == OT_READY)
		return t->owner;
	return t->state == OT_READY ? id : 0;
}

/*
 * The FDE count of .eh_frame_hdr (PT_GNU_EH_FRAME) in its usual encoding
 * (a 4-byte eh_frame_ptr, a udata4 count), or 0.
 */
static uint32_t hdr_fdes(int fd, const GElf_Phdr *ph, bool *table)
{
	uint8_t h[12];
	uint32_t n;

	*table = false;
	if (ph->p_filesz < sizeof(h) || pread(fd, h, sizeof(h), (off_t)ph->p_offset) != sizeof(h))
		return 0;
	if (h[0] != 1 || ((h[1] & 0x0f) != 0x03 && (h[1] & 0x0f) != 0x0b) || h[2] != 0x03)
		return 0;
	memcpy(&n, h + 8, sizeof(n));
	n = le32toh(n);
	/* datarel sdata4 pairs, as GNU ld and lld write them: a partial table can use it */
	*table = h[3] == 0x3b && (uint64_t)n * 8 <= ph->p_filesz - sizeof(h);
	return n;
}

static int read_segments(int fd, struct otable *t)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t n;
	int err = 0;

	if (!elf)
		return -ENOEXEC;
	if (elf_getphdrnum(elf, &n)) {
		err = -ENOEXEC;
		goto out;
	}
	t->nsegs = 0;
	t->fdes = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph))
			continue;
		if (ph.p_type == PT_GNU_EH_FRAME) {
			t->fdes = hdr_fdes(fd, &ph, &t->hdr_table);
			t->hdr_off = ph.p_offset;
			t->hdr_vaddr = ph.p_vaddr;
		}
		if (ph.p_type != PT_LOAD || t->nsegs == MAX_SEGS)
			continue;
		t->segs[t->nsegs].off = ph.p_offset;
		t->segs[t->nsegs].filesz = ph.p_filesz;
		t->segs[t->nsegs].vaddr = ph.p_vaddr;
		t->segs[t->nsegs].exec = ph.p_flags & PF_X;
		t->nsegs++;
	}
out:
	elf_end(elf);
	return err;
}

/* cfi.h's rule numbers are BPF's: rows are converted without a mapping */
_Static_assert((int)CFA_RULE_UNSUPPORTED == (int)UROW_CFA_UNSUPPORTED &&
		       (int)CFA_RULE_SP == (int)UROW_CFA_SP &&
		       (int)CFA_RULE_FP == (int)UROW_CFA_FP &&
		       (int)CFA_RULE_PLT == (int)UROW_CFA_PLT &&
		       (int)CFA_RULE_END == (int)UROW_CFA_END &&
		       (int)CFA_RULE_SIGNAL == (int)UROW_CFA_SIGNAL &&
		       (int)CFA_RULE_GAP == (int)UROW_CFA_GAP,
	       "CFA rules");
_Static_assert((int)RBP_RULE_SAME == (int)UROW_RBP_SAME && (int)RBP_RULE_CFA == (int)UROW_RBP_CFA &&
		       (int)RBP_RULE_UNSUPPORTED == (int)UROW_RBP_UNSUPPORTED,
	       "RBP rules");

static uint8_t rules(uint8_t cfa, uint8_t rbp)
{
	return cfa | rbp << 4;
}

/* Convert the compiler's rows into the BPF layout; returns rows written. */
static uint32_t convert(struct unwinder *u, const struct unwind_row *in, size_t n,
			struct bpf_urow *out, uint64_t base)
{
	uint32_t w = 0;

	for (size_t i = 0; i < n; i++) {
		const struct unwind_row *r = &in[i];
		uint8_t cfa = r->cfa_rule, rbp = r->rbp_rule;
		struct bpf_urow o = { 0 };

		if (r->pc - base > UINT32_MAX)
			break; /* a 4 GiB text: the rest unwinds as unsupported */
		o.pc = r->pc - base;
		if ((cfa == CFA_RULE_SP || cfa == CFA_RULE_FP) &&
		    (r->cfa_off > INT16_MAX || r->cfa_off < INT16_MIN)) {
			cfa = CFA_RULE_UNSUPPORTED;
		}
		if (rbp == RBP_RULE_CFA &&
		    (r->rbp_off % 8 || r->rbp_off / 8 > INT8_MAX || r->rbp_off / 8 < INT8_MIN))
			rbp = RBP_RULE_UNSUPPORTED;
		if (cfa == CFA_RULE_UNSUPPORTED)
			u->st.rows_unsupported++;
		/* PLT rows carry the threshold of their expression (11, or 9 for IBT PLTs) */
		o.cfa_off = (cfa == CFA_RULE_SP || cfa == CFA_RULE_FP || cfa == CFA_RULE_PLT)
				    ? r->cfa_off
				    : 0;
		o.rbp_off8 = rbp == RBP_RULE_CFA ? r->rbp_off / 8 : 0;
		/* cfi.h's rule numbers are the BPF ones (checked in tests) */
		o.rules = rules(cfa, rbp);
		out[w++] = o;
	}
	return w;
}

/*
 * cfi__emit's rows converted as they come: the table is held once, in its
 * 8-byte BPF form, never also whole as 16-byte cfi rows (libtorch_cpu:
 * 11 MiB instead of 11 + 22 MiB at once).
 */
struct urow_sink {
	struct unwinder *u;
	struct bpf_urow *out;
	size_t n, cap;
	uint64_t base; /* the first row's pc */
	bool stopped;  /* a row past base + 4 GiB: the rest is left out */
};

static int urow_put(void *ctx, const struct unwind_row *rows, size_t n)
{
	struct urow_sink *s = ctx;
	uint32_t w;
	int err;

	if (s->stopped)
		return 0;
	if (!s->n)
		s->base = rows[0].pc;
	err = array_grow((void **)&s->out, &s->cap, s->n + n - 1, sizeof(*s->out), 65536);
	if (err)
		return err;
	w = convert(s->u, rows, n, s->out + s->n, s->base);
	s->n += w;
	s->stopped = w < n;
	return 0;
}

/*
 * A file's file_unwind key: its inode as the kernel numbers it; the vDSO's
 * (our own copy, in a memfd) the key BPF gives every process's vDSO.
 */
static struct file_unwind_key file_key(const struct unwinder *u, const struct objfile *o)
{
	if (u->vdso && o->id == u->vdso)
		return (struct file_unwind_key){ FILE_UNWIND_VDSO_DEV, FILE_UNWIND_VDSO_INO };
	return (struct file_unwind_key){ objfile__kdev(o), o->ino };
}

/* Drop the file_unwind entries that name table id's rows (before they are freed). */
static void files_forget(struct unwinder *u, uint32_t id)
{
	for (uint32_t i = OBJ_FIRST; i < u->ntables; i++) {
		struct objfile *o;

		if (u->tables[i].fentry != id)
			continue;
		u->tables[i].fentry = 0;
		o = objtab__by_id(u->objs, i);
		if (o && u->store.delete_file) {
			struct file_unwind_key k = file_key(u, o);

			u->store.delete_file(u->store.ctx, &k);
		}
	}
}

/*
 * File obj's entry in file_unwind, naming table tab's rows (its own, or an
 * identical file's): how BPF walks a process that maps the file
 * before user space has described it. Only the executable segments go in.
 */
static void file_write(struct unwinder *u, uint32_t obj, uint32_t tab)
{
	struct objfile *o = objtab__by_id(u->objs, obj);
	const struct otable *t = &u->tables[tab];
	struct file_unwind v = { .first = t->first, .count = t->count, .base = t->base };
	struct file_unwind_key k;
	uint32_t n = 0;

	if (!u->store.write_file || !o || (!o->ino && obj != u->vdso) || obj >= u->ntables ||
	    u->tables[obj].fentry == tab)
		return;
	for (uint32_t s = 0; s < t->nsegs && n < FILE_UNWIND_SEGS; s++) {
		if (!t->segs[s].exec)
			continue;
		v.segs[n].off = t->segs[s].off;
		v.segs[n].end = t->segs[s].off + (t->segs[s].filesz ? t->segs[s].filesz : 1);
		v.segs[n].delta = t->segs[s].vaddr - t->segs[s].off;
		n++;
	}
	if (!n)
		return;
	k = file_key(u, o);
	if (u->store.write_file(u->store.ctx, &k, &v)) {
		u->st.files_unlisted++;
		return;
	}
	u->tables[obj].fentry = tab;
}

/* No table for obj yet, and one may come on demand: not refused, CFI not found wanting. */
static bool pending(const struct unwinder *u, uint32_t obj)
{
	const struct otable *t = &u->tables[obj];

	return t->state == OT_NONE && (!t->owner || u->tables[t->owner].state == OT_NONE);
}

/* Rewrite pid's description from pe and the tables as they are now. */
static int proc_write(struct unwinder *u, uint32_t pid, struct pentry *pe)
{
	struct bpf_proc_unwind *b = u->buf;
	int err;

	for (uint32_t i = 0; i < pe->nmaps; i++) {
		struct pmap *pm = &pe->maps[i];
		struct bpf_umap *um = &b->maps[i];
		uint32_t id = pm->obj ? serving(u, pm->obj) : 0;
		struct otable *t = id ? &u->tables[id] : NULL;

		memset(um, 0, sizeof(*um));
		um->start = pm->start;
		um->end = pm->end;
		/*
		 * A file whose table is not built, and could be (not wanted yet,
		 * or evicted): pending, so that a sample through it wakes us now
		 * (SAMPLE_F_UNWIND_GAP). Refused for room, or with no CFI:
		 * frame pointers and no wakeup, since nothing can be done until
		 * room appears (a poll finds it) or ever.
		 */
		um->kind = !pm->obj ? UMAP_ANON : pending(u, pm->obj) ? UMAP_PENDING : UMAP_FP;
		if (!pm->obj && pm->anon == ANON_TRAMP) {
			um->kind = UMAP_TRAMP;
			um->first = pm->tramp.cfa;
			um->count = pm->tramp.rbp;
		}
		if (pm->tab)
			u->tables[pm->tab].users--;
		pm->tab = 0;
		if (!t)
			continue;
		/* bias such that row pc = ip - bias; vaddr = ip - start + pgoff + (vaddr - off) */
		for (uint32_t s = 0; s < t->nsegs; s++) {
			if (pm->pgoff >= t->segs[s].off &&
			    pm->pgoff <
				    t->segs[s].off + (t->segs[s].filesz ? t->segs[s].filesz : 1)) {
				um->bias = pm->start - pm->pgoff -
					   (t->segs[s].vaddr - t->segs[s].off) + t->base;
				um->kind = UMAP_TABLE;
				um->first = t->first;
				um->count = t->count;
				pm->tab = id;
				t->users++;
				if (id != pm->obj)
					file_write(u, pm->obj, id);
				break;
			}
		}
	}
	b->nmaps = pe->nmaps;
	u->st.procs_synced++;
	err = u->store.write_proc(u->store.ctx, pid, b);
	if (err) {
		/* BPF keeps what it had: say nothing uses the rows rather than lie */
		for (uint32_t i = 0; i < pe->nmaps; i++)
			if (pe->maps[i].tab)
				u->tables[pe->maps[i].tab].users--, pe->maps[i].tab = 0;
		u->store.delete_proc(u->store.ctx, pid);
	}
	return err;
}

/* Which processes procs_update rewrites, by a mapping of theirs and table id. */
enum procs_of {
	PROCS_USING,	/* the mapping uses id's rows (id evicted or moved) */
	PROCS_SERVED,	/* it has no table, and its file is served by id now (id built) */
	PROCS_NO_TABLE, /* it has no table, its file is id or would be served by it (id
			   refused for room or without usable CFI: pending no more) */
};

static bool procs_hit(const struct unwinder *u, const struct pmap *pm, uint32_t id,
		      enum procs_of which)
{
	if (which == PROCS_USING)
		return pm->tab == id;
	if (!pm->obj || pm->tab)
		return false;
	if (which == PROCS_SERVED)
		return serving(u, pm->obj) == id;
	return pm->obj == id || u->tables[pm->obj].owner == id;
}

/*
 * Table id changed (built, evicted, refused, found wanting): rewrite the
 * processes whose description it changes (see enum procs_of). Before
 * evicted rows are reused.
 */
static void procs_update(struct unwinder *u, uint32_t id, enum procs_of which)
{
	struct htab_entry *e;
	size_t it = 0;

	if (which == PROCS_USING && !u->tables[id].users)
		return;
	while ((e = htab__next(u->procs, &it))) {
		struct pentry *pe = (struct pentry *)(uintptr_t)e->val;
		bool hit = false;

		for (uint32_t i = 0; i < pe->nmaps && !hit; i++)
			hit = procs_hit(u, &pe->maps[i], id, which);
		if (hit)
			proc_write(u, *(const uint32_t *)e->key, pe);
	}
}

static void evict(struct unwinder *u, uint32_t id)
{
	struct otable *t = &u->tables[id];

	t->state = OT_NONE;
	t->evicted = true;
	files_forget(u, id);
	procs_update(u, id, PROCS_USING); /* nobody points at the rows any more */
	rows_free(u, t->first, t->count);
	u->st.rows_used -= t->count;
	partial_rows(u, t, -(long long)t->count);
	if (t->partial_now) {
		/* chosen stays: its rows come back whole when a sample wants the file again */
		t->partial_now = false;
		partial_emptied(u, t);
	}
	u->st.tables_evicted++;
	pr_debug("unwind table of file %u evicted (%u rows, last sampled %.1f s before)", id,
		 t->count, (mono_ns() - t->last_ns) / 1e9);
	t->count = 0;
}

/*
 * A speculative table built before the events started counting is cold from
 * then on: no sample in flight can need it (the first samples reach us
 * within milliseconds when they want a table: UMAP_PENDING), and waiting
 * SPECULATIVE_COLD_NS after such a build only delays the files the first
 * samples are in. With the table cache, -p's ~290 tables for a PyTorch
 * loop load in ~90 ms, so they were 0.1 s young at the ready line and
 * libblas waited the rest (7-11% of a 3 s profile's samples with missing
 * frames; compiled, without the cache, they were old enough: 2-3%).
 */
static bool cold(const struct unwinder *u, const struct otable *t, uint64_t now_ns)
{
	if (t->pinned)
		return false;
	if (t->speculative && u->sampling_ns && t->last_ns < u->sampling_ns)
		return now_ns >= u->sampling_ns;
	return t->last_ns + (t->speculative ? SPECULATIVE_COLD_NS : COLD_NS) <= now_ns;
}

/*
 * The least recently sampled table that may go for a file wanted now: not
 * sampled for COLD_NS (and, with unused_only, used by no process).
 */
static uint32_t coldest(const struct unwinder *u, uint64_t now_ns, bool unused_only, uint32_t not )
{
	uint32_t best = 0;

	for (uint32_t i = OBJ_FIRST; i < u->ntables; i++) {
		const struct otable *t = &u->tables[i];

		if (t->state != OT_READY || i == not || !cold(u, t, now_ns) ||
		    (unused_only && t->users))
			continue;
		if (!best || t->last_ns < u->tables[best].last_ns)
			best = i;
	}
	return best;
}

/*
 * Rows that could be had now: free, plus what evicting every cold table would
 * give, plus (for a file samples want: !unused_only) the chunks the budget
 * may still grow by.
 */
static uint64_t rows_available(const struct unwinder *u, uint64_t now_ns, bool unused_only)
{
	uint64_t n = u->cap - u->st.rows_used + (unused_only ? 0 : growable(u));

	for (uint32_t i = OBJ_FIRST; i < u->ntables; i++) {
		const struct otable *t = &u->tables[i];

		if (t->state == OT_READY && cold(u, t, now_ns) && (!unused_only || !t->users))
			n += t->count;
	}
	return n;
}

/*
 * A table sampled this recently is part of what the machine runs now, if no
 * longer hot enough to be kept from eviction (COLD_NS): worth a new chunk
 * rather than its eviction, while the budget may grow.
 */
#define WARM_NS (30 * 1000000000ULL)

static bool warm(const struct otable *t, uint64_t now_ns)
{
	return t->sampled && !t->speculative && now_ns - t->last_ns < WARM_NS;
}

/* Room for n rows, evicting cold tables (LRU) as needed; first row or -ENOSPC. */
static int64_t make_room(struct unwinder *u, uint32_t n, uint64_t now_ns, bool evict_used,
			 uint32_t self)
{
	int64_t first;
	uint32_t victim;

	while ((first = rows_alloc(u, n)) < 0) {
		victim = coldest(u, now_ns, !evict_used, self);
		/*
		 * For a file samples want, the budget grows by a chunk rather
		 * than lose a table sampled in the last WARM_NS (a GPU host's
		 * torch wanted 65 MiB of rows against the 32 MiB default: 31.5%
		 * of its samples walked by frame pointers; 320 libraries sampled
		 * in turn, 4.5M rows against 4M, evicted and compiled 538 tables
		 * again in 6 s, 27 s of CPU), never for a speculative one.
		 */
		if (evict_used && n <= u->chunk_rows &&
		    (!victim || warm(u->tables + victim, now_ns)) && !unwinder_grow(u))
			continue;
		if (!victim)
			return -ENOSPC;
		evict(u, victim);
	}
	return first;
}

/*
 * Whether another file with the same CFI bytes has a table: then o uses it
 * (the same library in two container layers, or replaced and mapped again).
 * Never by build id alone: anyone can write libc's build id into a program
 * of theirs, whose 29 rows then unwound every process's libc. The digest is
 * of what the table is made from (cfidigest.h), computed here, and only
 * tables of files no other user can change are offered for sharing
 * (publish), so the bytes compiled are the bytes hashed.
 */
static bool share_by_digest(struct unwinder *u, struct objfile *o, struct otable *t)
{
	struct htab_entry *e;

	if (!t->digest_ok)
		return false;
	e = htab__find(u->by_dig, t->digest, CFI_DIGEST_SIZE,
		       htab__hash(t->digest, CFI_DIGEST_SIZE));
	if (!e || e->val == o->id || e->val >= u->ntables || u->tables[e->val].state != OT_READY)
		return false;
	t->owner = e->val;
	u->st.tables_shared++;
	return true;
}

static int64_t ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}

/*
 * The digest of the file open at fd (st: its fstat): hashed, or for a
 * root-owned file one the table cache keeps by its identity (a restart
 * hashed import torch's 314 files again: 0.055 s of CPU). 0 or -errno.
 */
static int file_digest(struct unwinder *u, int fd, const struct stat *st,
		       uint8_t out[CFI_DIGEST_SIZE])
{
	bool memo = u->cache && st->st_nlink && cfi__digest_trusted(st);
	struct tcache_key k = { 0 };
	int err;

	if (memo) {
		k.dev = st->st_dev;
		k.ino = st->st_ino;
		k.size = st->st_size;
		k.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
		k.ctime_ns = ctime_ns(st);
		if (!tcache__known_digest(u->cache, &k)) {
			memcpy(out, k.digest, CFI_DIGEST_SIZE);
			return 0;
		}
	}
	err = cfi__digest(fd, out);
	if (!err && memo) {
		memcpy(k.digest, out, CFI_DIGEST_SIZE);
		tcache__note_digest(u->cache, &k);
	}
	return err;
}

/*
 * Offer file id's new table to files with the same digest: only when its
 * file is root's (or the agent's) and nobody else may write it, and it did
 * not change while it was compiled (st: its fstat before).
 */
static void publish(struct unwinder *u, uint32_t id, int fd, const struct stat *st)
{
	struct otable *t = &u->tables[id];
	struct htab_entry *e;
	struct stat now;
	int ret;

	if (!t->digest_ok || !cfi__digest_trusted(st) || fstat(fd, &now) ||
	    now.st_size != st->st_size || now.st_ctim.tv_sec != st->st_ctim.tv_sec ||
	    now.st_ctim.tv_nsec != st->st_ctim.tv_nsec)
		return;
	ret = htab__upsert(u->by_dig, t->digest, CFI_DIGEST_SIZE,
			   htab__hash(t->digest, CFI_DIGEST_SIZE), &e);
	if (ret >= 0)
		e->val = id;
	if (ret > 0)
		charge(u, CFI_DIGEST_SIZE + HTAB_ENTRY_BYTES);
}

/*
 * The file open at fd as the table cache knows it: the digest of its CFI
 * (t's), and, for a file another user could change between the digest and
 * the compile, its identity here too, so that its table is only ever loaded
 * for that same file again. Not for a file with no name left (the vdso's
 * memfd, a deleted library): no later run can meet it again.
 */
static int cache_key(const struct otable *t, const struct stat *st, struct tcache_key *k)
{
	if (!t->digest_ok || !st->st_nlink)
		return -EINVAL;
	memset(k, 0, sizeof(*k));
	memcpy(k->digest, t->digest, sizeof(k->digest));
	if (cfi__digest_trusted(st))
		return 0;
	k->dev = st->st_dev;
	k->ino = st->st_ino;
	k->size = st->st_size;
	k->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	k->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
	return 0;
}

/*
 * Whether file id is huge (unwinder__set_partial), once, from its program
 * headers (read_segments, which the caller has run): then its .eh_frame_hdr
 * table is read (8 bytes an FDE: 1.7 MiB for libtorch_cpu, against the 11
 * MiB of its whole table) and its table will be partial. A file whose
 * header is missing or unusual gets a whole table, as any other.
 */
static void partial_probe(struct unwinder *u, uint32_t id, int fd)
{
	struct otable *t = &u->tables[id];
	struct partial *pt;
	size_t words;

	if (t->probed)
		return;
	t->probed = true;
	if (!t->hdr_table || !u->partial_fdes || t->fdes <= u->partial_fdes)
		return;
	words = (t->fdes + 63) / 64;
	pt = calloc(1, sizeof(*pt));
	if (!pt)
		return;
	pt->n = t->fdes;
	pt->hdr_vaddr = t->hdr_vaddr;
	pt->hdr = malloc(pt->n * sizeof(*pt->hdr));
	pt->chosen = calloc(words, sizeof(uint64_t));
	pt->inrows = calloc(words, sizeof(uint64_t));
	if (!pt->hdr || !pt->chosen || !pt->inrows ||
	    pread(fd, pt->hdr, pt->n * sizeof(*pt->hdr), (off_t)(t->hdr_off + 12)) !=
		    (ssize_t)(pt->n * sizeof(*pt->hdr))) {
		partial_free(pt);
		return;
	}
	for (uint32_t i = 0; i < pt->n; i++) {
		pt->hdr[i][0] = (int32_t)le32toh((uint32_t)pt->hdr[i][0]);
		pt->hdr[i][1] = (int32_t)le32toh((uint32_t)pt->hdr[i][1]);
	}
	charge(u,
	       (long long)(sizeof(*pt) + pt->n * sizeof(*pt->hdr) + 2 * words * sizeof(uint64_t)));
	t->pt = pt;
	u->st.partial_files++;
}

/* The index of the FDE .eh_frame_hdr says holds vaddr (the last starting at or below it), or -1. */
static int64_t partial_find(const struct partial *pt, uint64_t vaddr)
{
	uint32_t lo = 0, hi = pt->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (pt->hdr_vaddr + (int64_t)pt->hdr[mid][0] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? (int64_t)lo - 1 : -1;
}

/* ELF vaddr of file offset off in an executable segment of t, or 0. */
static uint64_t seg_vaddr(const struct otable *t, uint64_t off)
{
	for (uint32_t s = 0; s < t->nsegs; s++)
		if (t->segs[s].exec && off >= t->segs[s].off &&
		    off < t->segs[s].off + t->segs[s].filesz)
			return off - t->segs[s].off + t->segs[s].vaddr;
	return 0;
}

/*
 * Build (or grow) file id's partial table: the chosen FDEs compiled alone
 * (cfi__emit_fdes: the rest of .eh_frame is not read), put in a new row
 * range; the processes using the old one are rewritten to the new one
 * before the old is freed (which bumps the row generation), as an
 * eviction does. A ready table that finds no room for its larger self
 * keeps its rows and is tried again. Not in the table cache: compiling a
 * few hundred FDEs is cheaper than reading a whole table back, which is
 * what a partial table is there to avoid.
 */
static int build_partial(struct unwinder *u, uint32_t id, int fd, uint64_t now_ns, bool evict_used)
{
	struct objfile *o = objtab__by_id(u->objs, id);
	struct otable *t = &u->tables[id];
	struct partial *pt = t->pt;
	struct urow_sink sink = { .u = u };
	struct cfi_stats cs = { 0 };
	uint64_t t0 = mono_ns(), c0 = thread_cpu_ns();
	bool was_ready = t->state == OT_READY;
	uint32_t old_first = t->first, old_count = t->count, k = 0, chosen = pt->nchosen;
	uint64_t *fdes = malloc((chosen ? chosen : 1) * sizeof(*fdes));
	size_t n = 0;
	int64_t first;
	int err;

	if (!fdes)
		return -ENOMEM;
	for (uint32_t i = 0; i < pt->n && k < chosen; i++)
		if (bit(pt->chosen, i))
			fdes[k++] = pt->hdr_vaddr + (int64_t)pt->hdr[i][1];
	err = cfi__emit_fdes(fd, fdes, k, urow_put, &sink, &cs, &n);
	free(fdes);
	u->st.cfi_cpu_ns += thread_cpu_ns() - c0;
	u->st.build_ns += mono_ns() - t0;
	if (err || !sink.n) {
		free(sink.out);
		pr_debug("%s: no partial unwind table (%s)", o ? o->path : "?",
			 err ? strerror(-err) : "no rows");
		return err ?: -ENODATA;
	}
	t->want = (uint32_t)sink.n;
	first = make_room(u, t->want, now_ns, evict_used, id);
	if (first < 0) {
		free(sink.out);
		pr_debug("%s: no room for a partial table of %u rows (%llu could be had)",
			 o ? o->path : "?", t->want,
			 (unsigned long long)rows_available(u, now_ns, !evict_used));
		return -ENOSPC;
	}
	err = u->store.write_rows(u->store.ctx, (uint32_t)first, sink.out, t->want);
	free(sink.out);
	if (err) {
		rows_free(u, (uint32_t)first, t->want);
		return err;
	}
	t->first = (uint32_t)first;
	t->count = t->want;
	t->base = sink.base;
	t->state = OT_READY;
	t->partial_now = true;
	if (!t->partial_once) {
		t->partial_once = true;
		u->st.partial_made++;
		u->st.partial_fdes_total += t->pt->n;
	}
	t->owner = 0;
	/* file_unwind names the new rows, or none (map full): never the old ones */
	files_forget(u, id);
	file_write(u, id, id);
	if (was_ready) {
		procs_update(u, id, PROCS_USING); /* its users onto the new rows */
		rows_free(u, old_first, old_count);
		u->st.rows_used -= old_count;
		partial_rows(u, t, -(long long)old_count);
		u->st.partial_grown++;
	} else {
		t->speculative = !evict_used;
		u->st.tables++;
		u->st.tables_rebuilt += t->evicted;
		if (t->refused) {
			t->refused = false;
			u->st.tables_retried++;
		}
		procs_update(u, id, PROCS_SERVED);
	}
	if (t->last_ns < now_ns)
		t->last_ns = now_ns;
	u->st.rows_used += t->count;
	partial_rows(u, t, t->count);
	if (u->st.rows_used > u->st.rows_peak)
		u->st.rows_peak = u->st.rows_used;
	u->st.partial_fdes += chosen - pt->nbuilt;
	memcpy(pt->inrows, pt->chosen, (pt->n + 63) / 64 * sizeof(uint64_t));
	pt->nbuilt = chosen;
	pr_debug("%s: partial unwind table, %u of %u functions, %u rows, %.1f ms CPU",
		 o ? o->path : "?", chosen, pt->n, t->count, (thread_cpu_ns() - c0) / 1e6);
	return 0;
}

/*
 * Build file id's table: compile (or load it from the table cache), find room (evicting cold tables when
 * evict_used, else only cold ones nobody uses), upload. Returns 0, -ENOSPC
 * (refused: no room), or another -errno (no usable CFI: for good).
 */
static int build_table(struct unwinder *u, uint32_t id, uint64_t now_ns, bool evict_used)
{
	struct objfile *o = objtab__by_id(u->objs, id);
	struct otable *t = &u->tables[id];
	struct bpf_urow *out = NULL;
	struct cfi_stats cs = { 0 };
	uint64_t t0 = mono_ns(), c0;
	struct tcache_key key;
	bool have_key, was_partial;
	uint32_t old_first, old_count;
	struct stat st;
	size_t n = 0;
	int64_t first;
	uint32_t w;
	int err, fd;

	fd = o ? table_fd(u, o) : -1;
	if (fd < 0)
		return -EBADF; /* not opened (yet): tried again when wanted again */
	if (read_segments(fd, t)) {
		err = -ENOEXEC;
		goto fail;
	}
	partial_probe(u, id, fd);
	/* grown, or made whole where that takes at most half the budget and room appeared */
	if (t->partial_now && (!evict_used || whole_rows(t) > half_budget(u) ||
			       rows_available(u, now_ns, false) < whole_rows(t)))
		return build_partial(u, id, fd, now_ns, evict_used);
	if (fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	/* once per file and change: a table evicted or refused is built again */
	if (!t->digest_ok || t->digest_ctime_ns != ctime_ns(&st)) {
		t->digest_ok = !file_digest(u, fd, &st, t->digest);
		t->digest_ctime_ns = ctime_ns(&st);
	}
	if (!t->partial_now && share_by_digest(u, o, t)) {
		file_write(u, id, t->owner);
		procs_update(u, t->owner, PROCS_SERVED);
		return 0;
	}
	/*
	 * A huge file whose whole table has no room: a partial one instead of
	 * a refusal. Whole where it fits, as any file: its functions are all
	 * covered from the first sample, where a partial table takes about a
	 * sample per function to converge (Debian's torch under -- CMD, 5 s:
	 * partial everywhere left 12-14% of the samples with missing frames,
	 * against 4-6% with libtorch_cpu's whole table, which fits the default
	 * budget there). Its size is guessed until compiled. Not for a named
	 * target's file no sample asked for yet (!evict_used): that waits for
	 * a sample, which may evict cold tables for the whole one, as before;
	 * decided there, `import torch`'s eager tables made libtorch_cpu
	 * partial under -- CMD where a sample found room for it whole. Nor
	 * whole over half the budget, room or not: at --unwind-mem 12m
	 * libtorch_cpu's 1.4M rows evicted every cold table and then held
	 * the budget while the hot python3, libc and libc10 were refused.
	 */
	if (t->pt) {
		uint64_t whole = t->whole ? t->whole : (uint64_t)t->fdes * PARTIAL_GUESS_ROWS;

		if (whole > half_budget(u))
			return build_partial(u, id, fd, now_ns, evict_used);
		if (rows_available(u, now_ns, !evict_used) < whole)
			return evict_used ? build_partial(u, id, fd, now_ns, evict_used) : -ENOSPC;
	}
	/* known too big for what could be freed: do not compile it again */
	if (t->want && rows_available(u, now_ns, !evict_used) < t->want)
		return -ENOSPC;
	/*
	 * Nor, for a named target's file no sample asked for yet, compile one
	 * that has more FDEs than there are rows to be had (a table has about
	 * a row an FDE at least; 6 in libtorch_cpu): once `import torch` had
	 * filled the budget, 109 of its libraries were compiled only to find
	 * no room, 112 ms of the 0.54 s of CPU its tables took. A sample in
	 * the file builds it as usual.
	 */
	if (!evict_used && t->fdes && rows_available(u, now_ns, true) < t->fdes)
		return -ENOSPC;
	c0 = thread_cpu_ns();
	have_key = u->cache && !cache_key(t, &st, &key);
	if (have_key && !tcache__load(u->cache, &key, &out, &w, &t->base)) {
		cs.source = "the table cache";
		for (uint32_t i = 0; i < w; i++)
			u->st.rows_unsupported += (out[i].rules & 15) == CFA_RULE_UNSUPPORTED;
		u->st.tables_cached++;
	} else {
		struct urow_sink sink = { .u = u };

		err = cfi__emit(fd, urow_put, &sink, &cs, &n);
		u->st.cfi_cpu_ns += thread_cpu_ns() - c0;
		u->st.build_ns += mono_ns() - t0;
		out = sink.out;
		if (err || !n) {
			pr_debug("%s: no unwind table (%s)", o->path,
				 err ? strerror(-err) : "no CFI");
			err = err ?: -ENODATA;
			goto fail;
		}
		t->base = sink.base;
		w = (uint32_t)sink.n;
		if (have_key && w)
			tcache__store(u->cache, &key, out, w, t->base);
	}
	t->want = w;
	if (t->pt)
		t->whole = w;
	if (w > u->chunk_rows || rows_available(u, now_ns, !evict_used) < w) {
		free(out);
		return t->pt && (evict_used || w > half_budget(u))
			       ? build_partial(u, id, fd, now_ns, evict_used)
			       : -ENOSPC;
	}
	if (t->pt && w > half_budget(u)) {
		free(out);
		return build_partial(u, id, fd, now_ns, evict_used);
	}
	first = make_room(u, w, now_ns, evict_used, id);
	if (first < 0) {
		free(out);
		/* room enough, but not in one piece */
		return t->pt && evict_used ? build_partial(u, id, fd, now_ns, evict_used) : -ENOSPC;
	}
	err = u->store.write_rows(u->store.ctx, first, out, w);
	free(out);
	out = NULL;
	if (err) {
		pr_verbose("%s: cannot load its unwind table: %s", o->path, strerror(-err));
		rows_free(u, first, w);
		if (t->partial_now)
			return err; /* keeps its partial table */
		goto fail;
	}
	was_partial = t->partial_now;
	old_first = t->first;
	old_count = t->count;
	t->first = first;
	t->count = w;
	t->state = OT_READY;
	t->partial_now = false;
	t->owner = 0;
	t->speculative = !evict_used;
	if (was_partial)
		files_forget(u, id);
	file_write(u, id, id);
	if (t->last_ns < now_ns)
		t->last_ns = now_ns; /* a new table is not the first to go */
	if (was_partial) {
		/* its users onto the whole rows, then the partial ones go */
		procs_update(u, id, PROCS_USING);
		rows_free(u, old_first, old_count);
		u->st.rows_used -= old_count;
		u->st.partial_rows -= old_count;
		partial_emptied(u, t);
		u->st.partial_whole++;
	} else {
		u->st.tables++;
		u->st.tables_rebuilt += t->evicted;
	}
	if (t->refused) {
		t->refused = false;
		u->st.tables_retried++;
	}
	u->st.rows_used += w;
	if (u->st.rows_used > u->st.rows_peak)
		u->st.rows_peak = u->st.rows_used;
	publish(u, id, fd, &st);
	pr_debug("%s: %u unwind rows from %s (%u FDEs), %.1f ms CPU", o->path, w,
		 cs.source ? cs.source : "?", cs.fdes, (thread_cpu_ns() - c0) / 1e6);
	procs_update(u, id, PROCS_SERVED);
	return 0;
fail:
	free(out);
	t->state = OT_NO_TABLE;
	u->st.tables_failed++;
	procs_update(u, id, PROCS_NO_TABLE);
	return err;
}

/*
 * build_table, its CPU counted apart: a table is built once per binary (a
 * new process of a known one builds nothing), so that the agent's steady
 * state, per sample, can be told from what the binaries it met cost.
 */
static int build(struct unwinder *u, uint32_t id, uint64_t now_ns, bool evict_used)
{
	uint64_t c0 = thread_cpu_ns(), c;
	int err = build_table(u, id, now_ns, evict_used);

	c = thread_cpu_ns() - c0;
	u->st.build_cpu_ns += c;
	if (c > u->st.build_cpu_max_ns) {
		u->st.build_cpu_max_ns = c;
		u->st.build_cpu_max_obj = id;
	}
	return err;
}

int unwinder__set_vdso(struct unwinder *u, uint32_t obj)
{
	struct otable *t = otable_of(u, obj);

	if (!t)
		return -ENOMEM;
	u->vdso = obj;
	t->pinned = true;
	return build(u, obj, mono_ns(), false);
}

void unwinder__set_cache(struct unwinder *u, struct tcache *c)
{
	u->cache = c;
}

bool unwinder__ready(const struct unwinder *u, uint32_t obj)
{
	return serving(u, obj) != 0;
}

bool unwinder__hit(struct unwinder *u, uint32_t obj, uint64_t now_ns)
{
	struct otable *t;
	uint32_t id;

	if (obj < OBJ_FIRST || !(t = otable_of(u, obj)))
		return false;
	t->sampled = true;
	id = serving(u, obj);
	if (id) {
		u->tables[id].sampled = true;
		u->tables[id].speculative = false;
		if (u->tables[id].last_ns < now_ns)
			u->tables[id].last_ns = now_ns;
		/*
		 * a partial table that lacks functions samples were in: grown in
		 * balance; or, now and then, made whole if room appeared
		 */
		if (u->tables[id].queued)
			return false;
		if (whole_due(u, &u->tables[id], now_ns))
			u->tables[id].whole_try_ns = now_ns;
		else if (!partial_stale(&u->tables[id]))
			return false;
	}
	if (t->state == OT_NO_TABLE)
		return false;
	t->last_ns = now_ns;
	t->demand++;
	if (!t->queued) {
		struct objfile *o = objtab__by_id(u->objs, obj);
		struct stat st;

		if (!t->size && o && table_fd(u, o) >= 0 && !fstat(table_fd(u, o), &st))
			t->size = st.st_size;
		if (u->nwanted == u->capwanted) {
			uint32_t cap = u->capwanted ? u->capwanted * 2 : 64;
			uint32_t *v = realloc(u->wanted, cap * sizeof(*v));

			if (!v)
				return t->state == OT_REFUSED;
			charge(u, (long long)(cap - u->capwanted) * sizeof(*v));
			u->wanted = v;
			u->capwanted = cap;
		}
		u->wanted[u->nwanted++] = obj;
		t->queued = true;
		t->wanted_ns = now_ns;
	}
	return t->state == OT_REFUSED;
}

bool unwinder__hit_pc(struct unwinder *u, uint32_t obj, uint64_t off, uint64_t now_ns)
{
	struct otable *t;
	struct objfile *o;
	uint64_t vaddr;
	int64_t i;
	int fd;

	if (obj < OBJ_FIRST || !(t = otable_of(u, obj)))
		return false;
	if (!t->probed) {
		o = objtab__by_id(u->objs, obj);
		fd = o ? table_fd(u, o) : -1;
		if (fd < 0)
			return false;
		if (read_segments(fd, t)) {
			t->probed = true; /* not an ELF file we read: never partial */
			return false;
		}
		partial_probe(u, obj, fd);
	}
	/* a huge file with its whole table (or another's, same build id) has nothing to want */
	if (!t->pt || (serving(u, obj) && !t->partial_now) || !(vaddr = seg_vaddr(t, off)) ||
	    (i = partial_find(t->pt, vaddr)) < 0)
		return false;
	if (!bit(t->pt->chosen, (uint32_t)i)) {
		t->pt->chosen[i / 64] |= 1ULL << (i % 64);
		t->pt->nchosen++;
		unwinder__hit(u, obj, now_ns); /* queued to grow */
	}
	/* before any table the walk was by frame pointers as for any file not built yet */
	return t->partial_now && !bit(t->pt->inrows, (uint32_t)i);
}

/*
 * Samples per second since the file was first wanted: a backlog's files,
 * each sampled now and then while they waited, do not outrank a program
 * sampled all the time since a moment ago.
 */
static double demand_rate(const struct otable *t, uint64_t now_ns)
{
	uint64_t waited = now_ns > t->wanted_ns ? now_ns - t->wanted_ns : 0;

	return t->demand / ((waited > 10000000 ? waited : 10000000) / 1e9);
}

struct rank_ctx {
	const struct unwinder *u;
	uint64_t now_ns;
};

/* Most sampled first; of files sampled as often, the smaller first (cheaper to compile). */
static int by_demand(const void *a, const void *b, void *ctx)
{
	const struct rank_ctx *c = ctx;
	const struct otable *x = &c->u->tables[*(const uint32_t *)a];
	const struct otable *y = &c->u->tables[*(const uint32_t *)b];
	double rx = demand_rate(x, c->now_ns), ry = demand_rate(y, c->now_ns);

	if (rx != ry)
		return rx < ry ? 1 : -1;
	return x->size < y->size ? -1 : x->size > y->size;
}

void unwinder__balance(struct unwinder *u, uint64_t now_ns, uint64_t budget_ns)
{
	uint64_t t0 = mono_ns();
	uint32_t i, keep = 0;
	struct rank_ctx rc;

	if (!u->nwanted)
		return;
	rc.u = u;
	rc.now_ns = now_ns;
	qsort_r(u->wanted, u->nwanted, sizeof(*u->wanted), by_demand, &rc);
	for (i = 0; i < u->nwanted; i++) {
		uint32_t id = u->wanted[i];
		struct otable *t = &u->tables[id];
		int err;

		if (mono_ns() - t0 > budget_ns) {
			u->wanted[keep++] = id; /* next time */
			continue;
		}
		t->queued = false;
		t->demand = 0;
		if ((serving(u, id) && !partial_stale(t) && !t->partial_now) ||
		    t->state == OT_NO_TABLE)
			continue;
		err = build(u, id, now_ns, true);
		/* a partial table with no room to grow keeps what it has: tried again */
		if (err == -ENOSPC && t->state != OT_READY) {
			if (t->state != OT_REFUSED) {
				struct objfile *o = objtab__by_id(u->objs, id);

				pr_verbose(
					"unwind table memory full (%u rows): %s (%u rows) unwinds "
					"with frame pointers until room appears",
					u->cap, o ? o->path : "?", t->want);
				t->state = OT_REFUSED;
				procs_update(u, id, PROCS_NO_TABLE);
			}
			t->refused = true;
			u->st.tables_refused++;
		}
	}
	u->nwanted = keep;
}

int unwinder__prepare(struct unwinder *u, uint32_t obj, uint64_t now_ns)
{
	struct otable *t = otable_of(u, obj);

	if (!t)
		return -ENOMEM;
	if (serving(u, obj))
		return 0;
	if (t->state == OT_NO_TABLE)
		return -ENODATA;
	return build(u, obj, now_ns, false);
}

static struct pentry *pentry_of(struct unwinder *u, uint32_t pid, bool create)
{
	struct htab_entry *e;
	int ret;

	if (!create) {
		e = htab__find(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
		return e ? (struct pentry *)(uintptr_t)e->val : NULL;
	}
	ret = htab__upsert(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 1) {
		struct pentry *pe = calloc(1, sizeof(*pe));

		if (!pe) {
			htab__delete(u->procs, &pid, sizeof(pid), e->hash);
			return NULL;
		}
		pe->pid = pid;
		e->key = &pe->pid;
		e->val = (uintptr_t)pe;
		u->st.procs++;
		u->mb.entries++;
		charge(u, sizeof(*pe) + HTAB_ENTRY_BYTES);
	}
	return (struct pentry *)(uintptr_t)e->val;
}

static void pentry_release(struct unwinder *u, struct pentry *pe)
{
	for (uint32_t i = 0; i < pe->nmaps; i++)
		if (pe->maps[i].tab)
			u->tables[pe->maps[i].tab].users--;
	charge(u, -(long long)(pe->nmaps * sizeof(*pe->maps)));
	free(pe->maps);
	pe->maps = NULL;
	pe->nmaps = 0;
}

/*
 * What anonymous code mapping m of pid holds: as the previous description
 * had it (same range), else read from the process once (anoncode.h).
 */
static void anon_classify(struct unwinder *u, uint32_t pid, const struct pentry *old,
			  struct pmap *m)
{
	uint32_t lo = 0, hi = old ? old->nmaps : 0;

	while (lo < hi) { /* old's maps are sorted by start, as /proc lists them */
		uint32_t mid = lo + (hi - lo) / 2;

		if (old->maps[mid].start < m->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < (old ? old->nmaps : 0) && old->maps[lo].start == m->start &&
	    old->maps[lo].end == m->end && !old->maps[lo].obj && old->maps[lo].anon) {
		m->anon = old->maps[lo].anon;
		m->tramp = old->maps[lo].tramp;
		return;
	}
	m->anon = anoncode__classify(pid, m->start, m->end, &m->tramp) ? ANON_PLAIN : ANON_TRAMP;
	u->st.anon_tramps += m->anon == ANON_TRAMP;
}

int unwinder__sync(struct unwinder *u, const struct proc *p)
{
	uint32_t n = p->nmaps < MAX_UMAPS ? p->nmaps : MAX_UMAPS;
	uint64_t now = mono_ns();
	struct pentry *pe;
	struct pmap *maps;

	if (p->nmaps > MAX_UMAPS)
		u->st.maps_dropped += p->nmaps - MAX_UMAPS;
	pe = pentry_of(u, p->pid, true);
	maps = calloc(n ? n : 1, sizeof(*maps));
	if (!pe || !maps) {
		free(maps);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct mapping *m = &p->maps[i];
		struct objfile *o = objtab__by_id(u->objs, m->obj);

		maps[i] = (struct pmap){
			.start = m->start, .end = m->end, .pgoff = m->pgoff, .obj = o ? o->id : 0
		};
		if (o && !otable_of(u, o->id)) {
			maps[i].obj = 0;
			maps[i].anon = ANON_PLAIN;
			continue;
		}
		if (!o) {
			anon_classify(u, p->pid, pe, &maps[i]);
			continue;
		}
		if (o)
			open_through(u, o, p->pid, m);
		/*
		 * named targets: their files' tables now, where they fit next to
		 * used ones; not again once evicted (cold): a description is
		 * rewritten at every dlopen, and `import torch` built, evicted and
		 * built again 170-280 of its ~315 libraries (0.9-1.8 s of CPU)
		 */
		if (o && u->eager && u->tables[o->id].state == OT_NONE &&
		    !u->tables[o->id].evicted && !serving(u, o->id))
			build(u, o->id, now, false);
	}
	pentry_release(u, pe);
	pe->maps = maps;
	pe->nmaps = n;
	charge(u, (long long)(n * sizeof(*maps)));
	/*
	 * A process is described when it runs, and its executable (the first
	 * file mapped) is on nearly every stack it has: wanted now, not once a
	 * sample could be resolved to it (its first samples may come before
	 * its mappings are known). Built just now for a named target, it is
	 * not speculative either: among eager tables of one description (one
	 * build time) the lowest file id went first when room was needed, and
	 * that was the executable (`-p` on python3: its table evicted for
	 * libblas's before a sample had marked it).
	 */
	for (uint32_t i = 0; i < n; i++) {
		if (maps[i].obj) {
			unwinder__hit(u, maps[i].obj, now);
			break;
		}
	}
	return proc_write(u, p->pid, pe);
}

bool unwinder__trampoline(const struct unwinder *u, uint32_t pid, uint64_t addr)
{
	const struct htab_entry *e =
		htab__find(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	const struct pentry *pe = e ? (const struct pentry *)(uintptr_t)e->val : NULL;
	uint32_t lo = 0, hi = pe ? pe->nmaps : 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (pe->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return pe && lo < pe->nmaps && pe->maps[lo].start <= addr && !pe->maps[lo].obj &&
	       pe->maps[lo].anon == ANON_TRAMP;
}

bool unwinder__has(const struct unwinder *u, uint32_t pid)
{
	return htab__find(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid))) != NULL;
}

void unwinder__forget(struct unwinder *u, uint32_t pid)
{
	struct pentry *pe = pentry_of(u, pid, false);

	if (!pe)
		return;
	u->store.delete_proc(u->store.ctx, pid);
	/* the key lives in pe: out of the table first */
	htab__delete(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	pentry_release(u, pe);
	free(pe);
	u->st.procs--;
	u->mb.entries--;
	charge(u, -(long long)(sizeof(*pe) + HTAB_ENTRY_BYTES));
}

uint64_t unwinder__rows_wanted(const struct unwinder *u)
{
	uint64_t n = 0;

	for (uint32_t i = OBJ_FIRST; i < u->ntables; i++) {
		const struct otable *t = &u->tables[i];

		if (t->sampled && !t->owner && t->state != OT_NO_TABLE)
			n += t->want;
	}
	return n;
}

const struct unwinder_stats *unwinder__stats(const struct unwinder *u)
{
	return &u->st;
}
