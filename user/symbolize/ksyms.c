/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ksyms: /proc/kallsyms parsed into one sorted array. The names are packed
 * into the same buffer the file was read into (a name never moves forward, so
 * this is done in place), which keeps a 120k-line kallsyms to a few MiB and
 * the load to one pass over the text plus, only if needed, one sort.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/ksyms.h"

/* ksym.name of an entry that only ends the one before it. */
#define KSYM_BOUNDARY UINT32_MAX
/* Modules are interned; 0 is vmlinux. */
#define KSYM_MAX_MODS UINT16_MAX

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset in ks->pool, or KSYM_BOUNDARY */
	uint16_t mod;  /* index in ks->mods; 0 for vmlinux */
	uint8_t bind;  /* 2 global, 1 weak, 0 local: picks among aliases */
	uint8_t pad;
};

struct ksyms {
	struct ksym *syms;
	size_t nsyms;
	uint64_t ntext;
	char *pool;
	uint32_t *mods; /* pool offsets of module names; mods[0] unused */
	size_t nmods;
};

static int read_all(const char *path, char **bufp, size_t *lenp)
{
	size_t cap = 8 << 20, len = 0;
	char *buf, *tmp;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		/* Keep one spare byte so the last line can be NUL terminated. */
		if (cap - len < 2) {
			tmp = realloc(buf, cap * 2);
			if (!tmp) {
				err = -ENOMEM;
				goto out;
			}
			buf = tmp;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	*bufp = buf;
	*lenp = len;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * The linker-script markers that end a text region. They are T symbols, but
 * an address at or past one of them is not in the function before it.
 */
static bool is_text_end(const char *name, size_t len)
{
	return (len == 6 && !memcmp(name, "_etext", 6)) ||
	       (len == 10 && !memcmp(name, "_einittext", 10));
}

static int leading_underscores(const char *s)
{
	int n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/*
 * Among aliases of one address the kernel's own markers (_stext, _sinittext,
 * __pfx_ padding, ...) carry leading underscores and say less than the
 * function they sit on, so fewer underscores wins before binding does.
 */
static int alias_cmp(const struct ksyms *ks, const struct ksym *a, const struct ksym *b)
{
	const char *na, *nb;
	int ua, ub;

	if ((a->name == KSYM_BOUNDARY) != (b->name == KSYM_BOUNDARY))
		return a->name == KSYM_BOUNDARY ? 1 : -1;
	if (a->name == KSYM_BOUNDARY)
		return 0;
	na = ks->pool + a->name;
	nb = ks->pool + b->name;
	ua = leading_underscores(na);
	ub = leading_underscores(nb);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (a->bind != b->bind)
		return a->bind > b->bind ? -1 : 1;
	return strcmp(na, nb);
}

static int ksym_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct ksym *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return alias_cmp(ctx, a, b);
}

/* Returns 1 when name was already known, 0 when it was added, or -errno. */
static int intern_mod(struct ksyms *ks, size_t *cap, uint32_t name, uint16_t *idx)
{
	uint32_t *tmp;
	size_t i;

	/* A module's lines are contiguous, so the last one usually matches. */
	for (i = ks->nmods; i-- > 1;) {
		if (!strcmp(ks->pool + ks->mods[i], ks->pool + name)) {
			*idx = i;
			return 1;
		}
	}
	if (ks->nmods > KSYM_MAX_MODS)
		return -E2BIG;
	if (ks->nmods == *cap) {
		*cap *= 2;
		tmp = realloc(ks->mods, *cap * sizeof(*tmp));
		if (!tmp)
			return -ENOMEM;
		ks->mods = tmp;
	}
	ks->mods[ks->nmods] = name;
	*idx = ks->nmods++;
	return 0;
}

/*
 * Parse one line "ADDR TYPE NAME[\t[MODULE]]" starting at *p, appending the
 * kept strings at *w (never past *p). Returns 1 when *sym was filled, 0 for a
 * line that is skipped, or -errno.
 */
static int parse_line(struct ksyms *ks, char **pp, char **wp, size_t *modcap, struct ksym *sym,
		      bool *nonzero)
{
	char *p = *pp, *w = *wp, *name, *mod = NULL;
	size_t name_len, mod_len = 0;
	uint64_t addr = 0;
	int digits = 0, v, err;
	char type;

	while ((v = hexval(*p)) >= 0) {
		addr = addr << 4 | v;
		digits++;
		p++;
	}
	if (!digits || digits > 16 || *p != ' ')
		goto skip;
	type = p[1];
	if (!((type | 0x20) >= 'a' && (type | 0x20) <= 'z') || p[2] != ' ')
		goto skip;
	p += 3;
	name = p;
	while (*p && *p != '\t' && *p != ' ' && *p != '\n')
		p++;
	name_len = p - name;
	while (*p == '\t' || *p == ' ')
		p++;
	if (*p == '[') {
		mod = ++p;
		while (*p && *p != ']' && *p != '\n')
			p++;
		if (*p != ']')
			goto skip;
		mod_len = p - mod;
	}
	while (*p && *p != '\n')
		p++;
	if (*p)
		p++;
	*pp = p;
	if (!name_len)
		return 0;

	memset(sym, 0, sizeof(*sym));
	sym->addr = addr;
	switch (type) {
	case 'T':
		sym->bind = 2;
		break;
	case 'W':
	case 'w':
		sym->bind = 1;
		break;
	case 't':
		sym->bind = 0;
		break;
	default:
		/*
		 * Data, rodata, bss and absolute symbols are not functions,
		 * but an address in them is in no function either.
		 */
		if (type == 'a' || type == 'A' || type == 'U' || !addr)
			return 0;
		sym->name = KSYM_BOUNDARY;
		break;
	}
	if (sym->name != KSYM_BOUNDARY && is_text_end(name, name_len))
		sym->name = KSYM_BOUNDARY;

	if (sym->name != KSYM_BOUNDARY) {
		if (addr)
			*nonzero = true;
		memmove(w, name, name_len);
		sym->name = w - ks->pool;
		w += name_len;
		*w++ = '\0';
	}
	if (mod_len) {
		memmove(w, mod, mod_len);
		w[mod_len] = '\0';
		err = intern_mod(ks, modcap, w - ks->pool, &sym->mod);
		if (err < 0)
			return err;
		/* A new module keeps its name where it was just written. */
		if (!err)
			w += mod_len + 1;
	}
	*wp = w;
	return 1;
skip:
	while (*p && *p != '\n')
		p++;
	if (*p)
		p++;
	*pp = p;
	return 0;
}

/* Returns the length of the packed string pool, or -errno. */
static ssize_t parse(struct ksyms *ks, size_t len, bool *nonzero)
{
	size_t cap = len / 32 + 16, modcap = 64;
	char *p = ks->pool, *w = ks->pool, *end = ks->pool + len;
	struct ksym sym, *tmp;
	int ret;

	ks->syms = malloc(cap * sizeof(*ks->syms));
	ks->mods = malloc(modcap * sizeof(*ks->mods));
	if (!ks->syms || !ks->mods)
		return -ENOMEM;
	/* mods[0] stands for vmlinux, which has no name. */
	ks->mods[0] = 0;
	ks->nmods = 1;

	while (p < end) {
		char *line = p;

		ret = parse_line(ks, &p, &w, &modcap, &sym, nonzero);
		if (ret < 0)
			return ret;
		/* a NUL byte inside the text ends no line: step over it, or loop on it */
		if (p == line)
			p++;
		if (!ret)
			continue;
		if (ks->nsyms == cap) {
			cap *= 2;
			tmp = realloc(ks->syms, cap * sizeof(*tmp));
			if (!tmp)
				return -ENOMEM;
			ks->syms = tmp;
		}
		ks->syms[ks->nsyms++] = sym;
	}
	return w - ks->pool;
}

/* Sort by address and keep one entry per address: the best-named alias. */
static void sort_dedup(struct ksyms *ks)
{
	size_t i, n = 0;
	bool sorted = true;

	/* vmlinux comes sorted; only module lines may need the sort. */
	for (i = 1; i < ks->nsyms && sorted; i++)
		sorted = ksym_cmp(&ks->syms[i - 1], &ks->syms[i], ks) <= 0;
	if (!sorted)
		qsort_r(ks->syms, ks->nsyms, sizeof(*ks->syms), ksym_cmp, ks);

	for (i = 0; i < ks->nsyms; i++) {
		if (n && ks->syms[n - 1].addr == ks->syms[i].addr)
			continue;
		ks->syms[n++] = ks->syms[i];
	}
	ks->nsyms = n;
	ks->ntext = 0;
	for (i = 0; i < n; i++)
		ks->ntext += ks->syms[i].name != KSYM_BOUNDARY;
}

int ksyms__load(struct ksyms **out, const char *path)
{
	struct ksyms *ks;
	bool nonzero = false;
	ssize_t pool_len;
	size_t len = 0;
	void *tmp;
	int err;

	*out = NULL;
	ks = calloc(1, sizeof(*ks));
	if (!ks)
		return -ENOMEM;
	err = read_all(path ? path : "/proc/kallsyms", &ks->pool, &len);
	if (err)
		goto err_out;
	/* Pool offsets are 32 bits; no real kallsyms comes near 4 GiB. */
	if (len >= KSYM_BOUNDARY) {
		err = -EFBIG;
		goto err_out;
	}
	pool_len = parse(ks, len, &nonzero);
	if (pool_len < 0) {
		err = pool_len;
		goto err_out;
	}
	sort_dedup(ks);
	if (!ks->ntext) {
		err = -ENODATA;
		goto err_out;
	}
	/* kptr_restrict shows every address as zero to those it hides them from. */
	if (!nonzero) {
		err = -EPERM;
		goto err_out;
	}

	tmp = realloc(ks->pool, pool_len ? pool_len : 1);
	if (tmp)
		ks->pool = tmp;
	tmp = realloc(ks->syms, ks->nsyms * sizeof(*ks->syms));
	if (tmp)
		ks->syms = tmp;
	*out = ks;
	return 0;
err_out:
	ksyms__free(ks);
	return err;
}

void ksyms__free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->mods);
	free(ks->syms);
	free(ks->pool);
	free(ks);
}

/*
 * Where the symbol at index i ends. Within a module (or vmlinux) the next
 * entry ends it; the last one of a module has no known end, so like perf we
 * allow it the rest of its page and one more.
 */
static uint64_t ksym_end(const struct ksyms *ks, size_t i)
{
	const struct ksym *s = &ks->syms[i];
	uint64_t cap = (s->addr | 4095) + 1 + 4096;

	if (cap < s->addr)
		cap = UINT64_MAX;
	if (i + 1 < ks->nsyms) {
		if (ks->syms[i + 1].mod == s->mod)
			return ks->syms[i + 1].addr;
		if (ks->syms[i + 1].addr < cap)
			return ks->syms[i + 1].addr;
	}
	return cap;
}

const char *ksyms__lookup(const struct ksyms *ks, uint64_t addr, uint64_t *off, const char **module)
{
	size_t lo = 0, hi, mid;
	const struct ksym *s;

	if (!ks || !ks->nsyms)
		return NULL;
	hi = ks->nsyms;
	/* Find the last entry whose address is <= addr. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ks->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &ks->syms[lo - 1];
	if (s->name == KSYM_BOUNDARY || addr >= ksym_end(ks, lo - 1))
		return NULL;
	if (off)
		*off = addr - s->addr;
	if (module)
		*module = s->mod ? ks->pool + ks->mods[s->mod] : NULL;
	return ks->pool + s->name;
}

uint64_t ksyms__count(const struct ksyms *ks)
{
	return ks ? ks->ntext : 0;
}
