/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * struct timeline: what happened when, for the Chrome/Perfetto trace writer,
 * as struct profile is what happened how often for folded/pprof. All times
 * are CLOCK_MONOTONIC nanoseconds (the clock BPF stamps events with; GPU
 * times are converted before they get here).
 *
 * Tracks are (pid, tid) pairs as in the Trace Event Format. Processes and
 * threads get names; GPU streams get tracks of their own under a pseudo
 * process per (owning process, device), with pids from GPU_PID_BASE up so
 * they never collide with real pids (Linux caps pids at 2^22).
 *
 * Events: complete slices (X) with a name, category and arguments (the
 * timeline is written once the run is over, so every slice's end is known:
 * timeline__add_sample_slices builds X slices from a thread's CPU samples and
 * off-CPU blocks too); begin/end pairs (B/E, the E named like its B) exist
 * in the model for spans whose end is not known; flow arrows (s/f pairs
 * sharing an id) from a slice on one track to a slice on another; counter
 * samples (C). The writer (user/write/chrome.c) is a pure function of this.
 */
#ifndef BPFPROF_TIMELINE_H
#define BPFPROF_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#define TL_GPU_PID_BASE (1u << 30)

enum tl_phase {
	TL_COMPLETE = 'X',
	TL_BEGIN = 'B',
	TL_END = 'E',
	TL_FLOW_START = 's',
	TL_FLOW_END = 'f',
	TL_COUNTER = 'C',
};

/* An argument: a string (str != NULL) or a number. */
struct tl_arg {
	const char *key;
	const char *str;
	int64_t num;
};

struct tl_event {
	uint64_t ts;	     /* CLOCK_MONOTONIC ns */
	uint64_t dur;	     /* X: duration in ns */
	uint64_t id;	     /* s/f: flow id */
	uint64_t seq;	     /* insertion order: ties at equal ts keep it */
	const char *name;    /* interned; E: its B's name */
	const char *cat;     /* interned or NULL */
	struct tl_arg *args; /* X/C: nargs of them (C: one per series) */
	uint32_t pid;
	uint32_t tid;
	uint16_t nargs;
	uint16_t depth; /* X from samples: nesting depth on its track (ties at equal ts, dur) */
	char ph;	/* enum tl_phase */
	uint8_t pad[3];
};

/* Name (and optional sort index) of a process (tid == 0 in procs) or thread. */
struct tl_track {
	uint32_t pid;
	uint32_t tid;
	const char *name;
	int32_t sort_index; /* INT32_MIN: none */
	uint32_t pad;
};

struct timeline {
	struct tl_event *events;
	size_t nevents, cap_events;
	struct tl_track *procs;
	size_t nprocs, cap_procs;
	struct tl_track *threads;
	size_t nthreads, cap_threads;
	uint64_t cpu_samples; /* given to timeline__add_sample_slices */
	struct timeline_priv *priv;
};

struct timeline *timeline__new(void);
void timeline__free(struct timeline *tl);

/* Copy a string into memory the timeline owns; equal strings give the same pointer. */
const char *timeline__intern(struct timeline *tl, const char *s);

/* Name a process or thread track (renaming keeps the latest). Returns 0 or -errno. */
int timeline__set_process_name(struct timeline *tl, uint32_t pid, const char *name);
int timeline__set_thread_name(struct timeline *tl, uint32_t pid, uint32_t tid, const char *name);
/* Where a thread track sorts among its process's tracks (Perfetto honours it). */
int timeline__set_thread_sort(struct timeline *tl, uint32_t pid, uint32_t tid, int32_t index);

/*
 * The track of one GPU stream: created on first use under a pseudo process
 * named "GPU <device> (<owner name>)" and a thread "stream <stream>". Returns
 * 0 and sets *pid, *tid, or -errno.
 */
int timeline__gpu_track(struct timeline *tl, uint32_t owner_pid, const char *owner_name,
			uint32_t device, uint32_t stream, uint32_t *pid, uint32_t *tid);

/* A complete slice [ts, ts + dur). Strings (args' too) are interned. */
int timeline__add_slice(struct timeline *tl, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t dur,
			const char *name, const char *cat, const struct tl_arg *args, size_t nargs);

/*
 * A flow arrow from the slice enclosing from_ts on (from_pid, from_tid) to the
 * slice enclosing to_ts on (to_pid, to_tid). id must be unique per flow.
 */
int timeline__add_flow(struct timeline *tl, uint64_t id, const char *name, const char *cat,
		       uint32_t from_pid, uint32_t from_tid, uint64_t from_ts, uint32_t to_pid,
		       uint32_t to_tid, uint64_t to_ts);

/* A counter sample: one value per series (args[i].key names it, .num is the value). */
int timeline__add_counter(struct timeline *tl, uint32_t pid, uint64_t ts, const char *name,
			  const struct tl_arg *series, size_t nseries);

/*
 * One CPU sample of a thread (dur 0: it stands for one period), or one
 * off-CPU block (dur > 0: blocked from ts for dur ns): its stack, root first.
 */
struct tl_sample {
	uint64_t ts;
	uint64_t dur;
	const char *const *frames;
	uint32_t nframes;
	uint32_t pad;
};

#define TL_OFFCPU_SLICE "[off-CPU]"

/*
 * Turn one thread's CPU samples and off-CPU blocks (in time order, a block
 * by its start) into nested X slices, as py-spy's chrometrace does: a frame
 * opens at the first sample that has it and stays open while the following
 * samples have the same frames from the root down to it; it closes at the
 * first sample that differs, 1 ns before it (nothing begins where something
 * ends on one track: see TL_GAP_NS in timeline.c). A sample stands for
 * period_ns of CPU, so the last of a run closes period_ns after it (or 1 ns
 * before a block begins, if sooner), and a gap longer than two periods (the
 * thread was off CPU) closes everything. Slices carry no arguments: speedscope tells frames
 * apart by name and arguments. tl->cpu_samples counts the samples. A block is one TL_OFFCPU_SLICE slice (category "off_cpu") holding its
 * stack; a sample that claims to be inside a block counts from 1 ns after
 * its end, one that shares the time of the sample before from 2 ns after it. A
 * sample with no frames is one "[unknown]" slice. Returns 0 or -errno.
 */
int timeline__add_sample_slices(struct timeline *tl, uint32_t pid, uint32_t tid,
				const struct tl_sample *samples, size_t n, uint64_t period_ns,
				const char *cat);

/*
 * Output order: by time; at equal times E before anything that opens, longer
 * slices before the slices they contain (at equal length the outer one
 * first), then insertion order. A qsort-style comparison of two events.
 */
int timeline__event_cmp(const struct tl_event *a, const struct tl_event *b);

#endif
