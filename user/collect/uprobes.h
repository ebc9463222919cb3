/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * uprobes: attach a set of (function -> BPF program) probes to every file a
 * feature cares about (libc's malloc family, libcuda's cu* calls) in the
 * processes being profiled, including processes and libraries that appear
 * during the run.
 *
 * Whole machine (-a): one probe per (file, function) for every process
 * (pid -1), since any process may map the file. Targeted runs (-p, -- CMD):
 * one probe per (process, file, function), so that the breakpoints are
 * installed only in the targets' address spaces and other processes calling
 * malloc pay nothing. Offsets are resolved once per file from its own ELF
 * symbols (.dynsym, then .symtab), not once per attach.
 *
 * Where the kernel has uprobe_multi links (6.6+), all the offsets one program
 * takes in one file are one link, attached and detached in one step; else
 * (or with BPFPROF_NO_UPROBE_MULTI set) one perf-event uprobe per probe.
 */
#ifndef BPFPROF_UPROBES_H
#define BPFPROF_UPROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <gelf.h>

struct bpf_object;
struct bpf_program;
struct objfile;
struct objtab;
struct proc;

struct uprobe_spec {
	const char *func; /* symbol name (versions such as @@GLIBC_2.2.5 ignored) */
	struct bpf_program *prog;
	bool retprobe;
	bool optional;	 /* a file may lack it (e.g. pvalloc in musl): not an error */
	uint64_t cookie; /* bpf_get_attach_cookie() in the program: which function fired */
	/*
	 * Optional: move the probe from the function's file offset *off (fd:
	 * the file), e.g. past a first instruction the kernel would have to
	 * single-step. Returns 0 or -errno (the probe stays where it was).
	 */
	int (*place)(int fd, uint64_t *off);
};

struct uprobes_stats {
	uint64_t files;		/* files probed */
	uint64_t probes;	/* probes attached (live and gone) */
	uint64_t links;		/* links they took: one per (file, program) with uprobe_multi */
	uint64_t attach_failed; /* attach calls that failed (process exited, no permission) */
	uint64_t missing;	/* non-optional functions a matched file lacks */
};

/*
 * match(o, arg): whether file o is one to probe (e.g. "exports malloc", or
 * "is libcuda.so.1"). Called once per file. all: whole-machine mode.
 */
struct uprobes;
int uprobes__new(struct uprobes **out, const char *name, struct objtab *objs, bool all,
		 bool (*match)(struct objfile *o, void *arg), void *arg,
		 const struct uprobe_spec *specs, size_t nspecs);
void uprobes__free(struct uprobes *u);

/* The process's mappings (may) have changed: probe the matching files it maps. */
void uprobes__scan(struct uprobes *u, const struct proc *p);
/* The process is gone: drop its probes (targeted mode). */
void uprobes__forget(struct uprobes *u, uint32_t pid);
/*
 * Probe file o for pid now, before pid maps it (a held -- CMD child, whose
 * libraries are known from its executable): the probes are in place for its
 * first call. A later scan of pid that finds o attaches nothing again.
 */
void uprobes__attach_obj(struct uprobes *u, struct objfile *o, uint32_t pid);
/* Attach a probe on an explicit file (--cuda-lib PATH) for every target. */
int uprobes__add_path(struct uprobes *u, const char *path);

const struct uprobes_stats *uprobes__stats(const struct uprobes *u);

/*
 * Before a BPF object holding SEC("uprobe")/SEC("uretprobe") programs is
 * loaded: mark them for uprobe_multi links if the kernel has them.
 */
void uprobes__prepare(struct bpf_object *obj);
/* Probes attached now, by every struct uprobes of the run. */
uint64_t uprobes__live(void);

/*
 * The defined function (STT_FUNC) named name, or name@VERSION, in e's
 * symbol tables of type sh_type (SHT_DYNSYM, SHT_SYMTAB): 0 and the first
 * such symbol in *sym (NULL: not wanted), or -ENOENT. The one lookup of a
 * function by name in collect/ (probe points, a program's own malloc, the
 * size of libc's function for injection).
 */
int uprobes__elf_func(Elf *e, uint32_t sh_type, const char *name, GElf_Sym *sym);
/*
 * File offset of a function symbol in the ELF file at fd: .dynsym first,
 * then .symtab. Returns 0 and *off, or -ENOENT / -errno. Exposed for tests.
 */
int uprobes__func_offset(int fd, const char *func, uint64_t *off);
/*
 * Bytes of x86-64 nops of 5 or more bytes each at the start of code[0..n):
 * where a probe is moved past (a kernel may rewrite a probe on such a nop
 * into a call of a per-process trampoline, which a forked child lacks).
 * Exposed for tests.
 */
size_t uprobes__nop_skip(const uint8_t *code, size_t n);

#endif
