// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "collect/sideband.h"
#include "proc/proc.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * One record copied out of its CPU's buffer, to be handled in time order:
 * each CPU's buffer is in order, but a fork on one CPU and the child's exec
 * and mmaps on another must reach the process table as they happened, or
 * the fork (handled last) would make the parent's image the child's newest
 * (perf's ordered events do the same merge).
 */
struct queued {
	uint64_t time;
	uint32_t seq; /* arrival: keeps equal times (and timeless records) in order */
	uint32_t off; /* in the arena */
};

/*
 * Which pids' records reach the process table (-p, -- CMD, --cgroup): one
 * bit per pid says the verdict is known, one what it is. A process's verdict
 * is asked once (the targets map, its /proc/PID/cgroup), kept until its exit
 * record, and handed to a child at its fork: a cgroup's membership always
 * (a child starts in its parent's cgroup), a target's when children are
 * followed, so that a child which exited, and left the targets map or
 * /proc, before its records were read still keeps them. pids beyond the
 * bitmaps (pid_max raised later) are asked every time.
 */
struct verdicts {
	struct sideband_filter f;
	uint64_t *known, *yes;
	uint32_t npids;
};

struct sideband {
	struct perf_buffer *pb;
	int map_fd;
	struct verdicts *v; /* NULL: every process's records are kept */
	struct proctab *procs;
	uint64_t consumed_until;
	struct queued *q;
	size_t nq, capq;
	char *arena; /* the records, 8-byte aligned */
	size_t used, cap;
	uint64_t last_time;
	bool busy; /* handling the queue: a nested consume waits for the next */
	struct sideband_stats stats;
};

/* sample_id_all with PERF_SAMPLE_TID | PERF_SAMPLE_TIME trails every record. */
struct sample_id {
	uint32_t pid, tid;
	uint64_t time;
};

struct rec_task { /* PERF_RECORD_FORK, PERF_RECORD_EXIT */
	struct perf_event_header h;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

struct rec_comm {
	struct perf_event_header h;
	uint32_t pid, tid;
	char comm[];
};

struct rec_mmap2 {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	char filename[];
};

struct rec_lost {
	struct perf_event_header h;
	uint64_t id, lost;
};

static const struct sample_id *sample_id(const struct perf_event_header *h)
{
	if (h->size < sizeof(*h) + sizeof(struct sample_id))
		return NULL;
	return (const void *)((const char *)h + h->size - sizeof(struct sample_id));
}

static void verdicts_free(struct verdicts *v)
{
	if (!v)
		return;
	free(v->known);
	free(v->yes);
	free(v);
}

static void verdict_set(struct verdicts *v, uint32_t pid, int verdict)
{
	uint64_t bit = 1ULL << (pid % 64);

	if (pid >= v->npids)
		return;
	if (verdict < 0) {
		v->known[pid / 64] &= ~bit;
		return;
	}
	v->known[pid / 64] |= bit;
	if (verdict)
		v->yes[pid / 64] |= bit;
	else
		v->yes[pid / 64] &= ~bit;
}

/* 1, 0, or -1: not known. */
static int verdict_get(const struct verdicts *v, uint32_t pid)
{
	if (pid >= v->npids || !(v->known[pid / 64] >> (pid % 64) & 1))
		return -1;
	return v->yes[pid / 64] >> (pid % 64) & 1;
}

/* Whether pid's records are kept: always without a filter. */
static bool wanted(struct sideband *sb, uint32_t pid)
{
	struct verdicts *v = sb->v;
	int known;
	bool yes;

	if (!v)
		return true;
	if ((known = verdict_get(v, pid)) >= 0)
		return known;
	sb->stats.lookups++;
	yes = v->f.is_target(v->f.ctx, pid);
	verdict_set(v, pid, yes);
	return yes;
}

/* Keep h (of pid)? Counts what it skips. */
static bool keep(struct sideband *sb, uint32_t pid)
{
	if (wanted(sb, pid))
		return true;
	sb->stats.skipped++;
	return false;
}

static void handle(struct sideband *sb, const struct perf_event_header *h)
{
	const struct sample_id *sid = sample_id(h);
	uint64_t t = sid ? sid->time : 0;

	switch (h->type) {
	case PERF_RECORD_FORK: {
		const struct rec_task *r = (const void *)h;

		if (h->size < sizeof(*r))
			break;
		if (r->pid == r->ppid) { /* a thread: its process may outlive its leader */
			if (wanted(sb, r->pid))
				proctab__thread(sb->procs, r->pid);
			break;
		}
		if (sb->v) /* a new process: its parent's verdict, or a fresh one */
			verdict_set(sb->v, r->pid,
				    sb->v->f.by_cgroup ? wanted(sb, r->ppid)
				    : sb->v->f.follow_children && wanted(sb, r->ppid) ? 1
										      : -1);
		if (keep(sb, r->pid))
			proctab__fork(sb->procs, r->ppid, r->pid, r->time);
		break;
	}
	case PERF_RECORD_EXIT: {
		/*
		 * A leader's exit record is not its process's when the leader
		 * ended itself (pthread_exit) and other threads run on. Asked
		 * (proc__threads_left, when the record is handled: threads that
		 * ended since are gone) only of processes that made a thread or
		 * began before us: an opendir at every exit cost +11-22% of the
		 * agent's CPU next to 620 exits a second (storm). Else
		 * proctab__gc's kill(pid, 0) sees the end.
		 */
		const struct rec_task *r = (const void *)h;
		uint64_t end;

		if (h->size < sizeof(*r) || r->pid != r->tid)
			break;
		end = r->time;
		if (proctab__may_be_threaded(sb->procs, r->pid)) {
			if (proc__threads_left(r->pid, NULL)) {
				/* its leader ended itself: the process runs on (gc sees its end) */
				sb->stats.leader_exits++;
				break;
			}
			/* its other threads, if any, ended by now: their samples may be later */
			end = mono_ns();
		}
		if (keep(sb, r->pid)) {
			proctab__exit(sb->procs, r->pid, end);
			if (sb->v && sb->v->f.forget)
				sb->v->f.forget(sb->v->f.ctx, r->pid);
		}
		if (sb->v) /* the pid's next process is judged afresh */
			verdict_set(sb->v, r->pid, -1);
		break;
	}
	case PERF_RECORD_COMM: {
		const struct rec_comm *r = (const void *)h;

		if (h->size < sizeof(*r) || !(h->misc & PERF_RECORD_MISC_COMM_EXEC) ||
		    r->pid != r->tid)
			break;
		/* moved into the cgroup since its fork? */
		if (sb->v && sb->v->f.by_cgroup && !verdict_get(sb->v, r->pid)) {
			verdict_set(sb->v, r->pid, -1);
			if (sb->v->f.at_exec) {
				sb->stats.lookups++;
				verdict_set(sb->v, r->pid, sb->v->f.at_exec(sb->v->f.ctx, r->pid));
			}
		}
		if (keep(sb, r->pid))
			proctab__exec(sb->procs, r->pid, t);
		break;
	}
	case PERF_RECORD_MMAP2: {
		const struct rec_mmap2 *r = (const void *)h;
		size_t max = h->size - sizeof(*r) - sizeof(struct sample_id);
		char name[4096];
		size_t n;

		if (h->size < sizeof(*r) + sizeof(struct sample_id))
			break;
		if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) /* not requested */
			break;
		if (!keep(sb, r->pid)) /* its files are not opened, its maps not read */
			break;
		n = strnlen(r->filename, max < sizeof(name) - 1 ? max : sizeof(name) - 1);
		memcpy(name, r->filename, n);
		name[n] = '\0';
		proctab__mmap(sb->procs, r->pid, r->addr, r->len, r->pgoff, r->maj, r->min, r->ino,
			      name);
		break;
	}
	case PERF_RECORD_LOST: {
		const struct rec_lost *r = (const void *)h;

		if (h->size >= sizeof(*r))
			sb->stats.lost += r->lost;
		break;
	}
	default:
		break;
	}
}

/* Queue a copy of h, handled in time order by handle_queue(). */
static void queue(struct sideband *sb, const struct perf_event_header *h)
{
	const struct sample_id *sid = sample_id(h);
	size_t size = (h->size + 7) & ~(size_t)7;

	sb->stats.records++;
	if (array_grow((void **)&sb->q, &sb->capq, sb->nq, sizeof(*sb->q), 256) ||
	    array_grow((void **)&sb->arena, &sb->cap, sb->used + size - 1, 1, 65536))
		goto now;
	memcpy(sb->arena + sb->used, h, h->size);
	/* a record without a time (LOST) goes with the one before it */
	if (sid)
		sb->last_time = sid->time;
	sb->q[sb->nq] = (struct queued){ .time = sb->last_time,
					 .seq = (uint32_t)sb->nq,
					 .off = (uint32_t)sb->used };
	sb->nq++;
	sb->used += size;
	return;
now:
	handle(sb, h); /* out of memory: in buffer order rather than not at all */
}

static enum bpf_perf_event_ret on_record(void *ctx, int cpu, struct perf_event_header *h)
{
	(void)cpu;
	queue(ctx, h);
	return LIBBPF_PERF_EVENT_CONT;
}

static int by_time(const void *a, const void *b)
{
	const struct queued *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int sideband__new(struct sideband **out, struct proctab *procs, size_t pages_per_cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_DUMMY,
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
		.sample_id_all = 1,
		.mmap = 1,
		.mmap2 = 1,
		.comm = 1,
		.comm_exec = 1,
		.task = 1,
		.use_clockid = 1,
		.clockid = CLOCK_MONOTONIC, /* the clock bpf_ktime_get_ns() reads */
		/* drained with every poll; wake us only when filling up */
		.watermark = 1,
		.wakeup_watermark = 0,
	};
	struct sideband *sb;
	int ncpus = libbpf_num_possible_cpus(), err;

	if (ncpus < 0)
		return ncpus;
	attr.wakeup_watermark = pages_per_cpu * sysconf(_SC_PAGESIZE) / 2;
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	sb->procs = procs;
	sb->map_fd = bpf_map_create(BPF_MAP_TYPE_PERF_EVENT_ARRAY, "sideband", sizeof(int),
				    sizeof(int), ncpus, NULL);
	if (sb->map_fd < 0) {
		err = -errno;
		free(sb);
		return err;
	}
	/* one buffer per online CPU; offline CPUs are skipped by libbpf */
	sb->pb = perf_buffer__new_raw(sb->map_fd, pages_per_cpu, &attr, on_record, sb, NULL);
	if (!sb->pb) {
		err = -errno;
		close(sb->map_fd);
		free(sb);
		return err;
	}
	*out = sb;
	return 0;
}

int sideband__set_filter(struct sideband *sb, const struct sideband_filter *f)
{
	long max = 4194304; /* the largest pid_max, where /proc does not say */
	FILE *pf = fopen("/proc/sys/kernel/pid_max", "re");
	struct verdicts *v;

	if (pf) {
		if (fscanf(pf, "%ld", &max) != 1 || max <= 0 || max > 4194304)
			max = 4194304;
		fclose(pf);
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->f = *f;
	v->npids = (uint32_t)max;
	v->known = calloc((max + 63) / 64, sizeof(*v->known));
	v->yes = calloc((max + 63) / 64, sizeof(*v->yes));
	if (!v->known || !v->yes) {
		verdicts_free(v);
		return -ENOMEM;
	}
	verdicts_free(sb->v);
	sb->v = v;
	return 0;
}

void sideband__mark_target(struct sideband *sb, uint32_t pid)
{
	if (sb->v)
		verdict_set(sb->v, pid, 1);
}

void sideband__free(struct sideband *sb)
{
	if (!sb)
		return;
	perf_buffer__free(sb->pb);
	close(sb->map_fd);
	verdicts_free(sb->v);
	free(sb->q);
	free(sb->arena);
	free(sb);
}

int sideband__epoll_fd(const struct sideband *sb)
{
	return perf_buffer__epoll_fd(sb->pb);
}

static void handle_queue(struct sideband *sb)
{
	/* an empty queue has no array: qsort(NULL, 0) is undefined (UBSan says so) */
	if (sb->nq > 1)
		qsort(sb->q, sb->nq, sizeof(*sb->q), by_time);
	for (size_t i = 0; i < sb->nq; i++)
		handle(sb, (const struct perf_event_header *)(sb->arena + sb->q[i].off));
	/* a burst (a fork storm) grew the queue: give it back rather than keep the peak */
	if (sb->cap > (4u << 20) && sb->used < sb->cap / 8) {
		free(sb->arena);
		free(sb->q);
		sb->arena = NULL;
		sb->q = NULL;
		sb->cap = sb->capq = 0;
	}
	sb->nq = sb->used = 0;
}

int sideband__consume(struct sideband *sb)
{
	int err;

	if (sb->busy)
		return 0;
	sb->busy = true;
	sb->consumed_until = mono_ns();
	sb->nq = sb->used = 0;
	err = perf_buffer__consume(sb->pb);
	handle_queue(sb);
	sb->busy = false;
	return err;
}

int sideband__replay(struct proctab *procs, const struct sideband_filter *f,
		     const struct perf_event_header *const *recs, size_t n,
		     struct sideband_stats *stats)
{
	struct sideband sb = { .procs = procs };
	int err = f ? sideband__set_filter(&sb, f) : 0;

	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		queue(&sb, recs[i]);
	handle_queue(&sb);
	if (stats)
		*stats = sb.stats;
	verdicts_free(sb.v);
	free(sb.q);
	free(sb.arena);
	return 0;
}

uint64_t sideband__consumed_until(const struct sideband *sb)
{
	return sb->consumed_until;
}

const struct sideband_stats *sideband__stats(const struct sideband *sb)
{
	return &sb->stats;
}
