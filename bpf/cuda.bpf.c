// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUDA driver API tracing. Uprobes on libcuda's cu* entry points remember
 * the call (arguments, start time) per thread; the uretprobe sends one
 * SAMPLE_CUDA record with the caller's stack (native + Python) and a struct
 * cuda_call. Unwinding at the return rather than the entry gives the same
 * caller frames (the cu* frame itself is gone, which is what the output
 * wants: a "[cuda] kernel" leaf replaces it) and lets one record carry both
 * times and the result.
 *
 * Launches are the hot call (a training step makes thousands), and only a
 * Chrome trace draws their durations. Without one (launch_at_entry), a
 * launch's record is sent from the entry probe, unwound from the caller's
 * registers (uregs_uprobe_caller), and the launch functions get no return
 * probe: one trap per launch instead of two, no per-thread map insert and
 * delete. The record has no end time and no result (CUDA_CALL_F_AT_ENTRY).
 * CUPTI's correlation id, which arrives inside the call (api_enter), then
 * comes as a GPU_EV_CORR record of its own; user space gives it to the last
 * launch of that thread (ring buffer order is the thread's program order).
 *
 * Function handles get names from cuModuleGetFunction / cuLibraryGetKernel /
 * cuKernelGetFunction (the out-parameter is read at their return).
 *
 * GPU side: USDT probes of the CUPTI injection library (tools/cupti):
 * gpu_activity becomes a SAMPLE_GPU record; api_enter, fired by CUPTI inside
 * a driver call on the calling thread, stamps the call in flight with the
 * correlation id its GPU records will carry: the join key user space needs,
 * which the uprobes alone cannot see.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h> /* its <asm/errno.h> is bpf/asm/errno.h */
#include "common.bpf.h"
#include "unwind.bpf.h"
#include "python.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Launches recorded at their entry probe, with no return probe (see above). */
const volatile bool launch_at_entry = false;

struct inflight {
	__u64 start_ns;
	__u64 handle;
	__u64 stream;
	__u64 bytes;
	__u64 out; /* user address of an out-parameter read at return */
	__u32 corr;
	__u16 op;
	__u8 flags;
	__u8 pad;
};

/* Calls in progress, per thread (pid_tgid). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct inflight);
} cuda_inflight SEC(".maps");

/* Name lookups in progress (cuModuleGetFunction & co.), per thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct inflight);
} cuda_name_inflight SEC(".maps");

/* (tgid, name address) pairs whose string user space already has. */
struct name_seen_key {
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct name_seen_key);
	__type(value, __u8);
} gpu_names_seen SEC(".maps");

struct cuda_scratch {
	struct prof_sample s;
	struct cuda_call room; /* the trailer may start at the last frame slot */
};

struct gpu_sample {
	struct prof_sample_hdr hdr;
	struct gpu_event ev;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuda_scratch);
} cuda_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gpu_sample);
} gpu_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CUDA_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} cuda_counters SEC(".maps");

static __always_inline void cuda_count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&cuda_counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int enter(__u16 op, __u8 flags, __u64 handle, __u64 stream, __u64 bytes,
				 __u64 out)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct inflight in = {
		.start_ns = bpf_ktime_get_ns(),
		.handle = handle,
		.stream = stream,
		.bytes = bytes,
		.out = out,
		.op = op,
		.flags = flags,
	};

	if (!is_target(id >> 32))
		return 0;
	if (bpf_map_update_elem(&cuda_inflight, &id, &in, BPF_NOEXIST)) {
		if (bpf_map_update_elem(&cuda_inflight, &id, &in, BPF_ANY))
			cuda_count(CUDA_CNT_INFLIGHT_FULL);
		else
			cuda_count(CUDA_CNT_OVERWRITTEN);
	}
	return 0;
}

/* The 7th.. integer arguments are on the stack above the return address. */
static __always_inline __u64 stack_arg(struct pt_regs *ctx, int n)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * (n - 6)));
	return v;
}

#define P1 PT_REGS_PARM1(ctx)
#define P2 PT_REGS_PARM2(ctx)
#define P3 PT_REGS_PARM3(ctx)
#define P4 PT_REGS_PARM4(ctx)

static __always_inline int launch_now(struct pt_regs *ctx, __u16 op, __u64 handle, __u64 stream,
				      int stream_arg);

/*
 * A launch: at its entry (launch_at_entry, verified away otherwise), or timed.
 * stream_arg: the stream is the function's stream_arg'th argument (7th or
 * later: on the stack), not `stream`.
 */
static __always_inline int launch(struct pt_regs *ctx, __u16 op, __u64 handle, __u64 stream,
				  int stream_arg)
{
	if (launch_at_entry)
		return launch_now(ctx, op, handle, stream, stream_arg);
	return enter(op, 0, handle, stream_arg ? stack_arg(ctx, stream_arg) : stream, 0, 0);
}

/*
 * Every launch function, told apart by the probe's cookie (enum
 * cuda_launch_fn): one program instead of four, so the stack walk that
 * launch() inlines is verified once at start-up, not four times.
 */
SEC("uprobe")
int on_launch(struct pt_regs *ctx)
{
	__u64 handle = P1, stream = 0;
	int stream_arg = 0;
	__u16 op;

	switch (bpf_get_attach_cookie(ctx)) {
	case CUDA_LAUNCH_FN_EX:
		/* cuLaunchKernelEx(const CUlaunchConfig *config, f, params, extra):
		 * seven unsigned ints, then CUstream hStream at 32 */
		bpf_probe_read_user(&stream, sizeof(stream), (void *)(P1 + 32));
		handle = P2;
		op = CUDA_OP_LAUNCH_EX;
		break;
	case CUDA_LAUNCH_FN_COOP: /* the same arguments as cuLaunchKernel up to the stream */
		op = CUDA_OP_LAUNCH_COOP;
		stream_arg = 9;
		break;
	case CUDA_LAUNCH_FN_GRAPH:
		op = CUDA_OP_GRAPH_LAUNCH;
		stream = P2;
		break;
	default: /* cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra) */
		op = CUDA_OP_LAUNCH;
		stream_arg = 9;
		break;
	}
	return launch(ctx, op, handle, stream, stream_arg);
}

/* (dst, src, bytes[, stream]): the device side is the handle */
SEC("uprobe")
int on_htod(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_HTOD, 0, P1, 0, P3, 0);
}

SEC("uprobe")
int on_htod_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_HTOD, CUDA_CALL_F_ASYNC, P1, P4, P3, 0);
}

SEC("uprobe")
int on_dtoh(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_DTOH, 0, P2, 0, P3, 0);
}

SEC("uprobe")
int on_dtoh_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_DTOH, CUDA_CALL_F_ASYNC, P2, P4, P3, 0);
}

SEC("uprobe")
int on_dtod(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_DTOD, 0, P1, 0, P3, 0);
}

SEC("uprobe")
int on_dtod_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY_DTOD, CUDA_CALL_F_ASYNC, P1, P4, P3, 0);
}

SEC("uprobe")
int on_memcpy(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY, 0, P1, 0, P3, 0);
}

SEC("uprobe")
int on_memcpy_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEMCPY, CUDA_CALL_F_ASYNC, P1, P4, P3, 0);
}

/* cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes[, stream]): *dptr read at return */
SEC("uprobe")
int on_alloc(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEM_ALLOC, 0, 0, 0, P2, P1);
}

SEC("uprobe")
int on_alloc_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEM_ALLOC, CUDA_CALL_F_ASYNC, 0, P3, P2, P1);
}

SEC("uprobe")
int on_free(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEM_FREE, 0, P1, 0, 0, 0);
}

SEC("uprobe")
int on_free_async(struct pt_regs *ctx)
{
	return enter(CUDA_OP_MEM_FREE, CUDA_CALL_F_ASYNC, P1, P2, 0, 0);
}

SEC("uprobe")
int on_stream_sync(struct pt_regs *ctx)
{
	return enter(CUDA_OP_STREAM_SYNC, 0, P1, P1, 0, 0);
}

SEC("uprobe")
int on_ctx_sync(struct pt_regs *ctx)
{
	return enter(CUDA_OP_CTX_SYNC, 0, 0, 0, 0, 0);
}

SEC("uprobe")
int on_event_sync(struct pt_regs *ctx)
{
	return enter(CUDA_OP_EVENT_SYNC, 0, P1, 0, 0, 0);
}

/*
 * A global function: the unwinder is verified once for this program type.
 * at_entry: the probe is on the function's first instruction, start from
 * its caller; else (a return probe) from the registers as they are.
 */
__noinline int cuda_user_frames(struct pt_regs *ctx, struct prof_sample *s, int at_entry)
{
	struct uregs r;

	if (!s || !ctx)
		return 0;
	if (at_entry) {
		if (uregs_uprobe_caller(ctx, &r)) {
			s->hdr.flags |= SAMPLE_F_USTACK_ERR;
			count(CNT_USTACK_ERR);
			return 0;
		}
	} else {
		uregs_uprobe(ctx, &r);
	}
	return user_stack(ctx, &r, s, 0);
}

/*
 * Send the record of the call in *in: the current thread's stack, then the
 * struct cuda_call. end_ns 0: recorded at entry, neither time nor result.
 */
static __always_inline void call_record(struct pt_regs *ctx, __u64 id, const struct inflight *in,
					__u64 end_ns, __s32 result)
{
	__u64 ulen, pylen, n, size;
	struct cuda_scratch *sc;
	struct cuda_call *c;
	struct prof_sample *s;
	__u32 zero = 0;

	cuda_count(CUDA_CNT_CALLS);
	sc = bpf_map_lookup_elem(&cuda_scratch, &zero);
	if (!sc)
		return;
	s = &sc->s;
	sample_init(s, SAMPLE_CUDA, 1, id >> 32, (__u32)id); /* time: now */
	if (in->start_ns)
		s->hdr.time_ns = in->start_ns;

	ulen = cuda_user_frames(ctx, s, !end_ns);
	asm volatile("" : "+r"(ulen));
	if (ulen > MAX_USTACK)
		ulen = MAX_USTACK;
	s->hdr.ustack_len = ulen;
	pylen = python_stack(s, ulen);

	n = ulen + 2 * pylen;
	if (n > MAX_USTACK + 2 * MAX_PYSTACK)
		n = MAX_USTACK + 2 * MAX_PYSTACK;
	c = (struct cuda_call *)&s->frames[n];
	c->end_ns = end_ns;
	c->handle = in->handle;
	if (in->out && bpf_probe_read_user(&c->handle, sizeof(c->handle), (void *)in->out))
		c->handle = 0;
	c->stream = in->stream;
	c->bytes = in->bytes;
	c->corr = in->corr;
	c->op = in->op;
	c->flags = in->flags | (end_ns ? 0 : CUDA_CALL_F_AT_ENTRY);
	c->pad = 0;
	c->result = result;
	c->pad2 = 0;

	size = sizeof(s->hdr) + n * sizeof(__u64) + sizeof(*c);
	if (size > sizeof(*sc))
		size = sizeof(*sc);
	if (output(sc, size,
		   s->hdr.flags &
			   (SAMPLE_F_NO_UNWIND_INFO | SAMPLE_F_STALE_MAPS | SAMPLE_F_PY_NO_THREAD)))
		cuda_count(CUDA_CNT_RB_FULL);
}

static __always_inline int launch_now(struct pt_regs *ctx, __u16 op, __u64 handle, __u64 stream,
				      int stream_arg)
{
	__u64 id = bpf_get_current_pid_tgid(), ra;
	struct inflight in = {
		.start_ns = 0, /* the record's own time (sample_init) */
		.handle = handle,
		.stream = stream,
		.op = op,
	};

	if (!is_target(id >> 32))
		return 0;
	/*
	 * One copy of the top of the stack serves the return address (read
	 * first: the window starts there), the stack argument and the walk.
	 */
	stack_window_reset();
	if (stream_arg > 6 && !read_stack(PT_REGS_SP(ctx), &ra) &&
	    read_stack(PT_REGS_SP(ctx) + 8 * (stream_arg - 6), &in.stream))
		in.stream = 0;
	call_record(ctx, id, &in, 0, 0);
	return 0;
}

SEC("uretprobe")
int on_call_ret(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), end_ns = bpf_ktime_get_ns();
	struct inflight *inp, in;

	inp = bpf_map_lookup_elem(&cuda_inflight, &id);
	if (!inp) {
		cuda_count(CUDA_CNT_NO_ENTRY);
		return 0;
	}
	in = *inp;
	bpf_map_delete_elem(&cuda_inflight, &id);
	call_record(ctx, id, &in, end_ns ? end_ns : 1, (__s32)PT_REGS_RC(ctx));
	return 0;
}

/* ---- function names ---- */

static __always_inline int name_enter(__u64 out, __u64 name, __u64 kernel, __u16 type)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct inflight in = { .out = out, .handle = name, .stream = kernel, .op = type };

	if (!is_target(id >> 32))
		return 0;
	bpf_map_update_elem(&cuda_name_inflight, &id, &in, BPF_ANY);
	return 0;
}

/* cuModuleGetFunction(CUfunction *out, CUmodule, const char *name) */
SEC("uprobe")
int on_get_function(struct pt_regs *ctx)
{
	return name_enter(P1, P3, 0, GPU_EV_FUNC_NAME);
}

/* cuLibraryGetKernel(CUkernel *out, CUlibrary, const char *name) */
SEC("uprobe")
int on_get_kernel(struct pt_regs *ctx)
{
	return name_enter(P1, P3, 0, GPU_EV_FUNC_NAME);
}

/* cuKernelGetFunction(CUfunction *out, CUkernel kernel) */
SEC("uprobe")
int on_kernel_get_function(struct pt_regs *ctx)
{
	return name_enter(P1, 0, P2, GPU_EV_FUNC_ALIAS);
}

static __always_inline struct gpu_sample *gpu_sample_new(__u64 id, __u32 type)
{
	struct gpu_sample *g;
	__u32 zero = 0;

	g = bpf_map_lookup_elem(&gpu_scratch, &zero);
	if (!g)
		return NULL;
	sample_init((struct prof_sample *)g, SAMPLE_GPU, 1, id >> 32, (__u32)id);
	__builtin_memset(&g->ev, 0, offsetof(struct gpu_event, name));
	g->ev.type = type;
	return g;
}

static __always_inline void gpu_output(struct gpu_sample *g)
{
	__u64 size = offsetof(struct gpu_sample, ev.name) + g->ev.name_len;

	if (size > sizeof(*g))
		size = sizeof(*g);
	if (output(g, size, false))
		cuda_count(CUDA_CNT_GPU_RB_FULL);
}

SEC("uretprobe")
int on_name_ret(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), handle = 0;
	struct inflight *inp, in;
	struct gpu_sample *g;
	long n;

	inp = bpf_map_lookup_elem(&cuda_name_inflight, &id);
	if (!inp)
		return 0;
	in = *inp;
	bpf_map_delete_elem(&cuda_name_inflight, &id);
	if (PT_REGS_RC(ctx) != 0 || bpf_probe_read_user(&handle, sizeof(handle), (void *)in.out))
		return 0;
	g = gpu_sample_new(id, in.op);
	if (!g)
		return 0;
	g->ev.handle = handle;
	g->ev.handle2 = in.stream;
	if (in.op == GPU_EV_FUNC_NAME) {
		n = bpf_probe_read_user_str(g->ev.name, sizeof(g->ev.name), (void *)in.handle);
		if (n <= 0)
			return 0;
		g->ev.name_len = n;
	}
	gpu_output(g);
	return 0;
}

/* ---- USDT probes of the CUPTI injection library ---- */

SEC("usdt")
int BPF_USDT(on_gpu_activity, int kind, int corr, long start, long end, int device, int stream,
	     long name, long bytes, int copy_kind)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct name_seen_key nk = { .addr = name, .tgid = id >> 32 };
	struct gpu_sample *g;
	__u8 one = 1;
	long n;

	if (!is_target(id >> 32))
		return 0;
	g = gpu_sample_new(id, GPU_EV_ACTIVITY);
	if (!g)
		return 0;
	g->ev.kind = kind;
	g->ev.corr = corr;
	g->ev.start_ns = start;
	g->ev.end_ns = end;
	g->ev.device = device;
	g->ev.stream = stream;
	g->ev.handle = name;
	g->ev.bytes = bytes;
	g->ev.copy_kind = copy_kind;
	if (name && !bpf_map_lookup_elem(&gpu_names_seen, &nk)) {
		n = bpf_probe_read_user_str(g->ev.name, sizeof(g->ev.name), (void *)name);
		if (n > 0) {
			g->ev.name_len = n;
			bpf_map_update_elem(&gpu_names_seen, &nk, &one, BPF_ANY);
		}
	}
	gpu_output(g);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_api_enter, int corr, int cbid, long symbol)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct inflight *in = bpf_map_lookup_elem(&cuda_inflight, &id);
	struct gpu_sample *g;

	if (in) {
		in->corr = corr;
		return 0;
	}
	if (!is_target(id >> 32))
		return 0;
	if (!launch_at_entry) {
		cuda_count(CUDA_CNT_CORR_ORPHAN);
		return 0;
	}
	/* a launch whose record its entry probe already sent: the id follows it */
	g = gpu_sample_new(id, GPU_EV_CORR);
	if (!g)
		return 0;
	g->ev.corr = corr;
	g->ev.handle = cbid;
	gpu_output(g);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_gpu_dropped, long dropped)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct gpu_sample *g;

	if (!is_target(id >> 32))
		return 0;
	g = gpu_sample_new(id, GPU_EV_DROPPED);
	if (!g)
		return 0;
	g->ev.bytes = dropped;
	gpu_output(g);
	return 0;
}
