// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/objfile.h"
#include "proc/proc.h"
#include "proc/procmaps.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"

struct proctab {
	struct objtab *objs;
	/* open addressing: pid -> latest generation */
	struct htab *latest; /* pid -> newest generation (struct proc *) */
	struct proctab_stats stats;
	size_t deleted; /* since `latest` was last rebuilt (its copied keys stay until then) */
	void (*change_fn)(void *ctx, uint32_t pid, int change);
	void *change_ctx;
	/*
	 * Process generations and their mappings, in the budget as a report:
	 * exited ones are freed by proctab__gc (continuous, every interval) and
	 * proctab__gc_exited (once a second, some seconds after the exit).
	 */
	struct membudget_cache mb;
};

/* What one generation holds. */
static size_t proc_bytes(const struct proc *p)
{
	return sizeof(*p) + p->cap * sizeof(*p->maps);
}

static void changed(struct proctab *t, uint32_t pid, int what)
{
	if (t->change_fn)
		t->change_fn(t->change_ctx, pid, what);
}

void proctab__on_change(struct proctab *t, void (*fn)(void *ctx, uint32_t pid, int change),
			void *ctx)
{
	t->change_fn = fn;
	t->change_ctx = ctx;
}

struct proctab *proctab__new(struct objtab *objs)
{
	struct proctab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->objs = objs;
	t->latest = htab__new(1024, HTAB_COPY_KEYS); /* 4-byte keys: pids recur */
	if (!t->latest) {
		free(t);
		return NULL;
	}
	t->mb = (struct membudget_cache){ .name = "processes" };
	membudget__add(&t->mb);
	return t;
}

static void proc__free_chain(struct proctab *t, struct proc *p)
{
	while (p) {
		struct proc *prev = p->prev;

		membudget__charge(&t->mb, -(long long)proc_bytes(p));
		t->mb.entries--;
		free(p->maps);
		free(p);
		p = prev;
	}
}

void proctab__free(struct proctab *t)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!t)
		return;
	while ((e = htab__next(t->latest, &it)))
		proc__free_chain(t, (struct proc *)(uintptr_t)e->val);
	membudget__remove(&t->mb);
	htab__free(t->latest);
	free(t);
}

/* The newest generation of pid, or NULL. */
static struct proc *latest(const struct proctab *t, uint32_t pid)
{
	struct htab_entry *e =
		htab__find(t->latest, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	return e ? (struct proc *)(uintptr_t)e->val : NULL;
}

/* Start a new generation of pid (first sight, exec, or pid reuse). */
static struct proc *new_generation(struct proctab *t, uint32_t pid, uint64_t time_ns)
{
	struct proc *p = calloc(1, sizeof(*p));
	struct htab_entry *e;

	if (!p)
		return NULL;
	if (htab__upsert(t->latest, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e) < 0) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->start_ns = time_ns;
	p->prev = (struct proc *)(uintptr_t)e->val; /* 0 for a new pid */
	e->val = (uintptr_t)p;
	t->stats.procs++;
	t->mb.entries++;
	membudget__charge(&t->mb, proc_bytes(p));
	return p;
}

int proc__insert_mapping(struct proc *p, const struct mapping *m)
{
	uint32_t lo = 0, hi = p->nmaps, i, j, nkeep = 0;
	struct mapping head = { 0 }, tail = { 0 };
	bool has_head = false, has_tail = false;

	if (m->end <= m->start)
		return -EINVAL;
	/* first mapping that ends after m->start */
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (p->maps[mid].end <= m->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	/* [i, j) overlap m */
	for (j = i; j < p->nmaps && p->maps[j].start < m->end; j++)
		;
	if (i < j && p->maps[i].start < m->start) {
		head = p->maps[i];
		head.end = m->start;
		has_head = true;
	}
	if (i < j && p->maps[j - 1].end > m->end) {
		tail = p->maps[j - 1];
		tail.pgoff += m->end - tail.start;
		tail.start = m->end;
		has_tail = true;
	}
	nkeep = 1 + has_head + has_tail;
	if (p->nmaps - (j - i) + nkeep > p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 16;
		struct mapping *v;

		while (cap < p->nmaps - (j - i) + nkeep)
			cap *= 2;
		v = realloc(p->maps, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->maps = v;
		p->cap = cap;
	}
	memmove(&p->maps[i + nkeep], &p->maps[j], (p->nmaps - j) * sizeof(*p->maps));
	p->nmaps = p->nmaps - (j - i) + nkeep;
	if (has_head)
		p->maps[i++] = head;
	p->maps[i++] = *m;
	if (has_tail)
		p->maps[i] = tail;
	return 0;
}

/* proc__insert_mapping, the growth of p's array charged. */
static int insert(struct proctab *t, struct proc *p, const struct mapping *m)
{
	uint32_t cap = p->cap;
	int err = proc__insert_mapping(p, m);

	membudget__charge(&t->mb, ((long long)p->cap - cap) * (long long)sizeof(*p->maps));
	return err;
}

const struct mapping *proc__find(const struct proc *p, uint64_t addr)
{
	uint32_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (p->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nmaps && p->maps[lo].start <= addr)
		return &p->maps[lo];
	return NULL;
}

static bool is_anon(const char *path, uint64_t ino)
{
	return !ino && (!*path || path[0] == '[' || !strncmp(path, "//anon", 6) ||
			!strncmp(path, "/memfd:", 7));
}

static uint32_t obj_for(struct proctab *t, uint32_t pid, const char *path, uint32_t maj,
			uint32_t min, uint64_t ino, uint64_t start, uint64_t end, uint64_t pgoff)
{
	struct objfile *o;

	if (!strcmp(path, "[vdso]")) {
		o = objtab__vdso(t->objs);
		return o ? o->id : OBJ_ANON;
	}
	if (is_anon(path, ino))
		return OBJ_ANON;
	o = objtab__get(t->objs, maj, min, ino, path, pid, start, end);
	objfile__note_mapping(o, start, end, pgoff);
	return o ? o->id : OBJ_ANON;
}

struct read_ctx {
	struct proctab *t;
	struct proc *p;
};

static int add_proc_mapping(const struct procmaps_entry *e, void *ctx)
{
	struct read_ctx *c = ctx;
	struct mapping m = {
		.start = e->start,
		.end = e->end,
		.pgoff = e->pgoff,
	};

	m.obj = obj_for(c->t, c->p->pid, e->path, e->dev_major, e->dev_minor, e->ino, e->start,
			e->end, e->pgoff);
	return insert(c->t, c->p, &m);
}

static int reload(struct proctab *t, struct proc *p);

/*
 * The exit record is written before the task's last steps in do_exit: its
 * own samples come up to a few ms after it (-a next to storm: 104 of 1396
 * processes within 5 s, each a /proc read that failed). The kernel hands
 * pids out in turn, so the pid's next process comes far later than this.
 */
#define REUSE_AFTER_NS (50 * 1000000ULL)

int proc__for_each_task(uint32_t pid, int (*fn)(void *ctx, uint32_t tid), void *ctx)
{
	char path[48];
	struct dirent *d;
	int ret = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while (!ret && (d = readdir(dir))) {
		char *end;
		unsigned long tid = strtoul(d->d_name, &end, 10);

		if (tid && !*end && tid <= UINT32_MAX)
			ret = fn(ctx, (uint32_t)tid);
	}
	closedir(dir);
	return ret;
}

struct other_task {
	uint32_t pid, tid;
};

static int other_task(void *ctx, uint32_t tid)
{
	struct other_task *o = ctx;

	if (tid == o->pid)
		return 0;
	o->tid = tid;
	return 1;
}

bool proc__threads_left(uint32_t pid, uint32_t *tid)
{
	struct other_task o = { .pid = pid };
	bool left = proc__for_each_task(pid, other_task, &o) == 1;

	if (tid)
		*tid = o.tid;
	return left;
}

/*
 * /proc/PID/maps of a leader that ended itself is empty (its mm went with
 * it) while its other threads run on: read one of theirs.
 */
static FILE *open_maps(struct proc *p)
{
	char path[64];
	uint32_t tid;

	if (!proc__threads_left(p->pid, &tid))
		return NULL;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/maps", p->pid, tid);
	return fopen(path, "re");
}

int proctab__reload(struct proctab *t, struct proc *p)
{
	uint64_t c0 = thread_cpu_ns();
	int err = reload(t, p);

	t->stats.maps_cpu_ns += thread_cpu_ns() - c0;
	return err;
}

static int reload(struct proctab *t, struct proc *p)
{
	struct read_ctx c = { t, p };
	char path[64];
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
	t->stats.maps_read++;
	f = fopen(path, "re");
	if (!f) {
		err = -errno;
		t->stats.maps_read_failed++;
		if (err == -EACCES || err == -EPERM)
			t->stats.maps_read_denied++;
		if (p->state == MAPS_UNKNOWN)
			p->state = MAPS_PARTIAL;
		return err == -ENOENT ? -ESRCH : err;
	}
	p->nmaps = 0;
	err = procmaps__for_each_exec(f, add_proc_mapping, &c);
	fclose(f);
	if (!err && !p->nmaps && (f = open_maps(p))) {
		err = procmaps__for_each_exec(f, add_proc_mapping, &c);
		fclose(f);
	}
	if (err && err != -EINVAL) {
		p->state = MAPS_PARTIAL;
		return err;
	}
	p->state = MAPS_COMPLETE;
	changed(t, p->pid, PROC_MAPPED);
	return 0;
}

struct proc *proctab__lookup(struct proctab *t, uint32_t pid, uint64_t time_ns)
{
	struct proc *p = latest(t, pid);

	if (!p) {
		p = new_generation(t, pid, 0);
		if (!p)
			return NULL;
	} else if (p->exited && time_ns > p->exit_ns + REUSE_AFTER_NS) {
		/*
		 * Sampled well after the exit we know of: another process has
		 * the pid, whose fork we did not see (a filtered run judged it
		 * no target then, or the record was lost). Not the dead one's
		 * maps: its own, from /proc. The exit's time is when the last
		 * thread was gone (the side band's record or, for a process that
		 * may have had threads, when it was read).
		 */
		t->stats.unseen++;
		p = new_generation(t, pid, p->exit_ns + 1);
		if (!p)
			return NULL;
	}
	while (time_ns && p->prev && time_ns < p->start_ns)
		p = p->prev;
	if (p->state == MAPS_UNKNOWN && !p->exited && proctab__is_latest(t, p))
		proctab__reload(t, p);
	return p;
}

bool proctab__is_latest(const struct proctab *t, const struct proc *p)
{
	return latest(t, p->pid) == p;
}

void proctab__fork(struct proctab *t, uint32_t ppid, uint32_t pid, uint64_t time_ns)
{
	struct proc *parent, *child;

	t->stats.forks++;
	parent = proctab__lookup(t, ppid, 0);
	child = new_generation(t, pid, time_ns);
	if (!child || !parent)
		return;
	if (parent->nmaps) {
		child->maps = malloc(parent->nmaps * sizeof(*child->maps));
		if (child->maps) {
			memcpy(child->maps, parent->maps, parent->nmaps * sizeof(*child->maps));
			child->nmaps = child->cap = parent->nmaps;
			membudget__charge(&t->mb, child->cap * sizeof(*child->maps));
		}
	}
	child->state = parent->state == MAPS_COMPLETE && child->maps ? MAPS_COMPLETE : MAPS_UNKNOWN;
	child->seen_born = true; /* fork copies only the calling thread */
	changed(t, pid, PROC_FORKED);
}

void proctab__exec(struct proctab *t, uint32_t pid, uint64_t time_ns)
{
	struct proc *p;

	t->stats.execs++;
	p = new_generation(t, pid, time_ns);
	if (p) { /* the MMAP2 records of the new image follow */
		p->state = MAPS_COMPLETE;
		p->seen_born = true; /* exec ends every other thread */
	}
	changed(t, pid, PROC_EXECED);
}

void proctab__exit(struct proctab *t, uint32_t pid, uint64_t time_ns)
{
	struct proc *p = latest(t, pid);

	t->stats.exits++;
	if (p) {
		p->exited = true;
		p->exit_ns = time_ns ? time_ns : mono_ns();
	}
	changed(t, pid, PROC_EXITED);
}

void proctab__thread(struct proctab *t, uint32_t pid)
{
	struct proc *p = latest(t, pid);

	if (p)
		p->threaded = true;
}

bool proctab__may_be_threaded(struct proctab *t, uint32_t pid)
{
	struct proc *p = latest(t, pid);

	return !p || !p->seen_born || p->threaded;
}

void proctab__mmap(struct proctab *t, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
		   uint32_t maj, uint32_t min, uint64_t ino, const char *path)
{
	struct proc *p = latest(t, pid);
	struct mapping m = { .start = start, .end = start + len, .pgoff = pgoff };

	t->stats.mmaps++;
	if (!p) {
		/* existed before we started: the rest of its maps come from /proc */
		p = new_generation(t, pid, 0);
		if (!p)
			return;
	}
	m.obj = obj_for(t, pid, path, maj, min, ino, start, start + len, pgoff);
	if (insert(t, p, &m))
		pr_debug("pid %u: cannot record mapping of %s", pid, path);
	changed(t, pid, PROC_MAPPED);
}

const struct proctab_stats *proctab__stats(const struct proctab *t)
{
	return &t->stats;
}

size_t proctab__gc(struct proctab *t)
{
	return proctab__gc_before(t, UINT64_MAX);
}

size_t proctab__gc_before(struct proctab *t, uint64_t before_ns)
{
	struct htab_entry *e;
	uint32_t *gone = NULL;
	size_t it = 0, n = 0, cap = 0, freed = 0;

	while ((e = htab__next(t->latest, &it))) {
		struct proc *p = (struct proc *)(uintptr_t)e->val;

		/* older generations only served samples taken before an exec: all read by now */
		if (p->prev && p->start_ns < before_ns) {
			proc__free_chain(t, p->prev);
			p->prev = NULL;
			freed++;
		}
		/* an exit the side band lost still ends the process */
		if (!p->exited && kill((pid_t)p->pid, 0) && errno == ESRCH) {
			p->exited = true;
			p->exit_ns = mono_ns();
			changed(t, p->pid, PROC_EXITED);
		}
		if (!p->exited || p->exit_ns >= before_ns)
			continue;
		if (n == cap) {
			uint32_t *v = realloc(gone, (cap = cap ? cap * 2 : 256) * sizeof(*v));

			if (!v)
				break;
			gone = v;
		}
		gone[n++] = p->pid;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t h = htab__hash(&gone[i], sizeof(gone[i]));

		e = htab__find(t->latest, &gone[i], sizeof(gone[i]), h);
		if (!e)
			continue;
		proc__free_chain(t, (struct proc *)(uintptr_t)e->val);
		htab__delete(t->latest, &gone[i], sizeof(gone[i]), h);
		freed++;
		t->deleted++;
	}
	free(gone);
	/* a deleted key's copy lives as long as the table: rebuild once they outnumber the live */
	if (t->deleted > 1024 && t->deleted > htab__count(t->latest)) {
		struct htab *fresh = htab__new(htab__count(t->latest) * 2, HTAB_COPY_KEYS);
		struct htab_entry *f;
		bool ok = fresh != NULL;

		it = 0;
		while (ok && (e = htab__next(t->latest, &it))) {
			ok = htab__upsert(fresh, e->key, e->klen, e->hash, &f) >= 0;
			if (ok)
				f->val = e->val;
		}
		if (ok) {
			htab__free(t->latest);
			t->latest = fresh;
			t->deleted = 0;
		} else {
			htab__free(fresh);
		}
	}
	return freed;
}

size_t proctab__close_unused_files(struct proctab *t)
{
	struct htab_entry *e;
	size_t it = 0;

	objtab__mark_unused(t->objs);
	while ((e = htab__next(t->latest, &it))) {
		const struct proc *p = (const struct proc *)(uintptr_t)e->val;

		if (p->exited)
			continue;
		for (uint32_t i = 0; i < p->nmaps; i++)
			objfile__mark_used(t->objs, p->maps[i].obj);
	}
	return objtab__close_unused(t->objs);
}

bool proc__all_exited(const uint32_t *pids, size_t npids)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	for (size_t i = 0; i < npids; i++) {
		snprintf(path, sizeof(path), "/proc/%u/stat", pids[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone */
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		p = strrchr(buf, ')'); /* comm may hold anything: the state follows its last ')' */
		if (!p || (p[1] == ' ' && p[2] != 'Z' && p[2] != 'X'))
			return false;
		/* a leader that ended itself is a zombie while its threads run on */
		if (proc__threads_left(pids[i], NULL))
			return false;
	}
	return true;
}
