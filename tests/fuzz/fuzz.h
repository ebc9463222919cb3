/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every libFuzzer harness in tests/fuzz shares. A harness feeds one
 * parser the fuzzer's bytes the way bpfprof feeds it a target's bytes (a
 * file, a /proc text, a record) and checks what the parser promises about
 * its result; ASan and UBSan catch the rest. Nothing here touches a file or
 * a process outside the harness.
 */
#ifndef BPFPROF_FUZZ_H
#define BPFPROF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the parser: report it as a crash, with the reason. */
#define fuzz__assert(cond)                                                                       \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

/* A memfd holding the input, as a mapped file's fd: regular, sized, seekable. */
static inline int fuzz__memfd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		abort();
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	return fd;
}

/* The input as a NUL-terminated string (malloc'd, so ASan sees its end). */
static inline char *fuzz__str(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	for (size_t i = 0; i < size; i++)
		s[i] = (char)data[i];
	s[size] = '\0';
	return s;
}

#endif
