/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * output: where a profile goes. A file is written under a new temporary name
 * (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) in the destination directory and renamed
 * into place when complete, so that a failed or killed run never leaves a
 * partial file under the final name; opening it up front also tells the
 * user about an unwritable path before any sampling happens. The path is
 * walked by outpath.h: no symlink another user could have made is followed.
 * A character device (/dev/null, a tty, /dev/stdout) is written in place,
 * only when reached that way: a link to a tty in a user's directory is a
 * name, which the profile replaces.
 */
#ifndef BPFPROF_OUTPUT_H
#define BPFPROF_OUTPUT_H

#include <stdio.h>

/* -f: what output__write_profile() writes */
enum out_format {
	FMT_FOLDED = 1,
	FMT_PPROF,
	FMT_CHROME, /* Trace Event Format JSON (write/chrome.c, from a timeline) */
	FMT_SVG,    /* interactive flame graph (write/svg.c) */
};

struct svg_opts;

struct output {
	char *path; /* NULL: stdout */
	char *tmp;  /* the temporary name in dirfd, NULL: written in place */
	char *name; /* the final name in dirfd */
	int dirfd;
	FILE *f;
};

/* Returns 0 or -errno, with the one-line error already printed. */
int output__open(struct output *o, const char *path);
/*
 * A new file name in the directory dirfd (a --continuous directory): the
 * same temporary file and rename, through dirfd, never through a link at
 * name. path is for messages.
 */
int output__open_at(struct output *o, int dirfd, const char *name, const char *path);
/* Flush and move into place. Returns 0 or -errno (printed). */
int output__commit(struct output *o);
struct profile;
/*
 * Write p as fmt (svg with so, NULL: defaults), its default value where the
 * format shows one. Returns 0 or -errno (not printed).
 */
int output__write_profile(struct output *o, const struct profile *p, enum out_format fmt,
			  const struct svg_opts *so);
/* Remove the temporary file (no-op after commit or for stdout). */
void output__abort(struct output *o);

#endif
