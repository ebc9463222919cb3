/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Messages on stderr. Every error is one line starting "bpfprof: " (the CLI
 * contract). Verbosity: -q silences warnings and the summary, -v adds detail.
 */
#ifndef BPFPROF_LOG_H
#define BPFPROF_LOG_H

#include <stdio.h>

extern int log_level; /* 0 quiet, 1 normal, 2 verbose, 3 debug */

#define pr_err(fmt, ...) fprintf(stderr, "bpfprof: " fmt "\n", ##__VA_ARGS__)
#define pr_warn(fmt, ...)                                                              \
	do {                                                                           \
		if (log_level >= 1)                                                    \
			fprintf(stderr, "bpfprof: warning: " fmt "\n", ##__VA_ARGS__); \
	} while (0)
#define pr_info(fmt, ...)                                                     \
	do {                                                                  \
		if (log_level >= 1)                                           \
			fprintf(stderr, "bpfprof: " fmt "\n", ##__VA_ARGS__); \
	} while (0)
#define pr_verbose(fmt, ...)                                                  \
	do {                                                                  \
		if (log_level >= 2)                                           \
			fprintf(stderr, "bpfprof: " fmt "\n", ##__VA_ARGS__); \
	} while (0)
#define pr_debug(fmt, ...)                                                           \
	do {                                                                         \
		if (log_level >= 3)                                                  \
			fprintf(stderr, "bpfprof: debug: " fmt "\n", ##__VA_ARGS__); \
	} while (0)

#endif
