// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Chrome Trace Event Format (JSON object form), what chrome://tracing and
 * Perfetto's UI open: {"traceEvents": [...], "displayTimeUnit": "ns",
 * "otherData": {...}}.
 *
 * Timestamps are microseconds counted from the earliest event, so that the
 * numbers stay short whatever the machine's uptime; otherData.clock_origin_ns
 * says which CLOCK_MONOTONIC instant is 0. They are written in steps of
 * 1/1024 µs (0.98 ns), not 1/1000: such a number is exact as a double, so a
 * viewer that computes a slice's end as ts + dur (speedscope does) gets the
 * very number another slice ending or beginning there has. With decimal
 * thousandths 6742.255 + 0.02 != 6742.275 in floating point, and a parent
 * seemed to end after its child, or before the next slice began.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "write/writers.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond Unicode */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/*
 * A JSON string: quotes, backslashes and control characters escaped; bytes
 * that are not valid UTF-8 (a symbol name can hold anything) become U+FFFD
 * so that the file still parses.
 */
static void put_str(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);

	fputc('"', out);
	while (n) {
		size_t len;

		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			if (*p < 0x20) {
				fprintf(out, "\\u%04x", *p);
				break;
			}
			len = utf8_len(p, n);
			if (!len) {
				fputs("\\ufffd", out);
				break;
			}
			fwrite(p, 1, len, out);
			p += len;
			n -= len;
			continue;
		}
		p++;
		n--;
	}
	fputc('"', out);
}

/* ns → 1/1024 µs steps, rounded (symmetric, so that it may be negative). */
static int64_t steps(uint64_t ts, uint64_t origin)
{
	uint64_t d = ts >= origin ? ts - origin : origin - ts;
	/* d * 1024 / 1000 without overflow for any uptime */
	uint64_t q = d / 125 * 128 + ((d % 125) * 128 + 62) / 125;

	return ts >= origin ? (int64_t)q : -(int64_t)q;
}

/* A count of 1/1024 µs as a decimal that parses back to exactly that double. */
static void put_steps(FILE *out, int64_t q)
{
	uint64_t a = q < 0 ? (uint64_t)-q : (uint64_t)q;
	/* 1/1024 = 0.0009765625: ten decimals are exact; trailing zeros dropped */
	uint64_t frac = (a & 1023) * 9765625ULL;
	char digits[16];
	int n;

	snprintf(digits, sizeof(digits), "%010" PRIu64, frac);
	for (n = 10; n > 3 && digits[n - 1] == '0'; n--)
		;
	fprintf(out, "%s%" PRIu64 ".%.*s", q < 0 ? "-" : "", a >> 10, n, digits);
}

static void put_us(FILE *out, uint64_t ts, uint64_t origin)
{
	put_steps(out, steps(ts, origin));
}

static void put_args(FILE *out, const struct tl_arg *args, size_t n)
{
	fputs("{", out);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', out);
		put_str(out, args[i].key);
		fputc(':', out);
		if (args[i].str)
			put_str(out, args[i].str);
		else
			fprintf(out, "%" PRId64, args[i].num);
	}
	fputs("}", out);
}

static void put_meta(FILE *out, int *first, const struct tl_track *t, int thread)
{
	if (t->name) {
		fputs(*first ? "\n" : ",\n", out);
		*first = 0;
		fprintf(out,
			"{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"args\":{\"name\":",
			t->pid, t->tid, thread ? "thread_name" : "process_name");
		put_str(out, t->name);
		fputs("}}", out);
	}
	if (t->sort_index != INT32_MIN) {
		fputs(*first ? "\n" : ",\n", out);
		*first = 0;
		fprintf(out,
			"{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\","
			"\"args\":{\"sort_index\":%d}}",
			t->pid, t->tid, thread ? "thread_sort_index" : "process_sort_index",
			t->sort_index);
	}
}

static void put_event(FILE *out, const struct tl_event *e, uint64_t origin)
{
	fprintf(out, "{\"ph\":\"%c\",\"pid\":%u,", e->ph, e->pid);
	if (e->ph != TL_COUNTER)
		fprintf(out, "\"tid\":%u,", e->tid);
	fputs("\"ts\":", out);
	put_us(out, e->ts, origin);
	if (e->ph == TL_COMPLETE) {
		/* the end rounded as every timestamp is: ts + dur is exactly it */
		fputs(",\"dur\":", out);
		put_steps(out, steps(e->ts + e->dur, origin) - steps(e->ts, origin));
	}
	if (e->ph == TL_FLOW_START || e->ph == TL_FLOW_END)
		fprintf(out, ",\"id\":%" PRIu64, e->id);
	if (e->ph == TL_FLOW_END)
		fputs(",\"bp\":\"e\"", out);
	if (e->name) {
		fputs(",\"name\":", out);
		put_str(out, e->name);
	}
	if (e->cat) {
		fputs(",\"cat\":", out);
		put_str(out, e->cat);
	}
	if ((e->ph == TL_COMPLETE && e->nargs) || e->ph == TL_COUNTER) {
		fputs(",\"args\":", out);
		put_args(out, e->args, e->nargs);
	}
	fputc('}', out);
}

static int cmp_ptr(const void *a, const void *b)
{
	return timeline__event_cmp(*(const struct tl_event *const *)a,
				   *(const struct tl_event *const *)b);
}

int chrome__write(const struct timeline *tl, FILE *out)
{
	const struct tl_event **order = NULL;
	uint64_t origin = 0;
	int first = 1;
	size_t i;

	if (tl->nevents) {
		order = malloc(tl->nevents * sizeof(*order));
		if (!order)
			return -ENOMEM;
		for (i = 0; i < tl->nevents; i++)
			order[i] = &tl->events[i];
		qsort(order, tl->nevents, sizeof(*order), cmp_ptr);
		origin = order[0]->ts;
	}

	fputs("{\"traceEvents\":[", out);
	for (i = 0; i < tl->nprocs; i++)
		put_meta(out, &first, &tl->procs[i], 0);
	for (i = 0; i < tl->nthreads; i++)
		put_meta(out, &first, &tl->threads[i], 1);
	for (i = 0; i < tl->nevents; i++) {
		fputs(first ? "\n" : ",\n", out);
		first = 0;
		put_event(out, order[i], origin);
	}
	fprintf(out,
		"\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"bpfprof\","
		"\"clock\":\"CLOCK_MONOTONIC\",\"clock_origin_ns\":%" PRIu64
		",\"cpu_samples\":%" PRIu64 "}}\n",
		origin, tl->cpu_samples);
	free(order);
	return ferror(out) ? -EIO : 0;
}
