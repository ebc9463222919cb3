/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Strings a process controls (comm, thread names, Python qualnames and
 * paths, cgroup names, symbol names) made safe for a terminal or a text
 * format: C0 controls, DEL and bytes that are not UTF-8 become a visible
 * \xNN; C1 controls and bidirectional overrides (valid UTF-8 a terminal
 * acts on) become \uNNNN. Other UTF-8 passes unchanged, and so does a
 * backslash: escaping an escaped string changes nothing.
 */
#ifndef BPFPROF_STRSAFE_H
#define BPFPROF_STRSAFE_H

#include <stdbool.h>
#include <stddef.h>

/* true when s has nothing to escape (the common case: no copy needed) */
bool strsafe__clean(const char *s);

/*
 * Escape s into dst (size bytes, always NUL-terminated when size > 0, cut
 * at a whole escape). Returns the length the whole escaped string needs,
 * not counting the NUL, as snprintf does.
 */
size_t strsafe__escape(char *dst, size_t size, const char *s);

/* Escape s in place in a buffer of size bytes (cut to fit). */
void strsafe__inplace(char *s, size_t size);

#endif
