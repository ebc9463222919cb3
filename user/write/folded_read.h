/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading folded stacks ("frame;frame;... COUNT" lines, as folded__write,
 * stackcollapse-perf.pl and most profilers write them) back into a struct
 * profile, so that any writer — the SVG flame graph first — can render
 * another tool's output.
 */
#ifndef BPFPROF_FOLDED_READ_H
#define BPFPROF_FOLDED_READ_H

#include <stdint.h>
#include <stdio.h>

struct profile;

struct folded_read_stats {
	uint64_t lines;	    /* lines that were not blank */
	uint64_t stacks;    /* of which parsed */
	uint64_t bad;	    /* of which malformed (skipped) */
	uint64_t first_bad; /* 1-based line number of the first malformed line, or 0 */
};

/*
 * Parse f into a new profile with one value type, samples/count. Tolerates
 * CRLF, trailing blanks and blank lines; a line without a non-negative
 * integer count after its last blank is skipped and counted. Frame kinds are
 * guessed from the names (folded__guess_kind). Returns 0, -ENODATA when no
 * line parsed (*out is then NULL), or another -errno.
 */
int folded__read(FILE *f, struct profile **out, struct folded_read_stats *st);

/*
 * enum frame_kind of a frame known only by its name and its depth in the
 * stack (0 = root): the first frame is the process ("comm", "comm [pid]"),
 * "name [N]" a process or thread root, "..._[k]" kernel, "[cuda] ..." a GPU
 * kernel, "qualname (file:line)" Python, anything else native.
 */
uint32_t folded__guess_kind(const char *name, size_t len, uint32_t depth);

#endif
