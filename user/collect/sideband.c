// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

/* One CPU's event and its mmap'ed ring (a metadata page, then the data). */
struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	char *data;
};

/*
 * Which pids' records reach the process table (-p, -- CMD): one bit per pid
 * says the verdict is known, one what it is. A process's verdict is asked
 * once (the targets map lookup), kept until its exit record, and handed to a
 * child at its fork when children are followed, so that a child which
 * exited, and left the targets map, before its records were read still
 * keeps them. pids beyond the bitmaps (pid_max raised later) are asked
 * every time.
 */
struct verdicts {
	struct sideband_filter f;
	uint64_t *known, *yes;
	uint32_t npids;
};

struct sideband {
	struct ring *rings;
	int nrings;
	size_t data_size; /* a power of two */
	int epfd;
	bool by_cgroup; /* the kernel keeps only the cgroup's tasks' records */
	struct verdicts *v;
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

/* Whether pid's records are kept: always without a filter. */
static bool wanted(struct sideband *sb, uint32_t pid)
{
	struct verdicts *v = sb->v;
	bool yes;

	if (!v)
		return true;
	if (pid < v->npids && (v->known[pid / 64] >> (pid % 64) & 1))
		return v->yes[pid / 64] >> (pid % 64) & 1;
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

		if (h->size < sizeof(*r) || r->pid == r->ppid) /* a thread: nothing to track */
			break;
		if (sb->v) /* a new process: its parent's verdict, or a fresh one */
			verdict_set(sb->v, r->pid,
				    sb->v->f.follow_children && wanted(sb, r->ppid) ? 1 : -1);
		if (keep(sb, r->pid))
			proctab__fork(sb->procs, r->ppid, r->pid, r->time);
		break;
	}
	case PERF_RECORD_EXIT: {
		const struct rec_task *r = (const void *)h;

		if (h->size < sizeof(*r) || r->pid != r->tid)
			break;
		if (keep(sb, r->pid))
			proctab__exit(sb->procs, r->pid, r->time);
		if (sb->v) /* the pid's next process is judged afresh */
			verdict_set(sb->v, r->pid, -1);
		break;
	}
	case PERF_RECORD_COMM: {
		const struct rec_comm *r = (const void *)h;

		if (h->size >= sizeof(*r) && (h->misc & PERF_RECORD_MISC_COMM_EXEC) &&
		    r->pid == r->tid && keep(sb, r->pid))
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

static int by_time(const void *a, const void *b)
{
	const struct queued *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* CPUs the kernel runs now ("0-3,5"), one flag each; -errno. */
static int online_cpus(bool **out, int *n)
{
	int ncpus = libbpf_num_possible_cpus(), a, b, k;
	char buf[1024], *p = buf;
	FILE *f;

	if (ncpus < 0)
		return ncpus;
	*out = calloc(ncpus, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	*n = ncpus;
	f = fopen("/sys/devices/system/cpu/online", "re");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		for (int i = 0; i < ncpus; i++) /* an open on an offline one fails: skipped */
			(*out)[i] = true;
		return 0;
	}
	fclose(f);
	while ((k = sscanf(p, "%d-%d", &a, &b)) >= 1) {
		if (k == 1)
			b = a;
		for (int i = a; i <= b && i < ncpus; i++)
			if (i >= 0)
				(*out)[i] = true;
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	return 0;
}

int sideband__new(struct sideband **out, struct proctab *procs, size_t pages_per_cpu, int cgroup_fd)
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
	long page = sysconf(_SC_PAGESIZE);
	struct sideband *sb;
	bool *online = NULL;
	int ncpus, err;

	if (pages_per_cpu & (pages_per_cpu - 1))
		return -EINVAL; /* the kernel's ring is a power of two pages */
	err = online_cpus(&online, &ncpus);
	if (err)
		return err;
	attr.wakeup_watermark = pages_per_cpu * page / 2;
	sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->rings = calloc(ncpus, sizeof(*sb->rings)))) {
		free(sb);
		free(online);
		return -ENOMEM;
	}
	sb->procs = procs;
	sb->data_size = pages_per_cpu * page;
	sb->by_cgroup = cgroup_fd >= 0;
	sb->epfd = epoll_create1(EPOLL_CLOEXEC);
	err = sb->epfd < 0 ? -errno : 0;
	/*
	 * One event per online CPU. For a cgroup the event is the cgroup's
	 * (pid = its directory): the kernel emits records only for tasks in it
	 * or below it (what `perf record -G` relies on), so the rest of the
	 * host costs the agent nothing. libbpf's perf_buffer cannot open
	 * cgroup events, hence our own rings.
	 */
	for (int cpu = 0; !err && cpu < ncpus; cpu++) {
		struct ring *rg = &sb->rings[sb->nrings];
		struct epoll_event ev = { .events = EPOLLIN };
		void *m;

		if (!online[cpu])
			continue;
		rg->fd =
			syscall(SYS_perf_event_open, &attr, sb->by_cgroup ? cgroup_fd : -1, cpu, -1,
				PERF_FLAG_FD_CLOEXEC | (sb->by_cgroup ? PERF_FLAG_PID_CGROUP : 0));
		if (rg->fd < 0) {
			if (errno == ENODEV) /* went offline since */
				continue;
			err = -errno;
			break;
		}
		m = mmap(NULL, page + sb->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, rg->fd, 0);
		if (m == MAP_FAILED) {
			err = -errno;
			close(rg->fd);
			break;
		}
		rg->meta = m;
		rg->data = (char *)m + page;
		ev.data.u32 = sb->nrings++;
		if (epoll_ctl(sb->epfd, EPOLL_CTL_ADD, rg->fd, &ev))
			err = -errno;
	}
	free(online);
	if (!err && !sb->nrings)
		err = -ENODEV;
	if (err) {
		sideband__free(sb);
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
		free(v->known);
		free(v->yes);
		free(v);
		return -ENOMEM;
	}
	verdicts_free(sb->v);
	sb->v = v;
	return 0;
}

bool sideband__by_cgroup(const struct sideband *sb)
{
	return sb->by_cgroup;
}

void sideband__free(struct sideband *sb)
{
	long page = sysconf(_SC_PAGESIZE);

	if (!sb)
		return;
	for (int i = 0; i < sb->nrings; i++) {
		munmap(sb->rings[i].meta, page + sb->data_size);
		close(sb->rings[i].fd);
	}
	if (sb->epfd >= 0)
		close(sb->epfd);
	verdicts_free(sb->v);
	free(sb->rings);
	free(sb->q);
	free(sb->arena);
	free(sb);
}

int sideband__epoll_fd(const struct sideband *sb)
{
	return sb->epfd;
}

/* Queue every record one CPU's ring holds, and give the kernel the room back. */
static void read_ring(struct sideband *sb, struct ring *rg)
{
	uint64_t head = __atomic_load_n(&rg->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = rg->meta->data_tail;
	size_t mask = sb->data_size - 1;
	uint64_t copy[65536 / 8]; /* a record that wraps around the end, made whole */

	while (tail < head) {
		const struct perf_event_header *h = (const void *)(rg->data + (tail & mask));
		size_t off = tail & mask, size = h->size;

		if (size < sizeof(*h) || size > head - tail)
			break; /* cannot happen: the kernel writes whole records */
		if (off + size > sb->data_size) {
			size_t first = sb->data_size - off;

			memcpy(copy, rg->data + off, first);
			memcpy((char *)copy + first, rg->data, size - first);
			h = (const void *)copy;
		}
		queue(sb, h);
		tail += size;
	}
	__atomic_store_n(&rg->meta->data_tail, tail, __ATOMIC_RELEASE);
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
	if (sb->busy)
		return 0;
	sb->busy = true;
	sb->consumed_until = mono_ns();
	sb->nq = sb->used = 0;
	for (int i = 0; i < sb->nrings; i++)
		read_ring(sb, &sb->rings[i]);
	handle_queue(sb);
	sb->busy = false;
	return 0;
}

int sideband__replay(struct proctab *procs, const struct sideband_filter *f,
		     const struct perf_event_header *const *recs, size_t n,
		     struct sideband_stats *stats)
{
	struct sideband sb = { .procs = procs, .epfd = -1 };
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
