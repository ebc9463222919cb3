// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Off-CPU time, by stack, from the scheduler's switch events: one
 * tp_btf/sched_switch program sees the task leaving the CPU (prev, which is
 * current, so its stacks can be walked) and the one arriving (next).
 *
 * - Switch-out (prev): note when, in prev's task storage. The stack is walked
 *   here, the only place it can be (user memory is current's), but not every
 *   time: the walked sample is kept in the task storage with what it was
 *   walked from (user IP, SP, BP, syscall number, Python frame), and a block
 *   from the same place within REWALK_NS reuses it. A thread blocking in a
 *   loop (a pipe, a futex, a queue) pays the walk once per REWALK_NS, not per
 *   switch.
 * - Switch-in (next): its block is now - start. Blocks of at least
 *   min_block_ns are sent with weight = their length. Shorter ones are
 *   sampled: one of length d is sent with probability d / min_block_ns and
 *   weight min_block_ns, so the expected weight is still d (unbiased, as
 *   allocation sampling is) and the ring buffer carries at most one record
 *   per min_block_ns of blocked time. Everything is counted in
 *   offcpu_counters.
 *
 * Switching out while runnable (preempted) is off-CPU time too: --wall must
 * add up to the wall clock.
 *
 * Dump mode (bpfprof dump): a target thread entering a ptrace stop is
 * current at its switch-out; its stack is walked then and sent at once.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

#define PF_KTHREAD	0x00200000
#define TASK_TRACED_BIT 0x00000008 /* __TASK_TRACED */

/* A global function's argument that is the program's context (kernel 6.8+). */
#define __arg_ctx __attribute__((btf_decl_tag("arg:ctx")))

const volatile bool want_kernel = true;
const volatile bool want_user = true;
const volatile __u64 min_block_ns = 1000000;

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* A block from the same place this soon reuses the stack walked before. */
#define REWALK_NS (100 * 1000000ULL)

struct walk_key {
	__u64 ip, sp, bp, nr, py;
};

/* A walked stack and where it was walked from. */
struct walk_slot {
	__u32 size; /* bytes of s that are valid, 0: none walked */
	__u32 pad;
	__u64 walked_ns;
	struct walk_key key;
	struct prof_sample s;
};

/*
 * Per target thread (task storage): its block in progress and its last two
 * walked stacks (a thread often alternates between two places: blocked in a
 * read, preempted in a write).
 */
struct offcpu_thread {
	__u64 ts;    /* switch-out time, 0: not blocked (or already weighed) */
	__u32 state; /* prev_state at switch-out (0: preempted while runnable) */
	__u32 cur;   /* slot holding this block's stack */
	struct walk_slot slot[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_thread);
} offcpu_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_counters SEC(".maps");

/* Not the CPU object's `scratch`: a perf NMI may interrupt us mid-sample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_sample);
} offcpu_scratch SEC(".maps");

static __always_inline void ocount(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&offcpu_counters, &idx);

	if (c)
		*c += n;
}

__noinline int offcpu_user_frames(void *ctx __arg_ctx, struct prof_sample *s, __u32 base)
{
	struct uregs r;

	if (!s)
		return 0;
	uregs_current(&r);
	return user_stack(ctx, &r, s, base);
}

/*
 * Walk the current task's stacks into s (header filled by the caller).
 * Returns the record's size in bytes.
 */
static __always_inline __u64 fill_stacks(void *ctx, struct prof_sample *s)
{
	__u64 klen = 0, ulen = 0, pylen, size;

	/* skip this program and bpf_trace_run4(): the leaf is __schedule */
	if (want_kernel)
		klen = kernel_stack(ctx, s, 2 & BPF_F_SKIP_FIELD_MASK);
	if (want_user) {
		ulen = offcpu_user_frames(ctx, s, klen);
		asm volatile("" : "+r"(ulen));
		if (ulen > MAX_USTACK)
			ulen = MAX_USTACK;
	}
	s->hdr.kstack_len = klen;
	s->hdr.ustack_len = ulen;
	pylen = python_stack(s, klen + ulen);
	size = sizeof(s->hdr) + (klen + ulen + 2 * pylen) * sizeof(__u64);
	return size > sizeof(*s) ? sizeof(*s) : size;
}

static __always_inline bool urgent(const struct prof_sample *s)
{
	return s->hdr.flags &
	       (SAMPLE_F_NO_UNWIND_INFO | SAMPLE_F_STALE_MAPS | SAMPLE_F_PY_NO_THREAD);
}

/* Where the current task is, cheaply: what a cached walk must match. */
static __always_inline void where(struct task_struct *task, struct walk_key *k)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	const struct bpf_pyproc *pp;
	__u32 tgid = task->tgid, tid = task->pid;
	__u64 *tstate, f = 0;

	/* a trusted BTF pointer: plain loads, no probe reads */
	k->ip = regs->ip;
	k->sp = regs->sp;
	k->bp = regs->bp;
	k->nr = regs->orig_ax;
	k->py = 0;
	if (!want_python)
		return;
	pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!pp)
		return;
	tstate = bpf_map_lookup_elem(&py_threads, &tid);
	if (!tstate || py_read(*tstate + pp->tstate_frame, &f))
		return;
	if (pp->model == PY_MODEL_CFRAME && f && py_read(f + pp->cframe_current, &f))
		return;
	k->py = f;
}

static __always_inline bool same_place(const struct walk_slot *w, const struct walk_key *k,
				       __u64 now)
{
	return w->size && now - w->walked_ns < REWALK_NS && k->ip == w->key.ip &&
	       k->sp == w->key.sp && k->bp == w->key.bp && k->nr == w->key.nr && k->py == w->key.py;
}

static __always_inline void switch_out(void *ctx, struct task_struct *prev, __u32 prev_state,
				       __u64 now)
{
	struct offcpu_thread *th;
	struct walk_slot *w;
	struct walk_key k;
	__u32 victim;

	if (prev->flags & PF_KTHREAD) /* the idle task too */
		return;
	if (!is_target(prev->tgid))
		return;
	th = bpf_task_storage_get(&offcpu_threads, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!th) {
		ocount(OFFCPU_CNT_NO_STORAGE, 1);
		return;
	}
	th->ts = now;
	th->state = prev_state;
	where(prev, &k);
	if (same_place(&th->slot[0], &k, now)) {
		th->cur = 0;
		return;
	}
	if (same_place(&th->slot[1], &k, now)) {
		th->cur = 1;
		return;
	}
	/* walk into the slot not used last */
	victim = th->cur ? 0 : 1;
	th->cur = victim;
	w = &th->slot[victim & 1];
	ocount(OFFCPU_CNT_WALKS, 1);
	sample_init(&w->s, SAMPLE_OFF_CPU, 0, prev->tgid, prev->pid);
	w->size = fill_stacks(ctx, &w->s);
	w->key = k;
	/* a walk without the process's tables or thread state is not worth keeping */
	w->walked_ns = urgent(&w->s) ? now - REWALK_NS : now;
}

static __always_inline void switch_in(struct task_struct *next, __u64 now)
{
	struct offcpu_thread *th;
	struct walk_slot *w;
	__u64 d, weight, r, size;

	th = bpf_task_storage_get(&offcpu_threads, next, 0, 0);
	if (!th || !th->ts)
		return;
	d = now - th->ts;
	th->ts = 0;
	ocount(OFFCPU_CNT_BLOCKS, 1);
	ocount(OFFCPU_CNT_BLOCKED_NS, d);
	if (d < min_block_ns) {
		ocount(OFFCPU_CNT_SHORT, 1);
		ocount(OFFCPU_CNT_SHORT_NS, d);
		r = ((__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32()) % min_block_ns;
		if (r >= d)
			return;
		weight = min_block_ns;
		ocount(OFFCPU_CNT_SHORT_SAMPLED, 1);
	} else {
		weight = d;
	}
	w = &th->slot[th->cur & 1];
	size = w->size;
	if (size < sizeof(w->s.hdr) || size > sizeof(w->s))
		return;
	w->s.hdr.weight = weight;
	/* when and how long, for the trace (-f chrome); a reused walk is older */
	w->s.hdr.time_ns = now - d;
	w->s.hdr.aux0 = th->state;
	w->s.hdr.aux1 = d;
	if (output(&w->s, size, urgent(&w->s))) {
		count(CNT_RB_FULL);
		ocount(OFFCPU_CNT_LOST, 1);
		ocount(OFFCPU_CNT_LOST_NS, weight);
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();

	switch_out(ctx, prev, prev_state, now);
	switch_in(next, now);
	return 0;
}

/* bpfprof dump: a target thread stops for ptrace; its stack now, once. */
SEC("tp_btf/sched_switch")
int BPF_PROG(dump_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct prof_sample *s;
	__u32 zero = 0;
	__u64 size;

	if (!(prev_state & TASK_TRACED_BIT) || (prev->flags & PF_KTHREAD))
		return 0;
	if (!is_target(prev->tgid))
		return 0;
	s = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!s)
		return 0;
	sample_init(s, SAMPLE_OFF_CPU, 1, prev->tgid, prev->pid);
	s->hdr.aux0 = prev_state;
	size = fill_stacks(ctx, s);
	if (output(s, size, urgent(s))) {
		count(CNT_RB_FULL);
		ocount(OFFCPU_CNT_LOST, 1);
	} else {
		ocount(OFFCPU_CNT_BLOCKS, 1);
	}
	return 0;
}
