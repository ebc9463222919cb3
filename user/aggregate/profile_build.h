/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Turn the stack table into a struct profile: name every distinct frame once
 * (kallsyms for the kernel, the objfile's ELF symbols for user code), add the
 * root frames DESIGN.md asks for, and the values and labels of each stack.
 */
#ifndef BPFPROF_PROFILE_BUILD_H
#define BPFPROF_PROFILE_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "aggregate/profile.h"

struct profile;
struct stacks;
struct objtab;
struct ksyms;
struct cgroups;
struct perfmaps;

/* build_opts.lines */
enum {
	BUILD_LINES_NONE = 0, /* native frames without source lines */
	BUILD_LINES_PPROF,    /* native source lines in pframe.file/line (pprof Lines) */
	BUILD_LINES_NAMES,    /* and in the display name, "name (file.c:12)" (--native-lines) */
};

/*
 * Names of Python frames and threads, from whoever tracks the interpreters
 * (collect/pytrack.c, handed over by collect/writeout.c), so that building
 * a profile needs no recorder: a code id at an instruction offset as its
 * qualname, file and line (0; non-zero: unreadable), its function's first
 * line (0: unknown), a thread's threading name (NULL: use the OS name).
 */
struct build_python {
	int (*describe)(const void *arg, uint64_t id, uint32_t off, const char **qualname,
			const char **file, uint32_t *line);
	uint32_t (*first_line)(const void *arg, uint64_t id);
	const char *(*thread_name)(const void *arg, uint32_t pid, uint32_t tid);
};

struct build_opts {
	bool per_pid;	 /* root frame "comm [pid]" */
	bool per_thread; /* "thread [tid]" frame under the process */
	/*
	 * What stack_vals.v[i] means, for i < nvalues; default_value is the one
	 * folded and svg show. count_value indexes the value that counts events
	 * (frame statistics are weighted by it).
	 */
	struct pvaluetype value_types[PROFILE_MAX_VALUES];
	uint32_t nvalues;
	uint32_t default_value;
	uint32_t count_value;
	struct pvaluetype period_type; /* optional (type NULL: none) */
	int64_t period;		       /* e.g. nanoseconds of CPU one sample stands for */
	int64_t time_ns;	       /* wall-clock start */
	int64_t duration_ns;
	const struct build_python *py; /* names Python frames and threads; NULL: none */
	const void *py_arg;
	bool per_container; /* root frame: short container id or cgroup path */
	struct cgroups *cg; /* names stack_key.cgroup_id (labels); NULL: no cgroup labels */
	/* names OBJ_SYNTH frames (addr = the feature's id), sets *kind (enum frame_kind) */
	const char *(*synth_name)(void *arg, uint64_t id, uint32_t *kind);
	void *synth_arg;
	const struct perfmaps *jit; /* names OBJ_JIT frames; NULL: none */
	uint32_t lines;		    /* BUILD_LINES_*: native source lines from DWARF */
	/*
	 * Extra labels of a stack (its stacks__intern index), e.g. the age of
	 * the oldest heap block still held; returns how many it wrote to out.
	 * NULL: none.
	 */
	uint32_t (*stack_labels)(void *arg, size_t stack, struct plabel *out, uint32_t max);
	void *stack_labels_arg;
};

struct build_stats {
	uint64_t frames;     /* frames in all samples (weighted by sample count) */
	uint64_t unresolved; /* of which had no symbol */
	uint64_t distinct_frames;
	uint64_t objects_without_symbols;
	uint64_t py_merge_mismatch; /* stacks whose eval frames and Python calls did not pair up */
	/*
	 * The file with the most unresolved frames (weighted as unresolved is)
	 * and how many: what a "no symbols" warning names. Empty: none.
	 */
	char unresolved_file[256];
	uint64_t unresolved_file_frames;
	/* likewise, the file [missing frames] stacks stopped in most (their outermost frame's) */
	char stopped_file[256];
	uint64_t stopped_file_samples;
};

/*
 * The name a Python frame shows its file by: the path after the last
 * site-packages/ or dist-packages/ ("torch/autograd/__init__.py"), else after
 * lib/pythonX.Y/ ("json/decoder.py"), else the base name, with its directory
 * for __init__.py and __main__.py ("mypkg/__init__.py"). A function of the
 * path alone, so names stay the same across runs. Points into file.
 */
const char *profile__short_path(const char *file);

int profile__build(struct profile **out, const struct stacks *st, struct objtab *objs,
		   const struct ksyms *ks, const struct build_opts *o, struct build_stats *bs);

#endif
