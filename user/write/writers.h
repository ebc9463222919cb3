/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One writer per output format. Each is a pure function of a struct profile
 * and a FILE*: it does not know where the data came from.
 */
#ifndef BPFPROF_WRITERS_H
#define BPFPROF_WRITERS_H

#include <stdbool.h>
#include <stdio.h>
#include "aggregate/profile.h"
#include "aggregate/timeline.h"

/*
 * Folded stacks (Brendan Gregg's stackcollapse format): one line per distinct
 * stack, root first, frames joined by ';', a space, and the value at
 * value_index. Identical stacks (same frame names) are merged; lines are
 * sorted so output is deterministic. Frame names have ';' and newlines
 * replaced so that each line stays parseable. Returns 0 or -errno.
 */
int folded__write(const struct profile *p, uint32_t value_index, FILE *out);

/* gzipped pprof (profile.proto). Returns 0 or -errno. */
int pprof__write(const struct profile *p, FILE *out);

/*
 * Chrome Trace Event Format JSON (chrome://tracing, Perfetto, speedscope) of
 * a timeline: process/thread name metadata, then every event in time order;
 * otherData.cpu_samples says how many CPU samples the slices stand for.
 * Returns 0 or -errno.
 */
int chrome__write(const struct timeline *tl, FILE *out);
struct svg_opts {
	const char *title; /* NULL: "Flame Graph" or "Icicle Graph" */
	bool inverted;	   /* icicle: stacks merged leaf first, drawn top down */
	double min_frac;   /* frames narrower than this share of the total are
				 * merged into their parent; 0: 0.001 (1.2 px of 1200) */
};

/*
 * A self-contained interactive flame graph (click to zoom, search, tooltips)
 * of the profile's default value, frames coloured by kind. o may be NULL.
 * Returns 0 or -errno.
 */
int svg__write(const struct profile *p, const struct svg_opts *o, FILE *out);
/* Write s as XML character data (escaped, made valid UTF-8). */
void svg__escape(FILE *f, const char *s);

#endif
