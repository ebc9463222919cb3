// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Code object snapshots (SAMPLE_PYCODE, pycode__from_snap): synthetic
 * records laid out as bpf/python.bpf.h lays them out, with each version's
 * layout from pyoffsets. What a valid one decodes to; every field of a
 * damaged one refused; cut line tables answer only what they can; random
 * records never crash. No interpreter, no root.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "python/pyimpl.h"

#define CODE_T	0x7f0000001000ULL
#define STR_T	0x7f0000002000ULL
#define BYTES_T 0x7f0000003000ULL
#define HEAD	offsetof(struct pycode_snap, data)

/* state word of a compact str: kind, compact, ascii (pystr__read's bits) */
static uint32_t str_state(const struct pylayout *l, unsigned kind, bool ascii)
{
	return kind << l->str_kind_shift | 1u << (l->str_kind_shift + 3) |
	       (ascii ? 1u << (l->str_kind_shift + 4) : 0);
}

struct snapbuf {
	struct pycode_snap s;
	size_t len; /* bytes of the record sent */
};

/* Append an object's data as BPF does: returns the next offset. */
static uint16_t put_obj(struct snapbuf *b, struct pysnap_obj *o, uint64_t type, uint64_t len,
			uint32_t state, const void *data, uint16_t bytes, uint16_t off)
{
	o->type = type;
	o->len = len;
	o->state = state;
	o->off = off;
	o->bytes = bytes;
	memcpy(b->s.data + off, data, bytes);
	return off + bytes;
}

/*
 * A valid snapshot of a code object at 0x5000 named name in file, first
 * line firstlineno, line table lt (cut at PYSNAP_LINES_MAX as BPF cuts it).
 */
static void build(struct snapbuf *b, const struct pyinfo *info, const char *name, const char *file,
		  int32_t firstlineno, const uint8_t *lt, size_t ltlen)
{
	const struct pylayout *l = pyinfo__layout(info);
	int32_t name_off = l->co_qualname >= 0 ? l->co_qualname : l->co_name;
	uint16_t off = (uint16_t)l->co_read, n;
	uint64_t v;

	memset(b, 0, sizeof(*b));
	b->s.code = 0x5000;
	b->s.code_bytes = (uint16_t)l->co_read;
	memcpy(b->s.data + l->ob_type, &(uint64_t){ CODE_T }, 8);
	memcpy(b->s.data + l->co_firstlineno, &firstlineno, 4);
	v = 0x6000;
	memcpy(b->s.data + name_off, &v, 8);
	v = 0x7000;
	memcpy(b->s.data + l->co_filename, &v, 8);
	v = 0x8000;
	memcpy(b->s.data + l->co_linetable, &v, 8);
	off = put_obj(b, &b->s.name, STR_T, strlen(name), str_state(l, 1, true), name,
		      (uint16_t)strlen(name), off);
	off = put_obj(b, &b->s.file, STR_T, strlen(file), str_state(l, 1, true), file,
		      (uint16_t)strlen(file), off);
	n = (uint16_t)(ltlen < PYSNAP_LINES_MAX ? ltlen : PYSNAP_LINES_MAX);
	off = put_obj(b, &b->s.lines, BYTES_T, ltlen, 0, lt, n, off);
	b->len = HEAD + off;
}

static void layout(uint32_t version, struct pyinfo *info)
{
	memset(info, 0, sizeof(*info));
	assert_int_equal(pyoffsets__from_table(version, info), 0);
}

static void test_offsets_for_bpf(void **state)
{
	static const uint32_t versions[] = { PYVER(3, 8) | 0xf0, PYVER(3, 9) | 0xf0,
					     PYVER(3, 10) | 0xf0, PYVER(3, 11) | 0x7f0,
					     PYVER(3, 12) | 0x1f0 };
	struct pyinfo info;

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		const struct pylayout *l = pyinfo__layout(&info);

		layout(versions[i], &info);
		/* what BPF copies is what pycode__read reads and from_snap wants */
		assert_int_equal(info.bpf.code_read, l->co_read);
		assert_true(info.bpf.code_read <= PYSNAP_CODE_MAX);
		assert_int_equal(info.bpf.co_name,
				 l->co_qualname >= 0 ? l->co_qualname : l->co_name);
		assert_int_equal(info.bpf.co_filename, l->co_filename);
		assert_int_equal(info.bpf.co_linetable, l->co_linetable);
		assert_int_equal(info.bpf.str_ascii_size, l->str_ascii_size);
		assert_int_equal(info.bpf.str_compact_size, l->str_compact_size);
		assert_int_equal(info.bpf.bytes_sval, l->bytes_sval);
		assert_int_equal(info.bpf.str_kind_shift, l->str_kind_shift);
	}
}

static void test_valid(void **state)
{
	/* 3.11 locations: 2 units +1 line (code 11), 1 unit no-columns -3 */
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4, 0x80 | 13 << 3, 7 };
	static const uint8_t lnotab[] = { 6, 1, 4, 0xfe };
	struct pyinfo info;
	struct snapbuf b;
	struct pycode c;

	(void)state;
	layout(PYVER(3, 11) | 0x7f0, &info);
	build(&b, &info, "Outer.method", "/srv/app/mod.py", 10, loc, sizeof(loc));
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), 0);
	assert_string_equal(c.qualname, "Outer.method");
	assert_string_equal(c.filename, "/srv/app/mod.py");
	assert_int_equal(c.firstlineno, 10);
	assert_int_equal(c.code_addr, 0x5000);
	assert_false(c.linetable_cut);
	assert_int_equal(pycode__line(&c, 0), 11);
	assert_int_equal(pycode__line(&c, 4), 8);
	/* identity as a live read computes it: pycode__same can compare them */
	assert_int_equal(c.ident[0], CODE_T);
	assert_int_equal(c.ident[3], 0x6000);
	pycode__free(&c);
	/* the code type, once known, must match */
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, CODE_T, &c), 0);
	pycode__free(&c);
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, CODE_T + 8, &c), -EINVAL);

	layout(PYVER(3, 9) | 0xf0, &info);
	build(&b, &info, "f", "x.py", 3, lnotab, sizeof(lnotab));
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), 0);
	assert_string_equal(c.qualname, "f");
	assert_int_equal(pycode__line(&c, 6), 4);
	assert_int_equal(pycode__line(&c, 10), 2);
	pycode__free(&c);
}

static void test_string_kinds(void **state)
{
	const struct pylayout *l;
	struct pyinfo info;
	struct snapbuf b;
	struct pycode c;
	uint8_t latin1[] = { 'c', 0xe9 };   /* "cé" */
	uint16_t ucs2[] = { 0x3b1, 0x3b2 }; /* "αβ" */
	char longname[400];
	uint16_t off;

	(void)state;
	layout(PYVER(3, 12) | 0x1f0, &info);
	l = pyinfo__layout(&info);
	build(&b, &info, "x", "f.py", 1, (const uint8_t *)"", 0);
	off = (uint16_t)l->co_read;
	off = put_obj(&b, &b.s.name, STR_T, 2, str_state(l, 1, false), latin1, 2, off);
	off = put_obj(&b, &b.s.file, STR_T, 2, str_state(l, 2, false), ucs2, 4, off);
	off = put_obj(&b, &b.s.lines, BYTES_T, 0, 0, "", 0, off);
	b.len = HEAD + off;
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), 0);
	assert_string_equal(c.qualname, "c\xc3\xa9");
	assert_string_equal(c.filename, "\xce\xb1\xce\xb2");
	pycode__free(&c);

	/* a kind-2 string whose code points all fit kind 1 breaks CPython's invariant */
	ucs2[0] = 'a';
	ucs2[1] = 'b';
	put_obj(&b, &b.s.file, STR_T, 2, str_state(l, 2, false), ucs2, 4, b.s.file.off);
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), -EINVAL);

	/* a name longer than BPF sends: cut at PYSNAP_NAME_MAX, still named */
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	build(&b, &info, "x", "f.py", 1, (const uint8_t *)"", 0);
	off = (uint16_t)l->co_read;
	off = put_obj(&b, &b.s.name, STR_T, sizeof(longname) - 1, str_state(l, 1, true), longname,
		      PYSNAP_NAME_MAX, off);
	off = put_obj(&b, &b.s.file, STR_T, 4, str_state(l, 1, true), "f.py", 4, off);
	off = put_obj(&b, &b.s.lines, BYTES_T, 0, 0, "", 0, off);
	b.len = HEAD + off;
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), 0);
	assert_int_equal(strlen(c.qualname), PYSNAP_NAME_MAX);
	pycode__free(&c);
	/* ... but not with fewer bytes than BPF would have sent */
	b.s.name.bytes = 100;
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), -EINVAL);
}

/* Each damage alone makes a valid snapshot refused. */
/*
 * A code object laid out in this process's memory as CPython lays it out
 * (types proven by tp_name), read as a live object is: process_vm_readv on
 * ourselves. The object is then "freed and made again" in place: every
 * pointer the same, only the name's text or the line table's length
 * differs, as when a loop makes code objects with code.replace or exec.
 */
struct fake_mem {
	uint8_t code[512], code_t[256], str_t[256], bytes_t[256];
	uint8_t name[128], file[128], lines[128];
};

static void put_u64(uint8_t *p, int32_t off, uint64_t v)
{
	memcpy(p + off, &v, 8);
}

static void fake_str(const struct pylayout *l, struct fake_mem *m, uint8_t *obj, const char *s)
{
	uint32_t state = str_state(l, 1, true);

	put_u64(obj, l->ob_type, (uintptr_t)m->str_t);
	put_u64(obj, l->str_length, strlen(s));
	memcpy(obj + l->str_state, &state, 4);
	memcpy(obj + l->str_ascii_size, s, strlen(s));
}

static void test_same_after_reuse(void **state)
{
	/* the table's layouts; 3.13+ come from the interpreter's debug offsets (test_python) */
	static const uint32_t versions[] = { PYVER(3, 8) | 0xf0, PYVER(3, 9) | 0xf0,
					     PYVER(3, 10) | 0xf0, PYVER(3, 11) | 0x7f0,
					     PYVER(3, 12) | 0x1f0 };
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4 };

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		struct fake_mem *m = calloc(1, sizeof(*m));
		const struct pylayout *l;
		struct pyinfo info;
		struct pycode c, again;
		int32_t first = 10;

		assert_non_null(m);
		layout(versions[i], &info);
		l = pyinfo__layout(&info);
		assert_true(l->co_read <= sizeof(m->code));
		put_u64(m->code_t, l->tp_name, (uintptr_t) "code");
		put_u64(m->str_t, l->tp_name, (uintptr_t) "str");
		put_u64(m->bytes_t, l->tp_name, (uintptr_t) "bytes");
		put_u64(m->code, l->ob_type, (uintptr_t)m->code_t);
		put_u64(m->code, l->co_qualname >= 0 ? l->co_qualname : l->co_name,
			(uintptr_t)m->name);
		put_u64(m->code, l->co_filename, (uintptr_t)m->file);
		put_u64(m->code, l->co_linetable, (uintptr_t)m->lines);
		memcpy(m->code + l->co_firstlineno, &first, 4);
		fake_str(l, m, m->name, "f12");
		fake_str(l, m, m->file, "gen.py");
		put_u64(m->lines, l->ob_type, (uintptr_t)m->bytes_t);
		put_u64(m->lines, l->bytes_size, sizeof(loc));
		memcpy(m->lines + l->bytes_sval, loc, sizeof(loc));

		assert_int_equal(pycode__read(getpid(), &info, (uintptr_t)m->code, &c), 0);
		assert_string_equal(c.qualname, "f12");
		assert_int_equal(pycode__same(getpid(), &info, &c), 1);

		/* another name in the same str: another object (the pointers alone said same) */
		fake_str(l, m, m->name, "f13");
		assert_int_equal(pycode__same(getpid(), &info, &c), 0);
		assert_int_equal(pycode__read(getpid(), &info, (uintptr_t)m->code, &again), 0);
		assert_false(pycode__same_object(&c, &again));
		pycode__free(&again);
		/* a longer name whose first characters are the old one's */
		fake_str(l, m, m->name, "f123");
		assert_int_equal(pycode__same(getpid(), &info, &c), 0);
		fake_str(l, m, m->name, "f12");
		m->name[l->str_ascii_size + 3] = 0;
		assert_int_equal(pycode__same(getpid(), &info, &c), 1);

		/* a line table of another length in the same bytes object */
		put_u64(m->lines, l->bytes_size, sizeof(loc) - 1);
		assert_int_equal(pycode__same(getpid(), &info, &c), 0);
		put_u64(m->lines, l->bytes_size, sizeof(loc));
		assert_int_equal(pycode__same(getpid(), &info, &c), 1);

		/* a snapshot of the same object is the same object */
		{
			struct snapbuf b;
			struct pycode sc;

			build(&b, &info, "f12", "gen.py", first, loc, sizeof(loc));
			memcpy(b.s.data, m->code, l->co_read);
			assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &sc), 0);
			assert_true(pycode__same_object(&sc, &c));
			pycode__free(&sc);
			build(&b, &info, "f13", "gen.py", first, loc, sizeof(loc));
			memcpy(b.s.data, m->code, l->co_read);
			assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &sc), 0);
			assert_false(pycode__same_object(&sc, &c));
			pycode__free(&sc);
		}
		pycode__free(&c);
		free(m);
	}
}

static void test_garbage(void **state)
{
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4, 0x80 | 13 << 3, 7 };
	const struct pylayout *l;
	struct pyinfo info;
	struct snapbuf b, good;
	struct pycode c;
	int32_t v;

	(void)state;
	layout(PYVER(3, 11) | 0x7f0, &info);
	l = pyinfo__layout(&info);
	build(&good, &info, "f", "m.py", 5, loc, sizeof(loc));
	assert_int_equal(pycode__from_snap(&info, &good.s, good.len, 0, &c), 0);
	pycode__free(&c);

#define REFUSED(damage)                                                                  \
	do {                                                                             \
		b = good;                                                                \
		damage;                                                                  \
		assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), -EINVAL); \
		assert_null(c.qualname);                                                 \
	} while (0)

	/* the record's own size */
	REFUSED(b.len = HEAD - 1);
	REFUSED(b.len = sizeof(b.s) + 1);
	REFUSED(b.len = good.len - 1); /* the line table's last byte missing */
	REFUSED(b.len = HEAD + l->co_read - 1);
	/* the header */
	REFUSED(b.s.code_bytes = l->co_read - 8);
	REFUSED(b.s.code_bytes = PYSNAP_CODE_MAX + 8);
	REFUSED(v = -1; memcpy(b.s.data + l->co_firstlineno, &v, 4));
	REFUSED(v = 200000000; memcpy(b.s.data + l->co_firstlineno, &v, 4));
	/* types: two str of one type, a bytes of another */
	REFUSED(b.s.file.type = STR_T + 8);
	REFUSED(b.s.name.type = 0; b.s.file.type = 0);
	REFUSED(b.s.lines.type = STR_T);
	REFUSED(b.s.lines.type = 0);
	REFUSED(b.s.lines.state = 1);
	/* strings: lengths, kinds, compactness, bytes sent */
	REFUSED(b.s.name.len = (uint64_t)-1);
	REFUSED(b.s.name.len = 1ULL << 40);
	REFUSED(b.s.name.len = 2);   /* 1 code point sent of 2 that fit */
	REFUSED(b.s.name.bytes = 0); /* BPF could not read it */
	REFUSED(b.s.name.off = 60000);
	REFUSED(b.s.file.off = (uint16_t)(good.len - HEAD));
	REFUSED(b.s.name.state = str_state(l, 1, true) & ~(1u << (l->str_kind_shift + 3)));
	REFUSED(b.s.name.state = str_state(l, 2, true));
	REFUSED(b.s.name.state = str_state(l, 3, false));
	REFUSED(b.s.name.state = str_state(l, 0, false));
	REFUSED(b.s.name.state =
			str_state(l, 1, false)); /* kind 1, all < 0x80: not compact ASCII */
	REFUSED(b.s.data[b.s.name.off] = 0x80);	 /* ASCII with a byte >= 0x80 */
	/* the line table */
	REFUSED(b.s.lines.len = (uint64_t)-5);
	REFUSED(b.s.lines.len = 1ULL << 30);
	REFUSED(b.s.lines.len = sizeof(loc) + 1);
	REFUSED(b.s.lines.bytes = sizeof(loc) + 1000);
	/* a code type known from live reads */
	b = good;
	assert_int_equal(pycode__from_snap(&info, &b.s, b.len, STR_T, &c), -EINVAL);
	/* no layout */
	memset(&info, 0, sizeof(info));
	assert_int_equal(pycode__from_snap(&info, &good.s, good.len, 0, &c), -EINVAL);
#undef REFUSED
}

/* A line table longer than BPF sends: exact below what it covers, unknown beyond. */
static void test_cut_line_table(void **state)
{
	static const uint32_t versions[] = { PYVER(3, 9) | 0xf0, PYVER(3, 10) | 0xf0,
					     PYVER(3, 11) | 0x7f0 };
	enum {
		N = 6000
	};
	uint8_t *lt = malloc(N);
	struct pyinfo info;
	struct snapbuf b;
	struct pycode c, whole;
	size_t i;

	(void)state;
	assert_non_null(lt);
	for (size_t vi = 0; vi < 3; vi++) {
		uint32_t ver = versions[vi], agree = 0, unknown = 0;

		layout(ver, &info);
		for (i = 0; i < N; i++) {
			if (ver < PYVER(3, 11)) /* (2 bytes, +1 or -1 line) pairs */
				lt[i] = i & 1 ? (i % 6 == 1 ? 0xff : 1) : 2;
			else /* 1-unit one-line +1 entries, some long (+varint, 3 more) */
				lt[i] = i % 7 < 2 ? 0x80 | 11 << 3
						  : (i % 7 == 2 ? 0x80 | 14 << 3
								: (i % 7 == 3 ? 2 : 1));
		}
		build(&b, &info, "big", "big.py", 100, lt, N);
		assert_int_equal(b.s.lines.bytes, PYSNAP_LINES_MAX);
		assert_int_equal(pycode__from_snap(&info, &b.s, b.len, 0, &c), 0);
		assert_true(c.linetable_cut);
		assert_true(c.linetable_covers > 0);
		whole = c;
		whole.linetable = lt;
		whole.linetable_len = N;
		whole.linetable_cut = false;
		for (uint32_t off = 0; off < 2 * N; off += 2) {
			uint32_t got = pycode__line(&c, off);

			if (off < c.linetable_covers) {
				assert_int_equal(got, pycode__line(&whole, off));
				agree++;
			} else {
				assert_int_equal(got, 0);
				unknown++;
			}
		}
		assert_true(agree > 100 && unknown > 100);
		pycode__free(&c);
	}
	free(lt);
}

static void test_covered(void **state)
{
	/* lnotab pairs: the last, incomplete pair does not count */
	static const uint8_t lnotab[] = { 6, 1, 4, 2, 9 };
	/* locations: 2 units, 1 unit, then an entry that may be cut */
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0x80 | 13 << 3, 7, 0x80 | 14 << 3,
				       0x40 };

	(void)state;
	assert_int_equal(pyline__covered(PYVER(3, 9), lnotab, sizeof(lnotab)), 10);
	assert_int_equal(pyline__covered(PYVER(3, 10), lnotab, 4), 10);
	assert_int_equal(pyline__covered(PYVER(3, 11), loc, sizeof(loc)), 6);
	assert_int_equal(pyline__covered(PYVER(3, 11), loc, 3), 4); /* 2nd not known whole */
	assert_int_equal(pyline__covered(PYVER(3, 11), loc, 0), 0);
	assert_int_equal(pyline__covered(PYVER(3, 11), (const uint8_t *)"\x01\x02", 2), 0);
}

/* Random damage to a valid record: refused or decoded, never a crash (ASan). */
static void test_fuzz(void **state)
{
	static const uint8_t loc[] = { 0x80 | 11 << 3 | 1, 0, 4, 0x80 | 13 << 3, 7 };
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	struct pyinfo info;
	struct snapbuf good, b;
	struct pycode c;
	unsigned ok = 0;

	(void)state;
	layout(PYVER(3, 11) | 0x7f0, &info);
	build(&good, &info, "f", "m.py", 5, loc, sizeof(loc));
	for (int round = 0; round < 20000; round++) {
		uint8_t *p = (uint8_t *)&b.s;
		size_t span = HEAD + 600;

		b = good;
		for (int k = 0; k < 1 + round % 4; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[(x >> 8) % span] = (uint8_t)x;
		}
		if (round % 5 == 0)
			b.len = (x >> 20) % sizeof(b.s);
		if (!pycode__from_snap(&info, &b.s, b.len, 0, &c)) {
			ok++;
			assert_non_null(c.qualname);
			(void)pycode__line(&c, (uint32_t)(x >> 40) & 0xfffe);
			pycode__free(&c);
		}
	}
	assert_true(ok > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offsets_for_bpf), cmocka_unit_test(test_valid),
		cmocka_unit_test(test_string_kinds),	cmocka_unit_test(test_same_after_reuse),
		cmocka_unit_test(test_garbage),		cmocka_unit_test(test_cut_line_table),
		cmocka_unit_test(test_covered),		cmocka_unit_test(test_fuzz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
