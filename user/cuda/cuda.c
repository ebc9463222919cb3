// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --cuda (see cuda.h): probes on libcuda in every target, USDT probes on any
 * mapped file that carries bpfprof's (the CUPTI injection library), launch
 * stacks with a "[cuda] kernel" leaf weighted by launches or GPU time, and
 * the calls and GPU activity on the timeline for -f chrome.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/timeline.h"
#include "aggregate/timeline_log.h"
#include "collect/uprobes.h"
#include "cuda.skel.h"
#include "cuda/cuda.h"
#include "cuda/match.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/elfsym.h"
#include "util/bpfmap.h"
#include "util/htab.h"
#include "util/counters.h"
#include "util/log.h"
#include "util/selfpath.h"

/* A kernel (or graph) a launch leaf names: per (process, handle). */
struct cuda_fn {
	uint32_t pid;
	uint64_t handle;
	uint64_t alias; /* CUkernel this CUfunction came from (cuKernelGetFunction) */
	char *mangled;	/* from the name probes or CUPTI; NULL: not known (yet) */
	char *leaf;	/* "[cuda] demangled", made at build time */
	uint16_t op;	/* launch kind, for graphs */
};

struct cuda_stats {
	uint64_t calls[CUDA_OP__MAX];
	uint64_t call_ns[CUDA_OP__MAX];
	uint64_t bytes[CUDA_OP__MAX];
	uint64_t failed;       /* calls that returned an error */
	uint64_t at_entry;     /* launches recorded at entry: untimed, result unknown */
	uint64_t with_corr;    /* calls CUPTI gave a correlation id */
	uint64_t corr_orphans; /* GPU_EV_CORR with no launch of that thread waiting */
	uint64_t bad;	       /* malformed records */
	uint64_t names, aliases;
	uint64_t gpu[4]; /* by enum gpu_kind */
	uint64_t gpu_ns;
	uint64_t gpu_joined;  /* GPU records joined with their launch's stack */
	uint64_t gpu_dropped; /* reported dropped by CUPTI */
	uint64_t usdt_files, usdt_attached, usdt_failed;
};

struct cuda {
	struct recorder *r;
	struct cuda_bpf *skel;
	struct uprobes *up;
	int v_launches, v_gpu;
	struct cuda_fn *fns;
	size_t nfns, cap_fns;
	struct htab *fn_idx;	  /* (pid, handle) -> fn index */
	struct htab *gpu_names;	  /* (pid, name address) -> char * (mangled) */
	struct cuda_match *match; /* launches and GPU records waiting for each other */
	bool at_entry;		  /* launches recorded at entry (bpf launch_at_entry) */
	struct htab *usdt_files;  /* objfile id -> 1 (looked at) */
	struct bpf_link **links;
	size_t nlinks, cap_links;
	struct stack_key *key;
	struct cuda_stats st;
};

/* A thread's CUDA calls go on a track of their own right under the thread's:
 * sample-built slices and calls would not nest on one track. */
#define API_TID_BIT (1u << 30)

struct pid_u64 {
	uint32_t pid;
	uint32_t pad;
	uint64_t v;
};

static const char *const op_names[CUDA_OP__MAX] = {
	[CUDA_OP_LAUNCH] = "cuLaunchKernel",
	[CUDA_OP_LAUNCH_EX] = "cuLaunchKernelEx",
	[CUDA_OP_LAUNCH_COOP] = "cuLaunchCooperativeKernel",
	[CUDA_OP_GRAPH_LAUNCH] = "cuGraphLaunch",
	[CUDA_OP_MEMCPY_HTOD] = "cuMemcpyHtoD",
	[CUDA_OP_MEMCPY_DTOH] = "cuMemcpyDtoH",
	[CUDA_OP_MEMCPY_DTOD] = "cuMemcpyDtoD",
	[CUDA_OP_MEMCPY] = "cuMemcpy",
	[CUDA_OP_MEM_ALLOC] = "cuMemAlloc",
	[CUDA_OP_MEM_FREE] = "cuMemFree",
	[CUDA_OP_STREAM_SYNC] = "cuStreamSynchronize",
	[CUDA_OP_CTX_SYNC] = "cuCtxSynchronize",
	[CUDA_OP_EVENT_SYNC] = "cuEventSynchronize",
};

const char *cuda__op_name(uint32_t op)
{
	return op < CUDA_OP__MAX && op_names[op] ? op_names[op] : "?";
}

static bool is_launch(uint32_t op)
{
	return op >= CUDA_OP_LAUNCH && op <= CUDA_OP_GRAPH_LAUNCH;
}

const char *cuda__injection_path(void)
{
	static char path[PATH_MAX + 64];

	return selfpath__lib("libbpfprof_cupti.so", path, sizeof(path));
}

/* ---- probes ---- */

/* With --cuda-lib, that file alone (probed for every process at start). */
static bool is_libcuda(struct objfile *o, void *arg)
{
	(void)arg;
	return !env.cuda_lib && o->name && !strncmp(o->name, "libcuda.so", 10);
}

/* (function, entry program); each also gets the return probe, but launches at entry */
static const struct {
	const char *func;
	int prog; /* index into progs() */
} probe_list[] = {
	/* launches: one program, the index is the probe's cookie (enum cuda_launch_fn) */
	{ "cuLaunchKernel", CUDA_LAUNCH_FN_KERNEL },
	{ "cuLaunchKernel_ptsz", CUDA_LAUNCH_FN_KERNEL },
	{ "cuLaunchKernelEx", CUDA_LAUNCH_FN_EX },
	{ "cuLaunchKernelEx_ptsz", CUDA_LAUNCH_FN_EX },
	{ "cuLaunchCooperativeKernel", CUDA_LAUNCH_FN_COOP },
	{ "cuLaunchCooperativeKernel_ptsz", CUDA_LAUNCH_FN_COOP },
	{ "cuGraphLaunch", CUDA_LAUNCH_FN_GRAPH },
	{ "cuGraphLaunch_ptsz", CUDA_LAUNCH_FN_GRAPH },
	{ "cuMemcpyHtoD_v2", 4 },
	{ "cuMemcpyHtoD_v2_ptds", 4 },
	{ "cuMemcpyHtoDAsync_v2", 5 },
	{ "cuMemcpyHtoDAsync_v2_ptsz", 5 },
	{ "cuMemcpyDtoH_v2", 6 },
	{ "cuMemcpyDtoH_v2_ptds", 6 },
	{ "cuMemcpyDtoHAsync_v2", 7 },
	{ "cuMemcpyDtoHAsync_v2_ptsz", 7 },
	{ "cuMemcpyDtoD_v2", 8 },
	{ "cuMemcpyDtoD_v2_ptds", 8 },
	{ "cuMemcpyDtoDAsync_v2", 9 },
	{ "cuMemcpyDtoDAsync_v2_ptsz", 9 },
	{ "cuMemcpy", 10 },
	{ "cuMemcpy_ptds", 10 },
	{ "cuMemcpyAsync", 11 },
	{ "cuMemcpyAsync_ptsz", 11 },
	{ "cuMemAlloc_v2", 12 },
	{ "cuMemAllocAsync", 13 },
	{ "cuMemAllocAsync_ptsz", 13 },
	{ "cuMemFree_v2", 14 },
	{ "cuMemFreeAsync", 15 },
	{ "cuMemFreeAsync_ptsz", 15 },
	{ "cuStreamSynchronize", 16 },
	{ "cuStreamSynchronize_ptsz", 16 },
	{ "cuCtxSynchronize", 17 },
	{ "cuEventSynchronize", 18 },
	/* names: their own return program */
	{ "cuModuleGetFunction", 19 },
	{ "cuLibraryGetKernel", 20 },
	{ "cuKernelGetFunction", 21 },
};
#define NPROBES		 (sizeof(probe_list) / sizeof(probe_list[0]))
#define FIRST_NAME_PROG	 19
#define LAST_LAUNCH_PROG 3 /* programs 0-3 are launches (bpf: launch()) */

static struct bpf_program *entry_prog(struct cuda_bpf *s, int i)
{
	struct bpf_program *p[] = {
		s->progs.on_launch,	 s->progs.on_launch,
		s->progs.on_launch,	 s->progs.on_launch,
		s->progs.on_htod,	 s->progs.on_htod_async,
		s->progs.on_dtoh,	 s->progs.on_dtoh_async,
		s->progs.on_dtod,	 s->progs.on_dtod_async,
		s->progs.on_memcpy,	 s->progs.on_memcpy_async,
		s->progs.on_alloc,	 s->progs.on_alloc_async,
		s->progs.on_free,	 s->progs.on_free_async,
		s->progs.on_stream_sync, s->progs.on_ctx_sync,
		s->progs.on_event_sync,	 s->progs.on_get_function,
		s->progs.on_get_kernel,	 s->progs.on_kernel_get_function,
	};

	return p[i];
}

static struct uprobe_spec specs[2 * NPROBES];

/* ---- USDT: any mapped file with bpfprof's probes ---- */

static bool has_bpfprof_usdt(int fd)
{
	Elf_Scn *scn = NULL;
	bool found = false;
	GElf_Shdr sh;
	Elf *e;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE)
		return false;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return false;
	while (!found && (scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		while (d && !found && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			const char *desc = (const char *)d->d_buf + desc_off;

			/* stapsdt note (type 3): pc, base, semaphore, then "provider\0name\0args" */
			if (nh.n_type == 3 && nh.n_namesz == 8 &&
			    !memcmp((const char *)d->d_buf + name_off, "stapsdt", 8) &&
			    nh.n_descsz > 3 * 8 + 8 && !memcmp(desc + 24, "bpfprof", 8))
				found = true;
		}
	}
	elf_end(e);
	return found;
}

static void attach_usdt(struct cuda *c, struct objfile *o)
{
	static const struct {
		const char *name;
		size_t prog;
	} probes[] = { { "gpu_activity", 0 }, { "api_enter", 1 }, { "dropped", 2 } };
	struct bpf_program *progs[] = { c->skel->progs.on_gpu_activity, c->skel->progs.on_api_enter,
					c->skel->progs.on_gpu_dropped };
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", o->fd);
	c->st.usdt_files++;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct bpf_link *l = bpf_program__attach_usdt(progs[probes[i].prog], -1, path,
							      "bpfprof", probes[i].name, NULL);

		if (!l) {
			c->st.usdt_failed++;
			pr_debug("cuda: cannot attach USDT bpfprof:%s in %s: %s", probes[i].name,
				 o->path, strerror(errno));
			continue;
		}
		if (c->nlinks == c->cap_links) {
			size_t cap = c->cap_links ? 2 * c->cap_links : 16;
			struct bpf_link **ls = realloc(c->links, cap * sizeof(*ls));

			if (!ls) {
				bpf_link__destroy(l);
				continue;
			}
			c->links = ls;
			c->cap_links = cap;
		}
		c->links[c->nlinks++] = l;
		c->st.usdt_attached++;
	}
	pr_debug("cuda: USDT probes in %s", o->path);
}

static void scan_usdt(struct cuda *c, const struct proc *p)
{
	uint32_t last = UINT32_MAX;

	for (uint32_t i = 0; i < p->nmaps; i++) {
		uint32_t id = p->maps[i].obj;
		struct htab_entry *e;
		struct objfile *o;

		if (id < OBJ_FIRST || id == last)
			continue;
		last = id;
		if (htab__upsert(c->usdt_files, &id, sizeof(id), htab__hash(&id, sizeof(id)), &e) !=
		    1)
			continue;
		o = objtab__by_id(c->r->objs, id);
		if (o && objfile__fd(o) >= 0 && has_bpfprof_usdt(o->fd)) {
			objfile__pin(o); /* attached by its /proc/self/fd path */
			attach_usdt(c, o);
		}
	}
}

static void scan_proc(struct cuda *c, uint32_t pid)
{
	struct proc *p = proctab__lookup(c->r->procs, pid, 0);

	if (!p || p->exited)
		return;
	uprobes__scan(c->up, p);
	scan_usdt(c, p);
}

/* ---- names ---- */

static uint32_t fn_get(struct cuda *c, uint32_t pid, uint64_t handle)
{
	struct pid_u64 k = { .pid = pid, .v = handle };
	struct htab_entry *e;
	int ret = htab__upsert(c->fn_idx, &k, sizeof(k), htab__hash(&k, sizeof(k)), &e);

	if (ret < 0)
		return UINT32_MAX;
	if (ret == 0)
		return (uint32_t)e->val;
	if (c->nfns == c->cap_fns) {
		size_t cap = c->cap_fns ? 2 * c->cap_fns : 64;
		struct cuda_fn *f = realloc(c->fns, cap * sizeof(*f));

		if (!f) {
			htab__delete(c->fn_idx, &k, sizeof(k), htab__hash(&k, sizeof(k)));
			return UINT32_MAX;
		}
		c->fns = f;
		c->cap_fns = cap;
	}
	memset(&c->fns[c->nfns], 0, sizeof(c->fns[0]));
	c->fns[c->nfns].pid = pid;
	c->fns[c->nfns].handle = handle;
	e->val = c->nfns;
	return (uint32_t)c->nfns++;
}

static void fn_set_name(struct cuda *c, uint32_t fn, const char *mangled)
{
	if (fn == UINT32_MAX || c->fns[fn].mangled || !mangled || !*mangled)
		return;
	c->fns[fn].mangled = strdup(mangled);
}

static const char *fn_mangled(struct cuda *c, uint32_t fn)
{
	struct cuda_fn *f = &c->fns[fn];
	struct pid_u64 k = { .pid = f->pid, .v = f->alias };
	struct htab_entry *e;

	if (f->mangled || !f->alias)
		return f->mangled;
	e = htab__find(c->fn_idx, &k, sizeof(k), htab__hash(&k, sizeof(k)));
	return e ? c->fns[e->val].mangled : NULL;
}

/* build_opts.synth_name: "[cuda] demangled name" */
static const char *leaf_name(void *arg, uint64_t id, uint32_t *kind)
{
	struct cuda *c = arg;
	struct cuda_fn *f;
	const char *m;
	char *d;

	if (id >= c->nfns)
		return NULL;
	f = &c->fns[id];
	*kind = FRAME_CUDA;
	if (f->leaf)
		return f->leaf;
	m = fn_mangled(c, (uint32_t)id);
	if (f->op == CUDA_OP_GRAPH_LAUNCH) {
		if (asprintf(&f->leaf, "[cuda] graph 0x%llx", (unsigned long long)f->handle) < 0)
			f->leaf = NULL;
	} else if (m) {
		d = demangle(m);
		if (asprintf(&f->leaf, "[cuda] %s", d ? d : m) < 0)
			f->leaf = NULL;
		free(d);
	} else if (asprintf(&f->leaf, "[cuda] 0x%llx", (unsigned long long)f->handle) < 0) {
		f->leaf = NULL;
	}
	return f->leaf;
}

/* ---- records ---- */

static void add_gpu_time(struct cuda *c, const struct cm_launch *pd, uint64_t ns)
{
	struct stack_vals *v;

	if (pd->stack == SIZE_MAX)
		return;
	v = stacks__vals(c->r->stacks, pd->stack);

	if (v && c->v_gpu >= 0)
		v->v[c->v_gpu] += (int64_t)ns;
}

/*
 * A call (pid, p) whose GPU record, with correlation id corr, is still to
 * come (it waits), or already here (joined now).
 */
static void add_pending(struct cuda *c, uint32_t pid, uint32_t corr, const struct cm_launch *p)
{
	struct cm_gpu *o;

	if (cuda_match__launch(c->match, pid, corr, p, &o) || !o)
		return;
	if (o->kind == GPU_KERNEL && p->fn != UINT32_MAX) {
		c->st.gpu_joined++;
		add_gpu_time(c, p, o->dur_ns);
		fn_set_name(c, p->fn, o->mangled);
	}
	if (c->r->tl && o->gpid)
		timeline__add_flow(tl_log__timeline(c->r->tl), ((uint64_t)pid << 32) | corr,
				   "launch", "cuda_flow", pid, p->tid | API_TID_BIT, p->start_ns,
				   o->gpid, o->gtid, o->start_ns);
	cuda_match__gpu_free(o);
}

static void timeline_call(struct cuda *c, const struct prof_sample_hdr *h,
			  const struct cuda_call *call, uint32_t fn)
{
	struct timeline *tl = tl_log__timeline(c->r->tl);
	struct tl_arg args[4];
	size_t n = 0;
	char tname[48], comm[17];
	uint32_t tid = h->tid | API_TID_BIT;

	memcpy(comm, h->comm, 16);
	comm[16] = '\0';
	snprintf(tname, sizeof(tname), "%s [%u] CUDA", comm, h->tid);
	memcpy(comm, h->pcomm, 16);
	timeline__set_process_name(tl, h->pid, comm);
	timeline__set_thread_name(tl, h->pid, tid, tname);
	timeline__set_thread_sort(tl, h->pid, tid, (int32_t)(h->tid & 0x3fffffff));
	timeline__set_thread_sort(tl, h->pid, h->tid, (int32_t)(h->tid & 0x3fffffff));
	if (fn != UINT32_MAX) {
		uint32_t kind;
		const char *leaf = leaf_name(c, fn, &kind);

		if (leaf)
			args[n++] = (struct tl_arg){ .key = "kernel", .str = leaf + 7 };
	}
	if (call->bytes)
		args[n++] = (struct tl_arg){ .key = "bytes", .num = (int64_t)call->bytes };
	if (call->corr)
		args[n++] = (struct tl_arg){ .key = "correlation", .num = call->corr };
	if (call->result)
		args[n++] = (struct tl_arg){ .key = "result", .num = call->result };
	timeline__add_slice(tl, h->pid, tid, h->time_ns,
			    call->end_ns > h->time_ns ? call->end_ns - h->time_ns : 0,
			    cuda__op_name(call->op), "cuda_api", args, n);
}

static void timeline_gpu(struct cuda *c, const struct prof_sample_hdr *h,
			 const struct gpu_event *ev, const char *mangled,
			 const struct cm_launch *pd, struct cm_gpu *o)
{
	static const char *const copy_names[] = { "memcpy",	 "memcpy HtoD", "memcpy DtoH",
						  "memcpy HtoA", "memcpy AtoH", "memcpy AtoA",
						  "memcpy AtoD", "memcpy DtoA", "memcpy DtoD",
						  "memcpy HtoH", "memcpy PtoP" };
	struct timeline *tl = tl_log__timeline(c->r->tl);
	struct tl_arg args[3];
	char comm[17], *d = NULL;
	const char *name;
	uint32_t gpid, gtid;
	size_t n = 0;

	memcpy(comm, h->pcomm, 16);
	comm[16] = '\0';
	if (timeline__gpu_track(tl, h->pid, comm, ev->device, ev->stream, &gpid, &gtid))
		return;
	if (ev->kind == GPU_KERNEL) {
		d = mangled ? demangle(mangled) : NULL;
		name = d ? d : mangled ? mangled : "kernel";
	} else if (ev->kind == GPU_MEMCPY) {
		name = copy_names[ev->copy_kind < 11 ? ev->copy_kind : 0];
	} else {
		name = "memset";
	}
	if (ev->bytes)
		args[n++] = (struct tl_arg){ .key = "bytes", .num = (int64_t)ev->bytes };
	args[n++] = (struct tl_arg){ .key = "correlation", .num = ev->corr };
	timeline__add_slice(tl, gpid, gtid, ev->start_ns, ev->end_ns - ev->start_ns, name,
			    ev->kind == GPU_KERNEL ? "cuda_kernel" : "cuda_memory", args, n);
	if (pd)
		timeline__add_flow(tl, ((uint64_t)h->pid << 32) | ev->corr, "launch", "cuda_flow",
				   h->pid, pd->tid | API_TID_BIT, pd->start_ns, gpid, gtid,
				   ev->start_ns);
	if (o) {
		o->gpid = gpid;
		o->gtid = gtid;
	}
	free(d);
}

static void on_call(struct cuda *c, const struct prof_sample *s, size_t size)
{
	const struct prof_sample_hdr *h = &s->hdr;
	size_t nframes = (size_t)h->kstack_len + h->ustack_len + 2 * h->pystack_len;
	const struct cuda_call *call;
	struct stack_key *k;
	struct cm_launch p;
	uint32_t fn;
	size_t idx, nf;

	if (size < sizeof(*h) + nframes * sizeof(__u64) + sizeof(*call)) {
		c->st.bad++;
		return;
	}
	call = (const struct cuda_call *)&s->frames[nframes];
	if (call->op >= CUDA_OP__MAX || !call->op) {
		c->st.bad++;
		return;
	}
	c->st.calls[call->op]++;
	if (call->flags & CUDA_CALL_F_AT_ENTRY)
		c->st.at_entry++;
	c->st.call_ns[call->op] += call->end_ns > h->time_ns ? call->end_ns - h->time_ns : 0;
	c->st.bytes[call->op] += call->bytes;
	if (call->result)
		c->st.failed++;
	if (call->corr)
		c->st.with_corr++;
	if (!is_launch(call->op) || call->result) {
		if (c->r->tl)
			timeline_call(c, h, call, UINT32_MAX);
		if (call->corr && !call->result)
			add_pending(c, h->pid, call->corr,
				    &(struct cm_launch){ .stack = SIZE_MAX,
							 .fn = UINT32_MAX,
							 .tid = h->tid,
							 .start_ns = h->time_ns });
		return;
	}

	k = rec__key(c->r, s, size - sizeof(*call));
	if (!k)
		return;
	fn = fn_get(c, h->pid, call->handle);
	if (fn == UINT32_MAX)
		return;
	c->fns[fn].op = call->op;
	if (c->r->tl)
		timeline_call(c, h, call, fn);
	/* the "[cuda] kernel" leaf is the stack's one kernel-side frame */
	nf = (size_t)k->nkernel + k->nuser + k->npython;
	memmove(&k->frames[1], &k->frames[k->nkernel], (nf - k->nkernel) * sizeof(k->frames[0]));
	k->nkernel = 1;
	k->frames[0] = (struct sframe){ .obj = OBJ_SYNTH, .addr = fn };
	if (stacks__intern(c->r->stacks, k, &idx)) {
		c->r->st.agg_failed++;
		return;
	}
	stacks__vals(c->r->stacks, idx)->v[c->v_launches]++;
	p = (struct cm_launch){ .stack = idx, .fn = fn, .tid = h->tid, .start_ns = h->time_ns };
	if (call->corr)
		add_pending(c, h->pid, call->corr, &p);
	else if (call->flags & CUDA_CALL_F_AT_ENTRY)
		cuda_match__at_entry(c->match, h->pid, &p); /* its correlation id comes later */
}

/* GPU_EV_CORR: the correlation id of the thread's last launch recorded at entry. */
static void on_corr(struct cuda *c, const struct prof_sample_hdr *h, uint32_t corr)
{
	struct cm_launch p;

	if (!cuda_match__take_at_entry(c->match, h->pid, h->tid, &p)) {
		c->st.corr_orphans++;
		return;
	}
	c->st.with_corr++;
	add_pending(c, h->pid, corr, &p);
}

static const char *gpu_name(struct cuda *c, uint32_t pid, const struct gpu_event *ev)
{
	struct pid_u64 k = { .pid = pid, .v = ev->handle };
	struct htab_entry *e;
	int ret;

	if (!ev->handle)
		return NULL;
	ret = htab__upsert(c->gpu_names, &k, sizeof(k), htab__hash(&k, sizeof(k)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 1 || (!e->val && ev->name_len)) {
		e->val = 0;
		if (ev->name_len)
			e->val = (uintptr_t)strndup(ev->name, ev->name_len);
	}
	return (const char *)(uintptr_t)e->val;
}

static void on_gpu(struct cuda *c, const struct prof_sample_hdr *h, size_t size)
{
	const struct gpu_event *ev = (const void *)(h + 1);
	struct cm_gpu *orphan;
	struct cm_launch launch, *pd;
	const char *name;

	if (size < sizeof(*h) + offsetof(struct gpu_event, name) ||
	    size < sizeof(*h) + offsetof(struct gpu_event, name) + ev->name_len ||
	    ev->name_len > GPU_NAME_LEN) {
		c->st.bad++;
		return;
	}
	switch (ev->type) {
	case GPU_EV_FUNC_NAME:
		if (ev->name_len)
			fn_set_name(c, fn_get(c, h->pid, ev->handle), ev->name);
		c->st.names++;
		return;
	case GPU_EV_FUNC_ALIAS: {
		uint32_t fn = fn_get(c, h->pid, ev->handle);

		if (fn != UINT32_MAX)
			c->fns[fn].alias = ev->handle2;
		c->st.aliases++;
		return;
	}
	case GPU_EV_DROPPED:
		c->st.gpu_dropped += ev->bytes;
		return;
	case GPU_EV_CORR:
		on_corr(c, h, ev->corr);
		return;
	case GPU_EV_ACTIVITY:
		break;
	default:
		c->st.bad++;
		return;
	}
	if (ev->kind < 4)
		c->st.gpu[ev->kind]++;
	c->st.gpu_ns += ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
	name = gpu_name(c, h->pid, ev);
	pd = ev->corr && cuda_match__take_launch(c->match, h->pid, ev->corr, &launch) ? &launch
										      : NULL;
	if (pd && ev->kind == GPU_KERNEL && pd->fn != UINT32_MAX) {
		c->st.gpu_joined++;
		add_gpu_time(c, pd, ev->end_ns - ev->start_ns);
		fn_set_name(c, pd->fn, name); /* launches of handles we saw no name for */
	}
	orphan = NULL;
	if (!pd && ev->corr)
		orphan = cuda_match__orphan(
			c->match, h->pid, ev->corr,
			&(struct cm_gpu){ .start_ns = ev->start_ns,
					  .dur_ns = ev->end_ns - ev->start_ns,
					  .kind = ev->kind,
					  .mangled = name ? strdup(name) : NULL });
	if (c->r->tl)
		timeline_gpu(c, h, ev, name, pd, orphan);
}

static void cuda_on_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			   const void *data, size_t size)
{
	struct cuda *c = priv;

	(void)r;
	if (h->kind == SAMPLE_CUDA)
		on_call(c, data, size);
	else
		on_gpu(c, h, size);
}

/* ---- life cycle ---- */

static bool cuda_wanted(void)
{
	return env.ev_cuda;
}

/* Open, set up and load the CUDA object (c->skel: NULL when it did not open). 0 or -errno. */
static int cuda_open_load(struct recorder *r, struct cuda *c, int attempt)
{
	int err;

	c->skel = cuda_bpf__open_opts(rec__open_opts(r, attempt));
	if (!c->skel)
		return -errno;
	err = rec__share_maps(r, c->skel->obj);
	if (err)
		return err;
	REC_SET_COMMON_RODATA(c->skel->rodata);
	c->skel->rodata->launch_at_entry = c->at_entry;
	return cuda_bpf__load(c->skel);
}

static int cuda_setup(struct recorder *r, void **priv)
{
	struct cuda *c = calloc(1, sizeof(*c));
	size_t nspecs = 0;
	int err;

	*priv = c;
	if (!c)
		return -ENOMEM;
	c->r = r;
	c->fn_idx = htab__new(256, HTAB_COPY_KEYS);
	c->gpu_names = htab__new(256, HTAB_COPY_KEYS);
	cuda_match__new(&c->match, 0);
	c->usdt_files = htab__new(256, HTAB_COPY_KEYS);
	if (!c->fn_idx || !c->gpu_names || !c->match || !c->usdt_files)
		return -ENOMEM;
	/* only a Chrome trace draws each launch's duration: else one probe per launch */
	c->at_entry = !r->tl;
	for (int attempt = 0;; attempt++) {
		err = cuda_open_load(r, c, attempt);
		if (!err || !c->skel || !rec__open_retry(r, attempt, err))
			break;
		cuda_bpf__destroy(c->skel);
		c->skel = NULL;
	}
	if (!c->skel) {
		pr_err("cannot open the CUDA BPF object: %s", strerror(-err));
		return err;
	}
	if (err) {
		pr_err("cannot load the CUDA BPF programs: %s", strerror(-err));
		return err;
	}
	rec__add_counters(r, &counters_cuda, bpf_map__fd(c->skel->maps.cuda_counters));
	c->v_launches = rec__value(r, "cuda_launches", "count");
	c->v_gpu = rec__value(r, "gpu_time", "nanoseconds");
	if (c->v_launches < 0 || c->v_gpu < 0) {
		pr_err("--cuda: too many value types in one run");
		return -ENOSPC;
	}
	if (env.cuda_weight == CUDA_WEIGHT_GPU_TIME)
		rec__default_value(r, c->v_gpu);
	else if (!env.ev_cpu || env.cuda_weight == CUDA_WEIGHT_LAUNCHES)
		rec__default_value(r, c->v_launches);

	for (size_t i = 0; i < NPROBES; i++) {
		bool name = probe_list[i].prog >= FIRST_NAME_PROG;

		specs[nspecs++] = (struct uprobe_spec){
			.func = probe_list[i].func,
			.prog = entry_prog(c->skel, probe_list[i].prog),
			.optional = true,
			.cookie = probe_list[i].prog <= LAST_LAUNCH_PROG ? probe_list[i].prog : 0,
		};
		if (c->at_entry && probe_list[i].prog <= LAST_LAUNCH_PROG)
			continue;
		specs[nspecs++] = (struct uprobe_spec){
			.func = probe_list[i].func,
			.prog = name ? c->skel->progs.on_name_ret : c->skel->progs.on_call_ret,
			.retprobe = true,
			.optional = true,
		};
	}
	/*
	 * Once per libcuda file for every process, even with -p / -- CMD: only
	 * CUDA processes map libcuda, so nobody else takes the trap, and each
	 * attach waits for an RCU grace period -- ~96 of them per process made
	 * a targeted run spend seconds attaching. The pid filter is in BPF.
	 */
	err = uprobes__new(&c->up, "cuda", r->objs, true, is_libcuda, NULL, specs, nspecs);
	if (err) {
		pr_err("cannot set up the CUDA probes: %s", strerror(-err));
		return err;
	}
	r->synth_name = leaf_name;
	r->synth_arg = c;
	c->key = malloc(sizeof(*c->key) +
			(MAX_KSTACK + MAX_USTACK + MAX_PYSTACK + 1) * sizeof(struct sframe));
	return c->key ? 0 : -ENOMEM;
}

static int cuda_start(struct recorder *r, void *priv)
{
	struct cuda *c = priv;
	DIR *d;
	struct dirent *de;

	if (env.cuda_lib && uprobes__add_path(c->up, env.cuda_lib)) {
		pr_err("--cuda-lib '%s': cannot probe it (not readable, or no cu* functions)",
		       env.cuda_lib);
		return -ENOENT;
	}
	/* processes already running: -p targets, or all of them with -a */
	for (size_t i = 0; i < env.npids; i++)
		scan_proc(c, env.pids[i]);
	if (!env.all)
		return 0;
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (isdigit((unsigned char)de->d_name[0]))
			scan_proc(c, (uint32_t)strtoul(de->d_name, NULL, 10));
	}
	closedir(d);
	(void)r;
	return 0;
}

static void cuda_on_proc(struct recorder *r, void *priv, uint32_t pid, int change)
{
	struct cuda *c = priv;

	if (change == PROC_EXITED) {
		uprobes__forget(c->up, pid);
		return;
	}
	if ((change == PROC_MAPPED || change == PROC_EXECED || change == PROC_FORKED) &&
	    rec__is_target(r, pid))
		scan_proc(c, pid);
}

static uint64_t bpf_counter(struct cuda *c, enum cuda_counter idx)
{
	return bpfmap__percpu_counter(bpf_map__fd(c->skel->maps.cuda_counters), idx);
}

static void cuda_stop(struct recorder *r, void *priv)
{
	struct cuda *c = priv;

	(void)r;
	for (size_t i = 0; i < c->nlinks; i++)
		bpf_link__destroy(c->links[i]);
	c->nlinks = 0;
}

static void cuda_summary(struct recorder *r, void *priv, FILE *f)
{
	struct cuda *c = priv;
	const struct uprobes_stats *us = uprobes__stats(c->up);
	const struct cm_stats *ms = cuda_match__stats(c->match);
	uint64_t launches = 0, pending = cuda_match__waiting(c->match);
	char buf[1024];
	size_t len = 0;

	(void)r;
	(void)f;
	for (int op = CUDA_OP_LAUNCH; op <= CUDA_OP_GRAPH_LAUNCH; op++)
		launches += c->st.calls[op];
	for (int op = 1; op < CUDA_OP__MAX; op++) {
		if (!c->st.calls[op])
			continue;
		if (c->at_entry && is_launch(op)) /* recorded at entry: no duration */
			len += snprintf(buf + len, sizeof(buf) - len, "%s%s %llu (untimed)",
					len ? ", " : "", op_names[op],
					(unsigned long long)c->st.calls[op]);
		else
			len += snprintf(buf + len, sizeof(buf) - len, "%s%s %llu (%.3f ms)",
					len ? ", " : "", op_names[op],
					(unsigned long long)c->st.calls[op],
					c->st.call_ns[op] / 1e6);
		if (len >= sizeof(buf))
			break;
	}
	pr_info("cuda: %llu driver calls in %llu files: %s%s; %llu failed, %llu lost (ring "
		"buffer full %llu, in flight at attach %llu, too many in flight %llu), %llu "
		"malformed",
		(unsigned long long)bpf_counter(c, CUDA_CNT_CALLS), (unsigned long long)us->files,
		len ? buf : "none", "", (unsigned long long)c->st.failed,
		(unsigned long long)(bpf_counter(c, CUDA_CNT_RB_FULL) +
				     bpf_counter(c, CUDA_CNT_NO_ENTRY) +
				     bpf_counter(c, CUDA_CNT_INFLIGHT_FULL)),
		(unsigned long long)bpf_counter(c, CUDA_CNT_RB_FULL),
		(unsigned long long)bpf_counter(c, CUDA_CNT_NO_ENTRY),
		(unsigned long long)bpf_counter(c, CUDA_CNT_INFLIGHT_FULL),
		(unsigned long long)c->st.bad);
	pr_info("cuda: %llu launches, %llu kernel names seen; memory: %llu allocs, %llu frees, "
		"%llu bytes copied",
		(unsigned long long)launches, (unsigned long long)(c->st.names + c->st.aliases),
		(unsigned long long)c->st.calls[CUDA_OP_MEM_ALLOC],
		(unsigned long long)c->st.calls[CUDA_OP_MEM_FREE],
		(unsigned long long)(c->st.bytes[CUDA_OP_MEMCPY_HTOD] +
				     c->st.bytes[CUDA_OP_MEMCPY_DTOH] +
				     c->st.bytes[CUDA_OP_MEMCPY_DTOD] +
				     c->st.bytes[CUDA_OP_MEMCPY]));
	if (c->st.usdt_files || c->st.with_corr)
		pr_info("cuda: GPU (CUPTI in %llu files): %llu kernels, %llu memcpys, %llu memsets, "
			"%.3f ms GPU time; %llu kernels joined with their launch, %llu calls "
			"without a GPU record, %llu records dropped by CUPTI, %llu lost (ring buffer "
			"full), %llu GPU records and %llu launches let go unmatched (bounded tables)",
			(unsigned long long)c->st.usdt_files,
			(unsigned long long)c->st.gpu[GPU_KERNEL],
			(unsigned long long)c->st.gpu[GPU_MEMCPY],
			(unsigned long long)c->st.gpu[GPU_MEMSET], c->st.gpu_ns / 1e6,
			(unsigned long long)c->st.gpu_joined,
			(unsigned long long)(pending + ms->launches_evicted),
			(unsigned long long)c->st.gpu_dropped,
			(unsigned long long)bpf_counter(c, CUDA_CNT_GPU_RB_FULL),
			(unsigned long long)ms->gpu_evicted,
			(unsigned long long)(ms->launches_evicted + ms->at_entry_evicted));
	pr_verbose("cuda: %llu probes attached (%llu failed), USDT %llu attached (%llu failed), "
		   "%llu correlation ids outside a probed call; launches %s",
		   (unsigned long long)us->probes, (unsigned long long)us->attach_failed,
		   (unsigned long long)c->st.usdt_attached, (unsigned long long)c->st.usdt_failed,
		   (unsigned long long)(bpf_counter(c, CUDA_CNT_CORR_ORPHAN) + c->st.corr_orphans),
		   c->at_entry ? "recorded at entry (no return probe: untimed, result unknown)"
			       : "timed (entry and return probes)");
}

static void cuda_destroy(struct recorder *r, void *priv)
{
	struct cuda *c = priv;
	struct htab_entry *e;
	size_t it = 0;

	(void)r;
	if (!c)
		return;
	cuda_stop(r, c);
	free(c->links);
	uprobes__free(c->up);
	cuda_bpf__destroy(c->skel);
	for (size_t i = 0; i < c->nfns; i++) {
		free(c->fns[i].mangled);
		free(c->fns[i].leaf);
	}
	free(c->fns);
	while (c->gpu_names && (e = htab__next(c->gpu_names, &it)))
		free((void *)(uintptr_t)e->val);
	it = 0;
	cuda_match__free(c->match);
	htab__free(c->fn_idx);
	htab__free(c->gpu_names);
	htab__free(c->usdt_files);
	free(c->key);
	free(c);
}

/* The CUDA driver loads the CUPTI injection library named here at cuInit. */
static int cuda_prepare_cmd(void)
{
	const char *path = cuda__injection_path();

	if (getenv("CUDA_INJECTION64_PATH") || !path)
		return 0; /* the user's own, or none built: launches without GPU times */
	return setenv("CUDA_INJECTION64_PATH", path, 1) ? -errno : 0;
}

const struct rec_feature cuda_feature = {
	.name = "cuda",
	.wanted = cuda_wanted,
	.prepare_cmd = cuda_prepare_cmd,
	.setup = cuda_setup,
	.start = cuda_start,
	.on_record = cuda_on_record,
	.on_proc = cuda_on_proc,
	.stop = cuda_stop,
	.summary = cuda_summary,
	.destroy = cuda_destroy,
	.kinds = { SAMPLE_CUDA, SAMPLE_GPU, 0 },
};
