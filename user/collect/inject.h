/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * inject: call a function in a running process (ptrace), for `--alloc -p`:
 * the process loads the in-process heap sampler (dlopen) and hooks its own
 * calls (bpfprof_heap_inject, tools/heap/inject.c), and at the end puts
 * them back (bpfprof_heap_eject).
 *
 * Only at a safe point: the thread (the process's leader) is stopped by
 * PTRACE_INTERRUPT and looked at; it is used only when it is blocked in a
 * system call where no lock the loader or the allocator takes can be held
 * (read, poll, epoll_wait, nanosleep, accept, ...: see safe_syscall), or
 * runs code of its own executable (not of libc, the loader or an allocator)
 * with no return address into the loader near the top of its stack. Else it
 * is let go for a few milliseconds and looked at again, for up to a second;
 * a process never found at a safe point is not touched (its caller falls
 * back to uprobes). The thread's registers are saved and put back, a system
 * call it was in is restarted as the kernel does for a signal, and a signal
 * that came meanwhile is delivered.
 */
#ifndef BPFPROF_INJECT_H
#define BPFPROF_INJECT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Load lib (a path the process can open) into pid and call its
 * bpfprof_heap_inject(rate). Returns the slots it hooked (> 0), or -errno
 * with a reason in why (the user's words): not injectable, no safe point,
 * the load failed.
 */
long inject__heap(uint32_t pid, const char *lib, uint64_t rate, char *why, size_t whylen);
/*
 * Call bpfprof_heap_eject() in pid (the library loaded by inject__heap):
 * the slots it put back (0: the library is not mapped any more), -ESRCH if
 * the process has exited (a zombie too), or -errno with why.
 */
long inject__heap_eject(uint32_t pid, const char *lib, char *why, size_t whylen);

#endif
