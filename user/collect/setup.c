// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A recording's set-up: the CPU object opened, sized from the options and
 * loaded (CO-RE against the cached types file when there is one), the pid
 * and cgroup filters filled, the unwind tables mapped, each feature's
 * object loaded against the shared maps; the side band's filter; the
 * process's limits. What is loaded is only what the events and target need
 * (docs/design.md, "Verification is start-up").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "alloc.skel.h"
#include "cli.h"
#include "collect/recorder.h"
#include "collect/setup.h"
#include "collect/sideband.h"
#include "collect/uprobes.h"
#include "cpu.skel.h"
#include "cuda.skel.h"
#include "offcpu.skel.h"
#include "proc/cgroup.h"
#include "proc/objfile.h"
#include "unwind/tables.h"
#include "unwind/tcache.h"
#include "util/caps.h"
#include "util/clock.h"
#include "util/corebtf.h"
#include "util/counters.h"
#include "util/log.h"
#include "util/membudget.h"

static int libbpf_debug(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	return log__vprintf_raw(fmt, args);
}

/* The side band follows the cgroup's processes (--cgroup, no pid filter). */
static bool sb_by_cgroup(void)
{
	return env.cgroup_path && !env.npids && !env.cmd_argv;
}

int rec__share_maps(struct recorder *r, struct bpf_object *obj)
{
	struct bpf_map *m, *src;
	int err;

	bpf_object__for_each_map(m, obj) {
		const char *name = bpf_map__name(m);

		if (bpf_map__is_internal(m)) /* .rodata, .bss: the object's own */
			continue;
		src = bpf_object__find_map_by_name(r->skel->obj, name);
		if (!src)
			continue;
		err = bpf_map__reuse_fd(m, bpf_map__fd(src));
		if (err) {
			pr_err("cannot share BPF map %s: %s", name, strerror(-err));
			return err;
		}
	}
	/* every feature object passes here before its load */
	uprobes__prepare(obj);
	return 0;
}

static void raise_nofile(void)
{
	struct rlimit rl;

	/* one fd per mapped file is kept until symbolization */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * fds held open for mapped files (and containers' roots): one per 64 KiB of
 * --mem-budget (2048 at the default 128 MiB), at least 64, at most half of
 * RLIMIT_NOFILE (perf events, BPF objects, links and outputs need the rest).
 * Past it the least recently used are closed and opened again when needed.
 */
uint32_t setup__fd_cap(void)
{
	uint64_t cap = membudget__get() >> 16;
	struct rlimit rl;

	if (cap < 64)
		cap = 64;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && cap > rl.rlim_cur / 2)
		cap = rl.rlim_cur / 2 > 16 ? rl.rlim_cur / 2 : 16;
	return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}

/*
 * --unwind-cache. A DIR named on the command line that cannot be used safely
 * is an error; the default is only warned about (a non-root agent with
 * CAP_BPF cannot create it) and the run goes on without a cache.
 */
static int open_table_cache(struct recorder *r)
{
	uint64_t max = 4ULL * env.unwind_rows * UNWIND_ROW_BYTES;
	const char *why;
	int err;

	if (!env.unwind_cache)
		return 0;
	err = tcache__open(&r->tcache, env.unwind_cache, max, &why);
	if (err && env.unwind_cache_given) {
		pr_err("cannot use '%s' for --unwind-cache: %s (%s)", env.unwind_cache, why,
		       strerror(-err));
		return err;
	}
	if (err) {
		pr_warn("unwind tables are not cached between runs: %s: %s (%s); "
			"--unwind-cache DIR|off",
			env.unwind_cache, why, strerror(-err));
		return 0;
	}
	unwinder__set_cache(r->unw, r->tcache);
	return 0;
}

/* Every object the binary may load: one CO-RE types file serves them all. */
static int core_objs(struct corebtf_obj *o)
{
	o[0].elf = cpu_bpf__elf_bytes(&o[0].sz);
	o[1].elf = offcpu_bpf__elf_bytes(&o[1].sz);
	o[2].elf = alloc_bpf__elf_bytes(&o[2].sz);
	o[3].elf = cuda_bpf__elf_bytes(&o[3].sz);
	return 4;
}

const struct bpf_object_open_opts *rec__open_opts(struct recorder *r, int attempt)
{
	memset(&r->feat_open, 0, sizeof(r->feat_open));
	r->feat_open.sz = sizeof(r->feat_open);
	r->feat_open.btf_custom_path = !attempt && r->core_btf_used ? r->core_btf : NULL;
	return &r->feat_open;
}

bool rec__open_retry(struct recorder *r, int attempt, int err)
{
	if (attempt || !r->core_btf_used)
		return false;
	pr_debug("a BPF object did not load against %s (%s): the kernel's BTF", r->core_btf,
		 strerror(-err));
	return true;
}

/*
 * Whether a perf_event program (an NMI with the cycles event) may create
 * task local storage: from 6.4 on its elements come from bpf_mem_alloc,
 * which an NMI may call. Before, from kmalloc (6.1's verifier accepts the
 * call all the same), which an NMI must not: those kernels keep the LRU map.
 * 6.5 and later, a margin over the commit's release.
 */
static bool task_storage_in_nmi(void)
{
	const char *force = getenv("BPFPROF_TASK_STORAGE"); /* "0": the LRU map (tests) */
	struct utsname u;
	int major = 0, minor = 0;

	if (force)
		return strcmp(force, "0") != 0;
	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 5);
}

/*
 * Open, size and load the CPU object; CO-RE as every object's
 * (rec__open_opts: the cached types file at attempt 0, the kernel's BTF
 * after). 0 or -errno, nothing printed.
 */
/*
 * The unwind rows: --unwind-mem in chunks of at most 32 MiB (a table never
 * spans two), fixed when it is given. Not given, the default 32 MiB is a
 * start: the budget grows a chunk at a time when a file samples want has no
 * room even with every cold table evicted, up to four times --mem-budget
 * (512 MiB at its default) and a thirty-second of the machine's memory,
 * never below the start. Kernel memory, taken a chunk at a time.
 */
static void unwind_sizing(struct recorder *r)
{
	uint64_t rows = env.unwind_rows, max_rows, mem = 0;
	uint32_t chunks = (uint32_t)((rows + UNWIND_CHUNK_MASK) >> UNWIND_CHUNK_SHIFT);
	struct sysinfo si;

	if (!chunks)
		chunks = 1;
	r->unwind_chunk_rows = (uint32_t)((rows + chunks - 1) / chunks);
	r->unwind_chunks = chunks;
	r->unwind_max_chunks = chunks;
	if (env.unwind_mem_given)
		return;
	if (!sysinfo(&si))
		mem = (uint64_t)si.totalram * si.mem_unit;
	max_rows = 4 * membudget__get() / UNWIND_ROW_BYTES;
	if (mem && mem / 32 / UNWIND_ROW_BYTES < max_rows)
		max_rows = mem / 32 / UNWIND_ROW_BYTES;
	if (max_rows / r->unwind_chunk_rows > chunks)
		r->unwind_max_chunks = (uint32_t)(max_rows / r->unwind_chunk_rows);
}

static int cpu_open_load(struct recorder *r, int attempt)
{
	uint32_t cpu_last_n;
	int err;
	struct bpf_map *ev;

	r->skel = cpu_bpf__open_opts(rec__open_opts(r, attempt));
	if (!r->skel)
		return -errno;
	REC_SET_COMMON_RODATA(r->skel->rodata);
	r->skel->rodata->want_kernel = !env.no_kernel;
	r->skel->rodata->want_user = !env.no_user;
	r->skel->rodata->time_samples = log_level >= 2;
	r->skel->rodata->period_ns = 1000000000ULL / env.freq;
	if (env.no_python || env.no_user) {
		bpf_map__set_max_entries(r->skel->maps.py_procs, 1);
		bpf_map__set_max_entries(r->skel->maps.py_threads, 1);
		bpf_map__set_max_entries(r->skel->maps.pycode_seen, 1);
		bpf_map__set_max_entries(r->skel->maps.py_files, 1);
	}
	ev = r->skel->maps.events;
	bpf_map__set_max_entries(ev, env.ringbuf_bytes);
	/*
	 * Only what the chosen events and target need is loaded and sized
	 * (issue 17: -a start-up): the sampling program only for on-CPU
	 * samples (--alloc, --off-cpu or --cuda alone have their own objects
	 * and do not verify it), the fork/exit followers only for `-- CMD`,
	 * the pid filter's table only when there is a pid filter.
	 */
	bpf_program__set_autoload(r->skel->progs.on_cpu_sample, env.ev_cpu);
	bpf_program__set_autoload(r->skel->progs.on_fork, env.cmd_argv != NULL);
	bpf_program__set_autoload(r->skel->progs.on_exit, env.cmd_argv != NULL);
	/* the side band's cgroup filter (sb_is_target) */
	bpf_program__set_autoload(r->skel->progs.on_exec_in_cgroup, sb_by_cgroup());
	bpf_map__set_max_entries(r->skel->maps.cgroup_execs, sb_by_cgroup() ? env.max_targets : 1);
	bpf_map__set_max_entries(r->skel->maps.targets,
				 env.all && !env.cmd_argv ? 1 : env.max_targets);
	/*
	 * Threads whose last sample's CPU time is kept: in task local storage
	 * where a sample may create it (cpu.bpf.c), else in an LRU map (a dead
	 * thread's entry goes first).
	 */
	r->skel->rodata->cpu_last_task_on = task_storage_in_nmi();
	cpu_last_n = env.all || env.cgroup_path ? CPU_LAST_MACHINE : CPU_LAST_TARGETS;
	if (!env.ev_cpu || r->skel->rodata->cpu_last_task_on)
		cpu_last_n = 1;
	bpf_map__set_max_entries(r->skel->maps.cpu_last, cpu_last_n);
	if (env.unwind == UNWIND_FP || env.no_user) {
		r->unwind_chunk_rows = r->unwind_chunks = r->unwind_max_chunks = 1;
		bpf_map__set_max_entries(r->skel->maps.proc_unwind, 1);
	} else {
		unwind_sizing(r);
		bpf_map__set_max_entries(r->skel->maps.proc_unwind, env.unwind_procs);
	}
	/*
	 * The chunks' template is the first chunk itself: libbpf 1.1 cannot
	 * size a BTF-defined inner map, and a template the size of a chunk
	 * would take its memory for nothing. The unwinder copies rows in
	 * through a mapping (tables.c): mmapable.
	 */
	bpf_map__set_max_entries(r->skel->maps.unwind_rows, r->unwind_max_chunks);
	if (r->unwind_chunk0 < 0) {
		LIBBPF_OPTS(bpf_map_create_opts, copts, .map_flags = BPF_F_MMAPABLE);

		r->unwind_chunk0 =
			bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_chunk", sizeof(__u32),
				       sizeof(struct bpf_urow), r->unwind_chunk_rows, &copts);
		if (r->unwind_chunk0 < 0)
			return -errno;
	}
	err = bpf_map__set_inner_map_fd(r->skel->maps.unwind_rows, r->unwind_chunk0);
	if (err)
		return err;

	if (log_level >= 3 && env.ev_cpu) /* verifier statistics (-vvv), whole log (-vvvv) */
		bpf_program__set_log_level(r->skel->progs.on_cpu_sample,
					   log_level >= 4 ? 1 | 4 : 4);
	return cpu_bpf__load(r->skel);
}

/*
 * Open, size and load the CPU object (it owns the shared maps), fill the
 * pid and cgroup filters, map the unwind tables, then set up each feature
 * (which loads its own object against the shared maps). Errors are printed.
 */
int setup__bpf(struct recorder *r, const struct rec_feature **feats, size_t nfeats)
{
	int err, nobjs;
	uint32_t reason = TARGET_GIVEN;
	double t0 = process_cpu_s();
	struct corebtf_obj objs[4];

	nobjs = core_objs(objs);
	r->core_btf_used = corebtf__cached(objs, nobjs, r->core_btf, sizeof(r->core_btf));
	for (int attempt = 0;; attempt++) {
		err = cpu_open_load(r, attempt);
		if (!err || !r->skel || !rec__open_retry(r, attempt, err))
			break;
		cpu_bpf__destroy(r->skel);
		r->skel = NULL;
		/* the CPU object needs what every object needs: the file does not fit */
		pr_debug("the CO-RE types file %s: dropped", r->core_btf);
		unlink(r->core_btf);
		r->core_btf_used = false;
	}
	if (!r->skel) {
		pr_err("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	if (!err)
		err = rec__add_counters(r, &counters_bpf, bpf_map__fd(r->skel->maps.counters));
	if (err) {
		char why[256];

		pr_err("cannot load the BPF programs: %s%s", strerror(-err),
		       caps__why(err, CAPS_RECORD, why, sizeof(why)));
		return err;
	}
	/* written after the run (util/corebtf.h), for the next ones */
	r->core_btf_todo = !r->core_btf_used && r->core_btf[0];
	r->su_load = process_cpu_s() - t0;
	for (size_t i = 0; i < env.npids; i++) {
		if (bpf_map_update_elem(bpf_map__fd(r->skel->maps.targets), &env.pids[i], &reason,
					BPF_ANY)) {
			err = -errno;
			pr_err("cannot add pid %u to the filter: %s", env.pids[i], strerror(-err));
			return err;
		}
	}
	if (env.cgroup_path &&
	    (err = cgroup__set_filter(bpf_map__fd(r->skel->maps.target_cgroup), env.cgroup_path))) {
		pr_err("cannot set the cgroup filter to '%s': %s", env.cgroup_path, strerror(-err));
		return err;
	}
	if (r->child > 0 &&
	    bpf_map_update_elem(bpf_map__fd(r->skel->maps.targets), &r->child, &reason, BPF_ANY)) {
		err = -errno;
		pr_err("cannot add the command's pid to the filter: %s", strerror(-err));
		return err;
	}
	if (env.unwind != UNWIND_FP && !env.no_user) {
		err = unwinder__new_bpf(&r->unw, bpf_map__fd(r->skel->maps.unwind_rows),
					r->unwind_chunk0, r->unwind_chunk_rows, r->unwind_chunks,
					r->unwind_max_chunks,
					bpf_map__fd(r->skel->maps.proc_unwind),
					bpf_map__fd(r->skel->maps.unwind_gen), r->objs);
		r->unwind_chunk0 = -1; /* the unwinder's now */
		if (err) {
			pr_err("cannot map the unwind tables: %s", strerror(-err));
			return err;
		}
		unwinder__set_file_map(r->unw, bpf_map__fd(r->skel->maps.file_unwind));
		/* a few named targets: all their tables; the machine: what samples want */
		unwinder__set_eager(r->unw, !env.all);
		unwinder__set_partial(r->unw, env.unwind_rows / UNWIND_PARTIAL_SHARE);
		if (objtab__vdso(r->objs) && unwinder__set_vdso(r->unw, objtab__vdso(r->objs)->id))
			pr_verbose(
				"no unwind table for the vDSO: its frames end walks of new processes");
		err = open_table_cache(r);
		if (err)
			return err;
	}
	if (env.ev_cpu) { /* CPU values first: pprof's first sample types, as always */
		r->cpu_samples = rec__value(r, "samples", "count");
		r->cpu_ns = rec__value(r, "cpu", "nanoseconds");
	}
	t0 = process_cpu_s();
	for (size_t i = 0; i < nfeats; i++) {
		r->feat[r->nfeat] = feats[i];
		err = feats[i]->setup(r, &r->feat_priv[r->nfeat]);
		r->nfeat++; /* destroy() even after a failed setup */
		if (err)
			return err;
	}
	r->su_features = process_cpu_s() - t0;
	return 0;
}

/*
 * At the exec of a process not known the cgroup's: BPF saw whether the exec
 * happened in the cgroup (no /proc read for each exec on the host).
 */
static bool sb_exec_in_cgroup(void *ctx, uint32_t pid)
{
	struct recorder *r = ctx;
	uint32_t v;

	return !bpf_map_lookup_elem(bpf_map__fd(r->skel->maps.cgroup_execs), &pid, &v);
}

/*
 * The side band's filter: a pid filter's targets (the map is_target()
 * reads), else the cgroup's processes: those BPF saw exec in it
 * (cgroup_execs), and the others as /proc/PID/cgroup says (one gone
 * already is not followed; a sample of it marks it, dec_user_begin).
 */
static bool sb_is_target(void *ctx, uint32_t pid)
{
	if (!sb_by_cgroup())
		return rec__is_target(ctx, pid);
	return sb_exec_in_cgroup(ctx, pid) || cgroup__pid_under(pid, env.cgroup_rel) == 1;
}

/* A cgroup process's exit was read: its pid's next process is judged afresh. */
static void sb_forget(void *ctx, uint32_t pid)
{
	struct recorder *r = ctx;

	bpf_map_delete_elem(bpf_map__fd(r->skel->maps.cgroup_execs), &pid);
}

/* Before anything is opened: file limits, libbpf's messages (-vv). */
void setup__process(void)
{
	raise_nofile();
	libbpf_set_print(log_level >= 3 ? libbpf_debug : NULL);
}

/*
 * The side band follows the targets: -p, -- CMD (the targets map, filled in
 * setup__bpf and at forks), --cgroup (its processes). 0 or -errno (printed).
 */
int setup__sideband_filter(struct recorder *r)
{
	struct sideband_filter f = { .is_target = sb_is_target,
				     .ctx = r,
				     .follow_children = env.cmd_argv != NULL,
				     .by_cgroup = sb_by_cgroup(),
				     .at_exec = sb_by_cgroup() ? sb_exec_in_cgroup : NULL,
				     .forget = sb_by_cgroup() ? sb_forget : NULL };
	int err;

	if (!env.npids && !env.cmd_argv && !env.cgroup_path)
		return 0;
	if ((err = sideband__set_filter(r->sb, &f)))
		pr_err("cannot choose which processes to follow: %s", strerror(-err));
	return err;
}

/* After the run: the CO-RE types file for the next runs, if this one had none. */
void setup__save_core_btf(struct recorder *r)
{
	struct corebtf_obj objs[4];
	int err;

	if (!r->core_btf_todo)
		return;
	if ((err = corebtf__write(objs, core_objs(objs), r->core_btf)))
		pr_debug("CO-RE types not cached in %s: %s", r->core_btf, strerror(-err));
}
