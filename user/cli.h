/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command line: the parsed options are the program's only global (STYLE rule 6). */
#ifndef BPFPROF_CLI_H
#define BPFPROF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "write/output.h" /* enum out_format */

struct upload_auth;

/* --cuda-weight */
enum cuda_weight {
	CUDA_WEIGHT_DEFAULT = 0, /* launches, unless --cpu too (then CPU samples) */
	CUDA_WEIGHT_LAUNCHES,
	CUDA_WEIGHT_GPU_TIME,
};

/* --alloc-metric */
enum alloc_metric {
	ALLOC_INUSE_SPACE = 0,
	ALLOC_INUSE_OBJECTS,
	ALLOC_ALLOC_SPACE,
	ALLOC_ALLOC_OBJECTS,
	ALLOC_PEAK_SPACE,
	ALLOC_FINALIZE_SPACE,
};

struct env {
	/* TARGET */
	bool all;
	uint32_t *pids;
	size_t npids;
	char **cmd_argv; /* after "--", NULL terminated, or NULL */
	/* EVENTS (none given: --cpu) */
	bool ev_cpu;	      /* on-CPU sampling */
	bool ev_alloc;	      /* heap allocations */
	bool alloc_uprobes;   /* --alloc-uprobes: no in-process sampler for -- CMD */
	bool ev_off_cpu;      /* time blocked */
	bool ev_wall;	      /* on-CPU + off-CPU */
	bool ev_cuda;	      /* CUDA driver calls and GPU activity */
	const char *cuda_lib; /* --cuda-lib: probe this libcuda (else found in mappings) */
	int cuda_weight;      /* enum cuda_weight */
	/* OPTIONS */
	unsigned int freq;  /* samples per second per CPU */
	double duration;    /* seconds; 0 = until Ctrl-C / CMD exits */
	const char *output; /* NULL or "-" = stdout */
	enum out_format format;
	bool per_pid;
	bool per_thread;
	bool native_lines; /* --native-lines: source lines in native frame names */
	bool no_kernel;
	bool no_user;
	bool no_python;
	bool gil;   /* only Python samples whose thread held the GIL */
	int unwind; /* enum unwind_mode (include/bpfprof.h) */
	/* containers (user/proc/cgroup.c) */
	const char *cgroup_arg;	   /* --cgroup as given */
	const char *container_arg; /* --container as given */
	char *cgroup_path;	   /* the resolved directory; NULL: no cgroup filter */
	char *cgroup_rel;	   /* its path below the hierarchy root */
	bool per_container;	   /* root frame: short container id or cgroup path */
	bool want_cgroup;	   /* stack keys carry the cgroup id (labels, --per-container) */
	/* continuous mode (user/collect/continuous.c) */
	const char *continuous_dir; /* NULL: one profile at the end */
	double interval;	    /* seconds per file */
	unsigned int keep;	    /* files kept in continuous_dir, 0 = all */
	const char *upload_url;	    /* Pyroscope server, or NULL */
	const char *app_name;
	const char *upload_url_shown;	 /* upload_url with its userinfo as "***" (messages) */
	const char *upload_auth_file;	 /* --upload-auth-file */
	struct upload_auth *upload_auth; /* credentials read at startup, or NULL */
	/* off-CPU (--off-cpu, --wall) */
	uint64_t min_block_ns;	   /* shorter blocks are sampled, not all recorded */
	const char *thread_filter; /* top --thread: only threads whose "name [tid]" has it */
	/* --alloc */
	uint64_t alloc_rate;	/* mean bytes between allocation samples; 1 = every call */
	uint64_t mem_budget;	/* bytes for the caches of target data (membudget); 0: default */
	double debuginfod_wait; /* --debuginfod-wait: seconds the end waits for debug files */
	int alloc_metric;	/* enum alloc_metric: the value folded shows */
	bool alloc_metric_set;
	bool inverted;	   /* svg: icicle (callers) view */
	const char *title; /* svg: title, NULL for the default */
	/* sizing (defaults in cli.c) */
	uint32_t ringbuf_bytes; /* --ring-mb */
	uint32_t max_targets;
	uint32_t unwind_rows;	  /* capacity of the BPF unwind row array (--unwind-mem) */
	bool unwind_mem_given;	  /* --unwind-mem named: fixed; else the rows grow (setup.c) */
	const char *unwind_cache; /* --unwind-cache DIR, NULL: off */
	bool unwind_cache_given;  /* named on the command line: a bad DIR is an error */
	uint32_t unwind_procs;	  /* processes with unwind info at once */
	uint32_t alloc_max_live;  /* sampled heap blocks tracked at once */
};

extern struct env env;

/* Exit statuses (DESIGN.md): */
/*
 * --unwind-mem: 4M rows. Debian's libtorch_cpu has 1.4M rows (11 MiB); a PyTorch
 * training loop with pgbench next to it wanted 2.0-2.5M (15-19 MiB) in all.
 */
#define UNWIND_MEM_DEFAULT (32u << 20)
/* --unwind-cache: root's, like any cache of a system service (FHS /var/cache) */
#define UNWIND_CACHE_DEFAULT "/var/cache/bpfprof/unwind"

#define EXIT_OK	     0
#define EXIT_RUNTIME 1
#define EXIT_USAGE   2
/* what a command's option parser returns when the command should run (not an exit status) */
#define CLI_RUN (-1)

/*
 * Parse argv (after the optional "record" word). Returns CLI_RUN when the
 * program should continue, or an exit status (EXIT_OK after --help/--version,
 * EXIT_USAGE after a bad value, with its one-line message already printed).
 */
int cli__parse(int argc, char **argv);
void cli__free(void);
void cli__usage(FILE *out);
struct option;
/*
 * getopt_long returned '?' for arg (argv[optind - 1]): print the one error line, naming
 * a known long option given a value it does not take apart from an unknown one. sub:
 * the subcommand ("" for record), for the "see ... --help" hint.
 */
void cli__bad_option(const char *arg, int optopt, const struct option *opts, const char *sub);

#endif
