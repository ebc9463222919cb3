// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where a uprobe may go (user/collect/uprobes.c): never on a nop of 5 bytes
 * or more, which kernel 6.18 rewrites into a call of a trampoline page a
 * forked child lacks (issue 25). uprobes__nop_skip says how far past the
 * nops at a function's start its probe moves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "collect/uprobes.h"

#define SKIP(...)                                     \
	({                                            \
		const uint8_t c_[] = { __VA_ARGS__ }; \
		uprobes__nop_skip(c_, sizeof(c_));    \
	})

static void test_no_nop(void **state)
{
	(void)state;
	assert_int_equal(SKIP(0x55, 0x48, 0x89, 0xe5), 0);	       /* push %rbp */
	assert_int_equal(SKIP(0xf3, 0x0f, 0x1e, 0xfa, 0x55), 0);       /* endbr64 */
	assert_int_equal(SKIP(0x48, 0x85, 0xff, 0x74, 0x10), 0);       /* test; je */
	assert_int_equal(SKIP(0xf3, 0x90, 0x90, 0x90, 0x90, 0x90), 0); /* pause */
	/* 0f 1f /1: not the nop (reg field set), left alone */
	assert_int_equal(SKIP(0x0f, 0x1f, 0x4c, 0x00, 0x00, 0xc3), 0);
}

static void test_short_nops_stay(void **state)
{
	(void)state;
	/* one-byte and four-byte nops cannot become a 5-byte call: the probe stays */
	assert_int_equal(SKIP(0x90, 0xc3), 0);
	assert_int_equal(SKIP(0x0f, 0x1f, 0x40, 0x00, 0xc3), 0);
	assert_int_equal(SKIP(0x66, 0x90, 0xc3), 0);
	assert_int_equal(SKIP(0x0f, 0x1f, 0x00, 0xc3), 0);
}

static void test_long_nops_skipped(void **state)
{
	(void)state;
	/* nopl 0x0(%rax,%rax,1): the 6.18 optimizer's case */
	assert_int_equal(SKIP(0x0f, 0x1f, 0x44, 0x00, 0x00, 0xe9, 0, 0, 0, 0), 5);
	/* 66 66 66 66 90: prefixed one-byte nop of 5 bytes */
	assert_int_equal(SKIP(0x66, 0x66, 0x66, 0x66, 0x90, 0x55), 5);
	/* nopw 0x0(%rax,%rax,1) (6), nopl 0x0(%rax) disp32 (7), (8), cs nopw (10) */
	assert_int_equal(SKIP(0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55), 6);
	assert_int_equal(SKIP(0x0f, 0x1f, 0x80, 0, 0, 0, 0, 0x55), 7);
	assert_int_equal(SKIP(0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0, 0x55), 8);
	assert_int_equal(SKIP(0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0, 0x55), 10);
	/* a run of them (-fpatchable-function-entry with long nops), then a short one stays */
	assert_int_equal(
		SKIP(0x0f, 0x1f, 0x44, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x90, 0x55), 10);
	/* SIB without a base: disp32 */
	assert_int_equal(SKIP(0x0f, 0x1f, 0x04, 0x25, 0, 0, 0, 0, 0x55), 8);
}

static void test_truncated(void **state)
{
	(void)state;
	/* a nop cut by the end of what was read is not skipped into the unknown */
	assert_int_equal(SKIP(0x0f, 0x1f, 0x84, 0x00, 0x00), 0);
	assert_int_equal(SKIP(0x0f, 0x1f), 0);
	assert_int_equal(uprobes__nop_skip((const uint8_t *)"", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_nop),
		cmocka_unit_test(test_short_nops_stay),
		cmocka_unit_test(test_long_nops_skipped),
		cmocka_unit_test(test_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
