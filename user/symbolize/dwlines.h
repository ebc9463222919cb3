/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * dwlines: source file and line of a native address, from the DWARF of an
 * ELF file (the binary itself or its separate debug file, elfsym__dwarf_fd)
 * through elfutils' libdw. One per object, opened on the first lookup; what
 * it holds (the debug sections libdw read, decompressed, and its tables) is
 * reported by dwlines__bytes for the memory budget.
 */
#ifndef BPFPROF_DWLINES_H
#define BPFPROF_DWLINES_H

#include <stddef.h>
#include <stdint.h>

struct dwlines;

/*
 * Read the DWARF of the ELF file open at fd; the fd becomes dwlines' own.
 * max: -EFBIG, before reading them, when the debug sections (decompressed
 * sizes) would take more than max bytes held (0: no limit). Returns 0 or -errno.
 */
int dwlines__open(struct dwlines **out, int fd, uint64_t max);
void dwlines__free(struct dwlines *d);
/* Bytes it holds, about: twice its debug sections (libdw's tables on top of them). */
size_t dwlines__bytes(const struct dwlines *d);

struct dwline {
	const char *file;    /* source file of the function (as DWARF names it) */
	uint32_t line;	     /* the line vaddr is on, in that function */
	uint32_t start_line; /* the function's declaration line, or 0 */
};

/*
 * The line of ELF virtual address vaddr. Code inlined into the function is
 * reported at the line of the outermost inlined call, in the function that
 * the symbol table names, so that file, line and function agree. Strings
 * live as long as d. Returns 0 or -ENOENT.
 */
int dwlines__lookup(struct dwlines *d, uint64_t vaddr, struct dwline *out);

#endif
