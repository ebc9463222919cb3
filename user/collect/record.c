// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The life of one recording: open and size the BPF objects, start the side
 * band and the target, attach one sampling event per CPU, then drain the ring
 * buffer into the stack table until the duration ends, the command exits or
 * a signal arrives; finally symbolize once per distinct frame, write, and
 * print what was taken and what was lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "aggregate/timeline_log.h"
#include "cli.h"
#include "collect/command.h"
#include "collect/continuous.h"
#include "collect/decode_ops.h"
#include "collect/pytrack.h"
#include "collect/record.h"
#include "collect/recorder.h"
#include "collect/report.h"
#include "collect/sampler.h"
#include "collect/setup.h"
#include "collect/sideband.h"
#include "collect/writeout.h"
#include "cpu.skel.h"
#include "proc/cgroup.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/ksyms.h"
#include "symbolize/perfmap.h"
#include "unwind/tables.h"
#include "unwind/tcache.h"
#include "util/caps.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"
#include "write/output.h"

/* CFI compiling per loop turn: the rest of the wanted tables waits a turn */
#define BALANCE_NS     (20 * 1000000ULL)
#define SIDEBAND_PAGES 64
/*
 * The ring buffer wakes us only when a quarter full; otherwise it is drained
 * this often. Latency here only delays building a new process's unwind
 * tables; nothing is lost to it.
 */
#define POLL_MS		100
#define HOUSEKEEPING_NS (1000 * 1000000ULL)
#define GC_AFTER_NS	(5000 * 1000000ULL)
#define TRIM_NS		(10000 * 1000000ULL)

static volatile sig_atomic_t exiting;
static volatile sig_atomic_t got_signal;
static volatile sig_atomic_t child_changed;
static volatile sig_atomic_t new_interval; /* SIGHUP in continuous mode */
static bool final_drain;		   /* the events are off: read the ring buffer to its end */

static void on_signal(int sig)
{
	if (sig == SIGCHLD) {
		child_changed = 1;
		return;
	}
	if (sig == SIGHUP) {
		new_interval = 1;
		return;
	}
	got_signal = sig;
	exiting = 1;
}

void rec__want_sync(struct recorder *r, uint32_t pid)
{
	struct htab_entry *e;

	if (r->unw || r->py)
		htab__upsert(r->dirty, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
}

bool rec__is_target(struct recorder *r, uint32_t pid)
{
	uint32_t v;

	return env.all || !bpf_map_lookup_elem(bpf_map__fd(r->skel->maps.targets), &pid, &v);
}

/*
 * Whole machine: a process whose executable (its first file mapping) has a
 * table already, as the next process of a binary that ran before does, is
 * described at exec, not at its first sample (which would be walked by
 * frame pointers).
 */
static bool exe_has_table(struct recorder *r, uint32_t pid)
{
	struct proc *p = proctab__lookup(r->procs, pid, 0);

	for (uint32_t i = 0; p && i < p->nmaps; i++)
		if (p->maps[i].obj >= OBJ_FIRST)
			return unwinder__ready(r->unw, p->maps[i].obj);
	return false;
}

/* The process table changed: keep the BPF unwinder's view of the process in step. */
static void on_proc_change(void *ctx, uint32_t pid, int change)
{
	struct recorder *r = ctx;

	if (change == PROC_EXECED && r->child > 0 && pid == (uint32_t)r->child &&
	    !r->child_exec_ns) {
		struct proc *p = proctab__lookup(r->procs, pid, 0);

		r->child_exec_ns = p && p->start_ns ? p->start_ns : 1;
	}
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->on_proc)
			r->feat[i]->on_proc(r, r->feat_priv[i], pid, change);
	if (change == PROC_FORKED || (!r->unw && !r->py))
		return;
	if (change == PROC_EXITED) {
		if (r->unw)
			unwinder__forget(r->unw, pid);
		htab__delete(r->dirty, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	} else if ((r->unw && unwinder__has(r->unw, pid)) ||
		   (r->py && pytrack__seen(r->py, pid) && !pytrack__is_python(r->py, pid)) ||
		   (change == PROC_EXECED && !env.all && rec__is_target(r, pid)) ||
		   (env.all && r->unw && exe_has_table(r, pid))) {
		/* targets get tables at exec, before their first sample */
		rec__want_sync(r, pid);
	}
}

/* Write the unwind descriptions of processes marked dirty. */
static void sync_dirty(struct recorder *r)
{
	struct htab_entry *e;
	size_t it = 0;

	if ((!r->unw && !r->py) || !htab__count(r->dirty))
		return;
	while ((e = htab__next(r->dirty, &it))) {
		uint32_t pid = *(const uint32_t *)e->key;
		struct proc *p = proctab__lookup(r->procs, pid, 0);

		if (!p || p->exited)
			continue;
		if (r->unw && unwinder__sync(r->unw, p))
			pr_debug("pid %u: cannot write its unwind info", pid);
		if (r->py)
			pytrack__sync(r->py, p);
	}
	htab__free(r->dirty);
	r->dirty = htab__new(64, HTAB_COPY_KEYS);
}

/* One ring buffer record: check the header, hand it to whoever owns its kind. */
static int handle_record(void *ctx, void *data, size_t size)
{
	struct recorder *r = ctx;
	const struct prof_sample_hdr *h = data;

	/*
	 * Ctrl-C while the buffer refills as fast as it is read (a loaded host):
	 * ring_buffer__consume() reads until it is empty, so the stop waited
	 * minutes. Stop here; what is left is read once the events are off.
	 */
	if (exiting && !final_drain)
		return -EINTR;
	r->st.received++;
	r->st.bytes += size;
	if (size < sizeof(*h)) {
		r->st.bad++;
		return 0;
	}
	if (r->child > 0 && h->pid == (uint32_t)r->child) {
		/* -- CMD: between fork and exec the child is still bpfprof's code */
		if (!r->child_exec_ns)
			sideband__consume(r->sb);
		/* no exec seen (side band lost it?): judge by the process name */
		if (r->child_exec_ns ? h->time_ns < r->child_exec_ns
				     : !strncmp(h->pcomm, program_invocation_short_name,
						sizeof(h->pcomm) - 1)) {
			r->st.before_exec++;
			return 0;
		}
	}
	for (uint32_t i = 0; i < r->nfeat; i++)
		for (const uint16_t *k = r->feat[i]->kinds; *k; k++)
			if (*k == h->kind) {
				r->feat[i]->on_record(r, r->feat_priv[i], h, data, size);
				return 0;
			}
	r->st.unknown_kind++;
	return 0;
}

int rec__value(struct recorder *r, const char *type, const char *unit)
{
	for (uint32_t i = 0; i < r->nvalues; i++)
		if (!strcmp(r->values[i].type, type) && !strcmp(r->values[i].unit, unit))
			return i;
	if (r->nvalues >= STACK_MAX_VALUES)
		return -ENOSPC;
	r->values[r->nvalues] = (struct pvaluetype){ .type = type, .unit = unit };
	return r->nvalues++;
}

void rec__default_value(struct recorder *r, int idx)
{
	if (idx >= 0 && (uint32_t)idx < r->nvalues)
		r->default_value = idx;
}

void rec__stop(struct recorder *r)
{
	(void)r;
	exiting = 1;
}

uint64_t rec__start_ns(const struct recorder *r)
{
	return timespec_ns(&r->t_start);
}

static int install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: epoll_wait must return so that we notice */
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL) ||
	    sigaction(SIGCHLD, &sa, NULL) || (env.continuous_dir && sigaction(SIGHUP, &sa, NULL)))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

/*
 * After set-up: -p targets' descriptions written before the first sample,
 * the fork/exit tracepoints attached, the ring buffer and side band polled.
 */
static int open_stream(struct recorder *r)
{
	int err;

	if (r->unw || r->py) {
		for (size_t i = 0; i < env.npids; i++)
			rec__want_sync(r, env.pids[i]);
		sync_dirty(r);
	}
	err = cpu_bpf__attach(r->skel); /* fork/exit tracepoints */
	if (err) {
		pr_err("cannot attach the BPF tracepoints: %s", strerror(-err));
		return err;
	}
	r->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.events), handle_record, r, NULL);
	if (!r->rb) {
		err = -errno;
		pr_err("cannot create the ring buffer: %s", strerror(-err));
		return err;
	}
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0 || epoll_add(r->epfd, ring_buffer__epoll_fd(r->rb)) ||
	    epoll_add(r->epfd, sideband__epoll_fd(r->sb))) {
		err = -errno;
		pr_err("cannot set up epoll: %s", strerror(-err));
		return err;
	}
	return 0;
}

/*
 * Once a second: files that only exited processes mapped are closed (their
 * fds would keep deleted files' disk space, and fds pile up on a busy host).
 */
static void housekeeping(struct recorder *r, uint64_t *last_ns)
{
	uint64_t now = mono_ns();

	if (now - *last_ns < HOUSEKEEPING_NS)
		return;
	*last_ns = now;
	/* samples are read within 100 ms of being taken: 5 s after an exit nobody needs it */
	if (now > GC_AFTER_NS)
		proctab__gc_before(r->procs, now - GC_AFTER_NS);
	proctab__close_unused_files(r->procs);
	/*
	 * What evictions and exits freed is mostly in the middle of the heap,
	 * which free() does not give back: return its pages to the kernel.
	 */
	if (membudget__evicted() != r->trimmed_at || now - r->trim_ns > TRIM_NS) {
		malloc_trim(0);
		r->trimmed_at = membudget__evicted();
		r->trim_ns = now;
	}
	if (log_level >= 2) {
		char line[1024];

		membudget__report(line, sizeof(line), 0);
		pr_verbose("caches: %.1f MiB of %.0f MiB (%s); stacks %zu",
			   membudget__used() / 1048576.0, membudget__get() / 1048576.0, line,
			   stacks__count(r->stacks));
	}
}

/*
 * -p: every process it names has exited, as perf record -p ends then. Not
 * for the continuous agent, which keeps running for processes to come.
 */
static bool targets_exited(void)
{
	return env.npids && !env.cmd_argv && !env.continuous_dir &&
	       proc__all_exited(env.pids, env.npids);
}

static int run_loop(struct recorder *r)
{
	uint64_t end_ns = env.duration > 0 ? mono_ns() + (uint64_t)(env.duration * 1e9) : 0;
	uint64_t house_ns = mono_ns();
	struct epoll_event evs[4];
	int n, err;

	while (!exiting) {
		int timeout = POLL_MS;

		if (r->cont) {
			uint64_t now = mono_ns(), dl = continuous__deadline(r->cont);

			if (now >= dl || new_interval) {
				new_interval = 0;
				writeout__interval(r);
				continue;
			}
			if ((dl - now) / 1000000 < (uint64_t)timeout)
				timeout = (dl - now) / 1000000 + 1;
		}
		if (end_ns) {
			uint64_t now = mono_ns();

			if (now >= end_ns)
				break;
			if ((end_ns - now) / 1000000 < (uint64_t)timeout)
				timeout = (end_ns - now) / 1000000 + 1;
		}
		n = epoll_wait(r->epfd, evs, 4, timeout);
		if (n < 0 && errno != EINTR) {
			err = -errno;
			pr_err("epoll_wait: %s", strerror(-err));
			return err;
		}
		sideband__consume(r->sb);
		err = ring_buffer__consume(r->rb);
		if (err < 0 && err != -EINTR) {
			pr_err("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		sync_dirty(r);
		if (r->unw)
			unwinder__balance(r->unw, mono_ns(), BALANCE_NS);
		housekeeping(r, &house_ns);
		for (uint32_t i = 0; i < r->nfeat; i++)
			if (r->feat[i]->poll)
				r->feat[i]->poll(r, r->feat_priv[i]);
		if (child_changed) {
			child_changed = 0;
			command__reap(r);
		}
		if (targets_exited()) {
			pr_verbose("every process -p named has exited");
			break;
		}
		if (r->child > 0 && r->child_done)
			break;
	}
	return 0;
}

/* The features this run has: those env asks for, then the mode's view. */
static size_t run_features(const struct rec_mode *mode, const struct rec_feature **out)
{
	size_t n = 0;

	for (const struct rec_feature *const *f = mode->features; f && *f; f++)
		if ((*f)->wanted && (*f)->wanted() && n < REC_MAX_FEATURES)
			out[n++] = *f;
	if (mode->view && n < REC_MAX_FEATURES)
		out[n++] = mode->view;
	return n;
}

/* Everything the run opened, in reverse order; NULL and -1 tolerated. */
static void teardown(struct recorder *r)
{
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->stats_fd >= 0)
		close(r->stats_fd);
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->destroy)
			r->feat[i]->destroy(r, r->feat_priv[i]);
	ring_buffer__free(r->rb);
	if (r->procs)
		proctab__on_change(r->procs, NULL, NULL);
	unwinder__free(r->unw);
	if (r->unwind_chunk0 >= 0)
		close(r->unwind_chunk0);
	tcache__free(r->tcache);
	continuous__free(r->cont);
	cgroups__free(r->cg);
	htab__free(r->dirty);
	sideband__free(r->sb);
	cpu_bpf__destroy(r->skel);
	ksyms__free(r->ks);
	stacks__free(r->stacks);
	tl_log__free(r->tl);
	proctab__free(r->procs);
	perfmaps__free(r->jit);
	objtab__free(r->objs);
	free(r->key);
	report__free(r);
}

int record__run(const struct rec_mode *mode)
{
	const struct rec_feature *feats[REC_MAX_FEATURES];
	size_t nfeats = run_features(mode, feats);
	struct recorder r = { .mode = mode,
			      .epfd = -1,
			      .go_fd = -1,
			      .err_fd = -1,
			      .stats_fd = -1,
			      .default_value = -1,
			      .cpu_samples = -1,
			      .cpu_ns = -1,
			      .unwind_chunk0 = -1 };
	struct build_stats bs = { 0 };
	double su_start = 0;
	size_t nprocs = 0;
	int err, status = EXIT_RUNTIME;

	if (env.thread_filter && !mode->view) {
		pr_err("--thread filters the live view: it is an option of 'bpfprof top'");
		return EXIT_USAGE;
	}
	if (!mode->view && output__open(&r.out, env.output))
		return EXIT_USAGE;
	setup__process();
	err = install_signals();
	r.key = malloc(decode__key_size());
	membudget__set(env.mem_budget);
	/*
	 * Big transient buffers (CFI compiled into rows: tens of MiB for a large
	 * library, freed right after) get their own mappings, given back on
	 * free. glibc's default raises this threshold after the first such free,
	 * so the next ones came from the heap and stayed in RSS as its
	 * high-water mark: a whole-machine agent stepped up 9-27 MiB in its
	 * first seconds and never came down (test_rss_flat_over_1000_intervals).
	 */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	r.objs = objtab__new();
	r.procs = r.objs ? proctab__new(r.objs) : NULL;
	if (r.objs) {
		writeout__init(&r);
		objtab__set_fd_cap(r.objs, setup__fd_cap());
	}
	r.jit = perfmaps__new();
	r.stacks = stacks__new();
	r.dirty = htab__new(64, HTAB_COPY_KEYS);
	if (env.want_cgroup && !(r.cg = cgroups__new()))
		err = -ENOMEM;
	if (env.format == FMT_CHROME && !(r.tl = tl_log__new(1000000000ULL / env.freq)))
		err = -ENOMEM;
	if (r.procs)
		proctab__on_change(r.procs, on_proc_change, &r);
	if (err || !r.key || !r.procs || !r.stacks || !r.dirty || !r.jit) {
		pr_err("out of memory");
		goto cleanup;
	}
	/* side band first: it must see the command's fork and exec */
	err = sideband__new(&r.sb, r.procs, SIDEBAND_PAGES);
	if (err) {
		char why[256];

		pr_err("cannot open the perf events that follow processes (exec, mmap, exit): %s%s",
		       strerror(-err), caps__why(err, CAPS_RECORD, why, sizeof(why)));
		goto cleanup;
	}
	/* what the command inherits from the features (e.g. an injection library) */
	for (size_t i = 0; env.cmd_argv && i < nfeats; i++)
		if (feats[i]->prepare_cmd && (err = feats[i]->prepare_cmd())) {
			pr_err("cannot prepare '%s' for %s: %s", env.cmd_argv[0], feats[i]->name,
			       strerror(-err));
			goto cleanup;
		}
	if (env.cmd_argv && command__spawn(&r)) {
		pr_err("cannot start '%s': %s", env.cmd_argv[0], strerror(errno));
		goto cleanup;
	}
	if (setup__bpf(&r, feats, nfeats) || open_stream(&r) || setup__sideband_filter(&r))
		goto cleanup;
	decode_ops__init(&r);
	/* what a sample costs in BPF, for -v (kernel.bpf_stats_enabled for us only) */
	if (log_level >= 2)
		r.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	clock_gettime(CLOCK_REALTIME, &r.wall_start);
	clock_gettime(CLOCK_MONOTONIC, &r.t_start);
	su_start = process_cpu_s();
	/* -p targets' tables, built above, wait for no sample from here on */
	if (r.unw)
		unwinder__sampling_started(r.unw, mono_ns());
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->start && r.feat[i]->start(&r, r.feat_priv[i]))
			goto cleanup;
	su_start = process_cpu_s() - su_start;
	if (r.child > 0 && (err = command__check(env.cmd_argv[0]))) {
		pr_err("cannot run '%s': %s", env.cmd_argv[0], strerror(-err));
		status = (err == -ENOENT || err == -EACCES) ? EXIT_USAGE : EXIT_RUNTIME;
		goto cleanup;
	}
	report__mark_ready(&r, su_start);
	if (!mode->view)
		report__ready_line(&r);
	if (r.child > 0) {
		command__prepare_tables(&r);
		err = command__release(&r);
		if (err) {
			status = (err == -ENOENT || err == -EACCES) ? EXIT_USAGE : EXIT_RUNTIME;
			goto cleanup;
		}
	}
	if (env.continuous_dir && continuous__new(&r.cont)) /* the first interval starts now */
		goto cleanup;
	if (r.sampler)
		pr_verbose("sampling %s at %u Hz on %d CPUs",
			   env.all ? "every process" : "the targets", env.freq,
			   sampler__ncpus(r.sampler));

	err = run_loop(&r);
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->stop)
			r.feat[i]->stop(&r, r.feat_priv[i]);
	clock_gettime(CLOCK_MONOTONIC, &r.t_stop);
	if (err)
		goto cleanup;
	if (got_signal && r.child > 0 && !r.child_done)
		kill(r.child, got_signal);
	/* everything already in the buffers is part of the profile */
	final_drain = true;
	sideband__consume(r.sb);
	ring_buffer__consume(r.rb);
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->finish)
			r.feat[i]->finish(&r, r.feat_priv[i]);
	report__mark_stop(&r);

	if (r.cont) { /* the interval in progress is written, the rest summarized */
		nprocs = writeout__processes(r.stacks); /* the last interval's */
		writeout__interval(&r);
	} else if (mode->view) {
		nprocs = writeout__processes(r.stacks);
	} else if (writeout__profile(&r, &nprocs, &bs)) {
		goto cleanup;
	}
	report__summary(&r, &bs, nprocs);
	status = EXIT_OK;
cleanup:
	setup__save_core_btf(&r);
	if (status != EXIT_OK)
		output__abort(&r.out);
	command__end(&r, status != EXIT_OK);
	status = command__exit_status(&r, status);
	teardown(&r);
	return status;
}
