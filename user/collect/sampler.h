/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sampler: one sampling perf event per online CPU (hardware cycles where the
 * PMU has them, else cpu-clock), in frequency mode, each with the BPF program
 * attached. Created disabled; enabled once everything downstream is ready.
 */
#ifndef BPFPROF_SAMPLER_H
#define BPFPROF_SAMPLER_H

#include <stdbool.h>

struct bpf_program;
struct sampler;

int sampler__new(struct sampler **out, struct bpf_program *prog, unsigned int freq);
void sampler__free(struct sampler *s);
int sampler__enable(struct sampler *s);
int sampler__disable(struct sampler *s);
/* "cycles" or "cpu-clock" */
const char *sampler__event_name(const struct sampler *s);
int sampler__ncpus(const struct sampler *s);

/*
 * Parse a kernel CPU list ("0-3,5,7-8") into a mask of *n entries (the highest
 * CPU + 1). Returns 0 or -EINVAL. Pure; exposed for tests.
 */
int parse_cpu_list(const char *s, bool **mask, int *n);

#endif
