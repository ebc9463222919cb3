/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --alloc -- CMD: the in-process sampler (tools/heap, libbpfprof_heap.so)
 * that bpfprof preloads into the command instead of probing every malloc.
 */
#ifndef BPFPROF_ALLOC_H
#define BPFPROF_ALLOC_H

#include <stdbool.h>

/*
 * Before CMD is started: put the library in its LD_PRELOAD (and the rate in
 * BPFPROF_ALLOC_RATE) when it can interpose CMD's malloc: a dynamic
 * executable (or a script) that does not define malloc itself. Otherwise
 * the uprobe path is used. Returns whether the preload path is on.
 */
bool alloc__preload_env(void);

/* libbpfprof_heap.so next to the binary (or in ../lib/bpfprof), or NULL. */
const char *alloc__preload_path(void);

#endif
