// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cgroup paths (user/proc/cgroup.c): the input is a path as /proc/PID/cgroup
 * shows it, whose directory names a container engine (or anyone allowed to
 * make cgroups) chose. A container id found is 64 hex digits, a pod uid fits
 * its field; both are NUL-terminated.
 */
#include <ctype.h>
#include <string.h>

#include "fuzz.h"
#include "proc/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = fuzz__str(data, size);
	char id[CGROUP_ID_HEX + 1];
	struct cgroup_info info;
	bool found;

	found = cgroup__parse(path, &info);
	fuzz__assert(found == (info.container_id[0] != '\0'));
	fuzz__assert(memchr(info.container_id, 0, sizeof(info.container_id)));
	fuzz__assert(memchr(info.pod_uid, 0, sizeof(info.pod_uid)));
	if (found) {
		fuzz__assert(strlen(info.container_id) == CGROUP_ID_HEX);
		for (size_t i = 0; i < CGROUP_ID_HEX; i++)
			fuzz__assert(isxdigit((unsigned char)info.container_id[i]));
	}
	if (cgroup__name_container(path, id))
		fuzz__assert(strlen(id) == CGROUP_ID_HEX);
	free(path);
	return 0;
}
