/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frame walker. For a thread of a known interpreter (py_procs) whose
 * PyThreadState user space has found (py_threads), follow the frame chain
 * from the thread state and emit (code object, raw instruction position |
 * flags) per frame, leaf first. Layouts come from user space per process,
 * so no version is hard-coded here.
 *
 * User space reads a code object's names and line table when it drains the
 * ring buffer, by which time a process that just exited is gone. So the
 * first time a process's sample shows a code object, BPF also sends a
 * snapshot of it (SAMPLE_PYCODE, before the sample): its header, qualname,
 * filename and line table bytes, raw, for user space to validate.
 */
#ifndef BPFPROF_PYTHON_BPF_H
#define BPFPROF_PYTHON_BPF_H

#include "common.bpf.h"

const volatile bool want_python = true;

/*
 * Written only by user space, which deletes what it wrote (pytrack.c):
 * entries allocated as they come, not preallocated at map creation (an
 * LRU's 65536 cost ~2 ms of -a's start-up). A thread that finds py_threads
 * full is counted by its samples (CNT_PY_NO_THREAD).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct bpf_pyproc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);   /* tid */
	__type(value, __u64); /* PyThreadState * */
} py_threads SEC(".maps");

/* Interpreter files probed once, by inode: written by user space only (pytrack.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 256);
	__type(key, struct file_unwind_key);
	__type(value, struct bpf_pyfile);
} py_files SEC(".maps");

/* The py_procs entry py_early_proc makes (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_pyproc);
} py_early_buf SEC(".maps");

/*
 * Frames are copied through a window. From 3.11 on, _PyInterpreterFrames
 * live in the thread's data stack, a caller below its callee: one copy of
 * the page up to the leaf frame's end holds the next frames too, and a
 * 30-frame walk costs a handful of probe reads, not 30. (Generator frames
 * live in their generator object: a miss, one more copy.) 3.8-3.10 frame
 * objects are scattered on the heap: one frame per copy, as before.
 */
#define PYWIN	   4096
#define PYWIN_PAGE 4096 /* a copy never starts below its frame's page */

struct pywin {
	__u64 base;
	__u32 len; /* 0: empty */
	__u32 pad;
	__u8 data[PYWIN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pywin);
} pyframe SEC(".maps");

/* Code objects whose snapshot was sent, per process image (bpf_pyproc.snap_gen). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct pycode_seen_key);
	__type(value, __u8);
} pycode_seen SEC(".maps");

/*
 * In front of pycode_seen, per CPU, direct mapped: a sample of 30 frames
 * whose code objects were all sent pays 30 compares, not 30 hash lookups.
 * snap_epoch invalidates it when user space drops keys of pycode_seen.
 */
#define PYCACHE_SLOTS 512

struct pycache_slot {
	__u64 code;
	__u32 tgid;
	__u16 gen;
	__u16 epoch;
};

struct pycache {
	/*
	 * The walk's new code objects, snapshotted after it. Here, not in the
	 * walk's stack state: the verifier would tell apart every count of them
	 * in each bpf_loop iteration (10x the instructions verified).
	 */
	__u64 newc[PYSNAP_PER_SAMPLE]; /* code | tag << 48 */
	__u32 nnew;
	__u32 deferred;
	struct pycache_slot s[PYCACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pycache);
} pycode_cache SEC(".maps");

struct pysnap_buf {
	struct prof_sample_hdr hdr;
	struct pycode_snap snap;
	__u8 obj[64]; /* a str or bytes object's header (not sent) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pysnap_buf);
} pysnap_buf SEC(".maps");

struct pystate {
	const struct bpf_pyproc *pp;
	struct pywin *win;
	struct pycache *cache; /* NULL: no snapshots for this process */
	__u32 tgid;
	__u16 gen, epoch;
	__u64 frame;
	__u64 *out; /* the sample's frames[] */
	__u32 base; /* index of the first Python word in out */
	__u32 n;    /* frames emitted */
	__u32 last; /* index of the last emitted frame's second word + 1, 0: none */
	__u32 err;
	__u32 full;
	struct ustack_sp *sps; /* never NULL: the entry frames met go to sps->shim */
};

/*
 * Pointer-sized reads outside the frame copies (thread state, GIL) go through
 * this one global function: fewer inlined helper calls, fewer verifier paths.
 */
__noinline int py_read(__u64 addr, __u64 *v)
{
	if (!v)
		return -1;
	return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
}

#define PY_WORDS (MAX_KSTACK + MAX_USTACK + 2 * MAX_PYSTACK)

/* Thread states looked at per sample by py_find_tstate: a new process has one or two. */
#define PY_TS_WALK_MAX 8

struct py_early_ctx {
	const struct early_maps *e;
	const struct bpf_pyfile *f;
	__u64 bias;
};

static long py_early_one(__u32 i, void *data)
{
	struct py_early_ctx *c = data;
	const struct early_map *m = &c->e->m[i & (EARLY_MAPS - 1)];
	struct file_unwind_key k = { .dev = m->dev, .ino = m->ino };
	const struct bpf_pyfile *f = bpf_map_lookup_elem(&py_files, &k);
	__u64 off;

	if (!f)
		return 0;
	/* the executable's text comes from mm->start_code: its segment's p_vaddr */
	off = m->off == EARLY_EXE ? f->off : m->off;
	if (off < f->off || off >= f->end)
		return 0;
	c->f = f;
	c->bias = m->start - off - f->delta;
	return 1;
}

/*
 * A process user space has not probed yet, whose early mappings (the
 * unwinder's, from its samples) hold the text of an interpreter file
 * probed before: its py_procs entry, made here from the file's (py_files),
 * so that a short command's samples have Python frames from its
 * interpreter's start, however late user space is. User space deletes the
 * entry when the process exits or execs, and overwrites it when it probes
 * the process. 0: made (or there already); 1: a young process (early
 * mappings kept) with no interpreter file mapped yet, which it may map
 * later; -1: none to be made here (user space describes the process, and
 * bumps py_gen when it finds an interpreter in it).
 */
__noinline int py_early_proc(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_early_ctx c = {};
	struct bpf_pyproc *pp;
	__u32 zero = 0, n;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != tgid)
		return -1;
	c.e = bpf_map_lookup_elem(&early_maps, &tgid);
	if (!c.e || c.e->mm != (__u64)task->mm)
		return -1;
	n = c.e->n;
	if (n > EARLY_MAPS)
		n = EARLY_MAPS;
	bpf_loop(n, py_early_one, &c, 0);
	pp = bpf_map_lookup_elem(&py_early_buf, &zero);
	if (!c.f)
		return 1;
	if (!pp)
		return -1;
	*pp = c.f->pp;
	pp->runtime += c.bias;
	pp->ts_walk = 1;
	/* another CPU's sample of the process may have made it first */
	if (bpf_map_update_elem(&py_procs, &tgid, pp, BPF_NOEXIST))
		return 0;
	count(CNT_PY_EARLY_PROC);
	return 0;
}

/*
 * The current thread's PyThreadState, found in the first interpreter's
 * thread list when py_threads does not have it yet (pp->ts_walk):
 * a thread state's thread_id is its thread's pthread_t, which with glibc
 * and musl on x86-64 is the thread's fs base. Without this, a process's
 * samples between its interpreter's start and user space's reaction (a
 * drain, a read of the list; tens of ms on a loaded host: a short script's
 * whole run) had no Python frames, nor had a new thread's first samples
 * (torch's threads: 1041 of 2544 Python samples on a GPU host). New thread
 * states go to the head of the list: *head is the head when the caller last
 * missed (0: never), and while it is unchanged the thread is known to have
 * no state (a C library's thread: one read a sample, no walk); it is set
 * to the head seen. Returns 0 and the state in *out, or -1.
 */
__noinline int py_find_tstate(const struct bpf_pyproc *pp, __u64 *out, __u64 *head)
{
#if defined(__TARGET_ARCH_x86)
	__u64 interp = 0, ts = 0, id = 0, back = 0, hid = 0, found = 0, fsbase;

	if (!pp || !out || !head || !pp->runtime)
		return -1;
	fsbase = bpf_get_current_task_btf()->thread.fsbase;
	if (!fsbase || py_read(pp->runtime + pp->rt_interp_head, &interp) || !interp ||
	    py_read(interp + pp->is_threads_head, &ts))
		return -1;
	/* the list as it was when the caller last missed: still no state for it */
	if (*head && *head == ts)
		return -1;
	*head = ts;
	for (int i = 0; i < PY_TS_WALK_MAX && ts; i++) {
		if (py_read(ts + pp->ts_thread_id, &id) || py_read(ts + pp->ts_interp, &back) ||
		    back != interp)
			return -1;
		/*
		 * the deepest match: a state the starter made for a thread not
		 * begun yet carries the starter's id up to 3.11 (below), and is
		 * newer than the starter's own
		 */
		if (id == fsbase)
			found = ts;
		/*
		 * Not bound to its thread yet: threading makes the new thread's
		 * state in the thread that starts it, at the list's head, and the
		 * new thread sets thread_id when it begins. It may be this
		 * thread's: the head alone cannot say this thread has none.
		 */
		if (!id)
			*head = 0;
		/*
		 * Up to 3.11 the new state carries the id of the thread that made
		 * it (the starter's, whose own state comes later in the list) until
		 * the new thread binds it: a head whose id is seen again is such a
		 * state, perhaps this thread's.
		 */
		if (!i)
			hid = id;
		else if (id == hid)
			*head = 0;
		if (py_read(ts + pp->ts_next, &ts))
			break;
	}
	if (found) {
		*out = found;
		return 0;
	}
#endif
	return -1;
}

/*
 * Free-threaded 3.14+: a thread other than the first runs its own copy of a
 * code object's bytecode, code->co_tlbc->entries[index] (a _PyCodeArray:
 * size, then entries; entry 0 is co_code_adaptive, the copy user space
 * decodes positions against). The position is moved from the copy onto
 * entry 0, so that the rest of the pipeline does not know copies exist.
 * Returns instr_ptr unchanged when the array cannot be read or the index is
 * not in it (the position then decodes to no line, never to a wrong one:
 * user space refuses offsets outside the code).
 */
__noinline __u64 py_tlbc_rebase(__u64 code, __u32 index, __u32 co_tlbc, __u64 instr_ptr)
{
	__u64 arr = 0, head[2] = {}, copy = 0;

	if (py_read(code + co_tlbc, &arr) || !arr ||
	    bpf_probe_read_user(head, sizeof(head), (const void *)arr) || index >= head[0] ||
	    index > 4096 || py_read(arr + 8 + 8 * (__u64)index, &copy) || !copy || instr_ptr < copy)
		return instr_ptr;
	return instr_ptr - copy + head[1];
}

/*
 * Make the frame's first span bytes present in the window; returns the
 * frame's offset in it, or -1 when they cannot be read. A global function:
 * inlined, its branches multiplied the verifier's states in py_step.
 */
__noinline long py_window(struct pywin *w, __u64 frame, __u32 span, __u32 batch)
{
	__u64 start = frame, end = frame + span, page = frame & ~(__u64)(PYWIN_PAGE - 1), len;

	if (!w)
		return -1;
	if (frame >= w->base && end <= w->base + w->len)
		return frame - w->base;
	if (batch) {
		start = end > PYWIN ? end - PYWIN : 0;
		if (start < page)
			start = page;
	}
	len = end - start;
	if (len < 8 || len > PYWIN || bpf_probe_read_user(w->data, len, (const void *)start)) {
		w->len = 0;
		return -1;
	}
	w->base = start;
	w->len = len;
	return frame - start;
}

/* The u64 at off in the frame at fo in the window, or -1 if off lies outside the frame. */
static __always_inline int field(const struct pywin *w, long fo, __s32 off, __u32 span, __u64 *v)
{
	__u64 o = fo + off;

	if (off < 0 || (__u32)off + 8 > span || o > PYWIN - 8)
		return -1;
	*v = *(const __u64 *)&w->data[o & (PYWIN - 1)];
	return 0;
}

/*
 * Was code's snapshot sent? If not, keep it for after the walk (at most
 * PYSNAP_PER_SAMPLE per sample; the rest wait for a later sample).
 */
static __always_inline void py_note(struct pystate *st, __u64 code, __u16 tag)
{
	struct pycode_seen_key k = { .tgid = st->tgid, .gen = st->gen, .tag = tag, .code = code };
	struct pycache_slot *sl;
	__u32 h, n;

	if (!st->cache || !code)
		return;
	/* user addresses are below 2^48: the tag rides in the top bits from here on */
	code |= (__u64)tag << 48;
	h = ((__u32)(code >> 4) ^ (__u32)(code >> 20) ^ st->tgid) * 0x9e3779b1u;
	sl = &st->cache->s[(h >> 16) & (PYCACHE_SLOTS - 1)];
	if (sl->code == code && sl->tgid == st->tgid && sl->gen == st->gen &&
	    sl->epoch == st->epoch)
		return;
	if (bpf_map_lookup_elem(&pycode_seen, &k)) {
		sl->code = code;
		sl->tgid = st->tgid;
		sl->gen = st->gen;
		sl->epoch = st->epoch;
		return;
	}
	n = st->cache->nnew;
	if (n >= PYSNAP_PER_SAMPLE) {
		st->cache->deferred = 1;
		return;
	}
	/*
	 * Recursion repeats a code object in consecutive frames: keep it once.
	 * Other repeats cost a slot; py_snapshot finds them sent already.
	 */
	if (n && st->cache->newc[(n - 1) & (PYSNAP_PER_SAMPLE - 1)] == code)
		return;
	st->cache->newc[n] = code;
	st->cache->nnew = n + 1;
}

/*
 * One frame: copy its first frame_span bytes in one read (every field we
 * need is there in every version), then take the fields from the copy.
 */
static long py_step(__u32 i, void *data)
{
	struct pystate *st = data;
	const struct bpf_pyproc *pp = st->pp;
	__u64 code = 0, raw = 0, next = 0, flags = 0, w = 0, g = 0;
	struct pywin *b = st->win;
	__u32 idx, span = pp->frame_span;
	__u16 tag = 0;
	long fo;

	if (!st->frame)
		return 1;
	if (st->n >= MAX_PYSTACK) {
		st->full = 1;
		return 1;
	}
	if (!b || span < 8 || span > PYFRAME_SPAN) {
		st->err = 1;
		return 1;
	}
	/* the window holds the frame (its callee's copy had it): no call */
	fo = st->frame - b->base;
	if (st->frame < b->base || fo + span > b->len)
		fo = py_window(b, st->frame, span, pp->model != PY_MODEL_FRAMEOBJ);
	if (fo < 0 || field(b, fo, pp->frame_back, span, &next)) {
		st->err = 1;
		return 1;
	}
	if (pp->frame_owner >= 0) {
		if (field(b, fo, pp->frame_owner, span, &w)) {
			st->err = 1;
			return 1;
		}
		if ((w & 0xff) >= pp->owner_cstack) {
			__u32 k = st->sps->nshim;

			/* its address: in the C stack of its eval call (py_mark_eval) */
			if (k < PY_MAX_SHIMS) {
				st->sps->shim[k] = st->frame;
				st->sps->nshim = k + 1;
			}
			/* a shim frame between two eval calls: the frame emitted before began one */
			if (st->last) {
				idx = st->last - 1;
				if (idx < PY_WORDS)
					st->out[idx] |= PYFRAME_F_ENTRY;
			}
			st->frame = next;
			return 0;
		}
	}
	if (field(b, fo, pp->frame_code, span, &code) || field(b, fo, pp->frame_instr, span, &w)) {
		st->err = 1;
		return 1;
	}
	code &= ~7ULL; /* 3.14 tags f_executable's low bits; objects are 8-aligned */
	if (pp->frame_tlbc && pp->co_tlbc && !field(b, fo, pp->frame_tlbc, span, &raw) &&
	    (__u32)raw && code)
		w = py_tlbc_rebase(code, (__u32)raw, pp->co_tlbc, w);
	if (pp->frame_globals >= 0 && !(code >> 48) && !field(b, fo, pp->frame_globals, span, &g))
		tag = PYCODE_TAG(g);
	if (pp->model == PY_MODEL_FRAMEOBJ) {
		raw = (__u32)w;		 /* int f_lasti */
		flags = PYFRAME_F_ENTRY; /* one eval call per frame object */
	} else {
		raw = w;
		if (pp->frame_is_entry >= 0 && !field(b, fo, pp->frame_is_entry, span, &w) &&
		    (w & 0xff))
			flags = PYFRAME_F_ENTRY;
	}
	py_note(st, code, tag);
	idx = st->base + 2 * st->n;
	if (idx > PY_WORDS - 2) {
		st->full = 1;
		return 1;
	}
	{
		__u64 *slot = &st->out[idx]; /* one bounded index for both words */

		slot[0] = code;
		slot[1] = (raw & PYFRAME_INSTR_MASK) | flags;
	}
	st->last = idx + 2;
	st->n++;
	st->frame = next;
	return 0;
}

/* The u64 / u32 at off in the first n bytes of buf (0 outside them). */
static __always_inline __u64 snap_u64(const __u8 *buf, __s32 off, __u32 n)
{
	if (off < 0 || (__u32)off + 8 > n || off > 248)
		return 0;
	return *(const __u64 *)&buf[off & 255];
}

static __always_inline __u32 snap_u32(const __u8 *buf, __s32 off, __u32 n)
{
	if (off < 0 || (__u32)off + 4 > n || off > 252)
		return 0;
	return *(const __u32 *)&buf[off & 255];
}

/*
 * The str (or bytes) object at addr: its type, length and state as found,
 * and up to max bytes of its data into data[off...]. Returns where the next
 * object's data goes. Nothing is checked here but the bounds: user space
 * validates.
 */
static __always_inline __u32 snap_obj(struct pysnap_buf *b, struct pysnap_obj *o,
				      const struct bpf_pyproc *pp, __u64 addr, __u32 off, __u32 max,
				      bool str)
{
	__u32 hsize = str ? pp->str_ascii_size : pp->bytes_sval, state = 0, kind = 1;
	__u64 len, nbytes, src;

	o->type = 0;
	o->len = 0;
	o->state = 0;
	o->off = off;
	o->bytes = 0;
	if (!addr || hsize < 16 || hsize > sizeof(b->obj) ||
	    bpf_probe_read_user(b->obj, hsize, (const void *)addr))
		return off;
	o->type = snap_u64(b->obj, pp->ob_type, hsize);
	if (str) {
		len = snap_u64(b->obj, pp->str_length, hsize);
		state = snap_u32(b->obj, pp->str_state, hsize);
		kind = (state >> (pp->str_kind_shift & 31)) & 7;
		src = addr + ((state >> ((pp->str_kind_shift + 4) & 31)) & 1
				      ? pp->str_ascii_size
				      : pp->str_compact_size);
	} else {
		len = snap_u64(b->obj, pp->bytes_size, hsize);
		src = addr + pp->bytes_sval;
	}
	o->len = len;
	o->state = state;
	if (kind != 1 && kind != 2 && kind != 4)
		return off;
	nbytes = len > max ? max : len * kind;
	nbytes &= ~(__u64)(kind - 1); /* whole code points */
	asm volatile("" : "+r"(nbytes));
	if (nbytes > max || off > PYSNAP_DATA - max)
		return off;
	if (bpf_probe_read_user(&b->snap.data[off], nbytes, (const void *)src))
		return off;
	o->bytes = nbytes;
	return off + nbytes;
}

/*
 * Send the snapshot of the code object at tagged's low 48 bits (tgid's),
 * with the tag of its frame in the top 16 (py_note), and remember it was
 * sent. A global function: verified once, called up to
 * PYSNAP_PER_SAMPLE times per sample.
 */
__noinline int py_snapshot(__u32 tgid, __u32 tid, __u64 tagged)
{
	__u64 code = tagged & ((1ULL << 48) - 1);
	struct pycode_seen_key k = { .tgid = tgid, .tag = tagged >> 48, .code = code };
	const struct bpf_pyproc *pp;
	struct pysnap_buf *b;
	__u32 zero = 0, n, used;
	__u64 size;
	__u8 one = 1;

	pp = bpf_map_lookup_elem(&py_procs, &tgid);
	b = bpf_map_lookup_elem(&pysnap_buf, &zero);
	if (!pp || !b)
		return 0;
	k.gen = pp->snap_gen;
	if (bpf_map_lookup_elem(&pycode_seen, &k))
		return 0; /* a repeat in one sample, or another CPU sent it */
	n = pp->code_read;
	if (n < 8 || n > PYSNAP_CODE_MAX)
		return 0;
	if (bpf_probe_read_user(b->snap.data, n, (const void *)code)) {
		/* not a code object we can read: do not try on every sample */
		count(CNT_PY_SNAP_UNREADABLE);
		bpf_map_update_elem(&pycode_seen, &k, &one, BPF_ANY);
		return 0;
	}
	hdr_init(&b->hdr, SAMPLE_PYCODE, 0, tgid, tid);
	__builtin_memset(b->hdr.comm, 0, sizeof(b->hdr.comm));
	__builtin_memset(b->hdr.pcomm, 0, sizeof(b->hdr.pcomm));
	b->snap.code = code;
	b->snap.code_bytes = n;
	b->snap.tag = k.tag;
	b->snap.pad[0] = b->snap.pad[1] = 0;
	used = snap_obj(b, &b->snap.name, pp, snap_u64(b->snap.data, pp->co_name, n), n,
			PYSNAP_NAME_MAX, true);
	used = snap_obj(b, &b->snap.file, pp, snap_u64(b->snap.data, pp->co_filename, n), used,
			PYSNAP_FILE_MAX, true);
	used = snap_obj(b, &b->snap.lines, pp, snap_u64(b->snap.data, pp->co_linetable, n), used,
			PYSNAP_LINES_MAX, false);
	size = sizeof(b->hdr) + __builtin_offsetof(struct pycode_snap, data) + (__u64)used;
	if (size > sizeof(b->hdr) + sizeof(b->snap))
		size = sizeof(b->hdr) + sizeof(b->snap);
	if (output(b, size, false)) {
		count(CNT_PY_SNAP_LOST); /* not marked sent: tried again */
		return 0;
	}
	count(CNT_PY_SNAP_SENT);
	bpf_map_update_elem(&pycode_seen, &k, &one, BPF_ANY);
	return 0;
}

/*
 * Which native frames are eval loop calls. From 3.12 on each call of
 * _PyEval_EvalFrameDefault links a shim frame (an entry frame, owner
 * FRAME_OWNED_BY_CSTACK, or INTERPRETER in 3.15) that is a local of that
 * call: its address lies in that call's stack frame, [sp[i], sp[i+1]) of
 * the native frame i that the table walk emitted. Such a frame's word gets
 * UFRAME_F_PYEVAL, and user space merges the Python calls there whatever
 * the frame's symbol: Debian's 3.14 and 3.15 run the loop in a partition of
 * _PyEval_EvalFrameDefault that no exported symbol covers, and their
 * Python frames went to the stack's root. Shims and native frames are both
 * in stack order (leaf first, addresses rising): one merge pass. Shims
 * elsewhere (a thread's base frame in its data stack) match no frame.
 */
struct py_mark_ctx {
	struct ustack_sp *sps;
	struct prof_sample *s;
	__u32 ubase; /* the sample's native user frames start at frames[ubase] */
	__u32 n, ns, i, j;
};

static long py_mark_step(__u32 step, void *data)
{
	struct py_mark_ctx *c = data;
	__u64 a, lo, hi;
	__u32 i = c->i, j = c->j;

	if (i >= c->n || j >= c->ns || i >= MAX_USTACK || j >= PY_MAX_SHIMS)
		return 1;
	a = c->sps->shim[j];
	lo = c->sps->sp[i];
	hi = i + 1 < c->n && i + 1 < MAX_USTACK ? c->sps->sp[(i + 1) & (MAX_USTACK - 1)] : ~0ULL;
	if (a < lo) {
		c->j = j + 1;
	} else if (a >= hi) {
		c->i = i + 1;
	} else {
		__u32 idx = c->ubase + i;

		if (idx >= MAX_KSTACK + MAX_USTACK)
			return 1;
		c->s->frames[idx] |= UFRAME_F_PYEVAL;
		c->j = j + 1;
	}
	return 0;
}

__noinline int py_mark_eval(struct prof_sample *s, __u32 ubase, __u32 ulen)
{
	struct py_mark_ctx c = {};
	__u32 zero = 0;

	if (!s || ubase > MAX_KSTACK)
		return 0;
	c.sps = bpf_map_lookup_elem(&ustack_sp, &zero);
	if (!c.sps || c.sps->tid != (__u32)bpf_get_current_pid_tgid() || !c.sps->nshim ||
	    c.sps->n != ulen || !ulen)
		return 0;
	c.s = s;
	c.ubase = ubase;
	c.n = ulen > MAX_USTACK ? MAX_USTACK : ulen;
	c.ns = c.sps->nshim > PY_MAX_SHIMS ? PY_MAX_SHIMS : c.sps->nshim;
	bpf_loop(MAX_USTACK + PY_MAX_SHIMS, py_mark_step, &c, 0);
	return 0;
}

/*
 * A thread's PyThreadState as py_threads gave it, kept by the caller per
 * thread (cpu.bpf.c: in its task storage): valid while py_gen, which user
 * space bumps after each change to py_threads, is still at gen - 1.
 */
struct py_tcache {
	__u64 tstate;
	__u32 gen; /* py_gen + 1 when tstate was looked up; 0: empty */
	__u32 pad;
	/*
	 * The thread was not in its interpreter's thread list when that list's
	 * head was miss_head (0: not looked): CPython puts a new thread state
	 * at the head, so while the head stays the same, the thread has none
	 * and the next sample does not walk the list again (one read).
	 */
	__u64 miss_head;
};

/*
 * Walk the sampled thread's Python stack into s->frames[base...] and return
 * the number of frames, or -1 when py_procs has no interpreter for the
 * process (0 with want_python off). tc (or NULL): the thread's cached
 * thread state, valid at pygen (py_gen + 1 as read before any lookup; 0:
 * none), used in place of py_threads and filled from it. A global
 * function: verified once, not once per state the caller reaches it in.
 */
__noinline int python_frames(struct prof_sample *s, __u32 base, struct py_tcache *tc, __u32 pygen)
{
	struct pystate st = { .base = base };
	__u64 *tsp, tstate = 0, p = 0, miss_head = 0;
	int early;
	__u32 tgid, tid;

	if (!s || !want_python || base > MAX_KSTACK + MAX_USTACK)
		return 0;
	st.out = s->frames;
	tgid = s->hdr.pid;
	tid = s->hdr.tid;
	st.pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!st.pp) {
		early = py_early_proc(tgid);
		/*
		 * -1 (not Python at this py_gen: the caller notes it) only where
		 * user space, not py_early_proc, would make the entry: a young
		 * process may map its interpreter on its next sample
		 */
		if (early)
			return early > 0 ? 0 : -1;
		st.pp = bpf_map_lookup_elem(&py_procs, &tgid);
	}
	if (!st.pp)
		return -1;
	if (tc && pygen && tc->gen == pygen) {
		tstate = tc->tstate;
	} else if ((tsp = bpf_map_lookup_elem(&py_threads, &tid))) {
		tstate = *tsp;
		if (tc) {
			tc->tstate = tstate;
			tc->gen = pygen;
		}
	} else if (st.pp->ts_walk && (__u32)bpf_get_current_pid_tgid() == tid &&
		   !py_find_tstate(st.pp, &tstate, tc ? &tc->miss_head : &miss_head)) {
		/* user space rescans when it reads this flag: then py_threads has it */
		s->hdr.flags |= SAMPLE_F_PY_TS_WALK;
		count(CNT_PY_TS_WALK);
		if (tc) {
			tc->tstate = tstate;
			tc->gen = pygen;
			tc->miss_head = 0;
		}
	} else {
		s->hdr.flags |= SAMPLE_F_PY_NO_THREAD;
		count(CNT_PY_NO_THREAD);
		return 0;
	}
	if (st.pp->gil_holder) {
		__u64 gil[2] = {}; /* holder, locked */
		int err;

		/* adjacent (every version user space knows): one read, not two */
		if (st.pp->gil_locked == st.pp->gil_holder + 8)
			err = bpf_probe_read_user(gil, sizeof(gil),
						  (const void *)st.pp->gil_holder);
		else
			err = py_read(st.pp->gil_holder, &gil[0]) ||
			      py_read(st.pp->gil_locked, &gil[1]);
		if (!err) {
			s->hdr.flags2 |= SAMPLE_F2_PY_GIL_KNOWN;
			if (gil[0] == tstate && (__u32)gil[1])
				s->hdr.flags |= SAMPLE_F_PY_GIL;
		}
	}
	if (py_read(tstate + st.pp->tstate_frame, &p))
		goto fail;
	if (st.pp->model == PY_MODEL_CFRAME && p && py_read(p + st.pp->cframe_current, &p))
		goto fail;
	st.frame = p;
	{
		__u32 zero = 0;

		/* empty: what is there is another walk's, maybe another process's */
		st.win = bpf_map_lookup_elem(&pyframe, &zero);
		if (st.win)
			st.win->len = 0;
	}
	{
		__u32 zero = 0;

		st.sps = bpf_map_lookup_elem(&ustack_sp, &zero);
		if (!st.sps)
			goto fail;
		st.sps->nshim = 0;
	}
	if (st.pp->code_read) {
		__u32 zero = 0;

		st.cache = bpf_map_lookup_elem(&pycode_cache, &zero);
		if (st.cache) {
			st.cache->nnew = 0;
			st.cache->deferred = 0;
		}
		st.tgid = tgid;
		st.gen = st.pp->snap_gen;
		st.epoch = st.pp->snap_epoch;
	}
	st.n = opaque_zero_var; /* 0, unknown to the verifier (see there) */
	st.last = opaque_zero_var;
	st.err = opaque_zero_var;
	st.full = opaque_zero_var;
	bpf_loop(MAX_PYSTACK + 1, py_step, &st, 0);
	/* before the sample is output: a snapshot always precedes its first sample */
	if (st.cache) {
		for (__u32 i = 0; i < PYSNAP_PER_SAMPLE; i++) {
			if (i >= st.cache->nnew)
				break;
			py_snapshot(tgid, tid, st.cache->newc[i]);
		}
		if (st.cache->deferred)
			count(CNT_PY_SNAP_DEFERRED);
	}
	if (st.full) {
		s->hdr.flags |= SAMPLE_F_PY_TRUNC;
		count(CNT_PY_TRUNCATED);
	}
	if (st.err) {
		s->hdr.flags |= SAMPLE_F_PY_ERR;
		count(CNT_PY_READ_FAILED);
	}
	/* the native user frames end where the Python ones begin */
	if (st.n && s->hdr.ustack_len && s->hdr.ustack_len <= base)
		py_mark_eval(s, base - s->hdr.ustack_len, s->hdr.ustack_len);
	return st.n;
fail:
	s->hdr.flags |= SAMPLE_F_PY_ERR;
	count(CNT_PY_READ_FAILED);
	return 0;
}

/*
 * The Python frames after the first base entries of s->frames, bounded where
 * the verifier can see it; sets pystack_len. Returns the frame count; *none
 * says whether py_procs had no interpreter for the process.
 */
static __always_inline __u64 python_stack_none(struct prof_sample *s, __u32 base,
					       struct py_tcache *tc, __u32 pygen, bool *none)
{
	int n = python_frames(s, base, tc, pygen);
	__u64 pylen;

	*none = n < 0;
	pylen = n < 0 ? 0 : n;
	asm volatile("" : "+r"(pylen)); /* the verifier's bound, not clang's */
	if (pylen > MAX_PYSTACK)
		pylen = MAX_PYSTACK;
	s->hdr.pystack_len = pylen;
	return pylen;
}

static __always_inline __u64 python_stack(struct prof_sample *s, __u32 base)
{
	bool none;

	return python_stack_none(s, base, NULL, 0, &none);
}

#endif
