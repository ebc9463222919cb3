// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/tfile.h"

#define OPEN_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
/* linux/magic.h: a FUSE server (any user can mount one) can stall every read. */
#define FUSE_SUPER_MAGIC 0x65735546

/* Counters only: the agent's one thread that reads files updates them. */
static struct tfile_stats stats;

int tfile__root(uint32_t pid)
{
	char p[32];
	int fd;

	if (pid)
		snprintf(p, sizeof(p), "/proc/%u/root", pid);
	else
		snprintf(p, sizeof(p), "/");
	fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

struct owners {
	const uint32_t *uids;
	int n;
};

static bool owned_by(const struct stat *st, const struct owners *own)
{
	for (int i = 0; i < own->n; i++)
		if (st->st_uid == own->uids[i])
			return true;
	return false;
}

/*
 * fd is an O_PATH fd: check what it names (and, own not NULL, whose it is),
 * then open that inode for reading through our own fd table (the inode is
 * pinned: nothing can swap it).
 */
static int reopen_checked(int pfd, const struct owners *own, struct stat *out)
{
	struct stat st, st2;
	struct statfs sfs;
	char p[64];
	int fd;

	if (fstat(pfd, &st)) {
		fd = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		stats.refused_type++;
		fd = -EPERM;
		goto out;
	}
	if (own && !owned_by(&st, own)) {
		stats.refused_owner++;
		fd = -EPERM;
		goto out;
	}
	if (!fstatfs(pfd, &sfs) && sfs.f_type == FUSE_SUPER_MAGIC) {
		stats.refused_fuse++;
		fd = -EPERM;
		goto out;
	}
	if (st.st_size <= 0 || (unsigned long long)st.st_size > TFILE_MAX_SIZE) {
		stats.refused_size++;
		fd = -EFBIG;
		goto out;
	}
	snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
	fd = open(p, OPEN_FLAGS);
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	if (fstat(fd, &st2) || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		close(fd);
		fd = -ESTALE;
		goto out;
	}
	stats.opened++;
	if (out)
		*out = st2;
out:
	close(pfd);
	return fd;
}

static int open_in_root(int root_fd, const char *path, const struct owners *own, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (own ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int pfd, host = -1;

	if (!path || !*path)
		return -ENOENT;
	if (root_fd < 0) {
		host = tfile__root(0);
		if (host < 0)
			return host;
		root_fd = host;
	}
	pfd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	if (pfd < 0)
		pfd = -errno;
	if (host >= 0)
		close(host);
	if (pfd < 0)
		return pfd;
	return reopen_checked(pfd, own, st);
}

int tfile__open(int root_fd, const char *path, struct stat *st)
{
	return open_in_root(root_fd, path, NULL, st);
}

int tfile__open_own(int root_fd, const char *path, const uint32_t *uids, int nuids, struct stat *st)
{
	struct owners own = { uids, nuids };

	return open_in_root(root_fd, path, &own, st);
}

int tfile__open_link(const char *link, struct stat *st)
{
	int pfd = open(link, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return -errno;
	return reopen_checked(pfd, NULL, st);
}

void tfile__changed(void)
{
	stats.changed++;
}

const struct tfile_stats *tfile__stats(void)
{
	return &stats;
}
