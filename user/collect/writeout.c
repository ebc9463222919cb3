// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Writing what was recorded: at the end of a run, each distinct frame named
 * once (file by file, so the end holds one file's symbols at a time), the
 * profile built and handed to the writer of -o's format; with --continuous,
 * each interval's stacks into its file and a fresh stack table. Counts the
 * samples the file holds, which is what the summary reports.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "aggregate/profile.h"
#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "aggregate/timeline_log.h"
#include "cli.h"
#include "collect/continuous.h"
#include "collect/pytrack.h"
#include "collect/recorder.h"
#include "collect/sideband.h"
#include "collect/writeout.h"
#include "proc/cgroup.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/ksyms.h"
#include "unwind/cfi.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"
#include "util/procfs.h"
#include "write/output.h"
#include "write/writers.h"

static uint32_t feature_labels(void *arg, size_t stack, struct plabel *out, uint32_t max)
{
	struct recorder *r = arg;
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nfeat && n < max; i++)
		if (r->feat[i]->labels)
			n += r->feat[i]->labels(r, r->feat_priv[i], stack, out + n, max - n);
	return n;
}

static int py_describe(const void *arg, uint64_t id, uint32_t off, const char **qualname,
		       const char **file, uint32_t *line)
{
	return pytrack__describe(arg, id, off, qualname, file, line);
}

static uint32_t py_first_line(const void *arg, uint64_t id)
{
	return pytrack__first_line(arg, id);
}

static const char *py_thread_name(const void *arg, uint32_t pid, uint32_t tid)
{
	return pytrack__thread_name(arg, pid, tid);
}

static const struct build_python py_names = {
	.describe = py_describe,
	.first_line = py_first_line,
	.thread_name = py_thread_name,
};

void writeout__python(const struct recorder *r, struct build_opts *bo)
{
	bo->py = r->py ? &py_names : NULL;
	bo->py_arg = r->py;
}

/* What profile__build needs from this run: roots, labels, value types. */
static void build_opts_init(struct recorder *r, struct build_opts *bo)
{
	memset(bo, 0, sizeof(*bo));
	bo->per_pid = env.per_pid;
	bo->per_thread = env.per_thread;
	writeout__python(r, bo);
	bo->per_container = env.per_container;
	bo->cg = r->cg;
	bo->synth_name = r->synth_name;
	bo->jit = r->jit;
	/*
	 * Native source lines for pprof, but not in continuous mode unless asked
	 * (--native-lines): the agent would keep the DWARF of every binary the
	 * machine runs, its RSS growing towards the memory budget for weeks.
	 */
	bo->lines = env.native_lines				     ? BUILD_LINES_NAMES
		    : env.format == FMT_PPROF && !env.continuous_dir ? BUILD_LINES_PPROF
								     : BUILD_LINES_NONE;
	bo->synth_arg = r->synth_arg;
	bo->stack_labels = feature_labels;
	bo->stack_labels_arg = r;
	memcpy(bo->value_types, r->values, sizeof(r->values));
	bo->nvalues = r->nvalues;
	bo->default_value = r->default_value >= 0 ? r->default_value : 0;
	bo->count_value = r->cpu_samples >= 0 ? (uint32_t)r->cpu_samples : bo->default_value;
	if (r->cpu_ns >= 0) {
		bo->period_type = r->values[r->cpu_ns];
		bo->period = 1000000000LL / env.freq;
	}
}

/*
 * The CPU samples a written profile holds (its samples/count value summed;
 * a record that is no sample, such as a Python code object, is not one),
 * added to r->st.written, what the summary and the interval lines report,
 * as the trace writer counts its own. A run without CPU sampling (--off-cpu,
 * --alloc or --cuda alone) leaves the record count in charge, in every
 * format alike.
 */
static void count_written(struct recorder *r, const struct profile *p, uint32_t cv)
{
	if (r->cpu_samples < 0 || cv != (uint32_t)r->cpu_samples || cv >= p->nvalues)
		return;
	for (size_t i = 0; i < p->nsamples; i++) {
		if (p->samples[i].values[cv] > 0)
			r->st.written += (uint64_t)p->samples[i].values[cv];
		if (r->cpu_ns >= 0 && (uint32_t)r->cpu_ns < p->nvalues &&
		    p->samples[i].values[r->cpu_ns] > 0)
			r->st.written_cpu_ns += (uint64_t)p->samples[i].values[r->cpu_ns];
	}
	r->st.written_known = true;
}

/*
 * Continuous mode: this interval's stacks become its file, the stack table
 * starts empty, and names of cgroups no interval has needed for a while are
 * let go. Failures are counted by continuous__write; recording goes on.
 */
int writeout__interval(struct recorder *r)
{
	struct build_opts bo;
	struct interval_totals t = { 0 };
	struct build_stats bs;
	struct profile *p = NULL;
	struct stacks *fresh, *old;
	int err;

	sideband__consume(r->sb);
	ring_buffer__consume(r->rb);
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->interval_end)
			r->feat[i]->interval_end(r, r->feat_priv[i]);
	build_opts_init(r, &bo);
	continuous__span(r->cont, &bo.time_ns, &bo.duration_ns);
	if (!env.no_kernel)
		continuous__kernel_symbols(r->cont, &r->ks);
	err = profile__build(&p, r->stacks, r->objs, r->ks, &bo, &bs);
	if (err) {
		pr_err("cannot build the profile: %s", strerror(-err));
		p = profile__new(); /* an empty file still marks the interval */
		if (!p)
			return -ENOMEM;
	}
	if (!err)
		count_written(r, p, bo.count_value);
	t.samples = r->st.written_known ? r->st.written : r->st.received;
	t.lost = rec__counter(r, CNT_RB_FULL) + r->st.agg_failed + r->st.bad + r->st.dec.bad;
	t.processes = writeout__processes(r->stacks);
	err = continuous__write(r->cont, p, &t);
	profile__free(p);
	fresh = stacks__new();
	old = r->stacks;
	if (fresh)
		r->stacks = fresh;
	/* what only exited processes could still need: everything they sampled is written */
	proctab__gc(r->procs);
	objtab__interval(r->objs);
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->interval)
			r->feat[i]->interval(r, r->feat_priv[i], fresh ? old : NULL);
	if (fresh)
		stacks__free(old);
	if (r->cg)
		cgroups__trim(r->cg, 10, 1024);
	return err;
}

/* Every (object, offset) frame of the aggregated stacks (objtab keeps their names). */
static void stack_frames(void *ctx, objtab_visit_fn visit, void *arg)
{
	struct recorder *r = ctx;
	const struct stack_vals *v;
	const struct stack_key *k;
	size_t it = 0;

	while ((k = stacks__next(r->stacks, &it, &v)))
		for (uint32_t i = k->nkernel; i < (uint32_t)k->nkernel + k->nuser; i++)
			if (k->frames[i].obj >= OBJ_FIRST)
				visit(arg, k->frames[i].obj, k->frames[i].addr);
}

size_t writeout__processes(const struct stacks *st)
{
	struct htab *pids = htab__new(1024, HTAB_COPY_KEYS);
	const struct stack_vals *v;
	const struct stack_key *k;
	struct htab_entry *e;
	size_t iter = 0, n;

	if (!pids)
		return 0;
	while ((k = stacks__next(st, &iter, &v)))
		htab__upsert(pids, &k->pid, sizeof(k->pid), htab__hash(&k->pid, sizeof(k->pid)),
			     &e);
	n = htab__count(pids);
	htab__free(pids);
	return n;
}

/*
 * -vv: the agent's memory at each step of the end of the run: VmRSS, and
 * VmHWM, the peak since the end began (the kernel's high-water mark is
 * reset at the first step, once the peak of the run so far is kept for the
 * summary's "peak RSS").
 */
static void close_rss(struct recorder *r, const char *step)
{
	long rss, hwm;

	if (log_level < 2)
		return;
	procfs__self_rss(&rss, &hwm);
	if (rss < 0)
		return;
	if (!r->hwm_run_kib) {
		int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);

		r->hwm_run_kib = hwm > 0 ? hwm : 1;
		/* 5: reset the peak RSS to the current RSS (Linux 4.0) */
		if (fd >= 0 && write(fd, "5", 1) == 1)
			hwm = rss;
		if (fd >= 0)
			close(fd);
	}
	pr_verbose("end of run: %s: RSS %ld KiB, peak since the end began %ld KiB (before: %ld "
		   "KiB), caches %.1f MiB",
		   step, rss, hwm, r->hwm_run_kib, membudget__used() / 1048576.0);
}

static bool any_kernel_frame(const struct stacks *st)
{
	const struct stack_key *k;
	const struct stack_vals *v;
	size_t it = 0;

	while ((k = stacks__next(st, &it, &v)))
		if (k->nkernel)
			return true;
	return false;
}

/*
 * The end of a run: the stacks symbolized once per distinct frame, built
 * into a profile (or, with -f chrome, the timeline) and written to -o.
 * nprocs and bs: for the summary. 0 or -errno (printed).
 */
int writeout__profile(struct recorder *r, size_t *nprocs, struct build_stats *bs)
{
	struct build_opts bo;
	struct profile *p = NULL;
	int err;

	build_opts_init(r, &bo);
	bo.time_ns = timespec_ns(&r->wall_start);
	bo.duration_ns = timespec_ns(&r->t_stop) - timespec_ns(&r->t_start);
	/* ~0.1 s of CPU to parse; a run whose stacks hold no kernel frame skips it */
	if (!env.no_kernel && (r->tl || any_kernel_frame(r->stacks))) {
		err = ksyms__load(&r->ks, NULL);
		if (err) {
			r->ks_err = err; /* the summary warns */
			r->ks = NULL;
		} else {
			pr_verbose("kernel symbols: %llu read from /proc/kallsyms",
				   (unsigned long long)ksyms__count(r->ks));
		}
	} else if (!env.no_kernel) {
		pr_verbose("kernel symbols: not read (no kernel frames)");
	}
	if (r->tl) { /* -f chrome: the timeline, not the aggregate */
		*nprocs = writeout__processes(r->stacks);
		/* file by file, as below: the timeline's stacks are the aggregate's */
		close_rss(r, "stacks aggregated");
		objtab__name_frames(r->objs, bo.lines != BUILD_LINES_NONE);
		close_rss(r, "frames named");
		err = tl_log__build(r->tl, r->objs, r->ks, &bo, bs, &r->st.written);
		if (!err)
			err = chrome__write(tl_log__timeline(r->tl), r->out.f);
		if (err) {
			pr_err("cannot write the trace: %s", strerror(-err));
			return err;
		}
		r->st.written_known = r->cpu_samples >= 0;
		if (r->cpu_ns >= 0) {
			const struct stack_vals *v;
			size_t it = 0;

			while (stacks__next(r->stacks, &it, &v))
				if (v->v[r->cpu_ns] > 0)
					r->st.written_cpu_ns += (uint64_t)v->v[r->cpu_ns];
		}
		return output__commit(&r->out);
	}
	/*
	 * File by file: each file's symbols (and DWARF) are loaded, its frames
	 * named into its memo, and freed before the next, so the end of a run
	 * holds one file's symbols at a time, not those of every file sampled.
	 */
	close_rss(r, "stacks aggregated");
	objtab__name_frames(r->objs, bo.lines != BUILD_LINES_NONE);
	close_rss(r, "frames named");
	err = profile__build(&p, r->stacks, r->objs, r->ks, &bo, bs);
	if (err) {
		pr_err("cannot build the profile: %s", strerror(-err));
		return err;
	}
	*nprocs = writeout__processes(r->stacks);
	/*
	 * What the profile interned is all the writer needs: the stacks, the
	 * names and the symbols go before it encodes, and the profile is
	 * charged to the budget (evictable caches make room for it).
	 */
	r->stacks_built = stacks__count(r->stacks);
	stacks__free(r->stacks);
	r->stacks = stacks__new();
	objtab__release(r->objs);
	r->mb_profile = (struct membudget_cache){ .name = "profile", .entries = p->nsamples };
	membudget__add(&r->mb_profile);
	membudget__charge(&r->mb_profile, (long long)profile__bytes(p));
	malloc_trim(0);
	close_rss(r, "profile built");
	count_written(r, p, bo.count_value);
	err = output__write_profile(
		&r->out, p, env.format,
		&(struct svg_opts){ .title = env.title, .inverted = env.inverted });
	close_rss(r, "profile written");
	membudget__charge(&r->mb_profile, -(long long)r->mb_profile.used);
	membudget__remove(&r->mb_profile);
	profile__free(p);
	if (err) {
		pr_err("cannot write the profile: %s", strerror(-err));
		return err;
	}
	return output__commit(&r->out);
}

/* The object table names the frames the aggregated stacks hold (objtab__name_frames). */
void writeout__init(struct recorder *r)
{
	objtab__set_frames(r->objs, stack_frames, r);
	objtab__set_debuginfod(r->objs, (uint64_t)(env.debuginfod_wait * 1e9));
	/* a stripped file's code named by its function's start, from the CFI */
	objtab__set_functions(r->objs, cfi__functions);
}
