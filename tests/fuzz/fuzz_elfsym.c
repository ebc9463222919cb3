// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ELF symbols, notes (build id), .gnu_debuglink and .gnu_debugdata
 * (user/symbolize/elfsym.c): the input is an ELF file. The debug root and
 * the root the debuglink is searched under do not exist, so no other file
 * is ever opened: what is fuzzed is the parsing of this one. A loaded file
 * must answer lookups within what it loaded.
 */
#include <string.h>

#include "fuzz.h"
#include "symbolize/elfsym.h"

#define NOWHERE "/nonexistent-bpfprof-fuzz"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct elfsym_opts opts = { .debug_root = NOWHERE, .root = NOWHERE };
	int fd = fuzz__memfd(data, size);
	struct elfsym *es = NULL;
	char hex[129];
	uint64_t v;
	int n;

	n = elf_read_build_id(fd, hex, sizeof(hex));
	fuzz__assert(n <= 0 || strlen(hex) == 2 * (size_t)n);
	if (!elfsym__open(&es, fd, "usr/lib/x.so", &opts)) {
		const char *id = elfsym__build_id(es);

		fuzz__assert(id && strlen(id) <= 128);
		fuzz__assert(elfsym__source(es) != NULL);
		/* every 8-byte word of the input, as an address and as an offset */
		for (size_t i = 0; i + 8 <= size && i < 4096; i += 8) {
			uint64_t a, off;
			const char *name;

			memcpy(&a, data + i, 8);
			name = elfsym__lookup(es, a, &off);
			fuzz__assert(!name || off <= a);
			if (name)
				fuzz__assert(strlen(name) < (1u << 20));
			elfsym__offset_to_vaddr(es, a, &v);
			elfsym__lookup(es, i, NULL);
		}
		elfsym__free(es);
	}
	close(fd);
	return 0;
}
