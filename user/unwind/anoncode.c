// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include "unwind/anoncode.h"

/* The longest trampoline read: endbr64, four frame instructions, the call, its undoing, ret. */
#define TRAMP_MAX 32

int anoncode__trampoline(const uint8_t *code, size_t n, struct anon_tramp *out)
{
	unsigned off = 8, rbp = 0, left;
	bool fp = false;
	size_t i = 0;
	int steps;

	if (n >= 4 && !memcmp(code, "\xf3\x0f\x1e\xfa", 4)) /* endbr64 */
		i = 4;
	for (steps = 0; steps < 4; steps++) {
		if (i < n && code[i] == 0x55 && !rbp) { /* push %rbp */
			off += 8;
			rbp = off;
			i += 1;
		} else if (i + 3 <= n && !memcmp(code + i, "\x48\x89\xe5", 3) && rbp == off) {
			fp = true; /* mov %rsp,%rbp: the CFA stays RSP-based until the call */
			i += 3;
		} else if (i + 4 <= n && !memcmp(code + i, "\x48\x83\xec", 3) &&
			   code[i + 3] < 0x80 && !(code[i + 3] & 7)) {
			off += code[i + 3]; /* sub $imm8,%rsp */
			i += 4;
		} else {
			break;
		}
	}
	/* a frame, then its one call: call *%reg (ff d0+r) */
	if (off == 8 || off > 255 || i + 2 > n || code[i] != 0xff || (code[i + 1] & 0xf8) != 0xd0)
		return -ENOENT;
	i += 2;
	/* the frame taken down, exactly, then ret */
	for (left = off - 8, steps = 0; left && steps < 4; steps++) {
		if (i + 4 <= n && !memcmp(code + i, "\x48\x83\xc4", 3) && code[i + 3] <= left &&
		    !(rbp && left - code[i + 3] < rbp - 8)) {
			left -= code[i + 3]; /* add $imm8,%rsp */
			i += 4;
		} else if (i < n && code[i] == 0x5d && rbp && left == rbp - 8) {
			left -= 8; /* pop %rbp */
			i += 1;
		} else if (i < n && code[i] == 0xc9 && fp) {
			left = rbp - 16; /* leave: RSP = RBP (just below the saved RBP), pop %rbp */
			i += 1;
			if (left) /* a frame below the saved RBP left on the stack: not ours */
				return -ENOENT;
		} else {
			return -ENOENT;
		}
	}
	if (left || i >= n || code[i] != 0xc3)
		return -ENOENT;
	out->cfa = (uint8_t)off;
	out->rbp = (uint8_t)rbp;
	return 0;
}

int anoncode__classify(uint32_t pid, uint64_t start, uint64_t end, struct anon_tramp *out)
{
	uint8_t code[TRAMP_MAX];
	struct iovec local = { code, sizeof(code) }, remote = { (void *)(uintptr_t)start, 0 };
	ssize_t n;

	remote.iov_len = end - start < sizeof(code) ? end - start : sizeof(code);
	n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return anoncode__trampoline(code, (size_t)n, out);
}
