/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layouts shared by the BPF programs and user space. This is the only place
 * where a struct that crosses the kernel/user boundary is defined: fixed-width
 * types, explicit padding, a size assert for each. Includes nothing, so that
 * both vmlinux.h (BPF) and linux/types.h (user) users can include it.
 */
#ifndef BPFPROF_H
#define BPFPROF_H

/* Frames the kernel walker may return: PERF_MAX_STACK_DEPTH is 127. */
#define MAX_KSTACK 127
/*
 * Native user frames per sample. The frame-pointer walker (bpf_get_stack) is
 * bounded by the kernel's perf_event_max_stack (127 by default); the table
 * driven unwinder will fill up to this many.
 */
#define MAX_USTACK 128
/* Python frames per sample (the interpreter walker emits code/instr pairs). */
#define MAX_PYSTACK 128
#define TASK_COMM_LEN 16

/* sample_hdr.kind */
enum sample_kind {
	SAMPLE_CPU = 1,
};

/* sample_hdr.flags */
enum sample_flags {
	SAMPLE_F_KSTACK_ERR = 1 << 0,	 /* kernel stack could not be read */
	SAMPLE_F_USTACK_ERR = 1 << 1,	 /* user stack could not be read */
	SAMPLE_F_USTACK_TRUNC = 1 << 2,	 /* user stack hit MAX_USTACK */
	SAMPLE_F_KSTACK_TRUNC = 1 << 3,	 /* kernel stack hit MAX_KSTACK */
	SAMPLE_F_KTHREAD = 1 << 4,	 /* kernel thread: no user stack exists */
};

/*
 * One sample as it leaves BPF. Header, then frames[]: kstack_len kernel IPs
 * (leaf first), then ustack_len user IPs (leaf first), then pystack_len
 * python frame records (reserved for the interpreter walker). Only the used
 * part of frames[] is copied into the ring buffer.
 */
struct prof_sample_hdr {
	__u64 time_ns;	  /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 weight;	  /* 1 for a CPU sample; bytes etc. for other kinds */
	__u64 cgroup_id;  /* cgroup v2 id of the task */
	__u32 pid;	  /* tgid, root pid namespace */
	__u32 tid;	  /* task pid, root pid namespace */
	__u32 cpu;
	__u16 kind;	  /* enum sample_kind */
	__u16 flags;	  /* enum sample_flags */
	__u16 kstack_len;
	__u16 ustack_len;
	__u16 pystack_len;
	__u16 pad0;
	char comm[TASK_COMM_LEN];	 /* thread name */
	char pcomm[TASK_COMM_LEN];	 /* process (thread group leader) name */
};
_Static_assert(sizeof(struct prof_sample_hdr) == 80, "sample_hdr layout");

struct prof_sample {
	struct prof_sample_hdr hdr;
	__u64 frames[MAX_KSTACK + MAX_USTACK + 2 * MAX_PYSTACK];
};
_Static_assert(sizeof(struct prof_sample) == 80 + 8 * (127 + 128 + 256), "sample layout");

/*
 * Per-CPU counters BPF increments; user space sums them for the end-of-run
 * summary. Numbered, never reordered (user space names each one).
 */
enum bpf_counter {
	CNT_SAMPLES = 0,	/* perf events the program ran for */
	CNT_FILTERED,		/* not a target (pid/cgroup filter) */
	CNT_IDLE,		/* the idle task: not recorded */
	CNT_RB_FULL,		/* ring buffer full: sample lost */
	CNT_KSTACK_ERR,		/* bpf_get_stack(kernel) failed */
	CNT_USTACK_ERR,		/* bpf_get_stack(user) failed */
	CNT_FORK_FOLLOWED,	/* children added to the pid filter */
	CNT_FILTER_FULL,	/* pid filter map full: a child was not followed */
	CNT__MAX
};

/* Value of the pid filter map: why the pid is a target. */
enum target_reason {
	TARGET_GIVEN = 1,	/* named with -p or started with -- CMD */
	TARGET_CHILD = 2,	/* a descendant, followed at fork */
};

#endif /* BPFPROF_H */
