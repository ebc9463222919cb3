// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The pieces of a target's Python objects that thread names are read
 * through (user/python/pythreads.c): a dict keys object's header
 * (pykeys__parse), a small int (pylong__u64) and the thread name itself
 * (pyname__clean). Input: a version byte, then the bytes handed to each.
 * A parsed keys object has entries that fit its size; a clean name is
 * shorter than its buffer, has no control character, and is cut only
 * between UTF-8 characters.
 */
#include <string.h>

#include "fuzz.h"
#include "python/pyimpl.h"

static const uint32_t versions[] = { PYVER(3, 8) | 0xf0, PYVER(3, 9) | 0xf0, PYVER(3, 10) | 0xf0,
				     PYVER(3, 11) | 0x7f0, PYVER(3, 12) | 0x1f0 };
#define NVERSIONS (sizeof(versions) / sizeof(versions[0]))

static void check_name(const uint8_t *data, size_t size, size_t outlen)
{
	char *in = fuzz__str(data, size), out[PYNAME_MAX];
	size_t n;

	pyname__clean(in, out, outlen);
	n = strlen(out);
	fuzz__assert(n < outlen);
	for (size_t i = 0; i < n; i++)
		fuzz__assert((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	/* a cut never leaves half a character: the last one is whole */
	if (n) {
		size_t start = n - 1;

		while (start && ((unsigned char)out[start] & 0xc0) == 0x80)
			start--;
		fuzz__assert(n - start <= 4);
	}
	free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pyinfo info;
	const struct pylayout *l = pyinfo__layout(&info);
	struct pykeys k;
	uint64_t v;

	if (size < 1 + PYKEYS_HDR)
		return 0;
	memset(&info, 0, sizeof(info));
	if (pyoffsets__from_table(versions[data[0] % NVERSIONS], &info))
		abort();
	data++;
	size--;
	if (!pykeys__parse(l, 0x10000, data, &k)) {
		fuzz__assert(k.esize && k.ekey + 8 <= k.esize && k.evalue + 8 <= k.esize);
		fuzz__assert(k.entries > 0x10000 && k.nentries <= (1u << 30));
	}
	/* the int: exactly the bytes there are, for ASan */
	{
		uint8_t *obj = malloc(size);

		fuzz__assert(obj);
		memcpy(obj, data, size);
		pylong__u64(l, obj, size, &v);
		free(obj);
	}
	check_name(data, size, PYNAME_MAX);
	check_name(data, size, 1 + data[0] % 8);
	return 0;
}
