/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* record: the `bpfprof [record]` command, from BPF load to the output file. */
#ifndef BPFPROF_RECORD_H
#define BPFPROF_RECORD_H

struct rec_feature;

/*
 * What a run is for. `record` writes the profile to -o; `top` and `dump` are
 * views: their feature is added to the run and shows the result itself (no
 * file), given arg. A view's command sets the options it depends on (env)
 * before the run, as any command's option parsing does.
 */
struct rec_mode {
	const char *name;
	/* the features env may ask for, in set-up order, NULL-terminated (registry.h) */
	const struct rec_feature *const *features;
	const struct rec_feature *view; /* NULL: write the profile to -o */
	void *arg;			/* the view's, as r->mode->arg */
};

/* Runs mode with the options in env; returns an exit status (EXIT_*). */
int record__run(const struct rec_mode *mode);

#endif
