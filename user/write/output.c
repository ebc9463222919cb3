// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "write/outpath.h"
#include "write/output.h"
#include "write/writers.h"

static const char *kind_of(mode_t m)
{
	return S_ISFIFO(m)   ? "FIFO"
	       : S_ISSOCK(m) ? "socket"
	       : S_ISBLK(m)  ? "block device"
	       : S_ISDIR(m)  ? "directory"
			     : "special file";
}

/* The temporary file in o->dirfd, for o->name. */
static int open_tmp(struct output *o)
{
	int fd = -1;

	for (int i = 0; i < 100 && fd < 0; i++) {
		free(o->tmp);
		if (asprintf(&o->tmp, ".%.200s.%d.%x", o->name, (int)getpid(),
			     (unsigned)(mono_ns() ^ (uint64_t)i * 0x9e3779b97f4a7c15ULL)) < 0) {
			o->tmp = NULL;
			return -ENOMEM;
		}
		/*
		 * 0600 whatever the umask, and so it stays: a profile names every
		 * process's functions, paths and containers, which other users of
		 * the host should not read through it. A new file, never one that
		 * was there (O_EXCL), never through a link (O_NOFOLLOW).
		 */
		fd = openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	return fd < 0 ? -EEXIST : fd;
}

static int open_in(struct output *o)
{
	int fd = open_tmp(o), err;

	if (fd < 0) {
		free(o->tmp);
		o->tmp = NULL;
		return fd;
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		err = -errno;
		close(fd);
		unlinkat(o->dirfd, o->tmp, 0);
		return err;
	}
	return 0;
}

static void reset(struct output *o)
{
	free(o->path);
	free(o->tmp);
	free(o->name);
	if (o->dirfd >= 0)
		close(o->dirfd);
	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
}

/* A character device (or our own stdout's file, through /proc/self/fd): written in place. */
static int open_in_place(struct output *o, int fd)
{
	o->f = fdopen(fd, "w");
	if (!o->f) {
		int err = -errno;

		close(fd);
		return err;
	}
	free(o->name);
	o->name = NULL;
	return 0;
}

int output__open(struct output *o, const char *path)
{
	struct outpath op;
	char why[PATH_MAX + 128];
	struct stat st;
	int fd, err;

	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	o->path = strdup(path);
	if (!o->path)
		return -ENOMEM;
	err = outpath__resolve(path, &op, why, sizeof(why));
	if (err) {
		pr_err("cannot write output '%s': %s", path, why[0] ? why : strerror(-err));
		goto fail;
	}
	o->dirfd = op.dirfd;
	o->name = strdup(op.name);
	if (!o->name) {
		err = -ENOMEM;
		goto fail;
	}
	if (op.magic) {
		/*
		 * our own fd's link (/dev/stdout): the terminal, the file or the
		 * pipe stdout goes to (non-blocking: a FIFO with no reader is
		 * refused, not waited for)
		 */
		fd = openat(o->dirfd, o->name, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) || fcntl(fd, F_SETFL, 0)) {
			err = -errno;
			pr_err("cannot write output '%s': %s", path, strerror(-err));
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		if (S_ISCHR(st.st_mode) || S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)) {
			err = open_in_place(o, fd);
			if (err)
				goto fail;
			return 0;
		}
		close(fd);
		err = -EINVAL;
		pr_err("cannot write output '%s': a %s, expected a regular file, a character device "
		       "or '-'",
		       path, kind_of(st.st_mode));
		goto fail;
	}
	if (!fstatat(o->dirfd, o->name, &st, AT_SYMLINK_NOFOLLOW) && !op.untrusted_link &&
	    !S_ISREG(st.st_mode)) {
		if (S_ISCHR(st.st_mode)) {
			/* named directly (-o /dev/null, a tty): write into it, never rename over it */
			fd = openat(o->dirfd, o->name,
				    O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
			err = fd < 0 ? -errno : open_in_place(o, fd);
			if (err) {
				pr_err("cannot write output '%s': %s", path, strerror(-err));
				goto fail;
			}
			return 0;
		}
		/*
		 * A FIFO would block the run until someone reads it, and whoever
		 * made it chose when: refused at once, as are sockets and block
		 * devices. A pipe is '-o -' with stdout redirected.
		 */
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		if (S_ISDIR(st.st_mode))
			pr_err("cannot write output '%s': it is a directory", path);
		else
			pr_err("cannot write output '%s': a %s, expected a regular file, a "
			       "character device or '-'",
			       path, kind_of(st.st_mode));
		goto fail;
	}
	if (op.untrusted_link)
		pr_warn("output '%s' is a symlink another user could have made: the profile "
			"replaces the link, it is not written where the link points",
			path);
	err = open_in(o);
	if (err) {
		pr_err("cannot write output '%s': %s", path, strerror(-err));
		goto fail;
	}
	return 0;
fail:
	reset(o);
	return err;
}

int output__open_at(struct output *o, int dirfd, const char *name, const char *path)
{
	int err;

	memset(o, 0, sizeof(*o));
	o->dirfd = dup(dirfd);
	o->path = strdup(path);
	o->name = strdup(name);
	if (o->dirfd < 0 || !o->path || !o->name) {
		err = o->dirfd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	err = open_in(o);
	if (!err)
		return 0;
	pr_err("cannot write '%s': %s", path, strerror(-err));
fail:
	reset(o);
	return err;
}

int output__write_profile(struct output *o, const struct profile *p, enum out_format fmt,
			  const struct svg_opts *so)
{
	struct svg_opts none = { 0 };

	switch (fmt) {
	case FMT_PPROF:
		return pprof__write(p, o->f);
	case FMT_SVG:
		return svg__write(p, so ? so : &none, o->f);
	case FMT_FOLDED:
	default:
		return folded__write(p, p->default_value < p->nvalues ? p->default_value : 0, o->f);
	}
}

int output__commit(struct output *o)
{
	int err = 0;

	if (!o->f)
		return -EINVAL;
	if (!o->path) {
		if (fflush(stdout)) {
			err = -errno;
			pr_err("cannot write to stdout: %s", strerror(-err));
		}
		o->f = NULL;
		return err;
	}
	if (fflush(o->f) || ferror(o->f)) {
		err = -errno ? -errno : -EIO;
		pr_err("cannot write output '%s': %s", o->path, strerror(-err));
	}
	if (fclose(o->f) && !err) {
		err = -errno;
		pr_err("cannot write output '%s': %s", o->path, strerror(-err));
	}
	o->f = NULL;
	/* the whole file under the final name, or nothing (a link there is replaced) */
	if (!err && o->tmp && renameat(o->dirfd, o->tmp, o->dirfd, o->name)) {
		err = -errno;
		pr_err("cannot rename output to '%s': %s", o->path, strerror(-err));
	}
	if (err && o->tmp)
		unlinkat(o->dirfd, o->tmp, 0);
	reset(o);
	return err;
}

void output__abort(struct output *o)
{
	if (o->path) {
		if (o->f)
			fclose(o->f);
		if (o->tmp)
			unlinkat(o->dirfd, o->tmp, 0);
	}
	reset(o);
}
