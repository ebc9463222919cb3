/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bpfprof top: a live view of the hottest functions (top.c). */
#ifndef BPFPROF_TOP_H
#define BPFPROF_TOP_H

/* After cli__parse: record with the live view instead of an output file. */
int top__run(void);

#endif
