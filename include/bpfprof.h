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
#define MAX_PYSTACK   128
#define TASK_COMM_LEN 16

/*
 * sample_hdr.kind. Every ring buffer record begins with struct
 * prof_sample_hdr; the kind says what follows it. Stack kinds are followed by
 * frames[] (struct prof_sample); the others by a payload defined next to
 * their kind. Numbered, never reordered.
 */
enum sample_kind {
	SAMPLE_CPU = 1,	      /* on-CPU sample; weight = nanoseconds of CPU (cpu_last) */
	SAMPLE_ALLOC = 2,     /* heap: sampled allocation (aux0 address, aux1 size) */
	SAMPLE_FREE = 3,      /* heap: a sampled block retired */
	SAMPLE_OFF_CPU = 4,   /* off-CPU: weight = nanoseconds blocked (sampled: --min-block),
			       * time_ns = when the block began, aux0 = task state,
			       * aux1 = the block's real length in ns */
	SAMPLE_CUDA = 5,      /* CUDA driver call */
	SAMPLE_GPU = 6,	      /* GPU activity record */
	SAMPLE_PYCODE = 7,    /* a Python code object's snapshot (struct pycode_snap) */
	SAMPLE_HEAP_MARK = 8, /* heap: a moment whose in-use is kept (aux0: HEAP_MARK_*) */
};

/*
 * Heap profiling (--alloc, bpf/alloc.bpf.c). SAMPLE_ALLOC: a sampled
 * allocation, frames = the caller's stack, aux0 = address, aux1 = size |
 * ALLOC_F_* flags, weight = size. SAMPLE_FREE: a sampled block was freed or
 * unmapped, aux0 = address, no frames.
 */
#define ALLOC_F_UNTRACKED (1ULL << 63) /* live table full: its free cannot be seen */
#define ALLOC_F_PRELOAD	  (1ULL << 62) /* from the preload library: it reports its free */
/* SAMPLE_HEAP_MARK aux0: Py_FinalizeEx was entered (the interpreter starts shutting down) */
#define HEAP_MARK_PY_FINALIZE 1
/*
 * SAMPLE_HEAP_MARK aux0: the preload library (tools/heap) started in this
 * process image; aux1 = its HELLO_* flags (tools/heap/heap.h) | the rate
 * bit below. Only targets' processes send it.
 */
#define HEAP_MARK_PRELOAD	  2
#define PRELOAD_HELLO_INTERPOSING (1ULL << 0)  /* calls to malloc reach the library */
#define PRELOAD_HELLO_FD_FORM	  (1ULL << 1)  /* it was loaded as /proc/self/fd/N */
#define PRELOAD_RATE_OK		  (1ULL << 32) /* it samples at the agent's rate (set by BPF) */
#define PRELOAD_HELLO_RATE_OK	  PRELOAD_RATE_OK
/*
 * SAMPLE_HEAP_MARK aux0: a target process exec'd (-- CMD): time to check its
 * coverage; aux1 = the CPU time (ns) its thread had then
 */
#define HEAP_MARK_EXEC 3
/*
 * SAMPLE_HEAP_MARK aux0: a process probed with uprobes forked (-- CMD); pid is
 * the parent, aux1 the child: probe the child before it allocates
 */
#define HEAP_MARK_FORK	4
#define ALLOC_SIZE_MASK ((1ULL << 56) - 1)

/*
 * Counters are declared once, as X-macro tables: X(id, name, is_loss, description).
 * The tables make what BPF increments and, in user space
 * (user/util/counters.c), the names and descriptions the summary and -v print;
 * every counter marked a loss reaches the end-of-run summary when it is not 0.
 * Entries are numbered in order: append, never reorder.
 */
#define COUNTER_ENUM(id, name, loss, desc)  id,
#define COUNTER_FIELD(id, name, loss, desc) __u64 id;

/*
 * Per-CPU heap counters (alloc_cnt map): one struct of u64 fields at key 0,
 * so BPF increments a field (c->calls++), summed by user space.
 */
#define ALLOC_COUNTERS(X)                                                                         \
	X(calls, "calls", 0, "outermost allocation calls")                                        \
	X(bytes, "bytes", 0, "bytes they asked for")                                              \
	X(sampled, "sampled", 0, "calls chosen as samples")                                       \
	X(nested, "nested", 0, "calls made inside another one (ignored)")                         \
	X(failed, "failed", 0, "sampled calls that returned no memory")                           \
	X(live_full, "live table full", 1, "sampled blocks the live table had no room for")       \
	X(frees, "frees", 0, "frees/munmaps of sampled blocks")                                   \
	X(lost_alloc, "ring buffer full (allocs)", 1,                                             \
	  "ring buffer full: a sampled allocation lost")                                          \
	X(lost_free, "ring buffer full (frees)", 1,                                               \
	  "ring buffer full: a free of a sampled block lost")                                     \
	X(no_tls, "no thread state", 1, "no per-thread state (task storage full): call not seen") \
	X(set_full, "in-process set full", 1,                                                     \
	  "sampled blocks the preload library's set could not hold: their frees unseen")          \
	X(foreign_rate, "sampler at another rate", 1,                                             \
	  "records of a preload library set to another rate than bpfprof's (dropped)")

struct alloc_counters {
	ALLOC_COUNTERS(COUNTER_FIELD)
};
_Static_assert(sizeof(struct alloc_counters) == 96, "alloc_counters layout");

/* sample_hdr.flags */
enum sample_flags {
	SAMPLE_F_KSTACK_ERR = 1 << 0,	  /* kernel stack could not be read */
	SAMPLE_F_USTACK_ERR = 1 << 1,	  /* user stack could not be read */
	SAMPLE_F_USTACK_TRUNC = 1 << 2,	  /* user stack hit MAX_USTACK */
	SAMPLE_F_KSTACK_TRUNC = 1 << 3,	  /* kernel stack hit MAX_KSTACK */
	SAMPLE_F_KTHREAD = 1 << 4,	  /* kernel thread: no user stack exists */
	SAMPLE_F_UNWIND_FP = 1 << 5,	  /* no unwind info for this process yet: frame pointers */
	SAMPLE_F_UNWIND_STOPPED = 1 << 6, /* table unwinder gave up before the outermost frame */
	SAMPLE_F_NO_UNWIND_INFO =
		1 << 7,		      /* the process has no tables (yet): user space builds them */
	SAMPLE_F_STALE_MAPS = 1 << 8, /* a PC in no mapping BPF knows: user space must resync */
	SAMPLE_F_PY_NO_THREAD =
		1 << 9,		     /* Python process, thread state unknown: user space rescans */
	SAMPLE_F_PY_TRUNC = 1 << 10, /* Python stack deeper than MAX_PYSTACK */
	SAMPLE_F_PY_ERR = 1 << 11,   /* Python frame chain unreadable part way */
	SAMPLE_F_PY_GIL = 1 << 12,   /* the thread held the GIL */
	/* a frame was reached by a frame-pointer step where the tables had no row */
	SAMPLE_F_UNWIND_HEURISTIC = 1 << 13,
	/* the thread's state was found by BPF in the thread list (bpf_pyproc.ts_walk) */
	SAMPLE_F_PY_TS_WALK = 1 << 14,
	/*
	 * a frame lay in a huge file's partial table outside the functions it
	 * holds yet, or in a file whose table is not built (UMAP_PENDING):
	 * user space grows or builds the table, woken now (urgent) so that a
	 * stack's callers come in at the pace of samples, not of 100 ms polls
	 */
	SAMPLE_F_UNWIND_GAP = 1 << 15,
};

/* sample_hdr.flags2: flags has no bit left */
enum sample_flags2 {
	/*
	 * The GIL was read for this Python sample: SAMPLE_F_PY_GIL says whether
	 * the thread held it. Not set where there is no GIL to hold (a
	 * free-threaded build) or it could not be read: no gil label then.
	 */
	SAMPLE_F2_PY_GIL_KNOWN = 1 << 0,
};

/*
 * One sample as it leaves BPF. Header, then frames[]: kstack_len kernel IPs
 * (leaf first), then ustack_len user IPs (leaf first), then pystack_len
 * python frame records (reserved for the interpreter walker). Only the used
 * part of frames[] is copied into the ring buffer.
 */
struct prof_sample_hdr {
	__u64 time_ns;	 /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 weight;	 /* CPU: nanoseconds; bytes etc. for other kinds */
	__u64 cgroup_id; /* cgroup v2 id of the task */
	__u32 pid;	 /* tgid, root pid namespace */
	__u32 tid;	 /* task pid, root pid namespace */
	__u32 cpu;
	__u16 kind;  /* enum sample_kind */
	__u16 flags; /* enum sample_flags */
	__u16 kstack_len;
	__u16 ustack_len;
	__u16 pystack_len;
	__u16 flags2;		   /* enum sample_flags2 */
	char comm[TASK_COMM_LEN];  /* thread name */
	char pcomm[TASK_COMM_LEN]; /* process (thread group leader) name */
	__u64 aux0, aux1;	   /* per kind (see enum sample_kind); 0 for SAMPLE_CPU */
};
_Static_assert(sizeof(struct prof_sample_hdr) == 96, "sample_hdr layout");

struct prof_sample {
	struct prof_sample_hdr hdr;
	__u64 frames[MAX_KSTACK + MAX_USTACK + 2 * MAX_PYSTACK];
};
_Static_assert(sizeof(struct prof_sample) == 96 + 8 * (127 + 128 + 256), "sample layout");

/*
 * CUDA (bpf/cuda.bpf.c, user/cuda/). A SAMPLE_CUDA record is a stack sample
 * (header, then frames as in struct prof_sample; hdr.time_ns is when the
 * driver call began) followed, right after its frames, by a struct
 * cuda_call. A SAMPLE_GPU record is a header followed by a struct gpu_event.
 */
enum cuda_op {
	CUDA_OP_LAUNCH = 1,   /* cuLaunchKernel: handle = CUfunction (or CUkernel) */
	CUDA_OP_LAUNCH_EX,    /* cuLaunchKernelEx */
	CUDA_OP_LAUNCH_COOP,  /* cuLaunchCooperativeKernel */
	CUDA_OP_GRAPH_LAUNCH, /* cuGraphLaunch: handle = CUgraphExec */
	CUDA_OP_MEMCPY_HTOD,  /* bytes copied */
	CUDA_OP_MEMCPY_DTOH,
	CUDA_OP_MEMCPY_DTOD,
	CUDA_OP_MEMCPY,	     /* cuMemcpy (unified addressing: direction unknown) */
	CUDA_OP_MEM_ALLOC,   /* handle = the device pointer allocated, bytes */
	CUDA_OP_MEM_FREE,    /* handle = the device pointer freed */
	CUDA_OP_STREAM_SYNC, /* handle = stream */
	CUDA_OP_CTX_SYNC,
	CUDA_OP_EVENT_SYNC, /* handle = CUevent */
	CUDA_OP__MAX,
};

/* The cookie of a launch probe: which function the one launch program is in */
enum cuda_launch_fn {
	CUDA_LAUNCH_FN_KERNEL = 0, /* cuLaunchKernel[_ptsz] */
	CUDA_LAUNCH_FN_EX = 1,	   /* cuLaunchKernelEx[_ptsz] */
	CUDA_LAUNCH_FN_COOP = 2,   /* cuLaunchCooperativeKernel[_ptsz] */
	CUDA_LAUNCH_FN_GRAPH = 3,  /* cuGraphLaunch[_ptsz] */
};

#define CUDA_CALL_F_ASYNC    1 /* the *Async variant (stream-ordered) */
#define CUDA_CALL_F_AT_ENTRY 2 /* a launch sent from its entry probe: no end_ns, result, corr */

struct cuda_call {
	__u64 end_ns; /* when the call returned (CLOCK_MONOTONIC); 0: F_AT_ENTRY */
	__u64 handle; /* per enum cuda_op */
	__u64 stream; /* CUstream, 0 = the default stream */
	__u64 bytes;
	__u32 corr; /* CUPTI correlation id (0: no CUPTI in the process) */
	__u16 op;   /* enum cuda_op */
	__u8 flags; /* CUDA_CALL_F_* */
	__u8 pad;
	__s32 result; /* CUresult */
	__u32 pad2;
};
_Static_assert(sizeof(struct cuda_call) == 48, "cuda_call layout");

enum gpu_event_type {
	GPU_EV_ACTIVITY = 1, /* a CUPTI activity record (bpfprof:gpu_activity) */
	GPU_EV_FUNC_NAME,    /* handle (CUfunction or CUkernel) got name */
	GPU_EV_FUNC_ALIAS,   /* handle (CUfunction) is the function of handle2 (CUkernel) */
	GPU_EV_DROPPED,	     /* CUPTI dropped `bytes` records */
	GPU_EV_CORR,	     /* corr belongs to the thread's last CUDA_CALL_F_AT_ENTRY launch */
};

/* enum gpu_event.kind for GPU_EV_ACTIVITY (tools/cupti/gpu_records.h) */
enum gpu_kind {
	GPU_KERNEL = 1,
	GPU_MEMCPY = 2,
	GPU_MEMSET = 3,
};

#define GPU_NAME_LEN 256

struct gpu_event {
	__u64 start_ns, end_ns; /* GPU_EV_ACTIVITY: on CLOCK_MONOTONIC */
	__u64 handle, handle2;	/* GPU_EV_FUNC_*; ACTIVITY: the name's address in the process */
	__u64 bytes;		/* memcpy/memset bytes; GPU_EV_DROPPED: records dropped */
	__u32 type;		/* enum gpu_event_type */
	__u32 kind;		/* enum gpu_kind */
	__u32 corr;		/* CUPTI correlation id */
	__u32 device;
	__u32 stream;	 /* CUPTI stream id */
	__u32 copy_kind; /* CUpti_ActivityMemcpyKind */
	__u32 name_len;	 /* bytes of name[] used, NUL included; 0: no name sent */
	__u32 pad;
	char name[GPU_NAME_LEN]; /* sent once per (process, name address) */
};
_Static_assert(sizeof(struct gpu_event) == 72 + GPU_NAME_LEN, "gpu_event layout");

/* Per-CPU counters of bpf/cuda.bpf.c (its own map, cuda_counters). */
#define CUDA_COUNTERS(X)                                                                          \
	X(CUDA_CNT_CALLS, "calls", 0, "probed driver calls recorded (records sent or lost)")      \
	X(CUDA_CNT_NO_ENTRY, "return without entry", 1,                                           \
	  "a return without its entry (probes attached mid-call)")                                \
	X(CUDA_CNT_OVERWRITTEN, "entry without return", 1, "an entry whose return never came")    \
	X(CUDA_CNT_RB_FULL, "ring buffer full (calls)", 1, "ring buffer full: call record lost")  \
	X(CUDA_CNT_GPU_RB_FULL, "ring buffer full (GPU)", 1, "ring buffer full: GPU record lost") \
	X(CUDA_CNT_CORR_ORPHAN, "correlation without call", 1,                                    \
	  "a correlation id with no probed call in flight")                                       \
	X(CUDA_CNT_INFLIGHT_FULL, "too many in flight", 1, "too many calls in flight: not recorded")

enum cuda_counter {
	CUDA_COUNTERS(COUNTER_ENUM) CUDA_CNT__MAX
};

/* Per-CPU counters every BPF object shares (the `counters` map, bpf/common.bpf.h). */
#define BPF_COUNTERS(X)                                                                           \
	X(CNT_SAMPLES, "events", 0, "perf events the program ran for")                            \
	X(CNT_FILTERED, "filtered", 0, "not a target (pid/cgroup filter)")                        \
	X(CNT_IDLE, "idle", 0, "the idle task: not recorded")                                     \
	X(CNT_RB_FULL, "ring buffer full", 1, "ring buffer full: sample lost")                    \
	X(CNT_KSTACK_ERR, "kernel stack unreadable", 1, "bpf_get_stack(kernel) failed")           \
	X(CNT_USTACK_ERR, "user stack unreadable", 1, "bpf_get_stack(user) failed")               \
	X(CNT_FORK_FOLLOWED, "children followed", 0, "children added to the pid filter")          \
	X(CNT_FILTER_FULL, "pid filter full", 1, "pid filter map full: a child was not followed") \
	X(CNT_UNW_NO_PROC, "no unwind info", 1,                                                   \
	  "no unwind info for the process yet (fell back or leaf only)")                          \
	X(CNT_UNW_LAZY, "unwind: not described yet", 0,                                           \
	  "a process not described yet walked through its files' tables (file_unwind)")           \
	X(CNT_UNW_STALE_DESC, "unwind: description without the leaf", 0,                          \
	  "a process's description lacks its leaf's mapping (before its exec): walked as new")    \
	X(CNT_EARLY_MAP_LOST, "unwind: early mapping not kept", 1,                                \
	  "an executable mapping of a process not described yet was not kept (early_maps)")       \
	X(CNT_UNW_NO_MAPPING, "unwind: no mapping", 1, "a PC in no known executable mapping")     \
	X(CNT_UNW_NO_ROW, "unwind: no row", 1, "a PC in a mapping whose table has no row for it") \
	X(CNT_UNW_UNSUPPORTED, "unwind: unsupported rule", 1, "a CFA rule we cannot follow")      \
	X(CNT_UNW_READ_FAILED, "unwind: stack unreadable", 1, "reading the user stack failed")    \
	X(CNT_UNW_ANON, "unwind: JIT/anonymous code", 1,                                          \
	  "stopped in anonymous executable memory (JIT)")                                         \
	X(CNT_UNW_TRUNCATED, "unwind: truncated", 1, "more than MAX_USTACK frames")               \
	X(CNT_UNW_TABLE_PENDING, "unwind: table pending", 1,                                      \
	  "the mapping's table is not built yet")                                                 \
	X(CNT_UNW_OK, "unwind: complete", 0, "reached the outermost frame")                       \
	X(CNT_PY_NO_THREAD, "python: thread unknown", 1,                                          \
	  "a Python process's thread not in py_threads yet")                                      \
	X(CNT_PY_READ_FAILED, "python: read failed", 1, "reading interpreter memory failed")      \
	X(CNT_PY_TRUNCATED, "python: truncated", 1, "more than MAX_PYSTACK Python frames")        \
	X(CNT_PY_SNAP_SENT, "python: snapshots sent", 0,                                          \
	  "code object snapshots sent (SAMPLE_PYCODE)")                                           \
	X(CNT_PY_SNAP_LOST, "python: snapshots lost", 0,                                          \
	  "ring buffer full: snapshot lost (sent again later)")                                   \
	X(CNT_PY_SNAP_UNREADABLE, "python: code object unreadable", 1,                            \
	  "a code object's header unreadable: no snapshot")                                       \
	X(CNT_PY_SNAP_DEFERRED, "python: snapshots deferred", 0,                                  \
	  "more new code objects than a sample snapshots: later")                                 \
	X(CNT_UNW_FP_FALLBACK, "unwind: frame-pointer steps", 0,                                  \
	  "frames reached by a validated frame-pointer step where the tables had no row")         \
	X(CNT_UNW_BAD_FP, "unwind: bad frame pointer", 1,                                         \
	  "a file without CFI whose RBP is no frame pointer (below SP, or no code at [RBP+8])")   \
	X(CNT_SAMPLE_NS, "sample ns", 0,                                                          \
	  "BPF time spent on recorded samples (timed with -v only)")                              \
	X(CNT_CPU_FIRST, "cpu time: first samples", 0,                                            \
	  "a thread's first sample (or its cpu_last entry evicted, its task storage not made): "  \
	  "weighs one period")                                                                    \
	X(CNT_PY_TS_WALK, "python: thread found by BPF", 0,                                       \
	  "a thread not in py_threads yet found in the interpreter's thread list (ts_walk)")      \
	X(CNT_PY_EARLY_PROC, "python: interpreter found by BPF", 0,                               \
	  "a process's py_procs entry made by BPF from py_files and early_maps")                  \
	X(CNT_UNW_PARTIAL_GAP, "unwind: function not in partial table yet", 0,                    \
	  "a frame in a huge file's partial table outside the functions it holds yet: "           \
	  "a frame-pointer step")                                                                 \
	X(CNT_UNW_ANON_FOUND, "unwind: anonymous code found by BPF", 0,                           \
	  "a PC in anonymous executable memory not in the process's description (mprotect'ed "    \
	  "JIT code): found by bpf_find_vma, stepped by frame pointers")                          \
	X(CNT_UNW_TRAMPOLINE, "unwind: trampoline steps", 0,                                      \
	  "frames stepped through a CPython perf trampoline (-X perf) by its known frame layout") \
	X(CNT_UNW_ENTRY, "unwind: process entry", 0,                                              \
	  "walks that ended at the process's entry frame (its stack pointer at mm->start_stack)")

/*
 * CPU time of a sample (bpf/cpu.bpf.c): the thread's CPU time by the kernel's
 * account (what /proc/PID/task/TID/schedstat says) at its previous sample, in
 * the thread's task storage (kernels 6.5+), else per thread id in the cpu_last
 * LRU map, where start_time tells a thread from a later one that reuses its id.
 */
struct cpu_last {
	__u64 runtime_ns; /* se.sum_exec_runtime plus the current run, at the last sample */
	__u64 start_time; /* task->start_time of the thread */
};
_Static_assert(sizeof(struct cpu_last) == 16, "cpu_last layout");
/* cpu_last entries (~100 bytes of kernel memory each): -p and -- CMD, -a and cgroups */
#define CPU_LAST_TARGETS 8192
#define CPU_LAST_MACHINE 32768

enum bpf_counter {
	BPF_COUNTERS(COUNTER_ENUM) CNT__MAX
};

/* Off-CPU counters (bpf/offcpu.bpf.c, its own per-CPU array). */
#define OFFCPU_COUNTERS(X)                                                           \
	X(OFFCPU_CNT_BLOCKS, "blocks", 0, "blocks that ended while recording")       \
	X(OFFCPU_CNT_BLOCKED_NS, "blocked ns", 0, "their total length")              \
	X(OFFCPU_CNT_SHORT, "short blocks", 0, "of which shorter than --min-block")  \
	X(OFFCPU_CNT_SHORT_NS, "short blocks ns", 0, "their total length")           \
	X(OFFCPU_CNT_SHORT_SAMPLED, "short blocks recorded", 0,                      \
	  "short blocks recorded (weight --min-block)")                              \
	X(OFFCPU_CNT_LOST, "ring buffer full", 1, "records lost (ring buffer full)") \
	X(OFFCPU_CNT_LOST_NS, "ring buffer full ns", 0, "the weight they carried")   \
	X(OFFCPU_CNT_NO_STORAGE, "no task storage", 1,                               \
	  "switch-outs with no task storage: block not timed")                       \
	X(OFFCPU_CNT_WALKS, "stack walks", 0, "stacks walked at switch-out (the rest reused one)")

enum offcpu_counter {
	OFFCPU_COUNTERS(COUNTER_ENUM) OFFCPU_CNT__MAX
};

/*
 * Table-driven native unwinding. User space compiles each file's .eh_frame
 * into rows (sorted by pc, one file's rows contiguous in the `unwind_rows`
 * array) and describes each process's executable mappings in `proc_unwind`.
 */
enum urow_cfa {
	UROW_CFA_UNSUPPORTED = 0,
	UROW_CFA_SP = 1,     /* CFA = RSP + cfa_off */
	UROW_CFA_FP = 2,     /* CFA = RBP + cfa_off */
	UROW_CFA_PLT = 3,    /* CFA = RSP + 8 + ((RIP & 15) >= cfa_off ? 8 : 0) */
	UROW_CFA_END = 4,    /* outermost frame */
	UROW_CFA_SIGNAL = 5, /* rt_sigreturn trampoline: registers in the ucontext at RSP */
	UROW_CFA_GAP = 6,    /* partial table: this function's rows not in yet (frame pointers) */
};

enum urow_rbp {
	UROW_RBP_SAME = 0,
	UROW_RBP_CFA = 1, /* caller's RBP at CFA + rbp_off */
	UROW_RBP_UNSUPPORTED = 2,
};

/*
 * The rows are in chunks, arrays of their own in the `unwind_rows` array of
 * maps, so that user space can add room while it runs (a BPF array cannot
 * grow, and allocates all of its memory when it is made): row index i is
 * row (i & UNWIND_CHUNK_MASK) of chunk (i >> UNWIND_CHUNK_SHIFT). A chunk
 * holds at most 1 << UNWIND_CHUNK_SHIFT rows (32 MiB); a table never spans
 * two.
 */
#define UNWIND_CHUNK_SHIFT 22
#define UNWIND_CHUNK_MASK  ((1u << UNWIND_CHUNK_SHIFT) - 1)

/* 8 bytes: a file with a million rows costs 8 MB, shared by every process mapping it. */
struct bpf_urow {
	__u32 pc;      /* ELF vaddr - mapping's table base */
	__s16 cfa_off; /* bytes; larger offsets are compiled as unsupported */
	__s8 rbp_off8; /* caller's RBP at CFA + 8 * rbp_off8 */
	__u8 rules;    /* enum urow_cfa | enum urow_rbp << 4 */
};
_Static_assert(sizeof(struct bpf_urow) == 8, "bpf_urow layout");

enum umap_kind {
	UMAP_TABLE = 1,	  /* unwind with rows [first, first + count) */
	UMAP_FP = 2,	  /* no CFI in the file: frame pointers */
	UMAP_ANON = 3,	  /* anonymous executable memory: a validated frame-pointer step */
	UMAP_PENDING = 4, /* table not built yet: frame pointers, counted, user space woken */
	/*
	 * Anonymous code made of copies of one trampoline whose only call is
	 * `call *%rcx` (CPython's -X perf): at a return address into it the
	 * CFA is RSP + first, the caller's RBP at CFA - count (count 0: RBP
	 * untouched). A leaf in it takes the UMAP_ANON step.
	 */
	UMAP_TRAMP = 5,
};

/* Executable mappings per process the unwinder can know. */
#define MAX_UMAPS 512

struct bpf_umap {
	__u64 start, end; /* [start, end) runtime addresses */
	__u64 bias;	  /* row pc = ip - bias */
	__u32 first;	  /* index of the first row in unwind_rows */
	__u32 count;
	__u32 kind; /* enum umap_kind */
	__u32 pad;
};
_Static_assert(sizeof(struct bpf_umap) == 40, "bpf_umap layout");

struct bpf_proc_unwind {
	__u32 nmaps; /* sorted by start, non-overlapping */
	__u32 pad;
	struct bpf_umap maps[MAX_UMAPS];
};

/*
 * file_unwind: a file's table, keyed by its inode as the kernel numbers it
 * (s_dev, i_ino), for processes user space has not described yet (a 2 ms
 * program exits before its maps are read; a command's first milliseconds;
 * a dlopen'd library). BPF finds the mapping of a PC with bpf_find_vma()
 * and, from the VMA's file, start and page offset, builds the one mapping
 * description user space would have written:
 *   bias = vm_start - vm_pgoff * 4096 - segs[s].delta + base
 * for the PT_LOAD segment s whose file range holds vm_pgoff * 4096. Written
 * when the table is built (and for a file served by another's table, same
 * build id, when a process of it is described); deleted before the rows are
 * freed.
 */
#define FILE_UNWIND_SEGS 4

struct file_unwind_key {
	__u64 dev; /* the kernel's dev_t: major << 20 | minor */
	__u64 ino;
};

/*
 * The vDSO's table: the same image in every process (of a boot), so one
 * entry, under a key no file has (device 0, inode ~0). BPF finds the vDSO
 * of a process not described yet at mm->context.vdso.
 */
#define FILE_UNWIND_VDSO_DEV 0ULL
#define FILE_UNWIND_VDSO_INO (~0ULL)

struct file_unwind {
	__u32 first, count; /* rows [first, first + count) */
	__u64 base;	    /* ELF vaddr of row pc 0 */
	struct {
		__u64 off, end; /* [off, end) in the file; end 0: unused */
		__u64 delta;	/* p_vaddr - p_offset */
	} segs[FILE_UNWIND_SEGS];
};
_Static_assert(sizeof(struct file_unwind) == 112, "file_unwind layout");

/*
 * early_maps: per process (tgid), its executable file mappings as BPF saw
 * them made (fentry on perf_event_mmap: the executable and the dynamic
 * loader mapped by execve, every library after), sorted by start, for the
 * samples it gets before user space has described it. Of the address
 * space mm only (an exec starts a new list); deleted when the process
 * exits or user space describes it.
 */
#define EARLY_MAPS 32

struct early_map {
	__u64 start, end;
	__u64 off; /* file offset of start (vm_pgoff * 4096) */
	__u64 dev, ino;
};

struct early_maps {
	__u64 mm;
	__u32 n;
	__u32 flags; /* EARLY_F_*: which of the mm's own mappings are in m[] */
	struct early_map m[EARLY_MAPS];
};

/*
 * early_maps.flags: the executable's text (mm->start_code) and the vDSO
 * (mm->context.vdso) are in; until then each sample tries again, since a
 * sample taken during the exec finds the new mm before either is set up.
 */
#define EARLY_F_EXE  1
#define EARLY_F_VDSO 2

/*
 * CPython. User space finds each interpreter's layout (per-version table for
 * 3.8-3.12, _Py_DebugOffsets for 3.13+) and writes it to `py_procs`; it also
 * keeps `py_threads` (tid -> PyThreadState address) from the interpreter's
 * thread list. BPF walks the frame chain and emits, per Python frame, the
 * code object address and the raw instruction position; strings and line
 * numbers are user space's.
 */
enum py_model {
	PY_MODEL_FRAMEOBJ = 1, /* 3.8-3.10: tstate->frame, PyFrameObject, f_back, int f_lasti */
	PY_MODEL_CFRAME = 2,   /* 3.11-3.12: tstate->cframe->current_frame, _PyInterpreterFrame */
	PY_MODEL_IFRAME = 3,   /* 3.13+: tstate->current_frame, _PyInterpreterFrame */
};

struct bpf_pyproc {
	__u32 model;	      /* enum py_model */
	__u32 version;	      /* PY_VERSION_HEX */
	__s32 tstate_frame;   /* offset in PyThreadState of frame / cframe / current_frame */
	__s32 cframe_current; /* PY_MODEL_CFRAME: offset of current_frame in _PyCFrame */
	__s32 frame_code;     /* f_code / f_executable */
	__s32 frame_back;     /* f_back / previous */
	__s32 frame_instr;    /* f_lasti (int) / prev_instr / instr_ptr (pointer) */
	__s32 frame_owner;    /* owner (char), -1 if the version has none */
	__s32 frame_is_entry; /* 3.11: is_entry (bool), else -1 */
	__u32 owner_cstack;   /* lowest owner value that is not a Python frame (C-stack shims:
				 * skipped, and mark where an eval call began) */
	__u64 gil_holder;     /* address of the GIL's last holder (PyThreadState *), 0: unknown */
	__u64 gil_locked;     /* address of the GIL's locked flag (int) */
	__u32 frame_span;     /* bytes of a frame that hold every field above (<= PYFRAME_SPAN) */
	__s32 frame_globals;  /* f_globals, -1 if unknown: part of a code object's identity */
	/*
	 * Code object snapshots (SAMPLE_PYCODE): offsets into PyCodeObject,
	 * PyASCIIObject/PyCompactUnicodeObject and PyBytesObject.
	 */
	__u16 code_read; /* bytes of the code object's header to copy; 0: no snapshots */
	__s16 co_name;	 /* co_qualname (3.11+), co_name before */
	__s16 co_filename;
	__s16 co_linetable; /* co_lnotab (3.8, 3.9), co_linetable */
	__s16 ob_type;
	__s16 str_length;
	__s16 str_state;
	__u16 str_ascii_size;	/* data of a compact ASCII str starts here */
	__u16 str_compact_size; /* data of other compact str starts here */
	__s16 bytes_size;
	__u16 bytes_sval;
	__u8 str_kind_shift; /* state: kind:3 at this bit, then compact, ascii */
	__u8 pad2;
	__u16 snap_gen;	  /* part of pycode_seen's key: bumped at exec */
	__u16 snap_epoch; /* bumped when user space drops a pycode_seen key */
	/*
	 * Non-zero while user space has not yet found a thread of the process:
	 * a sampled thread missing from py_threads is looked for by BPF in the
	 * interpreter's thread list (its thread_id is the thread's pthread_t,
	 * the fs base on x86-64), with the offsets below. A process's first
	 * samples then have Python frames as soon as its thread state exists,
	 * not after user space has read the list (docs/python.md).
	 */
	__u32 ts_walk;
	__u64 runtime;	      /* address of _PyRuntime */
	__s32 rt_interp_head; /* _PyRuntime.interpreters.head */
	__s32 is_threads_head;
	__s32 ts_next;
	__s32 ts_thread_id; /* PyThreadState.thread_id (pthread_t) */
	__s32 ts_interp;
	/*
	 * Free-threaded 3.14+: a frame's instr_ptr points into its thread's
	 * copy of the bytecode, code->co_tlbc->entries[frame->tlbc_index]
	 * (entry 0 is co_code_adaptive): the walk rebases it onto
	 * co_code_adaptive. Offsets of tlbc_index (int32) in the frame and of
	 * co_tlbc in the code object; 0: no per-thread copies.
	 */
	__u16 frame_tlbc;
	__u16 co_tlbc;
};
_Static_assert(sizeof(struct bpf_pyproc) == 128, "bpf_pyproc layout");

/*
 * py_files: an interpreter file user space has probed once (libpython3.X.so,
 * or an executable with it linked in), by device and inode as in
 * file_unwind_key. A process of it that user space has not probed yet gets
 * its py_procs entry from BPF, made from this and where early_maps says
 * the file's text is mapped: its samples have Python frames before user
 * space has even read its mappings (docs/python.md "Finding interpreters").
 */
struct bpf_pyfile {
	struct bpf_pyproc pp; /* pp.runtime: _PyRuntime's ELF vaddr; no GIL addresses */
	__u64 off, end;	      /* the executable PT_LOAD's file bytes [off, end) */
	__u64 delta;	      /* its p_vaddr - p_offset */
};
_Static_assert(sizeof(struct bpf_pyfile) == 152, "bpf_pyfile layout");

/*
 * SAMPLE_PYCODE: what symbolizing a code object needs, read by BPF the first
 * time a sample of the process shows it (pycode_seen: once per (process,
 * code object)), so that frames of a process that exited before user space
 * drained the ring buffer can still be named. The header (no frames), then
 * struct pycode_snap, of which only data[] up to the last object is sent.
 * Sent before the first sample that names the code object. Everything in it
 * is the target's memory: user space validates it as it does a live read.
 */
#define PYSNAP_CODE_MAX	 256  /* the code object's header (pylayout co_read) */
#define PYSNAP_NAME_MAX	 256  /* bytes of the qualname's data */
#define PYSNAP_FILE_MAX	 512  /* bytes of the filename's data */
#define PYSNAP_LINES_MAX 4096 /* bytes of the line table: longer ones are cut */
#define PYSNAP_DATA	 (PYSNAP_CODE_MAX + PYSNAP_NAME_MAX + PYSNAP_FILE_MAX + PYSNAP_LINES_MAX)
/*
 * New code objects snapshotted per sample at most; the rest on later samples.
 * A power of two. 8 was too few: a process's start (site's .pth imports,
 * typing's module code under three imports) shows 20-40 new code objects in
 * one sample, and a deferred one that lived for that sample only (a module's
 * or class body's code, freed when its import ends) had no snapshot when a
 * late drain found it freed: [python: unreadable]. Each object is still sent
 * once: only the first samples of a process send more at a time.
 */
#define PYSNAP_PER_SAMPLE 32

/* A str or bytes object the code object points to, as found. */
struct pysnap_obj {
	__u64 type;  /* its ob_type */
	__u64 len;   /* its length field: code points (str), bytes (bytes) */
	__u32 state; /* str: its state word; bytes: 0 */
	__u16 off;   /* its data in pycode_snap.data[] starts here */
	__u16 bytes; /* bytes of its data sent (0: unreadable) */
};
_Static_assert(sizeof(struct pysnap_obj) == 24, "pysnap_obj layout");

struct pycode_snap {
	__u64 code;	  /* the code object's address */
	__u16 code_bytes; /* bytes of its header at data[0] */
	__u16 tag;	  /* pycode_seen_key.tag of the frame that showed it */
	__u16 pad[2];
	struct pysnap_obj name, file, lines; /* qualname (name before 3.11), filename, line table */
	__u8 data[PYSNAP_DATA];
};
_Static_assert(sizeof(struct pycode_snap) == 16 + 3 * 24 + PYSNAP_DATA, "pycode_snap layout");

/*
 * pycode_seen's key: the code objects whose snapshot was sent. A code
 * object's address alone does not name it for long: a module's code runs
 * once and is freed, and the next module's code is often allocated at the
 * same address (importing a package runs hundreds of them in a row). The
 * tag, a 16-bit hash of the frame's f_globals (the module's dict, which
 * outlives the import), tells such objects apart without reading them, so
 * that the next module's code gets its own snapshot. PYCODE_TAG().
 */
struct pycode_seen_key {
	__u32 tgid;
	__u16 gen; /* bpf_pyproc.snap_gen */
	__u16 tag; /* PYCODE_TAG(f_globals); 0: none */
	__u64 code;
};
#define PYCODE_TAG(g) ((__u16)(((g) >> 4) ^ ((g) >> 20) ^ ((g) >> 36)))
_Static_assert(sizeof(struct pycode_seen_key) == 16, "pycode_seen_key layout");

/*
 * -v: a histogram of the BPF time of walked samples (the sample_hist map),
 * log-linear: below 16 ns one bucket per ns, then 16 buckets per power of
 * two (6% wide), so that a median can be quoted, which the few samples
 * that build a new process's state or miss every cache do not move.
 */
#define SAMPLE_HIST_SUB	    16
#define SAMPLE_HIST_BUCKETS 512

/* The bucket of ns, and the first ns of bucket b. */
static inline __u32 sample_hist_bucket(__u64 ns)
{
	__u32 l = 0;
	__u64 v = ns;

	if (ns < SAMPLE_HIST_SUB)
		return ns;
	if (v >> 32) {
		v >>= 32;
		l += 32;
	}
	if (v >> 16) {
		v >>= 16;
		l += 16;
	}
	if (v >> 8) {
		v >>= 8;
		l += 8;
	}
	if (v >> 4) {
		v >>= 4;
		l += 4;
	}
	if (v >> 2) {
		v >>= 2;
		l += 2;
	}
	if (v >> 1)
		l += 1;
	/* l >= 4: ns in [2^l, 2^(l+1)), 16 buckets of 2^(l-4) */
	l = SAMPLE_HIST_SUB * (l - 3) + ((ns >> (l - 4)) & (SAMPLE_HIST_SUB - 1));
	return l < SAMPLE_HIST_BUCKETS ? l : SAMPLE_HIST_BUCKETS - 1;
}

static inline __u64 sample_hist_floor(__u32 b)
{
	__u32 l = b / SAMPLE_HIST_SUB + 3;

	if (b < SAMPLE_HIST_SUB)
		return b;
	return (__u64)(SAMPLE_HIST_SUB + b % SAMPLE_HIST_SUB) << (l - 4);
}

/* A frame's fields are read in one copy of at most this many bytes. */
#define PYFRAME_SPAN 128

/*
 * A native user frame's word: the address, and in its top bit whether it is
 * a call of the eval loop that ran Python frames of this sample (found by
 * where its entry frame lies on the stack: python.bpf.h, py_mark_eval).
 * User addresses are below 2^47.
 */
#define UFRAME_F_PYEVAL (1ULL << 63)

/* The second word of a Python frame record: raw position | flags. */
#define PYFRAME_INSTR_MASK ((1ULL << 56) - 1)
#define PYFRAME_F_ENTRY	   (1ULL << 63) /* first frame of its _PyEval_EvalFrameDefault call */

/* --unwind */
enum unwind_mode {
	UNWIND_AUTO = 0, /* tables where ready, else frame pointers (flagged) */
	UNWIND_FP = 1,
	UNWIND_DWARF = 2, /* tables only: a process without them gets its leaf frame */
};

/* Value of the pid filter map: why the pid is a target. */
enum target_reason {
	TARGET_GIVEN = 1, /* named with -p or started with -- CMD */
	TARGET_CHILD = 2, /* a descendant, followed at fork */
};

#endif /* BPFPROF_H */
