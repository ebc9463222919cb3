// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strsafe.h"

/*
 * Length of the valid UTF-8 sequence at s that may pass unescaped, or 0 when
 * the byte at s must be escaped on its own. *cp gets the code point.
 */
static size_t utf8_len(const unsigned char *s, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t n, i;
	uint32_t v;

	if (c >= 0x20 && c < 0x7f) {
		*cp = c;
		return 1;
	}
	if (c < 0xc2 || c > 0xf4) /* C0, DEL, stray continuation, overlong lead, > U+10FFFF */
		return 0;
	n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	v = c & (0x7f >> n);
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n;
}

/* code points a terminal acts on: C1 controls; bidi overrides reorder what is shown */
static bool cp_unsafe(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

bool strsafe__clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	size_t n;

	while (*p) {
		if (*p >= 0x20 && *p < 0x7f) {
			p++;
			continue;
		}
		n = utf8_len(p, &cp);
		if (!n || cp_unsafe(cp))
			return false;
		p += n;
	}
	return true;
}

size_t strsafe__escape(char *dst, size_t size, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t out = 0, n;
	char esc[8];
	uint32_t cp;

	while (*p) {
		const char *piece;
		size_t len;

		n = utf8_len(p, &cp);
		if (n && !cp_unsafe(cp)) {
			piece = (const char *)p;
			len = n;
		} else if (n) { /* a valid but unsafe code point: one escape for it */
			len = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", cp);
			piece = esc;
		} else {
			len = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
			piece = esc;
			n = 1;
		}
		if (size && out + len < size)
			memcpy(dst + out, piece, len);
		else if (size && out < size)
			size = out + 1; /* full: nothing after a cut escape */
		out += len;
		p += n;
	}
	if (size)
		dst[out < size ? out : size - 1] = '\0';
	return out;
}

void strsafe__inplace(char *s, size_t size)
{
	char *tmp;

	if (!size || strsafe__clean(s))
		return;
	tmp = malloc(size);
	if (!tmp) {
		/* no memory for a copy: cut at the first unsafe byte rather than print it */
		for (unsigned char *p = (unsigned char *)s; *p; p++)
			if (*p < 0x20 || *p >= 0x7f) {
				*p = '\0';
				break;
			}
		return;
	}
	strsafe__escape(tmp, size, s);
	memcpy(s, tmp, strlen(tmp) + 1);
	free(tmp);
}
