// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * dlopen_split [--wait-stdin] SECONDS
 *
 * Prints "pid N", optionally waits for a line on stdin (so that a profiler can
 * start first), then dlopen()s libsplit.so from its own directory and runs
 * the known split in it: the library's mappings appear only after profiling
 * started.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>

#include "common.h"

int main(int argc, char **argv)
{
	char self[PATH_MAX], lib[PATH_MAX + 32], line[64];
	void (*run)(double);
	ssize_t n;
	void *h;
	double secs;

	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[1], "--wait-stdin"))) {
		fprintf(stderr, "usage: dlopen_split [--wait-stdin] SECONDS\n");
		return 2;
	}
	secs = parse_seconds("dlopen_split", argv[argc - 1]);
	print_pid();
	if (argc == 3 && !fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return 1;
	self[n] = '\0';
	snprintf(lib, sizeof(lib), "%s/libsplit.so", dirname(self));
	h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen_split: %s\n", dlerror());
		return 1;
	}
	run = (void (*)(double))dlsym(h, "split_run");
	if (!run)
		return 1;
	run(secs);
	BARRIER();
	return 0;
}
