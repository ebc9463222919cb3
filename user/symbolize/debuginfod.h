/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * debuginfod: separate debug files of stripped binaries, fetched by build id
 * from the servers DEBUGINFOD_URLS names (the agent's own environment), with
 * elfutils' libdebuginfod, which keeps them in its on-disk cache
 * ($DEBUGINFOD_CACHE_PATH, else ~/.cache/debuginfod_client). Fetches run on
 * a thread of their own: the sample loop only queues a file and, later,
 * takes what arrived. A file with its full symbol table (.symtab), with
 * a debug file on the host (/usr/lib/debug/.build-id) or without a build
 * id is not asked for.
 */
#ifndef BPFPROF_DEBUGINFOD_H
#define BPFPROF_DEBUGINFOD_H

#include <stdbool.h>
#include <stdint.h>

struct dinfod;

struct dinfod_stats {
	uint64_t asked;	    /* files queued */
	uint64_t skipped;   /* not asked for: full symbols already, or no build id */
	uint64_t found;	    /* debug files received (from the cache or a server) */
	uint64_t not_found; /* no server has the build id */
	uint64_t failed;    /* other errors (unreachable, timed out, not the file asked for) */
	uint64_t pending;   /* queued or in flight now */
	uint64_t bytes;	    /* size of the debug files received */
	uint64_t wait_ns;   /* spent waiting at the end of the run (dinfod__wait) */
};

/* NULL when DEBUGINFOD_URLS is unset or empty (or the client cannot start). */
struct dinfod *dinfod__new(void);
/* Stops the thread (a fetch in flight is abandoned) and closes what was not taken. */
void dinfod__free(struct dinfod *d);

/*
 * Queue a debug file for the ELF file open at fd (dup'ed; the caller keeps
 * its fd), to be known by id. 0 or -errno.
 */
int dinfod__want(struct dinfod *d, uint32_t id, int fd);
/*
 * A debug file that arrived: its id and an fd open on it (the caller's to
 * close). true when one was taken, false when none is waiting. Cheap when
 * none is: one atomic load.
 */
bool dinfod__take(struct dinfod *d, uint32_t *id, int *fd);
/* Until nothing is queued or in flight, or max_ns passed. */
void dinfod__wait(struct dinfod *d, uint64_t max_ns);
void dinfod__stats(struct dinfod *d, struct dinfod_stats *out);

#endif
