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
#include "flamegraph.h"
#include "util/log.h"

struct command {
	const char *name;
	int (*run)(void);			/* after cli__parse */
	int (*main)(int argc, char **argv);	/* parses its own arguments */
};

static const struct command commands[] = {
	{ "record", record__run, NULL },
	{ "flamegraph", NULL, flamegraph__main },
};

static const char *const planned[] = { "top", "dump" };

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
			for (size_t j = 0; j < sizeof(planned) / sizeof(planned[0]); j++) {
				if (!strcmp(argv[1], planned[j])) {
					pr_err("command '%s' is not available in this version", argv[1]);
					return EXIT_USAGE;
				}
			}
			pr_err("unknown command '%s': expected record, flamegraph, or options "
			       "(see --help)", argv[1]);
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
	if (status < 0)
		status = cmd->run();
	cli__free();
	return status;
}
