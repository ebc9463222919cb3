// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnocfi.so: nocfi_spin(SECONDS), with neither CFI nor a frame pointer,
 * and RBP used as a plain register while it spins (as optimised code may):
 * no unwinder can find its caller, so a profile must say frames are missing
 * rather than invent them. Called from Python through ctypes
 * (py/ctypes_nocfi.py). SECONDS are of the thread's CPU time, so that a test
 * gets its samples however loaded the host is.
 */
#include "common.h"

NOINLINE void nocfi_spin(double secs)
{
	int64_t end = thread_cpu_ns() + (int64_t)(secs * 1e9);

	while (thread_cpu_ns() < end) {
		long n = 1000000;

		/* RBP = 1: no frame pointer, and below any stack pointer */
		__asm__ __volatile__("push %%rbp\n\t"
				     "mov $1, %%ebp\n"
				     "1:\n\t"
				     "dec %0\n\t"
				     "jnz 1b\n\t"
				     "pop %%rbp"
				     : "+r"(n)
				     :
				     : "memory", "cc");
	}
}
