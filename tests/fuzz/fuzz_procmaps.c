// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * /proc/PID/maps (user/proc/procmaps.c): the input is the text of a maps
 * file, whose path column a process chooses (any bytes but '\n'). Every
 * line handed on must be a sane mapping whose path lies inside the line.
 */
#include <string.h>

#include "fuzz.h"
#include "proc/procmaps.h"

struct seen {
	size_t n;
};

static int on_exec(const struct procmaps_entry *e, void *ctx)
{
	struct seen *s = ctx;

	fuzz__assert(e->exec && e->start <= e->end && e->path);
	fuzz__assert(!strchr(e->path, '\n'));
	return ++s->n >= 100000; /* a cb's non-zero ends the walk */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz__str(data, size);
	struct seen s = { 0 };
	FILE *f;

	/* every line alone, as parse_line sees it */
	for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		struct procmaps_entry e;
		char save = 0;

		nl = strchr(line, '\n');
		if (nl) {
			save = nl[1];
			nl[1] = '\0';
		}
		if (!procmaps__parse_line(line, &e)) {
			fuzz__assert(e.start <= e.end);
			fuzz__assert(e.path >= line && e.path <= line + strlen(line));
		}
		if (nl)
			nl[1] = save;
	}
	free(text);

	/* and the whole text through the stream reader */
	f = fmemopen((void *)data, size ? size : 1, "r");
	if (f) {
		if (size)
			procmaps__for_each_exec(f, on_exec, &s);
		fclose(f);
	}
	return 0;
}
