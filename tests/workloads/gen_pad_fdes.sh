#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# gen_pad_fdes.sh FDES ROWS > pad.s
#
# Assembly for FDES small functions of about ROWS unwind rows each (every
# instruction moves the CFA), none of them ever called: linked into a
# library, it gives the library as many FDEs as a big C++ library has
# (libtorch_cpu: 220k FDEs, 1.4M rows), around the few functions it runs.
set -eu
fdes=$1
rows=$2
cat <<ASM
	.text
	.type pad_fdes,@function
pad_fdes:
	.rept $fdes
	.cfi_startproc
	.rept $((rows / 2))
	push %rax
	.cfi_adjust_cfa_offset 8
	.endr
	.rept $((rows / 2))
	pop %rax
	.cfi_adjust_cfa_offset -8
	.endr
	ret
	.cfi_endproc
	.endr
	.size pad_fdes, .-pad_fdes
	.section .note.GNU-stack,"",@progbits
ASM
