// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/safedir.h"

/* A directory on the way: root's or ours, and nobody else may replace what we keep in it. */
static bool dir_ok(const struct stat *st, bool last, uid_t me)
{
	if (!S_ISDIR(st->st_mode))
		return false;
	if (last)
		return st->st_uid == me && !(st->st_mode & 077);
	if (st->st_uid != 0 && st->st_uid != me)
		return false;
	/* root's sticky /tmp: others add their own entries, and ours stay ours */
	return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid == 0 && (st->st_mode & S_ISVTX));
}

int safedir__open(const char *path, const char **why)
{
	char *copy, *save = NULL, *comp, *next;
	uid_t me = geteuid();
	struct stat st;
	int fd, nfd = -1, err = 0;

	*why = "";
	if (path[0] != '/') {
		*why = "not an absolute path";
		return -EINVAL;
	}
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !dir_ok(&st, false, me)) {
		*why = "/ is writable by others";
		err = fd < 0 ? -errno : -EPERM;
		goto out;
	}
	comp = strtok_r(copy, "/", &save);
	while (comp) {
		next = strtok_r(NULL, "/", &save);
		if (!strcmp(comp, "..")) {
			*why = "'..' in the path";
			err = -EINVAL;
			goto out;
		}
		if (strcmp(comp, ".")) {
			nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (nfd < 0 && errno == ENOENT) {
				if (mkdirat(fd, comp, 0700) && errno != EEXIST) {
					err = -errno;
					*why = "cannot create it";
					goto out;
				}
				nfd = openat(fd, comp,
					     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			}
			if (nfd < 0) {
				err = -errno;
				*why = errno == ENOTDIR
					       ? "a component is a symlink or not a directory"
					       : "cannot open it";
				goto out;
			}
			close(fd);
			fd = nfd;
		}
		if (!next && (fstat(fd, &st) || !dir_ok(&st, true, me))) {
			*why = "it must be a directory of the agent's user, mode 0700";
			err = -EPERM;
			goto out;
		}
		if (next && (fstat(fd, &st) || !dir_ok(&st, false, me))) {
			*why = "a directory above it is writable by another user";
			err = -EPERM;
			goto out;
		}
		comp = next;
	}
	nfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (nfd < 0) {
		err = -errno;
		*why = "cannot open it";
	}
out:
	if (fd >= 0)
		close(fd);
	free(copy);
	return err ? err : nfd;
}
