/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* decode_ops: the recording's side of collect/decode.c (process table, side band, Python). */
#ifndef BPFPROF_DECODE_OPS_H
#define BPFPROF_DECODE_OPS_H

struct recorder;

/* After setup: r->dcfg from env and the parts that exist, r->dops pointing at them. */
void decode_ops__init(struct recorder *r);

#endif
