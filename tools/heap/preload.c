// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libbpfprof_heap.so: in-process heap sampling for `bpfprof --alloc -- CMD`.
 *
 * bpfprof puts this library in the command's LD_PRELOAD. It interposes the
 * malloc family and forwards every call to the next definition
 * (dlsym(RTLD_NEXT): glibc, or jemalloc/tcmalloc/mimalloc preloaded or
 * linked). Sampling is the one bpf/alloc.bpf.c does, by bytes: each thread
 * counts down the bytes to its next sample point, drawn from an exponential
 * distribution of mean BPFPROF_ALLOC_RATE, so bpfprof weights the samples
 * the same way. The countdown is taken before the call: an unsampled call
 * costs a thread-local subtraction and a jump into the allocator; no trap.
 *
 * A sampled allocation calls bpfprof_heap_sampled(), on which bpfprof has a
 * uprobe: the BPF program walks the stack from the registers of the
 * wrapper's caller (passed as arguments, read from the wrapper's frame), as
 * a return probe on malloc would see them, so the stacks are the same as on
 * the uprobe path. Sampled addresses go into a lock-free set that grows; a
 * free of an address in the set calls bpfprof_heap_freed() before the block
 * is given back (after, its address could be sampled again by another
 * thread). Each probe point also hands over the rate this library samples
 * at: BPF drops what a sampler set to another rate (by a target's own
 * environment) sends. The constructor says hello once per image
 * (bpfprof_heap_hello): bpfprof knows the process is covered.
 *
 * Nesting: a call the allocator makes to the malloc family through the PLT
 * while an allocation call of this thread is in the allocator (glibc's
 * reallocarray calls realloc) is part of that call and not counted again.
 * Everything else is the program's, whoever its caller: strdup, getline,
 * fopen and the dynamic loader allocate for the program from inside libc.
 *
 * Anonymous mmap/munmap are interposed too, but an mmap the allocator's own
 * code makes (its arenas) is not sampled: the arenas are the allocator's,
 * the blocks in them the program's.
 *
 * Not interposable: a static executable, and an executable that defines
 * malloc itself (it comes before any preloaded library in the lookup
 * order); bpfprof probes those with uprobes instead.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap.h"

#define API	     __attribute__((visibility("default")))
#define DEFAULT_RATE (512 * 1024)
#define SIZE_MASK    ((1ULL << 56) - 1)
#define F_UNTRACKED  (1ULL << 63) /* the set could not grow: its free will not be seen */
#define SET_BITS     16		  /* the first table's; each next one twice as big */
#define SET_TABLES   26		  /* up to 2^41 slots in all */
#define SET_PROBES   32
#define SLOT_FREE    0
#define SLOT_TOMB    1
#define BOOT_BYTES   (64 * 1024)

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);

static struct {
	malloc_fn malloc, valloc, pvalloc;
	calloc_fn calloc;
	realloc_fn realloc;
	reallocarray_fn reallocarray;
	free_fn free;
	posix_memalign_fn posix_memalign;
	memalign_fn memalign, aligned_alloc;
	mmap_fn mmap;
	munmap_fn munmap;
} real;

static uint64_t rate; /* 0: not read yet */
static int resolving; /* dlsym in progress: calloc from boot */
static char boot[BOOT_BYTES] __attribute__((aligned(16)));
static size_t boot_used;
/*
 * The set of sampled addresses: open-addressing tables, the first static
 * (512 KiB), each next one mapped when an insert finds no free slot in the
 * newest, twice its size. Inserts go to the newest; a lookup searches them
 * all, newest first. Never shrinks (the process's lifetime).
 */
static uintptr_t set0[1u << SET_BITS];
static uintptr_t *sets[SET_TABLES] = { set0 };
static int nsets = 1;
/*
 * A free's first check: one counter per hash bucket (32 KiB, stays in
 * cache); only a free whose bucket holds a sampled address looks in the
 * set (a cache miss). A full counter stays full.
 */
#define FILTER_BITS 15
static uint8_t filter[1u << FILTER_BITS];
static long nlive; /* addresses in the set */

/* per thread, one block (one TLS offset to load) */
static __thread struct {
	uint64_t until; /* bytes to the next sample point; 0 until drawn */
	uint64_t rng;
	int init;
	int depth; /* this thread's allocation calls in the allocator now (see nesting) */
	int probe; /* 1: the constructor's call to see whether malloc reaches us; 2: it did */
} ts __attribute__((tls_model("initial-exec")));

/*
 * The allocator's own code (the executable segments of the object the next
 * malloc is in) and this library's: an mmap or munmap called from there is
 * the allocator managing its arenas, and a malloc called from there is
 * nested in an allocation call (counted once, as the outer call).
 */
#define MAX_TEXT 8
static struct {
	uintptr_t lo, hi;
} alloc_text[MAX_TEXT];
static int nalloc_text;

/*
 * The probe points. Their arguments are what the BPF programs read:
 *   bpfprof_heap_sampled(addr, size | F_UNTRACKED, ip, sp, bp, rate)
 *   bpfprof_heap_freed(addr, rate)
 *   bpfprof_heap_hello(HELLO_* flags, rate): once per image, from the constructor
 *
 * Each is a one-byte nop (the probed instruction) and a ret, in assembly so
 * that no compiler changes either. The kernel emulates a probed nop (no
 * single step), and it cannot rewrite a one-byte instruction into a call.
 * It does rewrite a probed 5-byte nop (kernel 6.18, "uprobes/x86: Add
 * support to optimize uprobes"): after the first hit the nop becomes a call
 * to an [uprobes-trampoline] page it maps in that process, VM_DONTCOPY. A
 * forked child keeps the call (its copy of the text page) but not the page,
 * and died of SIGSEGV at its first sampled allocation (issue 25). Protected:
 * the library's own calls bind here, not through the PLT.
 */
void bpfprof_heap_sampled(void *addr, uint64_t size, uintptr_t ip, uintptr_t sp, uintptr_t bp,
			  uint64_t r) __attribute__((visibility("protected")));
void bpfprof_heap_freed(void *addr, uint64_t r) __attribute__((visibility("protected")));
void bpfprof_heap_hello(uint64_t flags, uint64_t r) __attribute__((visibility("protected")));

#define PROBE_POINT(name)                       \
	".globl " #name "\n"                    \
	".protected " #name "\n"                \
	".type " #name ", @function\n"          \
	".p2align 4\n" #name ":\n"              \
	"\tnop\n" /* 0x90: the probe's place */ \
	"\tret\n"                               \
	".size " #name ", .-" #name "\n"

asm(".pushsection .text\n" PROBE_POINT(bpfprof_heap_sampled) PROBE_POINT(bpfprof_heap_freed)
	    PROBE_POINT(bpfprof_heap_hello) ".popsection\n");

static void resolve(void)
{
	__atomic_store_n(&resolving, 1, __ATOMIC_RELAXED);
	real.malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
	real.calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
	real.realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
	real.reallocarray = (reallocarray_fn)dlsym(RTLD_NEXT, "reallocarray");
	real.free = (free_fn)dlsym(RTLD_NEXT, "free");
	real.posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
	real.memalign = (memalign_fn)dlsym(RTLD_NEXT, "memalign");
	real.aligned_alloc = (memalign_fn)dlsym(RTLD_NEXT, "aligned_alloc");
	real.valloc = (malloc_fn)dlsym(RTLD_NEXT, "valloc");
	real.pvalloc = (malloc_fn)dlsym(RTLD_NEXT, "pvalloc");
	real.mmap = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
	real.munmap = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
	__atomic_store_n(&resolving, 0, __ATOMIC_RELAXED);
}

/* dl_iterate_phdr: the executable segments of the object that holds arg */
static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t want = (uintptr_t)arg;
	int hit = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && want >= lo && want - lo < ph->p_memsz)
			hit = 1;
	}
	if (!hit)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nalloc_text < MAX_TEXT; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			alloc_text[nalloc_text].lo = lo;
			alloc_text[nalloc_text].hi = lo + ph->p_memsz;
			nalloc_text++;
		}
	}
	return 1;
}

static void init(void)
{
	const char *s = getenv("BPFPROF_ALLOC_RATE");
	char *end;
	unsigned long long v = s ? strtoull(s, &end, 10) : 0;

	if (!real.malloc) {
		resolve();
		/* and this library's: glibc's reallocarray tail-calls realloc */
		dl_iterate_phdr(find_text, (void *)(uintptr_t)&init);
		if (real.malloc)
			dl_iterate_phdr(find_text, (void *)(uintptr_t)real.malloc);
	}
	__atomic_store_n(&rate, v && !*end ? v : DEFAULT_RATE, __ATOMIC_RELAXED);
}

HIDDEN void heap_init(void)
{
	if (!__atomic_load_n(&rate, __ATOMIC_RELAXED))
		init();
}

HIDDEN uint64_t heap_rate(void)
{
	heap_init();
	return __atomic_load_n(&rate, __ATOMIC_RELAXED);
}

HIDDEN void *heap_real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	heap_init();
	if (real.mmap)
		return real.mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/*
 * Whether the program's calls to malloc reach this library: one call
 * through the global binding, marked so that the slow path notes it (and
 * does not sample it). Not dlsym's address against ours: a non-PIE
 * executable that takes malloc's address has a canonical PLT entry, which
 * dlsym(RTLD_DEFAULT) returns (Debian sid's python3.14); an executable
 * that defines malloc itself is called instead of this library.
 */
static int interposing(void)
{
	malloc_fn m = (malloc_fn)dlsym(RTLD_DEFAULT, "malloc");
	free_fn f = (free_fn)dlsym(RTLD_DEFAULT, "free");
	uint64_t until = ts.until;
	int init_was = ts.init, seen;
	void *p;

	if (!m || !f)
		return 0;
	ts.until = 0; /* the slow path */
	ts.probe = 1;
	p = m(1);
	seen = ts.probe == 2;
	ts.probe = 0;
	ts.until = until;
	ts.init = init_was;
	f(p);
	return seen;
}

HIDDEN int heap_real_munmap(void *addr, size_t len)
{
	if (real.munmap)
		return real.munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

/*
 * Hello, once per image: bpfprof learns that this process is covered, at
 * which rate, and whether its malloc calls reach this library.
 */
__attribute__((constructor)) static void ctor(void)
{
	uint64_t flags;

	init();
	/*
	 * Preloaded (by bpfprof -- CMD, or a parent that was): know this file
	 * for the programs it execs. Loaded into a running process by bpfprof
	 * -p (inject.c): its exec calls are not hooked, and the process gets
	 * no file descriptor of ours.
	 */
	if (getenv("BPFPROF_HEAP_FD") ||
	    (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "libbpfprof_heap")))
		heap_exec_init();
	flags = heap_exec_flags();
	if (interposing())
		flags |= HELLO_INTERPOSING;
	bpfprof_heap_hello(flags, __atomic_load_n(&rate, __ATOMIC_RELAXED));
}

static int in_allocator(uintptr_t ip)
{
	for (int i = 0; i < nalloc_text; i++)
		if (ip >= alloc_text[i].lo && ip < alloc_text[i].hi)
			return 1;
	return 0;
}

static inline int is_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot < sizeof(boot);
}

/* dlsym's own allocations, before the real functions are known */
static void *boot_alloc(size_t n)
{
	size_t at = __atomic_fetch_add(&boot_used, (n + 15) & ~(size_t)15, __ATOMIC_RELAXED);

	if (at + n > sizeof(boot))
		return NULL;
	return boot + at;
}

static uint64_t rng_next(void)
{
	if (!ts.rng)
		ts.rng = ((uint64_t)gettid() << 32) ^ (uint64_t)(uintptr_t)&ts.rng ^
			 (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ULL;
	ts.rng ^= ts.rng >> 12;
	ts.rng ^= ts.rng << 25;
	ts.rng ^= ts.rng >> 27;
	return ts.rng * 0x2545f4914f6cdd1dULL;
}

/* Bytes to the next sample point: -rate * ln(U), U uniform in (0, 1]. */
static uint64_t next_sample(uint64_t r)
{
	double u = ((rng_next() >> 11) + 1) * (1.0 / 9007199254740992.0);

	return (uint64_t)(-(double)r * log(u));
}

/*
 * The countdown ran out (or was never drawn, or every call is sampled):
 * whether the allocation of eff bytes holds a sample point.
 */
static __attribute__((noinline)) int sample_slow(uint64_t eff)
{
	uint64_t r;

	if (!__atomic_load_n(&rate, __ATOMIC_RELAXED))
		init();
	r = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	if (r <= 1)
		return r == 1;
	if (!ts.init) {
		ts.until = next_sample(r);
		ts.init = 1;
		if (ts.until > eff) {
			ts.until -= eff;
			return 0;
		}
	}
	ts.until = next_sample(r);
	return 1;
}

/*
 * Whether an allocation of size bytes holds a sample point, decided before
 * the call so that an unsampled call is a tail call into the allocator.
 * malloc(0) still returns a block: it counts as one byte.
 */
static inline uint64_t eff_of(size_t size)
{
	return (uint64_t)size + !size;
}

static inline int take(size_t size)
{
	uint64_t eff = eff_of(size);

	if (__builtin_expect(ts.until > eff, 1)) {
		ts.until -= eff;
		return 0;
	}
	return sample_slow(eff);
}

static inline uint32_t set_hash(uintptr_t a, int bits)
{
	return (uint32_t)(((a >> 4) * 0x9e3779b97f4a7c15ULL) >> (64 - bits));
}

static inline uint8_t *filter_of(uintptr_t a)
{
	return &filter[((a >> 4) * 0xff51afd7ed558ccdULL) >> (64 - FILTER_BITS)];
}

static void filter_add(uintptr_t a)
{
	uint8_t *f = filter_of(a), old = __atomic_load_n(f, __ATOMIC_RELAXED);

	while (old != 255 && !__atomic_compare_exchange_n(f, &old, old + 1, 0, __ATOMIC_RELAXED,
							  __ATOMIC_RELAXED))
		;
}

static void filter_del(uintptr_t a)
{
	uint8_t *f = filter_of(a), old = __atomic_load_n(f, __ATOMIC_RELAXED);

	while (old != 255 && old &&
	       !__atomic_compare_exchange_n(f, &old, old - 1, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

/* Table i of the set: 2^(SET_BITS + i) slots; NULL if not there yet. */
static inline uintptr_t *set_table(int i)
{
	return __atomic_load_n(&sets[i], __ATOMIC_ACQUIRE);
}

static int set_insert(uintptr_t *t, int bits, uintptr_t a)
{
	uint32_t h = set_hash(a, bits), mask = (1u << bits) - 1;

	for (int i = 0; i < SET_PROBES; i++) {
		uintptr_t *s = &t[(h + i) & mask];
		uintptr_t old = __atomic_load_n(s, __ATOMIC_RELAXED);

		if ((old == SLOT_FREE || old == SLOT_TOMB) &&
		    __atomic_compare_exchange_n(s, &old, a, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return 0;
	}
	return -ENOSPC;
}

/*
 * The newest table (n - 1) had no room near a's slot: table n, twice its
 * size, mapped here unless another thread was first. 0 or -ENOMEM.
 */
static int set_grow(int n)
{
	size_t bytes = sizeof(uintptr_t) << (SET_BITS + n);
	uintptr_t *t, *none = NULL;
	void *m;

	if (n >= SET_TABLES)
		return -ENOMEM;
	if (!set_table(n)) {
		m = heap_real_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
		if (m == MAP_FAILED)
			return -ENOMEM;
		t = m;
		if (!__atomic_compare_exchange_n(&sets[n], &none, t, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (real.munmap)
				real.munmap(m, bytes);
			else
				syscall(SYS_munmap, m, bytes);
		}
	}
	__atomic_compare_exchange_n(&nsets, &n, n + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	return 0;
}

static int set_add(uintptr_t a)
{
	for (;;) {
		int n = __atomic_load_n(&nsets, __ATOMIC_ACQUIRE);

		if (!set_insert(set_table(n - 1), SET_BITS + n - 1, a)) {
			filter_add(a);
			__atomic_fetch_add(&nlive, 1, __ATOMIC_RELAXED);
			return 0;
		}
		if (set_grow(n))
			return -ENOSPC;
	}
}

/* Whether a was in the set (it is not any more). */
static int set_take(uintptr_t a)
{
	int n;

	if (__builtin_expect(!__atomic_load_n(&nlive, __ATOMIC_RELAXED), 1) ||
	    __builtin_expect(!__atomic_load_n(filter_of(a), __ATOMIC_RELAXED), 1))
		return 0;
	n = __atomic_load_n(&nsets, __ATOMIC_ACQUIRE);
	for (int k = n - 1; k >= 0; k--) {
		uintptr_t *t = set_table(k);
		int bits = SET_BITS + k;
		uint32_t h = set_hash(a, bits), mask = (1u << bits) - 1;

		for (int i = 0; t && i < SET_PROBES; i++) {
			uintptr_t *s = &t[(h + i) & mask];
			uintptr_t old = __atomic_load_n(s, __ATOMIC_RELAXED);

			if (old == SLOT_FREE)
				break;
			if (old != a)
				continue;
			if (!__atomic_compare_exchange_n(s, &old, SLOT_TOMB, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED))
				return 0; /* another thread freed it */
			filter_del(a);
			__atomic_fetch_sub(&nlive, 1, __ATOMIC_RELAXED);
			return 1;
		}
	}
	return 0;
}

/*
 * The wrapper's caller as a return probe on it would see it: its return
 * address, its stack pointer after the return, its frame pointer (frame
 * pointers in this file: the wrapper's frame holds the saved rbp, then the
 * return address). Taken in the wrapper itself, also when it then jumps to
 * its *_slow function.
 */
#define CALLER()                                                                             \
	(uintptr_t) __builtin_return_address(0), (uintptr_t)__builtin_frame_address(0) + 16, \
		*(uintptr_t *)__builtin_frame_address(0)

/* A sampled allocation returned p (not nested in another: the caller checked). */
static __attribute__((noinline)) void sampled(void *p, size_t size, uintptr_t ip, uintptr_t sp,
					      uintptr_t bp)
{
	uint64_t v = (uint64_t)size & SIZE_MASK;

	if (set_add((uintptr_t)p))
		v |= F_UNTRACKED;
	bpfprof_heap_sampled(p, v, ip, sp, bp, rate);
}

/*
 * Whether this call is the program's and holds a sample point. A call
 * nested in one of this thread's in the allocator is neither: its bytes do
 * not move the countdown (as if it had not been made).
 */
static inline int take_outer(size_t size)
{
	return !ts.depth && take(size);
}

/* The real allocator's call for a sampled (or not fast-pathed) one: nested calls in it are its. */
#define IN_ALLOCATOR(expr)           \
	({                           \
		__typeof__(expr) r_; \
		ts.depth++;          \
		r_ = (expr);         \
		ts.depth--;          \
		r_;                  \
	})

/* A free's first check, inline: p is not sampled unless its filter bucket says maybe. */
static inline int maybe_sampled(const void *p)
{
	return is_boot(p) || (__atomic_load_n(&nlive, __ATOMIC_RELAXED) &&
			      __atomic_load_n(filter_of((uintptr_t)p), __ATOMIC_RELAXED));
}

static inline void retire(void *p)
{
	if (p && !is_boot(p) && set_take((uintptr_t)p))
		bpfprof_heap_freed(p, rate);
}

/*
 * Each wrapper's fast path (the countdown did not run out, the block freed
 * is not sampled) is a tail call into the allocator: no frame, no store but
 * the countdown's. The rest (first call, a sample point, a sampled block)
 * is in a *_slow function, given the wrapper's caller.
 */
static __attribute__((noinline)) void *malloc_slow(size_t size, uintptr_t ip, uintptr_t sp,
						   uintptr_t bp)
{
	void *p;

	if (!real.malloc)
		init();
	if (__builtin_expect(ts.probe, 0)) {
		ts.probe = 2;
		return real.malloc(size);
	}
	if (!take_outer(size))
		return real.malloc(size);
	p = IN_ALLOCATOR(real.malloc(size));
	if (p)
		sampled(p, size, ip, sp, bp);
	return p;
}

API void *malloc(size_t size)
{
	malloc_fn f = real.malloc;
	uint64_t eff = eff_of(size);

	if (__builtin_expect(f != NULL, 1) && __builtin_expect(ts.until > eff, 1)) {
		ts.until -= eff;
		return f(size);
	}
	return malloc_slow(size, CALLER());
}

static __attribute__((noinline)) void *calloc_slow(size_t n, size_t size, uintptr_t ip,
						   uintptr_t sp, uintptr_t bp)
{
	size_t total;
	void *p;

	if (!real.calloc) {
		if (__atomic_load_n(&resolving, __ATOMIC_RELAXED))
			return __builtin_mul_overflow(n, size, &total) ? NULL : boot_alloc(total);
		init();
	}
	if (__builtin_mul_overflow(n, size, &total) || !take_outer(total))
		return real.calloc(n, size); /* (an overflow fails: not counted) */
	p = IN_ALLOCATOR(real.calloc(n, size));
	if (p)
		sampled(p, total, ip, sp, bp);
	return p;
}

API void *calloc(size_t n, size_t size)
{
	calloc_fn f = real.calloc;
	size_t total;

	if (__builtin_expect(f != NULL, 1) && !__builtin_mul_overflow(n, size, &total) &&
	    __builtin_expect(ts.until > eff_of(total), 1)) {
		ts.until -= eff_of(total);
		return f(n, size);
	}
	return calloc_slow(n, size, CALLER());
}

static __attribute__((noinline)) void free_slow(void *p)
{
	if (!p || is_boot(p))
		return;
	retire(p);
	if (!real.free)
		init();
	real.free(p); /* (an allocator's munmap in it: not a sampled address) */
}

API void free(void *p)
{
	free_fn f = real.free;

	if (__builtin_expect(f != NULL, 1) && __builtin_expect(!maybe_sampled(p), 1)) {
		f(p);
		return;
	}
	free_slow(p);
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t size, uintptr_t ip,
						    uintptr_t sp, uintptr_t bp)
{
	void *p;

	if (!real.realloc)
		init();
	if (is_boot(old)) { /* never given back: copy out of it */
		size_t left = BOOT_BYTES - (size_t)((char *)old - boot);

		p = IN_ALLOCATOR(real.malloc(size));
		if (p)
			memcpy(p, old, size < left ? size : left);
		if (p && take_outer(size))
			sampled(p, size, ip, sp, bp);
		return p;
	}
	/* before the call: once it returns, the old address may be someone else's */
	retire(old);
	if (!size || !take_outer(size))
		return real.realloc(old, size); /* realloc(p, 0) frees */
	p = IN_ALLOCATOR(real.realloc(old, size));
	if (p)
		sampled(p, size, ip, sp, bp);
	return p;
}

API void *realloc(void *old, size_t size)
{
	realloc_fn f = real.realloc;
	uint64_t eff = eff_of(size);

	if (__builtin_expect(f != NULL, 1) && size && __builtin_expect(ts.until > eff, 1) &&
	    __builtin_expect(!maybe_sampled(old), 1)) {
		ts.until -= eff;
		return f(old, size);
	}
	return realloc_slow(old, size, CALLER());
}

/* Not a fast path: glibc's reallocarray calls realloc through the PLT (nested). */
API void *reallocarray(void *old, size_t n, size_t size)
{
	int sample;
	size_t total;
	void *p;

	if (__builtin_expect(!real.realloc, 0))
		init();
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	retire(old);
	sample = total && take_outer(total);
	p = IN_ALLOCATOR(real.reallocarray ? real.reallocarray(old, n, size)
					   : real.realloc(old, total));
	if (p && sample)
		sampled(p, total, CALLER());
	return p;
}

API int posix_memalign(void **out, size_t align, size_t size)
{
	int ret, sample;

	if (__builtin_expect(!real.posix_memalign, 0))
		init();
	sample = take_outer(size);
	ret = IN_ALLOCATOR(real.posix_memalign(out, align, size));
	if (!ret && sample)
		sampled(*out, size, CALLER());
	return ret;
}

static void *memalign_any(memalign_fn f, size_t align, size_t size, uintptr_t ip, uintptr_t sp,
			  uintptr_t bp)
{
	int sample = take_outer(size);
	void *p = IN_ALLOCATOR(f(align, size));

	if (p && sample)
		sampled(p, size, ip, sp, bp);
	return p;
}

API void *aligned_alloc(size_t align, size_t size)
{
	if (__builtin_expect(!real.memalign, 0))
		init();
	return memalign_any(real.aligned_alloc ? real.aligned_alloc : real.memalign, align, size,
			    CALLER());
}

API void *memalign(size_t align, size_t size)
{
	if (__builtin_expect(!real.memalign, 0))
		init();
	return memalign_any(real.memalign, align, size, CALLER());
}

API void *valloc(size_t size)
{
	int sample;
	void *p;

	if (__builtin_expect(!real.memalign, 0))
		init();
	if (!real.valloc)
		return memalign_any(real.memalign, sysconf(_SC_PAGESIZE), size, CALLER());
	sample = take_outer(size);
	p = IN_ALLOCATOR(real.valloc(size));
	if (p && sample)
		sampled(p, size, CALLER());
	return p;
}

API void *pvalloc(size_t size)
{
	size_t page = 4096, whole = (size + page - 1) & ~(page - 1);
	int sample;
	void *p;

	if (__builtin_expect(!real.memalign, 0))
		init();
	sample = take_outer(whole);
	p = IN_ALLOCATOR(real.pvalloc ? real.pvalloc(size) : real.memalign(page, whole));
	if (p && sample)
		sampled(p, whole, CALLER());
	return p;
}

/*
 * Anonymous mmaps the program makes are allocations; those the allocator
 * makes (its arenas: jemalloc's, mimalloc's) are not.
 */
static __attribute__((noinline)) void *mmap_any(void *addr, size_t len, int prot, int flags, int fd,
						off_t off, uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	size_t whole = (len + 4095) & ~(size_t)4095;
	void *p;

	if (__builtin_expect(!real.mmap, 0))
		init();
	if (!(flags & MAP_ANONYMOUS) || in_allocator(ip) || !take_outer(whole))
		return real.mmap(addr, len, prot, flags, fd, off);
	p = real.mmap(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED)
		sampled(p, whole, ip, sp, bp);
	return p;
}

API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_any(addr, len, prot, flags, fd, off, CALLER());
}

API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_any(addr, len, prot, flags, fd, off, CALLER());
}

API int munmap(void *addr, size_t len)
{
	if (__builtin_expect(!real.munmap, 0))
		init();
	if (!in_allocator((uintptr_t)__builtin_return_address(0)))
		retire(addr);
	return real.munmap(addr, len);
}

/*
 * What bpfprof_heap_inject (inject.c) hooks in a running process: each
 * function's name, this library's wrapper, and where its next definition
 * goes (the one the process's calls reached before).
 */
/*
 * This library's own functions, by hidden aliases: the name alone would be
 * taken through the GOT, the lookup order's first definition (the
 * process's allocator when this library was not preloaded).
 */
#define OWN(f) \
	extern __typeof__(f) own_##f __attribute__((alias(#f), visibility("hidden"), copy(f)))
OWN(malloc);
OWN(calloc);
OWN(realloc);
OWN(reallocarray);
OWN(free);
OWN(posix_memalign);
OWN(aligned_alloc);
OWN(memalign);
OWN(valloc);
OWN(pvalloc);
OWN(mmap);
OWN(mmap64);
OWN(munmap);

const struct heap_fn heap_fns[] = {
	{ "malloc", (void *)own_malloc, (void **)&real.malloc },
	{ "calloc", (void *)own_calloc, (void **)&real.calloc },
	{ "realloc", (void *)own_realloc, (void **)&real.realloc },
	{ "reallocarray", (void *)own_reallocarray, (void **)&real.reallocarray },
	{ "free", (void *)own_free, (void **)&real.free },
	{ "posix_memalign", (void *)own_posix_memalign, (void **)&real.posix_memalign },
	{ "aligned_alloc", (void *)own_aligned_alloc, (void **)&real.aligned_alloc },
	{ "memalign", (void *)own_memalign, (void **)&real.memalign },
	{ "valloc", (void *)own_valloc, (void **)&real.valloc },
	{ "pvalloc", (void *)own_pvalloc, (void **)&real.pvalloc },
	{ "mmap", (void *)own_mmap, (void **)&real.mmap },
	{ "mmap64", (void *)own_mmap64, NULL }, /* the same next mmap */
	{ "munmap", (void *)own_munmap, (void **)&real.munmap },
};
const int heap_nfns = sizeof(heap_fns) / sizeof(heap_fns[0]);

HIDDEN void heap_injected(uint64_t r)
{
	/* the allocator's code is where its malloc is now, and this library's */
	__atomic_store_n(&nalloc_text, 0, __ATOMIC_RELAXED);
	dl_iterate_phdr(find_text, (void *)(uintptr_t)&init);
	if (real.malloc)
		dl_iterate_phdr(find_text, (void *)(uintptr_t)real.malloc);
	__atomic_store_n(&rate, r ? r : DEFAULT_RATE, __ATOMIC_RELAXED);
}
