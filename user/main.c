// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpfprof: an eBPF profiler for a whole Linux machine. The first word picks a
 * command ({name, fn} table, exact match, as bpftool does); without one, the
 * arguments are those of `record`.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "collect/record.h"
#include "dump/dump.h"
#include "registry.h"
#include "flamegraph.h"
#include "top/top.h"
#include "util/log.h"

struct command {
	const char *name;
	int (*run)(void);		    /* after cli__parse */
	int (*main)(int argc, char **argv); /* parses its own arguments */
};

/* `bpfprof [record]`: every feature the options ask for, the profile written to -o */
static int record_main(void)
{
	return record__run(&(struct rec_mode){ .name = "record", .features = rec_features });
}

static const struct command commands[] = {
	{ "record", record_main, NULL },
	{ "top", top__run, NULL },
	{ "dump", NULL, dump__main },
	{ "flamegraph", NULL, flamegraph__main },
};

int main(int argc, char **argv)
{
	const struct command *cmd = &commands[0];
	int status;

	if (argc > 1 && argv[1][0] != '-') {
		size_t i;

		for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (!strcmp(argv[1], commands[i].name))
				break;
		if (i == sizeof(commands) / sizeof(commands[0])) {
			pr_err("unknown command '%s': expected record, top, dump, flamegraph, or "
			       "options (see --help)",
			       argv[1]);
			return EXIT_USAGE;
		}
		cmd = &commands[i];
		if (cmd->main) {
			status = cmd->main(argc - 1, argv + 1);
			cli__free();
			return status;
		}
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	status = cli__parse(argc, argv);
	if (status == CLI_RUN)
		status = cmd->run();
	cli__free();
	return status;
}
