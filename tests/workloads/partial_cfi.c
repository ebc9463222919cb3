// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * partial_cfi SECONDS
 *
 * cpu_split's main -> dispatch -> work_a | work_b | work_c (0.50/0.30/0.20),
 * with main and dispatch built without frame pointers but with CFI, and
 * work_X (partial_cfi_work.c) with frame pointers but no CFI: a walk needs
 * the tables for some frames and a frame-pointer step for the others, as in
 * a binary linked from objects built with different flags.
 */
#define SPLIT_WORK_EXTERN
#include "split.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: partial_cfi SECONDS\n");
		return 2;
	}
	print_pid();
	split_run_for(parse_seconds("partial_cfi", argv[1]));
	return 0;
}
