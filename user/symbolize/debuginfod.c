// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/debuginfod.h"
#include "symbolize/elfsym.h"
#include "util/clock.h"
#include "util/log.h"

struct dreq {
	uint32_t id;
	int fd; /* the file asked for (a dup), or, in done[], its debug file */
};

struct dinfod {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, or stop; and work finished (dinfod__wait) */
	struct dreq *todo, *done;
	size_t ntodo, captodo, ndone, capdone;
	uint32_t ndone_atomic; /* ndone, read without the lock by dinfod__take */
	bool busy;	       /* the thread is fetching one */
	bool stop;
	struct dinfod_stats st;
};

/* Whether the ELF file at fd has its full symbol table: then nothing to fetch. */
static bool has_symtab(int fd)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	bool found = false;

	while (elf && !found && (scn = elf_nextscn(elf, scn)))
		found = gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size;
	if (elf)
		elf_end(elf);
	return found;
}

static int push(struct dreq **v, size_t *n, size_t *cap, struct dreq r)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct dreq *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = r;
	return 0;
}

/* Abandons a transfer in flight once dinfod__free wants the thread to end. */
static int progress(debuginfod_client *c, long a, long b)
{
	struct dinfod *d = debuginfod_get_user_data(c);

	(void)a;
	(void)b;
	return __atomic_load_n(&d->stop, __ATOMIC_RELAXED);
}

/* One file's debug file: its fd, or -errno (-ENOENT: none to ask for, or none found). */
static int fetch(struct dinfod *d, debuginfod_client *c, int fd, bool *skipped)
{
	char bid[129], got[129], local[PATH_MAX];
	char *path = NULL;
	struct stat st;
	int dfd;

	*skipped = false;
	if (elf_read_build_id(fd, bid, sizeof(bid)) <= 0 || strlen(bid) < 3 || has_symtab(fd)) {
		*skipped = true;
		return -ENOENT;
	}
	/* the host has it (a -dbg package): elfsym takes it from there */
	snprintf(local, sizeof(local), "/usr/lib/debug/.build-id/%.2s/%s.debug", bid, bid + 2);
	if (!access(local, R_OK)) {
		*skipped = true;
		return -ENOENT;
	}
	dfd = debuginfod_find_debuginfo(c, (const unsigned char *)bid, 0, &path);
	free(path);
	if (dfd < 0)
		return dfd;
	/* the file asked for, not whatever a server answered */
	if (elf_read_build_id(dfd, got, sizeof(got)) <= 0 || strcmp(got, bid) || fstat(dfd, &st) ||
	    !S_ISREG(st.st_mode)) {
		close(dfd);
		return -EBADMSG;
	}
	pthread_mutex_lock(&d->lock);
	d->st.bytes += (uint64_t)st.st_size;
	pthread_mutex_unlock(&d->lock);
	return dfd;
}

static void *worker(void *arg)
{
	struct dinfod *d = arg;
	debuginfod_client *c = debuginfod_begin();

	if (c) {
		debuginfod_set_user_data(c, d);
		debuginfod_set_progressfn(c, progress);
	}
	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct dreq r;
		bool skipped = false;
		int dfd;

		while (!d->stop && !d->ntodo)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stop)
			break;
		r = d->todo[0];
		memmove(d->todo, d->todo + 1, --d->ntodo * sizeof(*d->todo));
		d->busy = true;
		pthread_mutex_unlock(&d->lock);

		dfd = c ? fetch(d, c, r.fd, &skipped) : -ENOMEM;
		close(r.fd);

		pthread_mutex_lock(&d->lock);
		d->busy = false;
		if (d->st.pending)
			d->st.pending--;
		if (dfd >= 0 &&
		    push(&d->done, &d->ndone, &d->capdone, (struct dreq){ r.id, dfd })) {
			close(dfd);
			dfd = -ENOMEM;
		}
		if (dfd >= 0)
			d->st.found++;
		else if (skipped)
			d->st.skipped++;
		else if (dfd == -ENOENT)
			d->st.not_found++;
		else
			d->st.failed++;
		__atomic_store_n(&d->ndone_atomic, (uint32_t)d->ndone, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	if (c)
		debuginfod_end(c);
	return NULL;
}

struct dinfod *dinfod__new(void)
{
	const char *urls = getenv(DEBUGINFOD_URLS_ENV_VAR);
	struct dinfod *d;

	if (!urls || !*urls)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (pthread_create(&d->thread, NULL, worker, d)) {
		pr_warn("debuginfod: cannot start its thread: debug files not fetched");
		pthread_cond_destroy(&d->cond);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return NULL;
	}
	pr_verbose("debuginfod: debug files of stripped binaries from %s", urls);
	return d;
}

void dinfod__free(struct dinfod *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	__atomic_store_n(&d->stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	for (size_t i = 0; i < d->ntodo; i++)
		close(d->todo[i].fd);
	for (size_t i = 0; i < d->ndone; i++)
		close(d->done[i].fd);
	free(d->todo);
	free(d->done);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int dinfod__want(struct dinfod *d, uint32_t id, int fd)
{
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3), err;

	if (dup_fd < 0)
		return -errno;
	pthread_mutex_lock(&d->lock);
	err = push(&d->todo, &d->ntodo, &d->captodo, (struct dreq){ id, dup_fd });
	if (!err) {
		d->st.asked++;
		d->st.pending++;
		pthread_cond_broadcast(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	if (err)
		close(dup_fd);
	return err;
}

bool dinfod__take(struct dinfod *d, uint32_t *id, int *fd)
{
	bool got = false;

	if (!d || !__atomic_load_n(&d->ndone_atomic, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&d->lock);
	if (d->ndone) {
		*id = d->done[d->ndone - 1].id;
		*fd = d->done[d->ndone - 1].fd;
		d->ndone--;
		got = true;
	}
	__atomic_store_n(&d->ndone_atomic, (uint32_t)d->ndone, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&d->lock);
	return got;
}

void dinfod__wait(struct dinfod *d, uint64_t max_ns)
{
	uint64_t t0 = mono_ns();
	struct timespec until;

	if (!d)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(max_ns / 1000000000ULL);
	until.tv_nsec += (long)(max_ns % 1000000000ULL);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&d->lock);
	while ((d->ntodo || d->busy) &&
	       pthread_cond_timedwait(&d->cond, &d->lock, &until) != ETIMEDOUT)
		;
	d->st.wait_ns += mono_ns() - t0;
	pthread_mutex_unlock(&d->lock);
}

void dinfod__stats(struct dinfod *d, struct dinfod_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	*out = d->st;
	pthread_mutex_unlock(&d->lock);
}
