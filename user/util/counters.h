/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The names of the BPF counter families (include/bpfprof.h declares each once,
 * as an X-macro table), and the one way the summary and -v print them.
 */
#ifndef BPFPROF_COUNTERS_H
#define BPFPROF_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct counter_desc {
	const char *name; /* short, for the summary: "ring buffer full" */
	const char *desc; /* one line: what it counts */
	bool loss;	  /* something the profile is missing */
};

struct counter_family {
	const char *name; /* "bpf", "cuda", "offcpu" */
	const struct counter_desc *d;
	uint32_t n;
	bool one_struct; /* the map holds one struct of n u64 fields at key 0, not n keys */
};

extern const struct counter_family counters_bpf, counters_cuda, counters_offcpu, counters_alloc;

/*
 * Append "family name N" for each non-zero counter (only the losses when
 * losses_only) to buf (NUL-terminated, len bytes; cut, never overrun),
 * separated by ", " from what buf already holds. Returns how many were added.
 */
uint32_t counters__format(char *buf, size_t len, const struct counter_family *f, const uint64_t *v,
			  bool losses_only);

#endif
