/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* ksyms: kernel symbols from /proc/kallsyms, modules included. */
#ifndef BPFPROF_KSYMS_H
#define BPFPROF_KSYMS_H

#include <stdint.h>

struct ksyms;

/*
 * Load kernel symbols from a kallsyms-format file (NULL: /proc/kallsyms).
 * Only text symbols (t, T, w, W) are kept. Returns 0 or -errno; -EPERM-like
 * failure is reported when every address reads as zero (kptr_restrict).
 */
int ksyms__load(struct ksyms **out, const char *path);
void ksyms__free(struct ksyms *ks);

/*
 * The symbol containing addr (the highest symbol start <= addr, within the
 * same module and not past the end of kernel text), its distance in *off and
 * its module name in *module (NULL for vmlinux). NULL when none.
 */
const char *ksyms__lookup(const struct ksyms *ks, uint64_t addr, uint64_t *off,
			  const char **module);
/* Number of symbols loaded. */
uint64_t ksyms__count(const struct ksyms *ks);

#endif
