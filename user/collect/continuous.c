// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aggregate/profile.h"
#include "cli.h"
#include "collect/continuous.h"
#include "upload/upload.h"
#include "symbolize/ksyms.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/membudget.h"
#include "write/outpath.h"
#include "write/output.h"
#include "write/writers.h"

#define FILE_PREFIX "bpfprof-"
#define FILE_SUFFIX ".pb.gz"
/* bpfprof-YYYYmmddTHHMMSS.mmmZ.pb.gz */
#define FILE_NAME_LEN (sizeof(FILE_PREFIX) - 1 + 15 + 5 + sizeof(FILE_SUFFIX) - 1)
/*
 * The files this agent wrote into DIR, one "NAME INODE CTIME_NS" a line:
 * --keep deletes only those, and only while each is still that regular file
 * (inode and change time: a freed inode number is soon reused), owned by us.
 * A file planted under one of our names is left alone.
 */
#define MANIFEST     ".bpfprof-written"
#define MANIFEST_MAX (4 << 20)
_Static_assert(sizeof(FILE_PREFIX "ddddddddTdddddd.dddZ" FILE_SUFFIX) == FILE_NAME_LEN + 1,
	       "file name shape");
/* Kernel modules come and go: kallsyms is read again this often. */
#define KSYMS_MAX_AGE_NS (600 * 1000000000ULL)
/* At exit, pending uploads get this long. */
#define UPLOAD_GRACE_S 5.0

struct continuous {
	char *dir;
	uint64_t interval_ns;
	unsigned int keep;
	uint64_t start_mono; /* the current interval */
	int64_t start_wall;
	uint64_t deadline;
	uint64_t ksyms_loaded_ns;
	struct interval_totals last; /* totals at the previous interval's end */
	struct rusage last_ru;
	uint64_t last_evicted; /* membudget__evicted() at the last status line */
	uint64_t intervals, written, failed, deleted, spared;
	struct uploader *up;
	int dirfd;
	struct written {
		char name[FILE_NAME_LEN + 1];
		uint64_t ino, ctime_ns;
	} * own; /* oldest first; with --keep 0, not kept (appended to MANIFEST only) */
	size_t nown, cap_own;
};

static void manifest__load(struct continuous *c);

static int64_t wall_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void start_interval(struct continuous *c, uint64_t now)
{
	c->start_mono = now;
	c->start_wall = wall_ns();
	c->deadline = now + c->interval_ns;
}

int continuous__new(struct continuous **out)
{
	struct continuous *c = calloc(1, sizeof(*c));
	char why[PATH_MAX + 128];
	int err;

	if (!c || !(c->dir = strdup(env.continuous_dir))) {
		free(c);
		pr_err("out of memory");
		return -ENOMEM;
	}
	c->dirfd = -1;
	c->interval_ns = (uint64_t)(env.interval * 1e9);
	c->keep = env.keep;
	/* no link another user made on the way; root's or ours, nobody else may write it */
	c->dirfd = outpath__open_dir(c->dir, why, sizeof(why));
	if (c->dirfd < 0) {
		err = c->dirfd;
		pr_err("cannot use --continuous '%s': %s", c->dir, why[0] ? why : strerror(-err));
		continuous__free(c);
		return err;
	}
	if (c->keep)
		manifest__load(c);
	if (env.upload_url) {
		/* retries fit in about one interval, and never more than a few seconds apart */
		double backoff = env.interval / 4;
		struct upload_opts uo = {
			.url = env.upload_url,
			.auth = env.upload_auth,
			.app_name = env.app_name,
			.sample_rate = env.freq,
			.attempts = 4,
			.backoff = backoff < 0.05 ? 0.05
				   : backoff > 5  ? 5
						  : backoff,
			.timeout = env.interval < 10 ? 10 : env.interval,
		};

		err = uploader__new(&c->up, &uo);
		if (env.upload_auth) /* the uploader keeps its own copy */
			upload_auth__clear(env.upload_auth);
		if (err) {
			pr_err("cannot start the uploader: %s", strerror(-err));
			continuous__free(c);
			return err;
		}
	}
	getrusage(RUSAGE_SELF, &c->last_ru);
	start_interval(c, mono_ns());
	*out = c;
	return 0;
}

void continuous__free(struct continuous *c)
{
	if (!c)
		return;
	uploader__free(c->up);
	if (c->dirfd >= 0)
		close(c->dirfd);
	free(c->own);
	free(c->dir);
	free(c);
}

uint64_t continuous__deadline(const struct continuous *c)
{
	return c->deadline;
}

void continuous__span(const struct continuous *c, int64_t *time_ns, int64_t *duration_ns)
{
	*time_ns = c->start_wall;
	*duration_ns = (int64_t)(mono_ns() - c->start_mono);
}

int continuous__kernel_symbols(struct continuous *c, struct ksyms **ks)
{
	uint64_t now = mono_ns();
	struct ksyms *fresh = NULL;
	int err;

	if (*ks && now - c->ksyms_loaded_ns < KSYMS_MAX_AGE_NS)
		return 0;
	err = ksyms__load(&fresh, NULL);
	if (err) {
		if (!*ks)
			pr_warn("no kernel symbols (/proc/kallsyms: %s)", strerror(-err));
		c->ksyms_loaded_ns = now; /* not every interval */
		return err;
	}
	ksyms__free(*ks);
	*ks = fresh;
	c->ksyms_loaded_ns = now;
	return 0;
}

/* bpfprof-20261122T101500.123Z.pb.gz: sorts by time as text. */
static void file_name(int64_t wall, char *buf, size_t len)
{
	time_t s = (time_t)(wall / 1000000000LL);
	struct tm tm;
	char ts[32];

	gmtime_r(&s, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%S", &tm);
	snprintf(buf, len, FILE_PREFIX "%s.%03dZ" FILE_SUFFIX, ts, (int)(wall / 1000000LL % 1000));
}

/* exactly a name file_name() makes */
static bool ours(const char *name)
{
	static const char shape[] = FILE_PREFIX "ddddddddTdddddd.dddZ" FILE_SUFFIX;

	if (strlen(name) != FILE_NAME_LEN)
		return false;
	for (size_t i = 0; i < FILE_NAME_LEN; i++)
		if (shape[i] == 'd' ? !isdigit((unsigned char)name[i]) : name[i] != shape[i])
			return false;
	return true;
}

static uint64_t ctime_ns(const struct stat *st)
{
	return (uint64_t)st->st_ctim.tv_sec * 1000000000ULL + (uint64_t)st->st_ctim.tv_nsec;
}

static int cmp_written(const void *a, const void *b)
{
	return strcmp(((const struct written *)a)->name, ((const struct written *)b)->name);
}

static int own__add(struct continuous *c, const char *name, uint64_t ino, uint64_t ctime_ns)
{
	if (c->nown == c->cap_own) {
		size_t cap = c->cap_own ? c->cap_own * 2 : 64;
		struct written *v = realloc(c->own, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->own = v;
		c->cap_own = cap;
	}
	snprintf(c->own[c->nown].name, sizeof(c->own[c->nown].name), "%s", name);
	c->own[c->nown].ino = ino;
	c->own[c->nown++].ctime_ns = ctime_ns;
	return 0;
}

/*
 * Read MANIFEST: only ours (regular, our uid, nobody else may write it) is
 * believed; anything else is ignored, with a warning, and later replaced.
 */
static void manifest__load(struct continuous *c)
{
	int fd = openat(c->dirfd, MANIFEST, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char line[128], name[FILE_NAME_LEN + 2];
	unsigned long long ino, ct;
	struct stat st;
	FILE *f;

	if (fd < 0) {
		if (errno != ENOENT)
			pr_warn("--keep: ignoring %s/%s: %s", c->dir, MANIFEST, strerror(errno));
		return;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) || st.st_size > MANIFEST_MAX) {
		pr_warn("--keep: ignoring %s/%s: not a regular file of ours, private, under %d "
			"bytes; only files written from now on will be deleted",
			c->dir, MANIFEST, MANIFEST_MAX);
		close(fd);
		return;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%35s %llu %llu", name, &ino, &ct) == 3 && ours(name) &&
		    own__add(c, name, ino, ct))
			break;
	fclose(f);
	qsort(c->own, c->nown, sizeof(*c->own), cmp_written);
}

/* Write MANIFEST anew (temporary file, renamed over it): 0 or -errno. */
static int manifest__save(struct continuous *c)
{
	char tmp[sizeof(MANIFEST) + 8];
	FILE *f;
	int fd, err = 0;

	for (int i = 0;; i++) {
		/* unpredictable enough for a 0700 directory; O_EXCL makes a clash a retry */
		snprintf(tmp, sizeof(tmp), MANIFEST ".%06x",
			 (unsigned int)((getpid() * 2654435761u + mono_ns() + i) & 0xffffff));
		fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0 || errno != EEXIST || i == 16)
			break;
	}
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		unlinkat(c->dirfd, tmp, 0);
		return err;
	}
	for (size_t i = 0; i < c->nown; i++)
		fprintf(f, "%s %llu %llu\n", c->own[i].name, (unsigned long long)c->own[i].ino,
			(unsigned long long)c->own[i].ctime_ns);
	if (fflush(f) || ferror(f))
		err = -(errno ? errno : EIO);
	if (fclose(f) && !err)
		err = -errno;
	if (!err && renameat(c->dirfd, tmp, c->dirfd, MANIFEST))
		err = -errno;
	if (err)
		unlinkat(c->dirfd, tmp, 0);
	return err;
}

/* With --keep 0 nothing is deleted: the line is appended, nothing kept in memory. */
static int manifest__append(struct continuous *c, const char *name, uint64_t ino, uint64_t ctime_ns)
{
	int fd = openat(c->dirfd, MANIFEST,
			O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	struct stat st;
	char line[128];
	int n, err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	n = snprintf(line, sizeof(line), "%s %llu %llu\n", name, (unsigned long long)ino,
		     (unsigned long long)ctime_ns);
	if (write(fd, line, (size_t)n) != n)
		err = -EIO;
	close(fd);
	return err;
}

/* The file just written: recorded as ours. */
static void remember(struct continuous *c, const char *name)
{
	struct stat st;
	int err;

	if (fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return;
	if (!c->keep)
		err = manifest__append(c, name, st.st_ino, ctime_ns(&st));
	else
		err = own__add(c, name, st.st_ino, ctime_ns(&st));
	if (err)
		pr_warn("--keep: cannot record %s as written: %s; it will not be deleted", name,
			strerror(-err));
}

/*
 * Delete the oldest files we wrote beyond --keep (ours from earlier runs
 * count too, through MANIFEST). A name of ours that is now another file
 * (another inode, another owner, not a regular file) is spared and forgotten.
 */
static void rotate(struct continuous *c)
{
	size_t drop, i;
	struct stat st;
	int err;

	if (!c->keep)
		return;
	drop = c->nown > c->keep ? c->nown - c->keep : 0;
	for (i = 0; i < drop; i++) {
		const struct written *w = &c->own[i];

		if (fstatat(c->dirfd, w->name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone already */
		if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_ino != w->ino ||
		    ctime_ns(&st) != w->ctime_ns) {
			c->spared++;
			pr_verbose("--keep: %s/%s is not the file bpfprof wrote: left alone",
				   c->dir, w->name);
			continue;
		}
		if (!unlinkat(c->dirfd, w->name, 0))
			c->deleted++;
	}
	memmove(c->own, c->own + drop, (c->nown - drop) * sizeof(*c->own));
	c->nown -= drop;
	err = manifest__save(c);
	if (err)
		pr_warn("--keep: cannot write %s/%s: %s", c->dir, MANIFEST, strerror(-err));
}

static long rss_kib(void)
{
	long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%*d %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static double cpu_s(const struct rusage *ru)
{
	return ru->ru_utime.tv_sec + ru->ru_stime.tv_sec +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

int continuous__write(struct continuous *c, const struct profile *p,
		      const struct interval_totals *t)
{
	uint64_t now = mono_ns();
	int64_t end_wall = c->start_wall + (int64_t)(now - c->start_mono);
	char name[64], path[4096], up[128] = "";
	struct output out;
	struct rusage ru;
	double wall_s = (now - c->start_mono) / 1e9;
	int err;

	file_name(c->start_wall, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	/* a new file, renamed into place in the directory: never through a link planted at name */
	err = output__open_at(&out, c->dirfd, name, path);
	if (!err) {
		err = pprof__write(p, out.f);
		if (err) {
			pr_err("cannot write the profile: %s", strerror(-err));
			output__abort(&out);
		} else {
			err = output__commit(&out);
		}
	}
	c->intervals++;
	if (err) {
		c->failed++;
	} else {
		c->written++;
		remember(c, name);
		rotate(c);
		if (c->up && uploader__push(c->up, path, c->start_wall, end_wall))
			pr_warn("cannot queue %s for upload: out of memory", name);
	}

	getrusage(RUSAGE_SELF, &ru);
	if (c->up) {
		struct upload_stats us;

		uploader__stats(c->up, &us);
		snprintf(up, sizeof(up), "; uploads %llu sent, %llu failed, %llu pending",
			 (unsigned long long)us.sent, (unsigned long long)(us.failed + us.dropped),
			 (unsigned long long)us.pending);
	}
	pr_info("%s: %llu samples, %llu lost, %zu processes, agent %.2f%% CPU, RSS %.1f MiB, "
		"caches %.1f MiB (%llu evicted)%s%s",
		err ? "(not written)" : name, (unsigned long long)(t->samples - c->last.samples),
		(unsigned long long)(t->lost - c->last.lost), t->processes,
		wall_s > 0 ? 100.0 * (cpu_s(&ru) - cpu_s(&c->last_ru)) / wall_s : 0.0,
		rss_kib() / 1024.0, membudget__used() / 1048576.0,
		(unsigned long long)(membudget__evicted() - c->last_evicted), up,
		err ? "; interval lost" : "");
	c->last_evicted = membudget__evicted();
	c->last = *t;
	c->last_ru = ru;
	/* the next interval starts where this one ended: no sample falls between two */
	start_interval(c, now);
	return err;
}

void continuous__summary(struct continuous *c)
{
	struct upload_stats us;

	pr_info("continuous: %llu intervals, %llu files written to %s (%llu failed), %llu deleted "
		"by --keep, %llu named like ours but not written by bpfprof left alone",
		(unsigned long long)c->intervals, (unsigned long long)c->written, c->dir,
		(unsigned long long)c->failed, (unsigned long long)c->deleted,
		(unsigned long long)c->spared);
	if (!c->up)
		return;
	uploader__stop(c->up, UPLOAD_GRACE_S);
	uploader__stats(c->up, &us);
	pr_info("upload: %llu of %llu files sent to %s, %llu failed after %llu retries, %llu "
		"dropped from a full queue (those stay in %s)",
		(unsigned long long)us.sent, (unsigned long long)us.queued, env.upload_url_shown,
		(unsigned long long)us.failed, (unsigned long long)us.retries,
		(unsigned long long)us.dropped, c->dir);
}
