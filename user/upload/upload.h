/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * upload: push finished interval files to a Pyroscope server (POST
 * URL/ingest?name=APP{labels}&from=&until=&format=pprof, the profile as the
 * multipart field "profile", as Grafana Pyroscope's HTTP ingest API takes
 * it). A thread of its own does the HTTP with libcurl, so that a slow or dead
 * server never delays sampling: the recorder only queues a file name. Each
 * file is tried a few times with exponential backoff; what still fails, or
 * falls off a full queue, is counted and stays on disk.
 */
#ifndef BPFPROF_UPLOAD_H
#define BPFPROF_UPLOAD_H

#include <stdint.h>

struct uploader;

struct upload_stats {
	uint64_t queued;  /* files handed to the uploader */
	uint64_t sent;	  /* accepted by the server (2xx) */
	uint64_t retries; /* attempts after a first failure */
	uint64_t failed;  /* given up after every retry */
	uint64_t dropped; /* pushed off a full queue, never tried */
	uint64_t pending; /* in the queue or in flight now */
};

/*
 * Credentials for the server: from --upload-auth-file PATH, else from the
 * environment variable below (then removed from bpfprof's environment, so
 * no command it starts inherits it). Either holds one line: "USER:PASSWORD"
 * (HTTP basic) or "Bearer TOKEN". Never printed, never in the URL.
 */
#define UPLOAD_AUTH_ENV "BPFPROF_UPLOAD_AUTH"

struct upload_auth {
	char *user, *password; /* basic, or NULL */
	char *bearer;	       /* a bearer token, or NULL */
};

/*
 * Read credentials from path (NULL: from $BPFPROF_UPLOAD_AUTH, absent is no
 * credentials). Returns 0 or -errno with one line printed naming what is
 * wrong (never the secret).
 */
int upload_auth__load(struct upload_auth *a, const char *path);
/* Overwrite and free. */
void upload_auth__clear(struct upload_auth *a);
/* url with any userinfo ("user:password@") shown as "***@": malloc'd, NULL if out of memory. */
char *upload_url__redact(const char *url);
/* Length of the userinfo in url (before '@'), and where it starts; 0 when it has none. */
size_t upload_url__userinfo(const char *url, size_t *start);

struct upload_opts {
	const char *url;		/* server base URL: /ingest is appended */
	const struct upload_auth *auth; /* NULL: none (or the URL's own userinfo) */
	const char *app_name;
	unsigned int sample_rate; /* Hz */
	unsigned int attempts;	  /* tries per file (default 4) */
	double backoff; /* seconds before the first retry, doubled each time (default 1) */
	double timeout; /* seconds per request (default 10) */
};

/* Starts the thread. Returns 0 or -errno. */
int uploader__new(struct uploader **out, const struct upload_opts *o);
/*
 * Queue a file covering [from_ns, until_ns) (wall clock). Never blocks on the
 * network. Returns 0 or -ENOMEM.
 */
int uploader__push(struct uploader *u, const char *path, int64_t from_ns, int64_t until_ns);
/* A snapshot of the counters. */
void uploader__stats(struct uploader *u, struct upload_stats *st);
/*
 * Stop: give what is queued up to `grace` seconds to go out (no new retries
 * after that; what is left counts as failed), then join the thread.
 */
void uploader__stop(struct uploader *u, double grace);
/* Stops at once (if not stopped) and frees. */
void uploader__free(struct uploader *u);

#endif
