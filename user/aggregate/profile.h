/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * struct profile: the symbolized, aggregated result of a run, in the form
 * every writer (folded, pprof, later chrome/svg) reads. Built once at the end
 * of a run (or of an interval) from the stack table; writers are pure
 * functions of it, which is what makes them unit-testable without root.
 */
#ifndef BPFPROF_PROFILE_H
#define BPFPROF_PROFILE_H

#include <stdint.h>
#include <stddef.h>

enum frame_kind {
	FRAME_ROOT = 0, /* synthetic: process, thread, container roots */
	FRAME_KERNEL,	/* name carries the "_[k]" suffix already */
	FRAME_NATIVE,	/* user-space native code */
	FRAME_PYTHON,	/* interpreted Python frame */
	FRAME_CUDA,	/* GPU kernel leaf */
};

/* A binary mapped into one or more processes (pprof Mapping). */
struct pmapping {
	const char *path;     /* file name as the process saw it */
	const char *build_id; /* lowercase hex, or NULL */
	uint64_t start;	      /* address range, as the first process that mapped it had it */
	uint64_t limit;
	uint64_t file_offset; /* file offset that corresponds to start */
	uint32_t flags;	      /* PMAP_* */
	uint32_t pad;
};

/* pmapping.flags */
#define PMAP_MAIN    1 /* an executable (not a library): pprof lists it first */
#define PMAP_UNNAMED 2 /* some of its frames have no function name */
#define PMAP_LINES   4 /* some of its frames have a source line */
#define PMAP_RUNTIME 8 /* start/limit/file_offset are a real mapping of the file */

/* One distinct frame. Interned: a sample refers to frames by index. */
struct pframe {
	const char *name; /* display name per DESIGN.md "Frame naming" (folded, svg, chrome) */
	const char *func; /* the function alone, no location (pprof Function.name); NULL: name */
	const char
		*sysname; /* pprof Function.system_name, e.g. "json.decoder.<module>"; NULL: func */
	const char *file; /* source file, full path, or NULL */
	uint32_t line;	  /* source line, or 0 */
	uint32_t start_line; /* first line of the function, or 0 */
	uint32_t kind;	     /* enum frame_kind */
	int32_t mapping;     /* index into profile.mappings, or -1 */
	/*
	 * Native frames with a mapping: the address in the mapping's address
	 * space (start + file offset - file_offset), so that pprof tools map it
	 * back to the file. Else the kernel address, or 0.
	 */
	uint64_t addr;
};

/* A label attached to a sample: string (str != NULL) or number. */
struct plabel {
	const char *key;
	const char *str;
	int64_t num;
	const char *unit; /* for numeric labels, or NULL */
};

#define PROFILE_MAX_VALUES 12
#define PROFILE_MAX_LABELS \
	12 /* pid comm gil unwind tid thread cgroup container pod + stack_labels */

/*
 * values (profile.nvalues of them) and labels live in the profile's arena,
 * as many as the sample has: a whole-machine profile has 100k samples, and
 * room for every possible value and label took 500 bytes each.
 */
struct psample {
	uint32_t nframes;
	uint32_t nlabels;
	uint32_t *frames; /* indexes into profile.frames, ROOT FIRST, leaf last */
	int64_t *values;
	struct plabel *labels;
};

struct pvaluetype {
	const char *type; /* "samples", "cpu", "alloc_space", ... */
	const char *unit; /* "count", "nanoseconds", "bytes" */
};

struct profile {
	struct pvaluetype value_types[PROFILE_MAX_VALUES];
	uint32_t nvalues;
	uint32_t default_value; /* index of the value folded/svg show by default */
	struct pvaluetype period_type;
	int64_t period;	 /* e.g. 1e9/freq nanoseconds of CPU per sample */
	int64_t time_ns; /* start, wall clock (CLOCK_REALTIME) */
	int64_t duration_ns;
	const char **comments; /* free-form lines (pprof comment) */
	size_t ncomments;

	struct pmapping *mappings;
	size_t nmappings, cap_mappings;
	struct pframe *frames;
	size_t nframes, cap_frames;
	struct psample *samples;
	size_t nsamples, cap_samples;

	/* private: string and frame interning, owned memory */
	struct profile_priv *priv;
};

struct profile *profile__new(void);
void profile__free(struct profile *p);

/* Copy a string into memory the profile owns; returns the interned copy. */
const char *profile__intern(struct profile *p, const char *s);
/* Add a value type; returns its index or -ENOSPC. */
int profile__add_value_type(struct profile *p, const char *type, const char *unit);
/* Set period_type (strings interned) and period. Returns 0 or -ENOMEM. */
int profile__set_period(struct profile *p, const char *type, const char *unit, int64_t period);
/*
 * Returns the index of an identical mapping (same path and build id), adding
 * it if new. A mapping with PMAP_RUNTIME keeps the first range it was given
 * (later ones only widen its limit); others widen to cover every range.
 * flags are or-ed.
 */
int profile__add_mapping(struct profile *p, const struct pmapping *m);
/* Returns the index of an identical frame, adding it if new. Strings are interned. */
int profile__add_frame(struct profile *p, const struct pframe *f);
/*
 * Add a sample: frames root first. Values beyond p->nvalues are ignored.
 * Label strings are interned. Returns 0 or -errno.
 */
int profile__add_sample(struct profile *p, const uint32_t *frames, uint32_t nframes,
			const int64_t *values, const struct plabel *labels, uint32_t nlabels);
/* Add a pprof comment line. */
int profile__add_comment(struct profile *p, const char *line);
/* Bytes the profile holds (its arrays, arena and interned strings), roughly. */
size_t profile__bytes(const struct profile *p);

#endif
