// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python line tables of each format (user/python/pyline.c): lnotab (3.8,
 * 3.9), 3.10's co_linetable, 3.11+'s location table. Input: a version byte,
 * co_firstlineno (4 bytes), a cut length (2 bytes), then the table. Every
 * offset gets an answer without reading past the table, and a table cut
 * where BPF cuts it answers, below pyline__covered, what the whole does.
 */
#include <string.h>

#include "fuzz.h"
#include "python/pyimpl.h"

static const uint32_t versions[] = { PYVER(3, 8),  PYVER(3, 9),	 PYVER(3, 10), PYVER(3, 11),
				     PYVER(3, 12), PYVER(3, 13), PYVER(3, 14) };
#define NVERSIONS (sizeof(versions) / sizeof(versions[0]))
#define HEAD	  7
/* offsets tried: every even one up to this (each answer is a walk of the table) */
#define OFF_MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pycode whole = { 0 }, cut;
	uint32_t firstlineno, covered, end;
	uint16_t cutlen;

	if (size < HEAD)
		return 0;
	whole.version = versions[data[0] % NVERSIONS];
	memcpy(&firstlineno, data + 1, 4);
	memcpy(&cutlen, data + 5, 2);
	whole.firstlineno = firstlineno;
	whole.linetable_len = size - HEAD;
	/* a copy of its own, so that ASan sees the table's end */
	whole.linetable = malloc(whole.linetable_len + 1);
	fuzz__assert(whole.linetable);
	memcpy(whole.linetable, data + HEAD, whole.linetable_len);

	cut = whole;
	cut.linetable_len = cutlen < whole.linetable_len ? cutlen : whole.linetable_len;
	cut.linetable_cut = true;
	covered = pyline__covered(cut.version, cut.linetable, cut.linetable_len);
	cut.linetable_covers = covered;

	/* a pair (entry) advances at most 255 (16) bytes */
	end = whole.linetable_len < OFF_MAX / 256 ? (uint32_t)whole.linetable_len * 256 + 2
						  : OFF_MAX;
	for (uint32_t off = 0; off < end; off += 2) {
		uint32_t line = pycode__line(&whole, off);

		if (off < covered)
			fuzz__assert(pycode__line(&cut, off) == line);
		else
			fuzz__assert(pycode__line(&cut, off) == 0);
	}
	pycode__line(&whole, UINT32_MAX);
	free(whole.linetable);
	return 0;
}
