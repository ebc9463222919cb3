/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * continuous: `--continuous DIR`. The recording never ends by itself; every
 * --interval its stack table becomes one gzipped pprof in DIR, named by the
 * interval's start (UTC, bpfprof-YYYYmmddTHHMMSS.mmmZ.pb.gz), written under a
 * temporary name and renamed, the oldest beyond --keep deleted, queued for
 * --upload, and a status line printed. The recorder (record.c) owns the BPF
 * side; this file owns time, files, kernel symbol refresh and the uploader.
 */
#ifndef BPFPROF_CONTINUOUS_H
#define BPFPROF_CONTINUOUS_H

#include <stddef.h>
#include <stdint.h>

struct continuous;
struct profile;
struct ksyms;

/* Cumulative counts since the start; the status line shows each interval's share. */
struct interval_totals {
	uint64_t samples;     /* received from BPF */
	uint64_t lost;	      /* every loss the end-of-run summary counts */
	size_t processes;     /* in this interval's profile */
	size_t cache_entries; /* cached names evicted at this interval's end (for -v) */
};

/* From env (continuous_dir, interval, keep, upload_url, app_name). Returns 0 or -errno (printed). */
int continuous__new(struct continuous **out);
void continuous__free(struct continuous *c);

/* CLOCK_MONOTONIC time at which the current interval ends. */
uint64_t continuous__deadline(const struct continuous *c);
/* The current interval, ending now: wall-clock start and length, for the profile header. */
void continuous__span(const struct continuous *c, int64_t *time_ns, int64_t *duration_ns);
/*
 * Kernel symbols for this interval: loaded once, then re-read every ten
 * minutes (modules come and go). *ks may be replaced. Returns 0 or -errno.
 */
int continuous__kernel_symbols(struct continuous *c, struct ksyms **ks);
/*
 * Write p as the current interval's file (failures are counted and printed,
 * and do not stop the recording), print the status line, start the next
 * interval. Returns 0 or -errno.
 */
int continuous__write(struct continuous *c, const struct profile *p,
		      const struct interval_totals *t);
/* Files written, failed, deleted; uploads. Waits up to a few seconds for pending uploads. */
void continuous__summary(struct continuous *c);

#endif
