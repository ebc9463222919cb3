/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --cuda: the recorder feature for CUDA driver calls (bpf/cuda.bpf.c) and
 * GPU activity from the CUPTI injection library (tools/cupti).
 *
 * Joining a GPU record to the launch that caused it: CUPTI's correlation id
 * is the key, and only CUPTI knows it. The injection library fires
 * bpfprof:api_enter from CUPTI's driver-API callback, which runs inside the
 * driver call on the calling thread, so BPF stamps the call in flight (keyed
 * by thread) with the id; the call's record then carries it, and the GPU
 * record (bpfprof:gpu_activity) carries the same id. Without CUPTI (no
 * injection library, e.g. attached with -p to a process started without
 * CUDA_INJECTION64_PATH), calls have correlation 0 and there are no GPU
 * records: launch counts, stacks and call times only.
 */
#ifndef BPFPROF_CUDA_H
#define BPFPROF_CUDA_H

#include <stdint.h>

#include "collect/recorder.h"

extern const struct rec_feature cuda_feature;

/* "cuLaunchKernel", ... for enum cuda_op; "?" out of range. */
const char *cuda__op_name(uint32_t op);

/*
 * The CUPTI injection library bpfprof sets as CUDA_INJECTION64_PATH in
 * `-- CMD` mode: next to the bpfprof binary, or in its ../lib/bpfprof.
 * NULL when not built/installed.
 */
const char *cuda__injection_path(void);

#endif
