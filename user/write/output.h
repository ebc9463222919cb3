/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * output: where a profile goes. A file is written under a temporary name in
 * the same directory and renamed into place when complete, so that a failed
 * or killed run never leaves a partial file behind; opening it up front also
 * tells the user about an unwritable path before any sampling happens.
 */
#ifndef BPFPROF_OUTPUT_H
#define BPFPROF_OUTPUT_H

#include <stdio.h>

struct output {
	char *path; /* NULL: stdout */
	char *tmp;
	FILE *f;
};

/* Returns 0 or -errno, with the one-line error already printed. */
int output__open(struct output *o, const char *path);
/* Flush and move into place. Returns 0 or -errno (printed). */
int output__commit(struct output *o);
struct profile;
/*
 * Write p in the format the command line chose (env.format; svg with
 * env.title and env.inverted), its default value where the format shows one.
 * Returns 0 or -errno (not printed).
 */
int output__write_profile(struct output *o, const struct profile *p);
/* Remove the temporary file (no-op after commit or for stdout). */
void output__abort(struct output *o);

#endif
