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
#include <unistd.h>

#include <linux/types.h>

#include "bpfprof.h"
#include "cli.h"
#include "util/log.h"

struct env env = {
	.freq = 99,
	.ringbuf_bytes = 8 << 20,
	.max_targets = 8192,
	.unwind_rows = 4 << 20,
	.unwind_procs = 4096,
};

static const char usage_text[] =
"Usage: bpfprof [record] [TARGET] [OPTIONS] [-- CMD [ARG...]]\n"
"       bpfprof flamegraph [IN.folded] [-o OUT.svg] [--inverted] [--title T]\n"
"\n"
"Sample on-CPU stacks (kernel, native and CPython frames in one stack) of the\n"
"whole machine, some processes or a command, and write them as folded stacks,\n"
"pprof or an interactive SVG flame graph. 'flamegraph' renders folded stacks\n"
"(any tool's, stdin without IN or with '-') as that SVG.\n"
"\n"
"TARGET (default: whole machine)\n"
"  -a, --all                 every process on every CPU (the default)\n"
"  -p, --pid PID[,PID...]    these processes, all their threads\n"
"  -- CMD [ARG...]           start CMD, profile it and its children, stop when it exits\n"
"\n"
"OPTIONS\n"
"  -F, --freq HZ             samples per second per CPU (default 99; at most\n"
"                            /proc/sys/kernel/perf_event_max_sample_rate)\n"
"  -d, --duration SECS       stop after SECS (default: Ctrl-C, or when CMD exits)\n"
"      --unwind MODE         native user stacks: auto (default: .eh_frame tables,\n"
"                            frame pointers until a process's tables are ready),\n"
"                            dwarf (tables only), fp (frame pointers only)\n"
"  -o, --output PATH         where to write ('-' = stdout, the default)\n"
"  -f, --format FMT          folded | pprof | svg; default from the extension of\n"
"                            -o: .pb.gz/.pprof -> pprof, .svg -> svg, anything\n"
"                            else -> folded; stdout -> folded\n"
"      --inverted            svg: icicle graph, stacks merged leaf first (callers)\n"
"      --title TEXT          svg: the title (default 'Flame Graph')\n"
"      --per-pid             root frame 'comm [pid]' instead of 'comm'\n"
"      --per-thread          a 'thread-name [tid]' frame under the process\n"
"      --no-kernel           leave out kernel frames\n"
"      --no-user             leave out user-space frames\n"
"      --no-python           native frames only (no CPython frames)\n"
"      --gil                 keep only Python samples whose thread held the GIL\n"
"                            (CPython 3.8-3.13; pprof labels every Python sample\n"
"                            gil=held|released)\n"
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
"cpu/nanoseconds. A summary line on stderr tells samples taken, lost and why.\n"
"\n"
"Needs root, or CAP_BPF + CAP_PERFMON (+ CAP_SYS_PTRACE to read other users'\n"
"/proc/PID/maps and map_files).\n"
"\n"
"EXAMPLES\n"
"  bpfprof -a -d 5 > machine.folded           whole machine for 5 s, folded to stdout\n"
"  bpfprof -p 1234 -F 499 -o app.pb.gz        one process at 499 Hz, pprof\n"
"  bpfprof -o run.folded -- ./my_program arg  launch and profile a command and its children\n"
"  bpfprof -a -d 10 -o cpu.svg                interactive flame graph (click, search)\n"
"  bpfprof flamegraph perf.folded -o perf.svg render another tool's folded stacks\n"
"  go tool pprof -http :8080 app.pb.gz        browse a pprof profile\n"
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
	OPT_INVERTED,
	OPT_TITLE,
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
	{ "inverted", no_argument, NULL, OPT_INVERTED },
	{ "title", required_argument, NULL, OPT_TITLE },
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
		       "(/proc/sys/kernel/perf_event_max_sample_rate)", v, max);
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

static int parse_format(const char *s)
{
	if (!strcmp(s, "folded"))
		env.format = FMT_FOLDED;
	else if (!strcmp(s, "pprof"))
		env.format = FMT_PPROF;
	else if (!strcmp(s, "svg"))
		env.format = FMT_SVG;
	else if (!strcmp(s, "chrome")) {
		pr_err("format '%s' for -f is not available in this version: "
		       "expected folded, pprof or svg", s);
		return -EINVAL;
	} else {
		pr_err("unknown format '%s' for -f: expected folded, pprof or svg", s);
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
	} else if (ends_with(o, ".svg")) {
		env.format = FMT_SVG;
	} else if (ends_with(o, ".json")) {
		pr_err("output '%s': the chrome format is not available in this version; "
		       "use .folded, .pb.gz or .svg, or -f", o);
		return -EINVAL;
	} else {
		env.format = FMT_FOLDED;
	}
	return 0;
}

int cli__parse(int argc, char **argv)
{
	int c, err = 0;

	opterr = 0;	/* we print our own one-line messages */
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
		case OPT_INVERTED:
			env.inverted = true;
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
	if (env.no_kernel && env.no_user) {
		pr_err("--no-kernel and --no-user together leave no frames to record");
		return EXIT_USAGE;
	}
	if (env.gil && (env.no_python || env.no_user)) {
		pr_err("--gil needs Python frames: drop --no-python / --no-user");
		return EXIT_USAGE;
	}
	if (format_from_output())
		return EXIT_USAGE;
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
	env.pids = NULL;
	env.npids = 0;
}
