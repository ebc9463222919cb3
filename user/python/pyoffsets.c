// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where CPython keeps things, per version.
 *
 * 3.8-3.12 have no self-description: the table below holds the offsets of
 * the x86-64 (LP64) release builds, taken from each version's headers
 * (Include/cpython/pystate.h, Include/cpython/code.h, frameobject.h,
 * pycore_frame.h, pycore_interp.h, pycore_runtime.h, unicodeobject.h) and
 * checked with gdb against the pyenv builds 3.8.18, 3.9.18, 3.10.13,
 * 3.11.7 and 3.12.1, e.g.
 *   gdb -batch -ex 'p &((PyThreadState *)0)->cframe' libpython3.11.so
 * tests/unit/test_python.c checks them against live interpreters, including
 * Debian's /usr/bin/python3.11 (3.11.2): every field used here is walked or
 * decoded there. CPython keeps these layouts within a minor version.
 *
 * 3.13+ describe themselves: _PyRuntime starts with _Py_DebugOffsets. The
 * block's own layout changes from one minor version to the next (3.14
 * inserts fields in the middle of it), so each minor version we know has a
 * row here naming where its fields sit; values read from it are checked to
 * be offsets inside the struct sizes the block also gives.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "python/pyimpl.h"

struct table_row {
	uint32_t version; /* major.minor */
	struct bpf_pyproc bpf;
	struct pylayout l;
};

/* Fields that every row shares: PyObject_HEAD, PyBytesObject, unicode state. */
#define COMMON_OBJ                                                                         \
	.ob_type = 8, .tp_name = 24, .bytes_size = 16, .bytes_sval = 32, .str_length = 16, \
	.str_state = 32, .str_kind_shift = 2, .ts_next = 8, .ts_interp = 16, .is_next = 0

/*
 * What thread names need (pythreads.c) and every version shares: PyModuleObject,
 * PyTypeObject, PyDictObject, PyLongObject. gdb on each pyenv build, e.g.
 *   gdb -batch -ex 'p &((PyHeapTypeObject *)0)->ht_cached_keys' libpython3.12.so
 */
#define NAMES_OBJ                                                                                  \
	.md_dict = 16, .tp_basicsize = 32, .tp_flags = 168, .tp_dictoffset = 288, .dict_keys = 32, \
	.dict_values = 40, .long_size = 16, .long_digits = 24
#define NAMES_38_310                                                          \
	NAMES_OBJ, .keys_fmt = PY_KEYS_SIZE, .inst_dict = PY_INST_DICTOFFSET, \
		   .long_fmt = PY_LONG_SIZE

static const struct table_row table[] = {
	{
		.version = PYVER(3, 8),
		.bpf = { .model = PY_MODEL_FRAMEOBJ,
			 .tstate_frame = 24,
			 .cframe_current = -1,
			 .frame_code = 32,
			 .frame_back = 24,
			 .frame_instr = 104,
			 .frame_globals = 48,
			 .frame_owner = -1,
			 .frame_is_entry = -1 },
		.l = { COMMON_OBJ, .rt_interp_head = 32, .is_threads_head = 8, .ts_thread_id = 176,
		       .ts_native_id = -1, .co_filename = 104, .co_name = 112, .co_qualname = -1,
		       .co_linetable = 120, .co_firstlineno = 40, .co_argcount = 16,
		       .co_varnames = 72, .co_code_adaptive = -1, .str_ascii_size = 48,
		       .str_compact_size = 72, .instr = PY_INSTR_LASTI_BYTES, .is_modules = 0x38,
		       .ht_cached_keys = 0x368, NAMES_38_310 },
	},
	{
		.version = PYVER(3, 9),
		.bpf = { .model = PY_MODEL_FRAMEOBJ,
			 .tstate_frame = 24,
			 .cframe_current = -1,
			 .frame_code = 32,
			 .frame_back = 24,
			 .frame_instr = 104,
			 .frame_globals = 48,
			 .frame_owner = -1,
			 .frame_is_entry = -1 },
		.l = { COMMON_OBJ, .rt_interp_head = 32, .is_threads_head = 8, .ts_thread_id = 176,
		       .ts_native_id = -1, .co_filename = 104, .co_name = 112, .co_qualname = -1,
		       .co_linetable = 120, .co_firstlineno = 40, .co_argcount = 16,
		       .co_varnames = 72, .co_code_adaptive = -1, .str_ascii_size = 48,
		       .str_compact_size = 72, .instr = PY_INSTR_LASTI_BYTES, .is_modules = 0x358,
		       .ht_cached_keys = 0x360, NAMES_38_310 },
	},
	{
		/* f_lasti moved (f_valuestack went) and now counts code units. */
		.version = PYVER(3, 10),
		.bpf = { .model = PY_MODEL_FRAMEOBJ,
			 .tstate_frame = 24,
			 .cframe_current = -1,
			 .frame_code = 32,
			 .frame_back = 24,
			 .frame_instr = 96,
			 .frame_globals = 48,
			 .frame_owner = -1,
			 .frame_is_entry = -1 },
		.l = { COMMON_OBJ, .rt_interp_head = 32, .is_threads_head = 8, .ts_thread_id = 176,
		       .ts_native_id = -1, .co_filename = 104, .co_name = 112, .co_qualname = -1,
		       .co_linetable = 120, .co_firstlineno = 40, .co_argcount = 16,
		       .co_varnames = 72, .co_code_adaptive = -1, .str_ascii_size = 48,
		       .str_compact_size = 72, .instr = PY_INSTR_LASTI_UNITS, .is_modules = 0x358,
		       .ht_cached_keys = 0x368, NAMES_38_310 },
	},
	{
		/*
		 * _PyInterpreterFrame also has owner (69) but no C-stack shim:
		 * is_entry marks the first frame of an eval call.
		 */
		.version = PYVER(3, 11),
		.bpf = { .model = PY_MODEL_CFRAME,
			 .tstate_frame = 56,
			 .cframe_current = 8,
			 .frame_code = 32,
			 .frame_back = 48,
			 .frame_instr = 56,
			 .frame_globals = 8,
			 .frame_owner = -1,
			 .frame_is_entry = 68 },
		.l = { COMMON_OBJ,
		       .rt_interp_head = 40,
		       .is_threads_head = 16,
		       .ts_thread_id = 152,
		       .ts_native_id = 160,
		       .co_filename = 112,
		       .co_name = 120,
		       .co_qualname = 128,
		       .co_linetable = 136,
		       .co_firstlineno = 72,
		       .co_argcount = 56,
		       .co_varnames = 96,
		       .co_code_adaptive = 184,
		       .str_ascii_size = 48,
		       .str_compact_size = 72,
		       .instr = PY_INSTR_PREV,
		       .is_modules = 0x378,
		       .ht_cached_keys = 0x368,
		       NAMES_OBJ,
		       .keys_fmt = PY_KEYS_LOG2,
		       .inst_dict = PY_INST_311,
		       .long_fmt = PY_LONG_SIZE },
	},
	{
		/* PyASCIIObject lost wstr; FRAME_OWNED_BY_CSTACK == 3. */
		.version = PYVER(3, 12),
		.bpf = { .model = PY_MODEL_CFRAME,
			 .tstate_frame = 56,
			 .cframe_current = 0,
			 .frame_code = 0,
			 .frame_back = 8,
			 .frame_instr = 56,
			 .frame_globals = 24,
			 .frame_owner = 70,
			 .frame_is_entry = -1,
			 .owner_cstack = 3 },
		.l = { COMMON_OBJ,
		       .rt_interp_head = 40,
		       .is_threads_head = 72,
		       .ts_thread_id = 136,
		       .ts_native_id = 144,
		       .co_filename = 112,
		       .co_name = 120,
		       .co_qualname = 128,
		       .co_linetable = 136,
		       .co_firstlineno = 68,
		       .co_argcount = 52,
		       .co_varnames = 96,
		       .co_code_adaptive = 192,
		       .str_ascii_size = 40,
		       .str_compact_size = 56,
		       .instr = PY_INSTR_PREV,
		       .is_modules = 0x3b0,
		       .ht_cached_keys = 0x370,
		       NAMES_OBJ,
		       .keys_fmt = PY_KEYS_LOG2,
		       .inst_dict = PY_INST_312,
		       .long_fmt = PY_LONG_TAG },
	},
};

static uint32_t code_read_size(const struct pylayout *l)
{
	int32_t f[] = { l->ob_type,	 l->co_filename,    l->co_name,	    l->co_qualname,
			l->co_linetable, l->co_firstlineno, l->co_argcount, l->co_varnames };
	int32_t max = 0;
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i] > max)
			max = f[i];
	return (uint32_t)max + 8;
}

/*
 * What BPF needs to snapshot code objects (SAMPLE_PYCODE), from the layout;
 * code_read stays 0 (no snapshots) where a header would not fit its buffers.
 */
static void snap_offsets(struct pyinfo *info)
{
	const struct pylayout *l = pyinfo__layout(info);
	struct bpf_pyproc *b = &info->bpf;
	int32_t name = l->co_qualname >= 0 ? l->co_qualname : l->co_name;

	b->code_read = 0;
	if (l->co_read < 8 || l->co_read > PYSNAP_CODE_MAX || name < 0 || l->co_filename < 0 ||
	    l->co_linetable < 0 || l->str_ascii_size < 16 || l->str_ascii_size > 64 ||
	    l->str_compact_size > 128 || l->bytes_sval < 16 || l->bytes_sval > 64)
		return;
	b->co_name = (int16_t)name;
	b->co_filename = (int16_t)l->co_filename;
	b->co_linetable = (int16_t)l->co_linetable;
	b->ob_type = (int16_t)l->ob_type;
	b->str_length = (int16_t)l->str_length;
	b->str_state = (int16_t)l->str_state;
	b->str_ascii_size = (uint16_t)l->str_ascii_size;
	b->str_compact_size = (uint16_t)l->str_compact_size;
	b->str_kind_shift = l->str_kind_shift;
	b->bytes_size = (int16_t)l->bytes_size;
	b->bytes_sval = (uint16_t)l->bytes_sval;
	b->code_read = (uint16_t)l->co_read;
}

int pyoffsets__from_table(uint32_t version, struct pyinfo *info)
{
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		struct pylayout *l;

		if (table[i].version != PYVER_MINOR(version))
			continue;
		info->version = version;
		info->bpf = table[i].bpf;
		info->bpf.version = version;
		l = pyinfo__layout_mut(info);
		*l = table[i].l;
		l->co_read = code_read_size(l);
		info->code_adaptive = l->co_code_adaptive < 0 ? 0 : (uint32_t)l->co_code_adaptive;
		snap_offsets(info);
		return 0;
	}
	return -ENOTSUP;
}

/*
 * _Py_DebugOffsets, field by field, as 64-bit words: index of each field we
 * use, per layout of the block. Groups start with the size of the struct
 * they describe; a field is valid when it lies inside that size.
 */
struct dbg_layout {
	uint32_t version; /* major.minor */
	uint8_t words;	  /* the block is at least this long */
	uint8_t rt_size, rt_interp_head;
	uint8_t is_size, is_next, is_threads_head;
	uint8_t ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_id;
	uint8_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
	uint8_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
		co_argcount, co_localsplusnames, co_code_adaptive;
	uint8_t ob_size, ob_type;
	uint8_t tp_size, tp_name;
	uint8_t by_size, by_ob_size, by_sval;
	uint8_t un_size, un_state, un_length, un_ascii_size;
	uint8_t owner_first_shim; /* lowest frame owner that is not a Python frame */
	uint8_t stackref;	  /* f_executable is a tagged _PyStackRef */
	/* thread names; is_modules 0: not known for this layout */
	uint8_t is_modules, tp_flags;
	uint8_t di_size, di_keys, di_values;
	uint8_t lo_size, lo_tag, lo_digit;
	const struct pylayout *names; /* what the block does not give */
};

/*
 * 3.13 thread names: what _Py_DebugOffsets does not give, from the v3.13.0
 * headers (Include/cpython/object.h PyHeapTypeObject, Include/internal/
 * pycore_dict.h, pycore_object.h _PyObject_InlineValues), checked with gdb
 * on pyenv's 3.13.0 like the table above.
 */
static const struct pylayout names_313 = {
	.md_dict = 16,
	.tp_basicsize = 32,
	.tp_dictoffset = 288,
	.ht_cached_keys = 0x370,
	.keys_fmt = PY_KEYS_LOG2,
	.inst_dict = PY_INST_313,
	.long_fmt = PY_LONG_TAG,
	.values_off = 8,
};

/* The header (cookie, version, free_threaded) is words 0-2 in every layout. */
#define DBG_VERSION	  1
#define DBG_FREE_THREADED 2

static const struct dbg_layout dbg_layouts[] = {
	{
		/* Include/internal/pycore_runtime.h, v3.13.0; FRAME_OWNED_BY_CSTACK 3 */
		.version = PYVER(3, 13),
		.words = 73,
		.rt_size = 3,
		.rt_interp_head = 5,
		.is_size = 6,
		.is_next = 8,
		.is_threads_head = 9,
		.ts_size = 19,
		.ts_next = 21,
		.ts_interp = 22,
		.ts_current_frame = 23,
		.ts_thread_id = 24,
		.ts_native_id = 25,
		.fr_size = 28,
		.fr_previous = 29,
		.fr_executable = 30,
		.fr_instr_ptr = 31,
		.fr_owner = 33,
		.co_size = 34,
		.co_filename = 35,
		.co_name = 36,
		.co_qualname = 37,
		.co_linetable = 38,
		.co_firstlineno = 39,
		.co_argcount = 40,
		.co_localsplusnames = 41,
		.co_code_adaptive = 43,
		.ob_size = 44,
		.ob_type = 45,
		.tp_size = 46,
		.tp_name = 47,
		.by_size = 64,
		.by_ob_size = 65,
		.by_sval = 66,
		.un_size = 67,
		.un_state = 68,
		.un_length = 69,
		.un_ascii_size = 70,
		.owner_first_shim = 3,
		.is_modules = 11,
		.tp_flags = 49,
		.di_size = 56,
		.di_keys = 57,
		.di_values = 58,
		.lo_size = 61,
		.lo_tag = 62,
		.lo_digit = 63,
		.names = &names_313,
	},
	{
		/*
		 * Include/internal/pycore_debug_offsets.h, v3.14: interpreter_state
		 * gains threads_main, code_object_generation, tlbc_generation;
		 * interpreter_frame stackpointer, tlbc_index; code_object co_tlbc;
		 * set_object is new. Frames owned by the interpreter (3) and by
		 * the C stack (4) are both shims. Not run here: no 3.14 on the
		 * test machine; the value checks below refuse a block that does
		 * not fit.
		 */
		.version = PYVER(3, 14),
		.words = 81,
		.rt_size = 3,
		.rt_interp_head = 5,
		.is_size = 6,
		.is_next = 8,
		.is_threads_head = 9,
		.ts_size = 22,
		.ts_next = 24,
		.ts_interp = 25,
		.ts_current_frame = 26,
		.ts_thread_id = 27,
		.ts_native_id = 28,
		.fr_size = 31,
		.fr_previous = 32,
		.fr_executable = 33,
		.fr_instr_ptr = 34,
		.fr_owner = 36,
		.co_size = 39,
		.co_filename = 40,
		.co_name = 41,
		.co_qualname = 42,
		.co_linetable = 43,
		.co_firstlineno = 44,
		.co_argcount = 45,
		.co_localsplusnames = 46,
		.co_code_adaptive = 48,
		.ob_size = 50,
		.ob_type = 51,
		.tp_size = 52,
		.tp_name = 53,
		.by_size = 74,
		.by_ob_size = 75,
		.by_sval = 76,
		.un_size = 77,
		.un_state = 78,
		.un_length = 79,
		.un_ascii_size = 80,
		.owner_first_shim = 3,
		.stackref = 1,
	},
};

/* Structs bigger than this are not CPython's (PyInterpreterState is ~200 KiB). */
#define DBG_MAX_STRUCT (16u << 20)

static uint64_t word(const void *buf, unsigned idx)
{
	uint64_t v;

	memcpy(&v, (const char *)buf + 8 * (size_t)idx, sizeof(v));
	return v;
}

/* Offset of a field of width w inside a struct of the given size, or -EINVAL. */
static int field(const void *buf, unsigned size_idx, unsigned idx, unsigned w, int32_t *out)
{
	uint64_t size = word(buf, size_idx), off = word(buf, idx);

	if (size == 0 || size > DBG_MAX_STRUCT || off + w > size)
		return -EINVAL;
	*out = (int32_t)off;
	return 0;
}

/*
 * Thread names (3.13): the offsets the block gives, checked like the others,
 * and the rest from d->names. Free-threaded builds have other object
 * headers and 3.14 other dicts and frames: no names there (yet).
 */
static int debug_names(const void *buf, const struct dbg_layout *d, struct pylayout *l)
{
	const struct pylayout *n = d->names;
	int32_t modules, flags, keys, values, tag, digit;
	int err = 0;

	err = err ?: field(buf, d->is_size, d->is_modules, 8, &modules);
	err = err ?: field(buf, d->tp_size, d->tp_flags, 8, &flags);
	err = err ?: field(buf, d->di_size, d->di_keys, 8, &keys);
	err = err ?: field(buf, d->di_size, d->di_values, 8, &values);
	err = err ?: field(buf, d->lo_size, d->lo_tag, 8, &tag);
	err = err ?: field(buf, d->lo_size, d->lo_digit, 4, &digit);
	if (err)
		return err;
	l->is_modules = modules;
	l->tp_flags = flags;
	l->dict_keys = keys;
	l->dict_values = values;
	l->long_size = tag;
	l->long_digits = digit;
	l->md_dict = n->md_dict;
	l->tp_basicsize = n->tp_basicsize;
	l->tp_dictoffset = n->tp_dictoffset;
	l->ht_cached_keys = n->ht_cached_keys;
	l->keys_fmt = n->keys_fmt;
	l->inst_dict = n->inst_dict;
	l->long_fmt = n->long_fmt;
	l->values_off = n->values_off;
	return 0;
}

int pyoffsets__from_debug(const void *buf, size_t len, struct pyinfo *info)
{
	const struct dbg_layout *d = NULL;
	struct pylayout l = { .ts_thread_id = -1, .is_modules = -1 };
	struct bpf_pyproc b = { .model = PY_MODEL_IFRAME,
				.cframe_current = -1,
				.frame_is_entry = -1,
				.frame_globals = -1 };
	uint64_t version, ft;
	int32_t ascii_size;
	size_t i;
	int err = 0;

	if (len < 3 * 8 || memcmp(buf, "xdebugpy", 8))
		return -EINVAL;
	version = word(buf, DBG_VERSION);
	ft = word(buf, DBG_FREE_THREADED);
	if (version >> 32 || version < PYVER(3, 13) || ft > 1)
		return -EINVAL;
	for (i = 0; i < sizeof(dbg_layouts) / sizeof(dbg_layouts[0]); i++)
		if (dbg_layouts[i].version == PYVER_MINOR((uint32_t)version))
			d = &dbg_layouts[i];
	if (!d)
		return -ENOTSUP;
	if (len < 8 * (size_t)d->words)
		return -EINVAL;
	/*
	 * Free-threaded 3.14+ runs thread-local copies of the bytecode
	 * (co_tlbc): instr_ptr is not relative to co_code_adaptive.
	 */
	if (ft && d->stackref)
		return -ENOTSUP;

	err = err ?: field(buf, d->rt_size, d->rt_interp_head, 8, &l.rt_interp_head);
	err = err ?: field(buf, d->is_size, d->is_next, 8, &l.is_next);
	err = err ?: field(buf, d->is_size, d->is_threads_head, 8, &l.is_threads_head);
	err = err ?: field(buf, d->ts_size, d->ts_next, 8, &l.ts_next);
	err = err ?: field(buf, d->ts_size, d->ts_interp, 8, &l.ts_interp);
	err = err ?: field(buf, d->ts_size, d->ts_current_frame, 8, &b.tstate_frame);
	err = err ?: field(buf, d->ts_size, d->ts_thread_id, 8, &l.ts_thread_id);
	err = err ?: field(buf, d->ts_size, d->ts_native_id, 8, &l.ts_native_id);
	err = err ?: field(buf, d->fr_size, d->fr_previous, 8, &b.frame_back);
	err = err ?: field(buf, d->fr_size, d->fr_executable, 8, &b.frame_code);
	err = err ?: field(buf, d->fr_size, d->fr_instr_ptr, 8, &b.frame_instr);
	err = err ?: field(buf, d->fr_size, d->fr_owner, 1, &b.frame_owner);
	err = err ?: field(buf, d->co_size, d->co_filename, 8, &l.co_filename);
	err = err ?: field(buf, d->co_size, d->co_name, 8, &l.co_name);
	err = err ?: field(buf, d->co_size, d->co_qualname, 8, &l.co_qualname);
	err = err ?: field(buf, d->co_size, d->co_linetable, 8, &l.co_linetable);
	err = err ?: field(buf, d->co_size, d->co_firstlineno, 4, &l.co_firstlineno);
	err = err ?: field(buf, d->co_size, d->co_argcount, 4, &l.co_argcount);
	err = err ?: field(buf, d->co_size, d->co_localsplusnames, 8, &l.co_varnames);
	/* co_code_adaptive is a flexible array: it may sit at the very end. */
	err = err ?: field(buf, d->co_size, d->co_code_adaptive, 0, &l.co_code_adaptive);
	err = err ?: field(buf, d->ob_size, d->ob_type, 8, &l.ob_type);
	err = err ?: field(buf, d->tp_size, d->tp_name, 8, &l.tp_name);
	err = err ?: field(buf, d->by_size, d->by_ob_size, 8, &l.bytes_size);
	err = err ?: field(buf, d->by_size, d->by_sval, 1, &l.bytes_sval);
	err = err ?: field(buf, d->un_size, d->un_state, 4, &l.str_state);
	err = err ?: field(buf, d->un_size, d->un_length, 8, &l.str_length);
	if (err)
		return err;
	/* ob_type is the last field of PyObject, GIL or free-threaded. */
	if ((uint64_t)l.ob_type + 8 != word(buf, d->ob_size))
		return -EINVAL;
	/*
	 * asciiobject_size is a size, not an offset: sizeof(PyASCIIObject).
	 * PyCompactUnicodeObject adds utf8_length and utf8 to it.
	 */
	if (word(buf, d->un_ascii_size) > 256)
		return -EINVAL;
	ascii_size = (int32_t)word(buf, d->un_ascii_size);
	if (ascii_size < l.str_state + 4 || ascii_size < l.str_length + 8)
		return -EINVAL;

	/*
	 * pycode reads these headers into small buffers: PyObject, PyBytesObject
	 * and PyASCIIObject headers and the code object's fields fit in 256 bytes
	 * in every CPython.
	 */
	if (l.bytes_sval > 256 || l.bytes_size + 8 > l.bytes_sval || l.ob_type + 8 > l.bytes_sval ||
	    l.ob_type + 8 > ascii_size || code_read_size(&l) > 512)
		return -EINVAL;

	/* names are optional: a block that does not give them still gives stacks */
	if (d->names && !ft && debug_names(buf, d, &l))
		l.is_modules = -1;

	l.str_ascii_size = (uint32_t)ascii_size;
	l.str_compact_size = (uint32_t)ascii_size + 16;
	l.str_kind_shift = 2;
	l.instr = PY_INSTR_PTR;
	l.free_threaded = (uint8_t)ft;
	l.code_tagged = d->stackref;
	l.co_read = code_read_size(&l);

	b.version = (uint32_t)version;
	b.owner_cstack = d->owner_first_shim;
	/*
	 * _Py_DebugOffsets has no f_globals. 3.13 and 3.14 keep 3.12's order
	 * (f_executable, previous, f_funcobj, f_globals): where the block
	 * agrees on the first two, take it; elsewhere code objects are told
	 * apart by address alone.
	 */
	if (PYVER_MINOR((uint32_t)version) <= PYVER(3, 14) && b.frame_code == 0 &&
	    b.frame_back == 8)
		b.frame_globals = 24;
	info->version = (uint32_t)version;
	info->bpf = b;
	info->code_adaptive = (uint32_t)l.co_code_adaptive;
	*pyinfo__layout_mut(info) = l;
	snap_offsets(info);
	return 0;
}
