// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Line numbers from a code object's line table, three formats:
 *
 *  3.8, 3.9   co_lnotab: (bytecode delta, signed line delta) byte pairs
 *             (Objects/lnotab_notes.txt).
 *  3.10       co_linetable: (bytecode delta, signed line delta) pairs, each
 *             one address range; line delta -128 means "no line"; ranges of
 *             width 0 only carry their delta.
 *  3.11+      the location table: entries that start with a byte 1cccclll
 *             (code c, length l+1 code units) followed by varints
 *             (CPython's Objects/locations.md).
 *
 * Each decoder answers what CPython's PyCode_Addr2Line answers for the same
 * byte offset (tests/unit/test_python.c compares them on every instruction
 * of every code object of several modules, on each version), or 0 where
 * CPython has no line. The table may be garbage: every read is bounded.
 */
#include <stdint.h>

#include "python/pyimpl.h"

static uint32_t line_or_zero(int64_t line)
{
	return line > 0 && line <= UINT32_MAX ? (uint32_t)line : 0;
}

static uint32_t line_lnotab(const uint8_t *p, size_t len, int64_t line, uint32_t off)
{
	uint64_t addr = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		addr += p[i];
		if (addr > off)
			break;
		line += (int8_t)p[i + 1];
	}
	return line_or_zero(line);
}

static uint32_t line_310(const uint8_t *p, size_t len, int64_t line, uint32_t off)
{
	uint64_t start, end = 0;
	int64_t cur;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		int8_t ldelta = (int8_t)p[i + 1];

		start = end;
		end += p[i];
		if (ldelta == -128) {
			cur = -1;
		} else {
			line += ldelta;
			cur = line;
		}
		if (start != end && off < end)
			return line_or_zero(cur);
	}
	return 0;
}

/* Location table codes (Include/cpython/code.h: _PyCodeLocationInfoKind). */
enum {
	LOC_ONE_LINE0 = 10,
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

/*
 * 6-bit chunks, least significant first, 0x40 = more follow. A byte with
 * 0x80 set starts the next entry: a varint running into one is garbage, and
 * must not be read as part of this entry, or entries would end elsewhere
 * than pyline__covered counts them.
 */
static bool read_varint(const uint8_t *p, size_t len, size_t *i, uint32_t *v)
{
	unsigned shift = 0;
	uint32_t val = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 30 || (p[*i] & 0x80))
			return false;
		b = p[(*i)++];
		val |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*v = val;
	return true;
}

static uint32_t line_locations(const uint8_t *p, size_t len, int64_t line, uint32_t off)
{
	uint64_t addr = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t first = p[i];
		unsigned code = (first >> 3) & 15;
		uint32_t v;

		if (!(first & 0x80))
			return 0; /* not the start of an entry: garbage */
		i++;
		if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
			if (!read_varint(p, len, &i, &v))
				return 0;
			line += v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
		} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
			line += code - LOC_ONE_LINE0;
		}
		addr += ((first & 7) + 1) * 2;
		if (off < addr)
			return code == LOC_NONE ? 0 : line_or_zero(line);
		while (i < len && !(p[i] & 0x80))
			i++;
	}
	return 0;
}

uint32_t pyline__covered(uint32_t version, const uint8_t *p, size_t len)
{
	uint64_t addr = 0, done = 0;
	size_t i = 0;

	if (version < PYVER(3, 11)) {
		/*
		 * (bytecode delta, line delta) pairs: a pair after the cut starts
		 * at or beyond the complete pairs' end, so below it nothing of
		 * what was cut applies.
		 */
		for (i = 0; i + 1 < len; i += 2)
			addr += p[i];
		return addr > UINT32_MAX ? UINT32_MAX : (uint32_t)addr;
	}
	/* an entry is complete when the next one's first byte was sent */
	while (i < len && (p[i] & 0x80)) {
		addr += ((p[i] & 7) + 1) * 2;
		i++;
		while (i < len && !(p[i] & 0x80))
			i++;
		if (i < len)
			done = addr;
	}
	return done > UINT32_MAX ? UINT32_MAX : (uint32_t)done;
}

uint32_t pycode__line(const struct pycode *c, uint32_t off)
{
	if (!c->linetable)
		return 0;
	if (c->linetable_cut && off >= c->linetable_covers)
		return 0;
	if (c->version < PYVER(3, 10))
		return line_lnotab(c->linetable, c->linetable_len, c->firstlineno, off);
	if (c->version < PYVER(3, 11))
		return line_310(c->linetable, c->linetable_len, c->firstlineno, off);
	return line_locations(c->linetable, c->linetable_len, c->firstlineno, off);
}
