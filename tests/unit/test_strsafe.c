/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* strsafe: process-chosen strings escaped for terminals and text formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aggregate/profile.h"
#include "util/strsafe.h"

static void check(const char *in, const char *want)
{
	char buf[256];
	size_t n = strsafe__escape(buf, sizeof(buf), in);

	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
	assert_int_equal(strsafe__clean(in), !strcmp(in, want));
	/* idempotent: the escaped form has nothing left to escape */
	assert_true(strsafe__clean(buf));
}

static void test_plain_passes(void **state)
{
	(void)state;
	check("", "");
	check("Model.forward (train.py:42)", "Model.forward (train.py:42)");
	check("back\\slash stays", "back\\slash stays");
	check("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x8d",
	      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x8d");
}

static void test_controls_escaped(void **state)
{
	(void)state;
	check("\x1b]0;owned\x07", "\\x1b]0;owned\\x07");
	check("a\nb\rc\td", "a\\x0ab\\x0dc\\x09d");
	check("del\x7f", "del\\x7f");
	check("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred");
}

static void test_c1_and_bidi(void **state)
{
	(void)state;
	/* U+009B is CSI to a terminal; U+202E reverses what follows */
	check("x\xc2\x9b"
	      "2Jy",
	      "x\\u009b2Jy");
	check("evil\xe2\x80\xae"
	      "gpj.exe",
	      "evil\\u202egpj.exe");
	check("\xe2\x81\xa6iso", "\\u2066iso");
}

static void test_invalid_utf8(void **state)
{
	(void)state;
	check("\x9b"
	      "2J",
	      "\\x9b2J");				   /* a lone C1 byte (8-bit CSI) */
	check("\xc3", "\\xc3");				   /* cut sequence */
	check("\xc0\xaf", "\\xc0\\xaf");		   /* overlong '/' */
	check("\xed\xa0\x80", "\\xed\\xa0\\x80");	   /* surrogate */
	check("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
	check("\xff\xfe", "\\xff\\xfe");
}

static void test_cut_at_whole_escape(void **state)
{
	char buf[8];
	size_t n;

	(void)state;
	n = strsafe__escape(buf, sizeof(buf),
			    "abcde\x1b"
			    "f");
	assert_int_equal(n, 10);
	assert_string_equal(buf, "abcde"); /* "\x1b" does not fit whole: nothing after */
	n = strsafe__escape(buf, sizeof(buf),
			    "abc\x1b"
			    "def");
	assert_string_equal(buf, "abc\\x1b");
	assert_int_equal(n, 10);
	assert_int_equal(strsafe__escape(NULL, 0, "\x01"), 4);
}

static void test_inplace(void **state)
{
	char comm[64] = "\x1b[2Jpwn\n";

	(void)state;
	strsafe__inplace(comm, sizeof(comm));
	assert_string_equal(comm, "\\x1b[2Jpwn\\x0a");
}

/* the profile stores every string escaped: frames, files, labels */
static void test_profile_interns_escaped(void **state)
{
	struct profile *p = profile__new();
	struct pframe f = { .name = "fn\x1b[31m", .file = "/tmp/a\nb.py", .mapping = -1 };
	struct plabel l = { .key = "comm", .str = "x\x07" };
	uint32_t idx;
	int i;

	(void)state;
	assert_non_null(p);
	i = profile__add_frame(p, &f);
	assert_true(i >= 0);
	assert_string_equal(p->frames[i].name, "fn\\x1b[31m");
	assert_string_equal(p->frames[i].file, "/tmp/a\\x0ab.py");
	/* the same raw name is the same frame */
	assert_int_equal(profile__add_frame(p, &f), i);
	idx = (uint32_t)i;
	assert_int_equal(profile__add_sample(p, &idx, 1, NULL, &l, 1), 0);
	assert_string_equal(p->samples[0].labels[0].str, "x\\x07");
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_passes),
		cmocka_unit_test(test_controls_escaped),
		cmocka_unit_test(test_c1_and_bidi),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_cut_at_whole_escape),
		cmocka_unit_test(test_inplace),
		cmocka_unit_test(test_profile_interns_escaped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
