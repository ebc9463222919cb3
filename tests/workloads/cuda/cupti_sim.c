// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What CUPTI would do in cuda_app, without a GPU, linked into cuda_app_cupti:
 * the fake driver calls fakecuda_api_hook() inside each launch and copy (as
 * CUPTI's callback API runs inside the driver call); this fires bpfprof's
 * api_enter probe with the correlation id and queues the activity record
 * the GPU would produce (kernels SIM_KERNEL_NS long, back to back on one
 * stream, stamped on CLOCK_REALTIME like CUPTI's default clock). Records go
 * through the injection library's own record handling (gpu_records.c), and
 * so through its USDT probes, in batches and at exit, as CUPTI's buffers do.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>

#include "../../../tools/cupti/gpu_records.h"

#define SIM_KERNEL_NS 5000
#define SIM_STREAM    7
#define BATCH	      256

union rec {
	CUpti_ActivityKernel10 k;
	CUpti_ActivityMemcpy6 m;
};

static union rec queue[BATCH];
static int nqueue;
static uint64_t gpu_busy_until;
static int started;

static uint64_t now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void flush(void)
{
	for (int i = 0; i < nqueue; i++)
		gpu_records__handle((CUpti_Activity *)&queue[i]);
	nqueue = 0;
}

static void start(void)
{
	uint64_t a = now(CLOCK_MONOTONIC), r = now(CLOCK_REALTIME), b = now(CLOCK_MONOTONIC);

	/* what the injection library does when CUPTI's clock is not ours */
	gpu_records__set_clock_offset((int64_t)(a + (b - a) / 2) - (int64_t)r);
	atexit(flush);
	started = 1;
}

void fakecuda_api_hook(uint32_t corr, const char *api, const char *symbol, uint64_t bytes);
void fakecuda_api_hook(uint32_t corr, const char *api, const char *symbol, uint64_t bytes)
{
	int kernel = !strcmp(api, "cuLaunchKernel");
	uint64_t t = now(CLOCK_REALTIME), s;
	union rec *r;

	if (!started)
		start();
	gpu_records__api_enter(corr,
			       kernel ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel
				      : CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
			       symbol);
	s = (t > gpu_busy_until ? t : gpu_busy_until) + 1000;
	gpu_busy_until = s + SIM_KERNEL_NS;
	r = &queue[nqueue++];
	memset(r, 0, sizeof(*r));
	if (kernel) {
		r->k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		r->k.correlationId = corr;
		r->k.start = s;
		r->k.end = s + SIM_KERNEL_NS;
		r->k.streamId = SIM_STREAM;
		r->k.name = symbol;
	} else {
		r->m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		r->m.correlationId = corr;
		r->m.start = s;
		r->m.end = s + SIM_KERNEL_NS;
		r->m.streamId = SIM_STREAM;
		r->m.bytes = bytes;
		r->m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	}
	if (nqueue == BATCH)
		flush();
}
