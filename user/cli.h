/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command line: the parsed options are the program's only global (STYLE rule 6). */
#ifndef BPFPROF_CLI_H
#define BPFPROF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum out_format {
	FMT_FOLDED = 1,
	FMT_PPROF,
	FMT_SVG,
};

struct env {
	/* TARGET */
	bool all;
	uint32_t *pids;
	size_t npids;
	char **cmd_argv;	/* after "--", NULL terminated, or NULL */
	/* OPTIONS */
	unsigned int freq;	/* samples per second per CPU */
	double duration;	/* seconds; 0 = until Ctrl-C / CMD exits */
	const char *output;	/* NULL or "-" = stdout */
	enum out_format format;
	bool per_pid;
	bool per_thread;
	bool no_kernel;
	bool no_user;
	bool no_python;
	bool gil;		/* only Python samples whose thread held the GIL */
	int unwind;		/* enum unwind_mode (include/bpfprof.h) */
	bool inverted;		/* svg: icicle (callers) view */
	const char *title;	/* svg: title, NULL for the default */
	/* sizing (not on the CLI yet: sane defaults, see record.c) */
	uint32_t ringbuf_bytes;
	uint32_t max_targets;
	uint32_t unwind_rows;	/* capacity of the BPF unwind row array */
	uint32_t unwind_procs;	/* processes with unwind info at once */
};

extern struct env env;

/* Exit statuses (DESIGN.md): */
#define EXIT_OK 0
#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

/*
 * Parse argv (after the optional "record" word). Returns -1 when the program
 * should continue, or an exit status (0 after --help/--version, 2 after a bad
 * value, with its one-line message already printed).
 */
int cli__parse(int argc, char **argv);
void cli__free(void);
void cli__usage(FILE *out);

#endif
