// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CUPTI activity record → struct bpfprof_gpu_event → USDT probe. No libcupti
 * here (only its header's record layouts), see gpu_records.h.
 */
#include <errno.h>
#include <string.h>
#include <sys/sdt.h>

#include "gpu_records.h"

static void usdt_sink(const struct bpfprof_gpu_event *ev)
{
	/* Nine arguments, each a plain integer or pointer: what bpf_usdt_arg() reads. */
	STAP_PROBE9(bpfprof, gpu_activity, ev->kind, ev->correlation, ev->start, ev->end,
		    ev->device, ev->stream, ev->name, ev->bytes, ev->copy_kind);
}

static gpu_event_sink sink = usdt_sink;
static int64_t clock_offset;
static struct gpu_records_stats stats;

#define COUNT(field, n) __atomic_fetch_add(&stats.field, (n), __ATOMIC_RELAXED)

void gpu_records__set_sink(gpu_event_sink s)
{
	sink = s ? s : usdt_sink;
}

void gpu_records__set_clock_offset(int64_t offset_ns)
{
	clock_offset = offset_ns;
}

static int set_times(struct bpfprof_gpu_event *ev, uint64_t start, uint64_t end, int64_t off)
{
	/* CUPTI leaves 0 where it could not take a timestamp */
	if (!start || !end || end < start)
		return -EINVAL;
	ev->start = (uint64_t)((int64_t)start + off);
	ev->end = (uint64_t)((int64_t)end + off);
	return 0;
}

int gpu_records__decode(const CUpti_Activity *rec, int64_t off, struct bpfprof_gpu_event *ev)
{
	CUpti_ActivityKind kind;

	/* by memcpy: the record was written as its own type, not as CUpti_Activity */
	memcpy(&kind, rec, sizeof(kind));
	memset(ev, 0, sizeof(*ev));
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;

		ev->kind = BPFPROF_GPU_KERNEL;
		ev->correlation = k->correlationId;
		ev->device = k->deviceId;
		ev->stream = k->streamId;
		ev->name = k->name;
		return set_times(ev, k->start, k->end, off);
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;

		ev->kind = BPFPROF_GPU_MEMCPY;
		ev->correlation = m->correlationId;
		ev->device = m->deviceId;
		ev->stream = m->streamId;
		ev->bytes = m->bytes;
		ev->copy_kind = m->copyKind;
		return set_times(ev, m->start, m->end, off);
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;

		ev->kind = BPFPROF_GPU_MEMSET;
		ev->correlation = m->correlationId;
		ev->device = m->deviceId;
		ev->stream = m->streamId;
		ev->bytes = m->bytes;
		return set_times(ev, m->start, m->end, off);
	}
	default:
		return -ENOENT;
	}
}

int gpu_records__handle(const CUpti_Activity *rec)
{
	struct bpfprof_gpu_event ev;
	int err = gpu_records__decode(rec, clock_offset, &ev);

	if (err == -ENOENT) {
		COUNT(ignored, 1);
		return 0;
	}
	if (err) {
		COUNT(malformed, 1);
		return 0;
	}
	sink(&ev);
	COUNT(emitted, 1);
	return 1;
}

void gpu_records__dropped(size_t count)
{
	if (!count)
		return;
	COUNT(dropped, count);
	STAP_PROBE1(bpfprof, dropped, (uint64_t)count);
}

void gpu_records__api_enter(uint32_t correlation, uint32_t cbid, const char *symbol)
{
	STAP_PROBE3(bpfprof, api_enter, correlation, cbid, symbol);
}

void gpu_records__stats(struct gpu_records_stats *out)
{
	out->emitted = __atomic_load_n(&stats.emitted, __ATOMIC_RELAXED);
	out->ignored = __atomic_load_n(&stats.ignored, __ATOMIC_RELAXED);
	out->malformed = __atomic_load_n(&stats.malformed, __ATOMIC_RELAXED);
	out->dropped = __atomic_load_n(&stats.dropped, __ATOMIC_RELAXED);
}

void gpu_records__reset(void)
{
	memset(&stats, 0, sizeof(stats));
	sink = usdt_sink;
	clock_offset = 0;
}
