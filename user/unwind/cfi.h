/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cfi: compile an ELF file's call frame information (.eh_frame, and
 * .debug_frame for what .eh_frame does not cover) into a flat, sorted unwind table
 * for x86-64 that a BPF program can binary-search: for each PC range, how to
 * find the CFA (canonical frame address) and where the caller's RBP was saved.
 * The return address is always at CFA-8 on x86-64 (checked: an FDE that says
 * otherwise is marked unsupported).
 */
#ifndef BPFPROF_CFI_H
#define BPFPROF_CFI_H

#include <stddef.h>
#include <stdint.h>

#include "symbolize/elfsym.h"

enum cfa_rule {
	CFA_RULE_UNSUPPORTED = 0, /* no CFI for this PC, or a rule we cannot express */
	CFA_RULE_SP = 1,	  /* CFA = RSP + cfa_off */
	CFA_RULE_FP = 2,	  /* CFA = RBP + cfa_off */
	/*
	 * PLT stub expression: CFA = RSP + 8 + ((RIP & 15) >= 11 ? 8 : 0). cfa_off
	 * holds that threshold: 11 for the lazy .plt; other layouts differ
	 * (-z ibtplt: 9 with binutils 2.40).
	 */
	CFA_RULE_PLT = 3,
	CFA_RULE_END = 4,    /* outermost frame (RIP undefined, e.g. _start): stop cleanly */
	CFA_RULE_SIGNAL = 5, /* signal trampoline ('S' augmentation, __restore_rt) */
	/*
	 * A partial table's gap (cfi__emit_fdes): code whose FDE is not in the
	 * table yet. BPF takes a frame-pointer step, counted apart.
	 */
	CFA_RULE_GAP = 6,
};

enum rbp_rule {
	RBP_RULE_SAME = 0,	  /* RBP unchanged in this frame (same value / undefined in CIE) */
	RBP_RULE_CFA = 1,	  /* caller's RBP saved at CFA + rbp_off */
	RBP_RULE_UNSUPPORTED = 2, /* saved somewhere we cannot express (register, expression) */
};

/*
 * The rows' version: bumped whenever cfi__build (or tables.c's conversion
 * to BPF rows) would make different rows for the same file, so that tables
 * cached on disk by an older agent (tcache.c) are compiled again.
 */
#define CFI_VERSION 1

struct unwind_row {
	uint64_t pc; /* ELF virtual address where this row starts */
	int32_t cfa_off;
	int16_t rbp_off;
	uint8_t cfa_rule; /* enum cfa_rule */
	uint8_t rbp_rule; /* enum rbp_rule */
};

struct cfi_stats {
	uint32_t fdes;	       /* FDEs read */
	uint32_t rows_raw;     /* rows before merging identical neighbours */
	uint32_t unsupported;  /* rows whose CFA rule could not be expressed */
	uint32_t bad_fdes;     /* malformed FDEs skipped */
	uint32_t dropped_fdes; /* well-formed but unused: empty, outside every executable
				 * PT_LOAD (discarded by the linker), or .debug_frame
				 * duplicating .eh_frame */
	/*
	 * ".eh_frame", ".debug_frame" (no .eh_frame FDEs), ".eh_frame+.debug_frame"
	 * (.debug_frame filled holes .eh_frame leaves), or NULL
	 */
	const char *source;
};

/*
 * Build the table for the ELF file open at fd (not closed). Rows are sorted by
 * pc; each covers [pc, next row's pc). Consecutive identical rows are merged.
 * The end of every FDE's range that is not the start of another is marked by
 * a CFA_RULE_UNSUPPORTED row, so a PC between functions never uses the
 * previous function's last rule. Returns 0 (rows may be empty when the file
 * has no CFI) or -errno (-ENOEXEC: not ELF, truncated, or not x86-64).
 * *rows is malloc'd; free() it.
 */
int cfi__build(int fd, struct unwind_row **rows, size_t *nrows, struct cfi_stats *stats);

/*
 * Where cfi__emit puts the table: the rows cfi__build would return, in
 * order, in chunks as they are made (so that a large file's table is never
 * held whole in this 16-byte form). A non-zero return stops the build, and
 * cfi__emit returns it.
 */
typedef int (*cfi_sink_fn)(void *ctx, const struct unwind_row *rows, size_t n);

/* cfi__build, the rows going to sink; *nrows: how many it was given. */
int cfi__emit(int fd, cfi_sink_fn sink, void *ctx, struct cfi_stats *stats, size_t *nrows);

/*
 * A partial table: cfi__emit for only the .eh_frame FDEs at the addresses
 * fdes[0 .. nfdes) (ELF vaddrs, as .eh_frame_hdr's table gives them; any
 * order), the section's other FDEs never read, .debug_frame ignored.
 * Where none of them is in force (below the first, between them, after
 * the last) the row is CFA_RULE_GAP, not CFA_RULE_UNSUPPORTED. An address
 * that is no FDE counts in stats->bad_fdes.
 */
int cfi__emit_fdes(int fd, const uint64_t *fdes, size_t nfdes, cfi_sink_fn sink, void *ctx,
		   struct cfi_stats *stats, size_t *nrows);

/*
 * The functions of the ELF file open at fd: its FDEs' ranges (.eh_frame's,
 * .debug_frame's where .eh_frame has none), in executable segments, sorted
 * by start, one per start address. What names an address in a stripped
 * file by its function (module+0xSTART) where no symbol does. *out is
 * malloc'd (NULL when none). 0 or -errno, as cfi__build.
 */
int cfi__functions(int fd, struct elfsym_func **out, size_t *n);

/* Binary search: the row covering pc, or NULL (before the first row). */
const struct unwind_row *cfi__find(const struct unwind_row *rows, size_t nrows, uint64_t pc);

#endif
