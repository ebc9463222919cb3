/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * selfpath: the libraries bpfprof puts into its targets (the heap preload,
 * the CUPTI injection) live beside the binary in a build tree
 * (build/bpfprof, build/NAME) and in lib/bpfprof/ next to bin/ once
 * installed (make install). Found from /proc/self/exe, not from PATH or
 * the working directory: a root agent must not load what another user put
 * in its way.
 */
#ifndef BPFPROF_SELFPATH_H
#define BPFPROF_SELFPATH_H

#include <stddef.h>

/* buf (len bytes) holding the readable NAME found so, or NULL when there is none. */
const char *selfpath__lib(const char *name, char *buf, size_t len);

#endif
