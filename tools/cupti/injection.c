// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libbpfprof_cupti.so: a CUPTI injection library. The CUDA driver loads the
 * library named by CUDA_INJECTION64_PATH at cuInit and calls its
 * InitializeInjection(); bpfprof sets that variable in `-- CMD` mode.
 *
 * It asks CUPTI for kernel, memcpy and memset activity records with
 * CLOCK_MONOTONIC timestamps (the clock BPF stamps events with), and hands
 * each record to gpu_records.c, which fires a USDT probe bpfprof attaches to.
 * It also fires api_enter from CUPTI's callback API inside every launch and
 * copy, on the calling thread: the only place the correlation id that joins
 * a GPU record to its CPU call is visible.
 *
 * Records arrive in buffers CUPTI fills and hands back when full, every
 * FLUSH_PERIOD_MS (where this CUPTI can do that), and at exit.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "gpu_records.h"

#define BUF_SIZE	(8u << 20)
#define BUF_ALIGN	8
#define FLUSH_PERIOD_MS 100

#define EXPORT __attribute__((visibility("default")))

static CUpti_SubscriberHandle subscriber;

static void warn(const char *what, CUptiResult r)
{
	const char *s = NULL;

	cuptiGetResultString(r, &s);
	fprintf(stderr, "bpfprof-cupti: %s: %s\n", what, s ? s : "unknown error");
}

static uint64_t CUPTIAPI mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Without a timestamp callback (older CUPTI), measure CUPTI's clock against
 * CLOCK_MONOTONIC: the offset from the tightest of a few bracketing reads.
 */
static int64_t calibrate(void)
{
	int64_t best_off = 0;
	uint64_t best_width = UINT64_MAX;

	for (int i = 0; i < 16; i++) {
		uint64_t a = mono_ns(), c = 0, b;

		cuptiGetTimestamp(&c);
		b = mono_ns();
		if (b - a < best_width) {
			best_width = b - a;
			best_off = (int64_t)(a + (b - a) / 2) - (int64_t)c;
		}
	}
	return best_off;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(BUF_ALIGN, BUF_SIZE);
	*size = *buffer ? BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

	(void)size;
	while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
		gpu_records__handle(rec);
	if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
		gpu_records__dropped(dropped);
	free(buffer);
}

static void CUPTIAPI api_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;

	(void)userdata;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cb->callbackSite == CUPTI_API_ENTER)
		gpu_records__api_enter(cb->correlationId, cbid, cb->symbolName);
}

/* Launches, copies and sets: the calls whose GPU records we join to stacks. */
static int traced_call(const char *name)
{
	static const char *const prefixes[] = { "cuLaunch", "cuGraphLaunch", "cuMemcpy",
						"cuMemset" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

static void enable_api_callbacks(void)
{
	CUptiResult r = cuptiSubscribe(&subscriber, api_callback, NULL);

	if (r != CUPTI_SUCCESS) {
		warn("cuptiSubscribe (launches will not carry correlation ids)", r);
		return;
	}
	for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++) {
		const char *name = NULL;

		if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS &&
		    name && traced_call(name))
			cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
	}
}

static void flush_at_exit(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

EXPORT int InitializeInjection(void)
{
	typedef CUptiResult (*register_ts_fn)(CUpti_TimestampCallbackFunc);
	typedef CUptiResult (*flush_period_fn)(uint32_t);
	static int done;
	register_ts_fn register_ts;
	flush_period_fn flush_period;
	static const CUpti_ActivityKind kinds[] = {
		CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		CUPTI_ACTIVITY_KIND_MEMCPY,
		CUPTI_ACTIVITY_KIND_MEMSET,
	};
	CUptiResult r;

	if (done)
		return 1;
	done = 1;

	/* Looked up, not linked: older CUPTI versions lack them. */
	register_ts = (register_ts_fn)dlsym(RTLD_DEFAULT, "cuptiActivityRegisterTimestampCallback");
	if (!register_ts || register_ts(mono_ns) != CUPTI_SUCCESS)
		gpu_records__set_clock_offset(calibrate());

	r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		warn("cuptiActivityRegisterCallbacks (no GPU timings)", r);
		return 0;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		r = cuptiActivityEnable(kinds[i]);
		if (r != CUPTI_SUCCESS) {
			/* one line: no driver CUPTI can work with (or no GPU) */
			warn("cuptiActivityEnable (no GPU timings)", r);
			return 0;
		}
	}
	flush_period = (flush_period_fn)dlsym(RTLD_DEFAULT, "cuptiActivityFlushPeriod");
	if (flush_period)
		flush_period(FLUSH_PERIOD_MS);
	enable_api_callbacks();
	atexit(flush_at_exit);
	return 1;
}
