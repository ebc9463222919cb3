/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * unwinder: the user-space half of table-driven unwinding. Compiles a file's
 * CFI (cfi.c) into rows in the BPF `unwind_rows` array, one table per file
 * (objfile: device and inode; files with the same build id share one), used
 * by every process that maps the file, and describes each process's
 * executable mappings in `proc_unwind`.
 *
 * The row array is a budget (--unwind-mem), not a first-come pool: tables go
 * to the files samples land in (unwinder__hit), hottest first, built in
 * unwinder__balance(); when the array is full, tables no sample has touched
 * for a while are evicted, least recently sampled first. A file that still
 * does not fit is refused (its frames are walked with frame pointers) and
 * tried again on a later sample once room appears. A table outlives the
 * processes that used it until it is evicted, so the next process of the
 * same binary is covered from its first description.
 */
#ifndef BPFPROF_TABLES_H
#define BPFPROF_TABLES_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpfprof.h"

struct objtab;
struct proc;
struct tcache;
struct unwinder;

/*
 * Where rows, process descriptions and the row generation go: the BPF maps
 * (unwinder__new_bpf), or memory in a unit test. Functions return 0 or -errno.
 */
struct unwind_store {
	void *ctx;
	int (*write_rows)(void *ctx, uint32_t first, const struct bpf_urow *rows, uint32_t n);
	int (*write_proc)(void *ctx, uint32_t pid, const struct bpf_proc_unwind *b);
	void (*delete_proc)(void *ctx, uint32_t pid);
	int (*write_gen)(void *ctx, uint32_t gen);
	/* file_unwind (NULL: none): files' tables for processes not described yet */
	int (*write_file)(void *ctx, const struct file_unwind_key *k, const struct file_unwind *v);
	void (*delete_file)(void *ctx, const struct file_unwind_key *k);
	/* chunk k of rows rows (NULL: the rows are there, as in a test's store) */
	int (*add_chunk)(void *ctx, uint32_t k, uint32_t rows);
};

struct unwinder_stats {
	uint64_t tables;	/* tables built */
	uint64_t tables_failed; /* files without usable CFI (unreadable, none): frame pointers */
	uint64_t tables_evicted;
	uint64_t tables_rebuilt; /* built again after an eviction (a sample wanted it back) */
	uint64_t tables_refused; /* times a wanted file found no room (tried again later) */
	uint64_t tables_retried; /* refused files that got their table later */
	uint64_t tables_shared;	 /* files served by another file's table (same build id) */
	uint64_t rows_used, rows_cap, rows_peak;
	uint64_t rows_max;     /* what rows_cap may grow to */
	uint64_t chunks_added; /* chunks of rows added while running (the budget grew) */
	uint64_t build_ns;     /* time spent compiling CFI */
	/*
	 * The agent's CPU (its thread's) in table builds: once per binary,
	 * not per sample. build_cpu_ns is all of it (CFI compile, conversion,
	 * row writes, rewriting the descriptions that use the table);
	 * cfi_cpu_ns the compile alone; the costliest file's apart.
	 */
	uint64_t build_cpu_ns, cfi_cpu_ns;
	uint64_t build_cpu_max_ns;
	uint32_t build_cpu_max_obj; /* objfile id of that file */
	uint64_t tables_cached;	    /* tables loaded from the table cache, not compiled */
	uint64_t procs;		    /* processes currently described */
	uint64_t procs_synced;	    /* proc_unwind writes */
	uint64_t maps_dropped;	    /* mappings beyond MAX_UMAPS */
	uint64_t rows_unsupported;  /* rows compiled as "cannot unwind here" */
	uint64_t files_unlisted;    /* tables left out of file_unwind (map full) */
	/*
	 * Huge files' partial tables (rows for sampled functions only):
	 * files found huge, the FDEs in all of those that had a partial table
	 * (partial_made), FDEs in their rows now, rows they take now, and
	 * times one grew into a new row range.
	 */
	uint64_t partial_files, partial_fdes_total, partial_fdes, partial_rows, partial_grown;
	uint64_t partial_whole; /* partial tables replaced by the whole one once room appeared */
	uint64_t partial_made;	/* huge files that had a partial table at some time */
	uint64_t anon_tramps;	/* anonymous mappings found to be trampolines (CPython -X perf) */
};

/* Rows held by each byte of --unwind-mem. */
#define UNWIND_ROW_BYTES sizeof(struct bpf_urow)

/* rows_cap rows, one chunk that never grows (a test's store). */
int unwinder__new(struct unwinder **out, const struct unwind_store *store, uint32_t rows_cap,
		  struct objtab *objs);
/*
 * The BPF maps as the store: rows_map_fd is the array of chunks
 * (unwind_rows), filled with chunks of chunk_rows rows (at most 1 <<
 * UNWIND_CHUNK_SHIFT), chunks of them now (the first chunk0_fd, made as the
 * array's template before the load; taken over, closed on failure too); the budget grows a chunk at a
 * time up to max_chunks when a file samples want has no room even with
 * every cold table evicted. gen_map_fd: the unwind_gen map (BPF's row
 * cache), -1: none.
 */
int unwinder__new_bpf(struct unwinder **out, int rows_map_fd, int chunk0_fd, uint32_t chunk_rows,
		      uint32_t chunks, uint32_t max_chunks, int procs_map_fd, int gen_map_fd,
		      struct objtab *objs);
/*
 * obj is the vDSO (objtab__vdso): its table is built now and never evicted,
 * and is in file_unwind under the key BPF gives every process's vDSO
 * (FILE_UNWIND_VDSO_INO), so that a process not described yet is walked
 * through it from its first sample. It is the same image in every process
 * of a boot, and its few dozen rows compile in microseconds: built each
 * run, not cached. 0 or -errno.
 */
int unwinder__set_vdso(struct unwinder *u, uint32_t obj);
/* Tables kept between runs (tcache.h; NULL: none): loaded instead of compiled, stored after. */
void unwinder__set_cache(struct unwinder *u, struct tcache *c);
/* file_unwind's fd (-1: none): see struct file_unwind */
void unwinder__set_file_map(struct unwinder *u, int file_map_fd);
void unwinder__free(struct unwinder *u);

/*
 * Eager (a few named targets, not the whole machine): describing a process
 * also builds the tables of its files while they fit without evicting a
 * table anyone still uses. Off: tables only for files samples land in.
 */
void unwinder__set_eager(struct unwinder *u, bool eager);

/*
 * The sampling events count from now_ns (mono_ns): tables built before it
 * for named targets, no sample having used them, may be evicted from then on.
 */
void unwinder__sampling_started(struct unwinder *u, uint64_t now_ns);

/*
 * Files with more FDEs (by .eh_frame_hdr) than fdes get partial tables
 * where their whole one has no room (instead of being refused): rows only
 * for the functions samples land in (unwinder__hit_pc), grown as samples
 * show more. 0 (the default): every table whole.
 */
void unwinder__set_partial(struct unwinder *u, uint32_t fdes);
/*
 * The agent's threshold: --unwind-mem's rows / UNWIND_PARTIAL_SHARE. A
 * table has a row an FDE at least (libtorch_cpu: 6.4), so a file above it
 * would take a sixty-fourth of the budget or (mostly) far more whole:
 * libtorch_cpu (220k FDEs, 1.4M rows) a third of the default 4M rows,
 * libLLVM (98k FDEs) about a tenth, while a training loop runs a few
 * hundred of libtorch's functions. Files under it are whole: compiled once
 * (or loaded from the table cache), nothing to converge. At the default
 * budget: 65536 FDEs.
 */
#define UNWIND_PARTIAL_SHARE 64

/* (Re)write p's proc_unwind entry from its mappings and the tables built. 0 or -errno. */
int unwinder__sync(struct unwinder *u, const struct proc *p);
/* Whether pid has an entry. */
bool unwinder__has(const struct unwinder *u, uint32_t pid);
/* The process is gone: delete its entry (its tables stay until evicted). */
void unwinder__forget(struct unwinder *u, uint32_t pid);
/*
 * Whether addr is in anonymous code of pid's description that holds
 * trampolines (anoncode.h: CPython's -X perf), walked by their frame layout.
 */
bool unwinder__trampoline(const struct unwinder *u, uint32_t pid, uint64_t addr);
/* Whether the file obj has a table ready now. */
bool unwinder__ready(const struct unwinder *u, uint32_t obj);

/*
 * A sample has a frame in file obj (an objfile id; others are ignored) at
 * now_ns (CLOCK_MONOTONIC): the file is wanted, and its table is kept warm.
 * Returns true when the file has no table because the budget had no room
 * for it (the frame was walked with frame pointers).
 */
bool unwinder__hit(struct unwinder *u, uint32_t obj, uint64_t now_ns);
/*
 * A sample's frame in file obj at file offset off (a caller's: its return
 * address - 1). When obj is huge enough for a partial table (rows only for
 * the functions samples land in), the function holding off is wanted, and
 * the table grows in unwinder__balance. Returns true when the file's rows
 * are a partial table that did not hold that function (BPF walked the
 * frame by a frame-pointer step in its gap). A huge file gets a partial
 * table only when its whole one has no room; with its whole table, and
 * for other files, nothing happens (unwinder__hit does the rest).
 */
bool unwinder__hit_pc(struct unwinder *u, uint32_t obj, uint64_t off, uint64_t now_ns);
/*
 * Build the tables of the files wanted since the last call, most sampled
 * first, evicting tables not sampled for a while to make room, and rewrite
 * the descriptions of the processes that use what changed. Spends at most
 * about budget_ns compiling; the rest waits for the next call.
 */
void unwinder__balance(struct unwinder *u, uint64_t now_ns, uint64_t budget_ns);
/* Build obj's table now if it fits without evicting a used table (-- CMD before exec). */
int unwinder__prepare(struct unwinder *u, uint32_t obj, uint64_t now_ns);

/*
 * Rows every file sampled during the run needs at once (tables built, and
 * files refused whose size is known): what --unwind-mem should hold.
 */
uint64_t unwinder__rows_wanted(const struct unwinder *u);

const struct unwinder_stats *unwinder__stats(const struct unwinder *u);

#endif
