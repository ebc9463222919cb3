/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUPTI injection library's record handling, apart from libcupti so that
 * unit tests can feed it synthetic activity records: decode one record into a
 * struct bpfprof_gpu_event, convert its times to CLOCK_MONOTONIC, and hand
 * it to the sink, which by default fires a USDT probe that bpfprof attaches to.
 *
 * USDT probes (provider "bpfprof"), the interface bpf/cuda.bpf.c relies on:
 *
 *   gpu_activity(kind, correlation, start, end, device, stream, name, bytes, copy_kind)
 *       one GPU activity record. kind: enum bpfprof_gpu_kind; start/end:
 *       CLOCK_MONOTONIC ns; name: the kernel's (mangled) name, NULL for copies
 *       and sets; bytes: bytes copied/set; copy_kind: CUpti_ActivityMemcpyKind.
 *   api_enter(correlation, cbid, symbol)
 *       a traced driver call starts on this thread (fired from CUPTI's callback
 *       API inside the call, so between the uprobe on the driver function and
 *       its return): the correlation id the call's GPU records will carry.
 *       symbol: the kernel name for launches, else NULL.
 *   dropped(count)
 *       CUPTI dropped this many records (buffer full).
 */
#ifndef BPFPROF_GPU_RECORDS_H
#define BPFPROF_GPU_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

enum bpfprof_gpu_kind {
	BPFPROF_GPU_KERNEL = 1,
	BPFPROF_GPU_MEMCPY = 2,
	BPFPROF_GPU_MEMSET = 3,
};

struct bpfprof_gpu_event {
	uint32_t kind;	      /* enum bpfprof_gpu_kind */
	uint32_t correlation; /* CUPTI correlation id of the launching API call */
	uint64_t start;	      /* CLOCK_MONOTONIC ns */
	uint64_t end;
	uint32_t device;
	uint32_t stream;
	uint64_t bytes;	    /* memcpy/memset */
	uint32_t copy_kind; /* CUpti_ActivityMemcpyKind */
	const char *name;   /* kernel name, owned by CUPTI; NULL for copies */
};

struct gpu_records_stats {
	uint64_t emitted;
	uint64_t ignored;   /* kinds we do not trace */
	uint64_t malformed; /* no timestamps, or end before start */
	uint64_t dropped;   /* reported dropped by CUPTI */
};

typedef void (*gpu_event_sink)(const struct bpfprof_gpu_event *ev);

/* NULL restores the default sink (the gpu_activity USDT probe). */
void gpu_records__set_sink(gpu_event_sink sink);
/* Added to every CUPTI timestamp to make it CLOCK_MONOTONIC (0 when CUPTI
 * already uses our clock). */
void gpu_records__set_clock_offset(int64_t offset_ns);

/* Decode one record. Returns 0 and fills ev, -ENOENT for a kind we do not
 * trace, -EINVAL for a malformed record. */
int gpu_records__decode(const CUpti_Activity *rec, int64_t clock_offset,
			struct bpfprof_gpu_event *ev);
/* Decode and emit one record. Returns 1 if emitted, 0 if not (counted). */
int gpu_records__handle(const CUpti_Activity *rec);
void gpu_records__dropped(size_t count);
void gpu_records__api_enter(uint32_t correlation, uint32_t cbid, const char *symbol);
void gpu_records__stats(struct gpu_records_stats *out);
void gpu_records__reset(void);

#endif
