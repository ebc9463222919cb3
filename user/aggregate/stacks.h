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
	uint32_t aux;	/* OBJ_PYTHON: instruction byte offset | SFRAME_PY_ENTRY; else 0 */
	uint64_t addr;	/* kernel address, file offset in obj, raw user address, or code id */
};

/* aux of a Python frame: the first frame of its eval loop call */
#define SFRAME_PY_ENTRY (1u << 31)

/* stack_key.flags */
#define STACK_F_KERNEL_TRUNC 1	/* more kernel frames existed */
#define STACK_F_USER_TRUNC 2	/* more user frames existed */
#define STACK_F_USER_ERR 4	/* the user stack could not be read */
#define STACK_F_KERNEL_ERR 8
#define STACK_F_PY_TRUNC 16	/* more Python frames existed */
#define STACK_F_GIL_HELD 32	/* a Python sample whose thread held the GIL */

struct stack_key {
	uint32_t pid;
	uint32_t tid;		/* 0 unless threads are told apart */
	char pcomm[16];		/* process name */
	char tcomm[16];		/* thread name, zeroed unless threads are told apart */
	uint16_t nkernel;	/* frames[0..nkernel) are kernel, leaf first */
	uint16_t nuser;		/* then nuser user frames, leaf first */
	uint16_t flags;
	uint16_t npython;	/* then npython Python frames, leaf first */
	uint64_t cgroup_id;	/* cgroup v2 id, 0 unless containers are told apart */
	struct sframe frames[];
};

struct stack_vals {
	uint64_t count;		/* samples */
	uint64_t weight;	/* sum of their weights */
};

struct stacks;

struct stacks *stacks__new(void);
void stacks__free(struct stacks *s);

/* key is copied; its size is sizeof(*key) + (nkernel + nuser) * sizeof(struct sframe). */
int stacks__add(struct stacks *s, const struct stack_key *key, uint64_t weight);
size_t stacks__count(const struct stacks *s);

/* Iterate: *iter = 0 first; NULL at the end. */
const struct stack_key *stacks__next(const struct stacks *s, size_t *iter,
				     const struct stack_vals **vals);

static inline size_t stack_key__size(const struct stack_key *k)
{
	return sizeof(*k) + ((size_t)k->nkernel + k->nuser + k->npython) * sizeof(struct sframe);
}

#endif
