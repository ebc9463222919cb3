/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Private to user/python: the layout pyproc and pycode read the target with,
 * kept in pyinfo.priv, and the helpers the files share.
 */
#ifndef BPFPROF_PYIMPL_H
#define BPFPROF_PYIMPL_H

#include <stdint.h>
#include <sys/types.h>

#include "python/python.h"

#define PYVER(maj, min) (((uint32_t)(maj) << 24) | ((uint32_t)(min) << 16))
#define PYVER_MINOR(v) ((v) & 0xffff0000u)

/* How the raw position BPF emits becomes a byte offset into the bytecode. */
enum py_instr {
	PY_INSTR_LASTI_BYTES = 1,	/* 3.8, 3.9: int f_lasti, bytes */
	PY_INSTR_LASTI_UNITS = 2,	/* 3.10: int f_lasti, 2-byte code units */
	PY_INSTR_PREV = 3,		/* 3.11, 3.12: prev_instr, last executed unit */
	PY_INSTR_PTR = 4,		/* 3.13+: instr_ptr, the unit being executed */
};

/* Offsets are bytes into the target's structs; -1 where a field does not exist. */
struct pylayout {
	/* _PyRuntimeState, PyInterpreterState, PyThreadState */
	int32_t rt_interp_head;
	int32_t is_next;
	int32_t is_threads_head;
	int32_t ts_next;
	int32_t ts_interp;
	int32_t ts_thread_id;		/* pthread_t */
	int32_t ts_native_id;		/* -1 before 3.11: tid found through pthread_t */
	/* PyObject, PyTypeObject, PyBytesObject */
	int32_t ob_type;
	int32_t tp_name;
	int32_t bytes_size;
	int32_t bytes_sval;
	/* PyCodeObject */
	int32_t co_filename;
	int32_t co_name;
	int32_t co_qualname;		/* -1 before 3.11 */
	int32_t co_linetable;		/* co_lnotab in 3.8, 3.9 */
	int32_t co_firstlineno;
	int32_t co_argcount;
	int32_t co_varnames;		/* co_localsplusnames since 3.11 */
	int32_t co_code_adaptive;	/* -1 before 3.11 */
	uint32_t co_read;		/* bytes of the header that hold all of the above */
	/* PyASCIIObject / PyCompactUnicodeObject */
	int32_t str_length;
	int32_t str_state;
	uint32_t str_ascii_size;	/* data of a compact ASCII string starts here */
	uint32_t str_compact_size;	/* data of other compact strings starts here */
	uint8_t str_kind_shift;		/* state: kind:3 at this bit, then compact, ascii */
	uint8_t instr;			/* enum py_instr */
	uint8_t free_threaded;
	uint8_t code_tagged;		/* f_executable is a _PyStackRef: low bits are tags */
};

_Static_assert(sizeof(struct pylayout) <= sizeof(((struct pyinfo *)0)->priv), "pylayout fits priv");

static inline const struct pylayout *pyinfo__layout(const struct pyinfo *info)
{
	return (const struct pylayout *)(const void *)info->priv;
}

static inline struct pylayout *pyinfo__layout_mut(struct pyinfo *info)
{
	return (struct pylayout *)(void *)info->priv;
}

/* pyoffsets.c: fill info->bpf and the layout for a known version. */
int pyoffsets__from_table(uint32_t version, struct pyinfo *info);
/*
 * Decode a _Py_DebugOffsets block (3.13+) read from the target; len bytes
 * are in buf. Returns 0, -ENOTSUP (a layout of the block we do not know),
 * or -EINVAL (values that cannot be offsets).
 */
int pyoffsets__from_debug(const void *buf, size_t len, struct pyinfo *info);
/* Bytes of the _Py_DebugOffsets block to read for any version we know. */
#define PY_DEBUG_OFFSETS_MAX 1024

/* pycode.c: reads of the target's memory. */
int pymem__read(pid_t pid, uint64_t addr, void *buf, size_t len);
int pymem__read_u64(pid_t pid, uint64_t addr, uint64_t *v);

#endif
