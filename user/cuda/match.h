/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cuda_match: joining GPU records to the launches that caused them, by
 * (process, CUPTI correlation id). Either side may come first: a launch waits
 * for its GPU record, or a GPU record (CUPTI flushed mid-call) waits for its
 * launch. A launch recorded at its entry probe gets its correlation id later
 * (GPU_EV_CORR): until then it is its thread's last launch.
 *
 * Every table is bounded: when one is full its oldest entry is let go and
 * counted (a GPU record CUPTI dropped would otherwise keep its launch waiting
 * for the rest of the run). Keys live in the entries: nothing is kept after a
 * delete. Entries are not dropped at a process's exit: its last GPU records
 * may still be in the ring buffer when the side band reports the exit.
 */
#ifndef BPFPROF_CUDA_MATCH_H
#define BPFPROF_CUDA_MATCH_H

#include <stddef.h>
#include <stdint.h>

/* A launch (or another call with a correlation id) waiting for its GPU record. */
struct cm_launch {
	size_t stack; /* stacks__intern index, SIZE_MAX: not a stack (a copy, a memset) */
	uint32_t fn;  /* cuda.c's kernel index, UINT32_MAX: none */
	uint32_t tid;
	uint64_t start_ns; /* call start: the flow's tail */
};

/* A GPU record that came before its launch. */
struct cm_gpu {
	uint64_t start_ns, dur_ns;
	uint32_t gpid, gtid; /* its timeline track, 0: none */
	uint32_t kind;	     /* enum gpu_kind */
	uint32_t pad;
	char *mangled; /* owned by the table while stored */
};

struct cm_stats {
	uint64_t launches_evicted; /* launches let go to make room: their GPU record never came */
	uint64_t gpu_evicted;	   /* GPU records let go: their launch never came */
	uint64_t at_entry_evicted;
};

struct cuda_match;

/* cap: most entries of each table (0: a default). Returns 0 or -ENOMEM. */
int cuda_match__new(struct cuda_match **out, size_t cap);
void cuda_match__free(struct cuda_match *m);

/*
 * A launch with correlation id corr. If its GPU record is already here it is
 * taken out and returned in *gpu (the caller frees it with cuda_match__gpu_free)
 * and the launch is not kept; else *gpu is NULL and the launch waits.
 * Returns 0 or -ENOMEM.
 */
int cuda_match__launch(struct cuda_match *m, uint32_t pid, uint32_t corr, const struct cm_launch *l,
		       struct cm_gpu **gpu);

/* A GPU record with correlation id corr: its launch, taken out into *l (1), or none (0). */
int cuda_match__take_launch(struct cuda_match *m, uint32_t pid, uint32_t corr, struct cm_launch *l);

/*
 * A GPU record whose launch has not come: it waits. The table takes
 * g->mangled. Returns the stored record (valid until the next call), or NULL.
 */
struct cm_gpu *cuda_match__orphan(struct cuda_match *m, uint32_t pid, uint32_t corr,
				  const struct cm_gpu *g);
void cuda_match__gpu_free(struct cm_gpu *g);

/* A launch recorded at entry: the thread's last, replacing the one before. 0 or -ENOMEM. */
int cuda_match__at_entry(struct cuda_match *m, uint32_t pid, const struct cm_launch *l);
/* GPU_EV_CORR of thread tid: its last at-entry launch, taken out into *l (1), or none (0). */
int cuda_match__take_at_entry(struct cuda_match *m, uint32_t pid, uint32_t tid,
			      struct cm_launch *l);

/* Launches still waiting for a GPU record. */
size_t cuda_match__waiting(const struct cuda_match *m);
const struct cm_stats *cuda_match__stats(const struct cuda_match *m);

#endif
