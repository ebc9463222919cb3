// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnop5_alloc.so: a malloc family whose every function begins with a
 * 5-byte nop, then jumps to glibc's. Code built with
 * -fpatchable-function-entry, or with ftrace-style hooks, starts so. On
 * kernel 6.18 a uprobe on such a nop is rewritten, after its first hit,
 * into a call to an [uprobes-trampoline] page of the process; a forked
 * child keeps the call but not the page. Preloaded under `--alloc
 * --alloc-uprobes` (the uprobe path probes every file that exports malloc),
 * the ground truth for "no probe site the kernel can turn into a call a
 * fork loses" (tests/e2e/test_alloc_safety.py).
 */
#define NOP5_FORWARD(name, to)                                                 \
	asm(".pushsection .text\n"                                             \
	    ".globl " #name "\n"                                               \
	    ".type " #name ", @function\n"                                     \
	    ".p2align 4\n" #name ":\n"                                         \
	    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */ \
	    "jmp " #to "@PLT\n"                                                \
	    ".size " #name ", .-" #name "\n"                                   \
	    ".popsection\n")

NOP5_FORWARD(malloc, __libc_malloc);
NOP5_FORWARD(free, __libc_free);
NOP5_FORWARD(calloc, __libc_calloc);
NOP5_FORWARD(realloc, __libc_realloc);
