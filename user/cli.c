// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * getopt_long rather than argp: the CLI contract wants every bad value to be
 * exactly one stderr line naming it, and argp's own messages are two lines
 * ("... Try `--help'") with no way to reword them short of ARGP_NO_ERRS and
 * re-implementing its error paths anyway.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "upload/upload.h"
#include "proc/cgroup.h"
#include "util/log.h"
#include "write/outpath.h"

struct env env = {
	.freq = 99,
	.ringbuf_bytes = 8 << 20,
	.max_targets = 8192,
	.unwind_rows = UNWIND_MEM_DEFAULT / sizeof(struct bpf_urow),
	.unwind_procs = 4096,
	.unwind_cache = UNWIND_CACHE_DEFAULT,
	.interval = 60,
	.keep = 1440,
	.app_name = "bpfprof.cpu",
	.min_block_ns = 1000000,
	.alloc_rate = 512 * 1024,
	.alloc_max_live = 1 << 19,
	.debuginfod_wait = 10,
};

/* options whose defaults depend on whether they were given */
static struct {
	bool freq, interval, keep, app_name, alloc_rate;
} given;

/* --help: the text before and after the options, which opts[] lists */
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
	"%OPTIONS%"
	"Output: folded stacks are 'root;caller;...;leaf COUNT' lines for flamegraph.pl;\n"
	"kernel frames end in '_[k]'; Python frames read 'qualname (file.py:line)' in\n"
	"place of the interpreter's eval loop; unresolved frames read 'module+0xADDR'\n"
	"(an ELF address, for addr2line -e module); '[truncated]' starts a stack deeper\n"
	"than 128 frames. pprof has sample types samples/count and\n"
	"cpu/nanoseconds (each sample: its thread's CPU time since its previous sample,\n"
	"by the kernel's account); with --alloc alloc_objects/count, alloc_space/bytes,\n"
	"inuse_objects/count, inuse_space/bytes, peak_space/bytes, finalize_space/bytes\n"
	"(estimates scaled up from the samples),\n"
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
	"  bpfprof --continuous /var/lib/bpfprof --upload https://pyroscope:4040 \\\n"
	"          --upload-auth-file /etc/bpfprof/upload-auth\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 bad usage; with -- CMD, CMD's own\n"
	"status (128+N when signal N ended it), as time(1) does, unless bpfprof failed.\n";

void cli__bad_option(const char *arg, int optopt, const struct option *opts, const char *sub)
{
	const char *sp = *sub ? " " : "";
	size_t n;

	if (!strncmp(arg, "--", 2) && strchr(arg, '=')) {
		n = strchr(arg, '=') - arg - 2;
		for (const struct option *o = opts; o->name; o++) {
			if (strlen(o->name) == n && !strncmp(o->name, arg + 2, n) &&
			    o->has_arg == no_argument) {
				pr_err("option '--%s' takes no value (see bpfprof%s%s --help)",
				       o->name, sp, sub);
				return;
			}
		}
	}
	if (strncmp(arg, "--", 2) && optopt > 0 && optopt < 128)
		pr_err("unknown option '-%c' (see bpfprof%s%s --help)", optopt, sp, sub);
	else
		pr_err("unknown option '%s' (see bpfprof%s%s --help)", arg, sp, sub);
}

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

static int parse_debuginfod_wait(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 3600) {
		pr_err("invalid time '%s' for --debuginfod-wait: expected seconds from 0 to 3600",
		       s);
		return -EINVAL;
	}
	env.debuginfod_wait = v;
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

/*
 * The URL is kept (a copy); credentials in it are taken out of argv, so
 * that ps and /proc/PID/cmdline stop showing them once we run, and are
 * only ever printed as "***".
 */
static int parse_url(char *s)
{
	size_t start = 0, n = upload_url__userinfo(s, &start);
	char *shown = upload_url__redact(s), *url = strdup(s);

	if (!shown || !url) {
		free(shown);
		free(url);
		pr_err("out of memory");
		return -ENOMEM;
	}
	if (strncmp(s, "http://", 7) && strncmp(s, "https://", 8)) {
		pr_err("invalid URL '%s' for --upload: expected http://HOST[:PORT] or https://...",
		       shown);
		free(shown);
		free(url);
		return -EINVAL;
	}
	memset(s + start, '*', n);
	env.upload_url = url;
	env.upload_url_shown = shown;
	if (n)
		pr_warn("credentials in the --upload URL are visible to every user until bpfprof "
			"starts (ps, /proc): use --upload-auth-file or $" UPLOAD_AUTH_ENV);
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

/* BYTES with an optional k/m/g suffix (powers of 1024), from min to max; 0 or -EINVAL */
static int parse_size(const char *s, unsigned long long min, unsigned long long max,
		      unsigned long long *out)
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
	if (errno || end == s || *end || *s == '-' || v > max / mult || v * mult < min)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

static int parse_alloc_rate(const char *s)
{
	unsigned long long v;

	if (parse_size(s, 1, 1ULL << 40, &v)) {
		pr_err("invalid rate '%s' for --alloc-rate: expected bytes from 1 to 1t "
		       "(suffixes k, m, g)",
		       s);
		return -EINVAL;
	}
	env.alloc_rate = v;
	return 0;
}

static int parse_mem_budget(const char *s)
{
	unsigned long long v;

	if (parse_size(s, 1ULL << 20, 1ULL << 40, &v)) {
		pr_err("invalid size '%s' for --mem-budget: expected bytes from 1m to 1t "
		       "(suffixes k, m, g)",
		       s);
		return -EINVAL;
	}
	env.mem_budget = v;
	return 0;
}

/*
 * --ring-mb: the ring buffer every BPF program hands its records to. The
 * kernel wants a power of two of pages; MiB keeps the number readable.
 */
static int parse_ring_mb(const char *s)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < 1 || v > 1024 || (v & (v - 1))) {
		pr_err("invalid size '%s' for --ring-mb: expected a power of two from 1 to 1024 "
		       "(MiB)",
		       s);
		return -EINVAL;
	}
	env.ringbuf_bytes = (uint32_t)v << 20;
	return 0;
}

/* SIZE with an optional k/m/g suffix: the unwind row array's bytes */
static int parse_unwind_mem(const char *s)
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
	if (errno || end == s || *end || *s == '-' || v > (16ULL << 30) / mult ||
	    v * mult < (64ULL << 10)) {
		pr_err("invalid size '%s' for --unwind-mem: expected bytes from 64k to 16g "
		       "(suffixes k, m, g)",
		       s);
		return -EINVAL;
	}
	env.unwind_rows = v * mult / sizeof(struct bpf_urow);
	env.unwind_mem_given = true;
	return 0;
}

static int parse_alloc_metric(const char *s)
{
	static const char *const names[] = {
		[ALLOC_INUSE_SPACE] = "inuse_space", [ALLOC_INUSE_OBJECTS] = "inuse_objects",
		[ALLOC_ALLOC_SPACE] = "alloc_space", [ALLOC_ALLOC_OBJECTS] = "alloc_objects",
		[ALLOC_PEAK_SPACE] = "peak_space",   [ALLOC_FINALIZE_SPACE] = "finalize_space",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			env.alloc_metric = i;
			env.alloc_metric_set = true;
			return 0;
		}
	pr_err("unknown metric '%s' for --alloc-metric: expected inuse_space, inuse_objects, "
	       "alloc_space, alloc_objects, peak_space or finalize_space",
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
	char why[PATH_MAX + 128];
	int dfd;
	const char *stray = interval_given	   ? "--interval"
			    : keep_given	   ? "--keep"
			    : env.upload_url	   ? "--upload"
			    : app_given		   ? "--app-name"
			    : env.upload_auth_file ? "--upload-auth-file"
						   : NULL;

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
	 * These keep per-stack state across the run (launches waiting for
	 * their GPU record, wall = cpu + off-cpu at the end) that the
	 * per-interval reset of the stack table would cut. (--alloc carries its
	 * live blocks over to the next interval's table.)
	 */
	if (env.ev_cuda || env.ev_wall) {
		pr_err("%s is not available with --continuous (use --cpu, --off-cpu and/or --alloc)",
		       env.ev_cuda ? "--cuda" : "--wall");
		return -EINVAL;
	}
	/* a directory bpfprof creates is private to it: profiles name everyone's code */
	/*
	 * Created 0700 when missing. Refused: a link another user could have
	 * made on the way, a directory of another user's, or one others may
	 * write that is not sticky: links planted at the next profiles' names
	 * (they are predictable) used to receive them.
	 */
	dfd = outpath__open_dir(env.continuous_dir, why, sizeof(why));
	if (dfd >= 0 && faccessat(dfd, ".", W_OK | X_OK, AT_EACCESS)) {
		snprintf(why, sizeof(why), "not a writable directory");
		close(dfd);
		dfd = -EACCES;
	}
	if (dfd < 0) {
		pr_err("cannot use --continuous '%s': %s", env.continuous_dir,
		       why[0] ? why : strerror(-dfd));
		return -EINVAL;
	}
	close(dfd);
	if (env.upload_auth_file && !env.upload_url) {
		pr_err("--upload-auth-file needs --upload URL");
		return -EINVAL;
	}
	if (env.upload_url) {
		struct upload_auth *a = calloc(1, sizeof(*a));
		int err;

		if (!a) {
			pr_err("out of memory");
			return -ENOMEM;
		}
		err = upload_auth__load(a, env.upload_auth_file);
		if (err) {
			free(a);
			return err;
		}
		env.upload_auth = a;
		if ((a->user || a->bearer) && !strncmp(env.upload_url, "http://", 7))
			pr_warn("--upload sends credentials over plain http: use https");
	}
	env.format = FMT_PPROF;
	if (!given.freq)
		env.freq = 19;
	return 0;
}

/* ---- the options: declared once, in opts[] ---- */

/* a handler's "stop here, exit 0" (--help, --version) */
#define OPT_EXIT_OK 1

static int set_all(const char *a)
{
	(void)a;
	env.all = true;
	return 0;
}

static int set_freq(const char *a)
{
	given.freq = true;
	return parse_freq(a);
}

static int set_output(const char *a)
{
	if (!*a) {
		pr_err("empty path for -o");
		return -EINVAL;
	}
	env.output = a;
	return 0;
}

static int set_cgroup(const char *a)
{
	env.cgroup_arg = a;
	return 0;
}

static int set_container(const char *a)
{
	env.container_arg = a;
	return 0;
}

static int set_continuous(const char *a)
{
	if (!*a) {
		pr_err("empty directory for --continuous");
		return -EINVAL;
	}
	env.continuous_dir = a;
	return 0;
}

static int set_interval(const char *a)
{
	given.interval = true;
	return parse_interval(a);
}

static int set_keep(const char *a)
{
	given.keep = true;
	return parse_keep(a);
}

static int set_app_name(const char *a)
{
	given.app_name = true;
	return parse_app_name(a);
}

/* argv is writable: parse_url blanks credentials in it (ps shows argv) */
static int set_upload(const char *a)
{
	return parse_url((char *)a);
}

static int set_upload_auth_file(const char *a)
{
	env.upload_auth_file = a;
	return 0;
}

static int set_cuda_lib(const char *a)
{
	env.cuda_lib = a;
	return 0;
}

static int set_cuda_weight(const char *a)
{
	if (!strcmp(a, "launches")) {
		env.cuda_weight = CUDA_WEIGHT_LAUNCHES;
	} else if (!strcmp(a, "gpu-time")) {
		env.cuda_weight = CUDA_WEIGHT_GPU_TIME;
	} else {
		pr_err("unknown --cuda-weight '%s': expected launches or gpu-time", a);
		return -EINVAL;
	}
	return 0;
}

static int set_alloc_rate(const char *a)
{
	given.alloc_rate = true;
	return parse_alloc_rate(a);
}

static int set_thread(const char *a)
{
	if (!*a) {
		pr_err("empty filter for --thread");
		return -EINVAL;
	}
	env.thread_filter = a;
	return 0;
}

static int set_title(const char *a)
{
	env.title = a;
	return 0;
}

static int set_unwind_cache(const char *a)
{
	env.unwind_cache_given = true;
	if (!strcmp(a, "off")) {
		env.unwind_cache = NULL;
		return 0;
	}
	if (a[0] != '/') {
		pr_err("invalid directory '%s' for --unwind-cache: expected an absolute path or "
		       "'off'",
		       a);
		return -EINVAL;
	}
	env.unwind_cache = a;
	return 0;
}

static int set_unwind(const char *a)
{
	if (!strcmp(a, "auto")) {
		env.unwind = UNWIND_AUTO;
	} else if (!strcmp(a, "fp")) {
		env.unwind = UNWIND_FP;
	} else if (!strcmp(a, "dwarf")) {
		env.unwind = UNWIND_DWARF;
	} else {
		pr_err("unknown unwinder '%s' for --unwind: expected auto, fp or dwarf", a);
		return -EINVAL;
	}
	return 0;
}

static int set_verbose(const char *a)
{
	(void)a;
	log_level = log_level < 1 ? 2 : log_level + 1;
	return 0;
}

static int set_quiet(const char *a)
{
	(void)a;
	log_level = 0;
	return 0;
}

static int show_help(const char *a)
{
	(void)a;
	cli__usage(stdout);
	return OPT_EXIT_OK;
}

static int show_version(const char *a)
{
	(void)a;
	printf("bpfprof %s\n", BPFPROF_VERSION);
	return OPT_EXIT_OK;
}

/*
 * One entry per option: getopt's tables and --help are made from it (the man
 * page is checked against --help by tests/e2e/test_docs.py). An entry sets
 * *flag, or hands its argument to set(). name NULL: a --help line only.
 */
struct cli_opt {
	const char *name;
	char key;	  /* short option, 0: long only */
	const char *arg;  /* the argument's name in --help; NULL: takes none */
	const char *sect; /* the --help heading it is listed under */
	bool *flag;
	int (*set)(const char *arg); /* 0, -errno (printed), or OPT_EXIT_OK */
	const char *help;
};

static const char S_TARGET[] = "TARGET (default: whole machine)";
static const char S_EVENTS[] = "EVENTS (any combination; default --cpu)";
static const char S_OPTIONS[] = "OPTIONS";
static const char S_CONT[] = "CONTINUOUS MODE";
static const char S_TOP[] = "TOP";
static const char S_GENERAL[] = "";

static const struct cli_opt opts[] = {
	{ "all", 'a', NULL, S_TARGET, NULL, set_all, "every process on every CPU (the default)" },
	{ "pid", 'p', "PID[,PID...]", S_TARGET, NULL, parse_pids,
	  "these processes, all their threads; the run ends when all of them have exited" },
	{ NULL, 0, "-- CMD [ARG...]", S_TARGET, NULL, NULL,
	  "start CMD, profile it and its children, stop when it exits; bpfprof exits with "
	  "CMD's status" },
	{ "cgroup", 0, "PATH", S_TARGET, NULL, set_cgroup,
	  "only tasks in this cgroup v2 directory or below it (also cgroups created there "
	  "later); PATH in the file system or as /proc/PID/cgroup shows it" },
	{ "container", 0, "ID", S_TARGET, NULL, set_container,
	  "only tasks of this container: full id or unique prefix (docker, containerd, "
	  "cri-o, podman, kubepods cgroups)" },

	{ "cpu", 0, NULL, S_EVENTS, &env.ev_cpu, NULL, "on-CPU stack sampling" },
	{ "cuda", 0, NULL, S_EVENTS, &env.ev_cuda, NULL,
	  "CUDA driver calls (libcuda) with CPU stacks; GPU kernel and copy timings where "
	  "the CUPTI injection library is loaded (set for -- CMD: CUDA_INJECTION64_PATH); "
	  "launches are timed only for -f chrome (else one probe per launch, at its entry)" },
	{ "off-cpu", 0, NULL, S_EVENTS, &env.ev_off_cpu, NULL,
	  "time blocked (sleeping, waiting on I/O or a lock, or preempted), by the stack it "
	  "blocked in; nanoseconds" },
	{ "wall", 0, NULL, S_EVENTS, &env.ev_wall, NULL,
	  "on-CPU + off-CPU in one unit (nanoseconds): where each thread's wall-clock time "
	  "went (like py-spy --idle)" },
	{ "alloc", 0, NULL, S_EVENTS, &env.ev_alloc, NULL,
	  "heap: sampled malloc-family calls and anonymous mmaps, where memory was allocated "
	  "and where it is still held" },

	{ "freq", 'F', "HZ", S_OPTIONS, NULL, set_freq,
	  "samples per second per CPU (default 99, 19 with --continuous; at most "
	  "/proc/sys/kernel/perf_event_max_sample_rate)" },
	{ "duration", 'd', "SECS", S_OPTIONS, NULL, parse_duration,
	  "stop after SECS (default: Ctrl-C, or when CMD exits)" },
	{ "min-block", 0, "TIME", S_OPTIONS, NULL, parse_min_block,
	  "off-CPU: blocks at least TIME long are each recorded; a shorter block of length d "
	  "is recorded with chance d/TIME and weight TIME (unbiased, bounded cost); TIME is "
	  "N[ns|us|ms|s], a bare N is microseconds (default 1ms)" },
	{ "unwind", 0, "MODE", S_OPTIONS, NULL, set_unwind,
	  "native user stacks: auto (default: .eh_frame tables, frame pointers until a "
	  "process's tables are ready), dwarf (tables only), fp (frame pointers only)" },
	{ "unwind-mem", 0, "SIZE", S_OPTIONS, NULL, parse_unwind_mem,
	  "memory for unwind tables (BPF map, 8 bytes a row; k, m, g suffixes), fixed when "
	  "given; by default 32m that grows 32m at a time when the files sampled need more, up "
	  "to 4 times --mem-budget and a 32nd of the machine's memory: tables go to the files "
	  "samples land in, least recently sampled evicted; a warning at the end says when it "
	  "was short. A file with more FDEs than 1/64 of the rows "
	  "whose whole table has no room, or would take over half, gets rows only for the "
	  "functions samples land in (a partial table)" },
	{ "unwind-cache", 0, "DIR", S_OPTIONS, NULL, set_unwind_cache,
	  "keep compiled unwind tables in DIR between runs, so that a restarted agent loads "
	  "them instead of compiling the binaries' CFI again (default " UNWIND_CACHE_DEFAULT
	  "; 'off': none). DIR is created 0700 and must be the agent's own, with no directory "
	  "above it writable by another user (root's sticky /tmp is fine); at most four times "
	  "--unwind-mem, least recently used deleted first" },
	{ "debuginfod-wait", 0, "SECS", S_OPTIONS, NULL, parse_debuginfod_wait,
	  "with DEBUGINFOD_URLS set, debug files of stripped binaries are fetched in the "
	  "background by build id (libdebuginfod, cached on disk) and their functions named "
	  "when they arrive; the end of the run waits at most SECS for those still coming "
	  "(default 10; 0: none)" },
	{ "ring-mb", 0, "MIB", S_OPTIONS, NULL, parse_ring_mb,
	  "the ring buffer that carries samples from the kernel to bpfprof, in MiB (a power "
	  "of two, default 8): raise it when the summary warns that samples were lost" },
	{ "mem-budget", 0, "SIZE", S_OPTIONS, NULL, parse_mem_budget,
	  "memory for what the agent keeps of targets (symbols, Python line tables, perf maps, "
	  "process state, unwinder and cgroup bookkeeping, the profile at the end; stacks up to "
	  "half), least recently used given back first, and fds of mapped files (one per 64 "
	  "KiB); suffixes k, m, g (default 128m, at least 1m)" },
	{ "output", 'o', "PATH", S_OPTIONS, NULL, set_output,
	  "where to write ('-' = stdout, the default)" },
	{ "format", 'f', "FMT", S_OPTIONS, NULL, parse_format,
	  "folded | pprof | chrome | svg; default from the extension of -o: .pb.gz/.pprof -> "
	  "pprof, .json -> chrome (Perfetto, chrome://tracing, speedscope), .svg -> svg, anything else "
	  "-> folded; stdout -> folded" },
	{ "inverted", 0, NULL, S_OPTIONS, &env.inverted, NULL,
	  "svg: icicle graph, stacks merged leaf first (callers)" },
	{ "title", 0, "TEXT", S_OPTIONS, NULL, set_title,
	  "svg: the title (default 'Flame Graph')" },
	{ "cuda-lib", 0, "PATH", S_OPTIONS, NULL, set_cuda_lib,
	  "libcuda to probe (default: found in each process's maps)" },
	{ "cuda-weight", 0, "W", S_OPTIONS, NULL, set_cuda_weight,
	  "launches (default) | gpu-time: what a [cuda] kernel leaf counts in folded output" },
	{ "per-pid", 0, NULL, S_OPTIONS, &env.per_pid, NULL,
	  "root frame 'comm [pid]' instead of 'comm'" },
	{ "per-thread", 0, NULL, S_OPTIONS, &env.per_thread, NULL,
	  "a 'thread-name [tid]' frame under the process" },
	{ "per-container", 0, NULL, S_OPTIONS, &env.per_container, NULL,
	  "root frame: the short container id (12 digits), or the cgroup path of tasks in no "
	  "container" },
	{ "native-lines", 0, NULL, S_OPTIONS, &env.native_lines, NULL,
	  "native frames named 'func (file.c:LINE)' in folded, svg and chrome output, from DWARF "
	  "(the binary or its debug file); a pprof has them in any case, but in --continuous "
	  "mode only with this option" },
	{ "no-kernel", 0, NULL, S_OPTIONS, &env.no_kernel, NULL, "leave out kernel frames" },
	{ "no-user", 0, NULL, S_OPTIONS, &env.no_user, NULL, "leave out user-space frames" },
	{ "no-python", 0, NULL, S_OPTIONS, &env.no_python, NULL,
	  "native frames only (no CPython frames)" },
	{ "alloc-rate", 0, "BYTES", S_OPTIONS, NULL, set_alloc_rate,
	  "--alloc: mean bytes between samples (default 524288; suffixes k, m, g; 1 = record "
	  "every call)" },
	{ "alloc-metric", 0, "M", S_OPTIONS, NULL, parse_alloc_metric,
	  "--alloc: what folded shows: inuse_space (default: bytes still allocated at the "
	  "end), inuse_objects, alloc_space, alloc_objects (everything allocated), "
	  "peak_space (what each stack held when the total in use peaked), finalize_space "
	  "(Python: what it held when the interpreter began to shut down)" },
	{ "alloc-uprobes", 0, NULL, S_OPTIONS, &env.alloc_uprobes, NULL,
	  "--alloc: probe the allocator with uprobes, as -a does, instead of putting the "
	  "in-process sampler (libbpfprof_heap.so) into the target (preloaded into -- CMD, "
	  "loaded into a -p process by ptrace): no injection, a trap per call" },
	{ "gil", 0, NULL, S_OPTIONS, &env.gil, NULL,
	  "keep only Python samples whose thread held the GIL (CPython 3.8-3.13; pprof labels "
	  "every Python sample gil=held|released)" },

	{ "continuous", 0, "DIR", S_CONT, NULL, set_continuous,
	  "keep running; every interval write one gzipped pprof into DIR, named by its start "
	  "time (UTC), e.g. bpfprof-20261122T101500.123Z.pb.gz; one status line per interval "
	  "on stderr; SIGTERM/SIGINT write the current interval and exit, SIGHUP starts a "
	  "new one" },
	{ "interval", 0, "SECS", S_CONT, NULL, set_interval,
	  "seconds per file (default 60; fractions allowed)" },
	{ "keep", 0, "N", S_CONT, NULL, set_keep,
	  "keep at most N files in DIR, oldest deleted (default 1440; 0 keeps all)" },
	{ "upload", 0, "URL", S_CONT, NULL, set_upload,
	  "also push each interval to a Pyroscope server (URL/ingest, pprof), from a thread "
	  "that retries with backoff; failures are counted, the files stay" },
	{ "upload-auth-file", 0, "PATH", S_CONT, NULL, set_upload_auth_file,
	  "credentials for --upload: one line, USER:PASSWORD (basic) or 'Bearer TOKEN'; else "
	  "taken from $BPFPROF_UPLOAD_AUTH (same form). Never put them in the URL: ps shows "
	  "it; it is printed as ***@host" },
	{ "app-name", 0, "NAME", S_CONT, NULL, set_app_name,
	  "Pyroscope application name (default bpfprof.cpu)" },

	{ "thread", 0, "T", S_TOP, NULL, set_thread,
	  "bpfprof top: only threads whose name or tid contains T" },

	{ "verbose", 'v', NULL, S_GENERAL, NULL, set_verbose,
	  "at the end, the whole account (every count and loss, the agent's cost), not only "
	  "the summary and its warnings; repeat for debug" },
	{ "quiet", 'q', NULL, S_GENERAL, NULL, set_quiet, "no summary, no warnings" },
	{ "help", 'h', NULL, S_GENERAL, NULL, show_help, "this text" },
	{ "version", 'V', NULL, S_GENERAL, NULL, show_version, "print the version" },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))
/* getopt's value for an option without a short name: this + its index in opts[] */
#define OPT_ID_BASE 256

static int opt_id(size_t i)
{
	return opts[i].key ? opts[i].key : OPT_ID_BASE + (int)i;
}

static const struct cli_opt *find_opt(int id)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].name && opt_id(i) == id)
			return &opts[i];
	return NULL;
}

/* getopt_long's tables from opts[]: long_opts has NOPTS + 1 entries, optstring 3 + 2 * NOPTS + 1 */
static void getopt_tables(struct option *long_opts, char *optstring)
{
	size_t n = 0;
	char *s = optstring;

	*s++ = '+'; /* stop at the command's first argument */
	*s++ = ':'; /* ':' for a missing value */
	for (size_t i = 0; i < NOPTS; i++) {
		if (!opts[i].name)
			continue;
		long_opts[n++] = (struct option){ opts[i].name,
						  opts[i].arg ? required_argument : no_argument,
						  NULL, opt_id(i) };
		if (opts[i].key) {
			*s++ = opts[i].key;
			if (opts[i].arg)
				*s++ = ':';
		}
	}
	*s = '\0';
	long_opts[n] = (struct option){ 0 };
}

#define HELP_COL   28 /* where the text of an option starts */
#define HELP_WIDTH 84

/* An option's --help lines: "  -F, --freq HZ" then its text, wrapped at HELP_WIDTH. */
static void usage_option(FILE *out, const struct cli_opt *o)
{
	const char *t = o->help;
	char left[64];
	int col;

	if (!o->name)
		snprintf(left, sizeof(left), "  %s", o->arg);
	else if (o->key)
		snprintf(left, sizeof(left), "  -%c, --%s%s%s", o->key, o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
	else
		snprintf(left, sizeof(left), "      --%s%s%s", o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
	fputs(left, out);
	col = (int)strlen(left);
	if (col >= HELP_COL - 1) {
		fputc('\n', out);
		col = 0;
	}
	while (*t) {
		size_t w = strcspn(t, " "), room = HELP_WIDTH - HELP_COL;

		/* as many words as fit; a word longer than the column goes on its own */
		size_t n = w;
		while (t[n] == ' ' && n + 1 + strcspn(t + n + 1, " ") <= room)
			n += 1 + strcspn(t + n + 1, " ");
		fprintf(out, "%*s%.*s\n", HELP_COL - col, "", (int)n, t);
		col = 0;
		t += n;
		while (*t == ' ')
			t++;
	}
}

void cli__usage(FILE *out)
{
	const char *mark = strstr(usage_text, "%OPTIONS%");
	const char *sect = NULL;

	fwrite(usage_text, 1, (size_t)(mark - usage_text), out);
	for (size_t i = 0; i < NOPTS; i++) {
		if (opts[i].sect != sect) {
			if (sect)
				fputc('\n', out);
			sect = opts[i].sect;
			if (*sect)
				fprintf(out, "%s\n", sect);
		}
		usage_option(out, &opts[i]);
	}
	fputc('\n', out);
	fputs(mark + strlen("%OPTIONS%"), out);
}

int cli__parse(int argc, char **argv)
{
	struct option long_opts[NOPTS + 1];
	char optstring[3 + 2 * NOPTS + 1];
	int c, err;

	getopt_tables(long_opts, optstring);
	opterr = 0; /* we print our own one-line messages */
	optind = 1;
	while ((c = getopt_long(argc, argv, optstring, long_opts, NULL)) != -1) {
		const struct cli_opt *o;

		if (c == ':') {
			pr_err("option '%s' needs a value (see --help)", argv[optind - 1]);
			return EXIT_USAGE;
		}
		o = c == '?' ? NULL : find_opt(c);
		if (!o) {
			cli__bad_option(argv[optind - 1], optopt, long_opts, "");
			return EXIT_USAGE;
		}
		if (o->flag) {
			*o->flag = true;
			continue;
		}
		err = o->set(optarg);
		if (err == OPT_EXIT_OK)
			return EXIT_OK;
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
	if (check_continuous(given.interval, given.keep, given.app_name))
		return EXIT_USAGE;
	if ((given.alloc_rate || env.alloc_metric_set || env.alloc_uprobes) && !env.ev_alloc) {
		pr_err("%s is a heap profiling option: add --alloc",
		       given.alloc_rate	   ? "--alloc-rate"
		       : env.alloc_uprobes ? "--alloc-uprobes"
					   : "--alloc-metric");
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
	return CLI_RUN;
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
