/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cfidigest: what a file's unwind table is a function of, hashed by us.
 *
 * Two files may share one table (in memory, or through the table cache on
 * disk) only when their tables would be the same. A build id cannot say so:
 * it is whatever bytes the ELF note holds, and anyone can link a program with
 * libc's (-Wl,--build-id=0x...). What the CFI compiler reads can: the ELF
 * class and machine, the program headers (PT_LOAD, PT_GNU_EH_FRAME), the
 * headers of .eh_frame, .debug_frame, .got and .got.plt, and the bytes of
 * .eh_frame, .debug_frame and .eh_frame_hdr. SHA-256 of those (nettle).
 */
#ifndef BPFPROF_CFIDIGEST_H
#define BPFPROF_CFIDIGEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define CFI_DIGEST_SIZE 32

/* The digest of the file open at fd into out; 0 or -errno (not ELF, a short read). */
int cfi__digest(int fd, uint8_t out[CFI_DIGEST_SIZE]);

/*
 * Whether a table compiled from this file may serve other files (and be kept
 * on disk for any file with its digest): only when no user but root (or the
 * agent's own) can change its bytes, so that they cannot differ between the
 * digest and the compile. Anyone else's file keeps its table to itself.
 */
bool cfi__digest_trusted(const struct stat *st);

#endif
