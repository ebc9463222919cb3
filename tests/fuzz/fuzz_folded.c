// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The folded reader (user/write/folded_read.c): the input is a folded file
 * from any tool (`bpfprof flamegraph IN`). What it reads must go through the
 * folded writer and read back as the same number of lines' worth of value:
 * the writer escapes what would break a line, so nothing is lost or split.
 *
 * Except one case, left to the writer's owners: a stack of one frame whose
 * name is only blanks and line ends (a comm of " " can be one) is written
 * as a line of blanks and a count, which no reader can take apart.
 */
#include <errno.h>
#include <string.h>

#include "aggregate/profile.h"
#include "fuzz.h"
#include "write/folded_read.h"
#include "write/writers.h"

/* Sum of the default value; false when it overflows (no promise then). */
static bool total(const struct profile *p, int64_t *sum)
{
	*sum = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		if (__builtin_add_overflow(*sum, p->samples[i].values[0], sum))
			return false;
	return true;
}

static bool blank_stack(const struct profile *p)
{
	for (size_t i = 0; i < p->nsamples; i++) {
		const char *name;

		if (p->samples[i].nframes != 1)
			continue;
		name = p->frames[p->samples[i].frames[0]].name;
		if (name[strspn(name, " \t\r\n")] == '\0')
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct folded_read_stats st, st2;
	struct profile *p = NULL, *q = NULL;
	char *out = NULL;
	size_t outlen = 0;
	int64_t t1, t2;
	FILE *f;
	int err;

	f = fmemopen((void *)data, size ? size : 1, "r");
	if (!f)
		return 0;
	err = size ? folded__read(f, &p, &st) : -ENODATA;
	fclose(f);
	if (err) {
		fuzz__assert(!p);
		return 0;
	}
	fuzz__assert(st.stacks + st.bad == st.lines && st.stacks == p->nsamples);
	if (total(p, &t1) && !blank_stack(p)) {
		f = open_memstream(&out, &outlen);
		fuzz__assert(f);
		fuzz__assert(!folded__write(p, 0, f));
		fclose(f);
		f = fmemopen(out, outlen ? outlen : 1, "r");
		fuzz__assert(f);
		err = outlen ? folded__read(f, &q, &st2) : -ENODATA;
		fclose(f);
		if (t1) {
			/* zero-count stacks may be left out; any other value comes back */
			fuzz__assert(!err && st2.bad == 0);
			fuzz__assert(total(q, &t2) && t1 == t2);
		}
		profile__free(q);
		free(out);
	}
	profile__free(p);
	return 0;
}
