// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/profile.h"
#include "cli.h"
#include "flamegraph.h"
#include "util/log.h"
#include "write/folded_read.h"
#include "write/writers.h"
#include "write/output.h"

static const char usage_text[] =
	"Usage: bpfprof flamegraph [IN.folded] [-o OUT.svg] [--inverted] [--title T]\n"
	"\n"
	"Render folded stacks ('frame;frame;... COUNT' lines: bpfprof's, or\n"
	"`perf script | stackcollapse-perf.pl`'s, or any other tool's) as one\n"
	"self-contained interactive SVG: click a frame to zoom, Search (regex or\n"
	"substring) shows the matched share, hover for counts. Frames narrower than\n"
	"0.1% are merged into their parent but kept: Search counts them, a zoom draws\n"
	"them. IN '-' or none: stdin.\n"
	"Kinds are guessed from the names for colour: '_[k]' kernel, '[cuda] ' GPU,\n"
	"'name (file:line)' Python, the first frame the process.\n"
	"\n"
	"  -o, --output PATH         where to write ('-' = stdout, the default)\n"
	"      --inverted            icicle graph: stacks merged leaf first (callers view)\n"
	"      --title TEXT          the title (default 'Flame Graph' / 'Icicle Graph')\n"
	"  -q, --quiet               no warnings\n"
	"  -h, --help                this text\n"
	"\n"
	"Malformed lines are skipped, counted and reported once; input without a\n"
	"single stack is an error (exit 1).\n";

enum {
	OPT_INVERTED = 256,
	OPT_TITLE
};

static const struct option long_opts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "inverted", no_argument, NULL, OPT_INVERTED },
	{ "title", required_argument, NULL, OPT_TITLE },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{},
};

static int parse(int argc, char **argv, const char **in)
{
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:qvh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!*optarg) {
				pr_err("empty path for -o");
				return EXIT_USAGE;
			}
			env.output = optarg;
			break;
		case OPT_INVERTED:
			env.inverted = true;
			break;
		case OPT_TITLE:
			env.title = optarg;
			break;
		case 'q':
			log_level = 0;
			break;
		case 'v':
			log_level = log_level < 1 ? 2 : log_level + 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_OK;
		case ':':
			pr_err("option '%s' needs a value (see bpfprof flamegraph --help)",
			       argv[optind - 1]);
			return EXIT_USAGE;
		default:
			cli__bad_option(argv[optind - 1], optopt, long_opts, "flamegraph");
			return EXIT_USAGE;
		}
	}
	if (argc - optind > 1) {
		pr_err("unexpected argument '%s': flamegraph reads one folded file (or stdin)",
		       argv[optind + 1]);
		return EXIT_USAGE;
	}
	*in = optind < argc ? argv[optind] : "-";
	env.format = FMT_SVG;
	return CLI_RUN;
}

int flamegraph__main(int argc, char **argv)
{
	struct folded_read_stats st;
	struct profile *p = NULL;
	struct output out;
	const char *in, *name;
	char comment[512];
	FILE *f;
	int err, status;

	status = parse(argc, argv, &in);
	if (status != CLI_RUN)
		return status;
	name = strcmp(in, "-") ? in : "stdin";
	f = strcmp(in, "-") ? fopen(in, "r") : stdin;
	if (!f) {
		pr_err("cannot read '%s': %s", in, strerror(errno));
		return EXIT_USAGE;
	}
	if (output__open(&out, env.output)) {
		if (f != stdin)
			fclose(f);
		return EXIT_USAGE;
	}
	status = EXIT_RUNTIME;
	err = folded__read(f, &p, &st);
	if (err == -ENODATA) {
		if (st.bad)
			pr_err("no stacks in %s: none of its %llu lines reads "
			       "'frame;frame;... COUNT' (line %llu does not)",
			       name, (unsigned long long)st.lines,
			       (unsigned long long)st.first_bad);
		else
			pr_err("no stacks in %s: it is empty", name);
		goto cleanup;
	} else if (err) {
		pr_err("cannot read %s: %s", name, strerror(-err));
		goto cleanup;
	}
	if (st.bad) {
		pr_warn("skipped %llu malformed line%s of %llu in %s (first: line %llu); "
			"expected 'frame;frame;... COUNT'",
			(unsigned long long)st.bad, st.bad == 1 ? "" : "s",
			(unsigned long long)st.lines, name, (unsigned long long)st.first_bad);
	}
	snprintf(comment, sizeof(comment), "Folded stacks from %s: %llu lines", name,
		 (unsigned long long)st.stacks);
	if (st.bad)
		snprintf(comment + strlen(comment), sizeof(comment) - strlen(comment),
			 ", %llu malformed skipped", (unsigned long long)st.bad);
	if (profile__add_comment(p, comment)) {
		pr_err("out of memory");
		goto cleanup;
	}
	err = output__write_profile(
		&out, p, env.format,
		&(struct svg_opts){ .title = env.title, .inverted = env.inverted });
	if (err) {
		pr_err("cannot write the flame graph: %s", strerror(-err));
		goto cleanup;
	}
	if (output__commit(&out))
		goto cleanup;
	status = EXIT_OK;
cleanup:
	if (status != EXIT_OK)
		output__abort(&out);
	profile__free(p);
	if (f != stdin)
		fclose(f);
	return status;
}
