#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# gen_many_libs.sh DIR COUNT ROWS [FDES]
#
# Writes DIR/libmany_0.so ... libmany_{COUNT-1}.so: shared libraries that
# each have a large .eh_frame (about ROWS unwind rows, from a padding
# function whose every instruction moves the CFA) and one function,
# many_spin(n), that spins n iterations with a frame pointer. Each library
# carries its own symbol and its own small function (a different length
# each), so no two share a build id or their CFI: each is its own table,
# as bpfprof shares a table only between files of identical CFI. One big
# object assembled, then linked COUNT times: seconds, not minutes.
# With FDES the padding is FDES small functions of ROWS/FDES rows each, as a
# compiler makes them (libtorch_cpu: 220k FDEs, 1.4M rows), not one.
set -eu
dir=$1
count=$2
rows=$3
fdes=${4:-1}
mkdir -p "$dir"
cat >"$dir/many.s" <<ASM
	.text
	.globl many_spin
	.type many_spin,@function
many_spin:
	.cfi_startproc
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_offset %rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register %rbp
1:	dec %rdi
	jnz 1b
	pop %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size many_spin, .-many_spin
ASM
# the padding: FDES functions of ROWS/FDES rows each
"$(dirname "$0")/gen_pad_fdes.sh" "$fdes" $((rows / fdes)) >>"$dir/many.s"
as -o "$dir/many.o" "$dir/many.s"
# many_tag_N: N+1 bytes of code in an FDE of its own, so that each file's
# .eh_frame differs
tag() {
	printf '\t.text\n\t.globl many_tag_%s\nmany_tag_%s:\n\t.cfi_startproc\n' "$1" "$1"
	printf '\t.skip %s, 0x90\n\tret\n\t.cfi_endproc\n' "$(($1 + 1))"
	printf '\t.section .note.GNU-stack,"",@progbits\n'
}
# one link each; the symbol many_id_N makes each file (and build id) its own
for i in $(seq 0 $((count - 1))); do
	tag "$i" | as -o "$dir/tag_$i.o"
done
seq 0 $((count - 1)) | xargs -P "$(nproc)" -I{} ld -shared --build-id -soname libmany_{}.so \
	--defsym=many_id_{}=0x{} -o "$dir/libmany_{}.so" "$dir/many.o" "$dir/tag_{}.o"
rm -f "$dir/many.o" "$dir/many.s" "$dir"/tag_*.o
