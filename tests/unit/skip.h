/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef BPFPROF_TESTS_SKIP_H
#define BPFPROF_TESTS_SKIP_H

/*
 * cmocka's skip() prints only "[  SKIPPED ] name": every skip here says why,
 * on the line before it, so a run's log tells what was not tested and what
 * would make it run. Include after <cmocka.h>.
 */
#define skip_because(fmt, ...)                                          \
	do {                                                            \
		print_message("[  SKIP    ] " fmt "\n", ##__VA_ARGS__); \
		skip();                                                 \
	} while (0)

#endif
