// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/profile.h"
#include "write/folded_read.h"

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t m = strlen(suffix);

	return len >= m && !memcmp(s + len - m, suffix, m);
}

static bool all_digits(const char *s, size_t len)
{
	size_t i;

	if (!len)
		return false;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* "qualname (file:line)": the last " (" opens "file:line)" with a non-empty file. */
static bool is_python(const char *s, size_t len)
{
	const char *open = NULL, *colon = NULL, *p;

	if (len < 7 || s[len - 1] != ')')
		return false;
	for (p = s + len - 2; p > s; p--) {
		if (!colon && *p == ':')
			colon = p;
		if (p[0] == '(' && p[-1] == ' ') {
			open = p;
			break;
		}
	}
	return open && colon && colon > open + 1 && open > s + 1 &&
	       all_digits(colon + 1, (size_t)(s + len - 1 - colon - 1));
}

uint32_t folded__guess_kind(const char *s, size_t len, uint32_t depth)
{
	const char *br;

	if (!depth)
		return FRAME_ROOT;
	if (ends_with(s, len, "_[k]"))
		return FRAME_KERNEL;
	if (len > 7 && !memcmp(s, "[cuda] ", 7))
		return FRAME_CUDA;
	if (is_python(s, len))
		return FRAME_PYTHON;
	/* "comm [pid]", "thread [tid]" */
	if (len > 4 && s[len - 1] == ']') {
		br = memrchr(s, '[', len);
		if (br && br > s + 1 && br[-1] == ' ' &&
		    all_digits(br + 1, (size_t)(s + len - 2 - br)))
			return FRAME_ROOT;
	}
	return FRAME_NATIVE;
}

/* Parse "COUNT" at the end of line[0..len): a non-negative int64 after the last blank. */
static bool split_count(char *line, size_t *len, int64_t *count)
{
	size_t n = *len, i;
	uint64_t v = 0;

	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	for (i = n; i && line[i - 1] != ' ' && line[i - 1] != '\t'; i--)
		;
	if (!i || !all_digits(line + i, n - i) || n - i > 19)
		return false;
	for (size_t k = i; k < n; k++)
		v = v * 10 + (uint64_t)(line[k] - '0');
	if (v > INT64_MAX)
		return false;
	*count = (int64_t)v;
	/* the stack ends before the blanks that precede the count */
	while (i && (line[i - 1] == ' ' || line[i - 1] == '\t'))
		i--;
	*len = i;
	return i > 0;
}

static int add_line(struct profile *p, char *line, size_t len, int64_t count, uint32_t **frames,
		    size_t *cap)
{
	int64_t values[PROFILE_MAX_VALUES] = { count };
	size_t n = 0, start = 0, i;
	int idx;

	for (i = 0; i <= len; i++) {
		struct pframe f = { .mapping = -1 };

		if (i < len && line[i] != ';')
			continue;
		if (n >= UINT32_MAX)
			return -E2BIG;
		if (n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			uint32_t *tmp = realloc(*frames, ncap * sizeof(**frames));

			if (!tmp)
				return -ENOMEM;
			*frames = tmp;
			*cap = ncap;
		}
		line[i] = '\0';
		/* an empty frame ("a;;b") is a frame nobody could name */
		f.name = i > start ? line + start : "[unknown]";
		f.kind = folded__guess_kind(f.name, strlen(f.name), (uint32_t)n);
		idx = profile__add_frame(p, &f);
		if (idx < 0)
			return idx;
		(*frames)[n++] = (uint32_t)idx;
		start = i + 1;
	}
	return profile__add_sample(p, *frames, (uint32_t)n, values, NULL, 0);
}

int folded__read(FILE *f, struct profile **out, struct folded_read_stats *st)
{
	struct profile *p = profile__new();
	uint32_t *frames = NULL;
	size_t cap = 0, bufsz = 0, len;
	uint64_t lineno = 0;
	char *line = NULL;
	ssize_t got;
	int64_t count;
	int err = -ENOMEM;

	*out = NULL;
	memset(st, 0, sizeof(*st));
	if (!p || profile__add_value_type(p, "samples", "count") < 0)
		goto cleanup;
	p->default_value = 0;
	errno = 0;
	while ((got = getline(&line, &bufsz, f)) >= 0) {
		lineno++;
		len = (size_t)got;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			       line[len - 1] == ' ' || line[len - 1] == '\t'))
			len--;
		if (!len)
			continue;
		st->lines++;
		if (!split_count(line, &len, &count)) {
			if (!st->bad++)
				st->first_bad = lineno;
			continue;
		}
		err = add_line(p, line, len, count, &frames, &cap);
		if (err)
			goto cleanup;
		st->stacks++;
	}
	if (ferror(f)) {
		err = errno ? -errno : -EIO;
		goto cleanup;
	}
	if (!st->stacks) {
		err = -ENODATA;
		goto cleanup;
	}
	*out = p;
	p = NULL;
	err = 0;
cleanup:
	free(line);
	free(frames);
	profile__free(p);
	return err;
}
