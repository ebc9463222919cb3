// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The event features a recording can enable besides on-CPU sampling, in the
 * order they are set up (each one's wanted() asks env). Each lives in its own file under collect/ with its
 * BPF object in bpf/; adding one is one line here.
 */
#include <stddef.h>

#include "collect/recorder.h"
#include "cuda/cuda.h"

extern const struct rec_feature offcpu_feature;
extern const struct rec_feature alloc_feature;

/* top and dump are views, not in this list: their commands run them as a mode (record.h) */
const struct rec_feature *const rec_features[] = {
	&cuda_feature,
	&offcpu_feature,
	&alloc_feature,
	NULL,
};
