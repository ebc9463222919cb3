// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * On-CPU sampling: runs on every perf_event overflow (cycles or cpu-clock, one
 * event per CPU), captures kernel and user stacks of the interrupted task and
 * sends one struct prof_sample through the ring buffer. Children of targets are
 * followed at fork so that `-- CMD` covers the whole process tree.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

#define PF_KTHREAD 0x00200000

const volatile bool want_kernel = true;
const volatile bool want_user = true;

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* One sample is ~4 KiB: too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_sample);
} scratch SEC(".maps");

/*
 * The user stack into s->frames[base...]: table-driven, or frame pointers, per
 * unwind_mode. Returns the frame count. A global function: the verifier
 * checks it once instead of once per state of the caller.
 */
__noinline int user_frames(struct bpf_perf_event_data *ctx, struct prof_sample *s, __u32 base)
{
	__u64 ip, sp, bp, *uframes;
	__u16 flags = 0;
	long n = -1;

	if (!s || base > MAX_KSTACK)
		return 0;
	uframes = &s->frames[base];
	if (unwind_mode != UNWIND_FP) {
		n = unwind_user(ctx, s->hdr.pid, uframes, &flags);
		if (n < 0)
			flags |= SAMPLE_F_NO_UNWIND_INFO;
	}
	if (n < 0 && unwind_mode == UNWIND_DWARF) {
		/* no tables for this process yet: its leaf frame, nothing invented */
		user_regs(ctx, &ip, &sp, &bp);
		uframes[0] = ip;
		n = 1;
		flags |= SAMPLE_F_UNWIND_STOPPED;
	}
	if (n < 0) {
		if (unwind_mode == UNWIND_AUTO)
			flags |= SAMPLE_F_UNWIND_FP;
		n = bpf_get_stack(ctx, uframes, MAX_USTACK * sizeof(__u64), BPF_F_USER_STACK);
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

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *task;
	struct prof_sample *s;
	__u32 zero = 0;
	__u64 klen = 0, ulen = 0, pylen, size;
	long n;

	count(CNT_SAMPLES);
	if (tid == 0) {
		count(CNT_IDLE);
		return 0;
	}
	if (!is_target(tgid)) {
		count(CNT_FILTERED);
		return 0;
	}
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;

	task = (struct task_struct *)bpf_get_current_task();
	s->hdr.time_ns = bpf_ktime_get_ns();
	s->hdr.weight = 1;
	s->hdr.cgroup_id = bpf_get_current_cgroup_id();
	s->hdr.pid = tgid;
	s->hdr.tid = tid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.kind = SAMPLE_CPU;
	s->hdr.flags = 0;
	s->hdr.pad0 = 0;
	bpf_get_current_comm(s->hdr.comm, sizeof(s->hdr.comm));
	BPF_CORE_READ_STR_INTO(&s->hdr.pcomm, task, group_leader, comm);

	if (want_kernel) {
		n = bpf_get_stack(ctx, s->frames, MAX_KSTACK * sizeof(__u64), 0);
		if (n < 0) {
			s->hdr.flags |= SAMPLE_F_KSTACK_ERR;
			count(CNT_KSTACK_ERR);
		} else {
			klen = (__u64)n / sizeof(__u64);
			if (klen >= MAX_KSTACK) {
				klen = MAX_KSTACK;
				s->hdr.flags |= SAMPLE_F_KSTACK_TRUNC;
			}
		}
	}
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD) {
		s->hdr.flags |= SAMPLE_F_KTHREAD;
	} else if (want_user) {
		ulen = user_frames(ctx, s, klen);
		asm volatile("" : "+r"(ulen));
		if (ulen > MAX_USTACK)
			ulen = MAX_USTACK;
	}
	s->hdr.kstack_len = klen;
	s->hdr.ustack_len = ulen;
	pylen = 0;
	if (!(s->hdr.flags & SAMPLE_F_KTHREAD))
		pylen = python_frames(s, klen + ulen);
	asm volatile("" : "+r"(pylen));	/* the verifier's bound, not clang's */
	if (pylen > MAX_PYSTACK)
		pylen = MAX_PYSTACK;
	s->hdr.pystack_len = pylen;

	size = sizeof(s->hdr) + (klen + ulen + 2 * pylen) * sizeof(__u64);
	if (size > sizeof(*s))
		size = sizeof(*s);
	if (output(s, size,
		   s->hdr.flags & (SAMPLE_F_NO_UNWIND_INFO | SAMPLE_F_STALE_MAPS | SAMPLE_F_PY_NO_THREAD)))
		count(CNT_RB_FULL);
	return 0;
}

/* Follow children of targets (only with follow_children, i.e. `-- CMD`). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid, ctgid, reason = TARGET_CHILD;

	if (!follow_children)
		return 0;
	ptgid = BPF_CORE_READ(parent, tgid);
	ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid || !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	if (bpf_map_update_elem(&targets, &ctgid, &reason, BPF_ANY))
		count(CNT_FILTER_FULL);
	else
		count(CNT_FORK_FOLLOWED);
	return 0;
}

/*
 * A followed child's pid may be reused by an unrelated process after it exits:
 * forget it when its thread group leader exits.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u32 tgid, *reason;

	if (!follow_children)
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	if ((__u32)BPF_CORE_READ(task, pid) != tgid)
		return 0;
	reason = bpf_map_lookup_elem(&targets, &tgid);
	if (reason && *reason == TARGET_CHILD)
		bpf_map_delete_elem(&targets, &tgid);
	return 0;
}
