// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "write/outpath.h"

#define PROC_SUPER_MAGIC 0x9fa0
/* as the kernel's own limit on links followed in one lookup */
#define MAX_LINKS 40

static bool ours(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* Root's or ours, and no other user may change its entries (sticky: not theirs). */
static bool dir_private(const struct stat *d)
{
	return ours(d->st_uid) && (!(d->st_mode & (S_IWGRP | S_IWOTH)) || (d->st_mode & S_ISVTX));
}

bool outpath__dir_private(int dirfd)
{
	struct stat d;

	return !fstat(dirfd, &d) && dir_private(&d);
}

static bool on_procfs(int fd)
{
	struct statfs sfs;

	return !fstatfs(fd, &sfs) && sfs.f_type == PROC_SUPER_MAGIC;
}

/* rest = first + "/" + rest (first: a link's target) */
static int prepend(char **rest, const char *first)
{
	char *n;

	if (asprintf(&n, "%s/%s", first, *rest ? *rest : "") < 0)
		return -ENOMEM;
	free(*rest);
	*rest = n;
	return 0;
}

/* The next component of *rest (cut off in place), or NULL at the end. */
static char *next_comp(char **p)
{
	char *c;

	while (**p == '/')
		(*p)++;
	if (!**p)
		return NULL;
	c = *p;
	*p += strcspn(*p, "/");
	if (**p)
		*(*p)++ = '\0';
	return c;
}

static bool last_comp(const char *p)
{
	while (*p == '/')
		p++;
	return !*p;
}

static int reopen_root(int *cur, bool abs)
{
	int fd = open(abs ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (*cur >= 0)
		close(*cur);
	*cur = fd;
	return 0;
}

int outpath__resolve(const char *path, struct outpath *out, char *why, size_t whylen)
{
	char *rest = strdup(path), *p, *comp, target[PATH_MAX];
	int cur = -1, links = 0, err = 0;

	memset(out, 0, sizeof(*out));
	out->dirfd = -1;
	why[0] = '\0';
	if (!rest)
		return -ENOMEM;
	err = reopen_root(&cur, path[0] == '/');
	p = rest;
	while (!err && (comp = next_comp(&p))) {
		bool last = last_comp(p);
		struct stat st, dst;
		ssize_t n;
		int nfd;

		if (!strcmp(comp, ".") && !last)
			continue;
		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			if (last) {
				snprintf(why, whylen, "it names a directory");
				err = -EISDIR;
				break;
			}
			nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
			goto step;
		}
		if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT && last)
				goto found; /* a new file */
			err = -errno;
			if (errno == ENOENT)
				snprintf(why, whylen, "'%s' does not exist", comp);
			else
				snprintf(why, whylen, "'%s': %s", comp, strerror(errno));
			break;
		}
		if (!S_ISLNK(st.st_mode)) {
			if (last)
				goto found;
			nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			goto step;
		}
		if (fstat(cur, &dst) || !ours(st.st_uid) || !dir_private(&dst)) {
			/* a link someone else could have made: never followed */
			if (last) {
				out->untrusted_link = true;
				goto found;
			}
			snprintf(why, whylen,
				 "'%s' is a symlink another user could have made (%s); name the "
				 "directory it leads to",
				 comp,
				 !ours(st.st_uid) ? "it is not root's"
						  : "in a directory others may write");
			err = -EPERM;
			break;
		}
		if (on_procfs(cur)) {
			/* the kernel's links (/proc/self, /proc/self/fd/N): as they are */
			if (last) {
				out->magic = true;
				goto found;
			}
			nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
			goto step;
		}
		if (++links > MAX_LINKS) {
			err = -ELOOP;
			snprintf(why, whylen, "too many symlinks");
			break;
		}
		n = readlinkat(cur, comp, target, sizeof(target) - 1);
		if (n <= 0) {
			err = n < 0 ? -errno : -ENOENT;
			snprintf(why, whylen, "'%s': cannot read the link", comp);
			break;
		}
		target[n] = '\0';
		/* what is left after the link's target, then the target itself */
		{
			char *left = strdup(p);

			if (!left) {
				err = -ENOMEM;
				break;
			}
			free(rest);
			rest = left;
			err = prepend(&rest, target);
			p = rest;
		}
		if (!err && target[0] == '/')
			err = reopen_root(&cur, true);
		continue;
step:
		if (nfd < 0) {
			err = -errno;
			snprintf(why, whylen, "'%s': %s", comp,
				 errno == ENOTDIR ? "not a directory" : strerror(errno));
			break;
		}
		close(cur);
		cur = nfd;
		continue;
found:
		if (strlen(comp) >= sizeof(out->name)) {
			err = -ENAMETOOLONG;
			snprintf(why, whylen, "name too long");
			break;
		}
		strcpy(out->name, comp);
		out->dirfd = cur;
		cur = -1;
		break;
	}
	if (!err && out->dirfd < 0) {
		snprintf(why, whylen, "it names a directory");
		err = -EISDIR;
	}
	if (cur >= 0)
		close(cur);
	free(rest);
	if (err && out->dirfd >= 0) {
		close(out->dirfd);
		out->dirfd = -1;
	}
	return err;
}

static void owner_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

int outpath__open_dir(const char *path, char *why, size_t whylen)
{
	struct outpath op;
	char who[64];
	struct stat st;
	int fd, err;

	err = outpath__resolve(path, &op, why, whylen);
	if (err == -EISDIR && !strcmp(why, "it names a directory")) {
		/* "DIR/." or "/": resolve DIR/. instead */
		snprintf(why, whylen, "name the directory without a trailing '.' or '..'");
		return -EINVAL;
	}
	if (err)
		return err;
	if (op.untrusted_link || op.magic) {
		snprintf(why, whylen,
			 "it is a symlink another user could have made; name the directory it "
			 "leads to");
		close(op.dirfd);
		return -EPERM;
	}
	if (mkdirat(op.dirfd, op.name, 0700) && errno != EEXIST) {
		err = -errno;
		snprintf(why, whylen, "cannot create it: %s", strerror(errno));
		close(op.dirfd);
		return err;
	}
	fd = openat(op.dirfd, op.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	err = fd < 0 ? -errno : 0;
	close(op.dirfd);
	if (fd < 0) {
		snprintf(why, whylen, "%s", err == -ENOTDIR ? "not a directory" : strerror(-err));
		return err;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!ours(st.st_uid)) {
		owner_name(st.st_uid, who, sizeof(who));
		snprintf(why, whylen,
			 "it belongs to %s, who could plant links at the names of the next "
			 "profiles; use a directory of root's",
			 who);
		close(fd);
		return -EPERM;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		struct group *gr = getgrgid(st.st_gid);

		if (st.st_mode & S_IWOTH)
			snprintf(who, sizeof(who), "every user");
		else if (gr)
			snprintf(who, sizeof(who), "group %s", gr->gr_name);
		else
			snprintf(who, sizeof(who), "gid %u", (unsigned)st.st_gid);
		snprintf(why, whylen,
			 "it is writable by %s, who could plant links at the names of the next "
			 "profiles; chmod go-w it (or make it sticky: chmod +t)",
			 who);
		close(fd);
		return -EPERM;
	}
	return fd;
}
