// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/strsafe.h"

int log_level = 1;

/* fmt formatted into a malloc'd string; NULL if out of memory */
static char *log__format(const char *fmt, va_list args)
{
	va_list again;
	char *s;
	int n;

	va_copy(again, args);
	n = vsnprintf(NULL, 0, fmt, again);
	va_end(again);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (s)
		vsnprintf(s, (size_t)n + 1, fmt, args);
	return s;
}

/* s escaped into a malloc'd string; NULL if out of memory */
static char *log__escape(const char *s)
{
	size_t n = strsafe__escape(NULL, 0, s);
	char *e = malloc(n + 1);

	if (e)
		strsafe__escape(e, n + 1, s);
	return e;
}

void log__printf(const char *prefix, const char *fmt, ...)
{
	char *msg, *safe;
	va_list args;

	va_start(args, fmt);
	msg = log__format(fmt, args);
	va_end(args);
	safe = msg ? log__escape(msg) : NULL;
	if (safe)
		fprintf(stderr, "bpfprof: %s%s\n", prefix, safe);
	else /* out of memory: say so, with nothing a process chose */
		fprintf(stderr, "bpfprof: %s(message lost: out of memory)\n", prefix);
	free(safe);
	free(msg);
}

int log__vprintf_raw(const char *fmt, va_list args)
{
	char *msg = log__format(fmt, args), *line, *nl;
	int n = 0;

	if (!msg)
		return -1;
	for (line = msg; *line; line = nl) {
		char *safe;

		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		safe = log__escape(line);
		if (safe)
			n += fprintf(stderr, "%s%s", safe, nl ? "\n" : "");
		free(safe);
		if (!nl)
			break;
	}
	free(msg);
	return n;
}
