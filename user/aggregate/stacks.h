/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * stacks: the aggregation table. A sample becomes a key -- process, thread,
 * names and its frames already turned into (object, file offset) -- and
 * identical keys are counted, not stored again. Symbolization happens once
 * per distinct frame when the profile is built (profile_build.c).
 */
#ifndef BPFPROF_STACKS_H
#define BPFPROF_STACKS_H

#include <stddef.h>
#include <stdint.h>

/* A frame before symbolization. obj: OBJ_* or an objfile id (proc/objfile.h). */
struct sframe {
	uint32_t obj;
	uint32_t aux;  /* OBJ_PYTHON: instruction byte offset | SFRAME_PY_ENTRY; else 0 */
	uint64_t addr; /* kernel address, file offset in obj, raw user address, or code id */
};

/* aux of a Python frame: the first frame of its eval loop call */
#define SFRAME_PY_ENTRY (1u << 31)
/*
 * aux of a native frame: a call of the eval loop, found by BPF from where
 * the call's Python entry frame lies on the stack (UFRAME_F_PYEVAL), not by
 * the frame's symbol
 */
#define SFRAME_PY_EVAL (1u << 30)
/*
 * aux of an anonymous-code frame (OBJ_ANON, OBJ_JIT): in copies of a
 * trampoline (unwind/anoncode.h), CPython's perf trampolines (-X perf)
 */
#define SFRAME_TRAMPOLINE (1u << 29)

/* stack_key.flags */
#define STACK_F_KERNEL_TRUNC 1 /* more kernel frames existed */
#define STACK_F_USER_TRUNC   2 /* more user frames existed */
#define STACK_F_USER_ERR     4 /* the user stack could not be read */
#define STACK_F_KERNEL_ERR   8
#define STACK_F_PY_TRUNC     16	 /* more Python frames existed */
#define STACK_F_GIL_HELD     32	 /* a Python sample whose thread held the GIL */
#define STACK_F_HEURISTIC    64	 /* a user frame was reached by a frame-pointer step */
#define STACK_F_MISSING	     128 /* the native walk stopped before the outermost frame */
/* the GIL was read (STACK_F_GIL_HELD says the answer); not: no gil label */
#define STACK_F_GIL_KNOWN 256

struct stack_key {
	uint32_t pid;
	uint32_t tid;	  /* 0 unless threads are told apart */
	char pcomm[16];	  /* process name */
	char tcomm[16];	  /* thread name, zeroed unless threads are told apart */
	uint16_t nkernel; /* frames[0..nkernel) are kernel, leaf first */
	uint16_t nuser;	  /* then nuser user frames, leaf first */
	uint16_t flags;
	uint16_t npython;   /* then npython Python frames, leaf first */
	uint64_t cgroup_id; /* cgroup v2 id, 0 unless containers are told apart */
	struct sframe frames[];
};

/*
 * The values of one stack, one per value type of the run (samples, cpu
 * nanoseconds, alloc bytes, ...). Which index means what is the recorder's
 * choice, handed to profile__build in build_opts.value_types.
 */
#define STACK_MAX_VALUES 12

struct stack_vals {
	int64_t v[STACK_MAX_VALUES];
};

struct stacks;

struct stacks *stacks__new(void);
void stacks__free(struct stacks *s);

/*
 * Add deltas[0..n) to the stack's values (the stack is created with zeros if
 * new). key is copied; its size is stack_key__size(key). Returns 0 or -errno.
 */
int stacks__add(struct stacks *s, const struct stack_key *key, const int64_t *deltas, uint32_t n);
/*
 * Find or create the stack; *idx is stable for the table's life, so a caller
 * can keep it (e.g. a live allocation) and adjust the values later through
 * stacks__vals. Returns 0 or -errno.
 */
int stacks__intern(struct stacks *s, const struct stack_key *key, size_t *idx);
/*
 * Stacks share the memory budget (util/membudget.h) and may hold half of it:
 * past that a new distinct stack is refused with -ENOSPC (an existing one
 * still counts). New stacks refused so far, in all tables.
 */
uint64_t stacks__refused(void);
struct stack_vals *stacks__vals(struct stacks *s, size_t idx);
size_t stacks__count(const struct stacks *s);
/* The stable index (as stacks__intern gives) of values that stacks__next returned. */
size_t stacks__index(const struct stacks *s, const struct stack_vals *vals);

/* Iterate: *iter = 0 first; NULL at the end. */
const struct stack_key *stacks__next(const struct stacks *s, size_t *iter,
				     const struct stack_vals **vals);

static inline size_t stack_key__size(const struct stack_key *k)
{
	return sizeof(*k) + ((size_t)k->nkernel + k->nuser + k->npython) * sizeof(struct sframe);
}

#endif
