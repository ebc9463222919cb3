/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* registry: the features a recording can enable (user/registry.c). */
#ifndef BPFPROF_REGISTRY_H
#define BPFPROF_REGISTRY_H

struct rec_feature;

/* Every event feature, in set-up order, NULL-terminated: struct rec_mode's features. */
extern const struct rec_feature *const rec_features[];

#endif
