// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "aggregate/profile.h"
#include "cli.h"
#include "collect/continuous.h"
#include "collect/upload.h"
#include "symbolize/ksyms.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/membudget.h"
#include "write/output.h"
#include "write/writers.h"

#define FILE_PREFIX "bpfprof-"
#define FILE_SUFFIX ".pb.gz"
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
	uint64_t intervals, written, failed, deleted;
	struct uploader *up;
};

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
	int err;

	if (!c || !(c->dir = strdup(env.continuous_dir))) {
		free(c);
		pr_err("out of memory");
		return -ENOMEM;
	}
	c->interval_ns = (uint64_t)(env.interval * 1e9);
	c->keep = env.keep;
	if (env.upload_url) {
		/* retries fit in about one interval, and never more than a few seconds apart */
		double backoff = env.interval / 4;
		struct upload_opts uo = {
			.url = env.upload_url,
			.app_name = env.app_name,
			.sample_rate = env.freq,
			.attempts = 4,
			.backoff = backoff < 0.05 ? 0.05
				   : backoff > 5  ? 5
						  : backoff,
			.timeout = env.interval < 10 ? 10 : env.interval,
		};

		err = uploader__new(&c->up, &uo);
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

static bool ours(const char *name)
{
	size_t n = strlen(name), p = strlen(FILE_PREFIX), s = strlen(FILE_SUFFIX);

	return n > p + s && !strncmp(name, FILE_PREFIX, p) && !strcmp(name + n - s, FILE_SUFFIX);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Delete the oldest of our files beyond --keep (ours from earlier runs count too). */
static void rotate(struct continuous *c)
{
	char **names = NULL, **v, path[4096];
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	if (!c->keep || !(d = opendir(c->dir)))
		return;
	while ((de = readdir(d))) {
		if (!ours(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = realloc(names, cap * sizeof(*v));
			if (!v)
				break;
			names = v;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i + c->keep < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", c->dir, names[i]);
		if (!unlink(path))
			c->deleted++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
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
	err = output__open(&out, path);
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
		"by --keep",
		(unsigned long long)c->intervals, (unsigned long long)c->written, c->dir,
		(unsigned long long)c->failed, (unsigned long long)c->deleted);
	if (!c->up)
		return;
	uploader__stop(c->up, UPLOAD_GRACE_S);
	uploader__stats(c->up, &us);
	pr_info("upload: %llu of %llu files sent to %s, %llu failed after %llu retries, %llu "
		"dropped from a full queue (those stay in %s)",
		(unsigned long long)us.sent, (unsigned long long)us.queued, env.upload_url,
		(unsigned long long)us.failed, (unsigned long long)us.retries,
		(unsigned long long)us.dropped, c->dir);
}
