/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The recorder's insides, shared with the event features (heap, off-CPU,
 * CUDA) that plug into a recording. record.c owns the life cycle (the run
 * loop; its jobs in command.c, setup.c, decode_ops.c, writeout.c and
 * report.c); user/registry.c lists the features; a feature
 * is a struct rec_feature: it loads its own BPF object (whose maps are shared
 * with the CPU object by name, so there is one ring buffer, one pid filter,
 * one set of unwind tables), attaches, turns its ring buffer records into
 * stack values, and adds lines to the summary: warnings (rec__warn, shown by
 * default) and detail lines (summary(), shown with -v).
 *
 * One sample, start to end: BPF fills a struct prof_sample (include/) →
 * ring buffer → record.c handle_record() checks it and dispatches on kind →
 * rec__key() turns its frames into a stack key (kernel addresses, file
 * offsets, Python code ids) → stacks__add() → at the end profile__build()
 * symbolizes → a writer in write/.
 */
#ifndef BPFPROF_RECORDER_H
#define BPFPROF_RECORDER_H

#include "util/membudget.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <sys/resource.h>
#include <linux/types.h>
#include <bpf/libbpf.h>

#include "aggregate/profile.h"
#include "aggregate/stacks.h"
#include "bpfprof.h"
#include "cli.h"
#include "collect/decode.h"
#include "write/output.h"

struct bpf_object;
struct prof_sample;
struct tcache;
struct tl_log;

struct rec_stats {
	uint64_t received;	 /* records read from the ring buffer */
	uint64_t bytes;		 /* ring buffer bytes they took */
	uint64_t bad;		 /* malformed ring buffer records (decoder's apart) */
	uint64_t unknown_kind;	 /* records of a kind no enabled feature handles */
	uint64_t before_exec;	 /* -- CMD: the child's records before its exec (our code) */
	uint64_t agg_failed;	 /* could not be added to the stack table */
	uint64_t unwind_no_room; /* samples with a frame in a file --unwind-mem had no room for */
	/* samples with a frame in a function a huge file's partial table did not hold yet */
	uint64_t unwind_partial_gap;
	/*
	 * Samples in the written output (the sum of its samples/count value, or
	 * the CPU samples of a trace); what the summary reports when known, so
	 * that it says what the file holds, not how many records arrived
	 */
	uint64_t written;
	bool written_known;
	/* nanoseconds of CPU the written samples stand for (their cpu value) */
	uint64_t written_cpu_ns;
	struct decode_stats dec; /* stack records decoded (collect/decode.h) */
};

struct recorder;

/*
 * An event source that plugs into the recorder. Hooks may be NULL. priv is
 * what setup() stored; it is handed back to every other hook.
 */
struct rec_feature {
	const char *name;
	/* whether env asks for it (NULL: only as a mode's view, collect/record.h) */
	bool (*wanted)(void);
	/*
	 * -- CMD, before the command is started (wanted features only): what the
	 * command must inherit, e.g. an environment variable. Returns 0 or -errno.
	 */
	int (*prepare_cmd)(void);
	/*
	 * After the CPU object is loaded: open the feature's skeleton, call
	 * rec__share_maps() and REC_SET_COMMON_RODATA() on it, load it,
	 * register value types (rec__value). Errors are printed here.
	 */
	int (*setup)(struct recorder *r, void **priv);
	/* attach: the run starts */
	int (*start)(struct recorder *r, void *priv);
	/* a ring buffer record of one of kinds[] (size already >= the header) */
	void (*on_record)(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			  const void *data, size_t size);
	/* a process forked, exec'd, mapped something or exited (enum proc_change) */
	void (*on_proc)(struct recorder *r, void *priv, uint32_t pid, int change);
	/* every turn of the run loop (about every POLL_MS) */
	void (*poll)(struct recorder *r, void *priv);
	/* the run is over: detach, before the last drain of the ring buffer */
	void (*stop)(struct recorder *r, void *priv);
	/* after the last drain, before the profile is built (e.g. in-use values) */
	void (*finish)(struct recorder *r, void *priv);
	/*
	 * --continuous: the interval ends, its file is about to be built from
	 * the stack table: set the values kept outside it (heap in use).
	 */
	void (*interval_end)(struct recorder *r, void *priv);
	/*
	 * --continuous: an interval was written and the stack table is a new,
	 * empty one; let go of what only exited processes needed, carry over
	 * what outlives the interval (live heap blocks). old: the interval's
	 * table, freed after this hook.
	 */
	void (*interval)(struct recorder *r, void *priv, struct stacks *old);
	/*
	 * End of the run, once the output is written (r->st.written known):
	 * add a warning (rec__warn) for each problem of this feature that
	 * changes the answer, past its threshold. Printed by default.
	 */
	void (*warnings)(struct recorder *r, void *priv);
	/*
	 * End-of-run detail lines (what was taken and lost, every counter):
	 * called only with -v, after the recorder's own detail lines.
	 */
	void (*summary)(struct recorder *r, void *priv, FILE *f);
	void (*destroy)(struct recorder *r, void *priv);
	/* extra pprof labels of a stack (its stacks__intern index); returns how many */
	uint32_t (*labels)(struct recorder *r, void *priv, size_t stack, struct plabel *out,
			   uint32_t max);
	uint16_t kinds[4]; /* enum sample_kind values it handles; 0-terminated */
};

#define REC_MAX_FEATURES 8
#define REC_MAX_COUNTERS 8

struct counter_family;

struct rec_mode;

struct recorder {
	const struct rec_mode *mode; /* record, or a view (top, dump) */
	struct cpu_bpf *skel;	     /* owns the shared maps (events, targets, unwind, python) */
	struct ring_buffer *rb;
	struct sideband *sb;
	struct sampler *sampler; /* NULL unless --cpu */
	struct objtab *objs;
	struct proctab *procs;
	struct stacks *stacks;
	struct ksyms *ks;
	int ks_err; /* why /proc/kallsyms gave no symbols (-errno), 0: read or not needed */
	struct unwinder *unw;
	struct pytrack *py;
	struct perfmaps *jit;	 /* /tmp/perf-PID.map names of anonymous code */
	struct continuous *cont; /* --continuous, or NULL */
	struct cgroups *cg;	 /* cgroup id -> path, container (env.want_cgroup) */
	struct htab *dirty;	 /* pids whose unwind description must be (re)written */
	struct output out;
	int epfd;
	int stats_fd; /* BPF run-time statistics on while open (-v) */
	pid_t child;
	int go_fd, err_fd;
	int child_status;
	bool child_done;
	uint64_t child_exec_ns; /* when the command's exec happened (CLOCK_MONOTONIC), 0: not yet */
	struct stack_key *key;	/* scratch for the sample being aggregated */
	struct decode_cfg dcfg; /* what rec__key keeps, from env */
	struct decode_ops dops; /* the process table, side band and Python tracking */
	struct proc *dproc;	/* the process of the record being decoded */
	uint32_t dpid;
	uint64_t dtime_ns;
	struct rec_stats st;
	uint64_t trimmed_at, trim_ns; /* malloc_trim after evictions (housekeeping) */
	size_t stacks_built; /* stacks the profile was built from (the table is freed then) */
	long hwm_run_kib;    /* peak RSS before the end of the run (-vv resets the kernel's) */
	struct membudget_cache mb_profile; /* the profile being written, at the end of a run */
	struct timespec t_start, t_stop;
	struct timespec wall_start;
	struct rusage ru_ready, ru_stop; /* the agent's CPU at the ready line, at the stop */
	struct tcache *tcache;		 /* --unwind-cache, NULL: off */
	/* unwind table builds and symbol reads (CPU ns, count) by then: not the steady state */
	uint64_t tables_cpu_ready, tables_cpu_stop, tables_ready, tables_stop;
	uint64_t syms_cpu_ready, syms_cpu_stop, syms_ready, syms_stop; /* symbol tables read */
	uint64_t maps_cpu_ready, maps_cpu_stop, maps_ready, maps_stop; /* /proc/PID/maps reads */
	double su_load, su_features; /* start-up CPU seconds: CPU object load, features */
	char core_btf[4096];	     /* CO-RE types cache file (util/corebtf.h) */
	bool core_btf_todo;	     /* not there yet: written after the run */
	bool core_btf_used;	     /* the CPU object loaded with it: features open with it */
	struct bpf_object_open_opts feat_open; /* rec__open_opts() */

	/* what stack_vals.v[i] means (rec__value) */
	struct pvaluetype values[STACK_MAX_VALUES];
	uint32_t nvalues;
	int32_t default_value;	     /* -1: the first registered */
	int32_t cpu_samples, cpu_ns; /* CPU value indexes, -1 without --cpu */

	/* names OBJ_SYNTH frames (a feature's synthetic leaves), see build_opts */
	const char *(*synth_name)(void *arg, uint64_t id, uint32_t *kind);
	void *synth_arg;
	struct tl_log *tl; /* -f chrome: the run's timeline (aggregate/timeline_log.h) */

	/* BPF counter families the summary prints (rec__add_counters) */
	struct {
		const struct counter_family *f;
		int map_fd;
	} counters[REC_MAX_COUNTERS];
	uint32_t ncounters;

	const struct rec_feature *feat[REC_MAX_FEATURES];
	void *feat_priv[REC_MAX_FEATURES];
	uint32_t nfeat;

	char **warnings; /* rec__warn(): "problem; remedy", each once, in order */
	/* the unwind rows (setup.c): chunks of chunk_rows, chunks at start, up to max_chunks */
	uint32_t unwind_chunk_rows, unwind_chunks, unwind_max_chunks;
	int unwind_chunk0; /* the first chunk (the chunks' template) until the unwinder has it */
	uint32_t nwarnings;
};

/*
 * Register a value type (pprof sample type) for this run; returns its index
 * in stack_vals.v, or -ENOSPC. Call from setup(). The same type twice gives
 * the same index.
 */
int rec__value(struct recorder *r, const char *type, const char *unit);
/* The value folded and svg show; the last call wins. */
void rec__default_value(struct recorder *r, int idx);

/*
 * Turn a stack record (frames after the header) into the scratch key
 * r->key: kernel, user and Python frames per env, flags and statistics.
 * Returns the key, or NULL when the record is malformed (counted) or --gil
 * leaves it out (counted).
 */
struct stack_key *rec__key(struct recorder *r, const struct prof_sample *s, size_t size);

/*
 * Before loading a feature's BPF object: use the CPU object's maps for every
 * map of the same name (events, targets, counters, unwind and Python maps).
 * Also marks its uprobe programs for uprobe_multi links where the kernel has
 * them (uprobes__prepare). Returns 0 or -errno.
 */
int rec__share_maps(struct recorder *r, struct bpf_object *obj);

/*
 * A BPF object's open options (the CPU object's, then each feature's):
 * CO-RE against the cached types file while it is in use (attempt 0; the
 * CPU object's failure drops it for all), the kernel's BTF on a retry. rec__open_retry(): after attempt's load failed with err, whether
 * to open and load again with attempt + 1.
 */
const struct bpf_object_open_opts *rec__open_opts(struct recorder *r, int attempt);
bool rec__open_retry(struct recorder *r, int attempt, int err);

/*
 * The unwind description (and Python's view) of pid is written to BPF again
 * at the next turn of the run loop: its mappings changed, or a sample found
 * it undescribed.
 */
void rec__want_sync(struct recorder *r, uint32_t pid);

/* Whether pid is being profiled (always, with -a). */
bool rec__is_target(struct recorder *r, uint32_t pid);

/*
 * A record at time_ns carries Python frames of pid (or a code object's
 * snapshot): if Python tracking has not probed pid yet (BPF made its
 * py_procs entry from py_files), probe it now, from the mappings the side
 * band gave, before its frames are decoded.
 */
void rec__py_probe(struct recorder *r, uint32_t pid, uint64_t time_ns);

/*
 * A per-CPU array of a counter family's u64 counters (util/counters.h): the
 * summary prints its non-zero losses, -v all of it. Returns 0 or -ENOSPC.
 */
int rec__add_counters(struct recorder *r, const struct counter_family *f, int map_fd);

/* Sum of a per-CPU BPF counter. */
uint64_t rec__counter(struct recorder *r, enum bpf_counter c);

/*
 * The end-of-run warnings. By default the summary is at most three lines
 * (samples and processes, what was written where, how to open it); after
 * it comes one "bpfprof: warning: PROBLEM: REMEDY" line per problem that
 * changes the answer and that the user can act on: a target not covered, a
 * share of stacks cut short (`[missing frames]`) with its main cause, lost
 * samples. Everything else (every counter, each feature's detail) is -v:
 * the feature's summary() hook.
 *
 * problem: what is wrong and how much, in the user's words (no internal
 * names: "side band", "FDE", map names), e.g. "31% of samples (620 of
 * 2000) have [missing frames]: their files' unwind tables did not fit";
 * remedy: what to run instead, naming the option or package, e.g. "raise
 * it to --unwind-mem 96M". A warning is added from any hook (usually
 * warnings(), when the totals are known), is printed after the summary in
 * the order added, each text once, and not at all with -q. Returns 0 or
 * -ENOMEM. REC_WARN_SHARE is the share of samples (percent) past which a
 * kind of broken stack is worth a warning, for features that have no
 * better threshold; rec__samples() the samples the share is of.
 */
int rec__warn(struct recorder *r, const char *remedy, const char *problem_fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define REC_WARN_SHARE 5.0
uint64_t rec__samples(const struct recorder *r);

/* End the run after this turn of the loop (a feature that has what it came for). */
void rec__stop(struct recorder *r);

/* The run's start on CLOCK_MONOTONIC, nanoseconds (BPF's clock). */
uint64_t rec__start_ns(const struct recorder *r);

/*
 * Settings every BPF object has (they live in the shared headers in bpf/):
 * set them on a feature's skeleton before load, as on the CPU one.
 */
#define REC_SET_COMMON_RODATA(rodata)                                         \
	do {                                                                  \
		(rodata)->filter_pids = !env.all;                             \
		(rodata)->follow_children = env.cmd_argv != NULL;             \
		(rodata)->filter_cgroup = env.cgroup_path != NULL;            \
		(rodata)->wakeup_bytes = env.ringbuf_bytes / 4;               \
		(rodata)->want_python = !env.no_python && !env.no_user;       \
		(rodata)->unwind_mode = env.no_user ? UNWIND_FP : env.unwind; \
	} while (0)

#endif
