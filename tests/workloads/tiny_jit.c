// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tiny_jit SECONDS
 *
 * A JIT in miniature: copies a counting loop (with a frame pointer, as JITs
 * that want to be profiled keep one) into anonymous executable memory,
 * names it "JIT:spin_loop" in /tmp/perf-PID.map as V8 or the JVM's agents
 * do, and calls it from call_jit() (built without frame pointers, with CFI)
 * until it has had SECONDS of CPU time. The map is removed at exit.
 */
#include <string.h>
#include <sys/mman.h>

#include "common.h"

typedef void (*spin_fn)(long n);

static const unsigned char spin_code[] = {
	0x55,		  /* push %rbp */
	0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
	0x48, 0xff, 0xcf, /* 1: dec %rdi */
	0x75, 0xfb,	  /* jnz 1b */
	0x5d,		  /* pop %rbp */
	0xc3,		  /* ret */
};

/* CPU time, not wall time: a test gets its samples however loaded the host is */
NOINLINE void call_jit(spin_fn fn, double secs)
{
	int64_t end = thread_cpu_ns() + (int64_t)(secs * 1e9);

	while (thread_cpu_ns() < end)
		fn(20000000);
	BARRIER();
}

int main(int argc, char **argv)
{
	char path[64];
	FILE *map;
	void *code;

	if (argc != 2) {
		fprintf(stderr, "usage: tiny_jit SECONDS\n");
		return 2;
	}
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	/* a little way in: the name must cover this address, not the mapping's start */
	memcpy((char *)code + 256, spin_code, sizeof(spin_code));
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC))
		return 1;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	map = fopen(path, "w");
	if (!map)
		return 1;
	fprintf(map, "%lx %zx JIT:spin_loop\n", (unsigned long)code + 256, sizeof(spin_code));
	fclose(map);
	print_pid();
	call_jit((spin_fn)((char *)code + 256), parse_seconds("tiny_jit", argv[1]));
	unlink(path);
	return 0;
}
