// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Small readers of /proc files that need no process table (util/procfs.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/procfs.h"

uint32_t procfs__nspid(const char *status_path, uint32_t no_line)
{
	char line[256];
	uint32_t last = no_line;
	FILE *f = fopen(status_path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p || v > UINT32_MAX)
				break;
			last = (uint32_t)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return last;
}

int procfs__uids(const char *status_path, uint32_t uids[4])
{
	char line[256];
	int n = 0;
	FILE *f = fopen(status_path, "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Uid:", 4)) {
			n = sscanf(line + 4, "%u %u %u %u", &uids[0], &uids[1], &uids[2], &uids[3]);
			break;
		}
	fclose(f);
	return n == 4 ? 0 : -ENOENT;
}

void procfs__self_rss(long *rss_kib, long *hwm_kib)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");

	*rss_kib = *hwm_kib = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", rss_kib);
		sscanf(line, "VmHWM: %ld", hwm_kib);
	}
	fclose(f);
}
