/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Heap coverage (--alloc): which target processes bpfprof sees allocate,
 * by which path, since when, and why not. Under `-- CMD` the in-process
 * sampler (tools/heap) covers a process from its exec when the loader
 * preloads it and calls to malloc reach it; the library says so itself
 * (its hello, HEAP_MARK_PRELOAD). Every exec of a target (HEAP_MARK_EXEC)
 * is checked at once: a new image that will not have the sampler (a static
 * executable, one that defines malloc, a set-user-ID one, an environment
 * without it) is probed with uprobes right away, before its loader maps its
 * allocator where the agent is fast enough; one that should have it and
 * does not say hello within HELLO_WAIT_NS is probed then. The summary names
 * every process covered late or never, and why.
 */
#ifndef BPFPROF_ALLOC_COVER_H
#define BPFPROF_ALLOC_COVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* An image that should preload the sampler but has not said hello by then: uprobes. */
#define HELLO_WAIT_NS (300ULL * 1000 * 1000)

enum cover_state {
	COV_PENDING, /* exec'd, the sampler expected */
	COV_PRELOAD, /* the in-process sampler */
	COV_UPROBES, /* uprobes on its allocator files */
	COV_NONE,    /* not covered: gone before its probes, or probing failed */
};

enum cover_why {
	WHY_NONE,
	WHY_UPROBES_ASKED, /* --alloc-uprobes, -p, -a: uprobes by choice */
	WHY_STATIC,	   /* a static executable: no loader to preload anything */
	WHY_OWN_MALLOC,	   /* its executable defines malloc: that one comes first */
	WHY_SECURE,	   /* set-user-ID/capabilities: the loader ignores LD_PRELOAD */
	WHY_NO_ENV,	   /* its environment does not preload the sampler */
	WHY_NOT_LOADED,	   /* its environment names the sampler, its loader did not load it */
	WHY_FOREIGN_RATE,  /* its sampler was set to another rate than bpfprof's */
	WHY_EXITED,	   /* it ended before the agent could probe it */
	WHY_NO_ALLOCATOR,  /* no file it maps defines malloc */
	WHY_MAX,
};

struct cover;

/*
 * fallback(ctx, pid): probe pid with uprobes now; returns 1 when an
 * allocator file it calls was mapped already (its calls may have begun), 0
 * when not, or -errno when it could not be probed (-ESRCH: gone).
 */
struct cover_ops {
	int (*fallback)(void *ctx, uint32_t pid);
	void *ctx;
};

/*
 * lib_dev/lib_ino: the preload library's file. uprobes_only: there is no
 * preload library (--alloc-uprobes): every new image goes on uprobes.
 */
struct cover *cover__new(const struct cover_ops *ops, dev_t lib_dev, ino_t lib_ino,
			 bool uprobes_only);
void cover__free(struct cover *c);

/* A process covered before it ran (the -- CMD child held before its exec). */
void cover__set(struct cover *c, uint32_t pid, enum cover_state s, enum cover_why why);
/* A target exec'd at time_ns (comm: its new name): classify its new image now (may fall back). */
void cover__exec(struct cover *c, uint32_t pid, const char *comm, uint64_t time_ns,
		 uint64_t cpu_ns);
/* Its sampler said hello (HEAP_MARK_PRELOAD aux1). */
void cover__hello(struct cover *c, uint32_t pid, uint64_t flags, uint64_t time_ns);
/*
 * A fork: the child has its parent's coverage (same image). Told at the fork
 * itself (HEAP_MARK_FORK, for parents on uprobes) or by the side band later.
 */
void cover__fork(struct cover *c, uint32_t parent, uint32_t child, uint64_t time_ns);
void cover__exit(struct cover *c, uint32_t pid, uint64_t time_ns);
/* Every poll: images still waiting for their hello past HELLO_WAIT_NS fall back. */
void cover__poll(struct cover *c, uint64_t now_ns);
/* Whether pid is to be probed with uprobes (its mappings scanned as they change). */
bool cover__on_uprobes(const struct cover *c, uint32_t pid);

/* Processes (this run's, exited too) in state s. */
size_t cover__count(const struct cover *c, enum cover_state s);

struct recorder;
/* The end-of-run warnings (rec__warn): processes covered late or never. */
void cover__warn(const struct cover *c, struct recorder *r);
/* -v: how many processes each path covered, and why not the sampler. */
void cover__summary(const struct cover *c, FILE *f);

/* The words for a reason (tests). */
const char *cover__why(enum cover_why why);

/* Pure classification of an image (tests): ELF facts, environment, auxv. */
struct cover_image {
	bool elf_ok;	   /* an ELF file we could read */
	bool interp;	   /* has PT_INTERP (dynamic) */
	bool own_malloc;   /* its .dynsym defines malloc */
	bool secure;	   /* AT_SECURE in its auxv */
	bool env_names_us; /* LD_PRELOAD lists our library (the same file) */
};
/* COV_PENDING (wait for the hello) or COV_UPROBES with *why. */
enum cover_state cover__classify(const struct cover_image *im, enum cover_why *why);

#endif
