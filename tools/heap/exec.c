// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sampler goes on into the programs a target starts: the exec family
 * and posix_spawn are interposed, and the environment each new program gets
 * preloads this library first, at the rate bpfprof set, whatever the caller
 * passed. `env LD_PRELOAD=X prog` gives prog "this:X"; `env -i prog`,
 * `env -u LD_PRELOAD prog` and Python's subprocess.run(env={}) give it this
 * library and the rate; a child given BPFPROF_ALLOC_RATE=1 samples at
 * bpfprof's rate, not at 1 (bpfprof also drops samples at another rate).
 *
 * How the new program finds this file: by the path it was loaded from,
 * when that path names this very file (device and inode) from where the
 * caller stands now (after a chroot it may name nothing, or another file),
 * and the path has no space or colon (LD_PRELOAD splits there: a path
 * "/opt/my tools/lib.so" would load "tools/lib.so" from the working
 * directory); else by /proc/self/fd/N, N an fd of this file the new program
 * inherits (a chroot or container with /proc mounted), which its copy of
 * this library takes over (BPFPROF_HEAP_FD=N). Where neither works (no
 * /proc in the new root, the fd closed by the program), this library is
 * left out of the new environment rather than named where it cannot be
 * loaded (the loader would print an error into the program's stderr):
 * bpfprof finds that program uncovered and probes it with uprobes.
 *
 * Not seen here: a raw execve system call (Go's os/exec, a static
 * program), and glibc's own system()/popen() (they pass environ on, which
 * still holds this library unless the program removed it). Everything here
 * may run in a vfork child: no malloc, only the stack.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "heap.h"

#define API	    __attribute__((visibility("default")))
#define MAX_ENV	    65536	/* more entries: the environment is passed on as it is */
#define MAX_LDP	    (64 * 1024) /* a longer LD_PRELOAD: the same */
#define FD_PROC	    "/proc/self/fd/"
#define ENV_LDP	    "LD_PRELOAD="
#define ENV_RATE    "BPFPROF_ALLOC_RATE="
#define ENV_FD	    "BPFPROF_HEAP_FD="
#define FD_ENTRY(n) FD_PROC #n

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			const posix_spawnattr_t *, char *const[], char *const[]);

extern char **environ;

static struct {
	execve_fn execve, execvpe;
	execveat_fn execveat;
	fexecve_fn fexecve;
	spawn_fn posix_spawn, posix_spawnp;
} real;

/* This library's file: the path it was loaded by (if usable), an fd, its identity. */
static char self_path[4096];
static int self_fd = -1;
static dev_t self_dev;
static ino_t self_ino;
static int self_known, fd_form;

static int is_self(const struct stat *st)
{
	return self_known && S_ISREG(st->st_mode) && st->st_dev == self_dev &&
	       st->st_ino == self_ino;
}

/* A path LD_PRELOAD can carry as one entry: absolute, no space, tab, newline or colon. */
static int preloadable(const char *p)
{
	return p[0] == '/' && !strpbrk(p, " \t\n:");
}

/*
 * Move fd above the numbers programs use (they may expect their first open
 * to be 3, or dup2 onto small numbers), close-on-exec unless keep. Returns
 * the new fd (fd itself when it cannot move).
 */
static int fd_high(int fd, int keep)
{
	struct rlimit rl;
	long want = 1000;
	int nfd;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur - 32 < want)
		want = (long)rl.rlim_cur - 32;
	if (want <= fd)
		return fd;
	nfd = fcntl(fd, keep ? F_DUPFD : F_DUPFD_CLOEXEC, (int)want);
	if (nfd < 0)
		return fd;
	close(fd);
	return nfd;
}

static void resolve_exec(void)
{
	real.execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
	real.execvpe = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
	real.execveat = (execveat_fn)dlsym(RTLD_NEXT, "execveat");
	real.fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
	real.posix_spawn = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
	real.posix_spawnp = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp");
}

/*
 * At the constructor: which file this library is. Loaded as
 * /proc/self/fd/N (BPFPROF_HEAP_FD=N, by bpfprof or by a parent's exec
 * here), it keeps N, inherited by what it starts in turn; else it opens
 * its path (close-on-exec, moved high) for an exec after a chroot.
 */
HIDDEN void heap_exec_init(void)
{
	const char *fdv = getenv("BPFPROF_HEAP_FD");
	struct stat st;
	Dl_info info;

	resolve_exec();
	if (!dladdr((void *)heap_exec_init, &info) || !info.dli_fname)
		return;
	if (!strncmp(info.dli_fname, FD_PROC, strlen(FD_PROC))) {
		char *end;
		long n = strtol(info.dli_fname + strlen(FD_PROC), &end, 10);

		/* the loader opened /proc/self/fd/N: N is this file, as the caller said */
		if (*end || n < 0 || !fdv || strtol(fdv, NULL, 10) != n || fstat((int)n, &st) ||
		    !S_ISREG(st.st_mode))
			return;
		self_fd = (int)n;
		fd_form = 1;
	} else {
		if (!preloadable(info.dli_fname) || strlen(info.dli_fname) >= sizeof(self_path))
			return;
		self_fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
		if (self_fd < 0 || fstat(self_fd, &st)) {
			if (self_fd >= 0)
				close(self_fd);
			self_fd = -1;
			return;
		}
		strcpy(self_path, info.dli_fname);
		self_fd = fd_high(self_fd, 0);
	}
	self_dev = st.st_dev;
	self_ino = st.st_ino;
	self_known = 1;
}

HIDDEN uint64_t heap_exec_flags(void)
{
	return fd_form ? HELLO_FD_FORM : 0;
}

/* What a new program's environment needs (decided before the VLAs that hold it). */
struct envplan {
	size_t n;				  /* entries of the caller's environment */
	size_t ldlen;				  /* bytes of the new LD_PRELOAD=... entry */
	const char *old;			  /* the caller's LD_PRELOAD value, or NULL */
	char entry[sizeof(FD_ENTRY(2147483647))]; /* this library as the new program finds it */
	const char *path;			  /* entry when by path, else NULL */
	char rate[sizeof(ENV_RATE) + 24];
	char fdvar[sizeof(ENV_FD) + 12];
	int dupfd; /* an fd of this file opened for the new program, closed if exec fails */
};

static int starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* Whether an LD_PRELOAD entry is this library (under any name), or a dead fd path. */
static int entry_is_ours(const char *e, size_t len)
{
	char buf[4096];
	struct stat st;

	if (!len || len >= sizeof(buf))
		return 0;
	memcpy(buf, e, len);
	buf[len] = '\0';
	/* the path this library came by: after a chroot it names nothing, or another file */
	if (self_path[0] && !strcmp(buf, self_path))
		return 1;
	if (stat(buf, &st))
		return starts(buf, FD_PROC); /* a /proc/self/fd/N entry whose fd is gone */
	return is_self(&st);
}

/*
 * 0: the environment must be rewritten (pl filled), 1: pass it on as it is.
 * Also 1 when nothing here can help (too big, library unknown): bpfprof
 * then finds the new program uncovered.
 */
static int env_plan(char *const envp[], struct envplan *pl)
{
	const char *rate_now = NULL, *fd_now = NULL;
	struct stat st;
	uint64_t r = heap_rate();
	size_t n = 0;

	memset(pl, 0, sizeof(*pl));
	pl->dupfd = -1;
	for (; envp && envp[n]; n++) {
		if (n >= MAX_ENV)
			return 1;
		if (starts(envp[n], ENV_LDP) && !pl->old)
			pl->old = envp[n] + strlen(ENV_LDP);
		else if (starts(envp[n], ENV_RATE))
			rate_now = envp[n] + strlen(ENV_RATE);
		else if (starts(envp[n], ENV_FD))
			fd_now = envp[n] + strlen(ENV_FD);
	}
	pl->n = n;
	if (pl->old && strlen(pl->old) > MAX_LDP)
		return 1;
	snprintf(pl->rate, sizeof(pl->rate), ENV_RATE "%llu", (unsigned long long)r);
	if (self_path[0] && !stat(self_path, &st) && is_self(&st)) {
		pl->path = self_path;
	} else if (self_fd >= 0 && !fstat(self_fd, &st) && is_self(&st)) {
		/* an fd the new program inherits, reachable through its /proc */
		int fd = fd_form ? self_fd : fcntl(self_fd, F_DUPFD, self_fd);

		if (fd >= 0) {
			snprintf(pl->entry, sizeof(pl->entry), FD_PROC "%d", fd);
			if (!stat(pl->entry, &st) && is_self(&st)) {
				snprintf(pl->fdvar, sizeof(pl->fdvar), ENV_FD "%d", fd);
				if (fd != self_fd)
					pl->dupfd = fd;
			} else {
				if (fd != self_fd)
					close(fd);
				pl->entry[0] = '\0';
			}
		}
	}
	if (!pl->path && !pl->entry[0] && !pl->old)
		return 1; /* nothing to add, nothing of ours to take out */
	/* unchanged: already first, at this rate (the common exec) */
	if ((pl->path || pl->entry[0]) && pl->old && rate_now &&
	    !strcmp(rate_now, pl->rate + strlen(ENV_RATE)) &&
	    (pl->path ? !fd_now : fd_now && !strcmp(fd_now, pl->fdvar + strlen(ENV_FD)))) {
		const char *first = pl->path ? pl->path : pl->entry;
		size_t len = strlen(first);

		if (!strncmp(pl->old, first, len) &&
		    (!pl->old[len] || pl->old[len] == ':' || pl->old[len] == ' ')) {
			if (pl->dupfd >= 0)
				close(pl->dupfd);
			return 1;
		}
	}
	pl->ldlen = strlen(ENV_LDP) + (pl->path ? strlen(pl->path) : strlen(pl->entry)) + 1 +
		    (pl->old ? strlen(pl->old) : 0) + 1;
	return 0;
}

/* The new environment into out (room for pl->n + 4) and ld (pl->ldlen bytes). */
static char *const *env_build(char *const envp[], struct envplan *pl, char **out, char *ld)
{
	const char *first = pl->path ? pl->path : pl->entry[0] ? pl->entry : NULL;
	size_t k = 0, at;

	at = (size_t)snprintf(ld, pl->ldlen, ENV_LDP "%s", first ? first : "");
	for (const char *p = pl->old; p && *p;) {
		size_t len = strcspn(p, " :");

		if (len && !entry_is_ours(p, len) &&
		    (!first || strncmp(p, first, len) || first[len])) {
			if (at > strlen(ENV_LDP))
				ld[at++] = ':';
			memcpy(ld + at, p, len);
			at += len;
		}
		p += len;
		p += *p != '\0';
	}
	ld[at] = '\0';
	for (size_t i = 0; i < pl->n; i++)
		if (!starts(envp[i], ENV_LDP) && !starts(envp[i], ENV_RATE) &&
		    !starts(envp[i], ENV_FD))
			out[k++] = envp[i];
	if (at > strlen(ENV_LDP))
		out[k++] = ld;
	if (first) {
		out[k++] = pl->rate;
		if (pl->fdvar[0])
			out[k++] = pl->fdvar;
	}
	out[k] = NULL;
	return out;
}

static void env_undo(struct envplan *pl)
{
	int e = errno;

	if (pl->dupfd >= 0)
		close(pl->dupfd);
	errno = e;
}

/* stmt runs with E the environment to pass (the caller's, or the rewritten one). */
#define WITH_ENV(envp, E, stmt)                                              \
	do {                                                                 \
		struct envplan pl_;                                          \
		if (env_plan((envp), &pl_)) {                                \
			char *const *E = (envp);                             \
			stmt;                                                \
		} else {                                                     \
			char *out_[pl_.n + 4], ld_[pl_.ldlen];               \
			char *const *E = env_build((envp), &pl_, out_, ld_); \
			stmt;                                                \
			env_undo(&pl_);                                      \
		}                                                            \
	} while (0)

static int no_real(void)
{
	errno = ENOSYS;
	return -1;
}

API int execve(const char *path, char *const argv[], char *const envp[])
{
	int ret;

	if (!real.execve)
		resolve_exec();
	if (!real.execve)
		return no_real();
	WITH_ENV(envp, e, ret = real.execve(path, argv, e));
	return ret;
}

API int execvpe(const char *file, char *const argv[], char *const envp[])
{
	int ret;

	if (!real.execvpe)
		resolve_exec();
	if (!real.execvpe)
		return no_real();
	WITH_ENV(envp, e, ret = real.execvpe(file, argv, e));
	return ret;
}

API int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

API int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	int ret;

	if (!real.execveat)
		resolve_exec();
	if (!real.execveat)
		return no_real();
	WITH_ENV(envp, e, ret = real.execveat(dirfd, path, argv, e, flags));
	return ret;
}

API int fexecve(int fd, char *const argv[], char *const envp[])
{
	int ret;

	if (!real.fexecve)
		resolve_exec();
	if (!real.fexecve)
		return no_real();
	WITH_ENV(envp, e, ret = real.fexecve(fd, argv, e));
	return ret;
}

/*
 * execl and friends: their arguments as an argv array on the stack (argv[0]
 * = first, then up to and with the NULL), then as above.
 */
#define VA_COUNT(first, ap, n)                             \
	do {                                               \
		va_start(ap, first);                       \
		for (n = 1; va_arg(ap, const char *); n++) \
			;                                  \
		va_end(ap);                                \
	} while (0)

#define VA_FILL(first, ap, argv, n)                    \
	do {                                           \
		argv[0] = (char *)(first);             \
		for (size_t i_ = 1; i_ <= (n); i_++)   \
			argv[i_] = va_arg(ap, char *); \
	} while (0)

API int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	VA_COUNT(arg, ap, n);
	{
		char *argv[n + 1];

		va_start(ap, arg);
		VA_FILL(arg, ap, argv, n);
		va_end(ap);
		return execve(path, argv, environ);
	}
}

API int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	size_t n;

	VA_COUNT(arg, ap, n);
	{
		char *argv[n + 1];

		va_start(ap, arg);
		VA_FILL(arg, ap, argv, n);
		va_end(ap);
		return execvpe(file, argv, environ);
	}
}

API int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	size_t n;

	VA_COUNT(arg, ap, n);
	{
		char *argv[n + 1], *const *envp;

		va_start(ap, arg);
		VA_FILL(arg, ap, argv, n);
		envp = va_arg(ap, char *const *); /* after the NULL */
		va_end(ap);
		return execve(path, argv, envp);
	}
}

API int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int ret;

	if (!real.posix_spawn)
		resolve_exec();
	if (!real.posix_spawn)
		return ENOSYS;
	WITH_ENV(envp, e, ret = real.posix_spawn(pid, path, fa, attr, argv, e));
	return ret;
}

API int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	int ret;

	if (!real.posix_spawnp)
		resolve_exec();
	if (!real.posix_spawnp)
		return ENOSYS;
	WITH_ENV(envp, e, ret = real.posix_spawnp(pid, file, fa, attr, argv, e));
	return ret;
}
