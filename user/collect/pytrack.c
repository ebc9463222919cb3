// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>

#include "collect/pytrack.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "python/python.h"
#include "util/htab.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/membudget.h"

#define MAX_THREADS 4096
/*
 * Re-read a code object's identity after this long before trusting the cache
 * again: at start-up, temporary code objects are freed and their addresses
 * reused by the functions that then run for the whole profile. Once an
 * object has been found the same REVALIDATE_FLAT times (0.4 s old), each
 * further check that finds it the same doubles the wait, up to
 * REVALIDATE_MAX_SHIFT doublings (1.6 s): at a fixed 100 ms every hot code
 * object of a training loop was read ten times a second, a process_vm_readv
 * each: 20% of the agent's steady-state CPU on the real-host bench (perf,
 * 2026-11-26). Doubling from the first check named 30% of a loop's code
 * objects that each lived 0.1 s as the one before them at their address
 * (`made N` against the names of tests/e2e/test_security.py's CODELOOP);
 * waiting until 0.4 s, 8-10%, as at a fixed 100 ms. The cost: a code object
 * freed after living for seconds, whose address another takes with the
 * same name (pycode__same), is named as the old one for up to 1.6 s of
 * samples, not 0.1 s.
 */
#define REVALIDATE_NS	     (100 * 1000000ULL)
#define REVALIDATE_FLAT	     4
#define REVALIDATE_MAX_SHIFT 4
#define RESCAN_NS	     (20 * 1000000ULL)
/*
 * Thread names: read again at most this often per process (renames, threads
 * that come and go), and at most every RESCAN_NS when a thread is new.
 */
#define NAMES_REFRESH_NS (2000 * 1000000ULL)
/*
 * ... and never sooner than this many times the last read took: a process
 * with thousands of threads starting costs at most 1/20 of the agent's time.
 */
#define NAMES_COST_FACTOR 20

/* What is known of a sampled thread's threading name. */
enum tname_state {
	TN_UNKNOWN = 0,	  /* not read yet */
	TN_NAMED,	  /* name holds threading's name */
	TN_NOT_THREADING, /* no threading.Thread runs on it: its OS name stands */
	TN_FAILED,	  /* its Thread's name, or threading._active, unreadable */
};

struct tname {
	uint8_t state;
	uint8_t tries; /* reads that found its thread state but no Thread yet */
	char *name;    /* last name read; kept when a later read fails */
};

/*
 * A thread is sampled before threading registers it (Thread.start() runs
 * it a little before _bootstrap_inner adds it to _active): look again this
 * many times, RESCAN_NS apart, before waiting for the next refresh.
 */
#define NAMES_EARLY_TRIES 4

struct pyp {
	uint32_t pid;
	bool probed;
	bool python;
	struct pyinfo info;
	uint32_t *tids; /* thread ids written to py_threads */
	uint32_t ntids;
	uint64_t last_scan_ns;
	uint32_t gen;	    /* bumped at exec: a new image's code objects */
	uint64_t start_ns;  /* its exec (CLOCK_MONOTONIC), 0: before us */
	bool gone;	    /* exited: still decodes what its samples named */
	struct htab *names; /* sampled tid -> struct tname * (--per-thread) */
	uint64_t names_read_ns;
	uint64_t names_cost_ns; /* how long the last read took */
	bool names_pending;	/* a tid was sampled that the last read did not cover */
	struct pynames_hints hints;
	uint64_t code_type; /* ob_type of the code objects read live (0: none yet) */
};

struct code_key {
	uint32_t pid;
	uint32_t gen;
	uint64_t addr;
};

/* A code object decoded from its BPF snapshot, waiting for a frame the live read fails. */
struct snap {
	struct code_key k; /* the table's key */
	struct pycode c;
	uint16_t tag; /* pycode_seen_key.tag BPF sent it under */
};

struct code_entry {
	struct pycode code;
	const struct pyinfo *info; /* of its process (pyp entries never move) */
	uint32_t pid;
	uint64_t validated_ns;
	uint8_t same_checks; /* checks in a row that found it the same (revalidate_wait) */
	uint16_t tag;	     /* pycode_seen_key.tag of its snapshot (0: none came) */
	/*
	 * Not read yet (code zeroed): its snapshot may come after the sample
	 * (BPF sends a few per sample), or a later live read may work.
	 */
	bool pending;
	uint64_t pending_frames; /* frames that named it while pending */
	/*
	 * Line tables (up to 1 MiB each, and a target can make code objects
	 * without end) live in the memory budget, least recently sampled given
	 * back first; the line of every offset a sample named is kept in memo,
	 * so what was aggregated is still named after an eviction.
	 */
	struct code_entry *lru_prev, *lru_next;
	bool on_lru;
	bool lines_evicted;
	struct lmemo *memo; /* sorted by off */
	uint32_t nmemo, capmemo;
	size_t charged; /* to "python code objects": the entry, its names, its memo */
};

struct lmemo {
	uint32_t off, line;
};

/* What an interpreter file says (pyproc__file), read once per file, not per process. */
struct pyfile_ent {
	int err; /* 0: defines _PyRuntime; -ENOENT: not Python; -errno: unreadable */
	struct pyfile f;
	/*
	 * The layout of its first process that probed well, _PyRuntime as an
	 * ELF vaddr: in py_files for BPF (bpf_pyfile), and what a process that
	 * exited before we probed it is decoded with (its snapshots).
	 */
	bool have_info;
	struct pyinfo info;
};

struct pytrack {
	int procs_fd, threads_fd;
	struct objtab *objs;
	struct htab *procs; /* pid -> struct pyp * */
	struct htab *files; /* objfile id -> struct pyfile_ent * */
	/* BPFPROF_TEST_NO_THREAD_LIST: py_threads stays empty (tests of BPF's ts_walk) */
	bool no_thread_list;
	/*
	 * BPFPROF_TEST_PY_LATE: a process of an interpreter file probed before
	 * is probed only once its samples show BPF found it (pytrack__probe):
	 * an agent behind by as long as the process lives, for tests.
	 */
	bool test_late;
	int files_fd;		  /* BPF py_files, -1: none */
	size_t files_written;	  /* BPF may have made py_procs entries: deleted at exit, exec */
	struct htab *codes;	  /* code_key -> code id */
	struct htab *snaps;	  /* code_key -> struct snap * (keys borrowed from it) */
	int seen_fd;		  /* BPF pycode_seen, -1: none */
	int gen_fd;		  /* BPF py_gen, -1: none */
	uint32_t gen;		  /* what py_gen holds */
	struct code_entry **ents; /* by code id - 1; NULL: freed by pytrack__gc */
	size_t nents, capents;
	uint64_t *free_ids; /* ids pytrack__gc freed, reused first */
	size_t nfree, capfree;
	size_t deleted; /* keys deleted from `codes` since it was rebuilt */
	uint64_t gc_unread_codes, gc_unread_frames; /* pending entries pytrack__gc freed */
	struct pythread *scratch;
	struct pyname *name_scratch; /* allocated at the first name read */
	struct pytrack_stats st;
	struct code_entry *lru_head, *lru_tail; /* entries holding a line table */
	struct membudget_cache mb;
	/*
	 * The entries themselves (names, sampled lines): what stacks refer to,
	 * reported; freed by pytrack__gc once their process is gone (continuous).
	 */
	struct membudget_cache mb_codes;
};

/*
 * A _Py_DebugOffsets block newer than every layout bpfprof knows is decoded
 * with the newest (pyoffsets.c): kept, once per version, for the end of
 * the run's warning (python.c), since its frames are only as right as that
 * guess.
 */
static void note_layout(struct pytrack *t, const struct pyinfo *info)
{
	uint32_t v = info->version & 0xffff0000u; /* major.minor */
	struct pytrack_stats *st = &t->st;

	if (!info->layout || v == info->layout)
		return;
	for (uint32_t i = 0; i < st->nnewer; i++)
		if (st->newer_version[i] == v)
			return;
	if (st->nnewer < sizeof(st->newer_version) / sizeof(st->newer_version[0])) {
		st->newer_version[st->nnewer] = v;
		st->newer_layout[st->nnewer++] = info->layout;
	}
	pr_verbose("python%u.%u: decoded with %u.%u's layout (newer than any bpfprof knows)",
		   v >> 24, (v >> 16) & 0xff, info->layout >> 24, (info->layout >> 16) & 0xff);
}

/* What ce holds besides its line table, charged again after it changed. */
static void codes_recharge(struct pytrack *t, struct code_entry *ce)
{
	size_t bytes = sizeof(*ce) + ce->capmemo * sizeof(*ce->memo);

	if (ce->code.qualname)
		bytes += strlen(ce->code.qualname) + 1;
	if (ce->code.filename)
		bytes += strlen(ce->code.filename) + 1;
	membudget__charge(&t->mb_codes, (long long)bytes - (long long)ce->charged);
	ce->charged = bytes;
}

static void lru_unlink(struct pytrack *t, struct code_entry *ce)
{
	if (!ce->on_lru)
		return;
	if (ce->lru_prev)
		ce->lru_prev->lru_next = ce->lru_next;
	else
		t->lru_head = ce->lru_next;
	if (ce->lru_next)
		ce->lru_next->lru_prev = ce->lru_prev;
	else
		t->lru_tail = ce->lru_prev;
	ce->lru_prev = ce->lru_next = NULL;
	ce->on_lru = false;
}

/* Most recently used first. */
static void lru_touch(struct pytrack *t, struct code_entry *ce)
{
	if (ce->on_lru && t->lru_head == ce)
		return;
	lru_unlink(t, ce);
	ce->lru_next = t->lru_head;
	if (t->lru_head)
		t->lru_head->lru_prev = ce;
	t->lru_head = ce;
	if (!t->lru_tail)
		t->lru_tail = ce;
	ce->on_lru = true;
}

/* ce's code just got a line table (read live or from a snapshot): into the budget. */
static void lines_added(struct pytrack *t, struct code_entry *ce)
{
	if (!ce->code.linetable)
		return;
	if (!ce->on_lru)
		t->mb.entries++;
	lru_touch(t, ce);
	membudget__charge(&t->mb, ce->code.linetable_len);
}

static void lines_drop(struct pytrack *t, struct code_entry *ce)
{
	if (ce->on_lru)
		t->mb.entries--;
	lru_unlink(t, ce);
	if (!ce->code.linetable)
		return;
	membudget__charge(&t->mb, -(long long)ce->code.linetable_len);
	free(ce->code.linetable);
	ce->code.linetable = NULL;
}

static size_t lines_evict(void *ctx, size_t want)
{
	struct pytrack *t = ctx;
	size_t freed = 0;

	while (freed < want && t->lru_tail) {
		struct code_entry *ce = t->lru_tail;

		freed += ce->code.linetable ? ce->code.linetable_len : 0;
		lines_drop(t, ce);
		ce->lines_evicted = true;
		t->mb.evicted++;
	}
	return freed;
}

static void entry_free(struct pytrack *t, struct code_entry *ce)
{
	membudget__charge(&t->mb_codes, -(long long)ce->charged);
	if (ce->charged)
		t->mb_codes.entries--;
	lines_drop(t, ce);
	pycode__free(&ce->code);
	free(ce->memo);
	free(ce);
}

int pytrack__new(struct pytrack **out, int procs_fd, int threads_fd, struct objtab *objs)
{
	struct pytrack *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->procs_fd = procs_fd;
	t->threads_fd = threads_fd;
	t->objs = objs;
	t->procs = htab__new(64, HTAB_COPY_KEYS);
	t->files = htab__new(16, HTAB_COPY_KEYS);
	t->codes = htab__new(1024, HTAB_COPY_KEYS);
	t->snaps = htab__new(256, 0);
	t->seen_fd = -1;
	t->files_fd = -1;
	t->no_thread_list = getenv("BPFPROF_TEST_NO_THREAD_LIST") != NULL;
	t->test_late = getenv("BPFPROF_TEST_PY_LATE") != NULL;
	t->gen_fd = -1;
	t->scratch = calloc(MAX_THREADS, sizeof(*t->scratch));
	t->mb = (struct membudget_cache){ .name = "python line tables",
					  .evict = lines_evict,
					  .ctx = t };
	membudget__add(&t->mb);
	t->mb_codes = (struct membudget_cache){ .name = "python code objects" };
	membudget__add(&t->mb_codes);
	if (!t->procs || !t->files || !t->codes || !t->snaps || !t->scratch) {
		pytrack__free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

static void free_names(struct pyp *pp)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!pp->names)
		return;
	while ((e = htab__next(pp->names, &it))) {
		struct tname *tn = (struct tname *)(uintptr_t)e->val;

		free(tn->name);
		free(tn);
	}
	htab__free(pp->names);
	pp->names = NULL;
}

static void free_snap(struct snap *sn)
{
	if (!sn)
		return;
	pycode__free(&sn->c);
	free(sn);
}

void pytrack__free(struct pytrack *t)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!t)
		return;
	if (t->procs) {
		while ((e = htab__next(t->procs, &it))) {
			struct pyp *pp = (struct pyp *)(uintptr_t)e->val;

			free_names(pp);
			free(pp->tids);
			free(pp);
		}
		htab__free(t->procs);
	}
	if (t->files) {
		it = 0;
		while ((e = htab__next(t->files, &it)))
			free((struct pyfile_ent *)(uintptr_t)e->val);
		htab__free(t->files);
	}
	for (size_t i = 0; i < t->nents; i++) {
		if (!t->ents[i])
			continue;
		entry_free(t, t->ents[i]);
	}
	membudget__remove(&t->mb);
	membudget__remove(&t->mb_codes);
	free(t->ents);
	free(t->free_ids);
	htab__free(t->codes);
	if (t->snaps) {
		it = 0;
		while ((e = htab__next(t->snaps, &it)))
			free_snap((struct snap *)(uintptr_t)e->val);
		htab__free(t->snaps);
	}
	free(t->scratch);
	free(t->name_scratch);
	free(t);
}

static struct pyp *pyp_of(struct pytrack *t, uint32_t pid, bool create)
{
	struct htab_entry *e;
	struct pyp *pp;
	int ret;

	if (!create) {
		e = htab__find(t->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
		return e ? (struct pyp *)(uintptr_t)e->val : NULL;
	}
	ret = htab__upsert(t->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 1) {
		pp = calloc(1, sizeof(*pp));
		if (!pp) {
			htab__delete(t->procs, &pid, sizeof(pid), e->hash);
			return NULL;
		}
		pp->pid = pid;
		e->val = (uintptr_t)pp;
	}
	return (struct pyp *)(uintptr_t)e->val;
}

/*
 * BPF's py_gen one more: the threads whose samples noted "no interpreter"
 * or kept a thread state look up py_procs and py_threads again. After the
 * change, not before: a sample in between that read the old entries would
 * keep what it found under the new generation.
 */
static void gen_bump(struct pytrack *t)
{
	uint32_t zero = 0;

	if (t->gen_fd < 0)
		return;
	t->gen++;
	bpf_map_update_elem(t->gen_fd, &zero, &t->gen, BPF_ANY);
}

static void clear_threads(struct pytrack *t, struct pyp *pp)
{
	for (uint32_t i = 0; i < pp->ntids; i++)
		bpf_map_delete_elem(t->threads_fd, &pp->tids[i]);
	if (pp->ntids)
		gen_bump(t);
	free(pp->tids);
	pp->tids = NULL;
	pp->ntids = 0;
}

static void scan_threads(struct pytrack *t, struct pyp *pp)
{
	int n;

	/* 3.12+ keep the GIL in the interpreter, which may not have existed at exec */
	if (!pp->info.bpf.gil_holder && !pyproc__gil(pp->pid, &pp->info))
		bpf_map_update_elem(t->procs_fd, &pp->pid, &pp->info.bpf, BPF_ANY);

	pp->last_scan_ns = mono_ns();
	if (t->no_thread_list)
		return;
	t->st.thread_scans++;
	n = pyproc__threads(pp->pid, &pp->info, t->scratch, MAX_THREADS);
	if (n < 0) {
		pr_debug("pid %u: cannot read the interpreter's threads: %s", pp->pid,
			 strerror(-n));
		return;
	}
	clear_threads(t, pp);
	pp->tids = malloc((n ? n : 1) * sizeof(*pp->tids));
	if (!pp->tids)
		return;
	for (int i = 0; i < n; i++) {
		if (!t->scratch[i].tid)
			continue;
		if (bpf_map_update_elem(t->threads_fd, &t->scratch[i].tid, &t->scratch[i].tstate,
					BPF_ANY))
			continue;
		pp->tids[pp->ntids++] = t->scratch[i].tid;
	}
	if (pp->ntids)
		gen_bump(t);
	t->st.threads += pp->ntids;
}

/* BPF copies this much of each frame: every field it reads, 8 bytes each. */
static void set_span(struct bpf_pyproc *b)
{
	int32_t offs[] = { b->frame_back,     b->frame_code,	b->frame_instr, b->frame_owner,
			   b->frame_is_entry, b->frame_globals, b->frame_tlbc };
	int32_t max = 0;

	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] > max)
			max = offs[i];
	b->frame_span = max + 8 <= PYFRAME_SPAN ? max + 8 : 0; /* 0: BPF will not walk */
}

static bool python_name(const char *name)
{
	return strstr(name, "python") != NULL;
}

/*
 * The file's facts, read on its first process (symbols: ~1-15 ms for a
 * libpython on this VM) and kept: the next process of the same interpreter
 * costs its memory reads only. NULL: cannot be read now (tried again).
 */
static struct pyfile_ent *python_file(struct pytrack *t, struct objfile *o)
{
	struct htab_entry *e;
	struct pyfile_ent *fe;
	int ret, fd;

	ret = htab__upsert(t->files, &o->id, sizeof(o->id), htab__hash(&o->id, sizeof(o->id)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 0 && e->val)
		return (struct pyfile_ent *)(uintptr_t)e->val;
	fd = objfile__fd(o);
	fe = fd >= 0 ? calloc(1, sizeof(*fe)) : NULL;
	if (!fe) {
		htab__delete(t->files, &o->id, sizeof(o->id), e->hash);
		return NULL;
	}
	fe->err = pyproc__file(fd, &fe->f);
	e->val = (uintptr_t)fe;
	return fe;
}

/*
 * The first process of fe's file that probed well: its layout, made
 * independent of the process (_PyRuntime as a vaddr, no GIL addresses), to
 * py_files, where BPF finds it for the file's next processes.
 */
static void file_learn(struct pytrack *t, struct pyfile_ent *fe, const struct objfile *o,
		       const struct pyinfo *info, uint64_t bias)
{
	struct file_unwind_key k = { objfile__kdev(o), o->ino };
	struct bpf_pyfile v = { 0 };
	uint32_t i;

	if (fe->have_info)
		return;
	fe->info = *info;
	fe->info.runtime -= bias;
	fe->info.bpf.runtime -= bias;
	fe->info.bpf.gil_holder = fe->info.bpf.gil_locked = 0;
	fe->info.bpf.snap_gen = fe->info.bpf.snap_epoch = 0;
	fe->have_info = true;
	if (t->files_fd < 0 || !fe->info.bpf.frame_span)
		return;
	for (i = 0; i < fe->f.nloads; i++) {
		if (!(fe->f.loads[i].flags & PF_X))
			continue;
		v.pp = fe->info.bpf;
		v.pp.ts_walk = 1;
		v.off = fe->f.loads[i].off;
		v.end = fe->f.loads[i].off + fe->f.loads[i].filesz;
		v.delta = fe->f.loads[i].vaddr - fe->f.loads[i].off;
		if (!bpf_map_update_elem(t->files_fd, &k, &v, BPF_ANY))
			t->files_written++;
		return;
	}
}

/* Whether p maps an interpreter file whose layout is known (BPFPROF_TEST_PY_LATE). */
static bool maps_known_file(struct pytrack *t, const struct proc *p)
{
	for (uint32_t i = 0; i < p->nmaps; i++) {
		uint32_t id = p->maps[i].obj;
		struct htab_entry *e =
			htab__find(t->files, &id, sizeof(id), htab__hash(&id, sizeof(id)));

		if (e && e->val && ((const struct pyfile_ent *)(uintptr_t)e->val)->have_info)
			return true;
	}
	return false;
}

void pytrack__sync(struct pytrack *t, const struct proc *p)
{
	if (t->test_late && !pytrack__is_python(t, p->pid) && maps_known_file(t, p))
		return;
	pytrack__probe(t, p);
}

void pytrack__probe(struct pytrack *t, const struct proc *p)
{
	struct pyp *pp = pyp_of(t, p->pid, true);

	if (!pp)
		return;
	/* one that exited before we probed it may still be probed: from its file's layout */
	if (pp->gone && (pp->python || pp->probed))
		return;
	if (pp->probed && pp->python) {
		/* a thread may have started: cheap enough to look again */
		if (mono_ns() - pp->last_scan_ns > RESCAN_NS)
			scan_threads(t, pp);
		return;
	}
	for (uint32_t i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		struct objfile *o = objtab__by_id(t->objs, m->obj);
		struct pyfile_ent *fe;
		uint64_t vaddr;
		int err;

		if (!o || !python_name(o->name))
			continue;
		fe = python_file(t, o);
		if (!fe || fe->err)
			continue;
		/* runtime = ELF vaddr + bias, from where this mapping's offset lands */
		if (pyproc__vaddr(&fe->f, m->pgoff, &vaddr))
			continue;
		err = pyproc__probe_file(p->pid, &fe->f, o->path, m->start - vaddr, &pp->info);
		if (err == -ENOENT)
			continue;
		pp->probed = true;
		if (err == -ESRCH && fe->have_info) {
			/*
			 * Gone before we got to it (BPF made its py_procs entry
			 * from py_files): its file's layout names its frames,
			 * from the snapshots BPF sent.
			 */
			pp->info = fe->info;
			pp->info.runtime += m->start - vaddr;
			pp->python = true;
			pp->gone = true;
			t->st.interpreters++;
			return;
		}
		if (err) {
			if (err == -ENOTSUP) {
				t->st.unsupported++;
				t->st.unsupported_version = pp->info.version & 0xffff0000u;
			}
			pr_verbose("pid %u: %s: no Python stacks (%s)", p->pid, o->path,
				   err == -ENOTSUP ? "unsupported version" : strerror(-err));
			return;
		}
		note_layout(t, &pp->info);
		set_span(&pp->info.bpf);
		file_learn(t, fe, o, &pp->info, m->start - vaddr);
		pp->info.bpf.snap_gen = (uint16_t)pp->gen; /* a new image's snapshots */
		if (t->seen_fd < 0)
			pp->info.bpf.code_read = 0;
		/*
		 * BPF finds a thread's state in the list itself when py_threads
		 * does not have it yet (a new thread: at the list's head)
		 */
		pp->info.bpf.ts_walk = 1;
		pp->start_ns = p->start_ns;
		if (bpf_map_update_elem(t->procs_fd, &p->pid, &pp->info.bpf, BPF_ANY)) {
			pr_debug("pid %u: cannot write its Python layout: %s", p->pid,
				 strerror(errno));
			return;
		}
		gen_bump(t);
		pp->python = true;
		t->st.interpreters++;
		pr_debug("pid %u: CPython %x in %s", p->pid, pp->info.version, o->path);
		scan_threads(t, pp);
		return;
	}
	/* not (yet) Python: libpython may be mapped later; probed again on change */
}

void pytrack__rescan(struct pytrack *t, uint32_t pid)
{
	struct pyp *pp = pyp_of(t, pid, false);

	if (pp && pp->python && !pp->gone && mono_ns() - pp->last_scan_ns > RESCAN_NS)
		scan_threads(t, pp);
}

void pytrack__forget(struct pytrack *t, uint32_t pid, bool exited)
{
	struct pyp *pp = pyp_of(t, pid, false);

	if ((pp && pp->python) || t->files_written)
		bpf_map_delete_elem(t->procs_fd, &pid); /* ours, or BPF's (py_early_proc) */
	if (!pp)
		return;
	clear_threads(t, pp);
	if (exited) {
		/*
		 * Samples taken before the exit are still in the ring buffer:
		 * keep decoding them (from the cache; the memory is gone).
		 */
		pp->gone = true;
		return;
	}
	/* a new image: probed again, and its code objects are new ones */
	memset(&pp->hints, 0, sizeof(pp->hints));
	pp->probed = false;
	pp->python = false;
	pp->gone = false;
	pp->gen++;
}

bool pytrack__is_python(const struct pytrack *t, uint32_t pid)
{
	struct htab_entry *e =
		htab__find(t->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	return e && ((struct pyp *)(uintptr_t)e->val)->python;
}

bool pytrack__seen(const struct pytrack *t, uint32_t pid)
{
	return htab__find(t->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid))) != NULL;
}

static uint64_t add_entry(struct pytrack *t, struct code_entry *ce)
{
	if (t->nfree) {
		uint64_t id = t->free_ids[--t->nfree];

		t->ents[id - 1] = ce;
		return id;
	}
	if (t->nents == t->capents) {
		size_t cap = t->capents ? t->capents * 2 : 256;
		struct code_entry **v = realloc(t->ents, cap * sizeof(*v));

		if (!v)
			return 0;
		t->ents = v;
		t->capents = cap;
	}
	t->ents[t->nents++] = ce;
	return t->nents;
}

/* The snapshot kept for (pid, gen, addr), taken out of the table (NULL: none). */
static struct snap *take_snap(struct pytrack *t, const struct code_key *k)
{
	uint64_t h = htab__hash(k, sizeof(*k));
	struct htab_entry *e = htab__find(t->snaps, k, sizeof(*k), h);
	struct snap *sn;

	if (!e)
		return NULL;
	sn = (struct snap *)(uintptr_t)e->val;
	htab__delete(t->snaps, k, sizeof(*k), h); /* borrowed key: nothing kept */
	return sn;
}

/*
 * The code object at addr is not the one BPF sent the snapshot of: drop
 * its pycode_seen key so that BPF sends the new one's, and move the
 * process's epoch on so that no CPU's cache still says it was sent.
 */
static void forget_seen(struct pytrack *t, struct pyp *pp, uint64_t addr, uint16_t tag)
{
	struct pycode_seen_key k = {
		.tgid = pp->pid, .gen = (uint16_t)pp->gen, .tag = tag, .code = addr
	};

	if (t->seen_fd < 0 || pp->gone || !pp->python)
		return;
	bpf_map_delete_elem(t->seen_fd, &k);
	pp->info.bpf.snap_epoch++;
	bpf_map_update_elem(t->procs_fd, &pp->pid, &pp->info.bpf, BPF_EXIST);
}

/*
 * Read the code object live; where that fails (the process exited, the
 * object was freed) its snapshot stands in. Where both are there and
 * differ, the object was freed and another took its address since the
 * sample: the snapshot, taken with the sample, is the sampled one (a
 * module's code runs once; the next module's often lands on its address
 * while the ring buffer waits to be drained). *tag: the snapshot's tag.
 */
static int read_code(struct pytrack *t, struct pyp *pp, uint64_t addr, struct pycode *out,
		     uint16_t *tag)
{
	struct code_key k = { .pid = pp->pid, .gen = pp->gen, .addr = addr };
	struct snap *sn = take_snap(t, &k);
	int err = pp->gone ? -ESRCH : pycode__read(pp->pid, &pp->info, addr, out);

	*tag = sn ? sn->tag : 0;
	if (!err) {
		pp->code_type = out->ident[0];
		if (!sn || pycode__same_object(&sn->c, out)) {
			free_snap(sn);
			return 0;
		}
		/* the live one is another object: its own snapshot comes when it is sampled */
		t->st.snap_outdated++;
		forget_seen(t, pp, addr, sn->tag);
		pycode__free(out);
	}
	if (!sn)
		return err;
	*out = sn->c;
	free(sn);
	t->st.snap_used++;
	return 0;
}

/* Read a pending entry's code object (live, or its snapshot). 0 or -errno. */
static int resolve(struct pytrack *t, struct pyp *pp, struct code_entry *ce, uint64_t addr)
{
	struct pycode c;
	uint16_t tag;
	int err = read_code(t, pp, addr, &c, &tag);

	if (err)
		return err;
	if (tag)
		ce->tag = tag;
	lines_drop(t, ce);
	pycode__free(&ce->code);
	ce->code = c;
	ce->pending = false;
	ce->lines_evicted = false;
	ce->validated_ns = mono_ns();
	ce->same_checks = 0;
	lines_added(t, ce);
	if (ce->charged)
		codes_recharge(t, ce);
	t->st.codes++;
	return 0;
}

/* A new entry for the code object at addr; pending when it cannot be read now. */
static uint64_t decode(struct pytrack *t, struct pyp *pp, uint64_t addr)
{
	struct code_entry *ce = calloc(1, sizeof(*ce));
	uint64_t id;

	if (!ce)
		return 0;
	ce->info = &pp->info;
	ce->pid = pp->pid;
	if (resolve(t, pp, ce, addr)) {
		pr_debug("pid %u: code object at 0x%llx unreadable", pp->pid,
			 (unsigned long long)addr);
		ce->pending = true;
		ce->pending_frames = 1;
	}
	id = add_entry(t, ce);
	if (!id) {
		entry_free(t, ce);
		return 0;
	}
	t->mb_codes.entries++;
	codes_recharge(t, ce);
	if (ce->pending)
		return id;
	pr_debug("pid %u: code 0x%llx = %s (%s:%u)", pp->pid, (unsigned long long)addr,
		 ce->code.qualname, ce->code.filename, ce->code.firstlineno);
	return id;
}

void pytrack__set_seen_map(struct pytrack *t, int seen_fd)
{
	t->seen_fd = seen_fd;
}

void pytrack__set_files_map(struct pytrack *t, int files_fd)
{
	t->files_fd = files_fd;
}

void pytrack__set_gen_map(struct pytrack *t, int gen_fd)
{
	t->gen_fd = gen_fd;
}

void pytrack__snapshot(struct pytrack *t, uint32_t pid, const void *snap, size_t len)
{
	struct pyp *pp = pyp_of(t, pid, false);
	struct code_entry *ce;
	struct htab_entry *e;
	struct snap *sn;
	int ret;

	t->st.snap_received++;
	/* an exec'd process's old image cannot be validated with the new layout */
	if (!pp || !pp->python || !(sn = calloc(1, sizeof(*sn)))) {
		t->st.snap_refused++;
		return;
	}
	if (pycode__from_snap(&pp->info, snap, len, pp->code_type, &sn->c)) {
		free(sn);
		t->st.snap_refused++;
		pr_debug("pid %u: code object snapshot refused", pid);
		return;
	}
	sn->k = (struct code_key){ .pid = pid, .gen = pp->gen, .addr = sn->c.code_addr };
	sn->tag = ((const struct pycode_snap *)snap)->tag; /* len checked by pycode__from_snap */
	ret = htab__upsert(t->snaps, &sn->k, sizeof(sn->k), htab__hash(&sn->k, sizeof(sn->k)), &e);
	if (ret < 0) {
		free_snap(sn);
		t->st.snap_refused++;
		return;
	}
	if (ret == 0) /* sent again (its key was dropped, or aged out of the LRU) */
		free_snap((struct snap *)(uintptr_t)e->val);
	e->key = &sn->k;
	e->val = (uintptr_t)sn;
	e = htab__find(t->codes, &sn->k, sizeof(sn->k), htab__hash(&sn->k, sizeof(sn->k)));
	if (!e || !e->val || !t->ents[e->val - 1])
		return; /* kept for the sample that follows */
	ce = t->ents[e->val - 1];
	if (ce->pending) {
		/* after a sample that named it (sent on a later sample): name that one too */
		uint64_t used = t->st.snap_used;

		/* a live read first, then sn (taken and freed) */
		if (!resolve(t, pp, ce, sn->k.addr) && t->st.snap_used != used)
			t->st.snap_late++;
	} else if (pycode__same_object(&ce->code, &sn->c)) {
		/* sent again (LRU) of an object read live already: not needed */
		free_snap(take_snap(t, &sn->k));
	} else {
		/*
		 * Another code object at an address we named: BPF saw it (its
		 * frame's tag differs, or we dropped the key). The samples after
		 * this snapshot are of it: a new entry for them, the old one
		 * kept for the stacks already counted.
		 */
		struct code_key k = sn->k; /* decode takes sn and frees it */
		uint64_t id = decode(t, pp, k.addr);

		t->st.code_reused++;
		e = htab__find(t->codes, &k, sizeof(k), htab__hash(&k, sizeof(k)));
		if (e)
			e->val = id;
	}
}

static struct lmemo *memo_find(const struct code_entry *ce, uint32_t off, uint32_t *pos)
{
	uint32_t lo = 0, hi = ce->nmemo;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (ce->memo[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return lo < ce->nmemo && ce->memo[lo].off == off ? &ce->memo[lo] : NULL;
}

/* Its line table was evicted: read it again while the object is alive and the same. */
static void lines_reread(struct pytrack *t, struct pyp *pp, struct code_entry *ce)
{
	struct pycode c;

	if (pp->gone || pycode__read(pp->pid, &pp->info, ce->code.code_addr, &c)) {
		t->st.lines_lost++;
		return;
	}
	if (pycode__same_object(&c, &ce->code) && c.linetable) {
		ce->code.linetable = c.linetable;
		ce->code.linetable_len = c.linetable_len;
		ce->code.linetable_cut = c.linetable_cut;
		ce->code.linetable_covers = c.linetable_covers;
		c.linetable = NULL;
		ce->lines_evicted = false;
		t->st.lines_reread++;
		lines_added(t, ce);
	} else {
		t->st.lines_lost++;
	}
	pycode__free(&c);
}

/*
 * The line of off in ce, remembered for pytrack__describe: aggregated stacks
 * keep (code id, off) and are named at the end, when the line table may have
 * been given back to the memory budget.
 */
static void memo_line(struct pytrack *t, struct pyp *pp, struct code_entry *ce, uint32_t off)
{
	struct lmemo *m;
	uint32_t pos, line;

	if (ce->pending || off == UINT32_MAX)
		return;
	if (ce->code.linetable)
		lru_touch(t, ce);
	if (memo_find(ce, off, &pos))
		return;
	if (!ce->code.linetable && ce->lines_evicted)
		lines_reread(t, pp, ce);
	line = ce->code.linetable ? pycode__line(&ce->code, off) : 0;
	if (ce->nmemo == ce->capmemo) {
		uint32_t cap = ce->capmemo ? ce->capmemo * 2 : 4;

		m = realloc(ce->memo, cap * sizeof(*m));
		if (!m)
			return;
		ce->memo = m;
		ce->capmemo = cap;
		if (ce->charged)
			codes_recharge(t, ce);
	}
	memmove(&ce->memo[pos + 1], &ce->memo[pos], (ce->nmemo - pos) * sizeof(*ce->memo));
	ce->memo[pos] = (struct lmemo){ .off = off, .line = line };
	ce->nmemo++;
}

/* How long a cached code object is trusted after its last check (REVALIDATE_NS). */
static uint64_t revalidate_wait(const struct code_entry *ce)
{
	unsigned shift = ce->same_checks > REVALIDATE_FLAT ? ce->same_checks - REVALIDATE_FLAT : 0;

	return REVALIDATE_NS << shift;
}

uint64_t pytrack__code(struct pytrack *t, uint32_t pid, uint64_t addr, uint64_t raw, uint32_t *off)
{
	struct pyp *pp = pyp_of(t, pid, false);
	struct code_key k = { .pid = pid, .gen = pp ? pp->gen : 0, .addr = addr };
	struct htab_entry *e;
	struct code_entry *ce;
	uint64_t id, now;
	int ret;

	*off = 0;
	if (!pp || !pp->python || !addr)
		return 0;
	ret = htab__upsert(t->codes, &k, sizeof(k), htab__hash(&k, sizeof(k)), &e);
	if (ret < 0)
		return 0;
	if (ret == 0 && e->val) {
		ce = t->ents[e->val - 1];
		now = mono_ns();
		if (ce->pending) {
			if (resolve(t, pp, ce, addr))
				ce->pending_frames++;
		} else if (now - ce->validated_ns > revalidate_wait(ce) && !pp->gone) {
			/* freed and replaced by another code object at the same address? */
			ret = pycode__same(pid, &pp->info, &ce->code);
			t->st.code_checks++;
			/*
			 * The same object, or nothing readable there (the
			 * process gone, or the object freed with its memory
			 * given back): this sample's frame was of ce, and an
			 * object that later takes the address is readable and
			 * checked then. A failed read never replaces a named
			 * entry with one that stays pending (unreadable).
			 */
			if (ret == 1 || ret < 0) {
				ce->validated_ns = now;
				if (ce->same_checks < REVALIDATE_FLAT + REVALIDATE_MAX_SHIFT)
					ce->same_checks++;
			} else if (ce->tag) {
				/*
				 * Named from a tagged snapshot: a new object at
				 * the address with another tag (another module's
				 * code) came with its own snapshot, which took
				 * the address over. This sample is older than
				 * the live object and was of ce; whatever sits
				 * there now with ce's tag is sent when sampled.
				 */
				forget_seen(t, pp, addr, ce->tag);
				ce->validated_ns = now;
				ce->same_checks = 0;
			} else {
				t->st.code_reused++;
				/* BPF sends the new one's snapshot */
				forget_seen(t, pp, addr, ce->tag);
				id = decode(t, pp, addr);
				e = htab__find(t->codes, &k, sizeof(k), htab__hash(&k, sizeof(k)));
				if (e)
					e->val = id;
				if (!id)
					return 0;
			}
		}
		id = e ? e->val : 0;
	} else {
		id = decode(t, pp, addr);
		e = htab__find(t->codes, &k, sizeof(k), htab__hash(&k, sizeof(k)));
		if (e)
			e->val = id;
	}
	if (!id)
		return 0;
	*off = pycode__instr_offset(&pp->info, addr, raw);
	if (t->ents[id - 1])
		memo_line(t, pp, t->ents[id - 1], *off);
	return id;
}

int pytrack__describe(const struct pytrack *t, uint64_t id, uint32_t off, const char **qualname,
		      const char **file, uint32_t *line)
{
	const struct code_entry *ce;
	const struct lmemo *m;
	uint32_t pos;

	if (!id || id > t->nents || !t->ents[id - 1])
		return -ENOENT;
	ce = t->ents[id - 1];
	if (ce->pending)
		return -ENOENT;
	*qualname = ce->code.qualname;
	*file = ce->code.filename;
	if (off == UINT32_MAX)
		*line = ce->code.firstlineno;
	else if ((m = memo_find(ce, off, &pos)))
		*line = m->line;
	else
		*line = ce->code.linetable ? pycode__line(&ce->code, off) : 0;
	if (!*line)
		*line = ce->code.firstlineno;
	return 0;
}

uint32_t pytrack__first_line(const struct pytrack *t, uint64_t id)
{
	const struct code_entry *ce;

	if (!id || id > t->nents || !(ce = t->ents[id - 1]) || ce->pending)
		return 0;
	return ce->code.firstlineno;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct pythread *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_ident(const void *a, const void *b)
{
	const struct pyname *x = a, *y = b;

	return x->ident < y->ident ? -1 : x->ident > y->ident;
}

static void set_name(struct tname *tn, const char *name)
{
	char *s;

	if (tn->name && !strcmp(tn->name, name)) {
		tn->state = TN_NAMED;
		return;
	}
	s = strdup(name);
	if (!s) {
		tn->state = tn->name ? TN_NAMED : TN_FAILED;
		return;
	}
	free(tn->name);
	tn->name = s;
	tn->state = TN_NAMED;
}

/* What a read says of one sampled thread. A name once read is not taken back. */
static void update_name(struct tname *tn, const struct pythread *th, const struct pyname *nm,
			int nnames)
{
	if (!th || nnames == -ENOENT || nnames == -ENOTSUP || (nnames >= 0 && !nm)) {
		/* no Python thread state, threading not imported, or not a Thread */
		if (!tn->name)
			tn->state = TN_NOT_THREADING;
	} else if (nnames < 0 || !nm->name[0]) {
		if (!tn->name)
			tn->state = TN_FAILED;
	} else {
		set_name(tn, nm->name);
	}
}

/*
 * Read threading's names of pp and give each sampled thread its own:
 * thread id -> PyThreadState.thread_id (pyproc) = ident -> Thread (pythreads).
 */
static void read_names(struct pytrack *t, struct pyp *pp)
{
	struct htab_entry *e;
	size_t it = 0;
	bool again = false;
	uint64_t start;
	int nth, nnames;

	start = pp->names_read_ns = mono_ns();
	pp->names_pending = false;
	if (!t->name_scratch) {
		t->name_scratch = calloc(MAX_THREADS, sizeof(*t->name_scratch));
		if (!t->name_scratch)
			return;
	}
	t->st.name_reads++;
	nth = pyproc__threads(pp->pid, &pp->info, t->scratch, MAX_THREADS);
	nnames = pythreads__names(pp->pid, &pp->info, &pp->hints, t->name_scratch, MAX_THREADS);
	pp->names_cost_ns = mono_ns() - start;
	t->st.name_read_ns += pp->names_cost_ns;
	if (nth == -ESRCH || nnames == -ESRCH)
		return; /* gone: what was read before stands */
	if (nnames < 0 && nnames != -ENOENT && nnames != -ENOTSUP) {
		t->st.name_read_failed++;
		pr_debug("pid %u: cannot read threading's thread names: %s", pp->pid,
			 strerror(-nnames));
	}
	if (nth > 0)
		qsort(t->scratch, (size_t)nth, sizeof(*t->scratch), cmp_tid);
	if (nnames > 0)
		qsort(t->name_scratch, (size_t)nnames, sizeof(*t->name_scratch), cmp_ident);
	while ((e = htab__next(pp->names, &it))) {
		struct tname *tn = (struct tname *)(uintptr_t)e->val;
		struct pythread key = { .tid = *(const uint32_t *)e->key }, *th = NULL;
		struct pyname *nm = NULL;

		if (nth < 0) {
			if (!tn->name)
				tn->state = TN_FAILED;
			continue;
		}
		th = bsearch(&key, t->scratch, (size_t)nth, sizeof(*t->scratch), cmp_tid);
		if (th && nnames > 0) {
			struct pyname k = { .ident = th->ident };

			nm = bsearch(&k, t->name_scratch, (size_t)nnames, sizeof(k), cmp_ident);
		}
		update_name(tn, th, nm, nnames);
		if (tn->state == TN_NOT_THREADING && th && tn->tries < NAMES_EARLY_TRIES) {
			tn->tries++;
			again = true;
		}
	}
	pp->names_pending = again;
}

void pytrack__thread_seen(struct pytrack *t, uint32_t pid, uint32_t tid)
{
	struct pyp *pp = pyp_of(t, pid, false);
	struct htab_entry *e;
	uint64_t hash = htab__hash(&tid, sizeof(tid)), gap;
	int ret;

	if (!pp || !pp->python || pp->gone)
		return;
	if (!pp->names) {
		pp->names = htab__new(16, HTAB_COPY_KEYS);
		if (!pp->names)
			return;
	}
	ret = htab__upsert(pp->names, &tid, sizeof(tid), hash, &e);
	if (ret < 0)
		return;
	if (ret == 1) {
		struct tname *tn = calloc(1, sizeof(*tn));

		if (!tn) {
			htab__delete(pp->names, &tid, sizeof(tid), hash);
			return;
		}
		e->val = (uintptr_t)tn;
		pp->names_pending = true;
	}
	gap = pp->names_pending ? RESCAN_NS : NAMES_REFRESH_NS;
	if (gap < NAMES_COST_FACTOR * pp->names_cost_ns)
		gap = NAMES_COST_FACTOR * pp->names_cost_ns;
	if (mono_ns() - pp->names_read_ns < gap)
		return;
	read_names(t, pp);
}

void pytrack__thread_names_final(struct pytrack *t)
{
	struct htab_entry *e;
	size_t it = 0;

	while ((e = htab__next(t->procs, &it))) {
		struct pyp *pp = (struct pyp *)(uintptr_t)e->val;

		if (pp->python && !pp->gone && pp->names && pp->names_pending)
			read_names(t, pp);
	}
}

const char *pytrack__thread_name(const struct pytrack *t, uint32_t pid, uint32_t tid)
{
	struct htab_entry *e =
		htab__find(t->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	const struct pyp *pp = e ? (const struct pyp *)(uintptr_t)e->val : NULL;
	const struct tname *tn;

	if (!pp || !pp->names)
		return NULL;
	e = htab__find(pp->names, &tid, sizeof(tid), htab__hash(&tid, sizeof(tid)));
	if (!e)
		return NULL;
	tn = (const struct tname *)(uintptr_t)e->val;
	return tn->name;
}

struct pytrack_stats *pytrack__stats(struct pytrack *t)
{
	struct htab_entry *e, *ne;
	size_t it = 0, nit;

	t->st.code_failed = t->gc_unread_codes;
	t->st.frames_unread = t->gc_unread_frames;
	for (size_t i = 0; i < t->nents; i++) {
		if (t->ents[i] && t->ents[i]->pending) {
			t->st.code_failed++;
			t->st.frames_unread += t->ents[i]->pending_frames;
		}
	}
	t->st.threads_named = t->st.threads_unnamed = t->st.threads_name_failed = 0;
	t->st.threads_name_late = 0;
	while ((e = htab__next(t->procs, &it))) {
		const struct pyp *pp = (const struct pyp *)(uintptr_t)e->val;

		for (nit = 0; pp->names && (ne = htab__next(pp->names, &nit));) {
			const struct tname *tn = (const struct tname *)(uintptr_t)ne->val;

			if (tn->name)
				t->st.threads_named++;
			else if (tn->state == TN_NOT_THREADING)
				t->st.threads_unnamed++;
			else if (tn->state == TN_FAILED)
				t->st.threads_name_failed++;
			else /* the process ended before a read */
				t->st.threads_name_late++;
		}
	}
	return &t->st;
}

/* Keys of `codes` that can no longer be asked for: their process exited or exec'd. */
static bool code_dead(struct pytrack *t, const struct code_key *k)
{
	struct pyp *pp = pyp_of(t, k->pid, false);

	return !pp || pp->gone || pp->gen != k->gen;
}

static void free_code(struct pytrack *t, uint64_t id)
{
	uint64_t *v;

	if (!id || id > t->nents || !t->ents[id - 1])
		return;
	if (t->ents[id - 1]->pending) {
		t->gc_unread_codes++;
		t->gc_unread_frames += t->ents[id - 1]->pending_frames;
	}
	entry_free(t, t->ents[id - 1]);
	t->ents[id - 1] = NULL;
	if (t->nfree == t->capfree) {
		size_t cap = t->capfree ? t->capfree * 2 : 256;

		v = realloc(t->free_ids, cap * sizeof(*v));
		if (!v)
			return; /* the slot stays unused: a few bytes */
		t->free_ids = v;
		t->capfree = cap;
	}
	t->free_ids[t->nfree++] = id;
}

size_t pytrack__gc(struct pytrack *t)
{
	struct code_key *dead = NULL;
	uint32_t *gone = NULL;
	size_t it = 0, nd = 0, ng = 0, freed = 0;
	struct htab_entry *e;

	/* every sample so far has been named: codes of exited processes can go */
	dead = malloc((htab__count(t->codes) + 1) * sizeof(*dead));
	gone = malloc((htab__count(t->procs) + 1) * sizeof(*gone));
	if (!dead || !gone)
		goto out;
	while ((e = htab__next(t->codes, &it)))
		if (code_dead(t, e->key))
			dead[nd++] = *(const struct code_key *)e->key;
	for (size_t i = 0; i < nd; i++) {
		uint64_t h = htab__hash(&dead[i], sizeof(dead[i]));

		e = htab__find(t->codes, &dead[i], sizeof(dead[i]), h);
		if (!e)
			continue;
		free_code(t, e->val);
		htab__delete(t->codes, &dead[i], sizeof(dead[i]), h);
		t->deleted++;
		freed++;
	}
	/* snapshots of processes that exited or exec'd */
	nd = 0;
	it = 0;
	free(dead);
	dead = malloc((htab__count(t->snaps) + 1) * sizeof(*dead));
	if (!dead)
		goto out;
	while ((e = htab__next(t->snaps, &it)))
		if (code_dead(t, e->key))
			dead[nd++] = *(const struct code_key *)e->key;
	for (size_t i = 0; i < nd; i++)
		free_snap(take_snap(t, &dead[i]));
	it = 0;
	while ((e = htab__next(t->procs, &it)))
		if (((struct pyp *)(uintptr_t)e->val)->gone)
			gone[ng++] = *(const uint32_t *)e->key;
	for (size_t i = 0; i < ng; i++) {
		struct pyp *pp = pyp_of(t, gone[i], false);

		if (!pp)
			continue;
		free(pp->tids);
		free(pp);
		htab__delete(t->procs, &gone[i], sizeof(gone[i]),
			     htab__hash(&gone[i], sizeof(gone[i])));
		t->deleted++;
	}
	/* deleted keys' copies live as long as the table: rebuild both when they dominate */
	if (t->deleted > 1024 && t->deleted > htab__count(t->codes) + htab__count(t->procs)) {
		struct htab *nc = htab__new(htab__count(t->codes) * 2, HTAB_COPY_KEYS);
		struct htab *np = htab__new(htab__count(t->procs) * 2, HTAB_COPY_KEYS);
		struct htab *src[2] = { t->codes, t->procs }, *dst[2] = { nc, np };
		struct htab_entry *f;
		bool ok = nc && np;

		for (int j = 0; ok && j < 2; j++) {
			it = 0;
			while (ok && (e = htab__next(src[j], &it))) {
				ok = htab__upsert(dst[j], e->key, e->klen, e->hash, &f) >= 0;
				if (ok)
					f->val = e->val;
			}
		}
		if (ok) {
			htab__free(t->codes);
			htab__free(t->procs);
			t->codes = nc;
			t->procs = np;
			t->deleted = 0;
		} else {
			htab__free(nc);
			htab__free(np);
		}
	}
out:
	free(dead);
	free(gone);
	return freed;
}

size_t pytrack__lines_held(const struct pytrack *t, uint64_t *evicted)
{
	if (evicted)
		*evicted = t->mb.evicted;
	return t->mb.used;
}
