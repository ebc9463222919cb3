// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * bpfprof top: a recording whose output is a live view. A feature of the
 * recorder: every second its poll hook builds a profile from the stack table
 * (symbolized, Python frames merged, exactly what a file would hold), counts
 * each function's self and total share of that second, draws the view and
 * empties the table for the next second. Keys are read from stdin in the
 * same poll (the run loop turns every 100 ms). Without a terminal on stdout
 * it prints one plain-text table per second instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "aggregate/profile_build.h"
#include "cli.h"
#include "collect/record.h"
#include "collect/recorder.h"
#include "collect/writeout.h"
#include "registry.h"
#include "symbolize/ksyms.h"
#include "top/top.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"

#define REFRESH_NS 1000000000ULL
#define PLAIN_ROWS 20

struct fn_stat {
	const char *name;
	int64_t self, total;
};

struct top {
	bool tty, raw, paused, by_total;
	struct termios saved;
	uint64_t next_ns, start_ns;
	struct ksyms *ks;
	struct fn_stat *fns;
	size_t nfns, cap;
	int64_t samples; /* in the shown second */
	uint32_t shown;	 /* refreshes */
};

static int top_setup(struct recorder *r, void **priv)
{
	struct top *t = calloc(1, sizeof(*t));

	(void)r;
	if (!t)
		return -ENOMEM;
	*priv = t;
	t->tty = isatty(STDOUT_FILENO);
	if (!env.no_kernel && ksyms__load(&t->ks, NULL))
		t->ks = NULL;
	return 0;
}

static int top_start(struct recorder *r, void *priv)
{
	struct top *t = priv;

	(void)r;
	t->start_ns = mono_ns();
	t->next_ns = t->start_ns + REFRESH_NS;
	if (t->tty && isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &t->saved)) {
		struct termios raw = t->saved;

		raw.c_lflag &= ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (!tcsetattr(STDIN_FILENO, TCSANOW, &raw))
			t->raw = true;
	}
	if (t->tty) {
		/* alternate screen, cursor hidden */
		fputs("\033[?1049h\033[?25l\033[H\033[2Jbpfprof top: collecting...\n", stdout);
		fflush(stdout);
	}
	return 0;
}

static void top_restore(struct top *t)
{
	if (t->raw) {
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
		t->raw = false;
	}
	if (t->tty) {
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		t->tty = false;
	}
}

static void keys(struct recorder *r, struct top *t)
{
	char c;

	if (!t->raw)
		return;
	while (read(STDIN_FILENO, &c, 1) == 1) {
		switch (c) {
		case 'q':
		case 'Q':
			rec__stop(r);
			break;
		case 's':
			t->by_total = false;
			t->next_ns = 0; /* redraw now */
			break;
		case 't':
			t->by_total = true;
			t->next_ns = 0;
			break;
		case 'p':
		case ' ':
			t->paused = !t->paused;
			t->next_ns = 0;
			break;
		}
	}
}

static struct fn_stat *fn_of(struct top *t, struct htab *idx, const char *name)
{
	struct htab_entry *e;
	size_t len = strlen(name);

	if (htab__upsert(idx, name, len, htab__hash(name, len), &e) < 0)
		return NULL;
	if (e->val)
		return &t->fns[e->val - 1];
	if (array_grow((void **)&t->fns, &t->cap, t->nfns, sizeof(*t->fns), 256))
		return NULL;
	t->fns[t->nfns] = (struct fn_stat){ .name = name };
	e->val = ++t->nfns;
	return &t->fns[t->nfns - 1];
}

static int cmp_fn(const void *a, const void *b, bool by_total)
{
	const struct fn_stat *x = a, *y = b;
	int64_t kx = by_total ? x->total : x->self, ky = by_total ? y->total : y->self;

	if (kx != ky)
		return kx < ky ? 1 : -1;
	return strcmp(x->name, y->name);
}

static int cmp_self(const void *a, const void *b)
{
	return cmp_fn(a, b, false);
}

static int cmp_total(const void *a, const void *b)
{
	return cmp_fn(a, b, true);
}

/* Self and total samples per function name, from the second's profile. */
static void tally(struct top *t, const struct profile *p)
{
	struct htab *idx = htab__new(1024, HTAB_COPY_KEYS);
	struct htab *seen;

	t->nfns = 0;
	t->samples = 0;
	if (!idx)
		return;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		int64_t n = s->values[p->default_value];
		bool leaf = true;

		if (env.thread_filter) { /* --thread: its "name [tid]" frame must match */
			bool match = false;

			for (uint32_t j = 0; j < s->nframes && !match; j++) {
				const struct pframe *f = &p->frames[s->frames[j]];

				if (f->kind != FRAME_ROOT)
					break;
				match = j > 0 && strstr(f->name, env.thread_filter);
			}
			if (!match)
				continue;
		}
		t->samples += n;
		seen = htab__new(64, HTAB_COPY_KEYS);
		for (uint32_t j = s->nframes; j-- > 0;) {
			const struct pframe *f = &p->frames[s->frames[j]];
			struct fn_stat *fs;
			struct htab_entry *e;
			size_t len = strlen(f->name);

			if (f->kind == FRAME_ROOT)
				continue;
			fs = fn_of(t, idx, f->name);
			if (!fs)
				continue;
			if (leaf)
				fs->self += n;
			leaf = false;
			/* recursion counts once towards total */
			if (seen &&
			    htab__upsert(seen, f->name, len, htab__hash(f->name, len), &e) == 0)
				continue;
			fs->total += n;
		}
		htab__free(seen);
	}
	htab__free(idx);
	qsort(t->fns, t->nfns, sizeof(*t->fns), t->by_total ? cmp_total : cmp_self);
}

/*
 * Bytes of s that fill at most cols columns, cut at a character boundary:
 * cutting by bytes could split a UTF-8 sequence (the terminal shows garbage
 * and may swallow what follows) and wastes columns on multi-byte names.
 * One column per character: names are escaped (strsafe), so no controls.
 */
static int fit_cols(const char *s, int cols)
{
	const unsigned char *p = (const unsigned char *)s;
	int i = 0;

	for (; cols > 0 && p[i]; cols--) {
		i++;
		while ((p[i] & 0xc0) == 0x80)
			i++;
	}
	return i;
}

static void draw(struct top *t, uint64_t now)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	int rows, cols, name_w;
	double secs = (now - t->start_ns) / 1e9;
	const char *target = env.all ? "all processes" : env.cmd_argv ? env.cmd_argv[0] : "pid";

	if (t->tty) {
		ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
		if (ws.ws_row < 8)
			ws.ws_row = 8;
		if (ws.ws_col < 40)
			ws.ws_col = 40;
	}
	rows = t->tty ? ws.ws_row - 4 : PLAIN_ROWS;
	cols = t->tty ? ws.ws_col : 120;
	name_w = cols - 17;
	if (t->tty)
		printf("\033[H\033[2J");
	else
		printf("\n");
	printf("bpfprof top: %s%s%s, %.0f s, %lld samples in the last second%s\n", target,
	       env.thread_filter ? ", threads ~ " : "", env.thread_filter ? env.thread_filter : "",
	       secs, (long long)t->samples, t->paused ? " [paused]" : "");
	if (t->tty)
		printf("keys: s self  t total  p pause  q quit        sorted by %s\n",
		       t->by_total ? "total" : "self");
	printf("%7s %7s  %s\n", "%self", "%total", "function");
	for (int i = 0; i < rows && (size_t)i < t->nfns; i++) {
		const struct fn_stat *f = &t->fns[i];
		double d = t->samples ? 100.0 / t->samples : 0;

		printf("%6.1f%% %6.1f%%  %.*s\n", f->self * d, f->total * d,
		       fit_cols(f->name, name_w), f->name);
	}
	fflush(stdout);
}

static void top_poll(struct recorder *r, void *priv)
{
	struct top *t = priv;
	uint64_t now = mono_ns();
	struct build_opts bo = { .per_thread = env.per_thread || env.thread_filter };
	struct build_stats bs;
	struct profile *p = NULL;

	writeout__python(r, &bo);
	keys(r, t);
	if (now < t->next_ns)
		return;
	t->next_ns = now + REFRESH_NS;
	if (t->paused) {
		if (t->tty)
			draw(t, now);
		return;
	}
	memcpy(bo.value_types, r->values, sizeof(r->values));
	bo.nvalues = r->nvalues;
	bo.default_value = r->cpu_samples >= 0 ? r->cpu_samples : 0;
	bo.count_value = bo.default_value;
	if (!profile__build(&p, r->stacks, r->objs, t->ks, &bo, &bs)) {
		tally(t, p);
		t->shown++;
		draw(t, now);
	}
	profile__free(p);
	/* the next second starts empty */
	stacks__free(r->stacks);
	r->stacks = stacks__new();
	if (!r->stacks) {
		pr_err("out of memory");
		rec__stop(r);
	}
}

static void top_stop(struct recorder *r, void *priv)
{
	(void)r;
	top_restore(priv);
}

static void top_destroy(struct recorder *r, void *priv)
{
	struct top *t = priv;

	(void)r;
	if (!t)
		return;
	top_restore(t);
	ksyms__free(t->ks);
	free(t->fns);
	free(t);
}

static const struct rec_feature top_feature = {
	.name = "top",
	.setup = top_setup,
	.start = top_start,
	.poll = top_poll,
	.stop = top_stop,
	.destroy = top_destroy,
};

int top__run(void)
{
	if (env.output) {
		pr_err("top shows its view on the terminal: -o is for record");
		return EXIT_USAGE;
	}
	if (env.thread_filter)
		env.per_thread = true; /* samples keep their thread */
	env.ev_cpu = true;
	return record__run(&(struct rec_mode){
		.name = "top", .features = rec_features, .view = &top_feature });
}
