// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The features a recording can enable, in the order they are set up and
 * started (each one's wanted() asks env). Each lives in its own file (under
 * collect/, CUDA's under cuda/) with its BPF object in bpf/; adding one is
 * one line here. The registry sits above the features and the run loop:
 * collect/record.c runs whatever list a command hands it (struct rec_mode),
 * so the recorder never includes a feature.
 */
#include <stddef.h>

#include "collect/recorder.h"
#include "cuda/cuda.h"
#include "registry.h"

extern const struct rec_feature python_feature;
extern const struct rec_feature offcpu_feature;
extern const struct rec_feature alloc_feature;
extern const struct rec_feature cpu_feature;

/* top and dump are views, not here: their commands run them as a mode (record.h) */
const struct rec_feature *const rec_features[] = {
	&python_feature, /* first: the others' stacks carry Python frames */
	&cuda_feature,
	&offcpu_feature,
	&alloc_feature,
	&cpu_feature, /* last: sampling starts once everything else is attached */
	NULL,
};
