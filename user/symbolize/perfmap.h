/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * perfmap: names for JIT code from the process's perf map
 * (/tmp/perf-PID.map, "START SIZE name" per line, hex, as V8, the JVM's
 * perf-map-agent, LuaJIT and CPython 3.12's -X perf write it). Read as the
 * process could read it: in its root and mount namespace, its own regular
 * file (owned by one of its uids, the last component not a symlink). Read
 * as it grows, from where the last read stopped, a chunk at a time and
 * within a share of the agent's time and of --mem-budget; not read again
 * while its size and mtime stay. Names are interned: a frame keeps an id,
 * valid until perfmaps__free, whatever happens to the file.
 */
#ifndef BPFPROF_PERFMAP_H
#define BPFPROF_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

struct perfmap_ent {
	uint64_t start, end;
	uint32_t name; /* interned name id */
};

struct perfmaps;

/* Per-file limits: a map larger than this is read no further (counted). */
#define PERFMAP_MAX_BYTES (64u << 20)

struct perfmap_stats {
	uint64_t files;	      /* reads of perf maps that changed (first read and growth) */
	uint64_t entries;     /* entries read */
	uint64_t bytes;	      /* bytes parsed */
	uint64_t bad;	      /* lines that are no entry */
	uint64_t found;	      /* lookups that found a name */
	uint64_t missed;      /* anonymous-code addresses no map names */
	uint64_t refused;     /* processes whose map was not read: not their own regular file */
	uint64_t replaced;    /* maps found replaced or truncated: read again from the start */
	uint64_t deferred;    /* reads put off: the map had had its share of the agent's time */
	uint64_t capped;      /* maps larger than PERFMAP_MAX_BYTES: read no further */
	uint64_t over_budget; /* maps past their share of --mem-budget: read no further */
	uint64_t read_ns;     /* time spent opening and reading maps */
};

struct perfmaps *perfmaps__new(void);
void perfmaps__free(struct perfmaps *pm);
/*
 * Parse a perf map's text (len bytes) into *out (sorted by start, malloc'd),
 * interning names in pm. Returns the number of entries or -errno.
 */
int perfmaps__parse(struct perfmaps *pm, const char *buf, size_t len, struct perfmap_ent **out);
/* The name id of addr in process pid's perf map (read or reloaded as needed), or 0. */
uint32_t perfmaps__lookup(struct perfmaps *pm, uint32_t pid, uint64_t addr);
/* The interned name of id, or NULL. */
const char *perfmaps__name(const struct perfmaps *pm, uint32_t id);
/* Forget a process's map (it exited). */
void perfmaps__forget(struct perfmaps *pm, uint32_t pid);
const struct perfmap_stats *perfmaps__stats(const struct perfmaps *pm);

#endif
