// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "util/log.h"
#include "write/output.h"
#include "write/writers.h"

int output__open(struct output *o, const char *path)
{
	char *dup = NULL, *dir, *base;
	struct stat st;
	int fd, err;

	memset(o, 0, sizeof(*o));
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	o->path = strdup(path);
	dup = strdup(path);
	if (!o->path || !dup) {
		err = -ENOMEM;
		goto fail;
	}
	base = strrchr(path, '/');
	base = base ? base + 1 : (char *)path;
	if (!*base || (!stat(path, &st) && S_ISDIR(st.st_mode))) {
		err = -EISDIR;
		pr_err("cannot write output '%s': it is a directory", path);
		goto fail;
	}
	if (!stat(path, &st) && S_ISCHR(st.st_mode)) {
		/* a character device (-o /dev/null, a tty): write into it, never rename over it */
		fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		o->f = fd < 0 ? NULL : fdopen(fd, "w");
		if (!o->f) {
			err = -errno;
			if (fd >= 0)
				close(fd);
			pr_err("cannot write output '%s': %s", path, strerror(-err));
			goto fail;
		}
		free(dup);
		return 0;
	}
	if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
		/*
		 * A FIFO would block the run until someone reads it, and whoever
		 * made it chose when: refused at once, as are sockets and block
		 * devices. A pipe is '-o -' with stdout redirected.
		 */
		err = -EINVAL;
		pr_err("cannot write output '%s': a %s, expected a regular file, a character device "
		       "or '-'",
		       path,
		       S_ISFIFO(st.st_mode)   ? "FIFO"
		       : S_ISSOCK(st.st_mode) ? "socket"
		       : S_ISBLK(st.st_mode)  ? "block device"
					      : "special file");
		goto fail;
	}
	dir = dirname(dup);
	if (asprintf(&o->tmp, "%s/.%s.XXXXXX", dir, base) < 0) {
		o->tmp = NULL;
		err = -ENOMEM;
		goto fail;
	}
	fd = mkstemp(o->tmp);
	if (fd < 0) {
		err = -errno;
		pr_err("cannot write output '%s': %s", path, strerror(-err));
		free(o->tmp);
		o->tmp = NULL;
		goto fail;
	}
	/*
	 * mkstemp makes it 0600 whatever the umask, and so it stays: a profile
	 * names every process's functions, paths and containers, which other
	 * users of the host should not read through it.
	 */
	o->f = fdopen(fd, "w");
	if (!o->f) {
		err = -errno;
		close(fd);
		unlink(o->tmp);
		goto fail;
	}
	free(dup);
	return 0;
fail:
	free(dup);
	free(o->path);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	return err;
}

int output__write_profile(struct output *o, const struct profile *p)
{
	struct svg_opts so = { .title = env.title, .inverted = env.inverted };

	switch (env.format) {
	case FMT_PPROF:
		return pprof__write(p, o->f);
	case FMT_SVG:
		return svg__write(p, &so, o->f);
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
	if (!err && o->tmp && rename(o->tmp, o->path)) {
		err = -errno;
		pr_err("cannot rename output to '%s': %s", o->path, strerror(-err));
	}
	if (err && o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	return err;
}

void output__abort(struct output *o)
{
	if (o->path) {
		if (o->f)
			fclose(o->f);
		if (o->tmp)
			unlink(o->tmp);
	}
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof(*o));
}
