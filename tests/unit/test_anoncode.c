/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * anoncode: trampolines recognized by their instructions, with the frame at
 * the return address after their one call; anything else refused. The byte
 * strings are CPython's own (Python/asm_trampoline.S as built by pyenv's
 * 3.12.1 and 3.13.0, and by Debian sid's 3.13, 3.14 and 3.15).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unwind/anoncode.h"

static int tramp(const char *code, size_t n, struct anon_tramp *t)
{
	return anoncode__trampoline((const uint8_t *)code, n, t);
}

static void test_cpython_no_frame_pointer(void **state)
{
	/* sub $8,%rsp; call *%rcx; add $8,%rsp; ret (3.12.1, 3.13.0) */
	static const char code[] = "\x48\x83\xec\x08\xff\xd1\x48\x83\xc4\x08\xc3";
	struct anon_tramp t;

	(void)state;
	assert_int_equal(tramp(code, sizeof(code) - 1, &t), 0);
	assert_int_equal(t.cfa, 16);
	assert_int_equal(t.rbp, 0); /* RBP untouched: the caller's */
}

static void test_cpython_frame_pointer(void **state)
{
	/* endbr64; push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret (sid 3.14, 3.15) */
	static const char code[] = "\xf3\x0f\x1e\xfa\x55\x48\x89\xe5\xff\xd1\x5d\xc3";
	struct anon_tramp t;

	(void)state;
	assert_int_equal(tramp(code, sizeof(code) - 1, &t), 0);
	assert_int_equal(t.cfa, 16);
	assert_int_equal(t.rbp, 16); /* the caller's RBP at CFA - 16 */
	/* without endbr64 (sid 3.13), and more than one copy read */
	assert_int_equal(tramp("\x55\x48\x89\xe5\xff\xd1\x5d\xc3\x55\x48\x89\xe5", 12, &t), 0);
	assert_int_equal(t.cfa, 16);
	assert_int_equal(t.rbp, 16);
}

static void test_leave_and_bigger_frame(void **state)
{
	/* push %rbp; mov %rsp,%rbp; sub $0x20,%rsp; call *%rax; leave; ret */
	static const char code[] = "\x55\x48\x89\xe5\x48\x83\xec\x20\xff\xd0\xc9\xc3";
	struct anon_tramp t;

	(void)state;
	assert_int_equal(tramp(code, sizeof(code) - 1, &t), 0);
	assert_int_equal(t.cfa, 48);
	assert_int_equal(t.rbp, 16);
}

static void test_other_code_refused(void **state)
{
	struct anon_tramp t;

	(void)state;
	/* no frame before the call: the return address's frame is the caller's own */
	assert_int_equal(tramp("\xff\xd1\xc3", 3, &t), -ENOENT);
	/* a frame not taken down before ret */
	assert_int_equal(tramp("\x48\x83\xec\x08\xff\xd1\xc3", 7, &t), -ENOENT);
	/* taken down by more than was set up */
	assert_int_equal(tramp("\x48\x83\xec\x08\xff\xd1\x48\x83\xc4\x10\xc3", 11, &t), -ENOENT);
	/* a direct call (e8 rel32), not an indirect one */
	assert_int_equal(tramp("\x55\xe8\x00\x00\x00\x00\x5d\xc3", 8, &t), -ENOENT);
	/* a loop (tiny_jit's spin_loop): no call at all */
	assert_int_equal(tramp("\x55\x48\x89\xe5\x48\xff\xcf\x75\xfb\x5d\xc3", 11, &t), -ENOENT);
	/* cut short */
	assert_int_equal(tramp("\x48\x83\xec\x08\xff\xd1\x48\x83", 8, &t), -ENOENT);
	assert_int_equal(tramp("", 0, &t), -ENOENT);
	/* a misaligned frame (sub $4) */
	assert_int_equal(tramp("\x48\x83\xec\x04\xff\xd1\x48\x83\xc4\x04\xc3", 11, &t), -ENOENT);
}

static void test_classify_own_memory(void **state)
{
	static const char code[] = "\x48\x83\xec\x08\xff\xd1\x48\x83\xc4\x08\xc3";
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct anon_tramp t;

	(void)state;
	assert_true(m != MAP_FAILED);
	for (long i = 0; i + (long)sizeof(code) - 1 <= pg; i += sizeof(code) - 1)
		memcpy(m + i, code, sizeof(code) - 1);
	assert_int_equal(anoncode__classify(getpid(), (uintptr_t)m, (uintptr_t)m + pg, &t), 0);
	assert_int_equal(t.cfa, 16);
	memset(m, 0x90, pg); /* nops */
	assert_int_equal(anoncode__classify(getpid(), (uintptr_t)m, (uintptr_t)m + pg, &t),
			 -ENOENT);
	munmap(m, pg);
	/* unreadable: gone */
	assert_true(anoncode__classify(getpid(), (uintptr_t)m, (uintptr_t)m + pg, &t) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpython_no_frame_pointer),
		cmocka_unit_test(test_cpython_frame_pointer),
		cmocka_unit_test(test_leave_and_bigger_frame),
		cmocka_unit_test(test_other_code_refused),
		cmocka_unit_test(test_classify_own_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
