// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A CUDA driver API client with known behaviour, the ground truth for the
 * --cuda tests. It finds the driver the way the CUDA runtime does:
 * dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2"), and every other entry
 * point through cuGetProcAddress (cuLibraryGetKernel and cuKernelGetFunction
 * through dlsym, the other way a client can do it).
 *
 *   cuda_app [--launches N] [--scale-launches M] [--graph-launches G] [--syncs S] [--wait-ms MS]
 *   cuda_app --bench SECS
 *
 * It launches vector_add N times from launch_vector_add(), scale_kernel M
 * times from launch_scale() (a CUkernel turned into a CUfunction), copies
 * host→device in copy_in(), device→host in copy_out(), device→device in
 * copy_dd(), and synchronises S times each from wait_stream() (stream),
 * wait_ctx() (context) and wait_event() (event). It prints what it did, one
 * "key value" per line, for the tests to compare with.
 *
 * --wait-ms sleeps after loading the driver so that a profiler that attaches
 * its probes when it sees the library mapped is ready before the first call.
 * --bench launches in a tight loop for SECS and prints launches_per_sec.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

#define KERNEL_ADD \
	"_Z10vector_addPfPKfS1_i"	   /* vector_add(float*, float const*, float const*, int) */
#define KERNEL_SCALE "_Z12scale_kernelPff" /* scale_kernel(float*, float) */
#define IMAGE	     KERNEL_ADD "\n" KERNEL_SCALE "\n"
#define NELEM	     4096

#define DECL(name) static __typeof__(&name) p_##name
DECL(cuInit);
DECL(cuDeviceGet);
DECL(cuDevicePrimaryCtxRetain);
DECL(cuCtxSetCurrent);
DECL(cuModuleLoadData);
DECL(cuModuleGetFunction);
DECL(cuLibraryLoadData);
DECL(cuLibraryGetKernel);
DECL(cuKernelGetFunction);
DECL(cuLaunchKernel);
DECL(cuMemAlloc);
DECL(cuMemFree);
DECL(cuMemcpyHtoD);
DECL(cuMemcpyDtoH);
DECL(cuMemcpyDtoD);
DECL(cuStreamCreate);
DECL(cuStreamSynchronize);
DECL(cuCtxSynchronize);
DECL(cuEventCreate);
DECL(cuEventRecord);
DECL(cuEventSynchronize);
DECL(cuGraphLaunch);

static void die(const char *what, CUresult r)
{
	fprintf(stderr, "cuda_app: %s failed: %d\n", what, (int)r);
	exit(1);
}

#define CK(call)                        \
	do {                            \
		CUresult r_ = (call);   \
		if (r_ != CUDA_SUCCESS) \
			die(#call, r_); \
	} while (0)

static void load_driver(void)
{
	__typeof__(&cuGetProcAddress) getproc;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		fprintf(stderr, "cuda_app: %s\n", dlerror());
		exit(1);
	}
	getproc = (__typeof__(getproc))dlsym(h, "cuGetProcAddress_v2");
	if (!getproc) {
		fprintf(stderr, "cuda_app: no cuGetProcAddress_v2 in libcuda.so.1\n");
		exit(1);
	}
#define GET(name)                                                                                \
	do {                                                                                     \
		CUdriverProcAddressQueryResult st_;                                              \
		CK(getproc(#name, (void **)&p_##name, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, \
			   &st_));                                                               \
	} while (0)
	GET(cuInit);
	GET(cuDeviceGet);
	GET(cuDevicePrimaryCtxRetain);
	GET(cuCtxSetCurrent);
	GET(cuModuleLoadData);
	GET(cuModuleGetFunction);
	GET(cuLibraryLoadData);
	GET(cuLaunchKernel);
	GET(cuMemAlloc);
	GET(cuMemFree);
	GET(cuMemcpyHtoD);
	GET(cuMemcpyDtoH);
	GET(cuMemcpyDtoD);
	GET(cuStreamCreate);
	GET(cuStreamSynchronize);
	GET(cuCtxSynchronize);
	GET(cuEventCreate);
	GET(cuEventRecord);
	GET(cuEventSynchronize);
	p_cuLibraryGetKernel = (__typeof__(p_cuLibraryGetKernel))dlsym(h, "cuLibraryGetKernel");
	p_cuKernelGetFunction = (__typeof__(p_cuKernelGetFunction))dlsym(h, "cuKernelGetFunction");
	p_cuGraphLaunch = (__typeof__(p_cuGraphLaunch))dlsym(h, "cuGraphLaunch");
	if (!p_cuLibraryGetKernel || !p_cuKernelGetFunction) {
		fprintf(stderr, "cuda_app: no cuLibraryGetKernel/cuKernelGetFunction\n");
		exit(1);
	}
}

static NOINLINE CUfunction get_add_function(void)
{
	CUmodule mod;
	CUfunction f;

	CK(p_cuModuleLoadData(&mod, IMAGE));
	CK(p_cuModuleGetFunction(&f, mod, KERNEL_ADD));
	BARRIER();
	return f;
}

static NOINLINE CUfunction get_scale_function(void)
{
	CUlibrary lib;
	CUkernel k;
	CUfunction f;

	CK(p_cuLibraryLoadData(&lib, IMAGE, NULL, NULL, 0, NULL, NULL, 0));
	CK(p_cuLibraryGetKernel(&k, lib, KERNEL_SCALE));
	CK(p_cuKernelGetFunction(&f, k));
	BARRIER();
	return f;
}

static NOINLINE void launch_vector_add(CUfunction f, CUstream s, CUdeviceptr out, CUdeviceptr a,
				       long n)
{
	int count = NELEM;
	void *args[] = { &out, &a, &a, &count };

	for (long i = 0; i < n; i++)
		CK(p_cuLaunchKernel(f, NELEM / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	BARRIER();
}

static NOINLINE void launch_scale(CUfunction f, CUstream s, CUdeviceptr out, long n)
{
	float factor = 2.0f;
	void *args[] = { &out, &factor };

	for (long i = 0; i < n; i++)
		CK(p_cuLaunchKernel(f, NELEM / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	BARRIER();
}

/* the fake driver takes any non-null graph: its handle names the launch */
#define GRAPH ((CUgraphExec)0x6a11)

static NOINLINE void launch_graph(CUstream s, long n)
{
	for (long i = 0; i < n; i++)
		CK(p_cuGraphLaunch(GRAPH, s));
}

static NOINLINE void copy_in(CUdeviceptr d, const float *h, size_t bytes)
{
	CK(p_cuMemcpyHtoD(d, h, bytes));
	BARRIER();
}

static NOINLINE void copy_dd(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
	CK(p_cuMemcpyDtoD(dst, src, bytes));
	BARRIER();
}

static NOINLINE void copy_out(float *h, CUdeviceptr d, size_t bytes)
{
	CK(p_cuMemcpyDtoH(h, d, bytes));
	BARRIER();
}

static NOINLINE void wait_stream(CUstream s)
{
	CK(p_cuStreamSynchronize(s));
	BARRIER();
}

static NOINLINE void wait_ctx(void)
{
	CK(p_cuCtxSynchronize());
	BARRIER();
}

static NOINLINE void wait_event(CUevent e, CUstream s)
{
	CK(p_cuEventRecord(e, s));
	CK(p_cuEventSynchronize(e));
	BARRIER();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static NOINLINE void bench(CUfunction f, CUstream s, CUdeviceptr d, double secs)
{
	double t0 = now_s(), t;
	long n = 0;

	do {
		launch_vector_add(f, s, d, d, 1000);
		n += 1000;
		t = now_s() - t0;
	} while (t < secs);
	printf("launches %ld\nlaunches_per_sec %.0f\n", n, n / t);
}

int main(int argc, char **argv)
{
	long launches = 1000, scale_launches = 500, syncs = 3, wait_ms = 0, graph_launches = 0;
	double bench_secs = 0;
	float host[NELEM], back[NELEM];
	size_t bytes = sizeof(host);
	CUdeviceptr d_a, d_b;
	CUfunction f_add, f_scale;
	CUcontext ctx;
	CUdevice dev;
	CUstream s;
	CUevent e;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "0";

		if (!strcmp(argv[i], "--launches"))
			launches = atol(v), i++;
		else if (!strcmp(argv[i], "--scale-launches"))
			scale_launches = atol(v), i++;
		else if (!strcmp(argv[i], "--graph-launches"))
			graph_launches = atol(v), i++;
		else if (!strcmp(argv[i], "--syncs"))
			syncs = atol(v), i++;
		else if (!strcmp(argv[i], "--wait-ms"))
			wait_ms = atol(v), i++;
		else if (!strcmp(argv[i], "--bench"))
			bench_secs = atof(v), i++;
		else {
			fprintf(stderr, "cuda_app: unknown argument %s\n", argv[i]);
			return 2;
		}
	}

	load_driver();
	if (wait_ms)
		usleep((useconds_t)wait_ms * 1000);
	CK(p_cuInit(0));
	CK(p_cuDeviceGet(&dev, 0));
	CK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(p_cuCtxSetCurrent(ctx));
	CK(p_cuStreamCreate(&s, 0));
	CK(p_cuEventCreate(&e, 0));
	f_add = get_add_function();
	f_scale = get_scale_function();
	CK(p_cuMemAlloc(&d_a, bytes));
	CK(p_cuMemAlloc(&d_b, bytes));

	if (bench_secs > 0) {
		bench(f_add, s, d_a, bench_secs);
		return 0;
	}

	for (int i = 0; i < NELEM; i++)
		host[i] = (float)i;
	copy_in(d_a, host, bytes);
	launch_vector_add(f_add, s, d_b, d_a, launches);
	launch_scale(f_scale, s, d_b, scale_launches);
	if (graph_launches) {
		if (!p_cuGraphLaunch) {
			fprintf(stderr, "cuda_app: no cuGraphLaunch in libcuda.so.1\n");
			return 1;
		}
		launch_graph(s, graph_launches);
	}
	for (long i = 0; i < syncs; i++) {
		wait_stream(s);
		wait_ctx();
		wait_event(e, s);
	}
	copy_dd(d_b, d_a, bytes);
	copy_out(back, d_b, bytes);
	if (memcmp(host, back, bytes)) {
		fprintf(stderr, "cuda_app: device memory did not round-trip\n");
		return 1;
	}
	CK(p_cuMemFree(d_a));
	CK(p_cuMemFree(d_b));

	printf("pid %d\n", (int)getpid());
	printf("function_add %p\nfunction_scale %p\n", (void *)f_add, (void *)f_scale);
	printf("launches_vector_add %ld\nlaunches_scale %ld\n", launches, scale_launches);
	printf("syncs_stream %ld\nsyncs_ctx %ld\nsyncs_event %ld\n", syncs, syncs, syncs);
	printf("memcpy_htod 1\nmemcpy_dtod 1\nmemcpy_dtoh 1\nmem_alloc 2\nmem_free 2\n");
	printf("copy_bytes %zu\n", bytes);
	return 0;
}
