/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* writeout: a recording's stacks into the output file(s) (collect/writeout.c). */
#ifndef BPFPROF_WRITEOUT_H
#define BPFPROF_WRITEOUT_H

#include <stddef.h>

struct build_opts;
struct build_stats;
struct recorder;
struct stacks;

/* After the object table exists: it names the frames of the aggregated stacks. */
void writeout__init(struct recorder *r);
/* End of the run: build and write -o's profile (printed errors); 0 or -errno. */
int writeout__profile(struct recorder *r, size_t *nprocs, struct build_stats *bs);
/* --continuous: this interval's file, then an empty stack table; 0 or -errno. */
int writeout__interval(struct recorder *r);
/* Python's frame and thread names (the run's tracker) into bo; none without Python. */
void writeout__python(const struct recorder *r, struct build_opts *bo);
/* Distinct processes in a stack table. */
size_t writeout__processes(const struct stacks *st);

#endif
