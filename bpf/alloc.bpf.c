// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap profiling: uprobes on the malloc family and on anonymous mmap/munmap.
 *
 * Sampling is by bytes, as tcmalloc and Go do: each thread counts down the
 * bytes to its next sample point, drawn from an exponential distribution of
 * mean alloc_rate, so that every allocated byte is a sample point with
 * probability 1/alloc_rate independently of the others (a Poisson process
 * over bytes). An allocation holding a sample point is sampled; user space
 * weights it by 1/P(sampled) = 1/(1 - exp(-size/rate)), which makes the
 * totals unbiased estimates.
 *
 * An unsampled call costs a task-storage lookup, a counter update and a few
 * stores on entry, the same lookup on return: no stack walk, no ring buffer
 * write. A sampled one walks the native and Python stacks in the return
 * probe (where the address is known), enters (tgid, address) in alloc_live
 * and sends a SAMPLE_ALLOC record. free/munmap look the address up in
 * alloc_live, so that only frees of sampled blocks reach user space
 * (SAMPLE_FREE).
 *
 * Nesting: an allocation call made while another one of the same thread is in
 * progress is ignored (glibc's malloc calls its own mmap and free, a
 * preloaded wrapper calls the next malloc): the outermost call is the
 * allocation. The entry probe keeps the stack pointer of the call in
 * progress; only the return whose stack pointer is 8 above it (its return
 * address popped) ends it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAP_ANONYMOUS 0x20
#define MAP_FAILED    ((__u64)-1)
#define PAGE_SIZE     4096ULL
/* bpfprof_heap_sampled's size argument: the library's set of sampled addresses was full */
#define PRELOAD_F_UNTRACKED (1ULL << 63)

const volatile __u64 alloc_rate = 512 * 1024; /* mean bytes between samples; 1: every call */
const volatile bool alloc_want_user = true;
const volatile __u32 self_tgid = 0; /* bpfprof itself is never traced */

enum call_kind {
	CALL_PLAIN = 0,	  /* the address is the return value */
	CALL_REALLOC = 1, /* arg: the old block, retired when the call succeeds */
	CALL_OUTPTR = 2,  /* posix_memalign: arg is where the address is stored */
	CALL_MMAP = 3,	  /* MAP_FAILED is failure */
};

/* Per thread, in task storage (freed with the thread, no lookup by tid). */
struct alloc_tls {
	__s64 until; /* bytes left before the next sample point */
	__u64 sp;    /* entry stack pointer of the call in progress, 0: none */
	__u64 size;
	__u64 arg;
	__u32 kind; /* enum call_kind */
	__u8 sampled;
	__u8 init;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct alloc_tls);
} alloc_tls SEC(".maps");

struct alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

/* Sampled blocks not freed yet: frees of other addresses stop at one lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 19); /* sized from user space */
	__type(key, struct alloc_key);
	__type(value, __u32);
} alloc_live SEC(".maps");

/* The sample being built (~4 KiB, too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_sample);
} alloc_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct alloc_counters);
} alloc_cnt SEC(".maps");

/* log2(1 + (i + 0.5) / 256) * 65536: a log2's fraction from the 8 bits below the top bit */
static const __u16 log2_frac[256] = {
	184,   552,   919,   1284,  1648,  2010,  2371,	 2730,	3088,  3445,  3801,  4155,  4507,
	4859,  5209,  5558,  5906,  6252,  6597,  6941,	 7283,	7625,  7965,  8304,  8641,  8978,
	9313,  9647,  9980,  10312, 10642, 10972, 11300, 11627, 11953, 12278, 12602, 12925, 13246,
	13567, 13886, 14205, 14522, 14838, 15153, 15467, 15781, 16093, 16404, 16714, 17023, 17331,
	17637, 17943, 18248, 18552, 18856, 19158, 19459, 19759, 20058, 20356, 20654, 20950, 21245,
	21540, 21834, 22126, 22418, 22709, 22999, 23288, 23577, 23864, 24150, 24436, 24721, 25005,
	25288, 25570, 25852, 26132, 26412, 26691, 26969, 27246, 27523, 27798, 28073, 28347, 28620,
	28893, 29164, 29435, 29706, 29975, 30244, 30511, 30778, 31045, 31310, 31575, 31839, 32103,
	32365, 32627, 32888, 33149, 33409, 33668, 33926, 34184, 34441, 34697, 34952, 35207, 35461,
	35715, 35968, 36220, 36471, 36722, 36972, 37222, 37470, 37719, 37966, 38213, 38459, 38705,
	38950, 39194, 39438, 39681, 39923, 40165, 40406, 40647, 40887, 41126, 41365, 41603, 41841,
	42077, 42314, 42550, 42785, 43019, 43253, 43487, 43720, 43952, 44184, 44415, 44646, 44876,
	45105, 45334, 45562, 45790, 46018, 46244, 46471, 46696, 46921, 47146, 47370, 47593, 47816,
	48039, 48261, 48482, 48703, 48924, 49143, 49363, 49582, 49800, 50018, 50235, 50452, 50668,
	50884, 51100, 51315, 51529, 51743, 51956, 52169, 52382, 52594, 52805, 53016, 53227, 53437,
	53647, 53856, 54064, 54273, 54481, 54688, 54895, 55101, 55307, 55513, 55718, 55922, 56127,
	56330, 56534, 56737, 56939, 57141, 57343, 57544, 57745, 57945, 58145, 58344, 58543, 58742,
	58940, 59138, 59335, 59532, 59729, 59925, 60121, 60316, 60511, 60706, 60900, 61094, 61287,
	61480, 61672, 61865, 62056, 62248, 62439, 62629, 62820, 63010, 63199, 63388, 63577, 63765,
	63953, 64141, 64328, 64515, 64701, 64887, 65073, 65259, 65444,
};

static __always_inline struct alloc_counters *alloc_counters_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&alloc_cnt, &zero);
}

/*
 * Bytes to the next sample point: -rate * ln(U), U uniform in (0, 1], in
 * integer arithmetic. With x = U * 2^32, -ln(U) = (32 - log2(x)) * ln 2;
 * log2(x) is the top bit's position plus a table lookup on the next 8 bits
 * (each entry the middle of its step, so that truncation does not bias the
 * mean: the mean is within 0.1% of rate).
 */
static __always_inline __s64 next_sample(void)
{
	__u32 x = bpf_get_prandom_u32() | 1, v = x, e = 0, m;
	__u64 l, t;

	if (v >> 16) {
		e += 16;
		v >>= 16;
	}
	if (v >> 8) {
		e += 8;
		v >>= 8;
	}
	if (v >> 4) {
		e += 4;
		v >>= 4;
	}
	if (v >> 2) {
		e += 2;
		v >>= 2;
	}
	if (v >> 1) {
		e += 1;
	}
	m = e >= 8 ? x >> (e - 8) : x << (8 - e);
	m &= 0xff;
	/* -log2(U) in 1/65536 units: > 0 since log2_frac[255] < 65536 */
	l = (32ULL << 16) - (((__u64)e << 16) + log2_frac[m]);
	/* times ln 2 (45426 / 65536); two steps for large rates to stay in 64 bits */
	if (alloc_rate < (1ULL << 26))
		t = (alloc_rate * l * 45426) >> 32;
	else
		t = ((alloc_rate * l) >> 16) * 45426 >> 16;
	return (__s64)t;
}

/* The entry of an allocation call: nesting, counting, the sampling decision. */
static __always_inline int enter(struct pt_regs *ctx, __u64 size, __u64 arg, __u32 kind)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 sp = PT_REGS_SP(ctx), eff;
	struct alloc_counters *c;
	struct alloc_tls *t;
	bool sampled;

	if (tgid == self_tgid)
		return 0;
	c = alloc_counters_get();
	if (!c)
		return 0;
	t = bpf_task_storage_get(&alloc_tls, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		c->no_tls++;
		return 0;
	}
	/*
	 * A call of this thread in progress further up the stack: this one is
	 * part of it. The same stack pointer: a second probe on the same
	 * address (glibc's aligned_alloc is memalign).
	 */
	if (t->sp && sp <= t->sp) {
		c->nested++;
		return 0;
	}
	if (!t->init) {
		t->until = next_sample();
		t->init = 1;
	}
	sampled = false;
	if (kind != CALL_REALLOC || size) { /* realloc(p, 0) is a free */
		c->calls++;
		c->bytes += size;
		/* malloc(0) still returns a block: it counts as one byte */
		eff = size ? size : 1;
		if (eff > ALLOC_SIZE_MASK)
			eff = ALLOC_SIZE_MASK;
		if (alloc_rate <= 1) {
			sampled = true;
		} else if (t->until > (__s64)eff) {
			t->until -= eff;
		} else {
			sampled = true;
			t->until = next_sample();
		}
	}
	t->sp = sp;
	t->size = size;
	t->arg = arg;
	t->kind = kind;
	t->sampled = sampled;
	return 0;
}

/*
 * A sampled block (or possibly one) is gone: tell user space if it was
 * sampled. known: the preload library says it was (its set, not alloc_live).
 */
static __always_inline void retire(__u32 tgid, __u32 tid, __u64 addr, bool known)
{
	struct alloc_key key = { .tgid = tgid, .addr = addr };
	struct prof_sample_hdr h;
	struct alloc_counters *c;

	if (!known && !bpf_map_lookup_elem(&alloc_live, &key))
		return;
	if (!known && bpf_map_delete_elem(&alloc_live, &key))
		return; /* another thread retired it first */
	c = alloc_counters_get();
	if (c)
		c->frees++;
	sample_init((struct prof_sample *)&h, SAMPLE_FREE, 0, tgid, tid);
	h.aux0 = addr;
	if (output(&h, sizeof(h), false)) {
		count(CNT_RB_FULL);
		if (c)
			c->lost_free++;
	}
}

/* A global function: the unwinder is verified once, not once per caller state. */
__noinline int alloc_user_frames(struct pt_regs *ctx, struct prof_sample *s, __u32 base)
{
	struct uregs r;

	if (!s)
		return 0;
	uregs_uprobe(ctx, &r);
	return user_stack(ctx, &r, s, base);
}

/*
 * The same from registers the preload library passes (tools/heap): those of
 * its wrapper's caller, as a return probe on the wrapper would see them.
 */
__noinline int alloc_user_frames_at(struct pt_regs *ctx, struct prof_sample *s, __u64 ip, __u64 sp,
				    __u64 bp)
{
	struct uregs r = { .ip = ip, .sp = sp, .bp = bp, .ret_addr = 1 };
	struct stack_win *w;
	__u32 zero = 0;
	long n, k, m;

	if (!s)
		return 0;
	stack_window_reset();
	n = user_stack(ctx, &r, s, 0);
	/* frame pointers: by choice (--unwind fp) or for want of tables (auto) */
	if ((unwind_mode != UNWIND_FP && !(s->hdr.flags & SAMPLE_F_UNWIND_FP)) || n < 2)
		return n;
	/*
	 * Frame pointers from the probe point: the library's own frames come
	 * first, then the wrapper's caller (ip), which frames[0] already is.
	 */
	for (k = 1; k < 4 && k < n; k++)
		if (s->frames[k & 3] == ip)
			break;
	if (k >= 4 || k >= n)
		return n;
	/*
	 * frames [k + 1, n) move down to [1, n - k), through the stack window
	 * (the walk is over; it is emptied after). Two copies, not a loop
	 * over the frames: the verifier walked that loop once per frame for
	 * every k, a third of this program's verification.
	 */
	m = n - k - 1;
	if (m <= 0)
		return n - k;
	if (m > MAX_USTACK - 1)
		return n;
	w = bpf_map_lookup_elem(&stack_window, &zero);
	if (!w)
		return n;
	w->len = 0;
	if (bpf_probe_read_kernel(w->data, m * sizeof(__u64), &s->frames[k + 1]) ||
	    bpf_probe_read_kernel(&s->frames[1], m * sizeof(__u64), w->data))
		return n;
	return n - k;
}

/* A sampled allocation returned addr: its stacks, the live table, the ring buffer. */
static __always_inline void record(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 addr,
				   __u64 size, struct alloc_counters *c, bool preload,
				   bool untracked)
{
	struct alloc_key key = { .tgid = tgid, .addr = addr };
	__u64 ulen = 0, pylen, out, flags = 0;
	struct prof_sample *s;
	__u32 zero = 0, one = 1;

	if (!is_target(tgid))
		return;
	s = bpf_map_lookup_elem(&alloc_scratch, &zero);
	if (!s)
		return;
	sample_init(s, SAMPLE_ALLOC, size, tgid, tid);
	if (alloc_want_user) {
		if (preload)
			ulen = alloc_user_frames_at(ctx, s, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx),
						    PT_REGS_PARM5(ctx));
		else
			ulen = alloc_user_frames(ctx, s, 0);
		asm volatile("" : "+r"(ulen)); /* the verifier's bound, not clang's */
		if (ulen > MAX_USTACK)
			ulen = MAX_USTACK;
	}
	s->hdr.ustack_len = ulen;
	pylen = python_stack(s, ulen);
	/*
	 * before the record goes out: the block cannot be freed before malloc
	 * returns. The preload library keeps its own set of sampled blocks and
	 * reports each one's free once: no live table entry (its lock and
	 * allocation cost as much as the rest of the probe).
	 */
	if (untracked) { /* the library's set was full */
		c->live_full++;
		flags = ALLOC_F_UNTRACKED;
	} else if (!preload && bpf_map_update_elem(&alloc_live, &key, &one, BPF_ANY)) {
		c->live_full++;
		flags = ALLOC_F_UNTRACKED;
	}
	s->hdr.aux0 = addr;
	s->hdr.aux1 = (size & ALLOC_SIZE_MASK) | flags | (preload ? ALLOC_F_PRELOAD : 0);
	out = sizeof(s->hdr) + (ulen + 2 * pylen) * sizeof(__u64);
	if (out > sizeof(*s))
		out = sizeof(*s);
	/*
	 * Python code objects are read from the live process: a record with
	 * Python frames wakes user space now (at most once a millisecond per
	 * CPU), not at the next 100 ms drain, by which time a short script
	 * may have exited.
	 */
	if (output(s, out,
		   pylen || (s->hdr.flags & (SAMPLE_F_NO_UNWIND_INFO | SAMPLE_F_STALE_MAPS |
					     SAMPLE_F_PY_NO_THREAD)))) {
		count(CNT_RB_FULL);
		c->lost_alloc++;
		if (!flags && !preload)
			bpf_map_delete_elem(&alloc_live, &key);
	}
}

/* The one return probe of every allocation function. */
SEC("uretprobe")
int alloc_ret(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), ret = PT_REGS_RC(ctx), addr = ret;
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct alloc_counters *c;
	struct alloc_tls *t;

	if (tgid == self_tgid)
		return 0;
	t = bpf_task_storage_get(&alloc_tls, bpf_get_current_task_btf(), 0, 0);
	/* not the return of the outermost call in progress (a nested one, or none) */
	if (!t || !t->sp || t->sp + 8 != PT_REGS_SP(ctx))
		return 0;
	t->sp = 0;
	switch (t->kind) {
	case CALL_REALLOC:
		/* the old block is gone when the call succeeded, or when it was realloc(p, 0) */
		if (t->arg && (ret || !t->size))
			retire(tgid, tid, t->arg, false);
		break;
	case CALL_OUTPTR:
		addr = 0;
		if ((int)ret == 0 && bpf_probe_read_user(&addr, sizeof(addr), (void *)t->arg))
			addr = 0;
		break;
	case CALL_MMAP:
		if (ret == MAP_FAILED)
			addr = 0;
		break;
	}
	if (!t->sampled)
		return 0;
	c = alloc_counters_get();
	if (!c)
		return 0;
	if (!addr) {
		c->failed++;
		return 0;
	}
	c->sampled++;
	record(ctx, tgid, tid, addr, t->size, c, false, false);
	return 0;
}

/*
 * The preload library's probe points (tools/heap/preload.c), for -- CMD:
 * the library counted and sampled in process, these see only the sampled
 * allocations and the frees of sampled blocks.
 *   bpfprof_heap_sampled(addr, size | PRELOAD_F_UNTRACKED, ip, sp, bp, rate)
 *   bpfprof_heap_freed(addr, rate)
 *   bpfprof_heap_hello(flags, rate)
 * A library sampling at another rate than ours (its process's environment
 * set BPFPROF_ALLOC_RATE) is not taken at its word: its records are
 * dropped, counted, and its hello says so (user space probes that process
 * with uprobes instead).
 */
SEC("uprobe")
int alloc_preload_sampled(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), addr = PT_REGS_PARM1(ctx);
	__u64 size = PT_REGS_PARM2(ctx);
	struct alloc_counters *c;

	if ((__u32)(id >> 32) == self_tgid)
		return 0;
	c = alloc_counters_get();
	if (!c)
		return 0;
	if (ctx->r9 != alloc_rate) { /* the sixth argument */
		if (is_target(id >> 32))
			c->foreign_rate++;
		return 0;
	}
	c->calls++;
	c->bytes += size & ALLOC_SIZE_MASK;
	c->sampled++;
	if (size & PRELOAD_F_UNTRACKED)
		c->set_full++;
	record(ctx, id >> 32, (__u32)id, addr, size & ALLOC_SIZE_MASK, c, true,
	       size & PRELOAD_F_UNTRACKED);
	return 0;
}

SEC("uprobe")
int alloc_preload_freed(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), addr = PT_REGS_PARM1(ctx);

	if (!addr || (__u32)(id >> 32) == self_tgid || PT_REGS_PARM2(ctx) != alloc_rate)
		return 0;
	retire(id >> 32, (__u32)id, addr, true);
	return 0;
}

/* A mark record now (woken at once: coverage is decided on it). */
static __always_inline void heap_mark(__u32 tgid, __u32 tid, __u64 what, __u64 arg)
{
	struct prof_sample_hdr h;

	sample_init((struct prof_sample *)&h, SAMPLE_HEAP_MARK, 0, tgid, tid);
	h.aux0 = what;
	h.aux1 = arg;
	if (output(&h, sizeof(h), true))
		count(CNT_RB_FULL);
}

SEC("uprobe")
int alloc_preload_hello(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), flags = PT_REGS_PARM1(ctx) & 0xffffffff;
	__u32 tgid = id >> 32;

	if (tgid == self_tgid || !is_target(tgid))
		return 0;
	if (PT_REGS_PARM2(ctx) == alloc_rate)
		flags |= PRELOAD_RATE_OK;
	heap_mark(tgid, (__u32)id, HEAP_MARK_PRELOAD, flags);
	return 0;
}

/* -- CMD: the target processes probed with uprobes (their children need probes of their own) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 14);
	__type(key, __u32);
	__type(value, __u8);
} alloc_upids SEC(".maps");

/*
 * A process on uprobes forked: its probes are its own (a link per pid), the
 * child's calls trap into the kernel, which drops them (not its pid) until
 * user space probes it. Woken now, not at the side band's next drain 100
 * ms later. A preloaded process's child needs nothing: it has the sampler.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(alloc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;

	if (ctgid == ptgid || !bpf_map_lookup_elem(&alloc_upids, &ptgid))
		return 0; /* a thread, or not a parent on uprobes */
	heap_mark(ptgid, parent->pid, HEAP_MARK_FORK, ctgid);
	return 0;
}

/*
 * A target's exec (-- CMD): user space checks at once whether the new
 * image will have the in-process sampler, and probes it with uprobes
 * before its first allocations if not.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(alloc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	(void)old_pid;
	(void)bprm;
	if (tgid == self_tgid || !is_target(tgid))
		return 0;
	/* the CPU it has had: user space tells whether it ran before its probes */
	heap_mark(tgid, (__u32)id, HEAP_MARK_EXEC, BPF_CORE_READ(p, se.sum_exec_runtime));
	return 0;
}

/*
 * Py_FinalizeEx entry, in libpython or a python executable that exports it:
 * the interpreter is about to free what the program held. User space keeps
 * the process's in-use as it stands now (after every record before this
 * one in the ring buffer).
 */
SEC("uprobe")
int alloc_py_finalize(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	if (tgid == self_tgid || !is_target(tgid))
		return 0;
	heap_mark(tgid, (__u32)id, HEAP_MARK_PY_FINALIZE, 0);
	return 0;
}

SEC("uprobe")
int alloc_malloc(struct pt_regs *ctx) /* malloc(size), valloc(size) */
{
	return enter(ctx, PT_REGS_PARM1(ctx), 0, CALL_PLAIN);
}

SEC("uprobe")
int alloc_pvalloc(struct pt_regs *ctx) /* pvalloc(size): whole pages */
{
	__u64 size = PT_REGS_PARM1(ctx);

	return enter(ctx, (size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1), 0, CALL_PLAIN);
}

static __always_inline __u64 mul_sat(__u64 a, __u64 b)
{
	if (b && a > ALLOC_SIZE_MASK / b)
		return ALLOC_SIZE_MASK; /* the call will fail */
	return a * b;
}

SEC("uprobe")
int alloc_calloc(struct pt_regs *ctx) /* calloc(n, size) */
{
	return enter(ctx, mul_sat(PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx)), 0, CALL_PLAIN);
}

SEC("uprobe")
int alloc_realloc(struct pt_regs *ctx) /* realloc(ptr, size) */
{
	return enter(ctx, PT_REGS_PARM2(ctx), PT_REGS_PARM1(ctx), CALL_REALLOC);
}

SEC("uprobe")
int alloc_reallocarray(struct pt_regs *ctx) /* reallocarray(ptr, n, size) */
{
	return enter(ctx, mul_sat(PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx)), PT_REGS_PARM1(ctx),
		     CALL_REALLOC);
}

SEC("uprobe")
int alloc_memalign(struct pt_regs *ctx) /* memalign(align, size), aligned_alloc(align, size) */
{
	return enter(ctx, PT_REGS_PARM2(ctx), 0, CALL_PLAIN);
}

SEC("uprobe")
int alloc_posix_memalign(struct pt_regs *ctx) /* posix_memalign(&ptr, align, size) */
{
	return enter(ctx, PT_REGS_PARM3(ctx), PT_REGS_PARM1(ctx), CALL_OUTPTR);
}

static long vma_inode(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct file *f = BPF_CORE_READ(vma, vm_file);

	(void)task;
	*(__u64 *)data = f ? (__u64)BPF_CORE_READ(f, f_inode) : 0;
	return 0;
}

/*
 * Whether the function probed was called from its own file: at its entry,
 * the return address on the stack lies in the same file as the probe. libc
 * maps thread stacks (and posix_spawn's child stack) with its own mmap,
 * which a uprobe on mmap also sees: those are libc's, not the program's,
 * as on the preload path, where libc's internal calls never reach the
 * library (issue 25: the paths disagreed by 8 MiB per cached stack).
 */
static __always_inline bool called_from_own_file(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 ret = 0, here = 0, there = 0;

	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)))
		return false;
	if (bpf_find_vma(task, PT_REGS_IP(ctx), vma_inode, &here, 0) ||
	    bpf_find_vma(task, ret, vma_inode, &there, 0))
		return false;
	return here && here == there;
}

SEC("uprobe")
int alloc_mmap(struct pt_regs *ctx) /* mmap(addr, len, prot, flags, fd, off) */
{
	__u64 len = PT_REGS_PARM2(ctx);

	if (!(PT_REGS_PARM4(ctx) & MAP_ANONYMOUS))
		return 0; /* file mappings are not heap */
	if (called_from_own_file(ctx))
		return 0;
	return enter(ctx, (len + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1), 0, CALL_MMAP);
}

SEC("uprobe")
int alloc_free(struct pt_regs *ctx) /* free(ptr), munmap(addr, len) */
{
	__u64 id = bpf_get_current_pid_tgid(), addr = PT_REGS_PARM1(ctx);

	if (!addr || (__u32)(id >> 32) == self_tgid)
		return 0;
	retire(id >> 32, (__u32)id, addr, false);
	return 0;
}
