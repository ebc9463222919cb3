// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * -- CMD: the command is forked at once (so the side band sees its fork and
 * BPF's pid filter has it) but held before its exec until every event and
 * probe is attached and the ready line is out; then released, and reaped
 * when it exits (its exit ends the run). bpfprof exits with its status, as
 * time(1) does: a script or CI job sees the command fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "collect/command.h"
#include "collect/recorder.h"
#include "proc/objfile.h"
#include "unwind/needed.h"
#include "unwind/tables.h"
#include "util/clock.h"
#include "util/log.h"

/* Fork CMD, held before exec until everything is attached. */
int command__spawn(struct recorder *r)
{
	int go[2], err[2];

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	r->child = fork();
	if (r->child < 0)
		return -errno;
	if (r->child == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		signal(SIGPIPE, SIG_DFL);
		if (read(go[0], &c, 1) != 1)
			_exit(127); /* bpfprof gave up before starting us */
		execvp(env.cmd_argv[0], env.cmd_argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	r->go_fd = go[1];
	r->err_fd = err[0];
	return 0;
}

/*
 * -- CMD: the tables of the executable, its interpreter and its libraries,
 * built before it runs, so that its first milliseconds unwind like the rest.
 */
void command__prepare_tables(struct recorder *r)
{
	uint64_t t0 = mono_ns();
	uint32_t ready = 0;
	char **files;
	size_t n;

	if (!r->unw || needed__files(env.cmd_argv[0], &files, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		struct objfile *o;
		struct stat st;

		if (stat(files[i], &st))
			continue;
		o = objtab__get(r->objs, major(st.st_dev), minor(st.st_dev), st.st_ino, files[i],
				getpid(), 0, 0);
		if (o && !unwinder__prepare(r->unw, o->id, mono_ns()))
			ready++;
	}
	pr_verbose("unwind tables of '%s' and its libraries before it starts: %u of %zu files in "
		   "%.1f ms",
		   env.cmd_argv[0], ready, n, (mono_ns() - t0) / 1e6);
	needed__free(files, n);
}

/* Let CMD exec; returns 0 or -errno of a failed exec (printed). */
int command__release(struct recorder *r)
{
	ssize_t n;
	int e = 0;

	if (write(r->go_fd, "g", 1) != 1)
		return -errno;
	close(r->go_fd);
	r->go_fd = -1;
	n = read(r->err_fd, &e, sizeof(e)); /* EOF: exec succeeded (CLOEXEC) */
	close(r->err_fd);
	r->err_fd = -1;
	if (n == sizeof(e)) {
		pr_err("cannot run '%s': %s", env.cmd_argv[0], strerror(e));
		waitpid(r->child, NULL, 0);
		r->child = 0;
		return -e;
	}
	return 0;
}

/*
 * Whether CMD can be exec'd as execvp would find it: checked before the
 * ready line, so that a command that cannot run gets its one error line.
 */
int command__check(const char *cmd)
{
	const char *p = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) ? -errno : 0;
	if (!p)
		p = "/usr/local/bin:/bin:/usr/bin";
	for (;;) {
		const char *end = strchrnul(p, ':');
		int n = end - p;

		if (snprintf(buf, sizeof(buf), "%.*s/%s", n ? n : 1, n ? p : ".", cmd) <
			    (int)sizeof(buf) &&
		    !access(buf, X_OK))
			return 0;
		if (!*end)
			return -ENOENT;
		p = end + 1;
	}
}

void command__reap(struct recorder *r)
{
	int status;

	if (r->child <= 0 || r->child_done)
		return;
	if (waitpid(r->child, &status, WNOHANG) == r->child) {
		r->child_done = true;
		r->child_status = status;
	}
}

/*
 * The run is over (status: whether bpfprof failed): a command never released
 * dies with its held pipe; one still running after a failure is asked to end.
 */
void command__end(struct recorder *r, bool failed)
{
	int status;

	if (r->child > 0 && !r->child_done) {
		if (r->go_fd >= 0) /* never released: let it die */
			close(r->go_fd), r->go_fd = -1;
		if (failed)
			kill(r->child, SIGTERM);
		/* -d ended the recording first: its status is still the run's */
		if (waitpid(r->child, &status, 0) == r->child) {
			r->child_done = true;
			r->child_status = status;
		}
	}
	if (r->go_fd >= 0)
		close(r->go_fd);
	if (r->err_fd >= 0)
		close(r->err_fd);
	r->go_fd = r->err_fd = -1;
}

int command__exit_status(const struct recorder *r, int status)
{
	if (status != EXIT_OK || r->child <= 0 || !r->child_done)
		return status;
	if (WIFEXITED(r->child_status))
		return WEXITSTATUS(r->child_status);
	if (WIFSIGNALED(r->child_status))
		return 128 + WTERMSIG(r->child_status);
	return status;
}
