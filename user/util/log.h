/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Messages on stderr. Every error is one line starting "bpfprof: " (the CLI
 * contract). Verbosity: -q silences warnings and the summary, -v adds detail.
 * Messages carry names that processes choose (comm, paths, symbols): each
 * is escaped (util/strsafe.h) before it reaches the terminal, so it stays
 * one line and no escape sequence in it runs.
 */
#ifndef BPFPROF_LOG_H
#define BPFPROF_LOG_H

#include <stdarg.h>
#include <stdio.h>

extern int log_level; /* 0 quiet, 1 normal, 2 verbose, 3 debug */

/* "bpfprof: " prefix, then fmt's text escaped, then a newline, in one write */
void log__printf(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fmt's text escaped except its line ends (libbpf's messages: already lines) */
int log__vprintf_raw(const char *fmt, va_list args) __attribute__((format(printf, 1, 0)));

#define pr_err(fmt, ...) log__printf("", fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...)                                             \
	do {                                                          \
		if (log_level >= 1)                                   \
			log__printf("warning: ", fmt, ##__VA_ARGS__); \
	} while (0)
#define pr_info(fmt, ...)                                    \
	do {                                                 \
		if (log_level >= 1)                          \
			log__printf("", fmt, ##__VA_ARGS__); \
	} while (0)
#define pr_verbose(fmt, ...)                                 \
	do {                                                 \
		if (log_level >= 2)                          \
			log__printf("", fmt, ##__VA_ARGS__); \
	} while (0)
#define pr_debug(fmt, ...)                                          \
	do {                                                        \
		if (log_level >= 3)                                 \
			log__printf("debug: ", fmt, ##__VA_ARGS__); \
	} while (0)

#endif
