/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * python: everything bpfprof knows about CPython, in user space.
 *
 *  - pyproc: is this process a CPython interpreter, which version, where is
 *    _PyRuntime, and what layout (struct bpf_pyproc) must BPF use to walk its
 *    frames; which PyThreadState belongs to which native thread id.
 *  - pycode: a code object read out of the target (process_vm_readv):
 *    qualname, filename, first line, line table, and the line of an
 *    instruction position, for each version's line table format.
 *  - pythreads: the names the threading module gave the threads
 *    (threading.Thread.name), by thread ident.
 *
 * Nothing here trusts the target's memory: every read is bounded and
 * checked, a process that lies gets an error, never a crash.
 */
#ifndef BPFPROF_PYTHON_H
#define BPFPROF_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>
#include "bpfprof.h"

struct pyinfo {
	uint32_t version; /* PY_VERSION_HEX, e.g. 0x030c01f0 */
	/*
	 * The major.minor whose layout decodes it: the version's own, or for
	 * a _Py_DebugOffsets block newer than any we know, the newest known.
	 */
	uint32_t layout;
	uint64_t runtime;      /* address of _PyRuntime in the target */
	struct bpf_pyproc bpf; /* layout for the BPF walker */
	/* layout user space needs (offsets into the target's objects) */
	uint32_t code_adaptive; /* 3.11+: offset of co_code_adaptive in PyCodeObject */
	/* private: struct pylayout (user/python/pyimpl.h): tstate, code, str offsets */
	uint8_t priv[512];
};

/*
 * Is the ELF file open at fd (mapped in pid with the given load bias: runtime
 * address = ELF vaddr + bias) a CPython interpreter (libpython3.X.so, or an
 * executable with libpython linked in)? It is when it defines _PyRuntime.
 * Fills info (version read from the target: Py_Version, _Py_DebugOffsets,
 * or the file name libpython3.X / python3.X). Returns 0, -ENOENT (not
 * Python), -ENOTSUP (a version we have no layout for, or a live interpreter
 * whose structs do not match it), -EINVAL (contradictory version facts),
 * -ESRCH (process gone), or -errno. 3.8-3.10 do not store their micro
 * version: info->version is then 3.X.0 final.
 */
int pyproc__probe(pid_t pid, int fd, const char *path, uint64_t bias, struct pyinfo *info);

/*
 * What an ELF file says of itself, once per file (pyproc__file): the symbols
 * pyproc__probe looks for, and where its segments' file bytes land, so that
 * a second process of the same interpreter is probed without reading the
 * file again.
 */
enum {
	PYSYM_RUNTIME, /* _PyRuntime */
	PYSYM_VERSION, /* Py_Version, 3.11+ */
	PYSYM_API_310, /* Py_IsNone */
	PYSYM_API_39,  /* PyFrame_GetCode */
	PYSYM_API_38,  /* PyVectorcall_Call */
	PYSYM__MAX
};

#define PYFILE_LOADS 8

struct pyfile {
	uint64_t addr[PYSYM__MAX]; /* ELF virtual addresses */
	uint32_t found;		   /* 1 << PYSYM_x: addr[x] is set */
	uint32_t nloads;
	struct {
		uint64_t off, filesz, vaddr;
		uint32_t flags; /* p_flags: PF_X */
	} loads[PYFILE_LOADS];	/* PT_LOAD segments */
};

/* Reads fd's symbols and segments. Returns 0, -ENOENT (no _PyRuntime), -errno. */
int pyproc__file(int fd, struct pyfile *f);

/* The ELF virtual address that file offset pgoff of a mapping lands at; 0 or -ENOENT. */
int pyproc__vaddr(const struct pyfile *f, uint64_t pgoff, uint64_t *vaddr);

/* pyproc__probe with the file's facts read already (pyproc__file). */
int pyproc__probe_file(pid_t pid, const struct pyfile *f, const char *path, uint64_t bias,
		       struct pyinfo *info);

/*
 * Where the GIL records its holder: fills info->bpf.gil_holder/gil_locked
 * (absolute addresses in the target) for 3.8-3.13. 3.12+ keep the GIL in the
 * interpreter, so this needs an initialized interpreter. Returns 0, -EAGAIN
 * (not initialized yet), -ENOTSUP (a version whose layout we do not know).
 */
int pyproc__gil(pid_t pid, struct pyinfo *info);

struct pythread {
	uint32_t tid;	 /* native thread id (PyThreadState.native_thread_id) */
	uint64_t tstate; /* PyThreadState address */
	uint64_t ident;	 /* PyThreadState.thread_id: threading.get_ident() */
};

/*
 * The interpreter's threads (every interpreter, every thread state), at most
 * max. Returns how many were written, or -errno. Bounded: a cyclic or
 * garbage list ends the walk with what was read. tids are this side's (the
 * target's own pid namespace is translated through /proc); thread states
 * not yet bound to an OS thread, or whose thread is gone, are left out.
 */
int pyproc__threads(pid_t pid, const struct pyinfo *info, struct pythread *out, size_t max);

/*
 * Where a dict lookup found its key last time (keys object, entry index):
 * the next lookup in the same table tries there first.
 */
struct pyhint {
	uint64_t keys;
	uint32_t ix;
};

/* Kept by the caller between pythreads__names calls on one process. */
struct pynames_hints {
	struct pyhint threading; /* "threading" in the interpreter's modules */
	struct pyhint active;	 /* "_active" in threading's globals */
	struct pyhint name;	 /* "_name" in a Thread's attributes */
};

/* UTF-8 bytes kept of a thread name, with its NUL; longer names are cut. */
#define PYNAME_MAX 128

struct pyname {
	uint64_t ident;	       /* threading.get_ident() of the thread */
	char name[PYNAME_MAX]; /* "": the Thread's name could not be read */
};

/*
 * threading's running threads (threading._active of every interpreter,
 * {ident: Thread}) and their names, at most max. Control characters in a
 * name become '?'. Returns how many were written; -ENOENT when no
 * interpreter has imported threading (yet); -ENOTSUP for an interpreter
 * whose layout for this we do not know; -ESRCH when
 * the process is gone; -EINVAL, -EFAULT for memory that is not what it
 * should be. Bounded on any input.
 */
int pythreads__names(pid_t pid, const struct pyinfo *info, struct pynames_hints *hints,
		     struct pyname *out, size_t max);

/*
 * A str as pycode__same re-reads it: its length field and its first
 * characters' bytes (as stored: 1, 2 or 4 bytes each), from data_off.
 */
#define PYSTR_HEAD 64
struct pystr_id {
	uint64_t len;
	uint16_t data_off;
	uint8_t head_len;
	uint8_t head[PYSTR_HEAD];
};

/* A decoded code object. Strings are malloc'd (pycode__free). */
#define PYCODE_IDENT 7
struct pycode {
	char *qualname; /* co_qualname (3.11+), co_name before */
	char *filename;
	uint32_t firstlineno;
	uint8_t *linetable; /* co_lnotab / co_linetable bytes */
	size_t linetable_len;
	/*
	 * A snapshot's table may be cut (PYSNAP_LINES_MAX): then only offsets
	 * below linetable_covers have a line (pycode__line: 0 beyond).
	 */
	bool linetable_cut;
	uint32_t linetable_covers;
	uint64_t code_addr;
	uint32_t version;
	/*
	 * Identity (pycode__same): fields of the object that never change while
	 * it lives: ob_type, co_filename, co_name, co_qualname, co_linetable,
	 * co_varnames/co_localsplusnames pointers, co_firstlineno | co_argcount << 32.
	 * A code object made in a loop (exec, compile, code.replace) is often
	 * given every one of its freed predecessor's addresses, name string
	 * and line table included: so the check also compares the name's
	 * text (name) and the line table's length (lines_len) with what they
	 * were when read.
	 */
	uint64_t ident[PYCODE_IDENT];
	struct pystr_id name;
	uint64_t lines_len;
};

/* Read the code object at addr. Returns 0 or -errno (-EFAULT, -EINVAL for garbage). */
int pycode__read(pid_t pid, const struct pyinfo *info, uint64_t addr, struct pycode *out);
void pycode__free(struct pycode *c);

/*
 * A code object from a BPF snapshot: snap is the payload of a SAMPLE_PYCODE
 * record (struct pycode_snap, len bytes of it). Validated as pycode__read
 * validates a live object, on the bytes BPF copied: the header's size and
 * first line, each string's length, kind and compactness and CPython's
 * invariant for its kind, every length against what was sent. Types cannot
 * be read by name from a snapshot: the code object's type must be code_type
 * when it is known (non-zero), and both strings must share one type that is
 * not the line table's. Returns 0 or -EINVAL.
 */
int pycode__from_snap(const struct pyinfo *info, const void *snap, size_t len, uint64_t code_type,
		      struct pycode *out);

/*
 * The position BPF emits for a frame (f_lasti for 3.8-3.10; the instruction
 * pointer for 3.11+) as an offset in bytes from the start of the code's
 * bytecode: the offset CPython itself turns into that frame's f_lineno, so
 * a caller gets the line of its call and the leaf the line it executes.
 *   3.8, 3.9   f_lasti, in bytes; 3.10: f_lasti counts 2-byte code units.
 *              -1 (frame not started) is 0. The int may arrive zero-extended.
 *   3.11-3.12  prev_instr - first unit: the last unit executed; in a caller
 *              the CALL's last inline cache entry, which the line table
 *              gives the CALL's line. One unit before the first (not
 *              started) is 0.
 *   3.13+      instr_ptr - first unit: the instruction executing, in a
 *              caller the CALL itself (the return point is instr_ptr +
 *              return_offset, never stored in instr_ptr).
 * Flag bits above PYFRAME_INSTR_MASK are ignored. Returns UINT32_MAX when
 * it makes no sense (before the code, odd, beyond 256 MiB).
 */
uint32_t pycode__instr_offset(const struct pyinfo *info, uint64_t code_addr, uint64_t raw);

/* Line number of the instruction at byte offset off (0: unknown). */
uint32_t pycode__line(const struct pycode *c, uint32_t off);

/*
 * Compare cheaply whether the code object at addr is still the one decoded
 * in c (identity fields re-read): detects an address reused after the
 * original was freed. Returns 1 same, 0 different, -errno unreadable.
 */
int pycode__same(pid_t pid, const struct pyinfo *info, const struct pycode *c);
/* Whether two decodes (live reads, snapshots) are of one object: ident, name, table length. */
bool pycode__same_object(const struct pycode *a, const struct pycode *b);

#endif
