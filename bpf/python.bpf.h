/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frame walker. For a thread of a known interpreter (py_procs) whose
 * PyThreadState user space has found (py_threads), follow the frame chain
 * from the thread state and emit (code object, raw instruction position |
 * flags) per frame, leaf first. Layouts come from user space per process,
 * so no version is hard-coded here.
 */
#ifndef BPFPROF_PYTHON_BPF_H
#define BPFPROF_PYTHON_BPF_H

#include "common.bpf.h"

const volatile bool want_python = true;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);		/* tgid */
	__type(value, struct bpf_pyproc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);		/* tid */
	__type(value, __u64);		/* PyThreadState * */
} py_threads SEC(".maps");

struct pyframe_buf {
	__u8 data[PYFRAME_SPAN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pyframe_buf);
} pyframe SEC(".maps");

struct pystate {
	const struct bpf_pyproc *pp;
	__u64 frame;
	__u64 *out;		/* the sample's frames[] */
	__u32 base;		/* index of the first Python word in out */
	__u32 n;		/* frames emitted */
	__u32 last;		/* index of the last emitted frame's second word + 1, 0: none */
	__u32 err;
	__u32 full;
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

/* The u64 at off in the frame copy, or -1 if off lies outside it. */
static __always_inline int field(const struct pyframe_buf *b, __s32 off, __u32 span, __u64 *v)
{
	if (off < 0 || off > PYFRAME_SPAN - 8 || (__u32)off + 8 > span)
		return -1;
	*v = *(const __u64 *)&b->data[off & (PYFRAME_SPAN - 1)];
	return 0;
}

/*
 * One frame: copy its first frame_span bytes in one read (every field we
 * need is there in every version), then take the fields from the copy.
 */
static long py_step(__u32 i, void *data)
{
	struct pystate *st = data;
	const struct bpf_pyproc *pp = st->pp;
	__u64 code = 0, raw = 0, next = 0, flags = 0, w = 0;
	struct pyframe_buf *b;
	__u32 idx, zero = 0, span = pp->frame_span;

	if (!st->frame)
		return 1;
	if (st->n >= MAX_PYSTACK) {
		st->full = 1;
		return 1;
	}
	b = bpf_map_lookup_elem(&pyframe, &zero);
	if (!b || span < 8 || span > PYFRAME_SPAN ||
	    bpf_probe_read_user(b->data, span, (const void *)st->frame) ||
	    field(b, pp->frame_back, span, &next)) {
		st->err = 1;
		return 1;
	}
	if (pp->frame_owner >= 0) {
		if (field(b, pp->frame_owner, span, &w)) {
			st->err = 1;
			return 1;
		}
		if ((w & 0xff) >= pp->owner_cstack) {
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
	if (field(b, pp->frame_code, span, &code) || field(b, pp->frame_instr, span, &w)) {
		st->err = 1;
		return 1;
	}
	code &= ~7ULL;	/* 3.14 tags f_executable's low bits; objects are 8-aligned */
	if (pp->model == PY_MODEL_FRAMEOBJ) {
		raw = (__u32)w;	/* int f_lasti */
		flags = PYFRAME_F_ENTRY;	/* one eval call per frame object */
	} else {
		raw = w;
		if (pp->frame_is_entry >= 0 && !field(b, pp->frame_is_entry, span, &w) && (w & 0xff))
			flags = PYFRAME_F_ENTRY;
	}
	idx = st->base + 2 * st->n;
	if (idx > PY_WORDS - 2) {
		st->full = 1;
		return 1;
	}
	{
		__u64 *slot = &st->out[idx];	/* one bounded index for both words */

		slot[0] = code;
		slot[1] = (raw & PYFRAME_INSTR_MASK) | flags;
	}
	st->last = idx + 2;
	st->n++;
	st->frame = next;
	return 0;
}

/*
 * Walk the sampled thread's Python stack into s->frames[base...] and return
 * the number of frames (0 when the process is not Python). A global function:
 * verified once, not once per state the caller reaches it in.
 */
__noinline int python_frames(struct prof_sample *s, __u32 base)
{
	struct pystate st = { .base = base };
	__u64 *tstate, p = 0;
	__u32 tgid, tid;

	if (!s || !want_python || base > MAX_KSTACK + MAX_USTACK)
		return 0;
	st.out = s->frames;
	tgid = s->hdr.pid;
	tid = s->hdr.tid;
	st.pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!st.pp)
		return 0;
	tstate = bpf_map_lookup_elem(&py_threads, &tid);
	if (!tstate) {
		s->hdr.flags |= SAMPLE_F_PY_NO_THREAD;
		count(CNT_PY_NO_THREAD);
		return 0;
	}
	if (st.pp->gil_holder) {
		__u64 holder = 0, locked = 0;

		if (!py_read(st.pp->gil_holder, &holder) && !py_read(st.pp->gil_locked, &locked) &&
		    holder == *tstate && (__u32)locked)
			s->hdr.flags |= SAMPLE_F_PY_GIL;
	}
	if (py_read(*tstate + st.pp->tstate_frame, &p))
		goto fail;
	if (st.pp->model == PY_MODEL_CFRAME && p && py_read(p + st.pp->cframe_current, &p))
		goto fail;
	st.frame = p;
	bpf_loop(MAX_PYSTACK + 1, py_step, &st, 0);
	if (st.full) {
		s->hdr.flags |= SAMPLE_F_PY_TRUNC;
		count(CNT_PY_TRUNCATED);
	}
	if (st.err) {
		s->hdr.flags |= SAMPLE_F_PY_ERR;
		count(CNT_PY_READ_FAILED);
	}
	return st.n;
fail:
	s->hdr.flags |= SAMPLE_F_PY_ERR;
	count(CNT_PY_READ_FAILED);
	return 0;
}

/*
 * The Python frames after the first base entries of s->frames, bounded where
 * the verifier can see it; sets pystack_len. Returns the frame count.
 */
static __always_inline __u64 python_stack(struct prof_sample *s, __u32 base)
{
	__u64 pylen = python_frames(s, base);

	asm volatile("" : "+r"(pylen));	/* the verifier's bound, not clang's */
	if (pylen > MAX_PYSTACK)
		pylen = MAX_PYSTACK;
	s->hdr.pystack_len = pylen;
	return pylen;
}

#endif
