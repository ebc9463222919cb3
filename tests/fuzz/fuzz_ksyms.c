// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kallsyms text (user/symbolize/ksyms.c): the input is a kallsyms file
 * ("ADDR TYPE NAME [MODULE]" lines). Read through /proc/self/fd of a memfd,
 * as ksyms__load reads its path. Lookups of every word of the input land on
 * a symbol at or below the address.
 */
#include <string.h>

#include "fuzz.h"
#include "symbolize/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = fuzz__memfd(data, size);
	struct ksyms *ks = NULL;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (!ksyms__load(&ks, path)) {
		for (size_t i = 0; i + 8 <= size && i < 4096; i += 8) {
			const char *name, *module = NULL;
			uint64_t a, off = 0;

			memcpy(&a, data + i, 8);
			name = ksyms__lookup(ks, a, &off, &module);
			fuzz__assert(!name || off <= a);
			ksyms__lookup(ks, 0xffffffff81000000ULL + i * 16, &off, &module);
		}
		ksyms__free(ks);
	}
	close(fd);
	return 0;
}
