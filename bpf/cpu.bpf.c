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
/*
 * -v: time each recorded sample (CNT_SAMPLE_NS), for a BPF cost per sample
 * that the runs this program leaves early (other processes, idle) do not
 * dilute as they do run_time_ns / run_cnt.
 */
const volatile bool time_samples = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SAMPLE_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sample_hist SEC(".maps");

static __always_inline void time_sample(__u64 t0)
{
	__u64 ns = bpf_ktime_get_ns() - t0, *c;
	__u32 b = sample_hist_bucket(ns);

	count_add(CNT_SAMPLE_NS, ns);
	c = bpf_map_lookup_elem(&sample_hist, &b);
	if (c)
		*c += 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * CPU time per sample. A per-CPU timer that fires while interrupts are off
 * (a context switch) is taken when they come back on, in the task switched
 * to, so with a filter a target's sample count is not its CPU time (short
 * runs: 0.7 of it). Each sample instead weighs its thread's CPU time, by the
 * kernel's account, since that thread's previous sample: a thread's samples
 * then sum to what schedstat says between its first and last sample,
 * whichever runs the timer happened to hit. A thread's first sample weighs
 * one period (1e9/F ns) as before: unbiased for threads too short to be
 * sampled every time they run.
 */
const volatile __u64 period_ns = 1000000000ULL / 99;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, CPU_LAST_TARGETS); /* sized from user space */
	__type(key, __u32);		       /* thread id */
	__type(value, struct cpu_last);
} cpu_last SEC(".maps");

/*
 * The same per thread in the task's local storage, where the kernel lets an
 * NMI create it (6.5 on, user space decides: record.c): found through the
 * task pointer, with no hashing and no start_time to compare (a thread's
 * storage dies with it). Both timed in the same samples: cheaper in 7 of
 * 8 runs, median 72 ns (of 0.12-0.71 us; RESULTS 2026-11-26 (5)).
 */
const volatile bool cpu_last_task_on = false;

/*
 * A thread's task storage: the runtime at its previous sample, and what its
 * samples learnt of its process's interpreter. not_py is py_gen + 1 when
 * py_procs had no entry for the process at the generation py_gen names
 * and none could be made in BPF (0: not looked up; py_early_proc: a young
 * process may map its interpreter later, so its samples note nothing); py,
 * its thread state as py_threads gave it at a generation. User space bumps py_gen after each interpreter it adds and
 * each change to py_threads (pytrack.c), so a thread of a process that
 * turns out to be Python looks again at its next sample, and a thread
 * state rescanned is looked up again. Until then a sample of a thread that
 * is not Python skips the python_frames() call and its py_procs lookup,
 * and a Python thread's sample the py_threads lookup (hashes of the tgid
 * and tid, on lines the sample finds cold).
 */
struct cpu_task {
	__u64 runtime_ns;
	__u32 not_py;
	__u32 target;	     /* targets_gen + 1 when targets had the process (cpu_target) */
	struct py_tcache py; /* a Python thread's PyThreadState (python_frames) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cpu_task);
} cpu_last_task SEC(".maps");

/*
 * Written by user space only (pytrack.c): one more after each interpreter
 * added to py_procs and each change to py_threads.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} py_gen SEC(".maps");

/*
 * One more after each entry on_exit deletes from targets (the only place
 * one goes): a thread noted as a target at the previous generation looks
 * its process up again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} targets_gen SEC(".maps");

/*
 * is_target() for a sample. With a pid filter (-p, -- CMD), a thread's
 * task storage notes that its process was found in targets, at
 * targets_gen's generation: the thread's later samples skip the hash
 * lookup, and the storage found (*ts) is the one the CPU weight uses. A
 * thread not found is noted nowhere (no storage is made for it).
 */
static __always_inline bool cpu_target(__u32 tgid, struct cpu_task **ts)
{
	struct task_struct *t;
	struct cpu_task *tl;
	__u32 zero = 0, *g, gen = 0;

	if (!cpu_last_task_on || !filter_pids)
		return is_target(tgid);
	if (!passes_cgroup())
		return false;
	/* read before targets: a deletion after it moves it on */
	g = bpf_map_lookup_elem(&targets_gen, &zero);
	if (g)
		gen = *g + 1;
	t = bpf_get_current_task_btf();
	tl = bpf_task_storage_get(&cpu_last_task, t, NULL, 0);
	if (tl && gen && tl->target == gen) {
		*ts = tl;
		return true;
	}
	if (!bpf_map_lookup_elem(&targets, &tgid))
		return false;
	if (!tl)
		tl = bpf_task_storage_get(&cpu_last_task, t, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (tl)
		tl->target = gen;
	*ts = tl;
	return true;
}

/*
 * The running task's CPU time now, as task_sched_runtime() (schedstat's first
 * field) computes it: se.sum_exec_runtime plus the current run since
 * se.exec_start. exec_start is on the run queue's clock_task, which moves
 * only when the rq's clock is updated (ticks, scheduling): the sample's own
 * time (perf_sample_data.time with PERF_SAMPLE_TIME: local_clock(), the
 * clock rq->clock reads) adds how far it has moved since. The rq is found
 * through se.cfs_rq (CONFIG_FAIR_GROUP_SCHED; set for every class by
 * set_task_rq): the per-CPU `runqueues` has no address for BPF without
 * CONFIG_KALLSYMS_ALL. Without either, the runtime lags by less than a tick,
 * which the thread's next sample makes up.
 */
static __always_inline __u64 task_runtime(struct bpf_perf_event_data *ctx, struct task_struct *t)
{
	struct bpf_perf_event_data_kern *kctx = (void *)ctx;
	__u64 rt = t->se.sum_exec_runtime;
	__u64 start = t->se.exec_start;
	__u64 now = BPF_CORE_READ(kctx, data, time), clock, clock_task;
	struct rq *rq = NULL;

	if (bpf_core_field_exists(t->se.cfs_rq))
		rq = t->se.cfs_rq->rq;
	if (!rq)
		return rt;
	clock = rq->clock;
	clock_task = rq->clock_task;
	if (clock_task > start)
		rt += clock_task - start;
	if (now > clock)
		rt += now - clock;
	return rt;
}

/*
 * Nanoseconds of CPU the sample stands for (see cpu_last above). *ts: the
 * thread's task storage (cpu_target's, else found or made here), or NULL
 * (none made, or not used on this kernel).
 */
static __always_inline __u64 sample_cpu_ns(struct bpf_perf_event_data *ctx, __u32 tid,
					   struct cpu_task **ts)
{
	/* a BTF pointer: plain loads, half the time of BPF_CORE_READ's probe reads */
	struct task_struct *t = bpf_get_current_task_btf();
	struct cpu_last *last, fresh;
	struct cpu_task *tl;
	__u64 rt = task_runtime(ctx, t), w;

	if (cpu_last_task_on) {
		tl = *ts;
		if (!tl)
			tl = bpf_task_storage_get(&cpu_last_task, t, NULL,
						  BPF_LOCAL_STORAGE_GET_F_CREATE);
		*ts = tl;
		if (tl && tl->runtime_ns) {
			if (rt <= tl->runtime_ns)
				return 0;
			w = rt - tl->runtime_ns;
			tl->runtime_ns = rt;
			return w;
		}
		if (tl)
			tl->runtime_ns = rt;
		count(CNT_CPU_FIRST);
		return period_ns;
	}
	fresh.start_time = t->start_time;
	last = bpf_map_lookup_elem(&cpu_last, &tid);
	if (last && last->start_time == fresh.start_time) {
		/*
		 * An estimate can run ahead of the kernel's (steal time since the
		 * rq's clock update, which the kernel deducts later): keep the
		 * highest, so that the lead is counted once, not once per sample
		 * that follows it with a lower estimate.
		 */
		if (rt <= last->runtime_ns)
			return 0;
		w = rt - last->runtime_ns;
		last->runtime_ns = rt;
		return w;
	}
	fresh.runtime_ns = rt;
	bpf_map_update_elem(&cpu_last, &tid, &fresh, BPF_ANY);
	count(CNT_CPU_FIRST);
	return period_ns;
}

/* One sample is ~4 KiB: too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_sample);
} scratch SEC(".maps");

/* A global function: the verifier checks the unwinder once, not per caller state. */
__noinline int user_frames(struct bpf_perf_event_data *ctx, struct prof_sample *s, __u32 base)
{
	struct uregs r;

	if (!s)
		return 0;
	uregs_perf(ctx, &r);
	return user_stack(ctx, &r, s, base);
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *task;
	struct prof_sample *s;
	struct cpu_task *ts = NULL;
	__u32 zero = 0, *gen, pygen = 0;
	__u64 klen = 0, ulen = 0, pylen, size, t0 = 0;
	bool none;

	if (time_samples)
		t0 = bpf_ktime_get_ns();
	count(CNT_SAMPLES);
	if (tid == 0) {
		count(CNT_IDLE);
		return 0;
	}
	if (!cpu_target(tgid, &ts)) {
		count(CNT_FILTERED);
		return 0;
	}
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;

	task = (struct task_struct *)bpf_get_current_task();
	sample_init(s, SAMPLE_CPU, sample_cpu_ns(ctx, tid, &ts), tgid, tid);

	/*
	 * Interrupted in user mode, the kernel stack is empty (perf's
	 * get_perf_callchain() walks it only for kernel-mode registers):
	 * bpf_get_stack would take 0.4-0.7 us here to say so.
	 */
	if (want_kernel && !(((const struct uapi_regs *)ctx)->cs & 3))
		klen = kernel_stack(ctx, s, 0);
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
	if (ts) {
		/* read before py_procs: an interpreter added after it moves it on */
		gen = bpf_map_lookup_elem(&py_gen, &zero);
		if (gen)
			pygen = *gen + 1;
	}
	if (!(s->hdr.flags & SAMPLE_F_KTHREAD) && !(ts && pygen && ts->not_py == pygen)) {
		pylen = python_stack_none(s, klen + ulen, ts ? &ts->py : NULL, pygen, &none);
		if (none && ts)
			ts->not_py = pygen;
	}

	size = sizeof(s->hdr) + (klen + ulen + 2 * pylen) * sizeof(__u64);
	if (size > sizeof(*s))
		size = sizeof(*s);
	if (output(s, size,
		   s->hdr.flags & (SAMPLE_F_NO_UNWIND_INFO | SAMPLE_F_STALE_MAPS |
				   SAMPLE_F_PY_NO_THREAD | SAMPLE_F_UNWIND_GAP)))
		count(CNT_RB_FULL);
	if (time_samples)
		time_sample(t0);
	return 0;
}

/*
 * --cgroup (without a pid filter): the processes that exec'd in the cgroup
 * or below it, for the side band's filter (user/collect/sideband.c). A
 * process its runtime forked outside and moved in before the exec (a
 * container's entry point, `docker exec`'s command) is the cgroup's from
 * its exec record on, even when it exited before user space read the
 * record and /proc could say. User space deletes an entry once it has read
 * the process's exit; LRU: one whose exit record was lost goes in time.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* sized from user space */
	__type(key, __u32);	/* tgid */
	__type(value, __u32);
} cgroup_execs SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec_in_cgroup, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, one = 1;

	if (passes_cgroup())
		bpf_map_update_elem(&cgroup_execs, &tgid, &one, BPF_ANY);
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
 * forget it when its last thread exits. Not at its thread group leader's exit:
 * a leader that ends itself (pthread_exit) leaves the process running in its
 * other threads, whose samples were dropped from then on. do_exit counts the
 * thread out of signal->live before this tracepoint (every kernel): 0 is the
 * last.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	__u32 tgid, *reason;

	tgid = BPF_CORE_READ(task, tgid);
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	bpf_map_delete_elem(&early_maps, &tgid);
	if (!follow_children)
		return 0;
	reason = bpf_map_lookup_elem(&targets, &tgid);
	if (reason && *reason == TARGET_CHILD) {
		__u32 zero = 0, *g;

		bpf_map_delete_elem(&targets, &tgid);
		/* after the deletion: see cpu_target */
		g = bpf_map_lookup_elem(&targets_gen, &zero);
		if (g)
			__sync_fetch_and_add(g, 1);
	}
	return 0;
}
