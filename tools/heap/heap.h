/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libbpfprof_heap.so's insides shared by its two files: preload.c (the
 * malloc family, sampling, the probe points) and exec.c (the exec family:
 * the sampler goes on into the programs a target starts).
 */
#ifndef BPFPROF_HEAP_PRELOAD_H
#define BPFPROF_HEAP_PRELOAD_H

#include <stdint.h>
#include <sys/types.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* The sampling rate bpfprof set (BPFPROF_ALLOC_RATE when the image started); 0 before init. */
HIDDEN uint64_t heap_rate(void);
/* Resolve the next definitions and read the configuration, once. */
HIDDEN void heap_init(void);
/* next definitions, for exec.c's own use */
HIDDEN void *heap_real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

/* exec.c: find this library's file (at init); bpfprof_heap_hello's flags from it */
HIDDEN void heap_exec_init(void);
/* = PRELOAD_HELLO_* in include/bpfprof.h, which this library does not include */
#define HELLO_INTERPOSING (1ULL << 0) /* calls to malloc reach this library */
#define HELLO_FD_FORM	  (1ULL << 1) /* loaded as /proc/self/fd/N (a path it could not use) */
HIDDEN uint64_t heap_exec_flags(void);

#endif
