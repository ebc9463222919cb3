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
};

/* --alloc-metric */
enum alloc_metric {
	ALLOC_INUSE_SPACE = 0,
	ALLOC_INUSE_OBJECTS,
	ALLOC_ALLOC_SPACE,
	ALLOC_ALLOC_OBJECTS,
};

struct env {
	/* TARGET */
	bool all;
	uint32_t *pids;
	size_t npids;
	char **cmd_argv;	/* after "--", NULL terminated, or NULL */
	/* EVENTS (none given: --cpu) */
	bool ev_cpu;		/* on-CPU sampling */
	bool ev_alloc;		/* heap allocations */
	bool ev_off_cpu;	/* time blocked */
	bool ev_wall;		/* on-CPU + off-CPU */
	bool ev_cuda;		/* CUDA driver calls and GPU activity */
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
	/* --alloc */
	uint64_t alloc_rate;	/* mean bytes between allocation samples; 1 = every call */
	int alloc_metric;	/* enum alloc_metric: the value folded shows */
	bool alloc_metric_set;
	/* sizing (not on the CLI yet: sane defaults, see record.c) */
	uint32_t ringbuf_bytes;
	uint32_t max_targets;
	uint32_t unwind_rows;	/* capacity of the BPF unwind row array */
	uint32_t unwind_procs;	/* processes with unwind info at once */
	uint32_t alloc_max_live;	/* sampled heap blocks tracked at once */
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
