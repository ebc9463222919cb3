// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a recording tells the user on stderr: the ready line once everything
 * is attached, and at the end the summary: what was taken and written, what
 * was lost and why (every counter family registered with
 * rec__add_counters()), each feature's lines, and with -v/-vv where the
 * agent's time and memory went.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "cli.h"
#include "collect/continuous.h"
#include "collect/pytrack.h"
#include "collect/record.h"
#include "collect/recorder.h"
#include "collect/report.h"
#include "collect/sampler.h"
#include "collect/sideband.h"
#include "collect/uprobes.h"
#include "cpu.skel.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/perfmap.h"
#include "unwind/tables.h"
#include "unwind/tcache.h"
#include "util/bpfmap.h"
#include "util/caps.h"
#include "util/clock.h"
#include "util/counters.h"
#include "util/log.h"
#include "util/membudget.h"
#include "util/procfs.h"
#include "util/tfile.h"

static size_t appendf(char *buf, size_t size, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t appendf(char *buf, size_t size, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= size)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(buf + at, size - at, fmt, ap);
	va_end(ap);
	return n < 0 ? at : at + n;
}

/*
 * Every event and probe is attached: say so, once (scripts wait for this
 * line before starting the work they measure).
 */
void report__ready_line(struct recorder *r)
{
	char what[512];
	size_t n = 0;
	const char *sep = "";
	int ncpus = r->sampler ? sampler__ncpus(r->sampler) : (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (env.ev_cpu)
		n = appendf(what, sizeof(what), n, "%scpu at %u Hz", sep, env.freq), sep = ", ";
	if (env.ev_off_cpu)
		n = appendf(what, sizeof(what), n, "%soff-cpu", sep), sep = ", ";
	if (env.ev_wall)
		n = appendf(what, sizeof(what), n, "%swall", sep), sep = ", ";
	if (env.ev_alloc)
		n = appendf(what, sizeof(what), n, "%sheap", sep), sep = ", ";
	if (env.ev_cuda)
		n = appendf(what, sizeof(what), n, "%scuda", sep), sep = ", ";
	if (env.cmd_argv)
		n = appendf(what, sizeof(what), n, " of '%s'", env.cmd_argv[0]);
	else if (env.npids == 1)
		n = appendf(what, sizeof(what), n, " of pid %d", (int)env.pids[0]);
	else if (env.npids)
		n = appendf(what, sizeof(what), n, " of %zu processes", env.npids);
	else if (env.container_arg)
		n = appendf(what, sizeof(what), n, " of container %s", env.container_arg);
	else if (env.cgroup_path)
		n = appendf(what, sizeof(what), n, " of cgroup %s", env.cgroup_path);
	else
		n = appendf(what, sizeof(what), n, " of every process");
	if (env.duration > 0)
		n = appendf(what, sizeof(what), n, " for %g s", env.duration);
	if (env.continuous_dir)
		appendf(what, sizeof(what), n, " into %s", env.continuous_dir);
	pr_info("recording %s (%d CPUs, %llu probes); Ctrl-C to stop", what, ncpus,
		(unsigned long long)uprobes__live());
}

/* CPU the unwind table builds took so far, and how many tables (built or failed) */
static void tables_cpu(const struct recorder *r, uint64_t *ns, uint64_t *n)
{
	const struct unwinder_stats *us = r->unw ? unwinder__stats(r->unw) : NULL;

	*ns = us ? us->build_cpu_ns : 0;
	*n = us ? us->tables + us->tables_failed : 0;
}

/* Likewise for the processes' mappings read from /proc (once per process, again after exec) */
static void maps_cpu(const struct recorder *r, uint64_t *ns, uint64_t *n)
{
	const struct proctab_stats *ps = proctab__stats(r->procs);

	*ns = ps->maps_cpu_ns;
	*n = ps->maps_read;
}

/* Likewise for the symbol tables read (once per file; again after an eviction) */
static void syms_cpu(const struct recorder *r, uint64_t *ns, uint64_t *n)
{
	const struct objtab_stats *os = objtab__stats(r->objs);

	*ns = os->syms_cpu_ns;
	*n = os->syms_loaded;
}

static double ru_secs(const struct rusage *ru)
{
	return ru->ru_utime.tv_sec + ru->ru_stime.tv_sec +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

int rec__add_counters(struct recorder *r, const struct counter_family *f, int map_fd)
{
	if (r->ncounters >= REC_MAX_COUNTERS)
		return -ENOSPC;
	r->counters[r->ncounters].f = f;
	r->counters[r->ncounters++].map_fd = map_fd;
	return 0;
}

/* Every registered family's counters, losses only or all, as one line's text. */
static void format_counters(struct recorder *r, char *buf, size_t len, bool losses_only)
{
	uint64_t v[64];

	buf[0] = '\0';
	for (uint32_t i = 0; i < r->ncounters; i++) {
		const struct counter_family *f = r->counters[i].f;
		uint32_t n = f->n < 64 ? f->n : 64;

		if (f->one_struct)
			bpfmap__percpu_sum(r->counters[i].map_fd, 0, v, n);
		for (uint32_t j = 0; !f->one_struct && j < n; j++)
			v[j] = bpfmap__percpu_counter(r->counters[i].map_fd, j);
		counters__format(buf, len, f, v, losses_only);
	}
}

uint64_t rec__counter(struct recorder *r, enum bpf_counter c)
{
	return bpfmap__percpu_counter(bpf_map__fd(r->skel->maps.counters), c);
}

/*
 * The median and 90th percentile of the walked samples' BPF time, from the
 * sample_hist buckets (linear within a bucket).
 */
static void sample_hist_quantiles(int fd, double *med, double *p90)
{
	static uint64_t h[SAMPLE_HIST_BUCKETS];
	uint64_t n = 0, acc = 0;
	double want[2], *out[2] = { med, p90 };
	uint32_t q = 0;

	for (uint32_t b = 0; b < SAMPLE_HIST_BUCKETS; b++) {
		h[b] = bpfmap__percpu_counter(fd, b);
		n += h[b];
	}
	if (!n)
		return;
	want[0] = n * 0.5;
	want[1] = n * 0.9;
	for (uint32_t b = 0; b < SAMPLE_HIST_BUCKETS && q < 2; b++) {
		double lo = sample_hist_floor(b);
		double hi = b + 1 < SAMPLE_HIST_BUCKETS ? sample_hist_floor(b + 1) : lo;

		while (q < 2 && h[b] && acc + h[b] >= want[q]) {
			*out[q] = lo + (hi - lo) * (want[q] - acc) / h[b];
			q++;
		}
		acc += h[b];
	}
}

/* Files opened for targets: what was refused (never read) and what was given back. */
static void print_files_summary(struct recorder *r)
{
	const struct tfile_stats *tf = tfile__stats();
	const struct objtab_stats *os = objtab__stats(r->objs);

	if (tf->refused_type || tf->refused_size || tf->refused_fuse || tf->changed ||
	    os->open_failed)
		pr_info("files: %llu refused (%llu not regular files, %llu of refused size, %llu on "
			"FUSE), %llu changed while read, %llu mapped files not opened",
			(unsigned long long)(tf->refused_type + tf->refused_size +
					     tf->refused_fuse),
			(unsigned long long)tf->refused_type, (unsigned long long)tf->refused_size,
			(unsigned long long)tf->refused_fuse, (unsigned long long)tf->changed,
			(unsigned long long)os->open_failed);
	if (membudget__evicted() || log_level >= 2) {
		const struct pytrack_stats *ps = r->py ? pytrack__stats(r->py) : NULL;
		char which[512];

		membudget__report(which, sizeof(which), 1);
		pr_info("memory: budget %.0f MiB for caches, %.1f MiB held at the end; %llu evicted "
			"(least recently used%s%s; elf symbols read again %llu, frames lost %llu; "
			"python line tables read again %llu, lost %llu)",
			membudget__get() / 1048576.0, membudget__used() / 1048576.0,
			(unsigned long long)membudget__evicted(), which[0] ? ": " : "", which,
			(unsigned long long)os->syms_reread, (unsigned long long)os->syms_lost,
			(unsigned long long)(ps ? ps->lines_reread : 0),
			(unsigned long long)(ps ? ps->lines_lost : 0));
	}
	if (os->reopen_failed)
		pr_info("files: %llu closed by the fd cap (%u) could not be opened again when "
			"needed (their mapping gone or replaced)",
			(unsigned long long)os->reopen_failed, os->fd_cap);
	pr_verbose("files: %llu opened (%llu by path: process gone), %llu closed after their "
		   "processes exited; fds %u at the end, at most %u (cap %u): %llu closed by the "
		   "cap, %llu opened again, %llu could not be",
		   (unsigned long long)os->opened, (unsigned long long)os->by_path,
		   (unsigned long long)os->closed, os->fds, os->fds_peak, os->fd_cap,
		   (unsigned long long)os->parked, (unsigned long long)os->reopened,
		   (unsigned long long)os->reopen_failed);
	objtab__debuginfod_report(r->objs);
}

/*
 * Start-up, recording and output apart, and the recording split into the
 * unwind tables built (once per binary met; a restart with the tables
 * cached builds none), the symbol tables read during the run (once per
 * file, for files of exited processes before their fds close), the
 * processes' mappings read from /proc (once per process: what a host
 * starting processes costs) and the rest, the steady state: samples, side
 * band, process descriptions written to BPF, Python reads. tools/cost.sh, tools/bench.sh and
 * tools/bench_realhost.sh read this line.
 */
static void print_cost(const struct recorder *r, const struct rusage *end)
{
	double rec = ru_secs(&r->ru_stop) - ru_secs(&r->ru_ready);
	double tab = (r->tables_cpu_stop - r->tables_cpu_ready) / 1e9;
	double syms = (r->syms_cpu_stop - r->syms_cpu_ready) / 1e9;
	double maps = (r->maps_cpu_stop - r->maps_cpu_ready) / 1e9;
	double rest = rec > tab + syms + maps ? rec - tab - syms - maps : 0;
	uint64_t n = r->st.received;
	const struct unwinder_stats *us = r->unw ? unwinder__stats(r->unw) : NULL;
	const struct objfile *big =
		us && us->build_cpu_max_obj ? objtab__by_id(r->objs, us->build_cpu_max_obj) : NULL;
	char costliest[PATH_MAX + 64] = "";

	if (big)
		snprintf(costliest, sizeof(costliest), "; costliest %s %.3f s", big->path,
			 us->build_cpu_max_ns / 1e9);
	pr_verbose("cost: start-up %.3f s CPU (%.3f user, %.3f sys), recording %.3f s CPU "
		   "(%.2f us per sample, %llu samples), output %.3f s CPU",
		   ru_secs(&r->ru_ready),
		   r->ru_ready.ru_utime.tv_sec + r->ru_ready.ru_utime.tv_usec / 1e6,
		   r->ru_ready.ru_stime.tv_sec + r->ru_ready.ru_stime.tv_usec / 1e6, rec,
		   n ? rec * 1e6 / n : 0.0, (unsigned long long)n,
		   ru_secs(end) - ru_secs(&r->ru_stop));
	pr_verbose("cost: recording = unwind tables %.3f s CPU (%llu files, once per binary%s) + "
		   "symbols %.3f s CPU (%llu files read) + mappings %.3f s CPU (%llu processes' "
		   "maps read) + steady %.3f s CPU (%.2f us per sample)",
		   tab, (unsigned long long)(r->tables_stop - r->tables_ready), costliest, syms,
		   (unsigned long long)(r->syms_stop - r->syms_ready), maps,
		   (unsigned long long)(r->maps_stop - r->maps_ready), rest,
		   n ? rest * 1e6 / n : 0.0);
}

int rec__warn(struct recorder *r, const char *remedy, const char *problem_fmt, ...)
{
	char *problem, *line, **w;
	va_list ap;
	int n;

	va_start(ap, problem_fmt);
	n = vasprintf(&problem, problem_fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	n = remedy && *remedy ? asprintf(&line, "%s: %s", problem, remedy)
			      : asprintf(&line, "%s", problem);
	free(problem);
	if (n < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->nwarnings; i++)
		if (!strcmp(r->warnings[i], line)) {
			free(line);
			return 0;
		}
	w = realloc(r->warnings, (r->nwarnings + 1) * sizeof(*w));
	if (!w) {
		free(line);
		return -ENOMEM;
	}
	r->warnings = w;
	r->warnings[r->nwarnings++] = line;
	return 0;
}

uint64_t rec__samples(const struct recorder *r)
{
	return r->st.written_known ? r->st.written : r->st.received - r->st.before_exec;
}

/* Each feature's warnings(), then every warning, one line each (not with -q). */
static void print_warnings(struct recorder *r)
{
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->warnings)
			r->feat[i]->warnings(r, r->feat_priv[i]);
	for (uint32_t i = 0; i < r->nwarnings; i++)
		pr_warn("%s", r->warnings[i]);
}

void report__free(struct recorder *r)
{
	for (uint32_t i = 0; i < r->nwarnings; i++)
		free(r->warnings[i]);
	free(r->warnings);
	r->warnings = NULL;
	r->nwarnings = 0;
}

/* Lost samples worth a warning: percent of the samples taken. */
#define LOST_WARN_SHARE 1.0
/* Frames without a name worth a warning (the summary line shows the share) */
#define UNRESOLVED_WARN_SHARE 10.0

/*
 * Files walked by frame pointers because the unwind tables had no room for
 * them: how much --unwind-mem the files sampled need.
 */
static void no_room_warning(struct recorder *r)
{
	const struct unwinder_stats *us = unwinder__stats(r->unw);
	uint64_t want = unwinder__rows_wanted(r->unw) * UNWIND_ROW_BYTES;
	uint64_t have = us->rows_cap * UNWIND_ROW_BYTES, mib = 1 << 20;
	uint64_t raise = (want > have ? want : have) + 16 * mib;
	char remedy[96];

	raise = (raise + 16 * mib - 1) / (16 * mib) * 16;
	snprintf(remedy, sizeof(remedy), "raise it to --unwind-mem %lluM",
		 (unsigned long long)raise);
	rec__warn(r, remedy,
		  "%llu of %llu samples (%.1f%%) were unwound with frame pointers in files the "
		  "unwind tables had no room for; the files sampled need %llu MiB of rows, "
		  "%s %llu MiB",
		  (unsigned long long)r->st.unwind_no_room, (unsigned long long)r->st.received,
		  r->st.received ? 100.0 * r->st.unwind_no_room / r->st.received : 0.0,
		  (unsigned long long)((want + mib - 1) / mib),
		  env.unwind_mem_given ? "--unwind-mem is"
				       : "the tables grew to their most (4 times --mem-budget, at "
					 "most a 32nd of the memory):",
		  (unsigned long long)(have / mib));
}

/*
 * A share of stacks cut short ([missing frames]): its main cause, from the
 * counters of where BPF's walks stopped, and what to do about it. A cause
 * nothing can be done about (a stack page not readable) gets no warning.
 */
static void missing_frames_warning(struct recorder *r, const struct build_stats *bs, double pct,
				   bool maps_denied)
{
	static const struct {
		const char *why, *remedy;
	} causes[] = {
		{ "most stopped in JIT-compiled code",
		  "have the JIT keep frame pointers and write a perf map (node "
		  "--perf-basic-prof, java -XX:+PreserveFramePointer, python3.12+ -X perf)" },
		{ "most stopped in code with neither unwind tables nor frame pointers",
		  "rebuild it with -fno-omit-frame-pointer or -fasynchronous-unwind-tables" },
		{ "most were taken as their processes started, before their unwind tables "
		  "were built",
		  "record for longer (-d), so that start-up weighs less" },
	};
	uint64_t n[3] = {
		rec__counter(r, CNT_UNW_ANON),
		rec__counter(r, CNT_UNW_BAD_FP) + rec__counter(r, CNT_UNW_NO_ROW) +
			rec__counter(r, CNT_UNW_UNSUPPORTED),
		rec__counter(r, CNT_UNW_TABLE_PENDING) + rec__counter(r, CNT_UNW_NO_MAPPING) +
			rec__counter(r, CNT_EARLY_MAP_LOST),
	};
	uint64_t unreadable = rec__counter(r, CNT_UNW_READ_FAILED);
	uint32_t top = 0;
	char why[512];

	for (uint32_t i = 1; i < 3; i++)
		if (n[i] > n[top])
			top = i;
	/* processes whose maps could not be read have no tables: that warning says why */
	if (!n[top] || unreadable > n[top] || (top == 2 && maps_denied))
		return;
	snprintf(why, sizeof(why), "%s", causes[top].why);
	/* no CFI, no frame pointer: name the file when one holds most of them */
	if (top == 1 && bs->stopped_file[0] &&
	    bs->stopped_file_samples * 2 >= r->st.dec.missing_frames)
		snprintf(why, sizeof(why),
			 "most stopped in %s, which has neither unwind tables nor frame pointers",
			 bs->stopped_file);
	rec__warn(r, causes[top].remedy,
		  "%.1f%% of samples (%llu of %llu) have [missing frames] where the stack walk "
		  "stopped: %s",
		  pct, (unsigned long long)r->st.dec.missing_frames,
		  (unsigned long long)r->st.dec.stacks, why);
}

/* Samples lost on the way to the profile (what the summary's "lost" counts). */
static uint64_t lost_samples(struct recorder *r)
{
	return rec__counter(r, CNT_RB_FULL) + r->st.agg_failed + r->st.bad + r->st.dec.bad +
	       r->st.unknown_kind;
}

/*
 * -v: the account behind the summary: why samples were lost, the CPU time,
 * every stage's counters, each feature's lines, files, memory, cost.
 */
static void detail(struct recorder *r, const struct build_stats *bs)
{
	char line[2048];
	struct rusage ru;

	pr_info("lost: ring buffer full %llu, table full %llu, malformed %llu; side-band "
		"records lost %llu",
		(unsigned long long)rec__counter(r, CNT_RB_FULL),
		(unsigned long long)r->st.agg_failed,
		(unsigned long long)(r->st.bad + r->st.dec.bad + r->st.unknown_kind),
		(unsigned long long)sideband__stats(r->sb)->lost);
	{
		const struct sideband_stats *ss = sideband__stats(r->sb);

		pr_verbose("side band: %llu records read, records of other processes skipped %llu "
			   "(%s; %llu verdicts asked); %llu leaders exited before their "
			   "process's other threads",
			   (unsigned long long)ss->records, (unsigned long long)ss->skipped,
			   env.npids || env.cmd_argv ? "-p/-- CMD targets kept"
			   : env.cgroup_path	     ? "the cgroup's processes kept"
						     : "every process kept",
			   (unsigned long long)ss->lookups, (unsigned long long)ss->leader_exits);
	}
	if (r->cpu_ns >= 0 && r->st.written_known)
		pr_info("cpu time: %.3f s (each sample weighs its thread's CPU time since the "
			"thread's previous sample, by the kernel's account; %llu threads' first "
			"samples weigh 1/%u s each)",
			r->st.written_cpu_ns / 1e9,
			(unsigned long long)rec__counter(r, CNT_CPU_FIRST), env.freq);
	if (r->st.dec.kstack_err || r->st.dec.ustack_err || r->st.dec.ktrunc || r->st.dec.utrunc)
		pr_info("stacks: %llu kernel and %llu user unreadable; %llu kernel and %llu user "
			"truncated at %d/%d frames",
			(unsigned long long)r->st.dec.kstack_err,
			(unsigned long long)r->st.dec.ustack_err,
			(unsigned long long)r->st.dec.ktrunc, (unsigned long long)r->st.dec.utrunc,
			MAX_KSTACK, MAX_USTACK);
	if (r->unw && (r->st.dec.no_unwind_info || r->st.dec.unwind_stopped))
		pr_info("unwinding: %llu samples before their process's tables were ready (%llu "
			"walked with frame pointers), %llu stopped early (no row %llu, unsupported "
			"rule %llu, unreadable stack %llu, JIT/anonymous code %llu, no mapping %llu)",
			(unsigned long long)r->st.dec.no_unwind_info,
			(unsigned long long)r->st.dec.unwind_fp,
			(unsigned long long)r->st.dec.unwind_stopped,
			(unsigned long long)rec__counter(r, CNT_UNW_NO_ROW),
			(unsigned long long)rec__counter(r, CNT_UNW_UNSUPPORTED),
			(unsigned long long)rec__counter(r, CNT_UNW_READ_FAILED),
			(unsigned long long)rec__counter(r, CNT_UNW_ANON),
			(unsigned long long)rec__counter(r, CNT_UNW_NO_MAPPING));
	if (r->jit && (perfmaps__stats(r->jit)->files || perfmaps__stats(r->jit)->missed)) {
		const struct perfmap_stats *js = perfmaps__stats(r->jit);

		pr_info("jit: %llu perf maps read (%llu entries, %llu bad lines); %llu frames named "
			"from them, %llu in anonymous code no map names",
			(unsigned long long)js->files, (unsigned long long)js->entries,
			(unsigned long long)js->bad, (unsigned long long)js->found,
			(unsigned long long)js->missed);
		pr_info("jit: %.1f MiB of perf maps parsed in %.3f s, %llu reads put off (a "
			"map's share of time), %llu maps replaced, %llu read no further (%llu "
			"past their share of --mem-budget, %llu past 64 MiB), %llu refused (not "
			"their process's own regular file)",
			js->bytes / 1048576.0, js->read_ns / 1e9, (unsigned long long)js->deferred,
			(unsigned long long)js->replaced,
			(unsigned long long)(js->over_budget + js->capped),
			(unsigned long long)js->over_budget, (unsigned long long)js->capped,
			(unsigned long long)js->refused);
	}
	if (r->st.dec.missing_frames)
		pr_info("unwinding: %llu samples with a [missing frames] marker where the walk "
			"stopped (reasons above)",
			(unsigned long long)r->st.dec.missing_frames);
	if (r->st.dec.unwind_heuristic)
		pr_info("unwinding: %llu samples with frames reached by a frame-pointer step where "
			"the tables had no row (%llu steps; pprof label unwind=heuristic)",
			(unsigned long long)r->st.dec.unwind_heuristic,
			(unsigned long long)rec__counter(r, CNT_UNW_FP_FALLBACK));
	if (r->unw && r->st.dec.user_samples) {
		const struct unwinder_stats *us = unwinder__stats(r->unw);
		uint64_t n = r->st.dec.user_samples, fp = r->st.dec.user_fp + r->st.unwind_no_room;
		uint64_t room = r->st.unwind_no_room + r->st.unwind_partial_gap;

		if (fp > n)
			fp = n;
		if (room > n)
			room = n;
		pr_info("unwinding: %.1f%% of samples with user frames had their tables' room (%llu "
			"had a frame in a file without room, %llu in a huge file's function not in "
			"its partial table yet); %.1f%% walked by tables alone (%llu of %llu: a "
			"frame-pointer step where code has no CFI, a table was not ready yet, "
			"anonymous code); rows %.0f of at most %.0f MiB (%llu chunks added)",
			100.0 * (n - room) / n, (unsigned long long)r->st.unwind_no_room,
			(unsigned long long)r->st.unwind_partial_gap, 100.0 * (n - fp) / n,
			(unsigned long long)(n - fp), (unsigned long long)n,
			us->rows_cap * UNWIND_ROW_BYTES / 1048576.0,
			us->rows_max * UNWIND_ROW_BYTES / 1048576.0,
			(unsigned long long)us->chunks_added);
	}
	print_files_summary(r);
	if (r->unw && unwinder__stats(r->unw)->partial_made) {
		const struct unwinder_stats *us = unwinder__stats(r->unw);

		pr_info("unwinding: %llu huge files with partial tables (%llu of their %llu "
			"functions in %llu rows at the end; %llu made whole once room appeared); "
			"%llu samples (%.1f%%) had a frame in a function not in them yet, walked on "
			"by frame pointers",
			(unsigned long long)us->partial_made, (unsigned long long)us->partial_fdes,
			(unsigned long long)us->partial_fdes_total,
			(unsigned long long)us->partial_rows, (unsigned long long)us->partial_whole,
			(unsigned long long)r->st.unwind_partial_gap,
			r->st.received ? 100.0 * r->st.unwind_partial_gap / r->st.received : 0.0);
	}
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->summary)
			r->feat[i]->summary(r, r->feat_priv[i], stderr);
	/* every loss counter BPF keeps, from the tables in include/bpfprof.h */
	format_counters(r, line, sizeof(line), true);
	if (*line)
		pr_info("losses: %s", line);
	if (log_level >= 2) {
		const struct proctab_stats *ps = proctab__stats(r->procs);
		long rss, hwm;

		getrusage(RUSAGE_SELF, &ru);
		pr_verbose("event %s on %d CPUs at %u Hz; idle %llu, filtered out %llu, children "
			   "followed %llu, command's records before its exec %llu",
			   r->sampler ? sampler__event_name(r->sampler) : "none",
			   r->sampler ? sampler__ncpus(r->sampler) : 0, env.freq,
			   (unsigned long long)rec__counter(r, CNT_IDLE),
			   (unsigned long long)rec__counter(r, CNT_FILTERED),
			   (unsigned long long)rec__counter(r, CNT_FORK_FOLLOWED),
			   (unsigned long long)r->st.before_exec);
		pr_verbose("%zu distinct stacks, %llu distinct frames, %u files (%llu without "
			   "symbols), %llu user frames outside known mappings",
			   r->stacks_built ? r->stacks_built : stacks__count(r->stacks),
			   (unsigned long long)bs->distinct_frames, objtab__count(r->objs),
			   (unsigned long long)bs->objects_without_symbols,
			   (unsigned long long)r->st.dec.user_unmapped);
		pr_verbose(
			"processes: %llu generations, %llu maps reads (%llu failed); side band: "
			"%llu forks, %llu execs, %llu exits, %llu mmaps; %llu sampled after their "
			"pid's last known exit",
			(unsigned long long)ps->procs, (unsigned long long)ps->maps_read,
			(unsigned long long)ps->maps_read_failed, (unsigned long long)ps->forks,
			(unsigned long long)ps->execs, (unsigned long long)ps->exits,
			(unsigned long long)ps->mmaps, (unsigned long long)ps->unseen);
		if (r->unw) {
			const struct unwinder_stats *us = unwinder__stats(r->unw);

			pr_verbose(
				"unwind tables: %llu files (%llu without, %llu shared with identical files), "
				"%llu rows in use, peak %llu of %llu (%.1f MiB), %llu evicted (%llu built "
				"again), "
				"%llu refused for room (%llu built later), %.1f ms compiling CFI, "
				"%llu processes, %llu files left out of file_unwind (full), "
				"%llu tables from the table cache; %llu huge files, %llu with partial "
				"tables (grown %llu times, %llu made whole once room appeared, "
				"%llu rows)",
				(unsigned long long)us->tables,
				(unsigned long long)us->tables_failed,
				(unsigned long long)us->tables_shared,
				(unsigned long long)us->rows_used,
				(unsigned long long)us->rows_peak, (unsigned long long)us->rows_cap,
				us->rows_peak * sizeof(struct bpf_urow) / 1048576.0,
				(unsigned long long)us->tables_evicted,
				(unsigned long long)us->tables_rebuilt,
				(unsigned long long)us->tables_refused,
				(unsigned long long)us->tables_retried, us->build_ns / 1e6,
				(unsigned long long)us->procs,
				(unsigned long long)us->files_unlisted,
				(unsigned long long)us->tables_cached,
				(unsigned long long)us->partial_files,
				(unsigned long long)us->partial_made,
				(unsigned long long)us->partial_grown,
				(unsigned long long)us->partial_whole,
				(unsigned long long)us->partial_rows);
		}
		if (r->tcache) {
			const struct tcache_stats *cs = tcache__stats(r->tcache);

			pr_verbose("unwind table cache %s: %llu loaded, %llu missed, %llu stored "
				   "(%llu failed), %llu invalid (deleted), %llu evicted; %llu "
				   "files, %.1f MiB; %llu digests known (not hashed again)",
				   env.unwind_cache, (unsigned long long)cs->hits,
				   (unsigned long long)cs->misses, (unsigned long long)cs->stored,
				   (unsigned long long)cs->store_failed,
				   (unsigned long long)cs->invalid, (unsigned long long)cs->evicted,
				   (unsigned long long)cs->files, cs->bytes / 1048576.0,
				   (unsigned long long)cs->digests_known);
		}
		if (r->stats_fd >= 0) {
			struct bpf_prog_info info = { 0 };
			uint32_t len = sizeof(info);

			int cfd = bpf_map__fd(r->skel->maps.counters);
			uint64_t runs = bpfmap__percpu_counter(cfd, CNT_SAMPLES);
			uint64_t left = bpfmap__percpu_counter(cfd, CNT_FILTERED) +
					bpfmap__percpu_counter(cfd, CNT_IDLE);
			uint64_t walked = runs > left ? runs - left : 0;

			/* the cost figures tools/cost.sh and tools/bench.sh quote */
			if (walked) {
				double med = 0, p90 = 0;

				sample_hist_quantiles(bpf_map__fd(r->skel->maps.sample_hist), &med,
						      &p90);
				pr_verbose("BPF: %.0f ns per walked sample, median %.0f ns, 90th "
					   "percentile %.0f ns (%llu samples timed in BPF; every "
					   "stack walk and the output included)",
					   (double)bpfmap__percpu_counter(cfd, CNT_SAMPLE_NS) /
						   walked,
					   med, p90, (unsigned long long)walked);
			}
			if (!bpf_obj_get_info_by_fd(bpf_program__fd(r->skel->progs.on_cpu_sample),
						    &info, &len) &&
			    info.run_cnt)
				pr_verbose(
					"BPF: %.0f ns per run (%llu runs), %.0f ns per recorded "
					"sample (all runs' time over recorded samples), %.0f bytes "
					"per sample to user space",
					(double)info.run_time_ns / info.run_cnt,
					(unsigned long long)info.run_cnt,
					r->st.received ? (double)info.run_time_ns / r->st.received
						       : 0.0,
					r->st.received ? (double)r->st.bytes / r->st.received
						       : 0.0);
		}
		format_counters(r, line, sizeof(line), false);
		pr_verbose("counters: %s", *line ? line : "none");
		/*
		 * The agent's own peak: VmHWM, not ru_maxrss (which holds the
		 * peak of whatever forked and exec'd us: a 150 MiB pytest
		 * read as a 150 MiB agent), and the run's part of it, kept
		 * when the end of the run reset the kernel's (close_rss).
		 */
		procfs__self_rss(&rss, &hwm);
		if (hwm < 0)
			hwm = ru.ru_maxrss;
		pr_verbose("agent: %.3f s user, %.3f s sys, %.2f us per sample, peak RSS %ld KiB",
			   ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
			   ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
			   r->st.received ? ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
					     ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
						    r->st.received
					  : 0.0,
			   hwm > r->hwm_run_kib ? hwm : r->hwm_run_kib);
		print_cost(r, &ru);
	}
}

/* A path as one shell word: quoted unless it is only [A-Za-z0-9_./+,:@%=-]. */
static void shell_word(char *buf, size_t len, const char *s)
{
	size_t o = 0;

	static const char plain[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+,:@%=-";

	if (*s && !s[strspn(s, plain)]) {
		snprintf(buf, len, "%s", s);
		return;
	}
	for (const char *p = s; *p && o + 5 < len; p++) {
		if (o == 0)
			buf[o++] = '\'';
		if (*p == '\'') { /* ' -> '\'' */
			memcpy(buf + o, "'\\''", 4);
			o += 4;
			continue;
		}
		buf[o++] = *p;
	}
	if (!o)
		buf[o++] = '\'';
	buf[o++] = '\'';
	buf[o] = '\0';
}

/*
 * The file -o wrote, or the regular file stdout was redirected to (a
 * pipe or terminal has its reader already): NULL when there is none.
 */
static const char *written_path(const struct recorder *r, char *buf, size_t len)
{
	struct stat st;
	ssize_t n;

	(void)r;
	if (env.output && strcmp(env.output, "-")) /* a device (-o /dev/null) is no file to open */
		return !stat(env.output, &st) && S_ISREG(st.st_mode) ? env.output : NULL;
	if (fstat(STDOUT_FILENO, &st) || !S_ISREG(st.st_mode))
		return NULL;
	n = readlink("/proc/self/fd/1", buf, len - 1);
	if (n <= 0 || buf[0] != '/')
		return NULL;
	buf[n] = '\0';
	return buf;
}

/* "bpfprof: wrote run.pb.gz (pprof): go tool pprof -http : run.pb.gz" */
static void print_written(struct recorder *r)
{
	static const char *const kinds[] = {
		[FMT_FOLDED] = "folded stacks",
		[FMT_PPROF] = "pprof",
		[FMT_CHROME] = "Chrome trace",
		[FMT_SVG] = "flame graph",
	};
	char buf[PATH_MAX], w[2 * PATH_MAX], svg[2 * PATH_MAX + 8], base[PATH_MAX];
	const char *path = written_path(r, buf, sizeof(buf));
	size_t n;

	if (!path)
		return;
	if (!rec__samples(r)) { /* nothing to look at */
		pr_info("wrote %s (%s, empty)", path, kinds[env.format]);
		return;
	}
	shell_word(w, sizeof(w), path);
	switch (env.format) {
	case FMT_PPROF:
		pr_info("wrote %s (pprof): go tool pprof -http : %s", path, w);
		break;
	case FMT_SVG:
		pr_info("wrote %s (flame graph): open it in a web browser", path);
		break;
	case FMT_CHROME:
		pr_info("wrote %s (Chrome trace): open it in https://ui.perfetto.dev or "
			"chrome://tracing",
			path);
		break;
	default: /* folded: drawn by us or flamegraph.pl */
		snprintf(base, sizeof(base), "%s", path);
		n = strlen(base);
		if (n > 7 && !strcmp(base + n - 7, ".folded"))
			base[n - 7] = '\0';
		else if (n > 4 && !strcmp(base + n - 4, ".txt"))
			base[n - 4] = '\0';
		strncat(base, ".svg", sizeof(base) - strlen(base) - 1);
		shell_word(svg, sizeof(svg), base);
		pr_info("wrote %s (folded stacks): bpfprof flamegraph %s -o %s (or flamegraph.pl %s "
			"> %s)",
			path, w, svg, w, svg);
	}
}

/*
 * The recorder's own warnings (the features add theirs in warnings()): what
 * changes the answer, past its threshold, with the remedy.
 */
static void recorder_warnings(struct recorder *r, const struct build_stats *bs)
{
	uint64_t n = rec__samples(r), rb_full = rec__counter(r, CNT_RB_FULL);
	uint64_t stacks = r->st.dec.stacks, missing = r->st.dec.missing_frames;
	const struct objtab_stats *os = objtab__stats(r->objs);
	const struct pytrack_stats *ps = r->py ? pytrack__stats(r->py) : NULL;
	uint64_t unnamed = os->syms_lost + (ps ? ps->lines_lost : 0);
	uint64_t denied = proctab__stats(r->procs)->maps_read_denied;
	char remedy[256], why[256];

	if (rb_full && 100.0 * rb_full / (n + rb_full) >= LOST_WARN_SHARE) {
		snprintf(remedy, sizeof(remedy), "lower -F (now %u Hz) or raise --ring-mb (now %u)",
			 env.freq, env.ringbuf_bytes >> 20);
		rec__warn(r, remedy,
			  "%.1f%% of samples (%llu of %llu) were lost: they came faster than "
			  "bpfprof read them",
			  100.0 * rb_full / (n + rb_full), (unsigned long long)rb_full,
			  (unsigned long long)(n + rb_full));
	}
	/* a share of a handful is noise: a command's first sample is often its only one */
	if (missing >= 10 && 100.0 * missing / stacks >= REC_WARN_SHARE)
		missing_frames_warning(r, bs, 100.0 * missing / stacks, denied > 0);
	if (denied && caps__missing(CAPS_PTRACE))
		rec__warn(r, caps__why(EACCES, CAPS_PTRACE, why, sizeof(why)) + 2,
			  "%llu processes' memory maps could not be read (other users' "
			  "processes): their native frames have no names and their stacks are "
			  "cut short",
			  (unsigned long long)denied);
	if (r->ks_err)
		rec__warn(
			r,
			caps__missing(CAPS_SYSLOG)
				? caps__why(EPERM, CAPS_SYSLOG, why, sizeof(why)) + 2
				: "allow it with sysctl kernel.kptr_restrict=1",
			"kernel frames have no names: /proc/kallsyms gave bpfprof no addresses (%s)",
			strerror(-r->ks_err));
	if (r->unw && r->st.unwind_no_room)
		no_room_warning(r);
	if (stacks__refused()) {
		snprintf(remedy, sizeof(remedy), "raise --mem-budget (now %.0f MiB)",
			 membudget__get() / 1048576.0);
		rec__warn(r, remedy,
			  "%llu samples were lost: their %llu distinct stacks did not fit in the "
			  "stack table, which may hold half of --mem-budget",
			  (unsigned long long)r->st.agg_failed,
			  (unsigned long long)stacks__refused());
	}
	if (objtab__debuginfod_late(r->objs)) {
		snprintf(remedy, sizeof(remedy), "raise --debuginfod-wait (now %g s)",
			 env.debuginfod_wait);
		rec__warn(r, remedy,
			  "%llu debug files were still coming from debuginfod at the end: their "
			  "functions are named module+0x...",
			  (unsigned long long)objtab__debuginfod_late(r->objs));
	}
	if (unnamed) {
		snprintf(remedy, sizeof(remedy), "raise --mem-budget (now %.0f MiB)",
			 membudget__get() / 1048576.0);
		rec__warn(r, remedy,
			  "%llu frames have no name: their symbols or line tables were given "
			  "back to the memory budget before the frames were named",
			  (unsigned long long)unnamed);
	}
	/* a user-space file (not [kernel.kallsyms] or [vdso]): a debug package names it */
	if (n >= 10 && bs->frames && 100.0 * bs->unresolved / bs->frames >= UNRESOLVED_WARN_SHARE &&
	    bs->unresolved_file[0] && bs->unresolved_file[0] != '[')
		rec__warn(
			r,
			getenv("DEBUGINFOD_URLS") && *getenv("DEBUGINFOD_URLS")
				? "install its debug symbols (Debian: its -dbgsym or -dbg package; "
				  "bpfprof finds them by build id)"
				: "install its debug symbols (Debian: its -dbgsym or -dbg package; "
				  "bpfprof finds them by build id), or set DEBUGINFOD_URLS to a "
				  "debuginfod server that has them",
			"%.1f%% of frames have no name (module+0x... in the profile), %s in %s",
			100.0 * bs->unresolved / bs->frames,
			bs->unresolved_file_frames * 2 >= bs->unresolved ? "most of them"
									 : "the most of any file",
			bs->unresolved_file);
	if (r->jit && perfmaps__stats(r->jit)->refused)
		rec__warn(r,
			  "a JIT's map must be its own regular file in its /tmp, as perf requires "
			  "(not a symlink, not another user's file)",
			  "JIT frames of %llu processes are not named: their perf maps were not "
			  "read, not being their process's own regular file",
			  (unsigned long long)perfmaps__stats(r->jit)->refused);
	if (r->cpu_samples >= 0 && !n && !r->mode->view && !r->cont) {
		snprintf(remedy, sizeof(remedy),
			 "record for longer (-d) or more often (-F, now %u Hz)", env.freq);
		rec__warn(r, remedy, "no CPU samples: %s did not run on a CPU while recording",
			  env.cmd_argv ? "the command"
			  : env.npids  ? "the processes -p names"
				       : "the targets");
	}
}

/*
 * At the end of the run, by default: samples and processes, what was written
 * where and how to open it, the command's status if it failed; then the
 * warnings. -v adds the whole account (detail) before the warnings.
 */
void report__summary(struct recorder *r, const struct build_stats *bs, size_t nprocs)
{
	double secs = (timespec_ns(&r->t_stop) - timespec_ns(&r->t_start)) / 1e9;
	uint64_t n = rec__samples(r);

	pr_info("%llu %s, %llu lost, %zu %s, %.1f%% frames unresolved, %.1f s",
		(unsigned long long)n, n == 1 ? "sample" : "samples",
		(unsigned long long)lost_samples(r), nprocs, nprocs == 1 ? "process" : "processes",
		bs->frames ? 100.0 * bs->unresolved / bs->frames : 0.0, secs);
	if (r->cont)
		continuous__summary(r->cont);
	else if (!r->mode->view)
		print_written(r);
	if (r->child > 0 && r->child_done &&
	    (!WIFEXITED(r->child_status) || WEXITSTATUS(r->child_status)))
		pr_info("command '%s' %s %d", env.cmd_argv[0],
			WIFEXITED(r->child_status) ? "exited with status" : "killed by signal",
			WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status)
						   : WTERMSIG(r->child_status));
	if (log_level >= 2)
		detail(r, bs);
	recorder_warnings(r, bs);
	print_warnings(r);
}

/*
 * The ready line is next: the agent's CPU so far (start-up) and the
 * tables, symbols and maps read by then, which the recording's cost leaves
 * out (-v "cost:"); -v says where start-up went. su_start: the features'
 * start() CPU seconds.
 */
void report__mark_ready(struct recorder *r, double su_start)
{
	getrusage(RUSAGE_SELF, &r->ru_ready);
	tables_cpu(r, &r->tables_cpu_ready, &r->tables_ready);
	syms_cpu(r, &r->syms_cpu_ready, &r->syms_ready);
	maps_cpu(r, &r->maps_cpu_ready, &r->maps_ready);
	/* where start-up goes (issue 17: -a should take <= 0.1 s CPU before the first sample) */
	pr_verbose("start-up: %.3f s CPU: CPU object open+load+verify %.3f s, features (heap, "
		   "off-CPU, CUDA objects, probes) %.3f s + start %.3f s, the rest (libraries, "
		   "side band, tables for -p targets, perf events) %.3f s",
		   ru_secs(&r->ru_ready), r->su_load, r->su_features, su_start,
		   ru_secs(&r->ru_ready) - r->su_load - r->su_features - su_start);
}

/* The recording stopped: its CPU, tables, symbols and maps up to here. */
void report__mark_stop(struct recorder *r)
{
	getrusage(RUSAGE_SELF, &r->ru_stop);
	tables_cpu(r, &r->tables_cpu_stop, &r->tables_stop);
	syms_cpu(r, &r->syms_cpu_stop, &r->syms_stop);
	maps_cpu(r, &r->maps_cpu_stop, &r->maps_stop);
}
