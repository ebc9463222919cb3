/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * proctab: what each process had mapped, so that a user address becomes
 * (object, file offset) -- also after the process exec'd or exited.
 *
 * Sources: /proc/PID/maps for processes that existed before we started (read
 * on first sight), and the kernel's perf side-band records (FORK, COMM with
 * exec, MMAP2, EXIT) for everything after, which is how samples of processes
 * that exited before we looked at them still resolve. An exec or a pid reuse
 * starts a new generation of the pid; the older one is kept, with the time it
 * ended, for samples that arrive late.
 */
#ifndef BPFPROF_PROC_H
#define BPFPROF_PROC_H

#include <stdbool.h>
#include <stdint.h>

struct objtab;

struct mapping {
	uint64_t start, end; /* [start, end) */
	uint64_t pgoff;
	uint32_t obj; /* objfile id, or OBJ_ANON */
	uint32_t pad;
};

enum maps_state {
	MAPS_UNKNOWN = 0, /* must be read from /proc before use */
	MAPS_COMPLETE,	  /* read from /proc, or built from exec + MMAP2 */
	MAPS_PARTIAL,	  /* /proc could not be read: only what MMAP2 told */
};

struct proc {
	uint32_t pid;
	enum maps_state state;
	struct mapping *maps; /* sorted by start, non-overlapping */
	uint32_t nmaps, cap;
	uint64_t start_ns;	 /* CLOCK_MONOTONIC: when this generation began (0: before us) */
	uint64_t last_reload_ns; /* rate limit for re-reading /proc after a miss */
	bool exited;
	/*
	 * seen_born: this generation began under our eyes (fork, exec) with one
	 * thread; threaded: a thread was created in it since. Neither: its
	 * leader's exit record may not be the process's (proctab__may_be_threaded).
	 */
	bool seen_born, threaded;
	uint64_t exit_ns;  /* CLOCK_MONOTONIC of the exit, when exited */
	struct proc *prev; /* the generation before an exec or pid reuse */
};

struct proctab;

struct proctab_stats {
	uint64_t procs;	    /* process generations seen */
	uint64_t maps_read; /* /proc/PID/maps reads */
	uint64_t maps_read_failed;
	uint64_t maps_read_denied; /* of which refused: another user's process, no CAP_SYS_PTRACE */
	uint64_t execs, forks, exits, mmaps;
	uint64_t unseen;      /* processes sampled after the exit of their pid's last one we knew */
	uint64_t maps_cpu_ns; /* the agent thread's CPU reading them: per process, not sample */
};

struct proctab *proctab__new(struct objtab *objs);
void proctab__free(struct proctab *t);

/*
 * The generation of pid current at time_ns (0: the latest), reading
 * /proc/PID/maps if it was never read. Never NULL unless out of memory.
 */
struct proc *proctab__lookup(struct proctab *t, uint32_t pid, uint64_t time_ns);

/* Find the mapping containing addr, or NULL. */
const struct mapping *proc__find(const struct proc *p, uint64_t addr);
/* Re-read /proc/PID/maps (after a miss); returns 0 or -errno (-ESRCH: gone). */
int proctab__reload(struct proctab *t, struct proc *p);
/* Whether p is the newest generation of its pid (older ones must not be reloaded). */
bool proctab__is_latest(const struct proctab *t, const struct proc *p);

/* Side-band events, in the kernel's order. */
void proctab__fork(struct proctab *t, uint32_t ppid, uint32_t pid, uint64_t time_ns);
void proctab__exec(struct proctab *t, uint32_t pid, uint64_t time_ns);
void proctab__exit(struct proctab *t, uint32_t pid, uint64_t time_ns);
/*
 * fn(ctx, tid) for each thread of pid in /proc/PID/task (the leader too, a
 * zombie if it ended itself), until fn returns non-zero: returns that, 0,
 * or -errno from opening the directory (-ENOENT: no such process).
 */
int proc__for_each_task(uint32_t pid, int (*fn)(void *ctx, uint32_t tid), void *ctx);
/*
 * Whether pid's process has a thread besides its leader now (the leader may
 * have ended itself: a zombie in /proc/PID/task beside them); *tid: one.
 */
bool proc__threads_left(uint32_t pid, uint32_t *tid);
/*
 * Whether every one of these processes has exited: gone, or a zombie its
 * parent has not reaped yet and whose other threads have ended too.
 */
bool proc__all_exited(const uint32_t *pids, size_t n);
/* A thread was created in pid's process (a PERF_RECORD_FORK within it). */
void proctab__thread(struct proctab *t, uint32_t pid);
/* Whether pid's process may have threads besides its leader: not known from birth, or threaded. */
bool proctab__may_be_threaded(struct proctab *t, uint32_t pid);
void proctab__mmap(struct proctab *t, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
		   uint32_t maj, uint32_t min, uint64_t ino, const char *path);

/*
 * Continuous mode, between intervals (every sample so far is aggregated):
 * free exited processes and generations before an exec, and treat pids that
 * no longer exist as exited. Returns the generations freed.
 */
size_t proctab__gc(struct proctab *t);
/*
 * The same for processes that exited, and generations that ended, before
 * before_ns (CLOCK_MONOTONIC): once a second in every mode, for exits a few
 * seconds old (their samples have all been read by then).
 */
size_t proctab__gc_before(struct proctab *t, uint64_t before_ns);

const struct proctab_stats *proctab__stats(const struct proctab *t);

enum proc_change {
	PROC_EXECED, /* a new image: its mappings follow */
	PROC_MAPPED, /* mappings added or re-read */
	PROC_EXITED,
	PROC_FORKED, /* a new process, a copy of its parent's mappings */
};

/* Tell fn about every change to a process's mappings (the unwinder listens). */
void proctab__on_change(struct proctab *t, void (*fn)(void *ctx, uint32_t pid, int change),
			void *ctx);

/* Insert a mapping, replacing whatever it overlaps (what mmap does). Pure; exposed for tests. */
int proc__insert_mapping(struct proc *p, const struct mapping *m);

/*
 * Close the files no live process maps any more (their symbols loaded first:
 * samples may name them). Cheap enough for once a second. Returns files closed.
 */
size_t proctab__close_unused_files(struct proctab *t);

#endif
