/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * unwinder: the user-space half of table-driven unwinding. Compiles a file's
 * CFI once (cfi.c), copies the rows into the BPF `unwind_rows` array (mmap'd:
 * no syscall per row) where every process mapping the file shares them, and
 * describes each profiled process's executable mappings in `proc_unwind`.
 * Tables are reference counted by the processes that use them and their rows
 * are freed when none does; the row array is bounded (--unwind-rows).
 */
#ifndef BPFPROF_TABLES_H
#define BPFPROF_TABLES_H

#include <stdbool.h>
#include <stdint.h>

struct objtab;
struct proc;
struct unwinder;

struct unwinder_stats {
	uint64_t tables;	/* files compiled */
	uint64_t tables_failed; /* no CFI, unreadable, or no room: frame pointers instead */
	uint64_t tables_evicted;
	uint64_t tables_shared; /* files served by another file's table (same build id) */
	uint64_t rows_used, rows_cap, rows_peak;
	uint64_t build_ns;	   /* time spent compiling CFI */
	uint64_t procs;		   /* processes currently described */
	uint64_t procs_synced;	   /* proc_unwind writes */
	uint64_t maps_dropped;	   /* mappings beyond MAX_UMAPS */
	uint64_t rows_unsupported; /* rows compiled as "cannot unwind here" */
};

/* gen_map_fd: the unwind_gen map (BPF's row cache), -1: none */
int unwinder__new(struct unwinder **out, int rows_map_fd, uint32_t rows_cap, int procs_map_fd,
		  int gen_map_fd, struct objtab *objs);
void unwinder__free(struct unwinder *u);

/* Build what p's mappings need and (re)write its proc_unwind entry. Returns 0 or -errno. */
int unwinder__sync(struct unwinder *u, const struct proc *p);
/* Whether pid has an entry. */
bool unwinder__has(const struct unwinder *u, uint32_t pid);
/* The process is gone: delete its entry, release its tables. */
void unwinder__forget(struct unwinder *u, uint32_t pid);

const struct unwinder_stats *unwinder__stats(const struct unwinder *u);

#endif
