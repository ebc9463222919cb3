// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* calls go through the table below: no type-checking macros named like the functions */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "upload/upload.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * libcurl is opened when an uploader is made, not linked: with its 30-odd
 * libraries (TLS, Kerberos, LDAP, ...) the dynamic loader took ~9 ms of
 * CPU at every start of bpfprof, a tenth of -a's start-up (issue 17), for
 * what only --upload uses.
 */
#define CURL_FUNCS(X)          \
	X(curl_global_init)    \
	X(curl_global_cleanup) \
	X(curl_easy_init)      \
	X(curl_easy_cleanup)   \
	X(curl_easy_reset)     \
	X(curl_easy_setopt)    \
	X(curl_easy_perform)   \
	X(curl_easy_getinfo)   \
	X(curl_easy_strerror)  \
	X(curl_easy_escape)    \
	X(curl_free)           \
	X(curl_mime_init)      \
	X(curl_mime_addpart)   \
	X(curl_mime_name)      \
	X(curl_mime_filedata)  \
	X(curl_mime_type)      \
	X(curl_mime_free)

static struct {
	void *lib;
#define X(f) __typeof__(f) *f;
	CURL_FUNCS(X)
#undef X
} lc;

/* Open libcurl once (the main thread, before any uploader thread). 0, or -ENOENT. */
static int curl_open(void)
{
	if (lc.lib)
		return 0;
	lc.lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lc.lib) {
		pr_warn("--upload needs libcurl.so.4: %s", dlerror());
		return -ENOENT;
	}
#define X(f)                                          \
	if (!(*(void **)&lc.f = dlsym(lc.lib, #f))) { \
		pr_warn("libcurl.so.4 lacks %s", #f); \
		dlclose(lc.lib);                      \
		lc.lib = NULL;                        \
		return -ENOENT;                       \
	}
	CURL_FUNCS(X)
#undef X
	return 0;
}

/* Files waiting at most; older ones are dropped (counted) while the server is away. */
#define MAX_QUEUE 256
/* An auth file is one short line */
#define AUTH_MAX 4096

struct job {
	struct job *next;
	char *path;
	int64_t from_ns, until_ns;
	unsigned int tries;
	uint64_t not_before_ns; /* CLOCK_MONOTONIC: retry after backoff */
};

struct uploader {
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	size_t n;
	bool stopping;
	uint64_t stop_deadline_ns;
	struct upload_opts o;
	char *base;	/* URL without trailing '/' */
	char *name_enc; /* url-encoded APP{hostname=...} */
	struct upload_stats st;
	CURL *curl;		 /* used by the thread only */
	struct upload_auth auth; /* a copy: the caller's may be cleared */
};

static void job_free(struct job *j)
{
	if (j) {
		free(j->path);
		free(j);
	}
}

static struct job *pop_head(struct uploader *u)
{
	struct job *j = u->head;

	if (j) {
		u->head = j->next;
		if (!u->head)
			u->tail = NULL;
		j->next = NULL;
		u->n--;
	}
	return j;
}

/* One POST; true when the server answered 2xx. */
static bool send_one(struct uploader *u, const struct job *j)
{
	long long from = j->from_ns / 1000000000LL;
	long long until = (j->until_ns + 999999999LL) / 1000000000LL;
	curl_mime *mime = NULL;
	curl_mimepart *part;
	char *url = NULL;
	long code = 0;
	CURLcode rc;

	if (until <= from)
		until = from + 1;
	if (asprintf(&url,
		     "%s/ingest?name=%s&from=%lld&until=%lld&format=pprof&sampleRate=%u"
		     "&spyName=bpfprof",
		     u->base, u->name_enc, from, until, u->o.sample_rate) < 0)
		return false;
	mime = lc.curl_mime_init(u->curl);
	part = mime ? lc.curl_mime_addpart(mime) : NULL;
	if (!part || lc.curl_mime_name(part, "profile") || lc.curl_mime_filedata(part, j->path) ||
	    lc.curl_mime_type(part, "application/octet-stream")) {
		lc.curl_mime_free(mime);
		free(url);
		return false;
	}
	lc.curl_easy_reset(u->curl);
	lc.curl_easy_setopt(u->curl, CURLOPT_URL, url);
	lc.curl_easy_setopt(u->curl, CURLOPT_MIMEPOST, mime);
	lc.curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L); /* a thread: no SIGALRM */
	lc.curl_easy_setopt(u->curl, CURLOPT_TIMEOUT_MS, (long)(u->o.timeout * 1000));
	lc.curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)(u->o.timeout * 1000));
	lc.curl_easy_setopt(u->curl, CURLOPT_USERAGENT, "bpfprof/" BPFPROF_VERSION);
	if (u->auth.bearer) {
		lc.curl_easy_setopt(u->curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		lc.curl_easy_setopt(u->curl, CURLOPT_XOAUTH2_BEARER, u->auth.bearer);
	} else if (u->auth.user) {
		lc.curl_easy_setopt(u->curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
		lc.curl_easy_setopt(u->curl, CURLOPT_USERNAME, u->auth.user);
		lc.curl_easy_setopt(u->curl, CURLOPT_PASSWORD, u->auth.password);
	}
	rc = lc.curl_easy_perform(u->curl);
	if (rc == CURLE_OK)
		lc.curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK)
		pr_debug("upload of %s: %s", j->path, lc.curl_easy_strerror(rc));
	else if (code < 200 || code > 299)
		pr_debug("upload of %s: HTTP %ld", j->path, code);
	lc.curl_mime_free(mime);
	free(url);
	return rc == CURLE_OK && code >= 200 && code <= 299;
}

static void wait_until(struct uploader *u, uint64_t mono_deadline)
{
	struct timespec now, ts;
	uint64_t wait_ns = mono_deadline - mono_ns();

	/* the condition variable runs on CLOCK_MONOTONIC (see uploader__new) */
	clock_gettime(CLOCK_MONOTONIC, &now);
	ts.tv_sec = now.tv_sec + (time_t)(wait_ns / 1000000000ULL);
	ts.tv_nsec = now.tv_nsec + (long)(wait_ns % 1000000000ULL);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&u->cv, &u->mu, &ts);
}

static void *run(void *arg)
{
	struct uploader *u = arg;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		struct job *j;
		uint64_t now = mono_ns();
		bool ok;

		if (u->stopping && (!u->head || now >= u->stop_deadline_ns))
			break;
		if (!u->head) {
			pthread_cond_wait(&u->cv, &u->mu);
			continue;
		}
		if (u->head->not_before_ns > now) {
			uint64_t until = u->head->not_before_ns;

			if (u->stopping && until > u->stop_deadline_ns)
				until = u->stop_deadline_ns;
			wait_until(u, until);
			continue;
		}
		j = pop_head(u);
		pthread_mutex_unlock(&u->mu);
		ok = send_one(u, j);
		pthread_mutex_lock(&u->mu);
		now = mono_ns();
		if (ok) {
			u->st.sent++;
			u->st.pending--;
			job_free(j);
		} else if (++j->tries < u->o.attempts &&
			   !(u->stopping && now >= u->stop_deadline_ns)) {
			/* first in line again: files go out in order once the server is back */
			u->st.retries++;
			j->not_before_ns =
				now + (uint64_t)(u->o.backoff * 1e9) * (1ULL << (j->tries - 1));
			j->next = u->head;
			u->head = j;
			if (!u->tail)
				u->tail = j;
			u->n++;
		} else {
			pr_debug("upload of %s failed %u times: kept on disk", j->path, j->tries);
			u->st.failed++;
			u->st.pending--;
			job_free(j);
		}
	}
	/* what is left when we must stop: never sent, still on disk */
	while (u->head) {
		job_free(pop_head(u));
		u->st.failed++;
		u->st.pending--;
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

int uploader__new(struct uploader **out, const struct upload_opts *o)
{
	struct uploader *u = calloc(1, sizeof(*u));
	pthread_condattr_t ca;
	char host[256] = "unknown", *name = NULL, *enc = NULL;
	size_t len;
	int err = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->o = *o;
	if (!u->o.attempts)
		u->o.attempts = 4;
	if (u->o.backoff <= 0)
		u->o.backoff = 1;
	if (u->o.timeout <= 0)
		u->o.timeout = 10;
	pthread_mutex_init(&u->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&u->cv, &ca);
	pthread_condattr_destroy(&ca);
	err = curl_open();
	if (err)
		goto fail;
	err = -ENOMEM;
	if (lc.curl_global_init(CURL_GLOBAL_DEFAULT))
		goto fail;
	u->curl = lc.curl_easy_init();
	u->base = strdup(o->url);
	u->o.auth = NULL;
	if (o->auth && ((o->auth->bearer && !(u->auth.bearer = strdup(o->auth->bearer))) ||
			(o->auth->user && (!(u->auth.user = strdup(o->auth->user)) ||
					   !(u->auth.password = strdup(o->auth->password))))))
		goto fail;
	if (!u->curl || !u->base)
		goto fail;
	len = strlen(u->base);
	while (len && u->base[len - 1] == '/')
		u->base[--len] = '\0';
	gethostname(host, sizeof(host) - 1);
	/* every series of this agent carries the host it came from */
	if (asprintf(&name, "%s{hostname=%s}", o->app_name, host) < 0)
		goto fail;
	enc = lc.curl_easy_escape(u->curl, name, 0);
	free(name);
	if (!enc)
		goto fail;
	u->name_enc = strdup(enc);
	lc.curl_free(enc);
	if (!u->name_enc)
		goto fail;
	err = -pthread_create(&u->thread, NULL, run, u);
	if (err)
		goto fail;
	u->started = true;
	*out = u;
	return 0;
fail:
	uploader__free(u);
	return err;
}

int uploader__push(struct uploader *u, const char *path, int64_t from_ns, int64_t until_ns)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j || !(j->path = strdup(path))) {
		free(j);
		return -ENOMEM;
	}
	j->from_ns = from_ns;
	j->until_ns = until_ns;
	pthread_mutex_lock(&u->mu);
	if (u->n >= MAX_QUEUE) {
		/* the server has been away long: the oldest file waits on disk only */
		job_free(pop_head(u));
		u->st.dropped++;
		u->st.pending--;
	}
	if (u->tail)
		u->tail->next = j;
	else
		u->head = j;
	u->tail = j;
	u->n++;
	u->st.queued++;
	u->st.pending++;
	pthread_cond_signal(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return 0;
}

void uploader__stats(struct uploader *u, struct upload_stats *st)
{
	pthread_mutex_lock(&u->mu);
	*st = u->st;
	pthread_mutex_unlock(&u->mu);
}

void uploader__stop(struct uploader *u, double grace)
{
	if (!u->started)
		return;
	pthread_mutex_lock(&u->mu);
	u->stopping = true;
	u->stop_deadline_ns = mono_ns() + (uint64_t)(grace * 1e9);
	pthread_cond_signal(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pthread_join(u->thread, NULL);
	u->started = false;
}

void uploader__free(struct uploader *u)
{
	if (!u)
		return;
	uploader__stop(u, 0);
	while (u->head)
		job_free(pop_head(u));
	if (u->curl)
		lc.curl_easy_cleanup(u->curl);
	if (lc.lib)
		lc.curl_global_cleanup();
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	upload_auth__clear(&u->auth);
	free(u->base);
	free(u->name_enc);
	free(u);
}

/* zero before free: a secret should not linger in freed memory (core dumps) */
static void secret__free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void upload_auth__clear(struct upload_auth *a)
{
	secret__free(a->user);
	secret__free(a->password);
	secret__free(a->bearer);
	memset(a, 0, sizeof(*a));
}

/* One line of credentials into a: 0 or -EINVAL (nothing printed). */
static int auth__parse(struct upload_auth *a, char *line)
{
	char *colon;

	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "Bearer ", 7)) {
		if (!line[7] || strpbrk(line + 7, " \t"))
			return -EINVAL;
		a->bearer = strdup(line + 7);
		return a->bearer ? 0 : -ENOMEM;
	}
	colon = strchr(line, ':');
	if (!colon || colon == line)
		return -EINVAL;
	*colon = '\0';
	a->user = strdup(line);
	a->password = strdup(colon + 1);
	*colon = ':';
	if (!a->user || !a->password) {
		upload_auth__clear(a);
		return -ENOMEM;
	}
	return 0;
}

/* The file's first AUTH_MAX bytes into buf; never blocks, regular files only. */
static int auth__read_file(const char *path, char *buf, size_t len, mode_t *mode)
{
	int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	ssize_t n;
	int err;

	if (fd < 0) {
		err = -errno;
		pr_err("cannot read --upload-auth-file '%s': %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size >= (off_t)len) {
		pr_err("cannot read --upload-auth-file '%s': expected a regular file under %zu bytes",
		       path, len);
		close(fd);
		return -EINVAL;
	}
	*mode = st.st_mode;
	n = read(fd, buf, len - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err) {
		pr_err("cannot read --upload-auth-file '%s': %s", path, strerror(-err));
		return err;
	}
	buf[n] = '\0';
	return 0;
}

int upload_auth__load(struct upload_auth *a, const char *path)
{
	char buf[AUTH_MAX];
	const char *from = path ? "--upload-auth-file" : "$" UPLOAD_AUTH_ENV;
	mode_t mode = 0;
	const char *v;
	int err;

	memset(a, 0, sizeof(*a));
	if (path) {
		err = auth__read_file(path, buf, sizeof(buf), &mode);
		if (err)
			return err;
	} else {
		v = getenv(UPLOAD_AUTH_ENV);
		if (!v)
			return 0;
		snprintf(buf, sizeof(buf), "%s", v);
		/* a command bpfprof starts (-- CMD) must not inherit it */
		unsetenv(UPLOAD_AUTH_ENV);
	}
	err = auth__parse(a, buf);
	explicit_bzero(buf, sizeof(buf));
	if (err == -EINVAL)
		pr_err("invalid credentials in %s: expected one line, 'USER:PASSWORD' or 'Bearer "
		       "TOKEN'",
		       from);
	else if (err)
		pr_err("out of memory");
	else if (mode & 0077)
		pr_warn("--upload-auth-file '%s' can be read by other users (mode %03o): chmod 600 "
			"it",
			path, (unsigned int)(mode & 0777));
	return err;
}

size_t upload_url__userinfo(const char *url, size_t *start)
{
	const char *auth = strstr(url, "://"), *end, *at = NULL;

	if (!auth)
		return 0;
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p; /* the last '@': a password may hold one */
	if (!at)
		return 0;
	*start = (size_t)(auth - url);
	return (size_t)(at - auth);
}

char *upload_url__redact(const char *url)
{
	size_t start = 0, n = upload_url__userinfo(url, &start);
	char *out;

	if (!n)
		return strdup(url);
	if (asprintf(&out, "%.*s***%s", (int)start, url, url + start + n) < 0)
		return NULL;
	return out;
}
