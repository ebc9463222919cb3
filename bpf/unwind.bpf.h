/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Table-driven native unwinder for x86-64 user stacks. Per frame: find the
 * executable mapping of the PC in the process's bpf_proc_unwind (binary
 * search), then the row covering the PC in the file's rows (binary search),
 * compute the CFA, read the return address at CFA-8 and the caller's RBP if
 * the row says where it is. Files without CFI fall back to frame pointers;
 * signal trampolines restore the interrupted registers from the ucontext.
 * Frames are walked in a bpf_loop() callback, two per call: the verifier
 * checks two steps, not MAX_USTACK unrolled copies of one.
 */
#ifndef BPFPROF_UNWIND_BPF_H
#define BPFPROF_UNWIND_BPF_H

#include "common.bpf.h"

const volatile __u32 unwind_mode = UNWIND_AUTO;

/*
 * The rows, by chunk (include/bpfprof.h, UNWIND_CHUNK_SHIFT): chunks are
 * arrays of one size, made and put in by user space (tables.c), more of
 * them as samples need more tables, up to the slots sized here from user
 * space. A lookup in a chunk is inlined as any array's (no BPF_F_INNER_MAP:
 * every chunk has the template's size).
 */
struct unwind_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized from user space: rows a chunk */
	__type(key, __u32);
	__type(value, struct bpf_urow);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* sized from user space: chunks at most */
	__type(key, __u32);
	__array(values, struct unwind_chunk);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096); /* sized from user space */
	__type(key, __u32);	   /* tgid */
	__type(value, struct bpf_proc_unwind);
} proc_unwind SEC(".maps");

/* Written by user space only: allocated as entries come (no preallocation at start-up). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, struct file_unwind_key);
	__type(value, struct file_unwind);
} file_unwind SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct early_maps);
} early_maps SEC(".maps");

/* A zeroed early_maps value to create entries from (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct early_maps);
} early_zero SEC(".maps");

/*
 * The description of a process user space has not described yet, built per
 * sample from early_maps and file_unwind (lazy_describe), per CPU (too big
 * for the stack).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_proc_unwind);
} lazy_desc SEC(".maps");

/*
 * Which row covers a pc: a per-CPU cache in front of the binary search. An
 * entry holds a row and where the next row starts, so it answers for every
 * pc in [row.pc, end), not only the pc it was filled for: the leaf's pc, a
 * different instruction of a hot loop every sample, finds its row there
 * too (it searched every time when entries were keyed by the exact pc). A
 * set is picked by the pc's 64-byte block and holds two entries, the last
 * filled first: two return addresses of one block in different rows (a
 * call in a loop and the call after it) took turns in one entry and
 * searched twice a walk. A hit reads no unwind_rows at all: one cache
 * line instead of two, on a host where every sample finds its memory
 * cold. An entry is valid for the table generation it was made in: user
 * space bumps unwind_gen whenever rows are freed, since the rows
 * [first, ...) can then be reused by another file.
 */
#define ROW_CACHE_SETS	512
#define ROW_CACHE_BLOCK 6 /* log2 of the bytes of code that share a set */

struct row_cache_ent {
	__u32 first; /* the table's first row */
	__u32 gen;
	__u32 end; /* the next row's pc (~0: the table's last row) */
	__u32 pad;
	struct bpf_urow row; /* covers [row.pc, end) */
};

struct row_cache_set {
	struct row_cache_ent w[2]; /* w[0]: the last filled */
};

struct row_cache {
	struct row_cache_set set[ROW_CACHE_SETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct row_cache);
} row_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* starts at 1: a zeroed entry never matches */
} unwind_gen SEC(".maps");

/*
 * Reads of the user stack go through a window copied in one probe read: a
 * 64-frame walk of small frames needs a handful of copies, not 64 reads.
 * A probe read costs ~0.2 us here whatever its size up to a few KiB (0.06
 * ns a byte), so the copies are few and large: a copy stops at the end of
 * its page (the next page may be beyond the top of the stack, and a read
 * that faults costs ~2 us and gives nothing), except on the main thread's
 * stack, which is mapped from any address in it up to mm->start_stack:
 * there a copy takes STACK_WIN bytes or up to start_stack, and only if that
 * read fails (a page in between never touched, so not present) does the
 * walk go back to copies that end at page ends. The window starts on an
 * 8-byte boundary: the walk's words are whole u64s of it.
 */
#define STACK_WIN  4096
#define STACK_PAGE 4096 /* x86-64 base pages: stack mappings end on one */
/* Below mm->start_stack by less than this: the main thread's stack mapping */
#define STACK_MAIN_MAX (8ULL << 20)

struct stack_win {
	__u64 base; /* 8-aligned */
	__u32 len;
	__u32 pad;
	__u64 top; /* mm->start_stack of the walked task, 0: unknown */
	/*
	 * Anonymous executable memory the walk found outside the description
	 * (anon_find; end 0: none), and whether it looked: kept here, not in
	 * the walk's state, which fp_try_regs would otherwise update on the
	 * walk's paths (on_cpu_sample 27k -> 36k instructions processed).
	 */
	__u64 anon_start, anon_end;
	__u32 anon_tried;
	__u32 pad2;
	union {
		__u8 data[STACK_WIN];
		__u64 words[STACK_WIN / 8];
	};
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_win);
} stack_window SEC(".maps");

/*
 * The stack pointer of each frame the table walk emitted (the sample's
 * frames[], in order), for the Python walker: a native frame whose stack
 * [sp[i], sp[i+1]) holds a Python entry frame (a local of the eval loop,
 * python.bpf.h) is an eval loop's call, whatever its symbol says (Debian's
 * 3.14/3.15 run the eval loop in a partition of _PyEval_EvalFrameDefault
 * that .dynsym does not name). n: frames of the last walk on this CPU, 0
 * when that walk was not the table walk; tid: whose.
 */
#define PY_MAX_SHIMS 64

struct ustack_sp {
	__u64 sp[MAX_USTACK];
	__u32 n;
	__u32 tid;
	/* python.bpf.h: the entry frames its walk met, leaf first */
	__u64 shim[PY_MAX_SHIMS];
	__u32 nshim;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ustack_sp);
} ustack_sp SEC(".maps");

/* Until the table walk says otherwise: no stack pointers for this thread's walk. */
__noinline int ustack_sp_reset(void)
{
	__u32 zero = 0;
	struct ustack_sp *sps = bpf_map_lookup_elem(&ustack_sp, &zero);

	if (sps) {
		sps->n = 0;
		sps->tid = (__u32)bpf_get_current_pid_tgid();
	}
	return 0;
}

/* x86-64 sigcontext inside the ucontext that RSP points to in __restore_rt */
#define UC_MCONTEXT 40
#define SC_RBP	    (UC_MCONTEXT + 80)
#define SC_RSP	    (UC_MCONTEXT + 120)
#define SC_RIP	    (UC_MCONTEXT + 128)

enum unwind_stop {
	UNW_CONTINUE = 0,
	UNW_END,  /* outermost frame reached */
	UNW_FAIL, /* gave up (counted by reason) */
	UNW_FULL, /* MAX_USTACK frames */
};

struct ustate {
	__u64 ip, sp, bp;
	struct bpf_proc_unwind *info;
	const struct stack_win *win; /* never NULL */
	__u64 *frames;		     /* MAX_USTACK slots */
	struct ustack_sp *sps;	     /* never NULL: each frame's stack pointer */
	__u32 n;
	__u32 stop;  /* enum unwind_stop */
	__u32 stale; /* stopped in no mapping or a pending table */
	/*
	 * Consecutive frames are mostly in one file: the last mapping found
	 * (valid once have_last is set; &info->maps[0] before). The pointer
	 * and the cache below are never NULL: a register that is NULL on one
	 * path and a map value on another gives the verifier states that
	 * never subsume each other, and it checked the bpf_loop body once per
	 * combination (user_frames 18041 -> 8309 instructions processed, the
	 * CPU object 31110 -> 19839: half of -a's start-up).
	 */
	const struct bpf_umap *last;
	__u32 have_last;
	struct row_cache *cache;
	__u32 gen;	/* 0: the cache is not used (unwind_gen not set up) */
	bool exact_ip;	/* ip is not a return address (leaf, after a signal) */
	bool heuristic; /* a frame was reached by fp_fallback */
	bool gap;	/* a frame was in a partial table's gap */
	bool vma_tried; /* lazy_add ran in this walk (once per interrupt: see there) */
	__u32 lazy;	/* info is lazy_desc, made from early_maps (not described yet) */
	__u32 tgid;	/* whose early_maps lazy_add extends */
	__u64 top;	/* mm->start_stack: the entry frame's stack pointer (0: unknown) */
};

/*
 * The binary searches are global (non-static, noinline) functions: the
 * verifier checks each once, with unknown arguments, instead of every
 * iteration of every caller's copy (which as plain loops ran it past 1M
 * instructions), and they cost no callback per iteration as bpf_loop would.
 */

/*
 * Index of the mapping containing ip among maps [lo, hi) of info, or -1.
 * lo is an argument (always 0) on purpose: a constant start gives the
 * verifier a different exact range every iteration and nothing to prune.
 */
__noinline int find_umap_idx(const struct bpf_proc_unwind *info, __u64 ip, __u32 lo, __u32 hi)
{
	__u32 n = hi, mid;

	if (!info || hi > MAX_UMAPS)
		return -1;
	for (int i = 0; i < 11 && lo < hi; i++) { /* 2^11 > MAX_UMAPS */
		mid = lo + (hi - lo) / 2;
		if (info->maps[mid & (MAX_UMAPS - 1)].end <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n || info->maps[lo & (MAX_UMAPS - 1)].start > ip)
		return -1;
	return lo & (MAX_UMAPS - 1);
}

/*
 * Index of the last row in [first, first + count) whose pc <= pc, or -1.
 * The rows are one chunk's (a table never spans two).
 */
__noinline int find_row_idx(__u32 first, __u32 count, __u32 pc)
{
	__u32 chunk = first >> UNWIND_CHUNK_SHIFT, lo = first & UNWIND_CHUNK_MASK;
	__u32 hi = lo + count, mid;
	const struct bpf_urow *r;
	void *rows;

	if (!count)
		return -1;
	rows = bpf_map_lookup_elem(&unwind_rows, &chunk);
	if (!rows)
		return -1;
	for (int i = 0; i < 23 && lo + 1 < hi; i++) { /* 2^22 rows a chunk */
		mid = lo + (hi - lo) / 2;
		r = bpf_map_lookup_elem(rows, &mid);
		if (!r)
			return -1;
		if (r->pc <= pc)
			lo = mid;
		else
			hi = mid;
	}
	r = bpf_map_lookup_elem(rows, &lo);
	if (!r || r->pc > pc)
		return -1;
	return (int)((chunk << UNWIND_CHUNK_SHIFT) | lo);
}

__noinline int find_umap_lin(const struct bpf_proc_unwind *info, __u64 ip);

/*
 * The mapping of ip in info (lazy: a description made from early_maps,
 * unsorted), or NULL.
 */
static __always_inline const struct bpf_umap *find_umap(struct bpf_proc_unwind *info, __u64 ip,
							bool lazy)
{
	__u32 n = info->nmaps;
	int i;

	if (n > MAX_UMAPS)
		n = MAX_UMAPS;
	i = lazy ? find_umap_lin(info, ip) : find_umap_idx(info, ip, 0, n);

	/* clang knows the range the function returns; the verifier does not */
	asm volatile("" : "+r"(i));
	if (i < 0 || i >= MAX_UMAPS)
		return NULL;
	return &info->maps[i];
}

/*
 * An early mapping whose off is EARLY_EXE is the executable's text as
 * mm->start_code/end_code give it: its first executable segment.
 */
#define EARLY_EXE (~0ULL)

/*
 * One early mapping as user space would describe it: a file with a table
 * in file_unwind walks by its rows, another file by frame pointers,
 * anonymous code by the fallback. A global function: checked once.
 */
__noinline int lazy_map(struct bpf_umap *m, const struct early_map *em)
{
	struct file_unwind_key k = {};
	const struct file_unwind *f = NULL;

	if (!m || !em)
		return -1;
	m->start = em->start;
	m->end = em->end;
	m->bias = 0;
	m->first = m->count = 0;
	m->kind = em->ino && em->ino != FILE_UNWIND_VDSO_INO ? UMAP_FP : UMAP_ANON;
	if (em->ino) {
		k.dev = em->dev;
		k.ino = em->ino;
		f = bpf_map_lookup_elem(&file_unwind, &k);
	}
	for (int s = 0; f && s < FILE_UNWIND_SEGS; s++) {
		__u64 off = em->off == EARLY_EXE ? f->segs[s].off : em->off;

		if (off < f->segs[s].off || off >= f->segs[s].end)
			continue;
		m->bias = em->start - off - f->segs[s].delta + f->base;
		m->first = f->first;
		m->count = f->count;
		m->kind = UMAP_TABLE;
		break;
	}
	return 0;
}

struct lazy_describe_ctx {
	struct bpf_proc_unwind *d;
	const struct early_maps *e;
};

static long lazy_describe_one(__u32 i, void *data)
{
	struct lazy_describe_ctx *c = data;

	lazy_map(&c->d->maps[i & (EARLY_MAPS - 1)], &c->e->m[i & (EARLY_MAPS - 1)]);
	return 0;
}

/*
 * d made from e, in e's order: unsorted, looked up by find_umap_lin. 0, or
 * -1. A bpf_loop(), like find_umap_lin's: as a bounded loop the verifier
 * walked it once per index (the index into maps[] is precise).
 */
__noinline int lazy_describe(struct bpf_proc_unwind *d, const struct early_maps *e)
{
	struct lazy_describe_ctx c = { .d = d, .e = e };
	__u32 n;

	if (!d || !e)
		return -1;
	n = e->n;
	if (n > EARLY_MAPS)
		n = EARLY_MAPS;
	bpf_loop(n, lazy_describe_one, &c, 0);
	d->nmaps = n;
	return 0;
}

/* Append a mapping to e. Its index, or -1 (full). */
static __always_inline int early_append(struct early_maps *e, const struct early_map *nm)
{
	__u32 n = e->n;

	if (n >= EARLY_MAPS)
		return -1;
	e->m[n & (EARLY_MAPS - 1)] = *nm;
	e->n = n + 1;
	return n;
}

struct find_umap_lin_ctx {
	const struct bpf_proc_unwind *info;
	__u64 ip;
	int found;
};

static long find_umap_lin_one(__u32 i, void *data)
{
	struct find_umap_lin_ctx *c = data;
	const struct bpf_umap *m = &c->info->maps[i & (EARLY_MAPS - 1)];

	if (m->start > c->ip || c->ip >= m->end)
		return 0;
	c->found = i & (EARLY_MAPS - 1);
	return 1;
}

/* Index of the mapping of ip in a lazy description (unsorted, few), or -1. */
__noinline int find_umap_lin(const struct bpf_proc_unwind *info, __u64 ip)
{
	struct find_umap_lin_ctx c = { .info = info, .ip = ip, .found = -1 };
	__u32 n;

	if (!info)
		return -1;
	n = info->nmaps;
	if (n > EARLY_MAPS)
		n = EARLY_MAPS;
	bpf_loop(n, find_umap_lin_one, &c, 0);
	return c.found;
}

/* What lazy_add's bpf_find_vma() callback copies out of the VMA. */
struct vma_info {
	struct early_map m;
	__u64 flags;
};

static long vma_copy(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_info *v = data;
	struct file *f = BPF_CORE_READ(vma, vm_file);

	v->m.start = BPF_CORE_READ(vma, vm_start);
	v->m.end = BPF_CORE_READ(vma, vm_end);
	v->m.off = BPF_CORE_READ(vma, vm_pgoff) << 12;
	v->flags = BPF_CORE_READ(vma, vm_flags);
	if (f) {
		v->m.ino = BPF_CORE_READ(f, f_inode, i_ino);
		v->m.dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	}
	return 0;
}

/*
 * The mapping of ip, from the current task's VMAs, into tgid's early_maps
 * and onto the end of the sample's description d (made from them, in their
 * order). With interrupts off (a perf event) the kernel lets a program take
 * the mmap lock once per interrupt, so a walk asks once; the mappings found
 * stay in early_maps for the process's next samples. early_maps is looked
 * up here, not carried in the walk's state: a pointer there that is
 * early_maps' value on one path and another map's on the other made states
 * that never subsume each other. 0, or -1.
 */
__noinline int lazy_add(struct bpf_proc_unwind *d, __u32 tgid, __u64 ip)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct vma_info v = {};
	struct early_maps *e;
	int i;

	if (!d)
		return -1;
	e = bpf_map_lookup_elem(&early_maps, &tgid);
	if (!e)
		return -1;
	if (bpf_find_vma(task, ip, vma_copy, &v, 0) || !v.m.end) {
		count(CNT_EARLY_MAP_LOST);
		return -1;
	}
	if (!(v.flags & 0x4) || ip < v.m.start || ip >= v.m.end) /* VM_EXEC */
		return -1;
	i = early_append(e, &v.m);
	if (i < 0) {
		count(CNT_EARLY_MAP_LOST);
		return -1;
	}
	lazy_map(&d->maps[i & (EARLY_MAPS - 1)], &e->m[i & (EARLY_MAPS - 1)]);
	d->nmaps = i + 1;
	return 0;
}

/*
 * The anonymous executable mapping holding ip, from the current task's VMAs:
 * code a described process made executable with mprotect (a JIT writing
 * its code, then making it executable; CPython's -X perf trampolines from
 * 3.13), which no mmap record told user space of. User space learns it
 * from the sample (a frame in no mapping: /proc/PID/maps read again, at
 * most every 200 ms), BPF in the meantime from here: the same one lookup
 * an interrupt allows as lazy_add's, once a walk. 0, or -1.
 */
struct anon_range {
	__u64 start, end;
};

__noinline int anon_find(struct anon_range *r, __u64 ip)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct vma_info v = {};

	if (!r)
		return -1;
	if (bpf_find_vma(task, ip, vma_copy, &v, 0) || !v.m.end)
		return -1;
	if (!(v.flags & 0x4) || v.m.ino || ip < v.m.start || ip >= v.m.end) /* VM_EXEC, no file */
		return -1;
	r->start = v.m.start;
	r->end = v.m.end;
	count(CNT_UNW_ANON_FOUND);
	return 0;
}

/*
 * Search the rows for pc and fill the set's w[0] with the row found and the
 * next row's pc, the entry there moving to w[1]. A global function: the
 * search and the two row lookups are checked once, outside the walk's
 * step. 0, or -1 (no row).
 */
__noinline int row_fill(struct row_cache_set *set, __u32 first, __u32 count, __u32 pc, __u32 gen)
{
	const struct bpf_urow *r;
	struct row_cache_ent *e;
	__u32 idx, next, chunk;
	void *rows;
	int i;

	if (!set)
		return -1;
	i = find_row_idx(first, count, pc);
	if (i < 0)
		return -1;
	chunk = (__u32)i >> UNWIND_CHUNK_SHIFT;
	rows = bpf_map_lookup_elem(&unwind_rows, &chunk);
	if (!rows)
		return -1;
	idx = i & UNWIND_CHUNK_MASK;
	r = bpf_map_lookup_elem(rows, &idx);
	if (!r)
		return -1;
	set->w[1] = set->w[0];
	e = &set->w[0];
	e->row = *r;
	e->end = ~0U;
	next = idx + 1;
	if ((((__u32)i + 1) - first) < count) { /* within the table: within the chunk */
		r = bpf_map_lookup_elem(rows, &next);
		if (r)
			e->end = r->pc;
	}
	e->first = first;
	e->gen = gen;
	return 0;
}

/*
 * The row covering pc into *row: from the cache when an entry of this
 * table and generation covers pc, else searched (and cached). gen 0: the
 * cache is not trusted (the entry is filled and used, never matched).
 * 0, or -1 (no row).
 */
static __always_inline bool row_hit(const struct row_cache_ent *e, __u32 gen, __u32 first, __u32 pc)
{
	return gen && e->gen == gen && e->first == first && e->row.pc <= pc && pc < e->end;
}

static __always_inline int find_row(struct row_cache *c, __u32 gen, __u32 first, __u32 count,
				    __u32 pc, struct bpf_urow *row)
{
	__u32 h = ((first * 0x9e3779b1u) ^ ((pc >> ROW_CACHE_BLOCK) * 0x85ebca6bu)) >> 20;
	struct row_cache_set *set = &c->set[h & (ROW_CACHE_SETS - 1)];
	struct row_cache_ent *e = &set->w[0];

	if (!row_hit(e, gen, first, pc)) {
		e = &set->w[1];
		if (!row_hit(e, gen, first, pc)) {
			if (row_fill(set, first, count, pc, gen))
				return -1;
			e = &set->w[0];
		}
	}
	*row = e->row;
	return 0;
}

/*
 * The u64 at addr from the window, or -1 when the window does not hold it
 * (or addr is not 8-aligned: never for the words a walk reads).
 */
static __always_inline int win_word(const struct stack_win *w, __u64 addr, __u64 *v)
{
	__u64 off = addr - w->base;

	if (w->len < 8 || off > w->len - 8 || (off & 7))
		return -1;
	*v = w->words[(off >> 3) & (STACK_WIN / 8 - 1)];
	return 0;
}

/*
 * A global function, like the searches: inlined at its call sites it
 * multiplied the paths the verifier walks through a frame step. The walk
 * calls it only when the window misses (read_word).
 */
__noinline int read_stack(__u64 addr, __u64 *v)
{
	struct stack_win *w;
	__u32 zero = 0;
	__u64 off, len, start;

	if (!v)
		return -1;
	w = bpf_map_lookup_elem(&stack_window, &zero);
	if (!w)
		return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
	if (!win_word(w, addr, v))
		return 0;
	off = addr - w->base;
	if (addr < w->base || off + 8 > w->len) {
		/*
		 * Refill from addr (the walk moves towards higher addresses): to
		 * the end of addr's page, or on the main thread's stack up to
		 * STACK_WIN bytes below its top.
		 */
		start = addr & ~7ULL;
		len = STACK_PAGE - (start & (STACK_PAGE - 1));
		if (start < w->top && w->top - start <= STACK_MAIN_MAX && w->top - start > len) {
			len = w->top - start;
			if (len > STACK_WIN)
				len = STACK_WIN;
			if (!bpf_probe_read_user(w->data, len, (const void *)start))
				goto filled;
			/*
			 * A page of it is not present (a frame's large local
			 * array never touched, no stack-clash probes): from
			 * here on this walk copies up to page ends.
			 */
			w->top = 0;
			len = STACK_PAGE - (start & (STACK_PAGE - 1));
		}
		if (len < 8 + (addr - start)) { /* the word itself crosses a page */
			w->len = 0;
			return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
		}
		if (bpf_probe_read_user(w->data, len, (const void *)start)) {
			w->len = 0;
			return -1;
		}
filled:
		w->base = start;
		w->len = len;
		off = addr - start;
	}
	if (off > STACK_WIN - 8)
		return -1;
	*v = *(__u64 *)&w->data[off];
	return 0;
}

/* A walk's read of the u64 at addr: from the window, or through read_stack. */
static __always_inline int read_word(const struct stack_win *w, __u64 addr, __u64 *v)
{
	if (!win_word(w, addr, v))
		return 0;
	return read_stack(addr, v);
}

/*
 * A walk starts with an empty window: what is there is another walk's. The
 * walked task is the current one in every caller.
 */
static __always_inline void stack_window_reset(void)
{
	__u32 zero = 0;
	struct stack_win *w = bpf_map_lookup_elem(&stack_window, &zero);

	if (w) {
		w->len = 0;
		w->top = bpf_get_current_task_btf()->mm->start_stack;
		w->anon_start = w->anon_end = 0;
		w->anon_tried = 0;
	}
}

static __always_inline long unwind_fail(struct ustate *st, __u32 counter)
{
	count_var(counter);
	st->stop = UNW_FAIL;
	return 1;
}

/*
 * Frame-pointer step: [bp] = caller's bp, [bp+8] = return address, believed
 * only if the frame is 8-byte aligned and lies above the stack pointer
 * (within 1 MiB) and the return address lands in executable code the
 * process has (a mapping of its description, or anonymous code found in
 * this walk): code that uses RBP as a general register would otherwise
 * send the walk to garbage.
 * Returns 0, or -1 with the registers untouched.
 */
struct fpregs {
	__u64 ip, sp, bp;
	__u32 nomap; /* ip is in no mapping of info: anonymous code (anon_find), or no step */
	__u32 pad;
};

/*
 * A global function: inlined, its checks multiplied the states the verifier
 * carries through every unwind_step path that may fall back to it (the
 * unwinder was two thirds of the CPU object's verification, the bulk of
 * -a's start-up).
 */
__noinline int fp_try_regs(struct bpf_proc_unwind *info, struct fpregs *r, int lazy)
{
	struct anon_range ar;
	struct stack_win *w;
	__u32 zero = 0;
	__u64 ra, bp;

	if (!info || !r || !r->bp || (r->bp & 7) || r->bp < r->sp || r->bp - r->sp > (1 << 20))
		return -1;
	w = bpf_map_lookup_elem(&stack_window, &zero);
	if (!w)
		return -1;
	if (r->nomap && r->ip - w->anon_start >= w->anon_end - w->anon_start) {
		if (lazy || w->anon_tried)
			return -1;
		w->anon_tried = 1;
		if (anon_find(&ar, r->ip))
			return -1;
		w->anon_start = ar.start;
		w->anon_end = ar.end;
	}
	/* the lower word first: a refill copies upwards from it (see unwind_frame) */
	if (read_stack(r->bp, &bp) || read_stack(r->bp + 8, &ra))
		return -1;
	if (ra - w->anon_start >= w->anon_end - w->anon_start && !find_umap(info, ra, lazy))
		return -1;
	r->sp = r->bp + 16;
	r->bp = bp;
	r->ip = ra;
	return 0;
}

static __always_inline int fp_try(struct ustate *st, bool nomap)
{
	struct fpregs r = { .ip = st->ip, .sp = st->sp, .bp = st->bp, .nomap = nomap };

	if (fp_try_regs(st->info, &r, st->lazy))
		return -1;
	st->sp = r.sp;
	st->bp = r.bp;
	st->ip = r.ip;
	st->exact_ip = false;
	return 0;
}

/* A file without CFI: frame pointers, a zero RBP is the outermost frame. */
static __always_inline long fp_step(struct ustate *st)
{
	if (!st->bp) {
		st->stop = UNW_END;
		count(CNT_UNW_OK);
		return 1;
	}
	if (fp_try(st, false))
		return unwind_fail(st, CNT_UNW_BAD_FP);
	return 0;
}

/*
 * A frame the tables cannot step (no row, an unsupported rule, no table,
 * anonymous code): one frame-pointer step, believed only if the frame it
 * pops lies above the current stack pointer and the return address lands in
 * executable code the process has mapped. The next frame goes back to the
 * tables. Frames reached so are counted and the sample flagged; a step that
 * fails the checks stops the walk under the original reason.
 */
static __always_inline long fp_fallback(struct ustate *st, __u32 reason)
{
	if (fp_try(st, false))
		return unwind_fail(st, reason);
	count(CNT_UNW_FP_FALLBACK);
	st->heuristic = true;
	return 0;
}

/* One frame: 0 to go on, 1 when the walk stopped (st->stop says why). */
static __always_inline long unwind_frame(struct ustate *st)
{
	const struct bpf_umap *m;
	struct bpf_urow row, *r = &row;
	__u64 cfa, ra, pc;
	__u8 cfa_rule, rbp_rule;
	__u32 reason;

	if (!st->ip) {
		st->stop = UNW_END;
		count(CNT_UNW_OK);
		return 1;
	}
	if (st->n >= MAX_USTACK) {
		st->stop = UNW_FULL;
		count(CNT_UNW_TRUNCATED);
		return 1;
	}
	st->frames[st->n & (MAX_USTACK - 1)] = st->ip;
	st->sps->sp[st->n & (MAX_USTACK - 1)] = st->sp;
	st->n++;
	/*
	 * The process's entry frame: the kernel starts a program with its stack
	 * pointer at mm->start_stack (argc), so a frame there has no caller.
	 * The dynamic loader's _start has no CFI, and its frame under
	 * _dl_start (a short process's start-up, a third of a 2 ms program's
	 * samples) read "[missing frames]".
	 */
	if (st->sp == st->top) {
		st->stop = UNW_END;
		count(CNT_UNW_ENTRY);
		count(CNT_UNW_OK);
		return 1;
	}

	m = st->last;
	if (!st->have_last || st->ip < m->start || st->ip >= m->end) {
		m = find_umap(st->info, st->ip, st->lazy);
		if (!m && st->lazy && !st->vma_tried) {
			st->vma_tried = true;
			if (!lazy_add(st->info, st->tgid, st->ip))
				m = find_umap(st->info, st->ip, true);
		}
		/*
		 * In none of the description's mappings: anonymous code it lacks
		 * (anon_find), by the validated frame-pointer step, or the walk
		 * stops. Going on from here, the walk's state differs from every
		 * other path's, and when the callback's second frame was checked
		 * after it the verifier's states multiplied (on_cpu_sample 26k ->
		 * 44k instructions processed): such a frame ends the callback's
		 * call (2), and the next call walks on.
		 */
		if (!m) {
			if (fp_try(st, true)) {
				st->stale = 1;
				return unwind_fail(st, CNT_UNW_NO_MAPPING);
			}
			count(CNT_UNW_FP_FALLBACK);
			st->heuristic = true;
			return 2;
		}
		st->last = m;
		st->have_last = 1;
	}
	switch (m->kind) {
	case UMAP_TABLE:
		break;
	case UMAP_FP:
		return fp_step(st);
	case UMAP_ANON:
		reason = CNT_UNW_ANON;
		goto fallback;
	case UMAP_TRAMP:
		/*
		 * A return address into a trampoline is right after its one
		 * call: the frame there is known, whatever the trampoline did
		 * with RBP (CPython's kept no frame pointer before 3.12.x/3.13.1).
		 * A leaf in its other instructions (rare) takes the step.
		 */
		if (st->exact_ip) {
			reason = CNT_UNW_ANON;
			goto fallback;
		}
		row.pc = 0;
		row.cfa_off = m->first;
		row.rbp_off8 = -(__s8)(m->count / 8);
		row.rules = UROW_CFA_SP | (m->count ? UROW_RBP_CFA : UROW_RBP_SAME) << 4;
		count(CNT_UNW_TRAMPOLINE);
		goto apply;
	case UMAP_PENDING:
		/*
		 * A file with CFI whose table is not built (not wanted yet, or
		 * evicted): stepped by frame pointers as before, and the sample
		 * wakes user space now, which wants the table from this sample
		 * on, not from its next 100 ms poll. A stack whose files come in
		 * one by one (each found by the walk the one before made
		 * possible) no longer waits a poll per file.
		 */
		st->gap = true;
		reason = CNT_UNW_TABLE_PENDING;
		goto fallback;
	default:
		st->stale = 1;
		reason = CNT_UNW_TABLE_PENDING;
		goto fallback;
	}
	/* a return address points after the call: look up the call itself */
	pc = st->ip - m->bias - (st->exact_ip ? 0 : 1);
	if (find_row(st->cache, st->gen, m->first, m->count, (__u32)pc, r)) {
		reason = CNT_UNW_NO_ROW;
		goto fallback;
	}
apply:
	cfa_rule = r->rules & 0xf;
	rbp_rule = r->rules >> 4;
	switch (cfa_rule) {
	case UROW_CFA_SP:
		cfa = st->sp + r->cfa_off;
		break;
	case UROW_CFA_FP:
		cfa = st->bp + r->cfa_off;
		break;
	case UROW_CFA_PLT:
		cfa = st->sp + 8 + ((__s64)(st->ip & 15) >= (r->cfa_off ? r->cfa_off : 11) ? 8 : 0);
		break;
	case UROW_CFA_END:
		st->stop = UNW_END;
		count(CNT_UNW_OK);
		return 1;
	case UROW_CFA_SIGNAL:
		if (read_stack(st->sp + SC_RIP, &st->ip) || read_stack(st->sp + SC_RBP, &st->bp) ||
		    read_stack(st->sp + SC_RSP, &st->sp))
			return unwind_fail(st, CNT_UNW_READ_FAILED);
		st->exact_ip = true;
		return 0;
	default:
		/*
		 * A partial table's gap (a huge file's function whose rows are
		 * not in yet): stepped by frame pointers, counted apart; a stop
		 * there stays "no row". Here, not a case of its own, so that the
		 * rules above are tested as before.
		 */
		if (cfa_rule == UROW_CFA_GAP) {
			count(CNT_UNW_PARTIAL_GAP);
			st->gap = true;
			reason = CNT_UNW_NO_ROW;
			goto fallback;
		}
		reason = CNT_UNW_UNSUPPORTED;
		goto fallback;
	}
	/*
	 * The saved RBP first: it lies below the return address, and a window
	 * that misses is refilled from the word read upwards. Read second, it
	 * missed the copy made for the return address and paid a second copy.
	 */
	if (rbp_rule == UROW_RBP_CFA) {
		if (read_word(st->win, cfa + (__s64)r->rbp_off8 * 8, &st->bp))
			return unwind_fail(st, CNT_UNW_READ_FAILED);
	} else if (rbp_rule != UROW_RBP_SAME) {
		st->bp = 0; /* unknown from here on; only a FP rule would need it */
	}
	if (read_word(st->win, cfa - 8, &ra))
		return unwind_fail(st, CNT_UNW_READ_FAILED);
	st->sp = cfa;
	st->ip = ra;
	st->exact_ip = false;
	return 0;
fallback:
	return fp_fallback(st, reason);
}

/*
 * The bpf_loop() callback: two frames per call. The verifier inlines
 * bpf_loop() into a loop that calls the callback directly, and on this
 * host a call and its return cost ~17 ns (retpolines, SRSO's safe
 * return), a quarter of a frame's step: a 64-frame walk made 64 calls, now
 * 32 (0.4-0.6 us less; four frames a call saved 0-0.27 us more for 2.8x
 * the instructions verified). The verifier checks the step twice a pass:
 * on_cpu_sample 14979 -> 22387 instructions processed.
 */
static long unwind_step(__u32 i, void *data)
{
	/* 2: a frame went on through anonymous code; the next call walks on */
	long r = unwind_frame(data);

	if (r)
		return r == 1;
	return unwind_frame(data) == 1;
}

/*
 * The three user-mode registers the unwinder starts from. ret_addr: ip is a
 * return address (the caller's frame, taken from [sp] at a function's entry),
 * so its row is looked up at ip - 1, as for every outer frame.
 */
struct uregs {
	__u64 ip, sp, bp;
	__u64 ret_addr;
};

/* x86-64 struct pt_regs as the UAPI (and bpf_perf_event_data) lays it out */
struct uapi_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
		flags, sp, ss;
};

/* The current task's user-mode registers as saved at kernel entry. */
static __always_inline void uregs_current(struct uregs *r)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

	r->ip = BPF_CORE_READ(regs, ip);
	r->sp = BPF_CORE_READ(regs, sp);
	r->bp = BPF_CORE_READ(regs, bp);
	r->ret_addr = 0;
	stack_window_reset();
}

/*
 * The user-mode registers at a perf_event sample: the interrupted registers
 * when the task was in user mode, else those saved at kernel entry.
 */
static __always_inline void uregs_perf(struct bpf_perf_event_data *ctx, struct uregs *r)
{
	/*
	 * The context is the UAPI pt_regs, which the verifier lets us read only
	 * in 8-byte words; vmlinux.h's kernel pt_regs has a 2-byte cs.
	 */
	const struct uapi_regs *u = (const void *)ctx;

	if (u->cs & 3) { /* interrupted in user mode */
		r->ip = u->ip;
		r->sp = u->sp;
		r->bp = u->bp;
		r->ret_addr = 0;
		stack_window_reset();
	} else {
		uregs_current(r);
	}
}

/* The registers at a uprobe (the context is the user-mode pt_regs). */
static __always_inline void uregs_uprobe(struct pt_regs *ctx, struct uregs *r)
{
	const struct uapi_regs *u = (const void *)ctx;

	r->ip = u->ip;
	r->sp = u->sp;
	r->bp = u->bp;
	r->ret_addr = 0;
	stack_window_reset();
}

/*
 * The caller's registers at a uprobe on a function's first instruction: the
 * return address on top of the stack is the caller's ip, the stack above it
 * the caller's, and rbp still the caller's (not yet pushed). Starting there
 * leaves the probed function itself out of the stack, as a return probe
 * would. [sp] is read through the stack window, which the caller has reset
 * (stack_window_reset) before: reads of the probed function's stack
 * arguments made in between share the window's one copy with the walk.
 * Returns 0, or -1 when [sp] cannot be read.
 */
static __always_inline int uregs_uprobe_caller(struct pt_regs *ctx, struct uregs *r)
{
	const struct uapi_regs *u = (const void *)ctx;

	r->sp = u->sp + 8;
	r->bp = u->bp;
	r->ret_addr = 1;
	return read_stack(u->sp, &r->ip);
}

/*
 * Describe the current process (tgid) from its early mappings into
 * lazy_desc (lazy_describe); its early_maps entry is made here on its
 * first sample, with the executable's text (mm->start_code, end_code) and
 * the vDSO in it, or on a later one where these were not set up yet (a
 * sample in the middle of the exec: without the retry the entry of such a
 * process never had either, and its vDSO frames ended its walks, its
 * executable found only by bpf_find_vma). A global function: the walk's caller is checked with one call. The
 * current task must be of tgid: true of every caller (samples, probes of
 * the running task). 0, or -1.
 */
__noinline int lazy_prepare(__u32 tgid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct bpf_proc_unwind *d;
	struct early_maps *e;
	__u64 mm;
	__u32 zero = 0;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != tgid)
		return -1;
	mm = (__u64)BPF_CORE_READ(task, mm);
	e = bpf_map_lookup_elem(&early_maps, &tgid);
	if (!e || e->mm != mm) {
		const struct early_maps *z = bpf_map_lookup_elem(&early_zero, &zero);

		if (!z || !mm || bpf_map_update_elem(&early_maps, &tgid, z, BPF_ANY))
			return -1;
		e = bpf_map_lookup_elem(&early_maps, &tgid);
		if (!e)
			return -1;
		e->mm = mm;
	}
	if (!(e->flags & EARLY_F_EXE)) {
		struct early_map x = { .off = EARLY_EXE };

		x.start = BPF_CORE_READ(task, mm, start_code);
		x.end = BPF_CORE_READ(task, mm, end_code);
		x.ino = BPF_CORE_READ(task, mm, exe_file, f_inode, i_ino);
		x.dev = BPF_CORE_READ(task, mm, exe_file, f_inode, i_sb, s_dev);
		if (x.start && x.end > x.start && x.ino && early_append(e, &x) >= 0)
			e->flags |= EARLY_F_EXE;
	}
	if (!(e->flags & EARLY_F_VDSO)) {
		/*
		 * The vDSO: its text at mm->context.vdso, the image's size long,
		 * its table in file_unwind under a key of its own (built when
		 * user space starts). A 2 ms program spending its time in
		 * clock_gettime is walked through the vDSO from its first sample
		 * (bpf_find_vma gives it only as anonymous code, and the vDSO
		 * keeps no frame pointer).
		 */
		struct early_map x = { .dev = FILE_UNWIND_VDSO_DEV, .ino = FILE_UNWIND_VDSO_INO };

		x.start = (__u64)BPF_CORE_READ(task, mm, context.vdso);
		x.end = x.start + BPF_CORE_READ(task, mm, context.vdso_image, size);
		if (x.start && x.end > x.start && early_append(e, &x) >= 0)
			e->flags |= EARLY_F_VDSO;
	}
	d = bpf_map_lookup_elem(&lazy_desc, &zero);
	return lazy_describe(d, e);
}

/* The frames a walk fills: a type, so that a global function's argument has their size. */
struct uframes {
	__u64 f[MAX_USTACK];
};

/* What unwind_user hands the walk besides the description and the frames. */
struct uwalk {
	struct uregs r;
	__u32 tgid;
	__u32 lazy;  /* the description is lazy_desc's (not described yet) */
	__s32 leaf;  /* r.ip's mapping in the description, or -1 (not searched) */
	__u16 flags; /* out: SAMPLE_F_* bits */
};

/*
 * The walk from w->r through info into frames; the frame count. A global
 * function: the verifier checks it once, with info a plain pointer to a
 * description. Inlined in unwind_user, info was proc_unwind's value on one
 * path and lazy_desc's on the other (map values of different maps), and
 * the bpf_loop body was checked once per combination of those with the
 * walk's other pointers.
 */
__noinline int unwind_walk(struct bpf_proc_unwind *info, struct uframes *frames, struct uwalk *w)
{
	struct ustate st = {};
	__u32 zero = 0, *gen;

	if (!info || !frames || !w)
		return -1;
	st.info = info;
	st.frames = frames->f;
	st.exact_ip = !w->r.ret_addr;
	st.lazy = w->lazy;
	st.tgid = w->tgid;
	st.cache = bpf_map_lookup_elem(&row_cache, &zero);
	st.win = bpf_map_lookup_elem(&stack_window, &zero);
	st.sps = bpf_map_lookup_elem(&ustack_sp, &zero);
	if (!st.cache || !st.win || !st.sps)
		return -1;
	st.top = st.win->top;
	gen = bpf_map_lookup_elem(&unwind_gen, &zero);
	if (gen)
		st.gen = *gen;
	st.ip = w->r.ip;
	st.sp = w->r.sp;
	st.bp = w->r.bp;
	st.n = opaque_zero_var; /* 0, unknown to the verifier (see there) */
	st.stop = opaque_zero_var;
	st.stale = opaque_zero_var;
	st.heuristic = opaque_zero_var & 1;
	st.gap = opaque_zero_var & 1;
	/*
	 * The leaf's mapping as unwind_user found it: the first step does not
	 * search it again (unwind_frame checks it holds ip all the same).
	 * leaf is read from *w: unknown to the verifier, as opaque_zero_var.
	 */
	st.last = &st.info->maps[w->leaf & (MAX_UMAPS - 1)];
	st.have_last = w->leaf >= 0;
	st.vma_tried = opaque_zero_var & 1;
	/*
	 * Two frames a call, one after a step through anonymous code (see
	 * unwind_frame): MAX_USTACK + 1 calls hold any walk; it ends the loop
	 * when it stops.
	 */
	bpf_loop(MAX_USTACK + 1, unwind_step, &st, 0);
	if (st.stop == UNW_FULL)
		w->flags |= SAMPLE_F_USTACK_TRUNC;
	else if (st.stop == UNW_FAIL)
		w->flags |= SAMPLE_F_UNWIND_STOPPED;
	if (st.stale)
		w->flags |= SAMPLE_F_STALE_MAPS;
	if (st.heuristic)
		w->flags |= SAMPLE_F_UNWIND_HEURISTIC;
	if (st.gap)
		w->flags |= SAMPLE_F_UNWIND_GAP;
	st.sps->n = st.n;
	return st.n;
}

/*
 * Unwind the user stack of the current task from *r into frames[0..MAX_USTACK).
 * Returns the number of frames, or -1 when the process has no unwind info
 * (the caller falls back to frame pointers). *flags gets SAMPLE_F_* bits.
 */
static __always_inline int unwind_user(const struct uregs *r, __u32 tgid, __u64 *frames,
				       __u16 *flags)
{
	struct uwalk w = { .r = *r, .tgid = tgid, .leaf = -1 };
	struct bpf_proc_unwind *info;
	__u32 zero = 0;
	int n;

	info = bpf_map_lookup_elem(&proc_unwind, &tgid);
	/*
	 * A description without the leaf's mapping is of the process before
	 * its exec (a forked child described before it exec'ed, or the new
	 * image's first mappings not seen yet): walked as not described.
	 */
	if (info) {
		/* an index, which the walk's first step takes (not searching again) */
		w.leaf = find_umap_idx(info, r->ip, 0,
				       info->nmaps > MAX_UMAPS ? MAX_UMAPS : info->nmaps);
		if (w.leaf < 0) {
			count(CNT_UNW_STALE_DESC);
			info = NULL;
		}
	}
	if (!info) {
		count(CNT_UNW_NO_PROC);
		if (lazy_prepare(tgid))
			return -1;
		info = bpf_map_lookup_elem(&lazy_desc, &zero);
		if (!info)
			return -1;
		w.lazy = 1;
		/* still not described: user space is told (the caller's flag) */
		w.flags = SAMPLE_F_NO_UNWIND_INFO;
		count(CNT_UNW_LAZY);
	}
	n = unwind_walk(info, (struct uframes *)frames, &w);
	*flags |= w.flags;
	return n;
}

/*
 * The user stack into s->frames[base...] per unwind_mode: table-driven, else
 * (auto) frame pointers through bpf_get_stack(ctx), which any tracing
 * program type may call. Returns the frame count. Each program type wraps
 * this in a global function of its own (the verifier checks it once).
 */
static __always_inline int user_stack(void *ctx, const struct uregs *r, struct prof_sample *s,
				      __u32 base)
{
	__u64 *uframes;
	__u16 flags = 0;
	long n = -1;

	if (base > MAX_KSTACK)
		return 0;
	uframes = &s->frames[base];
	ustack_sp_reset();
	if (unwind_mode != UNWIND_FP) {
		n = unwind_user(r, s->hdr.pid, uframes, &flags);
		if (n < 0)
			flags |= SAMPLE_F_NO_UNWIND_INFO;
	}
	if (n < 0 && unwind_mode == UNWIND_DWARF) {
		/* no tables for this process yet: its leaf frame, nothing invented */
		uframes[0] = r->ip;
		n = 1;
		flags |= SAMPLE_F_UNWIND_STOPPED;
	}
	if (n < 0) {
		if (unwind_mode == UNWIND_AUTO)
			flags |= SAMPLE_F_UNWIND_FP;
		n = bpf_get_stack(ctx, uframes, MAX_USTACK * sizeof(__u64), BPF_F_USER_STACK);
		/*
		 * From a function's entry the frame-pointer chain goes [ctx ip,
		 * caller's return address, ...]: the caller's own frame is
		 * missing and the callee's is there; r->ip is the caller.
		 */
		if (n >= (long)sizeof(__u64) && r->ret_addr)
			uframes[0] = r->ip;
		if (n < 0) {
			flags |= SAMPLE_F_USTACK_ERR;
			count(CNT_USTACK_ERR);
			n = 0;
		} else {
			n /= sizeof(__u64);
			if (n >= MAX_USTACK) {
				n = MAX_USTACK;
				flags |= SAMPLE_F_USTACK_TRUNC;
			}
		}
	}
	s->hdr.flags |= flags;
	return n > MAX_USTACK ? MAX_USTACK : n;
}

#endif
