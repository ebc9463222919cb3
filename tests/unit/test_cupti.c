/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUPTI injection library's record handling (tools/cupti/gpu_records.c)
 * fed synthetic activity records built from cupti_activity.h's own structs:
 * what reaches the sink (bpfprof's USDT probe) for each kind, the clock
 * conversion, and what is refused and counted. Built only with the CUDA
 * toolkit; needs no GPU and no libcupti.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <cupti_driver_cbid.h>

#include "../../tools/cupti/gpu_records.c"

#define MAX_SEEN 16
static struct bpfprof_gpu_event seen[MAX_SEEN];
static int nseen;

static void capture(const struct bpfprof_gpu_event *ev)
{
	assert_true(nseen < MAX_SEEN);
	seen[nseen++] = *ev;
}

static int setup(void **state)
{
	(void)state;
	gpu_records__reset();
	gpu_records__set_sink(capture);
	nseen = 0;
	return 0;
}

static CUpti_ActivityKernel10 kernel(uint32_t corr, uint64_t start, uint64_t end, const char *name)
{
	CUpti_ActivityKernel10 k;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.correlationId = corr;
	k.start = start;
	k.end = end;
	k.deviceId = 1;
	k.contextId = 7;
	k.streamId = 13;
	k.name = name;
	k.gridX = 16;
	return k;
}

static void test_kernel_record(void **state)
{
	static const char name[] = "_Z10vector_addPfPKfS1_i";
	CUpti_ActivityKernel10 k = kernel(42, 1000, 5000, name);
	struct gpu_records_stats st;

	(void)state;
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&k), 1);
	assert_int_equal(nseen, 1);
	assert_int_equal(seen[0].kind, BPFPROF_GPU_KERNEL);
	assert_int_equal(seen[0].correlation, 42);
	assert_int_equal(seen[0].start, 1000);
	assert_int_equal(seen[0].end, 5000);
	assert_int_equal(seen[0].device, 1);
	assert_int_equal(seen[0].stream, 13);
	/* the pointer itself, not a copy: the probe hands BPF CUPTI's string */
	assert_ptr_equal(seen[0].name, name);
	assert_int_equal(seen[0].bytes, 0);
	gpu_records__stats(&st);
	assert_int_equal(st.emitted, 1);
	assert_int_equal(st.malformed + st.ignored + st.dropped, 0);
}

/* The legacy serialized-kernel kind has the same layout. */
static void test_serial_kernel_kind(void **state)
{
	CUpti_ActivityKernel10 k = kernel(3, 10, 20, "k");

	(void)state;
	k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&k), 1);
	assert_int_equal(seen[0].kind, BPFPROF_GPU_KERNEL);
}

static void test_memcpy_and_memset(void **state)
{
	CUpti_ActivityMemcpy6 m;
	CUpti_ActivityMemset4 s;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	m.bytes = 1 << 20;
	m.start = 100;
	m.end = 350;
	m.deviceId = 0;
	m.streamId = 7;
	m.correlationId = 9;
	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.bytes = 4096;
	s.start = 400;
	s.end = 410;
	s.streamId = 8;
	s.correlationId = 10;

	assert_int_equal(gpu_records__handle((CUpti_Activity *)&m), 1);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&s), 1);
	assert_int_equal(nseen, 2);
	assert_int_equal(seen[0].kind, BPFPROF_GPU_MEMCPY);
	assert_int_equal(seen[0].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
	assert_int_equal(seen[0].bytes, 1 << 20);
	assert_int_equal(seen[0].stream, 7);
	assert_int_equal(seen[0].correlation, 9);
	assert_int_equal(seen[0].end - seen[0].start, 250);
	assert_null(seen[0].name);
	assert_int_equal(seen[1].kind, BPFPROF_GPU_MEMSET);
	assert_int_equal(seen[1].bytes, 4096);
	assert_int_equal(seen[1].correlation, 10);
}

/* CUPTI's default clock is CLOCK_REALTIME; the offset makes it monotonic,
 * in either direction, and keeps durations. */
static void test_clock_offset(void **state)
{
	CUpti_ActivityKernel10 k = kernel(1, 1700000000000000000ull, 1700000000000002500ull, "k");

	(void)state;
	gpu_records__set_clock_offset(-1699999000000000000ll);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&k), 1);
	assert_int_equal(seen[0].start, 1000000000000ull);
	assert_int_equal(seen[0].end - seen[0].start, 2500);
	gpu_records__set_clock_offset(500);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&k), 1);
	assert_int_equal(seen[1].start, 1700000000000000500ull);
}

static void test_refused_records_are_counted(void **state)
{
	CUpti_ActivityKernel10 no_end = kernel(1, 1000, 0, "k");
	CUpti_ActivityKernel10 backwards = kernel(2, 2000, 1000, "k");
	CUpti_ActivityKernel10 other = kernel(3, 1, 2, "k");
	struct gpu_records_stats st;

	(void)state;
	other.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&no_end), 0);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&backwards), 0);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&other), 0);
	gpu_records__dropped(5);
	gpu_records__dropped(0);
	assert_int_equal(nseen, 0);
	gpu_records__stats(&st);
	assert_int_equal(st.emitted, 0);
	assert_int_equal(st.malformed, 2);
	assert_int_equal(st.ignored, 1);
	assert_int_equal(st.dropped, 5);
}

static void test_decode_errors(void **state)
{
	CUpti_ActivityKernel10 k = kernel(1, 5, 4, "k");
	struct bpfprof_gpu_event ev;

	(void)state;
	assert_int_equal(gpu_records__decode((CUpti_Activity *)&k, 0, &ev), -EINVAL);
	k.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	assert_int_equal(gpu_records__decode((CUpti_Activity *)&k, 0, &ev), -ENOENT);
}

/* The default sink fires the USDT probes: a nop without a tracer attached. */
static void test_default_sink_fires_probes(void **state)
{
	CUpti_ActivityKernel10 k = kernel(1, 10, 20, "k");
	struct gpu_records_stats st;

	(void)state;
	gpu_records__set_sink(NULL);
	assert_int_equal(gpu_records__handle((CUpti_Activity *)&k), 1);
	gpu_records__api_enter(1, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "k");
	assert_int_equal(nseen, 0);
	gpu_records__stats(&st);
	assert_int_equal(st.emitted, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_kernel_record, setup),
		cmocka_unit_test_setup(test_serial_kernel_kind, setup),
		cmocka_unit_test_setup(test_memcpy_and_memset, setup),
		cmocka_unit_test_setup(test_clock_offset, setup),
		cmocka_unit_test_setup(test_refused_records_are_counted, setup),
		cmocka_unit_test_setup(test_decode_errors, setup),
		cmocka_unit_test_setup(test_default_sink_fires_probes, setup),
	};

	return cmocka_run_group_tests_name("cupti", tests, NULL, NULL);
}
