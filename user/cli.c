// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * getopt_long rather than argp: the CLI contract wants every bad value to be
 * exactly one stderr line naming it, and argp's own messages are two lines
 * ("... Try `--help'") with no way to reword them short of ARGP_NO_ERRS and
 * re-implementing its error paths anyway.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/types.h>

#include "bpfprof.h"
#include "cli.h"
#include "proc/cgroup.h"
#include "util/log.h"

struct env env = {
	.freq = 99,
	.ringbuf_bytes = 8 << 20,
	.max_targets = 8192,
	.unwind_rows = 4 << 20,
	.unwind_procs = 4096,
	.interval = 60,
	.keep = 1440,
	.app_name = "bpfprof.cpu",
	.min_block_ns = 1000000,
	.alloc_rate = 512 * 1024,
	.alloc_max_live = 1 << 19,
};

static bool freq_given;

static const char usage_text[] =
	"Usage: bpfprof [record] [TARGET] [EVENTS] [OPTIONS] [-- CMD [ARG...]]\n"
	"       bpfprof top [TARGET] [--thread T] [OPTIONS]\n"
	"                                        live view of the hottest functions, every\n"
	"                                        second (keys: s self, t total, p pause,\n"
	"                                        q quit; plain text when not a terminal);\n"
	"                                        --thread T: only threads whose name or\n"
	"                                        tid contains T\n"
	"       bpfprof dump -p PID [--json]     every thread's stack now (see dump --help)\n"
	"       bpfprof flamegraph [IN.folded] [-o OUT.svg] [--inverted] [--title T]\n"
	"\n"
	"Profile the whole machine, some processes, a container or a command: on-CPU\n"
	"samples, heap allocations, time blocked, CUDA calls -- each with kernel, native\n"
	"and CPython frames in one stack -- written as folded stacks, pprof, a Chrome\n"
	"trace or an interactive SVG flame graph. 'flamegraph' renders folded stacks\n"
	"(any tool's, stdin without IN or with '-') as that SVG.\n"
	"\n"
	"TARGET (default: whole machine)\n"
	"  -a, --all                 every process on every CPU (the default)\n"
	"  -p, --pid PID[,PID...]    these processes, all their threads\n"
	"  -- CMD [ARG...]           start CMD, profile it and its children, stop when it exits\n"
	"      --cgroup PATH         only tasks in this cgroup v2 directory or below it (also\n"
	"                            cgroups created there later); PATH in the file system\n"
	"                            or as /proc/PID/cgroup shows it\n"
	"      --container ID        only tasks of this container: full id or unique prefix\n"
	"                            (docker, containerd, cri-o, podman, kubepods cgroups)\n"
	"\n"
	"EVENTS (any combination; default --cpu)\n"
	"      --cpu                 on-CPU stack sampling\n"
	"      --cuda                CUDA driver calls (libcuda) with CPU stacks; GPU kernel\n"
	"                            and copy timings where the CUPTI injection library is\n"
	"                            loaded (set for -- CMD: CUDA_INJECTION64_PATH);\n"
	"                            launches are timed only for -f chrome (else one probe\n"
	"                            per launch, at its entry)\n"
	"      --off-cpu             time blocked (sleeping, waiting on I/O or a lock, or\n"
	"                            preempted), by the stack it blocked in; nanoseconds\n"
	"      --wall                on-CPU + off-CPU in one unit (nanoseconds): where each\n"
	"                            thread's wall-clock time went (like py-spy --idle)\n"
	"      --alloc               heap: sampled malloc-family calls and anonymous mmaps,\n"
	"                            where memory was allocated and where it is still held\n"
	"                            (-- CMD: sampled in process by libbpfprof_heap.so,\n"
	"                            set in its LD_PRELOAD; -p/-a: uprobes)\n"
	"\n"
	"OPTIONS\n"
	"  -F, --freq HZ             samples per second per CPU (default 99, 19 with\n"
	"                            --continuous; at most\n"
	"                            /proc/sys/kernel/perf_event_max_sample_rate)\n"
	"  -d, --duration SECS       stop after SECS (default: Ctrl-C, or when CMD exits)\n"
	"      --min-block TIME      off-CPU: blocks at least TIME long are each recorded;\n"
	"                            a shorter block of length d is recorded with chance\n"
	"                            d/TIME and weight TIME (unbiased, bounded cost);\n"
	"                            TIME is N[ns|us|ms|s], a bare N is microseconds\n"
	"                            (default 1ms)\n"
	"      --unwind MODE         native user stacks: auto (default: .eh_frame tables,\n"
	"                            frame pointers until a process's tables are ready),\n"
	"                            dwarf (tables only), fp (frame pointers only)\n"
	"  -o, --output PATH         where to write ('-' = stdout, the default)\n"
	"  -f, --format FMT          folded | pprof | chrome | svg; default from the\n"
	"                            extension of -o: .pb.gz/.pprof -> pprof, .json ->\n"
	"                            chrome (Perfetto, chrome://tracing), .svg -> svg,\n"
	"                            anything else -> folded; stdout -> folded\n"
	"      --inverted            svg: icicle graph, stacks merged leaf first (callers)\n"
	"      --title TEXT          svg: the title (default 'Flame Graph')\n"
	"      --cuda-lib PATH       libcuda to probe (default: found in each process's maps)\n"
	"      --cuda-weight W       launches (default) | gpu-time: what a [cuda] kernel\n"
	"                            leaf counts in folded output\n"
	"      --per-pid             root frame 'comm [pid]' instead of 'comm'\n"
	"      --per-thread          a 'thread-name [tid]' frame under the process\n"
	"      --per-container       root frame: the short container id (12 digits), or the\n"
	"                            cgroup path of tasks in no container\n"
	"      --no-kernel           leave out kernel frames\n"
	"      --no-user             leave out user-space frames\n"
	"      --no-python           native frames only (no CPython frames)\n"
	"      --alloc-rate BYTES    --alloc: mean bytes between samples (default 524288;\n"
	"                            suffixes k, m, g; 1 = record every call)\n"
	"      --alloc-metric M      --alloc: what folded shows: inuse_space (default: bytes\n"
	"                            still allocated at the end), inuse_objects,\n"
	"                            alloc_space, alloc_objects (everything allocated),\n"
	"                            peak_space (in use when the total in use peaked)\n"
	"      --gil                 keep only Python samples whose thread held the GIL\n"
	"                            (CPython 3.8-3.13; pprof labels every Python sample\n"
	"                            gil=held|released)\n"
	"\n"
	"CONTINUOUS MODE\n"
	"      --continuous DIR      keep running; every interval write one gzipped pprof\n"
	"                            into DIR, named by its start time (UTC), e.g.\n"
	"                            bpfprof-20261122T101500.123Z.pb.gz; one status line\n"
	"                            per interval on stderr; SIGTERM/SIGINT write the\n"
	"                            current interval and exit, SIGHUP starts a new one\n"
	"      --interval SECS       seconds per file (default 60; fractions allowed)\n"
	"      --keep N              keep at most N files in DIR, oldest deleted (default\n"
	"                            1440; 0 keeps all)\n"
	"      --upload URL          also push each interval to a Pyroscope server\n"
	"                            (URL/ingest, pprof), from a thread that retries with\n"
	"                            backoff; failures are counted, the files stay\n"
	"      --app-name NAME       Pyroscope application name (default bpfprof.cpu)\n"
	"\n"
	"  -v, --verbose             more detail on stderr (repeat for debug)\n"
	"  -q, --quiet               no summary, no warnings\n"
	"  -h, --help                this text\n"
	"  -V, --version             print the version\n"
	"\n"
	"Output: folded stacks are 'root;caller;...;leaf COUNT' lines for flamegraph.pl;\n"
	"kernel frames end in '_[k]'; Python frames read 'qualname (file.py:line)' in\n"
	"place of the interpreter's eval loop; unresolved frames read 'module+0xADDR'\n"
	"(an ELF address, for addr2line -e module); '[truncated]' starts a stack deeper\n"
	"than 128 frames. pprof has sample types samples/count and\n"
	"cpu/nanoseconds; with --alloc alloc_objects/count, alloc_space/bytes,\n"
	"inuse_objects/count, inuse_space/bytes, peak_space/bytes (estimates scaled up\n"
	"from the samples),\n"
	"and folded shows --alloc-metric, also with --cpu. A Chrome trace has CPU\n"
	"samples as slices per thread, CUDA calls, GPU kernels and copies per stream\n"
	"with flows from their launches, and with --alloc a 'heap in use' counter per\n"
	"process. A summary line on stderr\n"
	"tells samples taken, lost and why.\n"
	"\n"
	"Needs root, or CAP_BPF + CAP_PERFMON (+ CAP_SYS_PTRACE to read other users'\n"
	"/proc/PID/maps and map_files).\n"
	"\n"
	"EXAMPLES\n"
	"  bpfprof -a -d 5 > machine.folded           whole machine for 5 s, folded to stdout\n"
	"  bpfprof -p 1234 -F 499 -o app.pb.gz        one process at 499 Hz, pprof\n"
	"  bpfprof -o run.folded -- ./my_program arg  launch and profile a command and its children\n"
	"  bpfprof -a --per-pid -d 10 | flamegraph.pl > cpu.svg\n"
	"  bpfprof --wall -o wall.folded -- ./my_program  where its wall-clock time went\n"
	"  bpfprof --off-cpu -p 1234 -d 10            what it waits on, by stack\n"
	"  bpfprof top -p 1234                        live view of one process\n"
	"  bpfprof dump -p 1234                       every thread's stack now (a hang)\n"
	"  bpfprof --alloc -o leaks.folded -- ./my_program   what it still held at exit\n"
	"  bpfprof --alloc -p 1234 -d 30 -o heap.pb.gz       then: go tool pprof\n"
	"                                             -sample_index=alloc_space heap.pb.gz\n"
	"  bpfprof -a -d 10 -o cpu.svg                interactive flame graph (click, search)\n"
	"  bpfprof --cuda -o launches.folded -- python3 train.py   which line launched what\n"
	"  bpfprof --cpu --cuda -o trace.json -- python3 train.py  timeline for ui.perfetto.dev\n"
	"  bpfprof flamegraph perf.folded -o perf.svg render another tool's folded stacks\n"
	"  go tool pprof -http :8080 app.pb.gz        browse a pprof profile\n"
	"  bpfprof --container 3f2a9c1b -d 10 -o c.pb.gz   one container (id prefix)\n"
	"  bpfprof -a --per-container -d 10 > by-container.folded\n"
	"  bpfprof --continuous /var/lib/bpfprof --upload http://pyroscope:4040\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 bad usage.\n";

void cli__usage(FILE *out)
{
	fputs(usage_text, out);
}

enum {
	OPT_PER_PID = 256,
	OPT_PER_THREAD,
	OPT_NO_KERNEL,
	OPT_NO_USER,
	OPT_UNWIND,
	OPT_NO_PYTHON,
	OPT_GIL,
	OPT_CPU,
	OPT_CGROUP,
	OPT_CONTAINER,
	OPT_PER_CONTAINER,
	OPT_CONTINUOUS,
	OPT_INTERVAL,
	OPT_KEEP,
	OPT_UPLOAD,
	OPT_APP_NAME,
	OPT_CUDA,
	OPT_CUDA_LIB,
	OPT_CUDA_WEIGHT,
	OPT_OFF_CPU,
	OPT_WALL,
	OPT_MIN_BLOCK,
	OPT_ALLOC,
	OPT_ALLOC_RATE,
	OPT_ALLOC_METRIC,
	OPT_INVERTED,
	OPT_TITLE,
	OPT_THREAD,
};

static const struct option long_opts[] = {
	{ "all", no_argument, NULL, 'a' },
	{ "pid", required_argument, NULL, 'p' },
	{ "freq", required_argument, NULL, 'F' },
	{ "duration", required_argument, NULL, 'd' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, 'f' },
	{ "per-pid", no_argument, NULL, OPT_PER_PID },
	{ "per-thread", no_argument, NULL, OPT_PER_THREAD },
	{ "no-kernel", no_argument, NULL, OPT_NO_KERNEL },
	{ "no-user", no_argument, NULL, OPT_NO_USER },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
	{ "gil", no_argument, NULL, OPT_GIL },
	{ "cpu", no_argument, NULL, OPT_CPU },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "container", required_argument, NULL, OPT_CONTAINER },
	{ "per-container", no_argument, NULL, OPT_PER_CONTAINER },
	{ "continuous", required_argument, NULL, OPT_CONTINUOUS },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "upload", required_argument, NULL, OPT_UPLOAD },
	{ "app-name", required_argument, NULL, OPT_APP_NAME },
	{ "cuda", no_argument, NULL, OPT_CUDA },
	{ "cuda-lib", required_argument, NULL, OPT_CUDA_LIB },
	{ "cuda-weight", required_argument, NULL, OPT_CUDA_WEIGHT },
	{ "off-cpu", no_argument, NULL, OPT_OFF_CPU },
	{ "wall", no_argument, NULL, OPT_WALL },
	{ "min-block", required_argument, NULL, OPT_MIN_BLOCK },
	{ "alloc", no_argument, NULL, OPT_ALLOC },
	{ "alloc-rate", required_argument, NULL, OPT_ALLOC_RATE },
	{ "alloc-metric", required_argument, NULL, OPT_ALLOC_METRIC },
	{ "inverted", no_argument, NULL, OPT_INVERTED },
	{ "title", required_argument, NULL, OPT_TITLE },
	{ "thread", required_argument, NULL, OPT_THREAD },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{},
};

static int read_max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	int v = 0;

	if (!f)
		return -errno;
	if (fscanf(f, "%d", &v) != 1)
		v = -EINVAL;
	fclose(f);
	return v;
}

static int parse_freq(const char *s)
{
	char *end;
	long v;
	int max;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0) {
		pr_err("invalid frequency '%s' for -F: expected a positive integer (Hz)", s);
		return -EINVAL;
	}
	max = read_max_sample_rate();
	if (max > 0 && v > max) {
		pr_err("frequency %ld Hz for -F is above the kernel's maximum of %d "
		       "(/proc/sys/kernel/perf_event_max_sample_rate)",
		       v, max);
		return -EINVAL;
	}
	env.freq = v;
	return 0;
}

static int parse_duration(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 365.0 * 86400) {
		pr_err("invalid duration '%s' for -d: expected a positive number of seconds", s);
		return -EINVAL;
	}
	env.duration = v;
	return 0;
}

static int parse_interval(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0.01 || v > 86400) {
		pr_err("invalid interval '%s' for --interval: expected seconds from 0.01 to 86400",
		       s);
		return -EINVAL;
	}
	env.interval = v;
	return 0;
}

static int parse_keep(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 10000000) {
		pr_err("invalid count '%s' for --keep: expected a number of files (0 = keep all)",
		       s);
		return -EINVAL;
	}
	env.keep = v;
	return 0;
}

static int parse_app_name(const char *s)
{
	if (!*s || strlen(s) > 200 || strpbrk(s, "{}=,&? \t\n\"")) {
		pr_err("invalid application name '%s' for --app-name: expected letters, digits, "
		       "'.', '-' or '_'",
		       s);
		return -EINVAL;
	}
	env.app_name = s;
	return 0;
}

static int parse_url(const char *s)
{
	if (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)) {
		pr_err("invalid URL '%s' for --upload: expected http://HOST[:PORT] or https://...",
		       s);
		return -EINVAL;
	}
	env.upload_url = s;
	return 0;
}

/* --cgroup / --container to one directory: a bad one is a usage error. */
static int resolve_cgroup(void)
{
	struct cgroup_target *t;
	int err;

	if (!env.cgroup_arg && !env.container_arg)
		return 0;
	if (env.cgroup_arg && env.container_arg) {
		pr_err("choose one of --cgroup and --container");
		return -EINVAL;
	}
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	err = env.cgroup_arg ? cgroup__resolve_path(env.cgroup_arg, t)
			     : cgroup__resolve_container(env.container_arg, t);
	if (!err) {
		env.cgroup_path = strdup(t->path);
		env.cgroup_rel = strdup(t->rel);
		if (!env.cgroup_path || !env.cgroup_rel)
			err = -ENOMEM;
	}
	free(t);
	return err;
}

/* --min-block: N[ns|us|ms|s], bare N in microseconds (as bcc's offcputime). */
static int parse_min_block(const char *s)
{
	static const struct {
		const char *sfx;
		double mult;
	} units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "", 1e3 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!errno && end != s && isfinite(v) && v > 0) {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strcmp(end, units[i].sfx))
				continue;
			v *= units[i].mult;
			if (v < 1 || v > 3600e9)
				break;
			env.min_block_ns = (uint64_t)v;
			return 0;
		}
	}
	pr_err("invalid time '%s' for --min-block: expected N[ns|us|ms|s] between 1ns and 1h", s);
	return -EINVAL;
}

static int add_pid(const char *s, const char *end)
{
	char buf[32], path[64];
	uint32_t *n;
	char *e;
	long v;

	if (end - s <= 0 || (size_t)(end - s) >= sizeof(buf)) {
		pr_err("invalid pid '%.*s' for -p: expected PID[,PID...]", (int)(end - s), s);
		return -EINVAL;
	}
	memcpy(buf, s, end - s);
	buf[end - s] = '\0';
	errno = 0;
	v = strtol(buf, &e, 10);
	if (errno || e == buf || *e || v <= 0 || v > INT_MAX) {
		pr_err("invalid pid '%s' for -p: expected a positive integer", buf);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%ld/stat", v);
	if (access(path, F_OK)) {
		pr_err("no process with pid %ld (-p)", v);
		return -ESRCH;
	}
	n = realloc(env.pids, (env.npids + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	env.pids = n;
	env.pids[env.npids++] = v;
	return 0;
}

static int parse_pids(const char *s)
{
	const char *p = s, *comma;
	int err;

	for (;;) {
		comma = strchr(p, ',');
		err = add_pid(p, comma ? comma : p + strlen(p));
		if (err)
			return err;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* BYTES with an optional k/m/g suffix (powers of 1024) */
static int parse_alloc_rate(const char *s)
{
	unsigned long long v, mult = 1;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!errno && end != s && *s != '-' && end[0] && !end[1]) {
		switch (*end) {
		case 'k':
		case 'K':
			mult = 1ULL << 10;
			end++;
			break;
		case 'm':
		case 'M':
			mult = 1ULL << 20;
			end++;
			break;
		case 'g':
		case 'G':
			mult = 1ULL << 30;
			end++;
			break;
		}
	}
	if (errno || end == s || *end || *s == '-' || v == 0 || v > (1ULL << 40) / mult) {
		pr_err("invalid rate '%s' for --alloc-rate: expected bytes from 1 to 1t "
		       "(suffixes k, m, g)",
		       s);
		return -EINVAL;
	}
	env.alloc_rate = v * mult;
	return 0;
}

static int parse_alloc_metric(const char *s)
{
	static const char *const names[] = {
		[ALLOC_INUSE_SPACE] = "inuse_space", [ALLOC_INUSE_OBJECTS] = "inuse_objects",
		[ALLOC_ALLOC_SPACE] = "alloc_space", [ALLOC_ALLOC_OBJECTS] = "alloc_objects",
		[ALLOC_PEAK_SPACE] = "peak_space",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			env.alloc_metric = i;
			env.alloc_metric_set = true;
			return 0;
		}
	pr_err("unknown metric '%s' for --alloc-metric: expected inuse_space, inuse_objects, "
	       "alloc_space, alloc_objects or peak_space",
	       s);
	return -EINVAL;
}

static int parse_format(const char *s)
{
	if (!strcmp(s, "folded"))
		env.format = FMT_FOLDED;
	else if (!strcmp(s, "pprof"))
		env.format = FMT_PPROF;
	else if (!strcmp(s, "chrome"))
		env.format = FMT_CHROME;
	else if (!strcmp(s, "svg"))
		env.format = FMT_SVG;
	else {
		pr_err("unknown format '%s' for -f: expected folded, pprof, chrome or svg", s);
		return -EINVAL;
	}
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static int format_from_output(void)
{
	const char *o = env.output;

	if (env.format)
		return 0;
	if (!o || !strcmp(o, "-")) {
		env.format = FMT_FOLDED;
		return 0;
	}
	if (ends_with(o, ".pb.gz") || ends_with(o, ".pprof") || ends_with(o, ".pb")) {
		env.format = FMT_PPROF;
	} else if (ends_with(o, ".json")) {
		env.format = FMT_CHROME;
	} else if (ends_with(o, ".svg")) {
		env.format = FMT_SVG;
	} else {
		env.format = FMT_FOLDED;
	}
	return 0;
}

/* --continuous and the options that only make sense with it. */
static int check_continuous(bool interval_given, bool keep_given, bool app_given)
{
	const char *stray = interval_given   ? "--interval"
			    : keep_given     ? "--keep"
			    : env.upload_url ? "--upload"
			    : app_given	     ? "--app-name"
					     : NULL;
	struct stat st;

	if (!env.continuous_dir) {
		if (stray) {
			pr_err("%s needs --continuous DIR", stray);
			return -EINVAL;
		}
		return 0;
	}
	if (env.output) {
		pr_err("--continuous writes into its directory: drop -o");
		return -EINVAL;
	}
	if (env.format && env.format != FMT_PPROF) {
		pr_err("--continuous writes pprof: drop -f");
		return -EINVAL;
	}
	/*
	 * These keep per-stack state across the run (live heap blocks, launches
	 * waiting for their GPU record, wall = cpu + off-cpu at the end) that
	 * the per-interval reset of the stack table would cut.
	 */
	if (env.ev_alloc || env.ev_cuda || env.ev_wall) {
		pr_err("%s is not available with --continuous (use --cpu and/or --off-cpu)",
		       env.ev_alloc  ? "--alloc"
		       : env.ev_cuda ? "--cuda"
				     : "--wall");
		return -EINVAL;
	}
	if (stat(env.continuous_dir, &st) || !S_ISDIR(st.st_mode) ||
	    access(env.continuous_dir, W_OK | X_OK)) {
		pr_err("--continuous '%s': not a writable directory", env.continuous_dir);
		return -EINVAL;
	}
	env.format = FMT_PPROF;
	if (!freq_given)
		env.freq = 19;
	return 0;
}

int cli__parse(int argc, char **argv)
{
	bool interval_given = false, keep_given = false, app_given = false;
	int c, err = 0;
	bool rate_set = false;

	opterr = 0; /* we print our own one-line messages */
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:ap:F:d:o:f:vqhV", long_opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			env.all = true;
			break;
		case 'p':
			err = parse_pids(optarg);
			break;
		case 'F':
			err = parse_freq(optarg);
			freq_given = true;
			break;
		case 'd':
			err = parse_duration(optarg);
			break;
		case 'o':
			if (!*optarg) {
				pr_err("empty path for -o");
				err = -EINVAL;
			}
			env.output = optarg;
			break;
		case 'f':
			err = parse_format(optarg);
			break;
		case OPT_PER_PID:
			env.per_pid = true;
			break;
		case OPT_PER_THREAD:
			env.per_thread = true;
			break;
		case OPT_NO_KERNEL:
			env.no_kernel = true;
			break;
		case OPT_NO_USER:
			env.no_user = true;
			break;
		case OPT_NO_PYTHON:
			env.no_python = true;
			break;
		case OPT_GIL:
			env.gil = true;
			break;
		case OPT_CPU:
			env.ev_cpu = true;
			break;
		case OPT_CGROUP:
			env.cgroup_arg = optarg;
			break;
		case OPT_CONTAINER:
			env.container_arg = optarg;
			break;
		case OPT_PER_CONTAINER:
			env.per_container = true;
			break;
		case OPT_CONTINUOUS:
			if (!*optarg) {
				pr_err("empty directory for --continuous");
				err = -EINVAL;
			}
			env.continuous_dir = optarg;
			break;
		case OPT_INTERVAL:
			err = parse_interval(optarg);
			interval_given = true;
			break;
		case OPT_KEEP:
			err = parse_keep(optarg);
			keep_given = true;
			break;
		case OPT_UPLOAD:
			err = parse_url(optarg);
			break;
		case OPT_APP_NAME:
			err = parse_app_name(optarg);
			app_given = true;
			break;
		case OPT_CUDA:
			env.ev_cuda = true;
			break;
		case OPT_CUDA_LIB:
			env.cuda_lib = optarg;
			break;
		case OPT_CUDA_WEIGHT:
			if (!strcmp(optarg, "launches")) {
				env.cuda_weight = CUDA_WEIGHT_LAUNCHES;
			} else if (!strcmp(optarg, "gpu-time")) {
				env.cuda_weight = CUDA_WEIGHT_GPU_TIME;
			} else {
				pr_err("unknown --cuda-weight '%s': expected launches or gpu-time",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_OFF_CPU:
			env.ev_off_cpu = true;
			break;
		case OPT_WALL:
			env.ev_wall = true;
			break;
		case OPT_MIN_BLOCK:
			err = parse_min_block(optarg);
			break;
		case OPT_ALLOC:
			env.ev_alloc = true;
			break;
		case OPT_ALLOC_RATE:
			err = parse_alloc_rate(optarg);
			rate_set = true;
			break;
		case OPT_ALLOC_METRIC:
			err = parse_alloc_metric(optarg);
			break;
		case OPT_INVERTED:
			env.inverted = true;
			break;
		case OPT_THREAD:
			if (!*optarg) {
				pr_err("empty filter for --thread");
				err = -EINVAL;
			}
			env.thread_filter = optarg;
			break;
		case OPT_TITLE:
			env.title = optarg;
			break;
		case OPT_UNWIND:
			if (!strcmp(optarg, "auto")) {
				env.unwind = UNWIND_AUTO;
			} else if (!strcmp(optarg, "fp")) {
				env.unwind = UNWIND_FP;
			} else if (!strcmp(optarg, "dwarf")) {
				env.unwind = UNWIND_DWARF;
			} else {
				pr_err("unknown unwinder '%s' for --unwind: expected auto, fp or dwarf",
				       optarg);
				err = -EINVAL;
			}
			break;
		case 'v':
			log_level = log_level < 1 ? 2 : log_level + 1;
			break;
		case 'q':
			log_level = 0;
			break;
		case 'h':
			cli__usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("bpfprof %s\n", BPFPROF_VERSION);
			return EXIT_OK;
		case ':':
			pr_err("option '%s' needs a value (see --help)", argv[optind - 1]);
			return EXIT_USAGE;
		case '?':
		default:
			if (optopt)
				pr_err("unknown option '-%c' (see --help)", optopt);
			else
				pr_err("unknown option '%s' (see --help)", argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (err)
			return EXIT_USAGE;
	}

	if (optind < argc) {
		if (strcmp(argv[optind - 1], "--")) {
			pr_err("unexpected argument '%s' (a command to run goes after '--')",
			       argv[optind]);
			return EXIT_USAGE;
		}
		env.cmd_argv = &argv[optind];
	} else if (optind > 1 && !strcmp(argv[optind - 1], "--")) {
		pr_err("no command after '--'");
		return EXIT_USAGE;
	}

	if (!!env.all + !!env.npids + !!env.cmd_argv > 1) {
		pr_err("choose one target: -a, -p PID or -- CMD");
		return EXIT_USAGE;
	}
	if (!env.npids && !env.cmd_argv)
		env.all = true;
	if (!env.ev_cpu && !env.ev_alloc && !env.ev_off_cpu && !env.ev_wall && !env.ev_cuda)
		env.ev_cpu = true;
	if (env.ev_wall) /* on-CPU time comes from the sampler */
		env.ev_cpu = true;
	if (env.no_kernel && env.no_user) {
		pr_err("--no-kernel and --no-user together leave no frames to record");
		return EXIT_USAGE;
	}
	if (env.gil && (env.no_python || env.no_user)) {
		pr_err("--gil needs Python frames: drop --no-python / --no-user");
		return EXIT_USAGE;
	}
	if (check_continuous(interval_given, keep_given, app_given))
		return EXIT_USAGE;
	if ((rate_set || env.alloc_metric_set) && !env.ev_alloc) {
		pr_err("%s is a heap profiling option: add --alloc",
		       rate_set ? "--alloc-rate" : "--alloc-metric");
		return EXIT_USAGE;
	}
	if (format_from_output())
		return EXIT_USAGE;
	if (resolve_cgroup())
		return EXIT_USAGE;
	env.want_cgroup = env.per_container || env.format == FMT_PPROF;
	if ((env.inverted || env.title) && env.format != FMT_SVG) {
		pr_err("%s applies to the svg format only (-f svg or -o FILE.svg)",
		       env.inverted ? "--inverted" : "--title");
		return EXIT_USAGE;
	}
	return -1;
}

void cli__free(void)
{
	free(env.pids);
	free(env.cgroup_path);
	free(env.cgroup_rel);
	env.cgroup_path = env.cgroup_rel = NULL;
	env.pids = NULL;
	env.npids = 0;
}
