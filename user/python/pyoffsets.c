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
		info->layout = table[i].version;
		info->bpf = table[i].bpf;
		info->bpf.version = version;
		l = pyinfo__layout_mut(info);
		*l = table[i].l;
		l->co_read = code_read_size(l);
		l->is_ceval_gil = -1; /* pyproc__gil's own table */
		info->code_adaptive = l->co_code_adaptive < 0 ? 0 : (uint32_t)l->co_code_adaptive;
		snap_offsets(info);
		return 0;
	}
	return -ENOTSUP;
}

/*
 * _Py_DebugOffsets (3.13+). The block is a struct of 64-bit words whose
 * members change from one minor version to the next (3.14 inserted fields
 * in the middle of it, 3.15 more), so each version we know is described by
 * the block's own member names in order, as its header declares them
 * (Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h from
 * 3.14): tests/e2e/test_pylayout.py parses the interpreters' headers and
 * checks these lists word for word. A field is then found by name: every
 * offset the block carries is taken from the target, none is kept here.
 * Groups start with the size of the struct they describe; a field is valid
 * when it lies inside that size.
 */
static const char *const dbg_313[] = {
	"cookie",
	"version",
	"free_threaded",
	"runtime_state.size",
	"runtime_state.finalizing",
	"runtime_state.interpreters_head",
	"interpreter_state.size",
	"interpreter_state.id",
	"interpreter_state.next",
	"interpreter_state.threads_head",
	"interpreter_state.gc",
	"interpreter_state.imports_modules",
	"interpreter_state.sysdict",
	"interpreter_state.builtins",
	"interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state",
	"interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked",
	"interpreter_state.gil_runtime_state_holder",
	"thread_state.size",
	"thread_state.prev",
	"thread_state.next",
	"thread_state.interp",
	"thread_state.current_frame",
	"thread_state.thread_id",
	"thread_state.native_thread_id",
	"thread_state.datastack_chunk",
	"thread_state.status",
	"interpreter_frame.size",
	"interpreter_frame.previous",
	"interpreter_frame.executable",
	"interpreter_frame.instr_ptr",
	"interpreter_frame.localsplus",
	"interpreter_frame.owner",
	"code_object.size",
	"code_object.filename",
	"code_object.name",
	"code_object.qualname",
	"code_object.linetable",
	"code_object.firstlineno",
	"code_object.argcount",
	"code_object.localsplusnames",
	"code_object.localspluskinds",
	"code_object.co_code_adaptive",
	"pyobject.size",
	"pyobject.ob_type",
	"type_object.size",
	"type_object.tp_name",
	"type_object.tp_repr",
	"type_object.tp_flags",
	"tuple_object.size",
	"tuple_object.ob_item",
	"tuple_object.ob_size",
	"list_object.size",
	"list_object.ob_item",
	"list_object.ob_size",
	"dict_object.size",
	"dict_object.ma_keys",
	"dict_object.ma_values",
	"float_object.size",
	"float_object.ob_fval",
	"long_object.size",
	"long_object.lv_tag",
	"long_object.ob_digit",
	"bytes_object.size",
	"bytes_object.ob_size",
	"bytes_object.ob_sval",
	"unicode_object.size",
	"unicode_object.state",
	"unicode_object.length",
	"unicode_object.asciiobject_size",
	"gc.size",
	"gc.collecting",
};

static const char *const dbg_314[] = {
	"cookie",
	"version",
	"free_threaded",
	"runtime_state.size",
	"runtime_state.finalizing",
	"runtime_state.interpreters_head",
	"interpreter_state.size",
	"interpreter_state.id",
	"interpreter_state.next",
	"interpreter_state.threads_head",
	"interpreter_state.threads_main",
	"interpreter_state.gc",
	"interpreter_state.imports_modules",
	"interpreter_state.sysdict",
	"interpreter_state.builtins",
	"interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state",
	"interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked",
	"interpreter_state.gil_runtime_state_holder",
	"interpreter_state.code_object_generation",
	"interpreter_state.tlbc_generation",
	"thread_state.size",
	"thread_state.prev",
	"thread_state.next",
	"thread_state.interp",
	"thread_state.current_frame",
	"thread_state.thread_id",
	"thread_state.native_thread_id",
	"thread_state.datastack_chunk",
	"thread_state.status",
	"interpreter_frame.size",
	"interpreter_frame.previous",
	"interpreter_frame.executable",
	"interpreter_frame.instr_ptr",
	"interpreter_frame.localsplus",
	"interpreter_frame.owner",
	"interpreter_frame.stackpointer",
	"interpreter_frame.tlbc_index",
	"code_object.size",
	"code_object.filename",
	"code_object.name",
	"code_object.qualname",
	"code_object.linetable",
	"code_object.firstlineno",
	"code_object.argcount",
	"code_object.localsplusnames",
	"code_object.localspluskinds",
	"code_object.co_code_adaptive",
	"code_object.co_tlbc",
	"pyobject.size",
	"pyobject.ob_type",
	"type_object.size",
	"type_object.tp_name",
	"type_object.tp_repr",
	"type_object.tp_flags",
	"tuple_object.size",
	"tuple_object.ob_item",
	"tuple_object.ob_size",
	"list_object.size",
	"list_object.ob_item",
	"list_object.ob_size",
	"set_object.size",
	"set_object.used",
	"set_object.table",
	"set_object.mask",
	"dict_object.size",
	"dict_object.ma_keys",
	"dict_object.ma_values",
	"float_object.size",
	"float_object.ob_fval",
	"long_object.size",
	"long_object.lv_tag",
	"long_object.ob_digit",
	"bytes_object.size",
	"bytes_object.ob_size",
	"bytes_object.ob_sval",
	"unicode_object.size",
	"unicode_object.state",
	"unicode_object.length",
	"unicode_object.asciiobject_size",
	"gc.size",
	"gc.collecting",
	"gen_object.size",
	"gen_object.gi_name",
	"gen_object.gi_iframe",
	"gen_object.gi_frame_state",
	"llist_node.next",
	"llist_node.prev",
	"debugger_support.eval_breaker",
	"debugger_support.remote_debugger_support",
	"debugger_support.remote_debugging_enabled",
	"debugger_support.debugger_pending_call",
	"debugger_support.debugger_script_path",
	"debugger_support.debugger_script_path_size",
};

static const char *const dbg_315[] = {
	"cookie",
	"version",
	"free_threaded",
	"runtime_state.size",
	"runtime_state.finalizing",
	"runtime_state.interpreters_head",
	"interpreter_state.size",
	"interpreter_state.id",
	"interpreter_state.next",
	"interpreter_state.threads_head",
	"interpreter_state.threads_main",
	"interpreter_state.gc",
	"interpreter_state.imports_modules",
	"interpreter_state.sysdict",
	"interpreter_state.builtins",
	"interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state",
	"interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked",
	"interpreter_state.gil_runtime_state_holder",
	"interpreter_state.code_object_generation",
	"interpreter_state.tlbc_generation",
	"thread_state.size",
	"thread_state.prev",
	"thread_state.next",
	"thread_state.interp",
	"thread_state.current_frame",
	"thread_state.base_frame",
	"thread_state.last_profiled_frame",
	"thread_state.last_profiled_frame_seq",
	"thread_state.thread_id",
	"thread_state.native_thread_id",
	"thread_state.datastack_chunk",
	"thread_state.status",
	"thread_state.holds_gil",
	"thread_state.gil_requested",
	"thread_state.current_exception",
	"thread_state.exc_state",
	"err_stackitem.exc_value",
	"interpreter_frame.size",
	"interpreter_frame.previous",
	"interpreter_frame.executable",
	"interpreter_frame.instr_ptr",
	"interpreter_frame.localsplus",
	"interpreter_frame.owner",
	"interpreter_frame.stackpointer",
	"interpreter_frame.tlbc_index",
	"code_object.size",
	"code_object.filename",
	"code_object.name",
	"code_object.qualname",
	"code_object.linetable",
	"code_object.firstlineno",
	"code_object.argcount",
	"code_object.localsplusnames",
	"code_object.localspluskinds",
	"code_object.co_code_adaptive",
	"code_object.co_tlbc",
	"pyobject.size",
	"pyobject.ob_type",
	"type_object.size",
	"type_object.tp_name",
	"type_object.tp_repr",
	"type_object.tp_flags",
	"type_object.tp_basicsize",
	"type_object.tp_dictoffset",
	"heap_type_object.size",
	"heap_type_object.ht_cached_keys",
	"tuple_object.size",
	"tuple_object.ob_item",
	"tuple_object.ob_size",
	"list_object.size",
	"list_object.ob_item",
	"list_object.ob_size",
	"set_object.size",
	"set_object.used",
	"set_object.table",
	"set_object.mask",
	"dict_object.size",
	"dict_object.ma_keys",
	"dict_object.ma_values",
	"float_object.size",
	"float_object.ob_fval",
	"long_object.size",
	"long_object.lv_tag",
	"long_object.ob_digit",
	"bytes_object.size",
	"bytes_object.ob_size",
	"bytes_object.ob_sval",
	"unicode_object.size",
	"unicode_object.state",
	"unicode_object.length",
	"unicode_object.asciiobject_size",
	"unicode_object.compactunicodeobject_size",
	"gc.size",
	"gc.collecting",
	"gc.frame",
	"gc.generation_stats_size",
	"gc.generation_stats",
	"gen_object.size",
	"gen_object.gi_name",
	"gen_object.gi_iframe",
	"gen_object.gi_frame_state",
	"llist_node.next",
	"llist_node.prev",
	"debugger_support.eval_breaker",
	"debugger_support.remote_debugger_support",
	"debugger_support.remote_debugging_enabled",
	"debugger_support.debugger_pending_call",
	"debugger_support.debugger_script_path",
	"debugger_support.debugger_script_path_size",
};

/*
 * What the block does not say, per version: the lowest frame owner that is
 * not a Python function's frame (pycore_frame.h / pycore_interpframe_structs.h:
 * FRAME_OWNED_BY_CSTACK 3 in 3.13; FRAME_OWNED_BY_INTERPRETER 3 and
 * FRAME_OWNED_BY_CSTACK 4 in 3.14; INTERPRETER 3 alone in 3.15, which owns
 * the C stack's entry frames too).
 */
struct dbg_layout {
	uint32_t version; /* major.minor */
	const char *const *names;
	uint32_t nnames;
	uint8_t owner_first_shim;
	uint8_t stackref; /* f_executable is a tagged _PyStackRef */
};

#define DBG_ROW(v, a, shim, ref)                                    \
	{                                                           \
		PYVER(3, v), a, sizeof(a) / sizeof(a[0]), shim, ref \
	}

static const struct dbg_layout dbg_layouts[] = {
	DBG_ROW(13, dbg_313, 3, 0),
	DBG_ROW(14, dbg_314, 3, 1),
	DBG_ROW(15, dbg_315, 3, 1),
};

/* The header (cookie, version, free_threaded) is words 0-2 in every layout. */
#define DBG_VERSION	  1
#define DBG_FREE_THREADED 2

/* Structs bigger than this are not CPython's (PyInterpreterState is ~200 KiB). */
#define DBG_MAX_STRUCT (16u << 20)

/* The block as read, and the layout it is decoded with. */
struct dbg {
	const uint8_t *buf;
	size_t len; /* bytes of buf */
	const struct dbg_layout *d;
	int err; /* first error; later lookups do nothing */
};

static uint64_t word(const void *buf, unsigned idx)
{
	uint64_t v;

	memcpy(&v, (const char *)buf + 8 * (size_t)idx, sizeof(v));
	return v;
}

/* Index of the named member in the layout, -1 when it has none. */
static int member(const struct dbg_layout *d, const char *name)
{
	for (uint32_t i = 0; i < d->nnames; i++)
		if (!strcmp(d->names[i], name))
			return (int)i;
	return -1;
}

/* The value of a member ("group.field"); sets g->err when it has none. */
static uint64_t value(struct dbg *g, const char *name)
{
	int i = member(g->d, name);

	if (g->err)
		return 0;
	if (i < 0 || 8 * (size_t)(i + 1) > g->len) {
		g->err = -EINVAL;
		return 0;
	}
	return word(g->buf, (unsigned)i);
}

/*
 * Offset of a field of width w inside the struct its group describes (the
 * group's "size" member), or -1 with g->err set (optional: -1 and no error
 * when the layout has no such member, or the member is 0 for "none").
 */
static int32_t off(struct dbg *g, const char *name, unsigned w)
{
	char grp[64];
	const char *dot = strchr(name, '.');
	uint64_t size, o;

	if (g->err || !dot || (size_t)(dot - name) + 6 > sizeof(grp)) {
		g->err = g->err ?: -EINVAL;
		return -1;
	}
	memcpy(grp, name, (size_t)(dot - name));
	strcpy(grp + (dot - name), ".size");
	size = value(g, grp);
	o = value(g, name);
	if (g->err)
		return -1;
	/* o > size first: a target's o of 2^64 - 1 plus w wraps below size */
	if (size == 0 || size > DBG_MAX_STRUCT || o > size || w > size - o) {
		g->err = -EINVAL;
		return -1;
	}
	return (int32_t)o;
}

static int32_t off_opt(struct dbg *g, const char *name, unsigned w)
{
	int32_t o;

	if (g->err || member(g->d, name) < 0)
		return -1;
	if (!value(g, name))
		return -1; /* 0: not in this build (the free-threaded fields of a GIL build) */
	o = off(g, name, w);
	if (g->err) {
		g->err = 0; /* an optional field that does not fit: not used */
		return -1;
	}
	return o;
}

/*
 * Thread names (pythreads.c): what the block gives, checked like the rest,
 * and what it does not, derived from what it does where the structs' order
 * has stood since 3.8 (PyTypeObject's fields, PyHeapTypeObject's method
 * tables before ht_cached_keys; 3.15's block gives those three and
 * tests/unit/test_python.c checks the derivations against it), else from
 * the headers of 3.13-3.15 (pycore_dict.h, pycore_object.h): the same
 * dict keys and values in GIL and free-threaded builds (PyMutex dk_mutex
 * sits in padding), the managed dict 3 words before the object (GIL) or 1
 * (free-threaded: no GC header before it).
 */
static void debug_names(struct dbg *g, struct pylayout *l)
{
	int32_t tp_name, tp_size;

	l->is_modules = off(g, "interpreter_state.imports_modules", 8);
	l->tp_flags = off(g, "type_object.tp_flags", 8);
	l->dict_keys = off(g, "dict_object.ma_keys", 8);
	l->dict_values = off(g, "dict_object.ma_values", 8);
	l->long_size = off(g, "long_object.lv_tag", 8);
	l->long_digits = off(g, "long_object.ob_digit", 4);
	tp_name = off(g, "type_object.tp_name", 8);
	tp_size = (int32_t)value(g, "type_object.size");
	if (g->err)
		return;
	/* PyModuleObject: PyObject_HEAD, then md_dict */
	l->md_dict = (int32_t)value(g, "pyobject.size");
	l->tp_basicsize = off_opt(g, "type_object.tp_basicsize", 8);
	if (l->tp_basicsize < 0)
		l->tp_basicsize = tp_name + 8;
	l->tp_dictoffset = off_opt(g, "type_object.tp_dictoffset", 8);
	if (l->tp_dictoffset < 0)
		l->tp_dictoffset = tp_name + 264;
	l->ht_cached_keys = member(g->d, "heap_type_object.ht_cached_keys") >= 0
				    ? off(g, "heap_type_object.ht_cached_keys", 8)
				    : tp_size + 464;
	l->keys_fmt = PY_KEYS_LOG2;
	l->inst_dict = l->free_threaded ? PY_INST_313FT : PY_INST_313;
	l->long_fmt = PY_LONG_TAG;
	l->values_off = 8;
}

/*
 * The GIL (3.13+): interp->ceval.gil points at the one in use (an
 * interpreter's own _gil, or the main interpreter's it shares); last_holder
 * and locked are where the block says they are in _gil. None in
 * free-threaded builds: there is no GIL to hold.
 */
static void debug_gil(struct dbg *g, struct pylayout *l)
{
	int32_t gil, holder, locked;

	l->is_ceval_gil = -1;
	if (l->free_threaded)
		return;
	l->is_ceval_gil = off_opt(g, "interpreter_state.ceval_gil", 8);
	gil = off_opt(g, "interpreter_state.gil_runtime_state", 8);
	holder = off_opt(g, "interpreter_state.gil_runtime_state_holder", 8);
	locked = off_opt(g, "interpreter_state.gil_runtime_state_locked", 4);
	if (l->is_ceval_gil < 0 || gil < 0 || holder < gil || locked < gil || holder - gil > 4096 ||
	    locked - gil > 4096) {
		l->is_ceval_gil = -1;
		return;
	}
	l->gil_holder = holder - gil;
	l->gil_locked = locked - gil;
}

/* The newest layout we know, for a block newer than it. */
static const struct dbg_layout *newest_layout(void)
{
	return &dbg_layouts[sizeof(dbg_layouts) / sizeof(dbg_layouts[0]) - 1];
}

int pyoffsets__from_debug(const void *buf, size_t len, struct pyinfo *info)
{
	struct pylayout l;
	struct bpf_pyproc b;
	struct dbg g = { .buf = buf, .len = len };
	uint64_t version, ft;
	int32_t ascii_size;
	size_t i;

	if (len < 3 * 8 || memcmp(buf, "xdebugpy", 8))
		return -EINVAL;
	version = word(buf, DBG_VERSION);
	ft = word(buf, DBG_FREE_THREADED);
	if (version >> 32 || version < PYVER(3, 13) || ft > 1)
		return -EINVAL;
	for (i = 0; i < sizeof(dbg_layouts) / sizeof(dbg_layouts[0]); i++)
		if (dbg_layouts[i].version == PYVER_MINOR((uint32_t)version))
			g.d = &dbg_layouts[i];
	/*
	 * A version newer than any we know: its block is read with the newest
	 * layout, and believed only if every check below holds (sizes, offsets
	 * inside them, PyObject's and str's invariants, and then check_live's
	 * thread state pointing back at its interpreter): CPython adds members
	 * more often than it moves them. A version between two we know has no
	 * such excuse.
	 */
	if (!g.d && PYVER_MINOR((uint32_t)version) > newest_layout()->version)
		g.d = newest_layout();
	if (!g.d)
		return -ENOTSUP;
	if (len < 8 * (size_t)g.d->nnames)
		return -EINVAL;
	/* whole, padding included: callers compare layouts bytewise */
	memset(&l, 0, sizeof(l));
	memset(&b, 0, sizeof(b));
	b.model = PY_MODEL_IFRAME;
	b.cframe_current = -1;
	b.frame_is_entry = -1;
	b.frame_globals = -1;
	l.free_threaded = (uint8_t)ft;

	l.rt_interp_head = off(&g, "runtime_state.interpreters_head", 8);
	l.is_next = off(&g, "interpreter_state.next", 8);
	l.is_threads_head = off(&g, "interpreter_state.threads_head", 8);
	l.ts_next = off(&g, "thread_state.next", 8);
	l.ts_interp = off(&g, "thread_state.interp", 8);
	b.tstate_frame = off(&g, "thread_state.current_frame", 8);
	l.ts_thread_id = off(&g, "thread_state.thread_id", 8);
	l.ts_native_id = off(&g, "thread_state.native_thread_id", 8);
	b.frame_back = off(&g, "interpreter_frame.previous", 8);
	b.frame_code = off(&g, "interpreter_frame.executable", 8);
	b.frame_instr = off(&g, "interpreter_frame.instr_ptr", 8);
	b.frame_owner = off(&g, "interpreter_frame.owner", 1);
	l.co_filename = off(&g, "code_object.filename", 8);
	l.co_name = off(&g, "code_object.name", 8);
	l.co_qualname = off(&g, "code_object.qualname", 8);
	l.co_linetable = off(&g, "code_object.linetable", 8);
	l.co_firstlineno = off(&g, "code_object.firstlineno", 4);
	l.co_argcount = off(&g, "code_object.argcount", 4);
	l.co_varnames = off(&g, "code_object.localsplusnames", 8);
	/* co_code_adaptive is a flexible array: it may sit at the very end. */
	l.co_code_adaptive = off(&g, "code_object.co_code_adaptive", 0);
	l.ob_type = off(&g, "pyobject.ob_type", 8);
	l.tp_name = off(&g, "type_object.tp_name", 8);
	l.bytes_size = off(&g, "bytes_object.ob_size", 8);
	l.bytes_sval = off(&g, "bytes_object.ob_sval", 1);
	l.str_state = off(&g, "unicode_object.state", 4);
	l.str_length = off(&g, "unicode_object.length", 8);
	/* asciiobject_size is a size, not an offset: sizeof(PyASCIIObject) */
	ascii_size = (int32_t)value(&g, "unicode_object.asciiobject_size");
	if (g.err)
		return g.err;
	/* ob_type is the last field of PyObject, GIL or free-threaded. */
	if ((uint64_t)l.ob_type + 8 != value(&g, "pyobject.size"))
		return -EINVAL;
	if (ascii_size < l.str_state + 4 || ascii_size < l.str_length + 8 || ascii_size > 256)
		return -EINVAL;

	/*
	 * pycode reads these headers into small buffers: PyObject, PyBytesObject
	 * and PyASCIIObject headers and the code object's fields fit in 256 bytes
	 * in every CPython.
	 */
	if (l.bytes_sval > 256 || l.bytes_size + 8 > l.bytes_sval || l.ob_type + 8 > l.bytes_sval ||
	    l.ob_type + 8 > ascii_size || code_read_size(&l) > 512)
		return -EINVAL;

	/*
	 * Free-threaded 3.14+ run per-thread copies of the bytecode: a frame's
	 * instr_ptr points into code->co_tlbc->entries[frame->tlbc_index]
	 * (entry 0 is co_code_adaptive), so BPF rebases it (python.bpf.h).
	 */
	{
		int32_t ti = off_opt(&g, "interpreter_frame.tlbc_index", 4),
			ct = off_opt(&g, "code_object.co_tlbc", 8);

		if ((ti > 0) != (ct > 0) || ti > PYFRAME_SPAN - 4)
			return -EINVAL;
		/* 0: none (never a real offset of either) */
		b.frame_tlbc = (uint16_t)(ti > 0 ? ti : 0);
		b.co_tlbc = (uint16_t)(ct > 0 ? ct : 0);
	}

	/* names and the GIL are optional: a block that does not give them still gives stacks */
	debug_names(&g, &l);
	if (g.err) {
		l.is_modules = -1;
		g.err = 0;
	}
	debug_gil(&g, &l);

	l.str_ascii_size = (uint32_t)ascii_size;
	l.str_compact_size = (uint32_t)ascii_size + 16;
	/* 3.15 says sizeof(PyCompactUnicodeObject); before, it is 16 more than PyASCIIObject */
	if (member(g.d, "unicode_object.compactunicodeobject_size") >= 0) {
		uint64_t v = value(&g, "unicode_object.compactunicodeobject_size");

		if (g.err || v < (uint64_t)ascii_size || v > 256)
			return -EINVAL;
		l.str_compact_size = (uint32_t)v;
	}
	/*
	 * PyASCIIObject.state: interned:2, then kind:3 (bit 2); free-threaded
	 * 3.14+ make interned a whole byte (read atomically): kind at bit 8
	 * (Include/cpython/unicodeobject.h).
	 */
	l.str_kind_shift = ft && g.d->version >= PYVER(3, 14) ? 8 : 2;
	l.instr = PY_INSTR_PTR;
	l.code_tagged = g.d->stackref;
	l.co_read = code_read_size(&l);

	b.version = (uint32_t)version;
	b.owner_cstack = g.d->owner_first_shim;
	/*
	 * _Py_DebugOffsets has no f_globals. 3.13-3.15 keep 3.12's order
	 * (f_executable, previous, f_funcobj, f_globals): where the block
	 * agrees on the first two, take it (it only tags code objects for
	 * pycode_seen: a wrong guess weakens the tag, nothing else);
	 * elsewhere code objects are told apart by address alone.
	 */
	if (b.frame_code == 0 && b.frame_back == 8)
		b.frame_globals = 24;
	info->version = (uint32_t)version;
	info->layout = g.d->version;
	info->bpf = b;
	info->code_adaptive = (uint32_t)l.co_code_adaptive;
	memset(info->priv, 0, sizeof(info->priv));
	*pyinfo__layout_mut(info) = l;
	snap_offsets(info);
	return 0;
}
