/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * needed: the files a command will map when it starts, found the way the
 * dynamic loader finds them: the executable (argv[0], searched in PATH as
 * execvp does), its PT_INTERP, and the DT_NEEDED libraries, transitively,
 * through DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH ($ORIGIN expanded),
 * /etc/ld.so.conf and the default directories. Used to build a `-- CMD`'s
 * unwind tables before it runs. A guess the loader overrules (ld.so.cache
 * entries outside those directories, hwcaps subdirectories, dlopen) costs
 * only a table nobody uses, which is evicted like any cold one.
 */
#ifndef BPFPROF_NEEDED_H
#define BPFPROF_NEEDED_H

#include <stddef.h>

/*
 * *files: malloc'd array of malloc'd absolute paths (the executable first),
 * each once. Returns 0, or -errno when the executable cannot be found or is
 * not an x86-64 ELF file. Libraries not found are left out.
 */
int needed__files(const char *cmd, char ***files, size_t *n);
void needed__free(char **files, size_t n);

#endif
