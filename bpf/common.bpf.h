/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Maps and helpers every bpfprof program shares: counters, target filter, output. */
#ifndef BPFPROF_COMMON_BPF_H
#define BPFPROF_COMMON_BPF_H

#include "bpfprof.h"

/* Set from user space before load (STYLE rule 4). */
const volatile bool filter_pids = false;     /* only tgids in `targets` */
const volatile bool follow_children = false; /* add children of targets at fork */
const volatile bool filter_cgroup = false;   /* only tasks under the cgroup in `target_cgroup` */
/*
 * Wake user space only when this much is waiting: it drains the buffer on a
 * timer anyway, and a wakeup per sample costs more than the sample.
 */
const volatile __u64 wakeup_bytes = 1 << 20;

/* Sized from user space before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);   /* tgid */
	__type(value, __u32); /* enum target_reason */
} targets SEC(".maps");

/*
 * --cgroup / --container: slot 0 holds the target cgroup's directory fd.
 * bpf_current_task_under_cgroup() asks whether the task's cgroup descends from
 * it, so cgroups created under the target after we started match with no work
 * in user space, and without knowing the target's level in the hierarchy
 * (which a cgroup namespace hides from us).
 */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

/*
 * count() for an index that varies by path (an unwinder's stop reason): a
 * global function, so that the verifier does not track the constant key per
 * path (an array lookup with a known key makes it precise), which kept every
 * reason's states apart.
 */
__noinline int count_var(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
	return 0;
}

/*
 * Zero at run time, unknown to the verifier (.bss, never written). A
 * bpf_loop() walk's state starts from it, not from constants: a constant
 * that a later branch tests (the frame count against its bound, the stop
 * reason after the loop) becomes precise, and the verifier then checks the
 * callback once per value it takes (once per frame count, up to 128 times).
 * From an unknown start the callback's states converge in a few passes:
 * on_cpu_sample went from 58k to 20k instructions verified, the bulk of
 * -a's start-up.
 */
volatile __u32 opaque_zero_var;

static __always_inline void count_add(__u32 idx, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += v;
}

/* The cgroup filter: the running task passes it, or it is off. */
static __always_inline bool passes_cgroup(void)
{
	return !filter_cgroup || bpf_current_task_under_cgroup(&target_cgroup, 0) == 1;
}

/* The pid filter and the cgroup filter: a target passes both that are on. */
static __always_inline bool is_target(__u32 tgid)
{
	if (!passes_cgroup())
		return false;
	if (!filter_pids)
		return true;
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_wakeup SEC(".maps");

/* At most one urgent wakeup per CPU per millisecond. */
#define URGENT_WAKEUP_NS 1000000

/*
 * Output a record, batching wakeups (see wakeup_bytes). An urgent record (the
 * process needs unwind tables, or its mappings changed) wakes user space now,
 * so that only the first sample or two of a new process miss its tables.
 * Returns 0 or -errno.
 */
static __always_inline long output(void *data, __u64 size, bool urgent)
{
	__u64 flags = BPF_RB_NO_WAKEUP, now, *last;
	__u32 zero = 0;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes) {
		flags = BPF_RB_FORCE_WAKEUP;
	} else if (urgent) {
		last = bpf_map_lookup_elem(&last_wakeup, &zero);
		now = bpf_ktime_get_ns();
		if (last && now - *last >= URGENT_WAKEUP_NS) {
			*last = now;
			flags = BPF_RB_FORCE_WAKEUP;
		}
	}
	return bpf_ringbuf_output(&events, data, size, flags);
}

/*
 * The current task's kernel stack into s->frames[0...), leaf first; skip is
 * the bpf_get_stack flags (frames to skip). Flags and counts a failure or a
 * full stack. Returns the frame count.
 */
static __always_inline __u64 kernel_stack(void *ctx, struct prof_sample *s, __u64 skip)
{
	long n = bpf_get_stack(ctx, s->frames, MAX_KSTACK * sizeof(__u64), skip);
	__u64 klen;

	if (n < 0) {
		s->hdr.flags |= SAMPLE_F_KSTACK_ERR;
		count(CNT_KSTACK_ERR);
		return 0;
	}
	klen = (__u64)n / sizeof(__u64);
	if (klen >= MAX_KSTACK) {
		klen = MAX_KSTACK;
		s->hdr.flags |= SAMPLE_F_KSTACK_TRUNC;
	}
	return klen;
}

/*
 * The header fields every record has: time now, stacks empty, flags and aux
 * words zero, cgroup 0. The names (comm, pcomm) are the caller's to fill.
 */
static __always_inline void hdr_init(struct prof_sample_hdr *h, __u16 kind, __u64 weight,
				     __u32 tgid, __u32 tid)
{
	h->time_ns = bpf_ktime_get_ns();
	h->weight = weight;
	h->cgroup_id = 0;
	h->pid = tgid;
	h->tid = tid;
	h->cpu = bpf_get_smp_processor_id();
	h->kind = kind;
	h->flags = 0;
	h->kstack_len = 0;
	h->ustack_len = 0;
	h->pystack_len = 0;
	h->flags2 = 0;
	h->aux0 = 0;
	h->aux1 = 0;
}

/*
 * Fill the header of a sample of the current task: hdr_init's, plus its
 * cgroup and the thread's and process's names. The caller sets
 * kind-specific fields and the stacks.
 */
static __always_inline void sample_init(struct prof_sample *s, __u16 kind, __u64 weight, __u32 tgid,
					__u32 tid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const __u64 *c = (const __u64 *)task->comm, *pc = (const __u64 *)task->group_leader->comm;

	hdr_init(&s->hdr, kind, weight, tgid, tid);
	s->hdr.cgroup_id = bpf_get_current_cgroup_id();
	/*
	 * The names as two words each, read through the BTF pointer: the
	 * kernel keeps comm NUL-padded (strscpy_pad), so this is what
	 * bpf_get_current_comm() copies, without its call and the probe reads
	 * of pcomm (which left the bytes after the name's NUL unwritten: a
	 * previous sample's, in the stack key user space hashes).
	 */
	((__u64 *)s->hdr.comm)[0] = c[0];
	((__u64 *)s->hdr.comm)[1] = c[1];
	((__u64 *)s->hdr.pcomm)[0] = pc[0];
	((__u64 *)s->hdr.pcomm)[1] = pc[1];
}

#endif
