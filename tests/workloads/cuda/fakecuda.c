// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in for the NVIDIA driver, libcuda.so.1, for machines without a GPU.
 *
 * It exports the symbols a CUDA 12/13 runtime resolves (the versioned names
 * cuda.h maps the API to: cuMemAlloc_v2, cuMemcpyHtoD_v2, ..., and the _ptsz
 * per-thread-stream variants) with the prototypes of /usr/local/cuda's cuda.h
 * (included below, so the compiler checks every signature), and
 * cuGetProcAddress_v2, through which the runtime gets all the others.
 *
 * Bodies are trivial but honest: handles are numbered objects, "device
 * memory" is host memory so that copies really copy and can be checked,
 * kernels are looked up by name in the "image" a module was loaded from (a
 * newline-separated list of kernel names), launches are counted per function,
 * and every synchronisation blocks for a known time, FAKECUDA_SYNC_US
 * microseconds (default 2000), so that a profiler can be checked against it.
 *
 * Like the real driver, cuInit loads CUDA_INJECTION64_PATH (when set) and
 * calls its InitializeInjection().
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

#define MAX_HANDLES  4096
#define NAME_MAX_LEN 256

struct CUctx_st {
	int device;
};
struct CUmod_st {
	char *image; /* newline-separated kernel names */
};
struct CUlib_st {
	char *image;
};
struct CUfunc_st {
	char name[NAME_MAX_LEN];
	atomic_ulong launches;
};
struct CUkern_st {
	char name[NAME_MAX_LEN];
	struct CUfunc_st *func;
};
struct CUstream_st {
	int id;
};
struct CUevent_st {
	int id;
};
struct CUgraphExec_st {
	int id;
};

static struct CUctx_st the_ctx;
static struct CUfunc_st funcs[MAX_HANDLES];
static struct CUkern_st kerns[MAX_HANDLES];
static struct CUstream_st streams[MAX_HANDLES];
static struct CUevent_st events[MAX_HANDLES];
static atomic_uint nfuncs, nkerns, nstreams, nevents;
static atomic_int initialized;
static long sync_us = 2000;
/*
 * Stand-in for CUPTI's callback API, for tests: a function the client
 * exports (fakecuda_api_hook) is called inside every launch and copy, on the
 * calling thread, with a correlation id, as CUPTI calls its subscribers.
 */
typedef void (*api_hook_fn)(uint32_t corr, const char *api, const char *symbol, uint64_t bytes);
static api_hook_fn api_hook;
static atomic_uint next_corr = 1;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void block_for_sync(void)
{
	struct timespec ts = { sync_us / 1000000, (sync_us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int image_has(const char *image, const char *name)
{
	size_t n = strlen(name);
	const char *p = image;

	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (len == n && !memcmp(p, name, n))
			return 1;
		p = eol ? eol + 1 : NULL;
	}
	return 0;
}

/* One CUfunction per distinct name, as the real driver gives per module. */
static struct CUfunc_st *func_for(const char *name)
{
	struct CUfunc_st *f = NULL;
	unsigned int i, n;

	pthread_mutex_lock(&handles_lock);
	n = atomic_load(&nfuncs);
	for (i = 0; i < n && i < MAX_HANDLES; i++)
		if (!strcmp(funcs[i].name, name))
			f = &funcs[i];
	if (!f && n < MAX_HANDLES) {
		f = &funcs[atomic_fetch_add(&nfuncs, 1)];
		snprintf(f->name, sizeof(f->name), "%s", name);
	}
	pthread_mutex_unlock(&handles_lock);
	return f;
}

#define CHECK_INIT()                                       \
	do {                                               \
		if (!atomic_load(&initialized))            \
			return CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

/* ---- initialisation, devices, contexts ---- */

API CUresult cuInit(unsigned int flags)
{
	const char *s = getenv("FAKECUDA_SYNC_US");
	const char *inj = getenv("CUDA_INJECTION64_PATH");

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (s)
		sync_us = strtol(s, NULL, 10);
	if (atomic_exchange(&initialized, 1))
		return CUDA_SUCCESS;
	api_hook = (api_hook_fn)dlsym(RTLD_DEFAULT, "fakecuda_api_hook");
	if (inj && *inj) {
		void *h = dlopen(inj, RTLD_NOW);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;

		if (init)
			init();
		else
			fprintf(stderr, "fakecuda: cannot load injection %s: %s\n", inj, dlerror());
	}
	return CUDA_SUCCESS;
}

API CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = CUDA_VERSION;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
	CHECK_INIT();
	*count = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CHECK_INIT();
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "bpfprof fake GPU");
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = &the_ctx;
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CHECK_INIT();
	return ctx == &the_ctx || !ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CHECK_INIT();
	*pctx = &the_ctx;
	return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
	CHECK_INIT();
	block_for_sync();
	return CUDA_SUCCESS;
}

API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	*pStr = error == CUDA_SUCCESS ? "no error" : "fakecuda error";
	return CUDA_SUCCESS;
}

/* ---- modules, libraries, functions, kernels ---- */

static CUresult load_image(char **out, const void *image)
{
	if (!image)
		return CUDA_ERROR_INVALID_IMAGE;
	*out = strdup(image);
	return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	struct CUmod_st *m;
	CUresult r;

	CHECK_INIT();
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = load_image(&m->image, image);
	if (r != CUDA_SUCCESS) {
		free(m);
		return r;
	}
	*module = m;
	return CUDA_SUCCESS;
}

API CUresult cuModuleUnload(CUmodule hmod)
{
	if (!hmod)
		return CUDA_ERROR_INVALID_HANDLE;
	free(hmod->image);
	free(hmod);
	return CUDA_SUCCESS;
}

API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	CHECK_INIT();
	if (!hmod || !name)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!image_has(hmod->image, name))
		return CUDA_ERROR_NOT_FOUND;
	*hfunc = func_for(name);
	return *hfunc ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
			       void **jitOptionsValues, unsigned int numJitOptions,
			       CUlibraryOption *libraryOptions, void **libraryOptionValues,
			       unsigned int numLibraryOptions)
{
	struct CUlib_st *l;
	CUresult r;

	(void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
	(void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
	CHECK_INIT();
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = load_image(&l->image, code);
	if (r != CUDA_SUCCESS) {
		free(l);
		return r;
	}
	*library = l;
	return CUDA_SUCCESS;
}

API CUresult cuLibraryUnload(CUlibrary library)
{
	if (!library)
		return CUDA_ERROR_INVALID_HANDLE;
	free(library->image);
	free(library);
	return CUDA_SUCCESS;
}

API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	unsigned int i;

	CHECK_INIT();
	if (!library || !name)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!image_has(library->image, name))
		return CUDA_ERROR_NOT_FOUND;
	i = atomic_fetch_add(&nkerns, 1);
	if (i >= MAX_HANDLES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	snprintf(kerns[i].name, sizeof(kerns[i].name), "%s", name);
	*pKernel = &kerns[i];
	return CUDA_SUCCESS;
}

/*
 * A CUkernel is context-independent; the CUfunction for the current context
 * is a different handle (what a profiler sees at cuLaunchKernel).
 */
API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	CHECK_INIT();
	if (!kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&handles_lock);
	if (!kernel->func && nfuncs < MAX_HANDLES) {
		kernel->func = &funcs[atomic_fetch_add(&nfuncs, 1)];
		memcpy(kernel->func->name, kernel->name, sizeof(kernel->func->name));
	}
	pthread_mutex_unlock(&handles_lock);
	*pFunc = kernel->func;
	return *pFunc ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = hfunc->name;
	return CUDA_SUCCESS;
}

/* ---- launches ---- */

static CUresult launch(CUfunction f)
{
	if (!atomic_load(&initialized))
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (api_hook)
		api_hook(atomic_fetch_add(&next_corr, 1), "cuLaunchKernel", f->name, 0);
	atomic_fetch_add(&f->launches, 1);
	return CUDA_SUCCESS;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			    void **kernelParams, void **extra)
{
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
	(void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
	return launch(f);
}

/* The _ptsz variants exist as separate entry points in the real driver too. */
API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				 unsigned int gridDimZ, unsigned int blockDimX,
				 unsigned int blockDimY, unsigned int blockDimZ,
				 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				 void **extra)
{
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
	(void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
	return launch(f);
}

API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			      void **extra)
{
	(void)kernelParams, (void)extra;
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f);
}

API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				       unsigned int gridDimZ, unsigned int blockDimX,
				       unsigned int blockDimY, unsigned int blockDimZ,
				       unsigned int sharedMemBytes, CUstream hStream,
				       void **kernelParams)
{
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
	(void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams;
	return launch(f);
}

API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	(void)hStream;
	CHECK_INIT();
	return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- memory: "device" memory is host memory ---- */

static CUresult alloc(CUdeviceptr *dptr, size_t bytesize)
{
	void *p;

	CHECK_INIT();
	if (!dptr || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	p = malloc(bytesize);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

API CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	return alloc(dptr, bytesize);
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream;
	return alloc(dptr, bytesize);
}

API CUresult cuMemFree(CUdeviceptr dptr)
{
	CHECK_INIT();
	free((void *)(uintptr_t)dptr);
	return CUDA_SUCCESS;
}

API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	(void)hStream;
	CHECK_INIT();
	free((void *)(uintptr_t)dptr);
	return CUDA_SUCCESS;
}

static CUresult copy(void *dst, const void *src, size_t n)
{
	CHECK_INIT();
	if (api_hook)
		api_hook(atomic_fetch_add(&next_corr, 1), "cuMemcpy", NULL, n);
	if ((!dst || !src) && n)
		return CUDA_ERROR_INVALID_VALUE;
	memmove(dst, src, n);
	return CUDA_SUCCESS;
}

#define DPTR(d) ((void *)(uintptr_t)(d))

API CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy(DPTR(dstDevice), srcHost, ByteCount);
}

API CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(dstHost, DPTR(srcDevice), ByteCount);
}

API CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(DPTR(dstDevice), DPTR(srcDevice), ByteCount);
}

API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy(DPTR(dst), DPTR(src), ByteCount);
}

API CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
			       CUstream hStream)
{
	(void)hStream;
	return copy(DPTR(dstDevice), srcHost, ByteCount);
}

API CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
			       CUstream hStream)
{
	(void)hStream;
	return copy(dstHost, DPTR(srcDevice), ByteCount);
}

API CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
			       CUstream hStream)
{
	(void)hStream;
	return copy(DPTR(dstDevice), DPTR(srcDevice), ByteCount);
}

API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	(void)hStream;
	return copy(DPTR(dst), DPTR(src), ByteCount);
}

API CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	CHECK_INIT();
	memset(DPTR(dstDevice), uc, N);
	return CUDA_SUCCESS;
}

/* ---- streams and events ---- */

API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	unsigned int i;

	(void)Flags;
	CHECK_INIT();
	i = atomic_fetch_add(&nstreams, 1);
	if (i >= MAX_HANDLES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	streams[i].id = (int)i + 1;
	*phStream = &streams[i];
	return CUDA_SUCCESS;
}

API CUresult cuStreamDestroy(CUstream hStream)
{
	return hStream ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuStreamSynchronize(CUstream hStream)
{
	(void)hStream;
	CHECK_INIT();
	block_for_sync();
	return CUDA_SUCCESS;
}

API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	(void)hStream;
	CHECK_INIT();
	block_for_sync();
	return CUDA_SUCCESS;
}

API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	unsigned int i;

	(void)Flags;
	CHECK_INIT();
	i = atomic_fetch_add(&nevents, 1);
	if (i >= MAX_HANDLES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	events[i].id = (int)i + 1;
	*phEvent = &events[i];
	return CUDA_SUCCESS;
}

API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	(void)hStream;
	CHECK_INIT();
	return hEvent ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuEventSynchronize(CUevent hEvent)
{
	CHECK_INIT();
	if (!hEvent)
		return CUDA_ERROR_INVALID_HANDLE;
	block_for_sync();
	return CUDA_SUCCESS;
}

API CUresult cuEventDestroy(CUevent hEvent)
{
	return hEvent ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- cuGetProcAddress: how the runtime finds everything above ---- */

struct proc {
	const char *name; /* the unversioned name the runtime asks for */
	void *pfn;	  /* the versioned entry point for CUDA_VERSION */
	void *ptsz;	  /* per-thread default stream variant, if any */
};

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			      CUdriverProcAddressQueryResult *symbolStatus);

#define P(n)                        \
	{                           \
#n, (void *)n, NULL \
	}
#define PT(n, t)                         \
	{                                \
#n, (void *)n, (void *)t \
	}
static const struct proc procs[] = {
	{ "cuGetProcAddress", (void *)cuGetProcAddress, NULL },
	P(cuInit),
	P(cuDriverGetVersion),
	P(cuDeviceGetCount),
	P(cuDeviceGet),
	P(cuDeviceGetName),
	P(cuDevicePrimaryCtxRetain),
	P(cuDevicePrimaryCtxRelease),
	P(cuCtxSetCurrent),
	P(cuCtxGetCurrent),
	P(cuCtxSynchronize),
	P(cuGetErrorString),
	P(cuModuleLoadData),
	P(cuModuleUnload),
	P(cuModuleGetFunction),
	P(cuLibraryLoadData),
	P(cuLibraryUnload),
	P(cuLibraryGetKernel),
	P(cuKernelGetFunction),
	P(cuFuncGetName),
	PT(cuLaunchKernel, cuLaunchKernel_ptsz),
	P(cuLaunchKernelEx),
	P(cuLaunchCooperativeKernel),
	P(cuGraphLaunch),
	P(cuMemAlloc),
	P(cuMemAllocAsync),
	P(cuMemFree),
	P(cuMemFreeAsync),
	P(cuMemcpyHtoD),
	P(cuMemcpyDtoH),
	P(cuMemcpyDtoD),
	P(cuMemcpy),
	P(cuMemcpyHtoDAsync),
	P(cuMemcpyDtoHAsync),
	P(cuMemcpyDtoDAsync),
	P(cuMemcpyAsync),
	P(cuMemsetD8),
	P(cuStreamCreate),
	P(cuStreamDestroy),
	PT(cuStreamSynchronize, cuStreamSynchronize_ptsz),
	P(cuEventCreate),
	P(cuEventRecord),
	P(cuEventSynchronize),
	P(cuEventDestroy),
};

API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			      CUdriverProcAddressQueryResult *symbolStatus)
{
	size_t i;

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	if (cudaVersion > CUDA_VERSION) {
		if (symbolStatus)
			*symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
		return CUDA_ERROR_NOT_FOUND;
	}
	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, symbol))
			continue;
		*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].ptsz
			       ? procs[i].ptsz
			       : procs[i].pfn;
		if (symbolStatus)
			*symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	if (symbolStatus)
		*symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

/* The CUDA 11 four-argument form, still exported by the real driver. */
API CUresult fake_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
				      cuuint64_t flags) __asm__("cuGetProcAddress");
API CUresult fake_cuGetProcAddress_v1(const char *symbol, void **pfn, int cudaVersion,
				      cuuint64_t flags)
{
	return cuGetProcAddress(symbol, pfn, cudaVersion, flags, NULL);
}
