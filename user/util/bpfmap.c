// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "util/bpfmap.h"

int bpfmap__percpu_sum(int map_fd, uint32_t key, uint64_t *out, size_t n_u64)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t *v;
	int err = 0;

	memset(out, 0, n_u64 * sizeof(*out));
	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	/* the kernel pads each CPU's value to 8 bytes: u64 counters need none */
	v = calloc((size_t)ncpus * n_u64, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (bpf_map_lookup_elem(map_fd, &key, v))
		err = -errno;
	else
		for (int c = 0; c < ncpus; c++)
			for (size_t i = 0; i < n_u64; i++)
				out[i] += v[(size_t)c * n_u64 + i];
	free(v);
	return err;
}

uint64_t bpfmap__percpu_counter(int map_fd, uint32_t key)
{
	uint64_t sum;

	return bpfmap__percpu_sum(map_fd, key, &sum, 1) ? 0 : sum;
}
