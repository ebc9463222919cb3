// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Python code objects read live (pycode__read, pystr__read in
 * user/python/pycode.c) and the _Py_DebugOffsets block (pyoffsets__from_debug
 * in user/python/pyoffsets.c). The target is the harness itself: the input
 * is copied to a fixed address, IMG_BASE, and read back with
 * process_vm_readv as a target's memory is, so its pointers (IMG_BASE + n)
 * lead around inside it, and anywhere else is unreadable memory.
 *
 * Input: a mode byte: 0-4 a version with a table layout (3.8-3.12); 5 a
 * _Py_DebugOffsets block (PY_DEBUG_OFFSETS_MAX bytes) follows, decoded
 * into the layout. Then the memory image, a code object at IMG_BASE.
 *
 * Built with -DFUZZ_MKSEED it is instead the program that writes the seed
 * corpus: a valid code object with its type objects, strings and line
 * table per table version (make fuzz-seeds).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "python/pyimpl.h"

/* In x86-64 user space, away from ASan's shadow and allocator regions. */
#define IMG_BASE 0x4a0000000000ULL
#define IMG_MAX	 (64 * 1024)

static const uint32_t versions[] = { PYVER(3, 8) | 0xf0, PYVER(3, 9) | 0xf0, PYVER(3, 10) | 0xf0,
				     PYVER(3, 11) | 0x7f0, PYVER(3, 12) | 0x1f0 };
#define NVERSIONS  (sizeof(versions) / sizeof(versions[0]))
#define MODE_DEBUG NVERSIONS

#ifndef FUZZ_MKSEED
static uint8_t *img;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pyinfo info;
	struct pycode c;
	size_t mode;

	if (!img) {
		img = mmap((void *)IMG_BASE, IMG_MAX, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		fuzz__assert(img == (void *)IMG_BASE);
	}
	if (!size)
		return 0;
	mode = data[0] % (NVERSIONS + 1);
	data++;
	size--;
	memset(&info, 0, sizeof(info));
	if (mode == MODE_DEBUG) {
		if (size < PY_DEBUG_OFFSETS_MAX)
			return 0;
		if (pyoffsets__from_debug(data, PY_DEBUG_OFFSETS_MAX, &info))
			return 0;
		/* a layout BPF and user space will use: offsets inside what is read */
		fuzz__assert(pyinfo__layout(&info)->co_read <= 512);
		data += PY_DEBUG_OFFSETS_MAX;
		size -= PY_DEBUG_OFFSETS_MAX;
	} else if (pyoffsets__from_table(versions[mode], &info)) {
		abort();
	}
	if (size > IMG_MAX)
		size = IMG_MAX;
	memcpy(img, data, size);
	memset(img + size, 0, IMG_MAX - size);

	if (!pycode__read(getpid(), &info, IMG_BASE, &c)) {
		fuzz__assert(c.qualname && c.filename && c.linetable);
		fuzz__assert(c.code_addr == IMG_BASE);
		/* nothing changed under it: still the same object */
		fuzz__assert(pycode__same(getpid(), &info, &c) == 1);
		for (uint32_t off = 0; off < 512; off += 2)
			pycode__line(&c, off);
		for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
			uint64_t raw;

			memcpy(&raw, data + i, 8);
			pycode__instr_offset(&info, IMG_BASE, raw);
		}
		pycode__free(&c);
	}
	return 0;
}
#else
/* A code object with everything it points to, laid out from IMG_BASE. */
enum {
	AT_CODE_T = 0x400,
	AT_STR_T = 0x480,
	AT_BYTES_T = 0x500,
	AT_NAMES = 0x580, /* "code", "str", "bytes" 16 bytes apart */
	AT_QUALNAME = 0x600,
	AT_FILENAME = 0x700,
	AT_LINES = 0x800,
	IMG_SIZE = 0x900,
};

static void put64(uint8_t *m, size_t at, uint64_t v)
{
	memcpy(m + at, &v, 8);
}

static void put_str(uint8_t *m, const struct pylayout *l, size_t at, const char *s)
{
	uint32_t state = 1u << l->str_kind_shift | 1u << (l->str_kind_shift + 3) |
			 1u << (l->str_kind_shift + 4);

	put64(m, at + l->ob_type, IMG_BASE + AT_STR_T);
	put64(m, at + l->str_length, strlen(s));
	memcpy(m + at + l->str_state, &state, 4);
	memcpy(m + at + l->str_ascii_size, s, strlen(s));
}

/* The image of a valid code object for layout info, after the mode byte (and block). */
static int write_seed(const char *path, const uint8_t *head, size_t headlen,
		      const struct pyinfo *info)
{
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4, 0x80 | 13 << 3, 7, 0xf8,
				       0x80 | 10 << 3 };
	static const uint8_t lnotab[] = { 6, 1, 4, 0xfe, 8, 0x80, 2, 3 };
	const struct pylayout *l = pyinfo__layout(info);
	const uint8_t *lt = info->version >= PYVER(3, 11) ? loc : lnotab;
	size_t ltlen = info->version >= PYVER(3, 11) ? sizeof(loc) : sizeof(lnotab);
	static uint8_t img[IMG_SIZE];
	int32_t firstlineno = 10;
	FILE *f;

	memset(img, 0, sizeof(img));
	put64(img, l->ob_type, IMG_BASE + AT_CODE_T);
	memcpy(img + l->co_firstlineno, &firstlineno, 4);
	put64(img, l->co_qualname >= 0 ? l->co_qualname : l->co_name, IMG_BASE + AT_QUALNAME);
	if (l->co_qualname >= 0)
		put64(img, l->co_name, IMG_BASE + AT_QUALNAME);
	put64(img, l->co_filename, IMG_BASE + AT_FILENAME);
	put64(img, l->co_linetable, IMG_BASE + AT_LINES);
	put64(img, AT_CODE_T + l->tp_name, IMG_BASE + AT_NAMES);
	put64(img, AT_STR_T + l->tp_name, IMG_BASE + AT_NAMES + 16);
	put64(img, AT_BYTES_T + l->tp_name, IMG_BASE + AT_NAMES + 32);
	memcpy(img + AT_NAMES, "code", 5);
	memcpy(img + AT_NAMES + 16, "str", 4);
	memcpy(img + AT_NAMES + 32, "bytes", 6);
	put_str(img, l, AT_QUALNAME, "Outer.method");
	put_str(img, l, AT_FILENAME, "/srv/app/mod.py");
	put64(img, AT_LINES + l->ob_type, IMG_BASE + AT_BYTES_T);
	put64(img, AT_LINES + l->bytes_size, ltlen);
	memcpy(img + AT_LINES + l->bytes_sval, lt, ltlen);
	f = fopen(path, "wb");
	if (!f || fwrite(head, 1, headlen, f) != headlen ||
	    fwrite(img, 1, sizeof(img), f) != sizeof(img) || fclose(f))
		return -EIO;
	return 0;
}

/*
 * mkseed_pycode DIR [BLOCK...]: a seed per table version, and one per
 * _Py_DebugOffsets block given (PY_DEBUG_OFFSETS_MAX bytes of a 3.13+
 * libpython's _PyRuntime, as tests/fuzz/mkseeds.sh extracts them).
 */
int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	uint8_t head[1 + PY_DEBUG_OFFSETS_MAX];
	char path[4096];
	struct pyinfo info;

	for (size_t v = 0; v < NVERSIONS; v++) {
		memset(&info, 0, sizeof(info));
		if (pyoffsets__from_table(versions[v], &info))
			return 1;
		head[0] = (uint8_t)v;
		snprintf(path, sizeof(path), "%s/valid-%x", dir, versions[v] >> 16);
		if (write_seed(path, head, 1, &info))
			return 1;
	}
	for (int i = 2; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");

		head[0] = MODE_DEBUG;
		if (!f || fread(head + 1, 1, PY_DEBUG_OFFSETS_MAX, f) != PY_DEBUG_OFFSETS_MAX)
			return 1;
		fclose(f);
		memset(&info, 0, sizeof(info));
		if (pyoffsets__from_debug(head + 1, PY_DEBUG_OFFSETS_MAX, &info))
			return 1;
		snprintf(path, sizeof(path), "%s/valid-debug-%x", dir, info.version >> 16);
		if (write_seed(path, head, sizeof(head), &info))
			return 1;
	}
	return 0;
}
#endif
