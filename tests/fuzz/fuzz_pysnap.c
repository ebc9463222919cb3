// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Code object snapshots (SAMPLE_PYCODE records, pycode__from_snap in
 * user/python/pycode.c): everything in one is the target's memory. Input: a
 * version byte, a byte saying whether the code type is known, then the
 * record. An accepted snapshot has its strings, a line table no longer than
 * BPF sends, and lines only where the cut table can tell them.
 *
 * Built with -DFUZZ_MKSEED it is instead the program that writes the seed
 * corpus: a valid snapshot per version (make fuzz-seeds).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "python/pyimpl.h"

#define CODE_T	0x7f0000001000ULL
#define STR_T	0x7f0000002000ULL
#define BYTES_T 0x7f0000003000ULL
#define HEAD	offsetof(struct pycode_snap, data)

static const uint32_t versions[] = { PYVER(3, 8) | 0xf0, PYVER(3, 9) | 0xf0, PYVER(3, 10) | 0xf0,
				     PYVER(3, 11) | 0x7f0, PYVER(3, 12) | 0x1f0 };
#define NVERSIONS (sizeof(versions) / sizeof(versions[0]))

#ifndef FUZZ_MKSEED
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pycode_snap *s;
	struct pyinfo info;
	struct pycode c;
	size_t len;

	if (size < 2 || size - 2 > sizeof(*s))
		return 0;
	memset(&info, 0, sizeof(info));
	if (pyoffsets__from_table(versions[data[0] % NVERSIONS], &info))
		abort();
	/* records arrive 8-byte aligned; exactly len bytes of it, for ASan */
	len = size - 2;
	s = aligned_alloc(8, (len + 7) & ~(size_t)7);
	fuzz__assert(s);
	memcpy(s, data + 2, len);
	if (!pycode__from_snap(&info, s, len, data[1] & 1 ? CODE_T : 0, &c)) {
		fuzz__assert(c.qualname && c.filename && c.linetable);
		fuzz__assert(c.linetable_len <= PYSNAP_LINES_MAX);
		fuzz__assert(strlen(c.qualname) <= 4 * PYSNAP_NAME_MAX);
		fuzz__assert(strlen(c.filename) <= 4 * PYSNAP_FILE_MAX);
		/* the start of the code, and both sides of where a cut table stops */
		for (uint32_t off = 0; off < 512; off += 2)
			pycode__line(&c, off);
		if (c.linetable_cut) {
			uint32_t at = c.linetable_covers;

			fuzz__assert(pycode__line(&c, at) == 0);
			if (at <= UINT32_MAX - 2)
				fuzz__assert(pycode__line(&c, at + 2) == 0);
			fuzz__assert(pycode__line(&c, UINT32_MAX) == 0);
			if (at >= 2)
				pycode__line(&c, at - 2);
		}
		pycode__free(&c);
	}
	free(s);
	return 0;
}
#else
/* A valid snapshot, as bpf/python.bpf.h lays one out (tests/unit/test_pysnap.c). */
static uint16_t put_obj(struct pycode_snap *s, struct pysnap_obj *o, uint64_t type, uint64_t len,
			uint32_t state, const void *data, uint16_t bytes, uint16_t off)
{
	o->type = type;
	o->len = len;
	o->state = state;
	o->off = off;
	o->bytes = bytes;
	memcpy(s->data + off, data, bytes);
	return off + bytes;
}

/* A snapshot of a code object whose line table is ltlen bytes (cut as BPF cuts it). */
static int write_seed(const char *path, size_t v, const uint8_t *lt, size_t ltlen)
{
	struct pycode_snap s;
	struct pyinfo info;
	const struct pylayout *l = pyinfo__layout(&info);
	int32_t name_off, firstlineno = 10;
	uint8_t hdr[2] = { (uint8_t)v, 1 };
	uint32_t ascii_state;
	uint16_t off, n;
	uint64_t p;
	FILE *f;

	memset(&info, 0, sizeof(info));
	if (pyoffsets__from_table(versions[v], &info))
		return -EINVAL;
	ascii_state = 1u << l->str_kind_shift | 1u << (l->str_kind_shift + 3) |
		      1u << (l->str_kind_shift + 4);
	name_off = l->co_qualname >= 0 ? l->co_qualname : l->co_name;
	memset(&s, 0, sizeof(s));
	s.code = 0x5000;
	s.code_bytes = (uint16_t)l->co_read;
	memcpy(s.data + l->ob_type, &(uint64_t){ CODE_T }, 8);
	memcpy(s.data + l->co_firstlineno, &firstlineno, 4);
	p = 0x6000;
	memcpy(s.data + name_off, &p, 8);
	p = 0x7000;
	memcpy(s.data + l->co_filename, &p, 8);
	p = 0x8000;
	memcpy(s.data + l->co_linetable, &p, 8);
	off = (uint16_t)l->co_read;
	off = put_obj(&s, &s.name, STR_T, 12, ascii_state, "Outer.method", 12, off);
	off = put_obj(&s, &s.file, STR_T, 15, ascii_state, "/srv/app/mod.py", 15, off);
	n = (uint16_t)(ltlen < PYSNAP_LINES_MAX ? ltlen : PYSNAP_LINES_MAX);
	off = put_obj(&s, &s.lines, BYTES_T, ltlen, 0, lt, n, off);
	f = fopen(path, "wb");
	if (!f || fwrite(hdr, 1, 2, f) != 2 || fwrite(&s, 1, HEAD + off, f) != HEAD + off ||
	    fclose(f))
		return -EIO;
	return 0;
}

int main(int argc, char **argv)
{
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4, 0x80 | 13 << 3, 7, 0xf8,
				       0x80 | 10 << 3 };
	static const uint8_t lnotab[] = { 6, 1, 4, 0xfe, 8, 0x80, 2, 3 };
	static uint8_t longtab[PYSNAP_LINES_MAX + 904];
	const char *dir = argc > 1 ? argv[1] : ".";
	char path[4096];

	for (size_t v = 0; v < NVERSIONS; v++) {
		bool new = versions[v] >= PYVER(3, 11);

		snprintf(path, sizeof(path), "%s/valid-%x", dir, versions[v] >> 16);
		if (write_seed(path, v, new ? loc : lnotab, new ? sizeof(loc) : sizeof(lnotab)))
			return 1;
		/* longer than BPF sends: cut, lines only as far as the cut covers */
		for (size_t i = 0; i < sizeof(longtab); i++)
			longtab[i] = new ? 0x80 | (10 + i % 3) << 3 : (i & 1 ? 1 : 2);
		snprintf(path, sizeof(path), "%s/cut-%x", dir, versions[v] >> 16);
		if (write_seed(path, v, longtab, sizeof(longtab)))
			return 1;
	}
	return 0;
}
#endif
