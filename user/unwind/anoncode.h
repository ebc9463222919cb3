/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * anoncode: what an anonymous executable mapping holds, where that tells
 * the unwinder how to step through it. Today one kind: copies of a
 * trampoline whose only call is an indirect `call *%reg`, as CPython's
 * perf trampolines (`-X perf`, `-X perf_jit`, PYTHONPERFSUPPORT=1) are:
 * each Python call runs through one, and at the return address after its
 * call the frame layout is known from the trampoline's own instructions,
 * whether or not it kept a frame pointer (CPython's did not before
 * 3.12.x/3.13.1: `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`).
 */
#ifndef BPFPROF_ANONCODE_H
#define BPFPROF_ANONCODE_H

#include <stddef.h>
#include <stdint.h>

/* The frame at the return address after a trampoline's call. */
struct anon_tramp {
	uint8_t cfa; /* CFA = RSP + cfa */
	uint8_t rbp; /* the caller's RBP at CFA - rbp; 0: RBP untouched */
};

/*
 * Decode code[0..n) as a trampoline: [endbr64], a frame set up by push %rbp
 * (mov %rsp,%rbp) and/or sub $imm8,%rsp, one `call *%reg`, the frame taken
 * down again (add $imm8,%rsp, pop %rbp, leave) and ret. 0 and *out, or
 * -ENOENT when the code is anything else.
 */
int anoncode__trampoline(const uint8_t *code, size_t n, struct anon_tramp *out);

/*
 * Read the first bytes of pid's mapping at start (process_vm_readv) and
 * decode them as above. 0 and *out, -ENOENT (not a trampoline), or -errno
 * (unreadable: the process is gone, or the memory not readable).
 */
int anoncode__classify(uint32_t pid, uint64_t start, uint64_t end, struct anon_tramp *out);

#endif
