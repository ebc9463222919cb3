// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * anon_jit SECONDS
 *
 * A JIT that writes no perf map and keeps making new code: every 10 ms of
 * CPU it maps a fresh page at a random address, writes a stub into it (with
 * a frame pointer, as JITs that want to be profiled keep one), makes it
 * executable with mprotect (no mmap record of executable memory reaches
 * a profiler's side band) and calls through it: main -> call_jit -> [stub]
 * -> jit_callback, which spins; the old page is unmapped. The program is
 * built without frame pointers (call_jit and jit_callback have CFI), so a
 * walk gets from jit_callback to main only through the stub's frame pointer.
 * Stops after SECONDS of CPU time.
 */
#include <string.h>
#include <sys/mman.h>

#include "common.h"

typedef void (*callback_fn)(long n);
typedef void (*stub_fn)(long n, callback_fn cb);

static const unsigned char stub_code[] = {
	0x55,		  /* push %rbp */
	0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
	0xff, 0xd6,	  /* call *%rsi */
	0x5d,		  /* pop %rbp */
	0xc3,		  /* ret */
};

NOINLINE void jit_callback(long n)
{
	uint64_t x = 1;

	for (long i = 0; i < n; i++)
		x = mix_step(x, (uint64_t)i);
	BARRIER();
	if (x == 42)
		puts("");
}

NOINLINE void call_jit(stub_fn fn, int64_t until)
{
	while (thread_cpu_ns() < until)
		fn(50000, jit_callback);
	BARRIER();
}

/* A page of code at a fresh address: the hint moves every time. */
static void *new_stub(uint64_t *seed)
{
	void *hint, *p;

	*seed = mix_step(*seed, 77);
	hint = (void *)(uintptr_t)(0x100000000000ULL + ((*seed >> 16) & 0xfffffffULL) * 4096);
	p = mmap(hint, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy((char *)p + 128, stub_code, sizeof(stub_code));
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC)) {
		munmap(p, 4096);
		return NULL;
	}
	return p;
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)getpid();
	int64_t end;
	long pages = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: anon_jit SECONDS\n");
		return 2;
	}
	end = thread_cpu_ns() + (int64_t)(parse_seconds("anon_jit", argv[1]) * 1e9);
	print_pid();
	while (thread_cpu_ns() < end) {
		void *p = new_stub(&seed);

		if (!p)
			return 1;
		call_jit((stub_fn)((char *)p + 128), thread_cpu_ns() + 10000000);
		munmap(p, 4096);
		pages++;
	}
	printf("pages %ld\n", pages);
	return 0;
}
