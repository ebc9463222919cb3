/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Private to user/python: the layout pyproc and pycode read the target with,
 * kept in pyinfo.priv, and the helpers the files share.
 */
#ifndef BPFPROF_PYIMPL_H
#define BPFPROF_PYIMPL_H

#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "python/python.h"

/* A field of a structure copied out of the target: off bytes into buf. */
static inline uint64_t get_u64(const uint8_t *buf, int32_t off)
{
	uint64_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

static inline uint32_t get_u32(const uint8_t *buf, int32_t off)
{
	uint32_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

#define PYVER(maj, min) (((uint32_t)(maj) << 24) | ((uint32_t)(min) << 16))
#define PYVER_MINOR(v)	((v)&0xffff0000u)

/* How the raw position BPF emits becomes a byte offset into the bytecode. */
enum py_instr {
	PY_INSTR_LASTI_BYTES = 1, /* 3.8, 3.9: int f_lasti, bytes */
	PY_INSTR_LASTI_UNITS = 2, /* 3.10: int f_lasti, 2-byte code units */
	PY_INSTR_PREV = 3,	  /* 3.11, 3.12: prev_instr, last executed unit */
	PY_INSTR_PTR = 4,	  /* 3.13+: instr_ptr, the unit being executed */
};

/* PyDictKeysObject's header, which says where the entries start. */
enum py_dictkeys {
	PY_KEYS_SIZE = 1, /* 3.8-3.10: dk_size, dk_lookup; 24-byte entries */
	PY_KEYS_LOG2 = 2, /* 3.11+: dk_log2_size, dk_log2_index_bytes, dk_kind */
};

/* Where an instance of a class defined in Python keeps its attributes. */
enum py_instdict {
	PY_INST_DICTOFFSET = 1, /* 3.8-3.10: a dict at tp_dictoffset */
	PY_INST_311 = 2,   /* values at obj - 32 (keys: ht_cached_keys), else dict at obj - 24 */
	PY_INST_312 = 3,   /* obj - 24: values - 1 (low bit set) or a dict */
	PY_INST_313 = 4,   /* dict at obj - 24, else values inline at tp_basicsize */
	PY_INST_313FT = 5, /* free-threaded 3.13+: the same, the dict at obj - 8 */
};

/* How PyLongObject says how many digits it has. */
enum py_long {
	PY_LONG_SIZE = 1, /* 3.8-3.11: ob_size, sign is the sign */
	PY_LONG_TAG = 2,  /* 3.12+: lv_tag = ndigits << 3 | sign (0 +, 1 zero, 2 -) */
};

/* Offsets are bytes into the target's structs; -1 where a field does not exist. */
struct pylayout {
	/* _PyRuntimeState, PyInterpreterState, PyThreadState */
	int32_t rt_interp_head;
	int32_t is_next;
	int32_t is_threads_head;
	int32_t ts_next;
	int32_t ts_interp;
	int32_t ts_thread_id; /* pthread_t */
	int32_t ts_native_id; /* -1 before 3.11: tid found through pthread_t */
	/* PyObject, PyTypeObject, PyBytesObject */
	int32_t ob_type;
	int32_t tp_name;
	int32_t bytes_size;
	int32_t bytes_sval;
	/* PyCodeObject */
	int32_t co_filename;
	int32_t co_name;
	int32_t co_qualname;  /* -1 before 3.11 */
	int32_t co_linetable; /* co_lnotab in 3.8, 3.9 */
	int32_t co_firstlineno;
	int32_t co_argcount;
	int32_t co_varnames;	  /* co_localsplusnames since 3.11 */
	int32_t co_code_adaptive; /* -1 before 3.11 */
	uint32_t co_read;	  /* bytes of the header that hold all of the above */
	/* PyASCIIObject / PyCompactUnicodeObject */
	int32_t str_length;
	int32_t str_state;
	uint32_t str_ascii_size;   /* data of a compact ASCII string starts here */
	uint32_t str_compact_size; /* data of other compact strings starts here */
	uint8_t str_kind_shift;	   /* state: kind:3 at this bit, then compact, ascii */
	uint8_t instr;		   /* enum py_instr */
	uint8_t free_threaded;
	uint8_t code_tagged; /* f_executable is a _PyStackRef: low bits are tags */
	/*
	 * threading's thread names (pythreads.c): the interpreter's modules
	 * dict, a module's dict, dicts, instance attributes, ints.
	 * is_modules < 0: names not supported for this interpreter.
	 */
	int32_t is_modules; /* PyInterpreterState.modules (imports.modules 3.12+) */
	int32_t md_dict;    /* PyModuleObject.md_dict */
	int32_t tp_basicsize;
	int32_t tp_flags;
	int32_t tp_dictoffset;
	int32_t ht_cached_keys; /* PyHeapTypeObject: the instances' shared keys */
	int32_t dict_keys;	/* PyDictObject.ma_keys */
	int32_t dict_values;	/* PyDictObject.ma_values */
	int32_t long_digits;	/* PyLongObject.ob_digit (30-bit digits) */
	int32_t long_size;	/* ob_size, or lv_tag */
	uint8_t keys_fmt;	/* enum py_dictkeys */
	uint8_t inst_dict;	/* enum py_instdict */
	uint8_t long_fmt;	/* enum py_long */
	uint8_t values_off;	/* PyDictValues.values[] */
	/*
	 * The GIL, 3.13+ (pyproc__gil): PyInterpreterState.ceval.gil points at
	 * the _gil_runtime_state in use; last_holder and locked are these
	 * bytes into it. is_ceval_gil < 0: no GIL to follow (free-threaded).
	 */
	int32_t is_ceval_gil;
	int32_t gil_holder;
	int32_t gil_locked;
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

/*
 * Types proven by their tp_name, so that each is read once per walk: the
 * objects of one interpreter share their type objects.
 */
enum py_type {
	PY_T_CODE,
	PY_T_STR,
	PY_T_BYTES,
	PY_T_DICT,
	PY_T_INT,
	PY_T_MODULE,
	PY_T__MAX
};

struct pytypememo {
	uint64_t addr[PY_T__MAX];
};

/* 0 when the type object at type is named for which; -EINVAL, -ESRCH. */
int pytype__check(pid_t pid, const struct pylayout *l, struct pytypememo *m, enum py_type which,
		  uint64_t type);
/*
 * The compact str at addr as UTF-8 (malloc'd), at most max_chars code
 * points of it. -EINVAL when it is not a compact str obeying CPython's
 * invariants, -EFAULT, -ESRCH.
 */
int pystr__read(pid_t pid, const struct pylayout *l, struct pytypememo *m, uint64_t addr,
		size_t max_chars, char **out);
/* The same, also filling *id (pycode__same's view of the str). */
int pystr__read_id(pid_t pid, const struct pylayout *l, struct pytypememo *m, uint64_t addr,
		   size_t max_chars, char **out, struct pystr_id *id);

/*
 * pyline.c: the bytecode offset below which a line table cut after len
 * bytes still answers exactly what the whole table would (only entries
 * known to be complete count).
 */
uint32_t pyline__covered(uint32_t version, const uint8_t *p, size_t len);

/* pythreads.c: pure decoding, exposed for the unit tests. */

/* A PyDictKeysObject's entries: where they start, how many are used, their shape. */
struct pykeys {
	uint64_t entries;     /* address of entry 0 */
	uint32_t nentries;    /* dk_nentries: entries in use, deleted ones included */
	uint8_t esize;	      /* bytes per entry */
	uint8_t ekey, evalue; /* offsets of me_key, me_value in an entry */
	uint8_t pad;
};

/* Bytes of a PyDictKeysObject header pykeys__parse needs (both formats). */
#define PYKEYS_HDR 40

/* Decode the keys object at addr from its first PYKEYS_HDR bytes: 0 or -EINVAL. */
int pykeys__parse(const struct pylayout *l, uint64_t addr, const uint8_t *hdr, struct pykeys *k);
/*
 * A non-negative int of at most 64 bits from the first len bytes of its
 * PyLongObject (l->long_digits + 12 are enough): 0, or -EINVAL (negative,
 * too big, or not a valid int).
 */
int pylong__u64(const struct pylayout *l, const uint8_t *obj, size_t len, uint64_t *v);
/*
 * A thread name as shown: control characters become a visible \xNN (as
 * strsafe writes them), cut to fit outlen (with its NUL) at a character or
 * escape boundary; invalid UTF-8 ends the name.
 */
void pyname__clean(const char *in, char *out, size_t outlen);

#endif
