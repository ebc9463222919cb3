// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Side-band records (user/collect/sideband.c): the input is a stream of
 * perf records (FORK, EXIT, COMM, MMAP2, LOST, anything) as the kernel
 * writes them into a buffer, each with its header's size. Their fields
 * are what processes did (paths, addresses, lengths are theirs). They go
 * through sideband__replay into a process table, through the filter of
 * -p, -- CMD or --cgroup (the input's length picks one, or none); every
 * process's mappings must stay sorted and disjoint.
 *
 * Pids are moved above PID_MAX_LIMIT (1 << 22), so that no /proc entry of a
 * real process is ever read or opened: the table meets only the records.
 */
#include <linux/perf_event.h>
#include <string.h>

#include "collect/sideband.h"
#include "fuzz.h"
#include "proc/objfile.h"
#include "proc/proc.h"

#define MAX_RECS 256
#define NO_PID	 (1u << 22)

static void move_pid(struct perf_event_header *h, size_t off, uint32_t *pids, size_t *npids)
{
	uint32_t pid;

	if (off + 4 > h->size)
		return;
	memcpy(&pid, (char *)h + off, 4);
	pid |= NO_PID;
	memcpy((char *)h + off, &pid, 4);
	if (*npids < MAX_RECS * 2)
		pids[(*npids)++] = pid;
}

/* The filter's verdict: a pure function of the pid (no map, no /proc). */
static bool even(void *ctx, uint32_t pid)
{
	(void)ctx;
	return !(pid & 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sideband_filter f = { .is_target = even,
				     .follow_children = size % 4 == 1,
				     .by_cgroup = size % 4 == 2 };
	struct perf_event_header *recs[MAX_RECS];
	uint32_t pids[MAX_RECS * 2];
	struct objtab *objs = objtab__new();
	struct proctab *t = proctab__new(objs);
	size_t n = 0, npids = 0, at = 0;

	fuzz__assert(objs && t);
	while (n < MAX_RECS && at + sizeof(struct perf_event_header) <= size) {
		struct perf_event_header h;

		memcpy(&h, data + at, sizeof(h));
		/* the kernel writes whole records, 8-byte aligned: their sizes too */
		if (h.size < sizeof(h) || h.size > size - at || h.size % 8)
			break;
		/* the kernel's records are 8-byte aligned; a copy each, for ASan */
		recs[n] = aligned_alloc(8, ((size_t)h.size + 7) & ~(size_t)7);
		fuzz__assert(recs[n]);
		memcpy(recs[n], data + at, h.size);
		move_pid(recs[n], 8, pids, &npids);
		if (h.type == PERF_RECORD_FORK || h.type == PERF_RECORD_EXIT)
			move_pid(recs[n], 12, pids, &npids); /* ppid */
		at += h.size;
		n++;
	}
	sideband__replay(t, size % 4 ? &f : NULL, (const struct perf_event_header *const *)recs, n,
			 NULL);

	for (size_t i = 0; i < npids; i++) {
		struct proc *p = proctab__lookup(t, pids[i], 0);

		fuzz__assert(p);
		for (uint32_t k = 0; k < p->nmaps; k++) {
			fuzz__assert(p->maps[k].start < p->maps[k].end);
			fuzz__assert(!k || p->maps[k - 1].end <= p->maps[k].start);
			fuzz__assert(proc__find(p, p->maps[k].start) == &p->maps[k]);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(recs[i]);
	proctab__free(t);
	objtab__free(objs);
	return 0;
}
