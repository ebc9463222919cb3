// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * .eh_frame and .debug_frame (user/unwind/cfi.c): the input is an ELF file.
 * What cfi__build returns must be what BPF can binary-search: rows sorted by
 * pc, each found again by cfi__find, every rule one the BPF side knows.
 */
#include "fuzz.h"
#include "unwind/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_row *rows = NULL;
	struct cfi_stats st;
	size_t n = 0;
	int fd = fuzz__memfd(data, size);

	if (!cfi__build(fd, &rows, &n, &st)) {
		for (size_t i = 0; i < n; i++) {
			const struct unwind_row *r = cfi__find(rows, n, rows[i].pc);

			fuzz__assert(i == 0 || rows[i - 1].pc <= rows[i].pc);
			fuzz__assert(rows[i].cfa_rule <= CFA_RULE_SIGNAL);
			fuzz__assert(rows[i].rbp_rule <= RBP_RULE_UNSUPPORTED);
			fuzz__assert(r && r->pc == rows[i].pc);
		}
		fuzz__assert(!n || !cfi__find(rows, n, rows[0].pc - 1) || rows[0].pc == 0);
	} else {
		fuzz__assert(!rows && !n);
	}
	free(rows);
	close(fd);
	return 0;
}
