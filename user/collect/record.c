// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The life of one recording: open and size the BPF objects, start the side
 * band and the target, attach one sampling event per CPU, then drain the ring
 * buffer into the stack table until the duration ends, the command exits or
 * a signal arrives; finally symbolize once per distinct frame, write, and
 * print what was taken and what was lost.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "aggregate/profile.h"
#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "aggregate/timeline_log.h"
#include "bpfprof.h"
#include "cli.h"
#include "collect/continuous.h"
#include "collect/record.h"
#include "collect/recorder.h"
#include "collect/sampler.h"
#include "collect/pytrack.h"
#include "collect/sideband.h"
#include "collect/uprobes.h"
#include "symbolize/perfmap.h"
#include "alloc.skel.h"
#include "cpu.skel.h"
#include "cuda.skel.h"
#include "offcpu.skel.h"
#include "proc/cgroup.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/ksyms.h"
#include "unwind/needed.h"
#include "unwind/tables.h"
#include "unwind/tcache.h"
#include "util/bpfmap.h"
#include "util/htab.h"
#include "util/clock.h"
#include "util/corebtf.h"
#include "util/counters.h"
#include "util/log.h"
#include "util/membudget.h"
#include "util/tfile.h"
#include "write/output.h"
#include "write/writers.h"

/* Re-read a process's maps after an address missed at most this often. */
#define RELOAD_INTERVAL_NS (200 * 1000000ULL)
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

static int libbpf_debug(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	return log__vprintf_raw(fmt, args);
}

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

static uint64_t ts_ns(const struct timespec *t)
{
	return t->tv_sec * 1000000000ULL + t->tv_nsec;
}

static void mark_dirty(struct recorder *r, uint32_t pid)
{
	struct htab_entry *e;

	if (r->unw || r->py)
		htab__upsert(r->dirty, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
}

/* The side band follows the cgroup's processes (--cgroup, no pid filter). */
static bool sb_by_cgroup(void)
{
	return env.cgroup_path && !env.npids && !env.cmd_argv;
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
		mark_dirty(r, pid);
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

/* ---- decode ops: what collect/decode.c needs from this recorder ---- */

static void dec_user_begin(void *ctx, uint32_t pid, uint64_t time_ns)
{
	struct recorder *r = ctx;

	/* a sample newer than our last side-band read may need records after it */
	if (time_ns > sideband__consumed_until(r->sb))
		sideband__consume(r->sb);
	/* sampled: a target (moved into the cgroup, say): its records are kept from now */
	sideband__mark_target(r->sb, pid);
	r->dpid = pid;
	r->dtime_ns = time_ns;
	r->dproc = proctab__lookup(r->procs, pid, time_ns);
}

static bool dec_user_resolve(void *ctx, uint64_t ip, struct sframe *f)
{
	struct recorder *r = ctx;
	const struct mapping *m = NULL;
	struct proc *p = r->dproc;

	if (p)
		m = proc__find(p, ip);
	if (!m) {
		/* the MMAP2 record may still be in the side band: read it, retry */
		sideband__consume(r->sb);
		p = r->dproc = proctab__lookup(r->procs, r->dpid, r->dtime_ns);
		if (p)
			m = proc__find(p, ip);
	}
	if (!m && p && !p->exited && proctab__is_latest(r->procs, p)) {
		uint64_t now = mono_ns();

		if (now - p->last_reload_ns > RELOAD_INTERVAL_NS) {
			p->last_reload_ns = now;
			proctab__reload(r->procs, p);
			m = proc__find(p, ip);
		}
	}
	if (!m) {
		*f = (struct sframe){ .obj = OBJ_UNMAPPED, .addr = ip };
		return false;
	}
	if (m->obj == OBJ_ANON) {
		uint32_t id = r->jit ? perfmaps__lookup(r->jit, r->dpid, ip) : 0;

		*f = id ? (struct sframe){ .obj = OBJ_JIT, .addr = id }
			: (struct sframe){ .obj = OBJ_ANON, .addr = ip };
		if (r->unw && unwinder__trampoline(r->unw, r->dpid, ip))
			f->aux = SFRAME_TRAMPOLINE;
	} else {
		*f = (struct sframe){ .obj = m->obj, .addr = ip - m->start + m->pgoff };
		objtab__sampled(r->objs, m->obj);
	}
	return true;
}

/*
 * The files a sample's user frames are in want unwind tables (and those that
 * have one stay warm); a frame in a file refused for lack of room means the
 * walk went on by frame pointers there: counted for the end-of-run warning.
 */
static void dec_user_end(void *ctx, const struct sframe *f, uint32_t n, uint64_t time_ns)
{
	struct recorder *r = ctx;
	uint32_t last = 0;
	bool no_room = false;

	bool gap = false;

	for (uint32_t i = 0; i < n; i++) {
		/* the leaf's exact pc; a caller's call instruction */
		gap |= unwinder__hit_pc(r->unw, f[i].obj,
					i && f[i].addr ? f[i].addr - 1 : f[i].addr, time_ns);
		if (f[i].obj == last)
			continue;
		last = f[i].obj;
		no_room |= unwinder__hit(r->unw, last, time_ns);
	}
	r->st.unwind_no_room += no_room;
	r->st.unwind_partial_gap += gap;
}

static void dec_want_sync(void *ctx, uint32_t pid)
{
	mark_dirty(ctx, pid);
}

static uint64_t dec_py_code(void *ctx, uint32_t pid, uint64_t code, uint64_t instr, uint32_t *off)
{
	return pytrack__code(((struct recorder *)ctx)->py, pid, code, instr, off);
}

static bool dec_py_seen(void *ctx, uint32_t pid)
{
	return pytrack__seen(((struct recorder *)ctx)->py, pid);
}

static void dec_py_rescan(void *ctx, uint32_t pid)
{
	pytrack__rescan(((struct recorder *)ctx)->py, pid);
}

static void dec_py_thread(void *ctx, uint32_t pid, uint32_t tid)
{
	pytrack__thread_seen(((struct recorder *)ctx)->py, pid, tid);
}

void rec__py_probe(struct recorder *r, uint32_t pid, uint64_t time_ns)
{
	struct proc *p;

	if (!r->py || pytrack__is_python(r->py, pid))
		return;
	if (time_ns > sideband__consumed_until(r->sb))
		sideband__consume(r->sb);
	p = proctab__lookup(r->procs, pid, time_ns);
	if (p)
		pytrack__probe(r->py, p);
}

static void dec_py_probe(void *ctx, uint32_t pid, uint64_t time_ns)
{
	rec__py_probe(ctx, pid, time_ns);
}

static void dec_cgroup_seen(void *ctx, uint64_t id)
{
	cgroups__get(((struct recorder *)ctx)->cg, id);
}

/* After setup: the decoder's configuration from env and the parts that exist. */
static void decode_init(struct recorder *r)
{
	r->dcfg = (struct decode_cfg){
		.kernel = !env.no_kernel,
		.user = !env.no_user,
		.python = r->py && !env.no_python,
		.per_thread = env.per_thread,
		.cgroup = r->cg != NULL,
		.gil = env.gil,
	};
	r->dops = (struct decode_ops){
		.ctx = r,
		.user_begin = dec_user_begin,
		.user_resolve = dec_user_resolve,
		.user_end = r->unw ? dec_user_end : NULL,
		.want_sync = dec_want_sync,
		.py_code = r->py ? dec_py_code : NULL,
		.py_seen = r->py ? dec_py_seen : NULL,
		.py_rescan = r->py ? dec_py_rescan : NULL,
		.py_thread = r->py ? dec_py_thread : NULL,
		.py_probe = r->py ? dec_py_probe : NULL,
		.cgroup_seen = r->cg ? dec_cgroup_seen : NULL,
	};
}

struct stack_key *rec__key(struct recorder *r, const struct prof_sample *s, size_t size)
{
	r->dproc = NULL;
	if (decode__sample(&r->dcfg, &r->dops, &r->st.dec, s, size, r->key))
		return NULL;
	return r->key;
}

/* One ring buffer record: check the header, hand it to whoever owns its kind. */
static int handle_record(void *ctx, void *data, size_t size)
{
	struct recorder *r = ctx;
	const struct prof_sample_hdr *h = data;

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
	return ts_ns(&r->t_start);
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
static uint32_t files_fd_cap(void)
{
	uint64_t cap = membudget__get() >> 16;
	struct rlimit rl;

	if (cap < 64)
		cap = 64;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && cap > rl.rlim_cur / 2)
		cap = rl.rlim_cur / 2 > 16 ? rl.rlim_cur / 2 : 16;
	return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
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

/* Fork CMD, held before exec until everything is attached. */
static int spawn_held(struct recorder *r)
{
	int go[2], err[2];

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	r->child = fork();
	if (r->child < 0)
		return -errno;
	if (r->child == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		signal(SIGPIPE, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(127); /* bpfprof gave up before starting us */
		execvp(env.cmd_argv[0], env.cmd_argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	r->go_fd = go[1];
	r->err_fd = err[0];
	return 0;
}

/*
 * -- CMD: the tables of the executable, its interpreter and its libraries,
 * built before it runs, so that its first milliseconds unwind like the rest.
 */
static void prepare_command_tables(struct recorder *r)
{
	uint64_t t0 = mono_ns();
	uint32_t ready = 0;
	char **files;
	size_t n;

	if (!r->unw || needed__files(env.cmd_argv[0], &files, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		struct objfile *o;
		struct stat st;

		if (stat(files[i], &st))
			continue;
		o = objtab__get(r->objs, major(st.st_dev), minor(st.st_dev), st.st_ino, files[i],
				getpid(), 0, 0);
		if (o && !unwinder__prepare(r->unw, o->id, mono_ns()))
			ready++;
	}
	pr_verbose("unwind tables of '%s' and its libraries before it starts: %u of %zu files in "
		   "%.1f ms",
		   env.cmd_argv[0], ready, n, (mono_ns() - t0) / 1e6);
	needed__free(files, n);
}

/* Let CMD exec; returns 0 or -errno of a failed exec (printed). */
static int release_child(struct recorder *r)
{
	ssize_t n;
	int e = 0;

	if (write(r->go_fd, "g", 1) != 1)
		return -errno;
	close(r->go_fd);
	r->go_fd = -1;
	n = read(r->err_fd, &e, sizeof(e)); /* EOF: exec succeeded (CLOEXEC) */
	close(r->err_fd);
	r->err_fd = -1;
	if (n == sizeof(e)) {
		pr_err("cannot run '%s': %s", env.cmd_argv[0], strerror(e));
		waitpid(r->child, NULL, 0);
		r->child = 0;
		return -e;
	}
	return 0;
}

/*
 * Whether CMD can be exec'd as execvp would find it: checked before the
 * ready line, so that a command that cannot run gets its one error line.
 */
static int command__check(const char *cmd)
{
	const char *p = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) ? -errno : 0;
	if (!p)
		p = "/usr/local/bin:/bin:/usr/bin";
	for (;;) {
		const char *end = strchrnul(p, ':');
		int n = end - p;

		if (snprintf(buf, sizeof(buf), "%.*s/%s", n ? n : 1, n ? p : ".", cmd) <
			    (int)sizeof(buf) &&
		    !access(buf, X_OK))
			return 0;
		if (!*end)
			return -ENOENT;
		p = end + 1;
	}
}

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
static void print_ready(struct recorder *r)
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

/* CPU seconds this process has used so far */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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

static void check_child(struct recorder *r)
{
	int status;

	if (r->child <= 0 || r->child_done)
		return;
	if (waitpid(r->child, &status, WNOHANG) == r->child) {
		r->child_done = true;
		r->child_status = status;
	}
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
static int cpu_open_load(struct recorder *r, int attempt)
{
	uint32_t cpu_last_n;
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
		bpf_map__set_max_entries(r->skel->maps.unwind_rows, 1);
		bpf_map__set_max_entries(r->skel->maps.proc_unwind, 1);
	} else {
		bpf_map__set_max_entries(r->skel->maps.unwind_rows, env.unwind_rows);
		/* the unwinder copies rows in through a mapping (tables.c) */
		bpf_map__set_map_flags(r->skel->maps.unwind_rows,
				       bpf_map__map_flags(r->skel->maps.unwind_rows) |
					       BPF_F_MMAPABLE);
		bpf_map__set_max_entries(r->skel->maps.proc_unwind, env.unwind_procs);
	}

	if (log_level >= 3 && env.ev_cpu) /* verifier statistics (-vvv), whole log (-vvvv) */
		bpf_program__set_log_level(r->skel->progs.on_cpu_sample,
					   log_level >= 4 ? 1 | 4 : 4);
	return cpu_bpf__load(r->skel);
}

static int setup_bpf(struct recorder *r, const struct rec_feature **feats, size_t nfeats)
{
	int err, nobjs;
	uint32_t reason = TARGET_GIVEN;
	double t0 = cpu_s();
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
		pr_err("cannot load the BPF programs: %s (needs root or CAP_BPF+CAP_PERFMON)",
		       strerror(-err));
		return err;
	}
	/* written after the run (util/corebtf.h), for the next ones */
	r->core_btf_todo = !r->core_btf_used && r->core_btf[0];
	r->su_load = cpu_s() - t0;
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
					env.unwind_rows, bpf_map__fd(r->skel->maps.proc_unwind),
					bpf_map__fd(r->skel->maps.unwind_gen), r->objs);
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
	t0 = cpu_s();
	for (size_t i = 0; i < nfeats; i++) {
		r->feat[r->nfeat] = feats[i];
		err = feats[i]->setup(r, &r->feat_priv[r->nfeat]);
		r->nfeat++; /* destroy() even after a failed setup */
		if (err)
			return err;
	}
	r->su_features = cpu_s() - t0;
	if (r->unw || r->py) {
		/* -p targets get their tables before the first sample */
		for (size_t i = 0; i < env.npids; i++)
			mark_dirty(r, env.pids[i]);
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

static int epoll_add(int epfd, int fd)
{
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
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

static size_t count_processes(const struct stacks *st);

static uint32_t feature_labels(void *arg, size_t stack, struct plabel *out, uint32_t max)
{
	struct recorder *r = arg;
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->nfeat && n < max; i++)
		if (r->feat[i]->labels)
			n += r->feat[i]->labels(r, r->feat_priv[i], stack, out + n, max - n);
	return n;
}

/* What profile__build needs from this run: roots, labels, value types. */
static void build_opts_init(struct recorder *r, struct build_opts *bo)
{
	memset(bo, 0, sizeof(*bo));
	bo->per_pid = env.per_pid;
	bo->per_thread = env.per_thread;
	bo->py = r->py;
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
static int end_interval(struct recorder *r)
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
	t.processes = count_processes(r->stacks);
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

/*
 * -p: whether every process it names has exited (gone, or a zombie its
 * parent has not reaped yet), as perf record -p ends then. Not for the
 * continuous agent, which keeps running for processes to come.
 */
static bool targets_exited(void)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (!env.npids || env.cmd_argv || env.continuous_dir)
		return false;
	for (size_t i = 0; i < env.npids; i++) {
		snprintf(path, sizeof(path), "/proc/%u/stat", env.pids[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone */
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		p = strrchr(buf, ')'); /* comm may hold anything: the state follows its last ')' */
		if (!p || (p[1] == ' ' && p[2] != 'Z' && p[2] != 'X'))
			return false;
		/* a leader that ended itself is a zombie while its threads run on */
		if (proc__threads_left(env.pids[i], NULL))
			return false;
	}
	return true;
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
				end_interval(r);
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
			check_child(r);
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
	if (stacks__refused())
		pr_warn("%llu new distinct stacks were not aggregated (their samples are counted "
			"lost, table full): the stacks hold half of --mem-budget %.0f MiB; raise it",
			(unsigned long long)stacks__refused(), membudget__get() / 1048576.0);
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

static void print_summary(struct recorder *r, const struct build_stats *bs, size_t nprocs)
{
	uint64_t rb_full = rec__counter(r, CNT_RB_FULL);
	uint64_t lost = rb_full + r->st.agg_failed + r->st.bad + r->st.dec.bad + r->st.unknown_kind;
	uint64_t sb_lost = sideband__stats(r->sb)->lost;
	double secs = (ts_ns(&r->t_stop) - ts_ns(&r->t_start)) / 1e9;
	char why[256] = "", line[2048];
	struct rusage ru;

	if (lost || sb_lost)
		snprintf(why, sizeof(why),
			 " (ring buffer full %llu, table full %llu, malformed %llu; "
			 "side-band records lost %llu)",
			 (unsigned long long)rb_full, (unsigned long long)r->st.agg_failed,
			 (unsigned long long)(r->st.bad + r->st.dec.bad + r->st.unknown_kind),
			 (unsigned long long)sb_lost);
	pr_info("%llu samples, %llu lost%s, %zu processes, %.1f%% frames unresolved, %.1f s",
		(unsigned long long)(r->st.written_known ? r->st.written
							 : r->st.received - r->st.before_exec),
		(unsigned long long)lost, why, nprocs,
		bs->frames ? 100.0 * bs->unresolved / bs->frames : 0.0, secs);
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
	if (r->unw && r->st.unwind_no_room) {
		uint64_t want = unwinder__rows_wanted(r->unw) * UNWIND_ROW_BYTES;
		uint64_t have = (uint64_t)env.unwind_rows * UNWIND_ROW_BYTES, mib = 1 << 20;
		uint64_t raise = (want > have ? want : have) + 16 * mib;

		raise = (raise + 16 * mib - 1) / (16 * mib) * 16;
		pr_warn("%llu of %llu samples (%.1f%%) were unwound with frame pointers in files "
			"the unwind tables had no room for; the files sampled need %llu MiB of "
			"rows, --unwind-mem is %llu MiB: raise it to --unwind-mem %lluM",
			(unsigned long long)r->st.unwind_no_room,
			(unsigned long long)r->st.received,
			r->st.received ? 100.0 * r->st.unwind_no_room / r->st.received : 0.0,
			(unsigned long long)((want + mib - 1) / mib),
			(unsigned long long)(have / mib), (unsigned long long)raise);
	}
	for (uint32_t i = 0; i < r->nfeat; i++)
		if (r->feat[i]->summary)
			r->feat[i]->summary(r, r->feat_priv[i], stderr);
	/* every loss counter BPF keeps, from the tables in include/bpfprof.h */
	format_counters(r, line, sizeof(line), true);
	if (*line)
		pr_info("losses: %s", line);
	if (r->child > 0 && r->child_done &&
	    (!WIFEXITED(r->child_status) || WEXITSTATUS(r->child_status)))
		pr_info("command '%s' %s %d", env.cmd_argv[0],
			WIFEXITED(r->child_status) ? "exited with status" : "killed by signal",
			WIFEXITED(r->child_status) ? WEXITSTATUS(r->child_status)
						   : WTERMSIG(r->child_status));
	if (log_level >= 2) {
		const struct proctab_stats *ps = proctab__stats(r->procs);

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
				"unwind tables: %llu files (%llu without, %llu shared by build id), "
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
				   "tables, %.1f MiB",
				   env.unwind_cache, (unsigned long long)cs->hits,
				   (unsigned long long)cs->misses, (unsigned long long)cs->stored,
				   (unsigned long long)cs->store_failed,
				   (unsigned long long)cs->invalid, (unsigned long long)cs->evicted,
				   (unsigned long long)cs->files, cs->bytes / 1048576.0);
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
		pr_verbose("agent: %.3f s user, %.3f s sys, %.2f us per sample, peak RSS %ld KiB",
			   ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
			   ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
			   r->st.received ? ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
					     ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
						    r->st.received
					  : 0.0,
			   ru.ru_maxrss > r->hwm_run_kib ? ru.ru_maxrss : r->hwm_run_kib);
		print_cost(r, &ru);
	}
}

static size_t count_processes(const struct stacks *st)
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
	char line[128];
	long rss = -1, hwm = -1;
	FILE *f;

	if (log_level < 2 || !(f = fopen("/proc/self/status", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", &rss);
		sscanf(line, "VmHWM: %ld", &hwm);
	}
	fclose(f);
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

static int write_profile(struct recorder *r, size_t *nprocs, struct build_stats *bs)
{
	struct build_opts bo;
	struct profile *p = NULL;
	int err;

	build_opts_init(r, &bo);
	bo.time_ns = ts_ns(&r->wall_start);
	bo.duration_ns = ts_ns(&r->t_stop) - ts_ns(&r->t_start);
	/* ~0.1 s of CPU to parse; a run whose stacks hold no kernel frame skips it */
	if (!env.no_kernel && (r->tl || any_kernel_frame(r->stacks))) {
		err = ksyms__load(&r->ks, NULL);
		if (err) {
			pr_warn("no kernel symbols (/proc/kallsyms: %s)", strerror(-err));
			r->ks = NULL;
		} else {
			pr_verbose("kernel symbols: %llu read from /proc/kallsyms",
				   (unsigned long long)ksyms__count(r->ks));
		}
	} else if (!env.no_kernel) {
		pr_verbose("kernel symbols: not read (no kernel frames)");
	}
	if (r->tl) { /* -f chrome: the timeline, not the aggregate */
		*nprocs = count_processes(r->stacks);
		/* file by file, as below: the timeline's stacks are the aggregate's */
		close_rss(r, "stacks aggregated");
		objtab__name_frames(r->objs, bo.lines != BUILD_LINES_NONE);
		close_rss(r, "frames named");
		err = tl_log__write(r->tl, r->objs, r->ks, &bo, r->out.f, bs, &r->st.written);
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
	*nprocs = count_processes(r->stacks);
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
	err = output__write_profile(&r->out, p);
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

const struct rec_mode rec_mode_record = { .name = "record" };

int record__main(void)
{
	return record__run(&rec_mode_record);
}

/* The features this run has: those env asks for, then the mode's view. */
static size_t run_features(const struct rec_mode *mode, const struct rec_feature **out)
{
	size_t n = 0;

	for (const struct rec_feature *const *f = rec_features; *f; f++)
		if ((*f)->wanted && (*f)->wanted() && n < REC_MAX_FEATURES)
			out[n++] = *f;
	if (mode->view && n < REC_MAX_FEATURES)
		out[n++] = mode->view;
	return n;
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
			      .cpu_ns = -1 };
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
	raise_nofile();
	libbpf_set_print(log_level >= 3 ? libbpf_debug : NULL);
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
		objtab__set_frames(r.objs, stack_frames, &r);
		objtab__set_debuginfod(r.objs, (uint64_t)(env.debuginfod_wait * 1e9));
		objtab__set_fd_cap(r.objs, files_fd_cap());
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
		pr_err("cannot open the side-band perf events: %s (needs root or CAP_PERFMON)",
		       strerror(-err));
		goto cleanup;
	}
	/* what the command inherits from the features (e.g. an injection library) */
	for (size_t i = 0; env.cmd_argv && i < nfeats; i++)
		if (feats[i]->prepare_cmd && (err = feats[i]->prepare_cmd())) {
			pr_err("cannot prepare '%s' for %s: %s", env.cmd_argv[0], feats[i]->name,
			       strerror(-err));
			goto cleanup;
		}
	if (env.cmd_argv && spawn_held(&r)) {
		pr_err("cannot start '%s': %s", env.cmd_argv[0], strerror(errno));
		goto cleanup;
	}
	if (setup_bpf(&r, feats, nfeats))
		goto cleanup;
	/*
	 * The side band follows the targets: -p, -- CMD (the targets map, filled
	 * in setup_bpf and at forks), --cgroup (its processes).
	 */
	if (env.npids || env.cmd_argv || env.cgroup_path) {
		struct sideband_filter f = { .is_target = sb_is_target,
					     .ctx = &r,
					     .follow_children = env.cmd_argv != NULL,
					     .by_cgroup = sb_by_cgroup(),
					     .at_exec = sb_by_cgroup() ? sb_exec_in_cgroup : NULL,
					     .forget = sb_by_cgroup() ? sb_forget : NULL };

		if ((err = sideband__set_filter(r.sb, &f))) {
			pr_err("cannot set the side-band filter: %s", strerror(-err));
			goto cleanup;
		}
	}
	decode_init(&r);
	r.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r.epfd < 0 || epoll_add(r.epfd, ring_buffer__epoll_fd(r.rb)) ||
	    epoll_add(r.epfd, sideband__epoll_fd(r.sb))) {
		pr_err("cannot set up epoll: %s", strerror(errno));
		goto cleanup;
	}
	/* what a sample costs in BPF, for -v (kernel.bpf_stats_enabled for us only) */
	if (log_level >= 2)
		r.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	clock_gettime(CLOCK_REALTIME, &r.wall_start);
	clock_gettime(CLOCK_MONOTONIC, &r.t_start);
	su_start = cpu_s();
	/* -p targets' tables, built above, wait for no sample from here on */
	if (r.unw)
		unwinder__sampling_started(r.unw, mono_ns());
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->start && r.feat[i]->start(&r, r.feat_priv[i]))
			goto cleanup;
	su_start = cpu_s() - su_start;
	if (r.child > 0 && (err = command__check(env.cmd_argv[0]))) {
		pr_err("cannot run '%s': %s", env.cmd_argv[0], strerror(-err));
		status = (err == -ENOENT || err == -EACCES) ? EXIT_USAGE : EXIT_RUNTIME;
		goto cleanup;
	}
	getrusage(RUSAGE_SELF, &r.ru_ready);
	tables_cpu(&r, &r.tables_cpu_ready, &r.tables_ready);
	syms_cpu(&r, &r.syms_cpu_ready, &r.syms_ready);
	maps_cpu(&r, &r.maps_cpu_ready, &r.maps_ready);
	/* where start-up goes (issue 17: -a should take <= 0.1 s CPU before the first sample) */
	pr_verbose("start-up: %.3f s CPU: CPU object open+load+verify %.3f s, features (heap, "
		   "off-CPU, CUDA objects, probes) %.3f s + start %.3f s, the rest (libraries, "
		   "side band, tables for -p targets, perf events) %.3f s",
		   ru_secs(&r.ru_ready), r.su_load, r.su_features, su_start,
		   ru_secs(&r.ru_ready) - r.su_load - r.su_features - su_start);
	if (!mode->view)
		print_ready(&r);
	if (r.child > 0) {
		prepare_command_tables(&r);
		err = release_child(&r);
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
	sideband__consume(r.sb);
	ring_buffer__consume(r.rb);
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->finish)
			r.feat[i]->finish(&r, r.feat_priv[i]);
	getrusage(RUSAGE_SELF, &r.ru_stop);
	tables_cpu(&r, &r.tables_cpu_stop, &r.tables_stop);
	syms_cpu(&r, &r.syms_cpu_stop, &r.syms_stop);
	maps_cpu(&r, &r.maps_cpu_stop, &r.maps_stop);

	if (r.cont) { /* the interval in progress is written, the rest summarized */
		nprocs = count_processes(r.stacks); /* the last interval's */
		end_interval(&r);
	} else if (mode->view) {
		nprocs = count_processes(r.stacks);
	} else if (write_profile(&r, &nprocs, &bs)) {
		goto cleanup;
	}
	print_summary(&r, &bs, nprocs);
	if (r.cont)
		continuous__summary(r.cont);
	status = EXIT_OK;
cleanup:
	if (r.core_btf_todo) {
		struct corebtf_obj objs[4];
		int nobjs = core_objs(objs);

		if ((err = corebtf__write(objs, nobjs, r.core_btf)))
			pr_debug("CO-RE types not cached in %s: %s", r.core_btf, strerror(-err));
	}
	if (status != EXIT_OK)
		output__abort(&r.out);
	if (r.child > 0 && !r.child_done) {
		if (r.go_fd >= 0) /* never released: let it die */
			close(r.go_fd), r.go_fd = -1;
		if (status != EXIT_OK)
			kill(r.child, SIGTERM);
		waitpid(r.child, NULL, 0);
	}
	if (r.go_fd >= 0)
		close(r.go_fd);
	if (r.err_fd >= 0)
		close(r.err_fd);
	if (r.epfd >= 0)
		close(r.epfd);
	if (r.stats_fd >= 0)
		close(r.stats_fd);
	for (uint32_t i = 0; i < r.nfeat; i++)
		if (r.feat[i]->destroy)
			r.feat[i]->destroy(&r, r.feat_priv[i]);
	ring_buffer__free(r.rb);
	if (r.procs)
		proctab__on_change(r.procs, NULL, NULL);
	unwinder__free(r.unw);
	tcache__free(r.tcache);
	continuous__free(r.cont);
	cgroups__free(r.cg);
	htab__free(r.dirty);
	sideband__free(r.sb);
	cpu_bpf__destroy(r.skel);
	ksyms__free(r.ks);
	stacks__free(r.stacks);
	tl_log__free(r.tl);
	proctab__free(r.procs);
	perfmaps__free(r.jit);
	objtab__free(r.objs);
	free(r.key);
	return status;
}
