// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --alloc: heap profiling. bpf/alloc.bpf.c samples malloc-family calls and
 * anonymous mmaps by bytes and sends the sampled ones (SAMPLE_ALLOC) and the
 * frees of sampled blocks (SAMPLE_FREE); this file turns them into four
 * values per stack:
 *
 *   alloc_objects, alloc_space   everything allocated during the run
 *   inuse_objects, inuse_space   what was still allocated at the end (or when
 *                                its process exited: the leak view)
 *   peak_space                   what each stack held when the total peaked
 *   finalize_space               Python: what was allocated when Py_FinalizeEx
 *                                was entered (a uprobe on it, SAMPLE_HEAP_MARK)
 *
 * each sample weighted by 1/P(sampled) = 1/(1 - exp(-size/rate)), so that
 * the sums are unbiased estimates (exact with --alloc-rate 1). Weights are
 * summed in doubles per stack and rounded once at the end.
 *
 * With -f chrome, each process's heap in use (the same estimate, summed over
 * its live blocks) is also a counter track, "heap in use", sampled at most
 * once per HEAP_COUNTER_NS per process (a burst of calls is one step; the
 * last value of a burst is written when the burst ends).
 *
 * Which file is the allocator: every file a target maps whose dynamic symbol
 * table defines malloc (glibc's libc.so.6; jemalloc, tcmalloc, mimalloc or
 * any other allocator when preloaded or linked), and a static executable
 * defining malloc in its symbol table. When a process maps two of them only
 * the one its calls bind to is called; a wrapper that forwards to the next
 * malloc is counted once because BPF ignores allocation calls nested in
 * another one of the same thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <libelf.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/timeline.h"
#include "aggregate/timeline_log.h"
#include "alloc.skel.h"
#include "collect/alloc.h"
#include "collect/alloc_cover.h"
#include "collect/inject.h"
#include "collect/recorder.h"
#include "collect/uprobes.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "proc/procmaps.h"
#include "unwind/needed.h"
#include "util/bpfmap.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/counters.h"
#include "util/log.h"
#include "util/selfpath.h"
#include "util/tfile.h"

/* Same layout as struct alloc_key in bpf/alloc.bpf.c (the live table's key). */
struct block_key {
	uint32_t pid;
	uint32_t pad;
	uint64_t addr;
};

/* A sampled block not freed yet. */
struct block {
	struct block_key key; /* the live htab borrows it */
	uint64_t time_ns;
	size_t stack;
	double objs, bytes;    /* its weights */
	uint32_t next_free;    /* free list, when not in use */
	uint8_t halves;	       /* peak_space: HALF_A | HALF_B, the halves of the sample it is in */
	uint8_t list;	       /* LIST_*: which allocation-order list it is on */
	uint32_t older, newer; /* the live blocks in allocation order (eviction) */
};

#define CHUNK_BITS 12
#define CHUNK	   (1u << CHUNK_BITS)
#define NO_BLOCK   UINT32_MAX

/* Per stack (indexed like the stack table) */
struct stack_acc {
	double a_objs, a_bytes; /* everything sampled from it */
	double i_objs, i_bytes; /* of which still held */
	uint64_t oldest_ns;	/* allocation time of the oldest block still held; 0: none */
	double l_bytes;		/* of which in live processes (exited ones' left out) */
	double p_bytes;		/* l_bytes when the run's total in use peaked */
	double la, lb;		/* l_bytes of the sample's halves A and B, by their own weights */
	double pa, pb;		/* lb when A's total peaked, la when B's did */
	double f_bytes;		/* held when its process entered Py_FinalizeEx */
	uint32_t nblocks;	/* live blocks (--continuous carries them over) */
};

struct exit_note {
	uint32_t pid;
	uint64_t time_ns;
};

/* -f chrome: one process's heap-in-use counter track. */
struct heap_track {
	double bytes;	   /* estimated bytes in use */
	uint64_t last_ts;  /* the last sample written; 0: none yet */
	uint64_t pend_ts;  /* a change not written yet (0: none) ... */
	double pend_bytes; /* ... and the value after it */
	double leaving;	   /* blocks of an exited image, summed before the step down */
};

#define HEAP_COUNTER_NS 1000000ULL

struct alloc_stats {
	uint64_t allocs, frees; /* records */
	uint64_t untracked;	/* blocks whose free BPF could not track */
	uint64_t replaced;	/* an address sampled again before its free was seen */
	uint64_t unmatched;	/* frees of addresses we did not know */
	uint64_t no_key;	/* allocation records rec__key refused */
	uint64_t not_ours;	/* -p: records of a sampler another bpfprof loaded */
	uint64_t exited_blocks; /* blocks still held when their process exited */
	double exited_bytes;
	uint64_t evicted;   /* the oldest live blocks, forgotten for room */
	uint64_t carried;   /* --continuous: live blocks carried into a new interval */
	uint64_t finalized; /* Python processes whose in-use at Py_FinalizeEx was kept */
	double finalized_bytes;
};

struct alloc {
	struct alloc_bpf *skel;
	struct uprobes *u;
	struct uprobes *pu; /* the preload library's probe points (-- CMD), else NULL */
	struct uprobe_spec pspecs[3];
	struct cover *cov;  /* -- CMD: which processes are covered, how (alloc_cover.h) */
	bool started;	    /* start() has decided how each -p target is covered */
	uint32_t *injected; /* -p: the processes the sampler was loaded into */
	size_t ninjected;
	bool ejected; /* their calls are put back (the list stays: records still to read) */
	uint64_t inject_failed;
	struct bpf_link *exec_link; /* -- CMD: alloc_exec, a target's exec */
	struct bpf_link *fork_link; /* -- CMD: alloc_fork, a fork of a process on uprobes */
	struct recorder *r;
	struct uprobes *fu; /* Py_FinalizeEx in libpython / python executables */
	struct uprobe_spec fspec;
	struct htab *finalized; /* pids whose in-use at Py_FinalizeEx was kept */
	struct uprobe_spec specs[24];
	size_t nspecs;
	int ix_aobj, ix_abytes, ix_iobj, ix_ibytes;

	struct htab *live; /* struct block_key -> block index */
	struct block **chunks;
	uint32_t nchunks, free_head;
	/* the live blocks in allocation order, per LIST_*; NO_BLOCK: empty */
	uint32_t oldest[2], newest[2];
	uint64_t nlive, nlist[2];
	struct htab *pid_blocks; /* pid -> blocks in live */

	struct stack_acc *acc;
	size_t nacc;

	struct exit_note *exits; /* processes gone, handled after the ring buffer */
	size_t nexits, cap_exits;

	uint64_t end_ns;
	struct timeline *tl; /* -f chrome, else NULL */
	struct htab *heap;   /* pid -> struct heap_track * (with tl) */
	uint64_t counters;   /* counter samples written */
	struct alloc_stats st;
	struct uprobes_stats ust; /* kept when the probes are gone */
	/* totals of the final values, for the summary (--continuous: alloc summed, in use last) */
	int64_t inuse_objs, inuse_bytes, alloc_bytes;
	size_t *carry_map; /* --continuous: old stack index -> new one, for live blocks */
	uint64_t inuse_stacks, live_blocks, oldest_ns;
	/* peak_space: the total of l_bytes, its highest value, and whether it is there now */
	double live_total, peak_total;
	bool at_peak;
	/* the same for the sample's halves (sampled runs: peak_leave) */
	double ta, tb, peak_a, peak_b;
	bool at_a, at_b;
	uint64_t rng;
	bool ending; /* the run is over: the command's exit counts too */
	int ix_peak, ix_final;
	int64_t peak_bytes, final_bytes;
};

static bool wanted(void)
{
	return env.ev_alloc;
}

/*
 * Set by alloc__preload_env() before CMD starts. preload_on: the library is
 * in CMD's environment (its descendants take it too); cmd_preloaded: CMD's
 * own calls reach it (else CMD is probed with uprobes before it runs).
 */
static bool preload_on, cmd_preloaded, cmd_own_malloc;
/*
 * -p: the processes get the sampler loaded into them (collect/inject.h);
 * one that cannot (static, no safe point, traced) is probed with uprobes.
 */
static bool inject_on;
/* the library passed by an fd CMD inherits (its path has a space or a colon), else -1 */
static int preload_fd = -1;

#define PRELOAD_LIB "libbpfprof_heap.so"

const char *alloc__preload_path(void)
{
	static char path[PATH_MAX + 64];

	return selfpath__lib(PRELOAD_LIB, path, sizeof(path));
}

static bool defines(Elf *e, uint32_t want, const char *sym);

/* CMD's file as execvp would find it, opened; -1 if not found. */
static int open_cmd(const char *cmd)
{
	const char *p = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return open(cmd, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	for (p = p ? p : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");
		int fd;

		if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, p, cmd) < (int)sizeof(buf) &&
		    !access(buf, X_OK) && (fd = open(buf, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) >= 0)
			return fd;
		p += len + (p[len] == ':');
	}
	return -1;
}

/*
 * Whether a preloaded malloc reaches CMD's calls: not in a static
 * executable (no interpreter), nor in one that defines malloc itself (it
 * comes first in the lookup order). Not an ELF file (a script): its
 * interpreter is assumed dynamic.
 */
static bool cmd_interposable(const char *cmd)
{
	int fd = open_cmd(cmd);
	bool interp = false, own;
	size_t phnum;
	Elf *e;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return fd >= 0;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &phnum)) {
		elf_end(e);
		close(fd);
		return true;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_INTERP)
			interp = true;
	}
	own = defines(e, SHT_DYNSYM, "malloc");
	elf_end(e);
	close(fd);
	cmd_own_malloc = interp && own;
	return interp && !own;
}

/*
 * LD_PRELOAD splits at spaces and colons: a library under "/opt/my tools/"
 * would be loaded as "tools/libbpfprof_heap.so" from the command's working
 * directory (issue 26). Such a path goes as /proc/self/fd/N, N an fd of the
 * library the command inherits (moved above the numbers programs use), which
 * the library takes over (BPFPROF_HEAP_FD).
 */
static int preload_entry(const char *lib, char *out, size_t len)
{
	struct rlimit rl;
	int fd, high = 1000;

	if (lib[0] == '/' && !strpbrk(lib, " \t\n:"))
		return snprintf(out, len, "%s", lib) < (int)len ? 0 : -ENAMETOOLONG;
	fd = open(lib, O_RDONLY); /* inherited by CMD: no O_CLOEXEC */
	if (fd < 0)
		return -errno;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur - 32 < high)
		high = (int)rl.rlim_cur - 32;
	if (high > fd) {
		int nfd = fcntl(fd, F_DUPFD, high);

		if (nfd >= 0) {
			close(fd);
			fd = nfd;
		}
	}
	preload_fd = fd;
	snprintf(out, len, "/proc/self/fd/%d", fd);
	return 0;
}

bool alloc__preload_env(void)
{
	const char *lib = alloc__preload_path(), *old = getenv("LD_PRELOAD");
	char rate[32], entry[PATH_MAX + 64], fdv[16], *v;

	if (!env.ev_alloc || !env.cmd_argv || !lib || env.alloc_uprobes)
		return false;
	if (preload_entry(lib, entry, sizeof(entry)))
		return false;
	/* first: the next malloc after it is the program's own choice (tcmalloc, jemalloc) */
	if (asprintf(&v, "%s%s%s", entry, old && *old ? ":" : "", old ? old : "") < 0)
		return false;
	snprintf(rate, sizeof(rate), "%llu", (unsigned long long)env.alloc_rate);
	snprintf(fdv, sizeof(fdv), "%d", preload_fd);
	if (setenv("LD_PRELOAD", v, 1) || setenv("BPFPROF_ALLOC_RATE", rate, 1) ||
	    (preload_fd >= 0 ? setenv("BPFPROF_HEAP_FD", fdv, 1) : unsetenv("BPFPROF_HEAP_FD"))) {
		free(v);
		return false;
	}
	free(v);
	preload_on = true;
	cmd_preloaded = cmd_interposable(env.cmd_argv[0]);
	if (!cmd_preloaded)
		pr_verbose("heap: %s cannot be interposed (static, or defines malloc): uprobes for "
			   "it, the preloaded sampler for what it starts",
			   env.cmd_argv[0]);
	pr_verbose("heap: in-process sampling, %s preloaded as %s", lib, entry);
	return true;
}

/* The preload path's probes go on the library alone, by path (match: none). */
static bool match_none(struct objfile *o, void *arg)
{
	(void)o;
	(void)arg;
	return false;
}

static struct block *block_at(struct alloc *a, uint32_t i)
{
	return &a->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
}

/*
 * The live blocks in allocation order, newest at the end, on two lists:
 * those of the uprobe path, whose frees BPF tracks in a table of
 * env.alloc_max_live entries (past it, the oldest is evicted first: a free
 * BPF could not see would otherwise keep a block forever), and those of the
 * preload library, which reports the free of every block it sampled (its
 * set grows): kept however many, so that --alloc-rate 1 is exact at any
 * number of live blocks (up to LIST_PRELOAD_MAX).
 */
#define LIST_UPROBES	 0
#define LIST_PRELOAD	 1
#define LIST_PRELOAD_MAX (1u << 26)

#define FOR_EACH_LIVE(a, i)            \
	for (int l_ = 0; l_ < 2; l_++) \
		for (uint32_t i = (a)->oldest[l_]; i != NO_BLOCK; i = block_at((a), i)->newer)

static void order_link(struct alloc *a, uint32_t i)
{
	struct block *b = block_at(a, i);
	int l = b->list;

	b->older = a->newest[l];
	b->newer = NO_BLOCK;
	if (a->newest[l] != NO_BLOCK)
		block_at(a, a->newest[l])->newer = i;
	else
		a->oldest[l] = i;
	a->newest[l] = i;
	a->nlive++;
	a->nlist[l]++;
}

static void order_unlink(struct alloc *a, uint32_t i)
{
	struct block *b = block_at(a, i);
	int l = b->list;

	if (b->older != NO_BLOCK)
		block_at(a, b->older)->newer = b->newer;
	else
		a->oldest[l] = b->newer;
	if (b->newer != NO_BLOCK)
		block_at(a, b->newer)->older = b->older;
	else
		a->newest[l] = b->older;
	a->nlive--;
	a->nlist[l]--;
}

static int block_new(struct alloc *a, uint32_t *out)
{
	if (a->free_head == NO_BLOCK) {
		struct block **c = realloc(a->chunks, (a->nchunks + 1) * sizeof(*c));
		uint32_t base = a->nchunks << CHUNK_BITS;

		if (!c)
			return -ENOMEM;
		a->chunks = c;
		c[a->nchunks] = calloc(CHUNK, sizeof(struct block));
		if (!c[a->nchunks])
			return -ENOMEM;
		for (uint32_t i = 0; i < CHUNK; i++)
			c[a->nchunks][i].next_free = i + 1 < CHUNK ? base + i + 1 : NO_BLOCK;
		a->free_head = base;
		a->nchunks++;
	}
	*out = a->free_head;
	a->free_head = block_at(a, *out)->next_free;
	return 0;
}

static struct stack_acc *acc_at(struct alloc *a, size_t stack)
{
	if (stack >= a->nacc) {
		size_t n = a->nacc ? a->nacc : 1024;
		struct stack_acc *p;

		if (stack > UINT32_MAX)
			return NULL; /* SIZE_MAX: a block whose stack is gone */
		while (n <= stack)
			n *= 2;
		p = realloc(a->acc, n * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + a->nacc, 0, (n - a->nacc) * sizeof(*p));
		a->acc = p;
		a->nacc = n;
	}
	return &a->acc[stack];
}

static void pid_count(struct alloc *a, uint32_t pid, int delta)
{
	struct htab_entry *e;

	if (htab__upsert(a->pid_blocks, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e) >= 0)
		e->val += delta;
}

static void heap_write(struct alloc *a, uint32_t pid, uint64_t ts, double bytes)
{
	struct tl_arg v = { .key = "bytes", .num = bytes > 0.5 ? llround(bytes) : 0 };

	if (!timeline__add_counter(a->tl, pid, ts, "heap in use", &v, 1))
		a->counters++;
}

/*
 * pid's heap in use changed by delta bytes at ts (-f chrome). Written now
 * when the last sample is HEAP_COUNTER_NS old, else kept pending
 * (heap_flush). Times never go back on the track.
 */
static void heap_change(struct alloc *a, uint32_t pid, const char *pcomm, uint64_t ts, double delta)
{
	struct htab_entry *e;
	struct heap_track *t;
	int ret;

	if (!a->tl)
		return;
	ret = htab__upsert(a->heap, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
	if (ret < 0)
		return;
	if (ret == 1) {
		if (!(t = calloc(1, sizeof(*t)))) {
			htab__delete(a->heap, &pid, sizeof(pid), e->hash);
			return;
		}
		e->val = (uintptr_t)t;
		if (pcomm) {
			char name[17];

			memcpy(name, pcomm, 16);
			name[16] = '\0';
			timeline__set_process_name(a->tl, pid, name);
		}
	}
	t = (struct heap_track *)(uintptr_t)e->val;
	t->bytes += delta;
	if (ts < t->last_ts)
		ts = t->last_ts;
	if (ts < t->pend_ts)
		ts = t->pend_ts;
	if (t->last_ts && ts - t->last_ts < HEAP_COUNTER_NS) {
		t->pend_ts = ts;
		t->pend_bytes = t->bytes;
		return;
	}
	heap_write(a, pid, ts, t->bytes);
	t->last_ts = ts;
	t->pend_ts = 0;
}

static struct heap_track *heap_track_of(struct alloc *a, uint32_t pid)
{
	struct htab_entry *e =
		htab__find(a->heap, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	return e ? (struct heap_track *)(uintptr_t)e->val : NULL;
}

/* Write pending values older than HEAP_COUNTER_NS (all of them: now == UINT64_MAX). */
static void heap_flush(struct alloc *a, uint64_t now)
{
	struct htab_entry *e;
	size_t it = 0;

	while (a->heap && (e = htab__next(a->heap, &it))) {
		struct heap_track *t = (struct heap_track *)(uintptr_t)e->val;

		if (!t->pend_ts || (now != UINT64_MAX && now - t->pend_ts < HEAP_COUNTER_NS))
			continue;
		heap_write(a, *(const uint32_t *)e->key, t->pend_ts, t->pend_bytes);
		t->last_ts = t->pend_ts;
		t->pend_ts = 0;
	}
}

/*
 * peak_space. Exact (--alloc-rate 1): the stacks' in-use as it stands when
 * the total is at its highest, kept before it goes down, once per climb to
 * a new high (at its top), not per block.
 *
 * Sampled: the highest value of a noisy estimate is biased up (a program
 * holding exactly 100 MiB while replacing 64 KiB blocks read 124-128 MiB:
 * the running estimate's maximum over its noise). So the moment of the
 * peak and the values at it come from independent halves of the sample:
 * the sampled bytes are split as two Poisson samplers at twice the rate
 * would have taken them (a block is in half A with P = 1 - e^(-s/2R), in
 * B with the same, independently: given that it was sampled at all, in A
 * only, B only or both), each half weighted by its own probabilities. When
 * A's total peaks, B's stacks are kept (unbiased for that moment: B's
 * noise is not what made A peak), and A's when B's total does; each
 * stack's peak_space is the mean of the two. A huge block is in both
 * halves (P ~ 1), so a brief spike of one is not lost to the split.
 */
#define HALF_A 1
#define HALF_B 2

static bool peak_exact(void)
{
	return env.alloc_rate <= 1;
}

static double rng_unit(struct alloc *a)
{
	if (!a->rng)
		a->rng = mono_ns() ^ 0x9e3779b97f4a7c15ULL;
	a->rng ^= a->rng >> 12;
	a->rng ^= a->rng << 25;
	a->rng ^= a->rng >> 27;
	return ((a->rng * 0x2545f4914f6cdd1dULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* A block's weight in one half: size / P(a half samples it). */
static double half_weight(double size)
{
	double s = size > 0 ? size : 1.0;

	return size / -expm1(-s / (2.0 * (double)env.alloc_rate));
}

/* The halves a sampled block of size bytes is in. */
static uint8_t halves_draw(struct alloc *a, double size)
{
	double s = size > 0 ? size : 1.0, r = (double)env.alloc_rate;
	double ph = -expm1(-s / (2 * r)), p = -expm1(-s / r), u = rng_unit(a);

	if (u < ph * ph / p)
		return HALF_A | HALF_B;
	return u < ph * ph / p + ph * (1 - ph) / p ? HALF_A : HALF_B;
}

/*
 * A total is about to go down from its highest: keep what is kept at its
 * peak. halves: which halves' totals go down (HALF_*); the run's total
 * always does. Only a total's own fall ends its peak, so that the moment
 * kept for A is chosen by A's blocks alone (not by a fall of B's, which
 * would pick moments where B is high).
 */
static void peak_leave_some(struct alloc *a, uint8_t halves)
{
	if (a->at_peak) {
		for (size_t i = 0; i < a->nacc; i++)
			a->acc[i].p_bytes = a->acc[i].l_bytes;
		a->at_peak = false;
	}
	if (a->at_a && (halves & HALF_A)) {
		for (size_t i = 0; i < a->nacc; i++)
			a->acc[i].pa = a->acc[i].lb;
		a->at_a = false;
	}
	if (a->at_b && (halves & HALF_B)) {
		for (size_t i = 0; i < a->nacc; i++)
			a->acc[i].pb = a->acc[i].la;
		a->at_b = false;
	}
}

/* Every peak still standing is kept (the end of a run or an interval). */
static void peak_leave(struct alloc *a)
{
	peak_leave_some(a, HALF_A | HALF_B);
}

/* A live block joins (sign 1) or leaves (-1) the totals the peak follows. */
static void peak_move(struct alloc *a, struct stack_acc *s, const struct block *b, int sign)
{
	double w = 0;

	a->live_total += sign * b->bytes;
	if (s)
		s->l_bytes += sign * b->bytes;
	if (b->halves)
		w = sign * half_weight(b->bytes / b->objs); /* size = bytes / objs */
	if (b->halves & HALF_A) {
		a->ta += w;
		if (s)
			s->la += w;
	}
	if (b->halves & HALF_B) {
		a->tb += w;
		if (s)
			s->lb += w;
	}
	if (sign < 0)
		return;
	if (a->live_total > a->peak_total) {
		a->peak_total = a->live_total;
		a->at_peak = true;
	}
	if (a->ta > a->peak_a) {
		a->peak_a = a->ta;
		a->at_a = true;
	}
	if (a->tb > a->peak_b) {
		a->peak_b = a->tb;
		a->at_b = true;
	}
}

/* A stack's peak_space: exact, or the cross-fitted mean (above). */
static double peak_of(const struct stack_acc *s)
{
	return peak_exact() ? s->p_bytes : (s->pa + s->pb) / 2;
}

/*
 * Drop a block from the live table. freed: its memory was given back
 * (subtract it from in-use); else its process ended with it (it stays in
 * in-use as leaked, and counts for the stack's oldest block).
 */
static void block_drop(struct alloc *a, uint32_t i, bool freed, uint64_t ts)
{
	struct block *b = block_at(a, i);
	struct stack_acc *s = acc_at(a, b->stack);

	if (freed) /* (a process's exit is one step: handle_exits) */
		heap_change(a, b->key.pid, NULL, ts, -b->bytes);
	peak_leave_some(a, b->halves);
	peak_move(a, s, b, -1);
	if (s)
		s->nblocks--;
	if (s && freed) {
		s->i_objs -= b->objs;
		s->i_bytes -= b->bytes;
	} else if (s) {
		if (!s->oldest_ns || b->time_ns < s->oldest_ns)
			s->oldest_ns = b->time_ns;
		a->st.exited_blocks++;
		a->st.exited_bytes += b->bytes;
	}
	htab__delete(a->live, &b->key, sizeof(b->key), htab__hash(&b->key, sizeof(b->key)));
	pid_count(a, b->key.pid, -1);
	order_unlink(a, i);
	b->next_free = a->free_head;
	a->free_head = i;
}

/*
 * The live table is full (env.alloc_max_live blocks, the BPF table's size):
 * the oldest block is forgotten, out of in-use as if freed, and counted. A
 * long-running agent keeps what is recent; blocks whose free went unseen
 * cannot pile up.
 */
static void evict_oldest(struct alloc *a, int list, uint64_t ts)
{
	uint32_t i = a->oldest[list];

	if (i == NO_BLOCK)
		return;
	bpf_map_delete_elem(bpf_map__fd(a->skel->maps.alloc_live), &block_at(a, i)->key);
	block_drop(a, i, true, ts);
	a->st.evicted++;
}

static struct htab_entry *live_find(struct alloc *a, uint32_t pid, uint64_t addr)
{
	struct block_key k = { .pid = pid, .addr = addr };

	return htab__find(a->live, &k, sizeof(k), htab__hash(&k, sizeof(k)));
}

/* The unbiased weights of a sampled allocation of size bytes. */
static void weights(uint64_t size, double *objs, double *bytes)
{
	double s = size ? (double)size : 1.0, p;

	if (env.alloc_rate <= 1) {
		*objs = 1.0;
		*bytes = (double)size;
		return;
	}
	/* P(an allocation of s bytes holds a sample point) */
	p = -expm1(-s / (double)env.alloc_rate);
	*objs = 1.0 / p;
	*bytes = (double)size / p;
}

static void on_alloc(struct recorder *r, struct alloc *a, const struct prof_sample_hdr *h,
		     const void *data, size_t size)
{
	uint64_t bytes = h->aux1 & ALLOC_SIZE_MASK;
	struct stack_key *k = rec__key(r, data, size);
	struct htab_entry *e;
	struct stack_acc *s;
	struct block *b;
	double wo, wb;
	size_t stack;
	uint32_t i;
	int list;

	a->st.allocs++;
	/* rec__key may read the side band, which may note exits: nothing is held across it */
	if (!k) {
		a->st.no_key++;
		return;
	}
	if (stacks__intern(r->stacks, k, &stack) || !(s = acc_at(a, stack))) {
		r->st.agg_failed++;
		return;
	}
	weights(bytes, &wo, &wb);
	s->a_objs += wo;
	s->a_bytes += wb;
	if (h->aux1 & ALLOC_F_UNTRACKED) {
		a->st.untracked++; /* counted as allocated, never as in use */
		return;
	}
	e = live_find(a, h->pid, h->aux0);
	if (e) {
		/* its free went unseen (a path we do not probe, or the process exec'd) */
		a->st.replaced++;
		block_drop(a, (uint32_t)e->val, true, h->time_ns);
	}
	list = h->aux1 & ALLOC_F_PRELOAD ? LIST_PRELOAD : LIST_UPROBES;
	while (a->nlist[list] >= (list == LIST_PRELOAD ? LIST_PRELOAD_MAX : env.alloc_max_live) &&
	       a->oldest[list] != NO_BLOCK)
		evict_oldest(a, list, h->time_ns);
	if (block_new(a, &i)) {
		r->st.agg_failed++;
		return;
	}
	b = block_at(a, i);
	*b = (struct block){ .key = { .pid = h->pid, .addr = h->aux0 },
			     .time_ns = h->time_ns,
			     .stack = stack,
			     .objs = wo,
			     .bytes = wb,
			     .halves = peak_exact() ? 0 : halves_draw(a, (double)bytes),
			     .list = (uint8_t)list };
	if (htab__upsert(a->live, &b->key, sizeof(b->key), htab__hash(&b->key, sizeof(b->key)),
			 &e) < 0) {
		b->next_free = a->free_head;
		a->free_head = i;
		r->st.agg_failed++;
		return;
	}
	e->val = i;
	pid_count(a, h->pid, 1);
	order_link(a, i);
	s->nblocks++;
	s->i_objs += wo;
	s->i_bytes += wb;
	peak_move(a, s, b, 1); /* totals only go up: every peak stands */
	heap_change(a, h->pid, h->pcomm, h->time_ns, wb);
}

static void on_free(struct alloc *a, const struct prof_sample_hdr *h)
{
	struct htab_entry *e = live_find(a, h->pid, h->aux0);

	a->st.frees++;
	if (!e) {
		a->st.unmatched++; /* e.g. its allocation record was refused or lost */
		return;
	}
	block_drop(a, (uint32_t)e->val, true, h->time_ns);
}

/*
 * A Python process entered Py_FinalizeEx: what it holds now is what the
 * program held, before the interpreter frees it (finalize_space). The first
 * time per process image.
 */
static void on_mark(struct alloc *a, const struct prof_sample_hdr *h)
{
	uint32_t pid = h->pid;
	struct htab_entry *e;

	if (h->aux0 != HEAP_MARK_PY_FINALIZE ||
	    htab__upsert(a->finalized, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e) != 1)
		return;
	a->st.finalized++;
	FOR_EACH_LIVE(a, i)
	{
		struct block *b = block_at(a, i);
		struct stack_acc *s;

		if (b->key.pid != pid || !(s = acc_at(a, b->stack)))
			continue;
		s->f_bytes += b->bytes;
		a->st.finalized_bytes += b->bytes;
	}
}

static bool pid_injected(const struct alloc *a, uint32_t pid);

static void on_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
		      const void *data, size_t size)
{
	struct alloc *a = priv;

	/*
	 * -p: a process on uprobes may have a sampler another bpfprof run
	 * loaded (it has it injected, or was killed before its eject): its
	 * records would count the calls twice.
	 */
	if (h->kind == SAMPLE_ALLOC && inject_on && (h->aux1 & ALLOC_F_PRELOAD) &&
	    !pid_injected(a, h->pid)) {
		a->st.not_ours++;
		return;
	}
	if (h->kind == SAMPLE_ALLOC)
		on_alloc(r, a, h, data, size);
	else if (h->kind == SAMPLE_HEAP_MARK &&
		 (h->aux0 == HEAP_MARK_EXEC || h->aux0 == HEAP_MARK_PRELOAD ||
		  h->aux0 == HEAP_MARK_FORK)) {
		if (!a->cov) /* -p: the injected sampler's hello, nothing to decide */
			return;
		if (h->aux0 == HEAP_MARK_EXEC)
			cover__exec(a->cov, h->pid, h->pcomm, h->time_ns, h->aux1);
		else if (h->aux0 == HEAP_MARK_PRELOAD)
			cover__hello(a->cov, h->pid, h->aux1, h->time_ns);
		else
			cover__fork(a->cov, h->pid, (uint32_t)h->aux1, h->time_ns);
	} else if (h->kind == SAMPLE_HEAP_MARK)
		on_mark(a, h);
	else
		on_free(a, h);
}

/*
 * Processes that exited or exec'd: their blocks were never freed, so they
 * stay in in-use (what the process leaked), leave the live tables, and their
 * addresses may be reused by the pid's next image. Run after the ring
 * buffer was drained, so that frees made before the exit are in.
 */
static void handle_exits(struct recorder *r, struct alloc *a)
{
	struct htab *gone;
	struct htab_entry *e;
	uint32_t *drop = NULL;
	size_t n = 0, cap = 0, it = 0;
	int fd = bpf_map__fd(a->skel->maps.alloc_live);
	bool any = false;
	size_t kept = 0;

	if (!a->nexits)
		return;
	gone = htab__new(a->nexits, HTAB_COPY_KEYS);
	for (size_t i = 0; gone && i < a->nexits; i++) {
		uint32_t pid = a->exits[i].pid;
		struct htab_entry *c =
			htab__find(a->pid_blocks, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

		/*
		 * -- CMD: the run ends when the command does; until then its
		 * blocks stay live, so that with --continuous the last interval
		 * (not one that happened to end between its exit and the run's)
		 * holds what it had when it exited.
		 */
		if (r->child > 0 && pid == (uint32_t)r->child && !a->ending) {
			a->exits[kept++] = a->exits[i];
			continue;
		}
		if (!c || !c->val)
			continue;
		if (htab__upsert(gone, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e) >= 0) {
			e->val = a->exits[i].time_ns;
			any = true;
		}
	}
	a->nexits = kept;
	if (!any) {
		htab__free(gone);
		return;
	}
	while ((e = htab__next(a->live, &it))) {
		const struct block_key *k = e->key;
		struct block *b = block_at(a, (uint32_t)e->val);
		struct htab_entry *g = htab__find(gone, &k->pid, sizeof(k->pid),
						  htab__hash(&k->pid, sizeof(k->pid)));

		if (!g || b->time_ns > g->val)
			continue; /* allocated by the pid's next image */
		if (n == cap) {
			uint32_t *d = realloc(drop, (cap = cap ? cap * 2 : 256) * sizeof(*d));

			if (!d)
				break;
			drop = d;
		}
		drop[n++] = (uint32_t)e->val;
	}
	for (size_t i = 0; i < n; i++) {
		struct block *b = block_at(a, drop[i]);
		struct heap_track *t = a->heap ? heap_track_of(a, b->key.pid) : NULL;

		bpf_map_delete_elem(fd, &b->key);
		if (t) /* summed: the track falls in one step below */
			t->leaving += b->bytes;
		block_drop(a, drop[i], false, 0);
	}
	/* their memory went with the processes: each track falls in one step at the exit */
	it = 0;
	while (a->heap && (e = htab__next(gone, &it))) {
		uint32_t pid = *(const uint32_t *)e->key;
		struct heap_track *t = heap_track_of(a, pid);
		double left = t ? t->leaving : 0;

		if (!left)
			continue;
		t->leaving = 0;
		heap_change(a, pid, NULL, e->val, -left);
	}
	free(drop);
	htab__free(gone);
}

static void note_exit(struct alloc *a, uint32_t pid, uint64_t time_ns)
{
	if (a->nexits == a->cap_exits) {
		size_t cap = a->cap_exits ? a->cap_exits * 2 : 64;
		struct exit_note *p = realloc(a->exits, cap * sizeof(*p));

		if (!p)
			return;
		a->exits = p;
		a->cap_exits = cap;
	}
	a->exits[a->nexits++] = (struct exit_note){ .pid = pid, .time_ns = time_ns };
}

static uint32_t parent_of(uint32_t pid);

static void on_proc(struct recorder *r, void *priv, uint32_t pid, int change)
{
	struct alloc *a = priv;
	struct proc *p;

	if (change == PROC_EXITED || change == PROC_EXECED) /* a new image may finalize again */
		htab__delete(a->finalized, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	if (change == PROC_EXITED) {
		note_exit(a, pid, mono_ns());
		if (a->u)
			uprobes__forget(a->u, pid);
		if (a->fu)
			uprobes__forget(a->fu, pid);
		if (a->cov) {
			cover__exit(a->cov, pid, mono_ns());
			bpf_map_delete_elem(bpf_map__fd(a->skel->maps.alloc_upids), &pid);
		}
		return;
	}
	if (change == PROC_FORKED && a->cov && rec__is_target(r, pid))
		cover__fork(a->cov, parent_of(pid), pid, mono_ns());
	if (change == PROC_EXECED && (p = proctab__lookup(r->procs, pid, 0)))
		note_exit(a, pid, p->start_ns ? p->start_ns : mono_ns()); /* the old image's end */
	if (!rec__is_target(r, pid))
		return;
	p = proctab__lookup(r->procs, pid, 0);
	if (a->fu)
		uprobes__scan(a->fu, p);
	/*
	 * -- CMD: the processes on uprobes (the others have the sampler); -p:
	 * those the sampler could not be loaded into; -a: all
	 */
	if (a->u && (a->cov ? cover__on_uprobes(a->cov, pid) : !pid_injected(a, pid)) &&
	    (!inject_on || a->started))
		uprobes__scan(a->u, p);
}

static bool pid_injected(const struct alloc *a, uint32_t pid)
{
	for (size_t i = 0; i < a->ninjected; i++)
		if (a->injected[i] == pid)
			return true;
	return false;
}

/* pid's parent, from /proc/PID/stat; 0 if gone. */
static uint32_t parent_of(uint32_t pid)
{
	char path[64], buf[512], *close_paren;
	unsigned ppid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	close_paren = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!close_paren || sscanf(close_paren + 1, " %*c %u", &ppid) != 1)
		return 0;
	return ppid;
}

static void poll_hook(struct recorder *r, void *priv)
{
	struct alloc *a = priv;

	handle_exits(r, a);
	heap_flush(a, mono_ns());
	if (a->cov)
		cover__poll(a->cov, mono_ns());
}

/* Whether sym is a defined function in the ELF symbol table of section type want. */
static bool defines(Elf *e, uint32_t want, const char *sym)
{
	return !uprobes__elf_func(e, want, sym, NULL);
}

/* The allocator rule (top of file): exports malloc, or is static and defines it. */
static bool fd_is_allocator(int fd)
{
	bool dynamic = false, yes;
	size_t phnum;
	Elf *e;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE)
		return false;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return false;
	if (elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &phnum)) {
		elf_end(e);
		return false;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_DYNAMIC)
			dynamic = true;
	}
	yes = dynamic ? defines(e, SHT_DYNSYM, "malloc") : defines(e, SHT_SYMTAB, "malloc");
	elf_end(e);
	return yes;
}

/* A Python runtime: libpython, or a python executable linked with it statically. */
static bool is_python_runtime(struct objfile *o, void *arg)
{
	bool yes = false;
	Elf *e;

	(void)arg;
	if (objfile__fd(o) < 0 || elf_version(EV_CURRENT) == EV_NONE)
		return false;
	e = elf_begin(o->fd, ELF_C_READ, NULL);
	if (e && elf_kind(e) == ELF_K_ELF)
		yes = defines(e, SHT_DYNSYM, "Py_FinalizeEx");
	elf_end(e);
	if (yes)
		pr_debug("heap: %s has Py_FinalizeEx", o->path);
	return yes;
}

static bool is_allocator(struct objfile *o, void *arg)
{
	(void)arg;
	if (o->name && !strcmp(o->name, PRELOAD_LIB)) /* it forwards to the real one */
		return false;
	if (!fd_is_allocator(objfile__fd(o)))
		return false;
	pr_debug("heap: %s provides malloc", o->path);
	return true;
}

/*
 * -- CMD on the uprobe path: an executable that is its own allocator
 * (static) is probed by path before it runs; the held child is still a copy
 * of bpfprof, so scanning it finds only bpfprof's libc.
 */
static void probe_cmd_file(struct alloc *a)
{
	char link[64], path[PATH_MAX];
	int fd = open_cmd(env.cmd_argv[0]);

	if (fd < 0)
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (fd_is_allocator(fd) && realpath(link, path) && !uprobes__add_path(a->u, path))
		pr_verbose("heap: %s probed before it runs", path);
	close(fd);
}

static void probe_path(struct recorder *r, struct alloc *a, const char *path, uint32_t pid)
{
	struct objfile *o;
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	o = objtab__get(r->objs, major(st.st_dev), minor(st.st_dev), st.st_ino, path, getpid(), 0,
			0);
	if (o)
		uprobes__attach_obj(a->u, o, pid);
}

/*
 * The allocators a process will map (its executable's DT_NEEDED libraries,
 * transitively, and LD_PRELOAD), probed for pid before it maps them, so
 * that its first allocations are seen: the held -- CMD child (scanning it
 * finds only what bpfprof itself maps: libc), a program linked against
 * tcmalloc, a child exec'd with LD_PRELOAD=tcmalloc (issue 25). In the
 * host's root only (needed__files resolves there). A later scan of the same
 * files (same objects, by device and inode) attaches nothing twice.
 */
static void probe_needed(struct recorder *r, struct alloc *a, const char *exe, const char *preload,
			 uint32_t pid)
{
	char **files, *list, *tok, *save;
	size_t n;

	if (!needed__files(exe, &files, &n)) {
		for (size_t i = 0; i < n; i++)
			probe_path(r, a, files[i], pid);
		needed__free(files, n);
	}
	/* LD_PRELOAD: the entries with a slash, as ld.so takes them */
	if (!preload || !(list = strdup(preload)))
		return;
	for (tok = strtok_r(list, " :", &save); tok; tok = strtok_r(NULL, " :", &save))
		if (strchr(tok, '/'))
			probe_path(r, a, tok, pid);
	free(list);
}

static void probe_cmd_libraries(struct recorder *r, struct alloc *a)
{
	probe_needed(r, a, env.cmd_argv[0], getenv("LD_PRELOAD"), (uint32_t)r->child);
}

struct fallback_scan {
	struct recorder *r;
	struct alloc *a;
	uint32_t pid;
	bool late;
};

static int fallback_map(const struct procmaps_entry *e, void *ctx)
{
	struct fallback_scan *fs = ctx;
	uint64_t before = uprobes__stats(fs->a->u)->links;
	struct objfile *o;

	if (!e->path[0] || e->path[0] == '[')
		return 0;
	o = objtab__get(fs->r->objs, e->dev_major, e->dev_minor, e->ino, e->path, fs->pid, e->start,
			e->end);
	if (o)
		uprobes__attach_obj(fs->a->u, o, fs->pid);
	if (uprobes__stats(fs->a->u)->links > before)
		fs->late = true; /* an allocator it maps already */
	return 0;
}

/* The process's LD_PRELOAD when it was exec'd (its /proc/PID/environ), or NULL. */
static char *exec_preload(uint32_t pid)
{
	static char buf[128 * 1024];
	char path[64];
	size_t got = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	for (size_t at = 0; at < got; at += strlen(buf + at) + 1)
		if (!strncmp(buf + at, "LD_PRELOAD=", 11))
			return buf + at + 11;
	return NULL;
}

/* Whether pid's root is ours (a chroot or a container's is not). */
static bool same_root(uint32_t pid)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%u/root", pid);
	return !stat(path, &a) && !stat("/", &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Coverage's fallback (alloc_cover.h): probe pid with uprobes now: the
 * allocators it maps already (read from /proc: the side band may be behind
 * an exec), and those it will map. 1: an allocator was mapped before the
 * probes (its first calls may be missing), 0, or -ESRCH: it is gone.
 */
static int cover_fallback(void *ctx, uint32_t pid)
{
	struct alloc *a = ctx;
	struct fallback_scan fs = { .r = a->r, .a = a, .pid = pid };
	char path[64], exe[PATH_MAX];
	ssize_t n;
	FILE *f;

	if (!a->u)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ESRCH; /* gone, or a zombie */
	exe[n] = '\0';
	/* what it maps now first: whether an allocator was there before the probes */
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	procmaps__for_each_exec(f, fallback_map, &fs);
	fclose(f);
	if (same_root(pid))
		probe_needed(a->r, a, exe, exec_preload(pid), pid);
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return -ESRCH;
	{
		uint8_t one = 1; /* its forks are reported at once (alloc_fork) */

		bpf_map_update_elem(bpf_map__fd(a->skel->maps.alloc_upids), &pid, &one, BPF_ANY);
	}
	return fs.late;
}

/*
 * Where to put free's probe. The kernel emulates a probed push, jump, call
 * or nop, but single-steps anything else out of line, which costs two more
 * traps: measured on a VM, 27 us per call against 1.2 us for malloc's
 * emulated push. glibc's free begins with `test %rdi,%rdi; je` (free(NULL)):
 * the probe goes on the conditional jump, which is emulated, where the
 * pointer argument and the stack are still untouched. Anything else stays
 * at the entry. An optional endbr64 before the test is skipped as well.
 */
static int place_free(int fd, uint64_t *off)
{
	uint8_t c[16];
	size_t i = 0;

	if (pread(fd, c, sizeof(c), *off) != sizeof(c))
		return -EIO;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		i = 4;
	if ((c[i] & 0xf8) == 0x48) /* REX.W (+B/R for r8-r15) */
		i++;
	/* test reg,reg: 85 /r with mod 3 and the same register twice */
	if (c[i] != 0x85 || (c[i + 1] >> 6) != 3 || ((c[i + 1] >> 3) & 7) != (c[i + 1] & 7))
		return -ENOENT;
	i += 2;
	/* jcc rel8 (7x) or jcc rel32 (0f 8x) */
	if ((c[i] & 0xf0) != 0x70 && !(c[i] == 0x0f && (c[i + 1] & 0xf0) == 0x80))
		return -ENOENT;
	*off += i;
	return 0;
}

static void add_spec(struct alloc *a, const char *func, struct bpf_program *entry, bool ret,
		     bool optional)
{
	a->specs[a->nspecs++] =
		(struct uprobe_spec){ .func = func,
				      .prog = entry,
				      .optional = optional,
				      .place = entry == a->skel->progs.alloc_free ? place_free
										  : NULL };
	if (ret)
		a->specs[a->nspecs++] = (struct uprobe_spec){ .func = func,
							      .prog = a->skel->progs.alloc_ret,
							      .retprobe = true,
							      .optional = optional };
}

static const char *const metric_type[] = {
	[ALLOC_INUSE_SPACE] = "inuse_space", [ALLOC_INUSE_OBJECTS] = "inuse_objects",
	[ALLOC_ALLOC_SPACE] = "alloc_space", [ALLOC_ALLOC_OBJECTS] = "alloc_objects",
	[ALLOC_PEAK_SPACE] = "peak_space",   [ALLOC_FINALIZE_SPACE] = "finalize_space",
};

/* Open, set up and load the heap object (*out: NULL when it did not open). 0 or -errno. */
static int alloc_open_load(struct recorder *r, struct alloc_bpf **out, int attempt)
{
	struct alloc_bpf *s;
	int err;

	s = *out = alloc_bpf__open_opts(rec__open_opts(r, attempt));
	if (!s)
		return -errno;
	REC_SET_COMMON_RODATA(s->rodata);
	s->rodata->alloc_rate = env.alloc_rate;
	s->rodata->alloc_want_user = !env.no_user;
	s->rodata->self_tgid = getpid();
	bpf_map__set_max_entries(s->maps.alloc_live, env.alloc_max_live);
	/*
	 * The preload library's programs only with it (each side's walker is
	 * tens of thousands of verified instructions, issue 17).
	 */
	{
		struct bpf_program *up[] = { s->progs.alloc_ret,      s->progs.alloc_malloc,
					     s->progs.alloc_pvalloc,  s->progs.alloc_calloc,
					     s->progs.alloc_realloc,  s->progs.alloc_reallocarray,
					     s->progs.alloc_memalign, s->progs.alloc_posix_memalign,
					     s->progs.alloc_mmap,     s->progs.alloc_free };

		/*
		 * -- CMD on the preload path loads the uprobe path too: a process
		 * the sampler does not reach falls back to it at once (coverage).
		 */
		for (size_t i = 0; i < sizeof(up) / sizeof(up[0]); i++)
			bpf_program__set_autoload(up[i], true);
		inject_on = env.npids && !env.cmd_argv && !env.all && !env.alloc_uprobes &&
			    alloc__preload_path();
		bpf_program__set_autoload(s->progs.alloc_preload_sampled, preload_on || inject_on);
		bpf_program__set_autoload(s->progs.alloc_preload_freed, preload_on || inject_on);
		bpf_program__set_autoload(s->progs.alloc_preload_hello, preload_on || inject_on);
		bpf_program__set_autoload(s->progs.alloc_exec, env.cmd_argv != NULL);
		bpf_program__set_autoload(s->progs.alloc_fork, env.cmd_argv != NULL);
	}
	err = rec__share_maps(r, s->obj);
	if (err)
		return err;
	return alloc_bpf__load(s);
}

static int setup(struct recorder *r, void **priv)
{
	struct alloc *a = calloc(1, sizeof(*a));
	struct alloc_bpf *s;
	int err;

	if (!a)
		return -ENOMEM;
	*priv = a;
	a->r = r;
	a->free_head = NO_BLOCK;
	a->oldest[0] = a->newest[0] = a->oldest[1] = a->newest[1] = NO_BLOCK;
	a->live = htab__new(1024, 0); /* keys borrowed from the blocks */
	a->pid_blocks = htab__new(256, HTAB_COPY_KEYS);
	a->finalized = htab__new(16, HTAB_COPY_KEYS);
	if (!a->live || !a->pid_blocks || !a->finalized)
		return -ENOMEM;
	if (r->tl) {
		a->tl = tl_log__timeline(r->tl);
		if (!(a->heap = htab__new(64, HTAB_COPY_KEYS)))
			return -ENOMEM;
	}
	for (int attempt = 0;; attempt++) {
		err = alloc_open_load(r, &a->skel, attempt);
		if (!err || !a->skel || !rec__open_retry(r, attempt, err))
			break;
		alloc_bpf__destroy(a->skel);
		a->skel = NULL;
	}
	s = a->skel;
	if (!s) {
		pr_err("cannot open the heap BPF object: %s", strerror(-err));
		return err;
	}
	if (err) {
		pr_err("cannot load the heap BPF programs: %s", strerror(-err));
		return err;
	}
	rec__add_counters(r, &counters_alloc, bpf_map__fd(s->maps.alloc_cnt));
	add_spec(a, "malloc", s->progs.alloc_malloc, true, false);
	add_spec(a, "calloc", s->progs.alloc_calloc, true, false);
	add_spec(a, "realloc", s->progs.alloc_realloc, true, false);
	add_spec(a, "free", s->progs.alloc_free, false, false);
	add_spec(a, "reallocarray", s->progs.alloc_reallocarray, true, true);
	add_spec(a, "posix_memalign", s->progs.alloc_posix_memalign, true, true);
	add_spec(a, "aligned_alloc", s->progs.alloc_memalign, true, true);
	add_spec(a, "memalign", s->progs.alloc_memalign, true, true);
	add_spec(a, "valloc", s->progs.alloc_malloc, true, true);
	add_spec(a, "pvalloc", s->progs.alloc_pvalloc, true, true);
	add_spec(a, "mmap", s->progs.alloc_mmap, true, true);
	add_spec(a, "munmap", s->progs.alloc_free, false, true);
	err = uprobes__new(&a->u, "heap", r->objs, env.all, is_allocator, NULL, a->specs,
			   a->nspecs);
	if (err)
		return err;
	if (preload_on || inject_on) {
		a->pspecs[0] = (struct uprobe_spec){ .func = "bpfprof_heap_sampled",
						     .prog = s->progs.alloc_preload_sampled };
		a->pspecs[1] = (struct uprobe_spec){ .func = "bpfprof_heap_freed",
						     .prog = s->progs.alloc_preload_freed };
		a->pspecs[2] = (struct uprobe_spec){ .func = "bpfprof_heap_hello",
						     .prog = s->progs.alloc_preload_hello };
		err = uprobes__new(&a->pu, "heap-preload", r->objs, false, match_none, NULL,
				   a->pspecs, 3);
		if (err)
			return err;
	}
	if (env.cmd_argv) {
		struct cover_ops ops = { .fallback = cover_fallback, .ctx = a };
		const char *lib = alloc__preload_path();
		struct stat st = { 0 };

		if (preload_on && lib && stat(lib, &st))
			memset(&st, 0, sizeof(st));
		a->cov = cover__new(&ops, st.st_dev, st.st_ino, !preload_on);
		if (!a->cov)
			return -ENOMEM;
	}
	a->fspec =
		(struct uprobe_spec){ .func = "Py_FinalizeEx", .prog = s->progs.alloc_py_finalize };
	err = uprobes__new(&a->fu, "heap-python", r->objs, env.all, is_python_runtime, NULL,
			   &a->fspec, 1);
	if (err)
		return err;

	a->ix_aobj = rec__value(r, "alloc_objects", "count");
	a->ix_abytes = rec__value(r, "alloc_space", "bytes");
	a->ix_iobj = rec__value(r, "inuse_objects", "count");
	a->ix_ibytes = rec__value(r, "inuse_space", "bytes");
	a->ix_peak = rec__value(r, "peak_space", "bytes");
	a->ix_final = rec__value(r, "finalize_space", "bytes");
	if (a->ix_aobj < 0 || a->ix_abytes < 0 || a->ix_iobj < 0 || a->ix_ibytes < 0 ||
	    a->ix_peak < 0 || a->ix_final < 0) {
		pr_err("too many value types for the heap values");
		return -ENOSPC;
	}
	/* folded carries one value: with --alloc it is --alloc-metric, --cpu or not */
	rec__default_value(r, rec__value(r, metric_type[env.alloc_metric],
					 env.alloc_metric == ALLOC_INUSE_OBJECTS ||
							 env.alloc_metric == ALLOC_ALLOC_OBJECTS
						 ? "count"
						 : "bytes"));
	return 0;
}

static void scan_pid(struct recorder *r, struct alloc *a, uint32_t pid)
{
	struct proc *p = proctab__lookup(r->procs, pid, 0);

	uprobes__scan(a->u, p);
	uprobes__scan(a->fu, p);
}

static int start(struct recorder *r, void *priv)
{
	struct alloc *a = priv;
	const struct uprobes_stats *us;

	if (env.all) {
		DIR *d = opendir("/proc");
		struct dirent *de;

		if (!d) {
			pr_err("cannot read /proc: %s", strerror(errno));
			return -errno;
		}
		while ((de = readdir(d))) {
			char *end;
			unsigned long pid = strtoul(de->d_name, &end, 10);

			if (*end || !pid || pid == (unsigned long)getpid())
				continue;
			scan_pid(r, a, pid);
		}
		closedir(d);
	}
	if (inject_on) {
		/* by path: in place in each process once it maps the library */
		if (uprobes__add_path(a->pu, alloc__preload_path()) ||
		    !uprobes__stats(a->pu)->probes) {
			pr_err("--alloc: cannot probe %s", alloc__preload_path());
			return -ENOENT;
		}
		a->injected = calloc(env.npids, sizeof(*a->injected));
		if (!a->injected)
			return -ENOMEM;
	}
	for (size_t i = 0; i < env.npids; i++) {
		char why[256];
		long n = inject_on ? inject__heap(env.pids[i], alloc__preload_path(),
						  env.alloc_rate, why, sizeof(why))
				   : 0;

		if (n > 0) {
			a->injected[a->ninjected++] = env.pids[i];
			pr_verbose("heap: %u: in-process sampling (%ld calls hooked)", env.pids[i],
				   n);
			continue;
		}
		if (inject_on) {
			a->inject_failed++;
			pr_verbose("heap: %u: uprobes (the sampler could not be loaded: %s)",
				   env.pids[i], why);
		}
		scan_pid(r, a, env.pids[i]);
	}
	a->started = true;
	if (preload_fd >= 0) { /* CMD has its copy */
		close(preload_fd);
		preload_fd = -1;
	}
	if (a->cov) {
		a->exec_link = bpf_program__attach(a->skel->progs.alloc_exec);
		a->fork_link = bpf_program__attach(a->skel->progs.alloc_fork);
		if (!a->exec_link || !a->fork_link) {
			pr_err("--alloc: cannot attach to exec events: %s", strerror(errno));
			return -errno;
		}
	}
	if (r->child > 0 && a->pu) {
		/* by path, before CMD runs: in place when the library is mapped */
		if (uprobes__add_path(a->pu, alloc__preload_path()) ||
		    !uprobes__stats(a->pu)->probes) {
			pr_err("--alloc: cannot probe %s", alloc__preload_path());
			return -ENOENT;
		}
		pr_verbose("heap: probes on %s", alloc__preload_path());
		if (cmd_preloaded)
			return 0;
	}
	if (r->child > 0) {
		probe_cmd_file(a);
		probe_cmd_libraries(r, a);
		scan_pid(r, a, r->child); /* held before exec: the probes follow it through exec */
		cover__set(a->cov, r->child, COV_UPROBES,
			   a->pu ? (cmd_own_malloc ? WHY_OWN_MALLOC : WHY_STATIC)
				 : WHY_UPROBES_ASKED);
		{
			uint32_t pid = (uint32_t)r->child;
			uint8_t one = 1;

			bpf_map_update_elem(bpf_map__fd(a->skel->maps.alloc_upids), &pid, &one,
					    BPF_ANY);
		}
		if (a->pu)
			return 0;
	}
	us = uprobes__stats(a->u);
	if (!us->probes && !a->ninjected) {
		pr_err("--alloc: no allocator found to probe in the %s (no mapped file defines malloc)",
		       env.all ? "running processes" : "target processes");
		return -ENOENT;
	}
	pr_verbose("heap: %llu probes in %llu files", (unsigned long long)us->probes,
		   (unsigned long long)us->files);
	return 0;
}

/* -p: the processes' calls back as they were (the sampler stays loaded, idle). */
static void eject_all(struct alloc *a)
{
	if (a->ejected)
		return;
	a->ejected = true;
	for (size_t i = 0; i < a->ninjected; i++) {
		char why[256];
		long n =
			inject__heap_eject(a->injected[i], alloc__preload_path(), why, sizeof(why));

		if (n == -ESRCH) /* it has exited: nothing to put back */
			pr_verbose("heap: %u: exited before the end", a->injected[i]);
		else if (n < 0)
			pr_warn("heap: %u: its calls could not be put back (%s): they stay sampled "
				"in process until it exits",
				a->injected[i], why);
		else
			pr_verbose("heap: %u: its calls are back as they were (%ld)",
				   a->injected[i], n);
	}
}

static void stop(struct recorder *r, void *priv)
{
	struct alloc *a = priv;

	(void)r;
	eject_all(a);
	/* detach: no more calls, but the records already out are still read */
	a->ust = *uprobes__stats(a->pu ? a->pu : a->u);
	uprobes__free(a->u);
	a->u = NULL;
	uprobes__free(a->pu);
	a->pu = NULL;
	uprobes__free(a->fu);
	a->fu = NULL;
	bpf_link__destroy(a->exec_link);
	a->exec_link = NULL;
	bpf_link__destroy(a->fork_link);
	a->fork_link = NULL;
}

/*
 * In-use values are final (the run's end, or an interval's): round each
 * stack's sums into the stack table. The totals for the summary: allocated
 * summed over intervals, in use as of the last.
 */
static void settle(struct recorder *r, struct alloc *a, uint64_t end_ns)
{
	handle_exits(r, a);
	peak_leave(a); /* still at its peak at the end */
	a->end_ns = end_ns;
	a->live_blocks = a->inuse_stacks = a->oldest_ns = 0;
	a->inuse_objs = a->inuse_bytes = a->peak_bytes = a->final_bytes = 0;
	FOR_EACH_LIVE(a, i)
	{
		struct block *b = block_at(a, i);
		struct stack_acc *s = acc_at(a, b->stack);

		if (s && (!s->oldest_ns || b->time_ns < s->oldest_ns))
			s->oldest_ns = b->time_ns;
		a->live_blocks++;
	}
	for (size_t i = 0; i < a->nacc && i < stacks__count(r->stacks); i++) {
		struct stack_acc *s = &a->acc[i];
		struct stack_vals *v = stacks__vals(r->stacks, i);

		if (!v || (!s->a_objs && !s->i_objs && !peak_of(s) && !s->f_bytes))
			continue;
		v->v[a->ix_aobj] = llround(s->a_objs);
		v->v[a->ix_abytes] = llround(s->a_bytes);
		/* sums of doubles: a stack with nothing left may be a rounding error off zero */
		v->v[a->ix_iobj] = s->i_objs > 0.5 ? llround(s->i_objs) : 0;
		v->v[a->ix_ibytes] = s->i_bytes > 0.5 ? llround(s->i_bytes) : 0;
		v->v[a->ix_peak] = peak_of(s) > 0.5 ? llround(peak_of(s)) : 0;
		v->v[a->ix_final] = s->f_bytes > 0.5 ? llround(s->f_bytes) : 0;
		a->peak_bytes += v->v[a->ix_peak];
		a->final_bytes += v->v[a->ix_final];
		a->inuse_objs += v->v[a->ix_iobj];
		a->inuse_bytes += v->v[a->ix_ibytes];
		a->alloc_bytes += v->v[a->ix_abytes];
		if (v->v[a->ix_ibytes]) {
			a->inuse_stacks++;
			if (s->oldest_ns && (!a->oldest_ns || s->oldest_ns < a->oldest_ns))
				a->oldest_ns = s->oldest_ns;
		}
	}
}

static void finish(struct recorder *r, void *priv)
{
	struct alloc *a = priv;

	a->ending = true;
	heap_flush(a, UINT64_MAX);
	if (r->cont)
		return; /* the last interval's end settles it */
	settle(r, a, (uint64_t)r->t_stop.tv_sec * 1000000000ULL + r->t_stop.tv_nsec);
}

/* --continuous: this interval's file gets its allocations and what is in use at its end. */
static void interval_end(struct recorder *r, void *priv)
{
	settle(r, priv, mono_ns());
}

/*
 * --continuous: the live blocks go on into the new interval's (empty) stack
 * table: their stacks are entered in it, their weights are its in-use, the
 * peak starts from them. Allocated values start from zero. (Blocks of a
 * process whose exit went unseen stay until evicted for room.)
 */
static void interval(struct recorder *r, void *priv, struct stacks *old)
{
	struct alloc *a = priv;
	size_t n = old ? stacks__count(old) : a->nacc, it = 0;
	const struct stack_vals *vals;
	const struct stack_key *k;
	uint32_t i, next;
	size_t *map;

	map = malloc((n ? n : 1) * sizeof(*map));
	if (!map) {
		r->st.agg_failed += a->nlive;
		return;
	}
	for (size_t j = 0; j < n; j++)
		map[j] = old ? SIZE_MAX : j; /* no new table: the indexes stand */
	while (old && (k = stacks__next(old, &it, &vals))) {
		size_t j = stacks__index(old, vals), to;

		if (j < n && j < a->nacc && a->acc[j].nblocks && !stacks__intern(r->stacks, k, &to))
			map[j] = to;
	}
	free(a->acc);
	a->acc = NULL;
	a->nacc = 0;
	a->live_total = a->ta = a->tb = 0;
	a->at_peak = a->at_a = a->at_b = false;
	for (int l = 0; l < 2; l++)
		for (i = a->oldest[l]; i != NO_BLOCK; i = next) {
			struct block *b = block_at(a, i);
			struct stack_acc *s;

			next = b->newer;
			if (b->stack >= n || map[b->stack] == SIZE_MAX ||
			    !(s = acc_at(a, map[b->stack]))) {
				r->st.agg_failed++;
				b->stack = SIZE_MAX; /* (acc_at fails on it: no stack to update) */
				peak_move(a, NULL, b, 1); /* (block_drop takes it off) */
				block_drop(a, i, true, 0);
				continue;
			}
			b->stack = map[b->stack];
			s->nblocks++;
			s->i_objs += b->objs;
			s->i_bytes += b->bytes;
			peak_move(a, s, b, 1);
			a->st.carried++;
		}
	free(map);
	/* the interval's peak starts from what it was given */
	a->peak_total = a->live_total;
	a->peak_a = a->ta;
	a->peak_b = a->tb;
	a->at_peak = a->at_a = a->at_b = true;
}

/* pprof label oldest_age: how long the stack's oldest block still held had been held */
static uint32_t labels(struct recorder *r, void *priv, size_t stack, struct plabel *out,
		       uint32_t max)
{
	struct alloc *a = priv;
	const struct stack_vals *v = stacks__vals(r->stacks, stack);
	const struct stack_acc *s;

	if (!max || stack >= a->nacc || !v || !v->v[a->ix_ibytes])
		return 0;
	s = &a->acc[stack];
	if (!s->oldest_ns || s->oldest_ns > a->end_ns)
		return 0;
	out[0] = (struct plabel){ .key = "oldest_age",
				  .num = (int64_t)(a->end_ns - s->oldest_ns),
				  .unit = "nanoseconds" };
	return 1;
}

static struct alloc_counters bpf_counters(struct alloc *a)
{
	struct alloc_counters sum;

	_Static_assert(sizeof(sum) % sizeof(__u64) == 0, "alloc_counters: u64 fields only");
	bpfmap__percpu_sum(bpf_map__fd(a->skel->maps.alloc_cnt), 0, (uint64_t *)&sum,
			   sizeof(sum) / sizeof(__u64));
	return sum;
}

static void prog_cost(FILE *f, const char *what, struct bpf_program *p)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);

	if (!bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) && info.run_cnt)
		fprintf(f, " %s %.0f ns (%llu runs)", what, (double)info.run_time_ns / info.run_cnt,
			(unsigned long long)info.run_cnt);
}

static void summary(struct recorder *r, void *priv, FILE *f)
{
	struct alloc *a = priv;
	struct alloc_counters c = bpf_counters(a);
	uint64_t lost = c.lost_alloc + c.lost_free + c.live_full + c.no_tls + a->st.no_key +
			a->st.unmatched;
	double age =
		a->oldest_ns && a->end_ns > a->oldest_ns ? (a->end_ns - a->oldest_ns) / 1e9 : 0;

	if (log_level < 1)
		return;
	if (a->cov)
		cover__summary(a->cov, f);
	if (preload_on && (!a->cov || cover__count(a->cov, COV_PRELOAD)))
		fprintf(f,
			"bpfprof: heap: in-process sampling (%s): unsampled calls never leave "
			"the process, the counts below are of sampled ones%s\n",
			PRELOAD_LIB,
			a->cov && cover__count(a->cov, COV_UPROBES)
				? " (of all calls in the processes probed with uprobes)"
				: "");
	fprintf(f,
		"bpfprof: heap: %llu allocation calls, %.1f MiB asked for; %llu sampled (1 in "
		"%llu bytes), %llu frees of sampled blocks; estimated %.1f MiB allocated, %.1f MiB "
		"in %lld blocks still held in %llu stacks (oldest %.1f s); peak %.1f MiB in use\n",
		(unsigned long long)c.calls, c.bytes / 1048576.0, (unsigned long long)c.sampled,
		(unsigned long long)env.alloc_rate, (unsigned long long)c.frees,
		a->alloc_bytes / 1048576.0, a->inuse_bytes / 1048576.0, (long long)a->inuse_objs,
		(unsigned long long)a->inuse_stacks, age, a->peak_bytes / 1048576.0);
	if (a->st.finalized)
		fprintf(f,
			"bpfprof: heap: %.1f MiB in use when %llu Python processes entered "
			"Py_FinalizeEx (finalize_space)\n",
			a->st.finalized_bytes / 1048576.0, (unsigned long long)a->st.finalized);
	if (a->tl)
		fprintf(f,
			"bpfprof: heap: %llu samples of %llu processes' heap in use in the "
			"trace (at most one per %.0f ms each)\n",
			(unsigned long long)a->counters, (unsigned long long)htab__count(a->heap),
			HEAP_COUNTER_NS / 1e6);
	if (lost || a->st.replaced || a->st.untracked || a->st.evicted || a->ust.attach_failed ||
	    c.foreign_rate)
		fprintf(f,
			"bpfprof: heap: lost: %llu probes not attached, %llu allocations and %llu "
			"frees (ring buffer full), "
			"%llu blocks untracked (%llu: BPF live table of %u full; %llu: the "
			"in-process set could not grow), %llu calls without thread "
			"state, %llu frees of unknown blocks, %llu records refused, %llu records of "
			"a sampler at another rate; %llu blocks "
			"sampled again before their free was seen, %llu oldest blocks evicted "
			"for room\n",
			(unsigned long long)a->ust.attach_failed, (unsigned long long)c.lost_alloc,
			(unsigned long long)c.lost_free, (unsigned long long)c.live_full,
			(unsigned long long)(c.live_full - c.set_full), env.alloc_max_live,
			(unsigned long long)c.set_full, (unsigned long long)c.no_tls,
			(unsigned long long)a->st.unmatched, (unsigned long long)a->st.no_key,
			(unsigned long long)c.foreign_rate, (unsigned long long)a->st.replaced,
			(unsigned long long)a->st.evicted);
	if (inject_on)
		fprintf(f,
			"bpfprof: heap: -p: %zu processes sampled in process (the sampler "
			"injected), %llu by uprobes (why: above)\n",
			a->ninjected, (unsigned long long)a->inject_failed);
	if (a->st.not_ours)
		fprintf(f,
			"bpfprof: heap: %llu records of a sampler another bpfprof run loaded "
			"into a target dropped (its calls are counted by uprobes)\n",
			(unsigned long long)a->st.not_ours);
	if (r->cont)
		fprintf(f,
			"bpfprof: heap: continuous: %llu live blocks carried from one interval "
			"into the next (in-use and allocated above: the last interval's, and "
			"the sum of all)\n",
			(unsigned long long)a->st.carried);
	if (log_level >= 2) {
		fprintf(f,
			"bpfprof: heap: %llu nested calls ignored, %llu sampled calls failed, "
			"%llu blocks held when their process exited; probes: %llu in %llu files, "
			"%llu attach failures\n",
			(unsigned long long)c.nested, (unsigned long long)c.failed,
			(unsigned long long)a->st.exited_blocks, (unsigned long long)a->ust.probes,
			(unsigned long long)a->ust.files, (unsigned long long)a->ust.attach_failed);
		if (r->stats_fd >= 0) {
			fprintf(f, "bpfprof: heap: BPF per run:");
			prog_cost(f, "malloc entry", a->skel->progs.alloc_malloc);
			prog_cost(f, "preload sample", a->skel->progs.alloc_preload_sampled);
			prog_cost(f, "return", a->skel->progs.alloc_ret);
			prog_cost(f, "free", a->skel->progs.alloc_free);
			fputc('\n', f);
		}
	}
}

/*
 * What changes the answer: a process not covered (or covered late), and
 * sampled blocks whose frees could not be followed (their bytes stay in use).
 */
static void alloc_warnings(struct recorder *r, void *priv)
{
	struct alloc *a = priv;
	struct alloc_counters c = bpf_counters(a);
	uint64_t untracked = c.live_full + a->st.evicted;

	if (a->cov)
		cover__warn(a->cov, r);
	if (untracked)
		rec__warn(r, "sample less often with a larger --alloc-rate",
			  "heap: %llu sampled blocks could not be followed to their free (the "
			  "table of live blocks was full): in use may be overstated",
			  (unsigned long long)untracked);
}

static void destroy(struct recorder *r, void *priv)
{
	struct alloc *a = priv;
	struct htab_entry *e;
	size_t it = 0;

	(void)r;
	if (!a)
		return;
	uprobes__free(a->u);
	uprobes__free(a->pu);
	uprobes__free(a->fu);
	cover__free(a->cov);
	eject_all(a); /* a run that failed after start() */
	free(a->injected);
	bpf_link__destroy(a->exec_link);
	bpf_link__destroy(a->fork_link);
	alloc_bpf__destroy(a->skel);
	htab__free(a->finalized);
	htab__free(a->live);
	htab__free(a->pid_blocks);
	while (a->heap && (e = htab__next(a->heap, &it)))
		free((void *)(uintptr_t)e->val);
	htab__free(a->heap);
	for (uint32_t i = 0; i < a->nchunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
	free(a->acc);
	free(a->exits);
	free(a);
}

/* -- CMD: the in-process sampler goes into its environment before it starts */
static int prepare_cmd(void)
{
	alloc__preload_env();
	return 0;
}

const struct rec_feature alloc_feature = {
	.name = "alloc",
	.wanted = wanted,
	.prepare_cmd = prepare_cmd,
	.setup = setup,
	.start = start,
	.on_record = on_record,
	.on_proc = on_proc,
	.poll = poll_hook,
	.stop = stop,
	.finish = finish,
	.interval_end = interval_end,
	.interval = interval,
	.warnings = alloc_warnings,
	.summary = summary,
	.destroy = destroy,
	.labels = labels,
	.kinds = { SAMPLE_ALLOC, SAMPLE_FREE, SAMPLE_HEAP_MARK, 0 },
};
