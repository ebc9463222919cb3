// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The side band hands the process table its records in time order, whatever
 * order the per-CPU buffers give them in: a fork read after the child's exec
 * and mmaps (they ran on another CPU) must not make the parent's image the
 * child's newest.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/perf_event.h>

#include "collect/sideband.h"
#include "proc/objfile.h"
#include "proc/proc.h"

struct sid {
	uint32_t pid, tid;
	uint64_t time;
};

struct fork_rec {
	struct perf_event_header h;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
	struct sid sid;
};

struct comm_rec {
	struct perf_event_header h;
	uint32_t pid, tid;
	char comm[16];
	struct sid sid;
};

struct mmap2_rec {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	char filename[16];
	struct sid sid;
};

#define PARENT	    1000
#define CHILD	    1001
#define PARENT_TEXT 0x400000ULL
#define CHILD_TEXT  0x500000ULL

static void mmap2(struct mmap2_rec *r, uint32_t pid, uint64_t addr, const char *path, uint64_t t)
{
	memset(r, 0, sizeof(*r));
	r->h = (struct perf_event_header){ .type = PERF_RECORD_MMAP2, .size = sizeof(*r) };
	r->pid = r->tid = pid;
	r->addr = addr;
	r->len = 0x1000;
	r->prot = 5; /* r-x */
	r->ino = 1;
	strncpy(r->filename, path, sizeof(r->filename) - 1);
	r->sid = (struct sid){ pid, pid, t };
}

/* Buffer order of two CPUs read one after the other: the exec's CPU first. */
static void test_fork_read_after_exec(void **state)
{
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	struct comm_rec exec = {
		.h = { .type = PERF_RECORD_COMM,
		       .misc = PERF_RECORD_MISC_COMM_EXEC,
		       .size = sizeof(exec) },
		.pid = CHILD,
		.tid = CHILD,
		.comm = "true",
		.sid = { CHILD, CHILD, 200 },
	};
	struct fork_rec fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(fork) },
		.pid = CHILD,
		.ppid = PARENT,
		.tid = CHILD,
		.ptid = PARENT,
		.time = 100,
		.sid = { PARENT, PARENT, 100 },
	};
	struct mmap2_rec parent_map, child_map;
	const struct perf_event_header *recs[] = { &exec.h, &child_map.h, &fork.h };
	struct proc *p;

	(void)state;
	assert_non_null(t);
	mmap2(&parent_map, PARENT, PARENT_TEXT, "/bin/sh", 50);
	mmap2(&child_map, CHILD, CHILD_TEXT, "/bin/true", 201);
	sideband__replay(t, NULL, (const struct perf_event_header *const[]){ &parent_map.h }, 1,
			 NULL);

	sideband__replay(t, NULL, recs, 3, NULL);

	/* the child's newest image is the exec'd one, with its own text only */
	p = proctab__lookup(t, CHILD, 0);
	assert_non_null(p);
	assert_non_null(proc__find(p, CHILD_TEXT));
	assert_null(proc__find(p, PARENT_TEXT));
	assert_true(p->start_ns == 200);
	/* between fork and exec it was a copy of the parent */
	p = proctab__lookup(t, CHILD, 150);
	assert_non_null(proc__find(p, PARENT_TEXT));
	assert_null(proc__find(p, CHILD_TEXT));
	proctab__free(t);
	objtab__free(objs);
}

/* Equal times keep their arrival order; a record without a time goes with the one before. */
static void test_equal_times_keep_order(void **state)
{
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	struct mmap2_rec a, b;
	struct comm_rec exec = {
		.h = { .type = PERF_RECORD_COMM,
		       .misc = PERF_RECORD_MISC_COMM_EXEC,
		       .size = sizeof(exec) },
		.pid = CHILD,
		.tid = CHILD,
		.comm = "true",
		.sid = { CHILD, CHILD, 300 },
	};
	const struct perf_event_header *recs[] = { &exec.h, &a.h, &b.h };
	struct proc *p;

	(void)state;
	mmap2(&a, CHILD, CHILD_TEXT, "/bin/true", 300);
	mmap2(&b, CHILD, CHILD_TEXT + 0x10000, "/bin/true", 300);
	sideband__replay(t, NULL, recs, 3, NULL);
	p = proctab__lookup(t, CHILD, 0);
	assert_non_null(proc__find(p, CHILD_TEXT));
	assert_non_null(proc__find(p, CHILD_TEXT + 0x10000));
	assert_true(p->start_ns == 300);
	proctab__free(t);
	objtab__free(objs);
}

/*
 * Which processes' leader exit records need a look at /proc/PID/task: those
 * we did not see begin, and those that made a thread; not a child seen
 * forked (one thread), nor an image seen exec'd (exec ends the others).
 */
static void test_threads_known_from_birth(void **state)
{
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	struct fork_rec fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(fork) },
		.pid = CHILD,
		.ppid = PARENT,
		.tid = CHILD,
		.ptid = PARENT,
		.time = 100,
		.sid = { PARENT, PARENT, 100 },
	};
	struct fork_rec thread = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(thread) },
		.pid = CHILD,
		.ppid = CHILD,
		.tid = CHILD + 1,
		.ptid = CHILD,
		.time = 150,
		.sid = { CHILD, CHILD, 150 },
	};
	struct comm_rec exec = {
		.h = { .type = PERF_RECORD_COMM,
		       .misc = PERF_RECORD_MISC_COMM_EXEC,
		       .size = sizeof(exec) },
		.pid = CHILD,
		.tid = CHILD,
		.comm = "true",
		.sid = { CHILD, CHILD, 200 },
	};

	(void)state;
	assert_true(proctab__may_be_threaded(t, CHILD)); /* unknown */
	sideband__replay(t, NULL, (const struct perf_event_header *const[]){ &fork.h }, 1, NULL);
	assert_false(proctab__may_be_threaded(t, CHILD));
	assert_true(proctab__may_be_threaded(t, PARENT)); /* older than us */
	sideband__replay(t, NULL, (const struct perf_event_header *const[]){ &thread.h }, 1, NULL);
	assert_true(proctab__may_be_threaded(t, CHILD));
	sideband__replay(t, NULL, (const struct perf_event_header *const[]){ &exec.h }, 1, NULL);
	assert_false(proctab__may_be_threaded(t, CHILD));
	proctab__free(t);
	objtab__free(objs);
}

/*
 * A sample of a pid later than the exit of the last process we knew with
 * it: another process took the pid unseen (a filtered run judged its fork
 * not a target's, or the record was lost). It gets a generation of its own
 * (read from /proc), not the dead process's maps; older samples keep them.
 * The pid is above PID_MAX_LIMIT: no process of this host has it.
 */
static void test_sampled_after_exit(void **state)
{
	enum {
		GONE = 4194399
	};
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	struct fork_rec fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(fork) },
		.pid = GONE,
		.ppid = PARENT,
		.tid = GONE,
		.ptid = PARENT,
		.time = 100,
		.sid = { PARENT, PARENT, 100 },
	};
	struct fork_rec exit = {
		.h = { .type = PERF_RECORD_EXIT, .size = sizeof(exit) },
		.pid = GONE,
		.ppid = PARENT,
		.tid = GONE,
		.ptid = PARENT,
		.time = 300,
		.sid = { GONE, GONE, 300 },
	};
	struct mmap2_rec map;
	const struct perf_event_header *recs[] = { &fork.h, &map.h, &exit.h };
	struct proc *dead, *p;

	(void)state;
	mmap2(&map, GONE, CHILD_TEXT, "/bin/true", 200);
	sideband__replay(t, NULL, recs, 3, NULL);
	dead = proctab__lookup(t, GONE, 250);
	assert_non_null(dead);
	assert_true(dead->exited && dead->exit_ns == 300); /* one thread: the record's time */
	assert_non_null(proc__find(dead, CHILD_TEXT));
	assert_int_equal(proctab__stats(t)->unseen, 0);

	/* the exiting task's own last samples come just after its record */
	assert_true(proctab__lookup(t, GONE, 300 + 5000000) == dead);
	p = proctab__lookup(t, GONE, 300 + 60000000);
	assert_non_null(p);
	assert_true(p != dead && !p->exited && p->start_ns == 301);
	assert_null(proc__find(p, CHILD_TEXT));
	assert_int_equal(proctab__stats(t)->unseen, 1);
	/* once: the next sample finds it; an older one still the dead one */
	assert_true(proctab__lookup(t, GONE, 300 + 70000000) == p);
	assert_true(proctab__lookup(t, GONE, 250) == dead);
	assert_int_equal(proctab__stats(t)->unseen, 1);
	proctab__free(t);
	objtab__free(objs);
}

/* The filter: only PARENT is in the targets map (CHILD exited, and left it, before the read). */
static bool only_parent(void *ctx, uint32_t pid)
{
	(*(int *)ctx)++;
	return pid == PARENT;
}

#define OTHER	     2000
#define OTHER_PARENT 1999

/*
 * -- CMD: a target's child is one from its fork record on, whatever the
 * targets map says when the records are read; other processes' records
 * never reach the process table (-p: not even the target's children).
 */
static void filter(bool follow)
{
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	int asked = 0;
	struct sideband_filter f = { .is_target = only_parent,
				     .ctx = &asked,
				     .follow_children = follow };
	struct sideband_stats st;
	struct fork_rec fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(fork) },
		.pid = CHILD,
		.ppid = PARENT,
		.tid = CHILD,
		.ptid = PARENT,
		.time = 100,
		.sid = { PARENT, PARENT, 100 },
	};
	struct fork_rec other_fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(other_fork) },
		.pid = OTHER,
		.ppid = OTHER_PARENT,
		.tid = OTHER,
		.ptid = OTHER_PARENT,
		.time = 110,
		.sid = { OTHER_PARENT, OTHER_PARENT, 110 },
	};
	struct comm_rec exec = {
		.h = { .type = PERF_RECORD_COMM,
		       .misc = PERF_RECORD_MISC_COMM_EXEC,
		       .size = sizeof(exec) },
		.pid = CHILD,
		.tid = CHILD,
		.comm = "true",
		.sid = { CHILD, CHILD, 200 },
	};
	struct comm_rec other_exec = exec;
	struct fork_rec exit = fork;
	struct mmap2_rec parent_map, child_map, other_map[3];
	const struct perf_event_header *recs[] = {
		&parent_map.h, &fork.h,		&other_fork.h,	 &exec.h,	  &other_exec.h,
		&child_map.h,  &other_map[0].h, &other_map[1].h, &other_map[2].h, &exit.h,
	};
	const struct proctab_stats *ps = proctab__stats(t);
	struct proc *p;

	other_exec.pid = other_exec.tid = OTHER;
	other_exec.sid = (struct sid){ OTHER, OTHER, 210 };
	exit.h.type = PERF_RECORD_EXIT;
	exit.pid = exit.tid = CHILD;
	exit.time = 300;
	exit.sid = (struct sid){ CHILD, CHILD, 300 };
	mmap2(&parent_map, PARENT, PARENT_TEXT, "/bin/sh", 50);
	mmap2(&child_map, CHILD, CHILD_TEXT, "/bin/true", 201);
	for (int i = 0; i < 3; i++)
		mmap2(&other_map[i], OTHER, CHILD_TEXT + i * 0x10000, "/bin/other", 211 + i);

	assert_int_equal(sideband__replay(t, &f, recs, sizeof(recs) / sizeof(recs[0]), &st), 0);

	/* the other process: skipped, unknown to the table */
	assert_int_equal(ps->forks, follow ? 1 : 0);
	assert_int_equal(ps->execs, follow ? 1 : 0);
	assert_int_equal(ps->mmaps, follow ? 2 : 1);
	assert_int_equal(ps->exits, follow ? 1 : 0);
	assert_int_equal(st.skipped, follow ? 5 : 9);
	/* one question per process: PARENT, OTHER, and OTHER_PARENT (following) or CHILD */
	assert_int_equal(asked, 3);
	assert_int_equal(st.lookups, (uint64_t)asked);
	if (follow) { /* the child's own image, not its parent's */
		p = proctab__lookup(t, CHILD, 250);
		assert_non_null(p);
		assert_non_null(proc__find(p, CHILD_TEXT));
		assert_null(proc__find(p, PARENT_TEXT));
	}
	proctab__free(t);
	objtab__free(objs);
}

/* --cgroup: who is in the cgroup (the test's answer) and who was forgotten. */
struct members {
	uint32_t in[4];
	int asked, forgot;
};

static bool member(void *ctx, uint32_t pid)
{
	struct members *m = ctx;

	m->asked++;
	for (int i = 0; i < 4; i++)
		if (m->in[i] == pid)
			return true;
	return false;
}

static void forget(void *ctx, uint32_t pid)
{
	(void)pid;
	((struct members *)ctx)->forgot++;
}

/*
 * A cgroup's membership goes from parent to child at the fork, yes or no,
 * without asking; a process not known a member is asked again at its exec
 * (moved in by a runtime); a member's exit is handed to forget().
 */
static void test_filter_by_cgroup(void **state)
{
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	struct members m = { .in = { PARENT, OTHER } }; /* OTHER: only since its exec */
	struct sideband_filter f = { .is_target = member,
				     .ctx = &m,
				     .by_cgroup = true,
				     .at_exec = member,
				     .forget = forget };
	struct sideband_stats st;
	struct fork_rec fork = {
		.h = { .type = PERF_RECORD_FORK, .size = sizeof(fork) },
		.pid = CHILD,
		.ppid = PARENT,
		.tid = CHILD,
		.ptid = PARENT,
		.time = 100,
		.sid = { PARENT, PARENT, 100 },
	};
	struct fork_rec other_fork = fork, exit = fork;
	struct comm_rec other_exec = {
		.h = { .type = PERF_RECORD_COMM,
		       .misc = PERF_RECORD_MISC_COMM_EXEC,
		       .size = sizeof(other_exec) },
		.pid = OTHER,
		.tid = OTHER,
		.comm = "entry",
		.sid = { OTHER, OTHER, 210 },
	};
	struct mmap2_rec parent_map, child_map, other_map, pre_map;
	const struct perf_event_header *recs[] = {
		&parent_map.h, &fork.h,	     &other_fork.h, &pre_map.h,
		&other_exec.h, &child_map.h, &other_map.h,  &exit.h,
	};
	const struct proctab_stats *ps = proctab__stats(t);

	(void)state;
	other_fork.pid = other_fork.tid = OTHER;
	other_fork.ppid = other_fork.ptid = OTHER_PARENT;
	other_fork.time = 110;
	other_fork.sid = (struct sid){ OTHER_PARENT, OTHER_PARENT, 110 };
	exit.h.type = PERF_RECORD_EXIT;
	exit.pid = exit.tid = CHILD;
	exit.time = 300;
	exit.sid = (struct sid){ CHILD, CHILD, 300 };
	mmap2(&parent_map, PARENT, PARENT_TEXT, "/bin/sh", 50);
	mmap2(&child_map, CHILD, CHILD_TEXT, "/bin/true", 201);
	mmap2(&pre_map, OTHER, PARENT_TEXT, "/bin/runc", 120); /* before it was moved in */
	mmap2(&other_map, OTHER, CHILD_TEXT, "/bin/entry", 211);

	assert_int_equal(sideband__replay(t, &f, recs, sizeof(recs) / sizeof(recs[0]), &st), 0);
	/* kept: PARENT's and CHILD's mmaps, OTHER's exec and mmap after it */
	assert_int_equal(ps->forks, 1);
	assert_int_equal(ps->execs, 1);
	assert_int_equal(ps->mmaps, 3);
	assert_int_equal(ps->exits, 1);
	assert_int_equal(st.skipped, 2); /* OTHER's fork and its mapping before the exec */
	/* PARENT, OTHER_PARENT, OTHER at its exec: CHILD and OTHER's fork inherit */
	assert_int_equal(m.asked, 3);
	assert_int_equal(m.forgot, 1); /* CHILD's exit */
	proctab__free(t);
	objtab__free(objs);
}

static void test_filter_follows_children(void **state)
{
	(void)state;
	filter(true);
}

static void test_filter_pids_only(void **state)
{
	(void)state;
	filter(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_read_after_exec),
		cmocka_unit_test(test_equal_times_keep_order),
		cmocka_unit_test(test_threads_known_from_birth),
		cmocka_unit_test(test_sampled_after_exit),
		cmocka_unit_test(test_filter_follows_children),
		cmocka_unit_test(test_filter_pids_only),
		cmocka_unit_test(test_filter_by_cgroup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
