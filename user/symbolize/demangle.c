/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* C++ names through libstdc++'s demangler, so that no libiberty is needed. */
#include <stdlib.h>
#include <string.h>

#include "symbolize/elfsym.h"

/* From <cxxabi.h>, which is C++ only; the function itself has C linkage. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *demangle(const char *name)
{
	const char *ver;
	char *base = NULL, *out, *res;
	size_t olen, vlen;
	int status = 0;

	if (!name || strncmp(name, "_Z", 2))
		return NULL;

	/*
	 * .symtab names of versioned symbols carry "@VER" or "@@VER", which the
	 * demangler rejects: demangle what is before it and keep the version.
	 */
	ver = strchr(name, '@');
	if (ver) {
		base = strndup(name, ver - name);
		if (!base)
			return NULL;
	}
	out = __cxa_demangle(base ? base : name, NULL, NULL, &status);
	free(base);
	if (!out || status) {
		free(out);
		return NULL;
	}
	if (!ver)
		return out;

	olen = strlen(out);
	vlen = strlen(ver);
	res = realloc(out, olen + vlen + 1);
	if (!res) {
		free(out);
		return NULL;
	}
	memcpy(res + olen, ver, vlen + 1);
	return res;
}
