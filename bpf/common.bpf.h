/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Maps and helpers every bpfprof program shares: counters, target filter, output. */
#ifndef BPFPROF_COMMON_BPF_H
#define BPFPROF_COMMON_BPF_H

#include "bpfprof.h"

/* Set from user space before load (STYLE rule 4). */
const volatile bool filter_pids = false;	/* only tgids in `targets` */
const volatile bool follow_children = false;	/* add children of targets at fork */

/* Sized from user space before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);	/* tgid */
	__type(value, __u32);	/* enum target_reason */
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline bool is_target(__u32 tgid)
{
	if (!filter_pids)
		return true;
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

#endif
