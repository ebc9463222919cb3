// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>

#include <linux/types.h>

#include "bpfprof.h"
#include "util/counters.h"

/* in table order, which is the enum's order or the struct's field order */
#define COUNTER_DESC(id, nm, ls, ds) { .name = nm, .desc = ds, .loss = ls },

static const struct counter_desc bpf_desc[] = { BPF_COUNTERS(COUNTER_DESC) };
static const struct counter_desc alloc_desc[] = { ALLOC_COUNTERS(COUNTER_DESC) };
static const struct counter_desc cuda_desc[] = { CUDA_COUNTERS(COUNTER_DESC) };
static const struct counter_desc offcpu_desc[] = { OFFCPU_COUNTERS(COUNTER_DESC) };

_Static_assert(sizeof(bpf_desc) / sizeof(bpf_desc[0]) == CNT__MAX, "bpf counter table");
_Static_assert(sizeof(cuda_desc) / sizeof(cuda_desc[0]) == CUDA_CNT__MAX, "cuda counter table");
_Static_assert(sizeof(offcpu_desc) / sizeof(offcpu_desc[0]) == OFFCPU_CNT__MAX,
	       "offcpu counter table");

_Static_assert(sizeof(alloc_desc) / sizeof(alloc_desc[0]) ==
		       sizeof(struct alloc_counters) / sizeof(__u64),
	       "alloc counter table");

const struct counter_family counters_bpf = { "bpf", bpf_desc, CNT__MAX, false };
const struct counter_family counters_alloc = { "heap", alloc_desc,
					       sizeof(alloc_desc) / sizeof(alloc_desc[0]), true };
const struct counter_family counters_cuda = { "cuda", cuda_desc, CUDA_CNT__MAX, false };
const struct counter_family counters_offcpu = { "offcpu", offcpu_desc, OFFCPU_CNT__MAX, false };

uint32_t counters__format(char *buf, size_t len, const struct counter_family *f, const uint64_t *v,
			  bool losses_only)
{
	size_t used = strnlen(buf, len);
	uint32_t added = 0;

	for (uint32_t i = 0; i < f->n; i++) {
		int w;

		if (!v[i] || (losses_only && !f->d[i].loss))
			continue;
		if (used + 1 >= len)
			break;
		w = snprintf(buf + used, len - used, "%s%s %s %llu", used ? ", " : "", f->name,
			     f->d[i].name, (unsigned long long)v[i]);
		used = w < 0 ? used : used + (size_t)w < len ? used + (size_t)w : len - 1;
		added++;
	}
	return added;
}
