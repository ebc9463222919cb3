/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * <linux/errno.h> (which libbpf's usdt.bpf.h includes) wants <asm/errno.h>,
 * an arch directory the BPF target's include path lacks; the generic codes
 * are the same on every arch the BPF programs are built for.
 */
#include <asm-generic/errno.h>
