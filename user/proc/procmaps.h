/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Parsing /proc/PID/maps: pure functions, unit tested without root. */
#ifndef BPFPROF_PROCMAPS_H
#define BPFPROF_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct procmaps_entry {
	uint64_t start, end; /* [start, end) */
	uint64_t pgoff;	     /* file offset of start */
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	bool readable, writable, exec, shared;
	const char *path; /* "" for anonymous; "[vdso]" etc.; points into the line */
	bool deleted;	  /* path ended in " (deleted)" (stripped from path) */
};

/*
 * Parse one line of /proc/PID/maps (the line is modified: the path is NUL
 * terminated in place). Returns 0 or -EINVAL for a malformed line.
 */
int procmaps__parse_line(char *line, struct procmaps_entry *e);

/*
 * Call cb for every executable mapping in the maps text read from f. Stops and
 * returns cb's value when it is non-zero; otherwise 0, or -EINVAL if a line was
 * malformed (the other lines are still delivered).
 */
int procmaps__for_each_exec(FILE *f, int (*cb)(const struct procmaps_entry *e, void *ctx),
			    void *ctx);

#endif
