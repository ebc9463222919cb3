// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/selfpath.h"

const char *selfpath__lib(const char *name, char *buf, size_t len)
{
	static const char *const dirs[] = { "", "../lib/bpfprof/" };
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int w = snprintf(buf, len, "%s/%s%s", self, dirs[i], name);

		if (w > 0 && (size_t)w < len && !access(buf, R_OK))
			return buf;
	}
	return NULL;
}
