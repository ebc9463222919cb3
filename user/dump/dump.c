// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpfprof dump -p PID: every thread's stack, now.
 *
 * A thread's user stack can only be walked while it is current (BPF reads
 * user memory of the current task only), and a blocked thread is not. So
 * each thread is made to run for a moment: PTRACE_SEIZE + PTRACE_INTERRUPT
 * wake it out of its syscall into a ptrace stop, and on its way there it
 * schedules out as current; bpf/offcpu.bpf.c (dump_switch) walks its native
 * and Python stacks at that switch with the recorder's unwinder, unwind
 * tables and Python maps, the same code a CPU sample goes through. Then we
 * detach and the interrupted syscall restarts (the kernel's restart
 * machinery; the thread sees nothing). What the thread was doing before the
 * interrupt -- state, syscall, kernel stack -- is read from /proc first.
 *
 * Built on the recorder as a feature: the profile it builds (symbolized,
 * Python merged, one stack per thread with --per-thread) is printed here as
 * one block per thread instead of being written as a file.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "aggregate/profile_build.h"
#include "cli.h"
#include "collect/offcpu.h"
#include "collect/record.h"
#include "collect/recorder.h"
#include "collect/writeout.h"
#include "dump/dump.h"
#include "registry.h"
#include "proc/proc.h"
#include "offcpu.skel.h"
#include "util/caps.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/strsafe.h"

#define MAX_KFRAMES 64
/*
 * Threads stopped at once: their stacks must fit the ring buffer together
 * (a few KiB each in 8 MiB) before the next batch is stopped. A process
 * with more is dumped batch after batch (each a consistent picture).
 */
#define BATCH 256
/* give up waiting for a batch's stacks after this long */
#define CAPTURE_TIMEOUT_NS (2 * 1000000000ULL)
/* a thread that has not stopped by then is in a wait no signal ends (D state) */
#define STOP_TIMEOUT_NS (1000000000ULL)

/* x86-64 syscall numbers a thread waiting for its vfork child sleeps in */
#define NR_CLONE  56
#define NR_VFORK  58
#define NR_CLONE3 435

struct dthread {
	uint32_t tid;
	char name[64];
	char state;   /* /proc stat: R S D T t Z ... */
	long syscall; /* -1: not in a syscall, -2: running / unknown */
	unsigned long args[3];
	char *kframes[MAX_KFRAMES]; /* /proc/PID/task/TID/stack, leaf first */
	int nk;
	uint32_t vfork_child; /* waiting in vfork for this child to exec or exit (0: not) */
	bool seized, stopped, captured;
	const char *why; /* no user stack: why */
	const struct psample *sample;
	const char *gil;
};

struct dump {
	struct offcpu_bpf *skel;
	struct dthread *t;
	size_t n, cap;
	size_t listed; /* threads /proc/PID/task listed (n: those kept) */
	size_t next;   /* first thread of the next batch */
	size_t lo, hi; /* the batch whose stacks are awaited */
	size_t batches;
	uint32_t pid;
	char comm[64];
	uint64_t stopped_ns; /* longest batch: first interrupt to last detach */
	uint64_t deadline;
	size_t captured;
	struct profile *prof;
};

static bool json;

static const struct {
	int nr;
	const char *name;
} syscalls[] = {
	{ 0, "read" },
	{ 1, "write" },
	{ 7, "poll" },
	{ 17, "pread64" },
	{ 19, "readv" },
	{ 23, "select" },
	{ 24, "sched_yield" },
	{ 34, "pause" },
	{ 35, "nanosleep" },
	{ 42, "connect" },
	{ NR_CLONE, "clone" },
	{ NR_VFORK, "vfork" },
	{ 59, "execve" },
	{ 43, "accept" },
	{ 45, "recvfrom" },
	{ 47, "recvmsg" },
	{ 61, "wait4" },
	{ 72, "fcntl" },
	{ 73, "flock" },
	{ 74, "fsync" },
	{ 128, "rt_sigtimedwait" },
	{ 130, "rt_sigsuspend" },
	{ 202, "futex" },
	{ 208, "io_getevents" },
	{ 230, "clock_nanosleep" },
	{ 232, "epoll_wait" },
	{ 247, "waitid" },
	{ 270, "pselect6" },
	{ 271, "ppoll" },
	{ 281, "epoll_pwait" },
	{ 288, "accept4" },
	{ 299, "recvmmsg" },
	{ 426, "io_uring_enter" },
	{ NR_CLONE3, "clone3" },
	{ 441, "epoll_pwait2" },
	{ 449, "futex_waitv" },
};

static const char *syscall_name(long nr, char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof(syscalls) / sizeof(syscalls[0]); i++)
		if (syscalls[i].nr == nr)
			return syscalls[i].name;
	snprintf(buf, len, "syscall_%ld", nr);
	return buf;
}

static const char *state_name(char s)
{
	switch (s) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "uninterruptible";
	case 'T':
		return "stopped";
	case 't':
		return "traced";
	case 'Z':
		return "zombie";
	default:
		return "unknown";
	}
}

static int read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (int)n;
}

/*
 * A thread in vfork() (or posix_spawn's clone with CLONE_VFORK) sleeps in
 * kernel_clone until its child execs or exits, in a wait that no signal but
 * a fatal one ends: PTRACE_INTERRUPT cannot stop it before then (a dump
 * once waited 58 s for a child's sleep, the process's other threads
 * stopped all along). Its child: the first of its children.
 */
static void vfork_wait(uint32_t pid, struct dthread *t)
{
	char path[96], buf[64];
	unsigned long child;

	if (t->state != 'D' ||
	    (t->syscall != NR_VFORK && t->syscall != NR_CLONE && t->syscall != NR_CLONE3))
		return;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/wchan", pid, t->tid);
	if (read_file(path, buf, sizeof(buf)) <= 0 || strcmp(buf, "kernel_clone"))
		return;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/children", pid, t->tid);
	child = read_file(path, buf, sizeof(buf)) > 0 ? strtoul(buf, NULL, 10) : 0;
	t->vfork_child = child && child <= UINT32_MAX ? (uint32_t)child : UINT32_MAX;
}

/* What the thread is doing, before we touch it. */
static void read_thread(uint32_t pid, struct dthread *t)
{
	char path[96], buf[4096], *p, *line, *save;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, t->tid);
	if (read_file(path, t->name, sizeof(t->name)) > 0) {
		t->name[strcspn(t->name, "\n")] = '\0';
		strsafe__inplace(t->name, sizeof(t->name)); /* the thread chose it */
	}
	snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, t->tid);
	t->state = '?';
	if (read_file(path, buf, sizeof(buf)) > 0 && (p = strrchr(buf, ')')) && p[1] == ' ')
		t->state = p[2];
	t->syscall = -2;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/syscall", pid, t->tid);
	if (read_file(path, buf, sizeof(buf)) > 0 && strncmp(buf, "running", 7)) {
		t->syscall = strtol(buf, &p, 10);
		for (int i = 0; i < 3 && *p; i++)
			t->args[i] = strtoul(p, &p, 16);
	}
	vfork_wait(pid, t);
	snprintf(path, sizeof(path), "/proc/%u/task/%u/stack", pid, t->tid);
	/* a running thread's kernel stack is whatever interrupted it: noise */
	if (t->state == 'R' || read_file(path, buf, sizeof(buf)) <= 0)
		return;
	for (line = strtok_r(buf, "\n", &save); line && t->nk < MAX_KFRAMES;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sym = strchr(line, ']'), name[256];

		if (!sym)
			continue;
		sym++;
		while (*sym == ' ')
			sym++;
		sym[strcspn(sym, "+ ")] = '\0';
		if (!*sym)
			continue;
		snprintf(name, sizeof(name), "%s_[k]", sym);
		t->kframes[t->nk++] = strdup(name);
	}
}

static int add_thread(void *ctx, uint32_t tid)
{
	struct dump *d = ctx;

	d->listed++;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		struct dthread *v = realloc(d->t, cap * sizeof(*v));

		if (!v)
			return 0; /* counted, not shown: "showing N of M threads" */
		memset(v + d->cap, 0, (cap - d->cap) * sizeof(*v));
		d->t = v;
		d->cap = cap;
	}
	d->t[d->n++].tid = tid;
	return 0;
}

static int list_threads(struct dump *d)
{
	int err = proc__for_each_task(d->pid, add_thread, d);

	return err < 0 ? err : 0;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct dthread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Stop every thread of [lo, hi) at once (a consistent picture), then let
 * them all go: the BPF program captured each at its switch into the stop.
 * A thread that cannot stop (vfork, another uninterruptible wait) is shown
 * with what /proc says, never waited for past STOP_TIMEOUT_NS.
 */
static void stop_and_go(struct dump *d, size_t lo, size_t hi)
{
	uint64_t t0 = 0, end;
	size_t waiting = 0;
	int st;

	for (size_t i = lo; i < hi; i++)
		read_thread(d->pid, &d->t[i]);
	for (size_t i = lo; i < hi; i++) {
		struct dthread *t = &d->t[i];

		if (t->vfork_child) {
			t->why =
				"a thread in vfork() cannot be stopped until its child execs or exits";
			continue;
		}
		if (ptrace(PTRACE_SEIZE, t->tid, NULL, NULL)) {
			t->why = errno != EPERM ? "cannot ptrace it"
				 : caps__missing(CAPS_PTRACE)
					 ? "cannot ptrace it: bpfprof lacks CAP_SYS_PTRACE"
					 : "cannot ptrace it (traced already, or not allowed)";
			continue;
		}
		t->seized = true;
	}
	t0 = mono_ns();
	for (size_t i = lo; i < hi; i++)
		if (d->t[i].seized && ptrace(PTRACE_INTERRUPT, d->t[i].tid, NULL, NULL))
			d->t[i].why = "could not be interrupted";
	for (size_t i = lo; i < hi; i++)
		waiting += d->t[i].seized && !d->t[i].why;
	end = t0 + STOP_TIMEOUT_NS;
	while (waiting) {
		for (size_t i = lo; i < hi; i++) {
			struct dthread *t = &d->t[i];
			pid_t r;

			if (!t->seized || t->why || t->stopped)
				continue;
			r = waitpid(t->tid, &st, __WALL | WNOHANG);
			if (!r)
				continue;
			if (r == (pid_t)t->tid && WIFSTOPPED(st))
				t->stopped = true;
			else
				t->why = "exited";
			waiting--;
		}
		if (!waiting || mono_ns() > end)
			break;
		sleep_ms(1);
	}
	for (size_t i = lo; i < hi; i++) {
		struct dthread *t = &d->t[i];

		if (t->stopped)
			ptrace(PTRACE_DETACH, t->tid, NULL, NULL);
		else if (t->seized && !t->why)
			/* still attached: detached by the kernel when bpfprof exits */
			t->why = "did not stop within 1 s (in a wait no signal interrupts)";
	}
	if (mono_ns() - t0 > d->stopped_ns)
		d->stopped_ns = mono_ns() - t0;
	d->batches++;
	d->lo = lo;
	d->hi = hi;
	d->deadline = mono_ns() + CAPTURE_TIMEOUT_NS;
}

static void next_batch(struct dump *d)
{
	size_t lo = d->next, hi = lo + BATCH < d->n ? lo + BATCH : d->n;

	d->next = hi;
	stop_and_go(d, lo, hi);
}

static int dump_setup(struct recorder *r, void **priv)
{
	struct dump *d = r->mode->arg;
	int err, v;

	*priv = d;
	err = offcpu__open(r, &d->skel, true);
	if (err)
		return err;
	v = rec__value(r, "samples", "count");
	rec__default_value(r, v);
	return 0;
}

static int dump_start(struct recorder *r, void *priv)
{
	struct dump *d = priv;
	int err = offcpu_bpf__attach(d->skel);

	(void)r;
	if (err) {
		pr_err("cannot attach the dump program: %s", strerror(-err));
		return err;
	}
	next_batch(d);
	return 0;
}

static struct dthread *find(struct dump *d, uint32_t tid)
{
	struct dthread key = { .tid = tid };

	return bsearch(&key, d->t, d->n, sizeof(*d->t), cmp_tid);
}

static void dump_record(struct recorder *r, void *priv, const struct prof_sample_hdr *h,
			const void *data, size_t size)
{
	int64_t v[STACK_MAX_VALUES] = { 1 };
	struct dump *d = priv;
	struct dthread *t = find(d, h->tid);
	struct stack_key *k;

	if (!t || t->captured)
		return;
	k = rec__key(r, data, size);
	if (!k)
		return;
	t->captured = true;
	d->captured++;
	if (stacks__add(r->stacks, k, v, r->nvalues))
		r->st.agg_failed++;
}

static void dump_poll(struct recorder *r, void *priv)
{
	struct dump *d = priv;
	size_t want = 0, got = 0;

	for (size_t i = d->lo; i < d->hi; i++) {
		want += d->t[i].stopped;
		got += d->t[i].stopped && d->t[i].captured;
	}
	if (got < want && mono_ns() <= d->deadline)
		return;
	if (d->next < d->n)
		next_batch(d); /* the last batch's stacks are in: the next one */
	else
		rec__stop(r);
}

/* Each thread's sample in the built profile (its "tid" label), and whether it held the GIL. */
static void match_samples(struct dump *d)
{
	for (size_t i = 0; d->prof && i < d->prof->nsamples; i++) {
		const struct psample *s = &d->prof->samples[i];
		const char *gil = NULL;
		struct dthread *t = NULL;

		for (uint32_t j = 0; j < s->nlabels; j++) {
			if (!strcmp(s->labels[j].key, "tid"))
				t = find(d, (uint32_t)s->labels[j].num);
			if (!strcmp(s->labels[j].key, "gil"))
				gil = s->labels[j].str;
		}
		if (t && !t->sample) {
			t->sample = s;
			t->gil = gil;
		}
	}
}

static void dump_finish(struct recorder *r, void *priv)
{
	struct dump *d = priv;
	struct build_opts bo = { .per_thread = true, .nvalues = r->nvalues };
	struct build_stats bs;

	writeout__python(r, &bo);
	memcpy(bo.value_types, r->values, sizeof(r->values));
	if (profile__build(&d->prof, r->stacks, r->objs, NULL, &bo, &bs)) {
		pr_err("cannot symbolize the stacks");
		d->prof = NULL;
	}
	match_samples(d);
	for (size_t i = 0; i < d->n; i++)
		if (d->t[i].stopped && !d->t[i].captured && !d->t[i].why)
			d->t[i].why = "its stack did not arrive";
}

static void dump_destroy(struct recorder *r, void *priv)
{
	struct dump *d = priv;

	(void)r;
	if (d)
		offcpu_bpf__destroy(d->skel);
}

static const struct rec_feature dump_feature = {
	.name = "dump",
	.setup = dump_setup,
	.start = dump_start,
	.on_record = dump_record,
	.poll = dump_poll,
	.finish = dump_finish,
	.destroy = dump_destroy,
	.kinds = { SAMPLE_OFF_CPU },
};

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void describe_syscall(const struct dthread *t, char *buf, size_t len)
{
	char nb[32];

	if (t->syscall >= 0)
		snprintf(buf, len, "%s", syscall_name(t->syscall, nb, sizeof(nb)));
	else
		buf[0] = '\0';
}

/* "N threads, stopped for X ms", or how many were shown, in how many batches */
static void print_header(struct dump *d, FILE *f)
{
	fprintf(f, "Process %u (%s): %zu threads", d->pid, d->comm, d->listed);
	if (d->batches > 1)
		fprintf(f, ", stopped %d at a time (%zu batches), each batch for at most %.3f ms",
			BATCH, d->batches, d->stopped_ns / 1e6);
	else
		fprintf(f, ", stopped for %.3f ms", d->stopped_ns / 1e6);
	fputc('\n', f);
	if (d->n < d->listed)
		fprintf(f,
			"Showing %zu of %zu threads: the others could not be listed (out of "
			"memory)\n",
			d->n, d->listed);
}

static const char *state_of(const struct dthread *t)
{
	return t->vfork_child ? "waiting in vfork" : state_name(t->state);
}

static void print_text(struct dump *d, FILE *f)
{
	print_header(d, f);
	for (size_t i = 0; i < d->n; i++) {
		struct dthread *t = &d->t[i];
		const struct psample *s = t->sample;
		char sc[64];

		describe_syscall(t, sc, sizeof(sc));
		fprintf(f, "\nThread %u \"%s\" ", t->tid, t->name);
		if (t->vfork_child == UINT32_MAX)
			fprintf(f, "waiting in %s() for its child to exec or exit", sc);
		else if (t->vfork_child)
			fprintf(f, "waiting in %s() for its child %u to exec or exit", sc,
				t->vfork_child);
		else
			fputs(state_name(t->state), f);
		if (sc[0] && t->state != 'R' && !t->vfork_child)
			fprintf(f, " in %s()", sc);
		if (t->gil)
			fprintf(f, ", %s",
				!strcmp(t->gil, "held") ? "holding the GIL"
							: "not holding the GIL");
		fputc('\n', f);
		for (int j = 0; j < t->nk; j++)
			fprintf(f, "    %s\n", t->kframes[j]);
		if (!s) {
			fprintf(f, "    (no user stack: %s)\n", t->why ? t->why : "not captured");
			continue;
		}
		/* leaf first, as debuggers print; the two root frames (process, thread) left out */
		for (uint32_t j = s->nframes; j-- > 2;)
			fprintf(f, "    %s\n", d->prof->frames[s->frames[j]].name);
	}
}

static void print_json(struct dump *d, FILE *f)
{
	fprintf(f, "{\"pid\": %u, \"comm\": ", d->pid);
	json_str(f, d->comm);
	fprintf(f,
		", \"threads_total\": %zu, \"batches\": %zu, \"stopped_ms\": %.3f, \"threads\": [",
		d->listed, d->batches, d->stopped_ns / 1e6);
	for (size_t i = 0; i < d->n; i++) {
		struct dthread *t = &d->t[i];
		const char *gil = t->gil;
		const struct psample *s = t->sample;
		char sc[64], st[2] = { t->state, 0 };

		describe_syscall(t, sc, sizeof(sc));
		fprintf(f, "%s\n  {\"tid\": %u, \"name\": ", i ? "," : "", t->tid);
		json_str(f, t->name);
		fprintf(f, ", \"state\": ");
		json_str(f, st);
		fprintf(f, ", \"state_name\": \"%s\", \"vfork_child\": ", state_of(t));
		if (t->vfork_child && t->vfork_child != UINT32_MAX)
			fprintf(f, "%u", t->vfork_child);
		else
			fputs("null", f);
		fprintf(f, ", \"syscall\": ");
		if (sc[0] && t->state != 'R')
			json_str(f, sc);
		else
			fputs("null", f);
		fprintf(f, ", \"gil\": %s",
			gil ? (!strcmp(gil, "held") ? "true" : "false") : "null");
		fprintf(f, ", \"kernel\": [");
		for (int j = 0; j < t->nk; j++) {
			fputs(j ? ", " : "", f);
			json_str(f, t->kframes[j]);
		}
		fprintf(f, "], \"frames\": [");
		for (uint32_t j = s ? s->nframes : 0, first = 1; j-- > 2; first = 0) {
			fputs(first ? "" : ", ", f);
			json_str(f, d->prof->frames[s->frames[j]].name);
		}
		fprintf(f, "], \"error\": ");
		if (!s)
			json_str(f, t->why ? t->why : "not captured");
		else
			fputs("null", f);
		fputc('}', f);
	}
	fprintf(f, "\n]}\n");
}

static const char dump_usage[] =
	"Usage: bpfprof dump -p PID [--json]\n"
	"\n"
	"Print every thread of PID with its stack now: kernel frames (from\n"
	"/proc/PID/task/TID/stack), native frames and CPython frames, leaf first,\n"
	"with the thread's name, state, the syscall it sleeps in and whether it\n"
	"holds the GIL. Each thread is stopped for well under a millisecond\n"
	"(PTRACE_INTERRUPT, then detached; an interrupted syscall restarts); the\n"
	"time the process was stopped is printed.\n"
	"\n"
	"  -p, --pid PID     the process (required)\n"
	"      --json        one JSON object: pid, comm, threads_total, batches,\n"
	"                    stopped_ms, threads[] with tid, name, state, state_name,\n"
	"                    vfork_child, syscall, gil, kernel[], frames[] (leaf\n"
	"                    first), error\n"
	"      --no-python   native frames only\n"
	"  -v, --verbose     the recording's summary on stderr\n"
	"  -h, --help        this text\n"
	"\n"
	"Needs root (BPF, ptrace, /proc/PID/task/TID/stack).\n";

int dump__main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' }, { "json", no_argument, NULL, 'j' },
		{ "no-python", no_argument, NULL, 'P' }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },	 {},
	};
	struct dump d = { 0 };
	char path[64], *end;
	long pid = 0;
	int c, status, verbose = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:p:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			errno = 0;
			pid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || pid <= 0 || pid > 0x7fffffff) {
				pr_err("invalid pid '%s' for -p: expected a positive integer",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'P':
			env.no_python = true;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(dump_usage, stdout);
			return EXIT_OK;
		case ':':
			pr_err("option '%s' needs a value (see bpfprof dump --help)",
			       argv[optind - 1]);
			return EXIT_USAGE;
		default:
			cli__bad_option(argv[optind - 1], optopt, opts, "dump");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		pr_err("unexpected argument '%s' for dump", argv[optind]);
		return EXIT_USAGE;
	}
	if (!pid) {
		pr_err("dump needs a process: -p PID");
		return EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if (read_file(path, d.comm, sizeof(d.comm)) <= 0) {
		pr_err("no process with pid %ld (-p)", pid);
		return EXIT_USAGE;
	}
	d.comm[strcspn(d.comm, "\n")] = '\0';
	strsafe__inplace(d.comm, sizeof(d.comm));
	d.pid = pid;
	if (list_threads(&d) || !d.n) {
		pr_err("cannot list the threads of pid %ld", pid);
		free(d.t);
		return EXIT_RUNTIME;
	}
	qsort(d.t, d.n, sizeof(*d.t), cmp_tid);

	/* a recording of this one process with no sampler: only the dump feature */
	env.pids = malloc(sizeof(*env.pids));
	if (!env.pids)
		return EXIT_RUNTIME;
	env.pids[0] = pid;
	env.npids = 1;
	env.all = false;
	env.ev_cpu = false;
	env.no_kernel = true; /* the BPF kernel stack is the ptrace stop: /proc has the real one */
	env.per_thread = true;
	log_level = verbose ? 1 + verbose : 0;
	status = record__run(&(struct rec_mode){
		.name = "dump", .features = rec_features, .view = &dump_feature, .arg = &d });
	if (status == EXIT_OK) {
		if (json)
			print_json(&d, stdout);
		else
			print_text(&d, stdout);
		if (fflush(stdout))
			status = EXIT_RUNTIME;
	}
	profile__free(d.prof);
	for (size_t i = 0; i < d.n; i++)
		for (int j = 0; j < d.t[i].nk; j++)
			free(d.t[i].kframes[j]);
	free(d.t);
	return status;
}
