// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "proc/procmaps.h"

/* "7f12a0000000-7f12a0021000 r-xp 00001000 fd:01 1234567   /usr/lib/x.so" */
int procmaps__parse_line(char *line, struct procmaps_entry *e)
{
	char perms[5];
	size_t len;
	int pos = 0;
	char *path;

	memset(e, 0, sizeof(*e));
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 "%n", &e->start,
		   &e->end, perms, &e->pgoff, &e->dev_major, &e->dev_minor, &e->ino, &pos) != 7)
		return -EINVAL;
	if (strlen(perms) != 4 || e->end < e->start)
		return -EINVAL;
	e->readable = perms[0] == 'r';
	e->writable = perms[1] == 'w';
	e->exec = perms[2] == 'x';
	e->shared = perms[3] == 's';

	path = line + pos;
	while (*path == ' ' || *path == '\t')
		path++;
	len = strlen(path);
	while (len && (path[len - 1] == '\n' || path[len - 1] == '\r'))
		path[--len] = '\0';
	if (len > 10 && !strcmp(path + len - 10, " (deleted)")) {
		e->deleted = true;
		path[len - 10] = '\0';
	}
	e->path = path;
	return 0;
}

int procmaps__for_each_exec(FILE *f, int (*cb)(const struct procmaps_entry *e, void *ctx),
			    void *ctx)
{
	struct procmaps_entry e;
	char *line = NULL;
	size_t cap = 0;
	int err = 0, ret;

	while (getline(&line, &cap, f) > 0) {
		if (procmaps__parse_line(line, &e)) {
			err = -EINVAL;
			continue;
		}
		if (!e.exec)
			continue;
		ret = cb(&e, ctx);
		if (ret) {
			err = ret;
			break;
		}
	}
	free(line);
	return err;
}
