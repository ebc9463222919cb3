// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>

#include <linux/types.h>

#include "aggregate/stacks.h"
#include "bpfprof.h"
#include "collect/decode.h"
#include "proc/objfile.h"

size_t decode__key_size(void)
{
	return sizeof(struct stack_key) +
	       (MAX_KSTACK + MAX_USTACK + MAX_PYSTACK) * sizeof(struct sframe);
}

static bool well_formed(const struct prof_sample_hdr *h, size_t size)
{
	return size >= sizeof(*h) && h->kstack_len <= MAX_KSTACK && h->ustack_len <= MAX_USTACK &&
	       h->pystack_len <= MAX_PYSTACK &&
	       size >= sizeof(*h) + ((size_t)h->kstack_len + h->ustack_len + 2 * h->pystack_len) *
					    sizeof(__u64);
}

/* The header's flags: the key's, the statistics, and what user space must catch up on. */
static void take_flags(const struct decode_ops *ops, struct decode_stats *st,
		       const struct prof_sample_hdr *h, struct stack_key *k)
{
	if (h->flags & SAMPLE_F_KSTACK_TRUNC)
		k->flags |= STACK_F_KERNEL_TRUNC, st->ktrunc++;
	if (h->flags & SAMPLE_F_USTACK_TRUNC)
		k->flags |= STACK_F_USER_TRUNC, st->utrunc++;
	if (h->flags & SAMPLE_F_KSTACK_ERR)
		k->flags |= STACK_F_KERNEL_ERR, st->kstack_err++;
	if (h->flags & SAMPLE_F_USTACK_ERR)
		k->flags |= STACK_F_USER_ERR, st->ustack_err++;
	if (h->flags & SAMPLE_F_UNWIND_STOPPED)
		st->unwind_stopped++;
	if (h->flags & SAMPLE_F_UNWIND_HEURISTIC)
		k->flags |= STACK_F_HEURISTIC, st->unwind_heuristic++;
	if (h->flags & SAMPLE_F_NO_UNWIND_INFO) {
		st->no_unwind_info++;
		if (h->flags & SAMPLE_F_UNWIND_FP)
			st->unwind_fp++;
		if (ops->want_sync)
			ops->want_sync(ops->ctx, h->pid);
	} else if (h->flags & SAMPLE_F_STALE_MAPS) {
		/* the MMAP2 record is in the side band (read first) or /proc knows */
		if (ops->want_sync)
			ops->want_sync(ops->ctx, h->pid);
	}
}

/* Append the sample's Python frames to the key as code ids. */
static void python_frames(const struct decode_ops *ops, struct decode_stats *st,
			  const struct prof_sample *s, struct stack_key *k)
{
	const struct prof_sample_hdr *h = &s->hdr;
	const __u64 *w = &s->frames[h->kstack_len + h->ustack_len];
	struct sframe *f = &k->frames[k->nkernel + k->nuser];
	uint32_t off;

	if (h->flags & SAMPLE_F_PY_NO_THREAD) {
		st->py_no_thread++;
		if (ops->py_rescan)
			ops->py_rescan(ops->ctx, h->pid);
	} else if ((h->flags & SAMPLE_F_PY_TS_WALK) && ops->py_rescan) {
		/* BPF found the thread in the list: put it in py_threads, end the walks */
		ops->py_rescan(ops->ctx, h->pid);
	}
	/* not looked at yet (--unwind fp, or no tables needed) */
	if (!h->pystack_len && ops->py_seen && !ops->py_seen(ops->ctx, h->pid) && ops->want_sync)
		ops->want_sync(ops->ctx, h->pid);
	if (h->flags & SAMPLE_F_PY_ERR)
		st->py_err++;
	if (h->flags & SAMPLE_F_PY_TRUNC) {
		st->py_trunc++;
		k->flags |= STACK_F_PY_TRUNC;
	}
	if (!h->pystack_len)
		return;
	if (ops->py_probe)
		ops->py_probe(ops->ctx, h->pid, h->time_ns);
	st->py_samples++;
	if (h->flags2 & SAMPLE_F2_PY_GIL_KNOWN) {
		k->flags |= STACK_F_GIL_KNOWN;
		st->gil_known++;
		if (h->flags & SAMPLE_F_PY_GIL) {
			k->flags |= STACK_F_GIL_HELD;
			st->gil_held++;
		}
	}
	for (uint32_t i = 0; i < h->pystack_len; i++) {
		uint64_t raw = w[2 * i + 1];

		off = 0;
		f->obj = OBJ_PYTHON;
		f->addr = ops->py_code ? ops->py_code(ops->ctx, h->pid, w[2 * i],
						      raw & PYFRAME_INSTR_MASK, &off)
				       : 0;
		if (!f->addr) {
			st->py_frames_dropped++;
			off = 0;
		}
		f->aux = (off & ~SFRAME_PY_ENTRY) | (raw & PYFRAME_F_ENTRY ? SFRAME_PY_ENTRY : 0);
		f++;
		k->npython++;
	}
}

int decode__sample(const struct decode_cfg *cfg, const struct decode_ops *ops,
		   struct decode_stats *st, const struct prof_sample *s, size_t size,
		   struct stack_key *k)
{
	const struct prof_sample_hdr *h = &s->hdr;
	uint32_t nk, nu, i;

	if (!well_formed(h, size)) {
		st->bad++;
		return -EINVAL;
	}
	st->stacks++;
	nk = cfg->kernel ? h->kstack_len : 0;
	nu = cfg->user ? h->ustack_len : 0;

	memset(k, 0, sizeof(*k));
	k->pid = h->pid;
	memcpy(k->pcomm, h->pcomm, sizeof(k->pcomm));
	if (cfg->per_thread) {
		k->tid = h->tid;
		memcpy(k->tcomm, h->comm, sizeof(k->tcomm));
		if (cfg->python && ops->py_thread)
			ops->py_thread(ops->ctx, h->pid, h->tid); /* threading's names */
	}
	if (cfg->cgroup) { /* named now: the cgroup may be gone when the profile is built */
		k->cgroup_id = h->cgroup_id;
		if (ops->cgroup_seen)
			ops->cgroup_seen(ops->ctx, h->cgroup_id);
	}
	k->nkernel = nk;
	k->nuser = nu;
	take_flags(ops, st, h, k);
	/* the walk stopped, yet a thread's stack goes on to its root: say where */
	if (nu && (h->flags & SAMPLE_F_UNWIND_STOPPED))
		k->flags |= STACK_F_MISSING, st->missing_frames++;

	for (i = 0; i < nk; i++)
		k->frames[i] = (struct sframe){ .obj = OBJ_KERNEL, .addr = s->frames[i] };
	if (nu) {
		ops->user_begin(ops->ctx, h->pid, h->time_ns);
		for (i = 0; i < nu; i++) {
			struct sframe *f = &k->frames[nk + i];
			uint64_t w = s->frames[h->kstack_len + i];

			st->user_frames++;
			f->aux = 0;
			if (!ops->user_resolve(ops->ctx, w & ~UFRAME_F_PYEVAL, f))
				st->user_unmapped++;
			/* BPF found a Python entry frame in its stack: an eval loop call */
			if (w & UFRAME_F_PYEVAL) {
				f->aux |= SFRAME_PY_EVAL;
				st->py_eval_marked++;
			}
		}
		if (ops->user_end)
			ops->user_end(ops->ctx, &k->frames[nk], nu, h->time_ns);
		st->user_samples++;
		st->user_fp += !!(h->flags & (SAMPLE_F_UNWIND_FP | SAMPLE_F_UNWIND_HEURISTIC |
					      SAMPLE_F_UNWIND_GAP));
	}
	if (cfg->python)
		python_frames(ops, st, s, k);
	/*
	 * A free-threaded interpreter has no GIL to wait for: every thread with
	 * Python frames may be running Python, and --gil keeps them (counted).
	 */
	if (cfg->gil && (!k->npython ||
			 ((h->flags2 & SAMPLE_F2_PY_GIL_KNOWN) && !(h->flags & SAMPLE_F_PY_GIL)))) {
		st->gil_left_out++;
		return -ENOENT;
	}
	if (cfg->gil && !(h->flags2 & SAMPLE_F2_PY_GIL_KNOWN))
		st->gil_none_kept++;
	return 0;
}
