/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* report: a recording's ready line and end-of-run summary (collect/report.c). */
#ifndef BPFPROF_REPORT_H
#define BPFPROF_REPORT_H

#include <stddef.h>

struct build_stats;
struct recorder;

/* Before the ready line: start-up's cost (su_start: the features' start() CPU seconds). */
void report__mark_ready(struct recorder *r, double su_start);
/* `bpfprof: recording ...; Ctrl-C to stop`, once everything is attached. */
void report__ready_line(struct recorder *r);
/* The recording stopped: its cost so far. */
void report__mark_stop(struct recorder *r);
/*
 * The end-of-run summary (bs, nprocs: what the written profile holds), then
 * the warnings (rec__warn, each feature's warnings()).
 */
void report__summary(struct recorder *r, const struct build_stats *bs, size_t nprocs);
/* Free the warnings. */
void report__free(struct recorder *r);

#endif
