// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pythreads: the names the threading module gave its threads, read out of a
 * live CPython.
 *
 * threading keeps every running Thread in its module global _active, a dict
 * {ident: Thread}; ident is threading.get_ident(), the pthread_t that
 * PyThreadState.thread_id holds too, and the name is the Thread's _name
 * attribute. So: interpreter -> modules dict -> "threading" -> its globals
 * -> "_active" -> each (int, Thread) -> the Thread's attributes -> "_name".
 *
 * A str key cannot be hashed here (CPython keys its str hash per process),
 * so a lookup scans the table comparing keys; it remembers where it found
 * its key (struct pyhint) and tries there first next time: a refresh costs
 * a handful of reads per thread once the hints are warm.
 *
 * Layouts (pyimpl.h): PyDictKeysObject 3.8-3.10 (dk_size, 24-byte entries)
 * and 3.11+ (log2 sizes, 16-byte entries in str-only tables); a Thread's
 * attributes in a dict at tp_dictoffset (3.8-3.10), or in values shared
 * with its class's keys (ht_cached_keys) stored before the object (3.11,
 * 3.12) or inside it (3.13+), or in a dict once one was made (3.13+: its
 * pointer 3 words before the object, 1 in free-threaded builds).
 *
 * Nothing is trusted: every object's type is checked by name, sizes and
 * counts are bounded by CPython's own invariants, loops are bounded.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "python/pyimpl.h"

/* Entries scanned in one table: a modules dict has hundreds, never this many. */
#define MAX_SCAN (1u << 16)
/* Entries read from the target at once while scanning. */
#define CHUNK	    64
#define MAX_INTERPS 8
/* Code points of a name read; PYNAME_MAX bytes of them are kept. */
#define NAME_READ_CHARS 128
/* tp_dictoffset beyond this is not a Python class's. */
#define MAX_DICTOFFSET 4096
/* A dict table beyond 2^26 slots is not one a process here has. */
#define MAX_LOG2_SIZE 26

#define TPFLAGS_INLINE_VALUES (1UL << 2) /* 3.13+ */
#define TPFLAGS_MANAGED_DICT  (1UL << 4) /* 3.11+ */
#define TPFLAGS_HEAPTYPE      (1UL << 9)

/* ---- pure decoding ---- */

int pykeys__parse(const struct pylayout *l, uint64_t addr, const uint8_t *hdr, struct pykeys *k)
{
	uint64_t nentries, size, index_bytes;

	memset(k, 0, sizeof(*k));
	if (l->keys_fmt == PY_KEYS_SIZE) {
		/* refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, dk_indices */
		size = get_u64(hdr, 8);
		nentries = get_u64(hdr, 32);
		if (size < 8 || size > (1ULL << MAX_LOG2_SIZE) || (size & (size - 1)))
			return -EINVAL;
		index_bytes = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
		k->entries = addr + 40 + index_bytes;
		k->esize = 24;
		k->ekey = 8;
		k->evalue = 16;
	} else if (l->keys_fmt == PY_KEYS_LOG2) {
		/* refcnt, log2_size, log2_index_bytes, kind, version, usable, nentries */
		uint8_t log2 = hdr[8], log2_ix = hdr[9], kind = hdr[10], want;

		if (log2 < 3 || log2 > MAX_LOG2_SIZE || kind > 2)
			return -EINVAL;
		want = log2 < 8 ? log2 : log2 < 16 ? log2 + 1 : log2 + 2;
		if (log2_ix != want)
			return -EINVAL;
		size = 1ULL << log2;
		nentries = get_u64(hdr, 24);
		k->entries = addr + 32 + (1ULL << log2_ix);
		/* DICT_KEYS_GENERAL: hash, key, value; UNICODE and SPLIT: key, value */
		k->esize = kind ? 16 : 24;
		k->ekey = kind ? 0 : 8;
		k->evalue = kind ? 8 : 16;
	} else {
		return -EINVAL;
	}
	/* USABLE_FRACTION: a table holds at most 2/3 of its size in entries */
	if (nentries > (size << 1) / 3)
		return -EINVAL;
	k->nentries = (uint32_t)nentries;
	return 0;
}

int pylong__u64(const struct pylayout *l, const uint8_t *obj, size_t len, uint64_t *v)
{
	uint64_t ndigits, val = 0;

	if (l->long_size < 0 || l->long_digits < 0 || (size_t)l->long_size + 8 > len)
		return -EINVAL;
	if (l->long_fmt == PY_LONG_SIZE) {
		int64_t size = (int64_t)get_u64(obj, l->long_size);

		if (size < 0)
			return -EINVAL;
		ndigits = (uint64_t)size;
	} else if (l->long_fmt == PY_LONG_TAG) {
		uint64_t tag = get_u64(obj, l->long_size);

		/* sign (low 2 bits) 0: positive, 1: zero, 2: negative; bit 2 is not ours */
		if ((tag & 3) >= 2)
			return -EINVAL;
		ndigits = (tag & 3) == 1 ? 0 : tag >> 3;
	} else {
		return -EINVAL;
	}
	if (ndigits > 3)
		return -EINVAL;
	if ((size_t)l->long_digits + 4 * ndigits > len)
		return -ENOSPC;
	for (uint64_t i = 0; i < ndigits; i++) {
		uint32_t d = get_u32(obj, l->long_digits + 4 * (int32_t)i);

		if (d >> 30 || (i == 2 && d >> 4))
			return -EINVAL;
		val |= (uint64_t)d << (30 * i);
	}
	*v = val;
	return 0;
}

/* Bytes of the UTF-8 sequence s starts, 0 if s does not start one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n = s[0] < 0x80		   ? 1
		   : (s[0] & 0xe0) == 0xc0 ? 2
		   : (s[0] & 0xf0) == 0xe0 ? 3
		   : (s[0] & 0xf8) == 0xf0 ? 4
					   : 0;

	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void pyname__clean(const char *in, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t w = 0;

	if (!outlen)
		return;
	while (*s) {
		size_t n = utf8_len(s);

		if (!n)
			break;
		if (n == 1 && (*s < 0x20 || *s == 0x7f)) {
			/* visibly, as strsafe does everywhere else: "\x1b", not a '?' */
			if (w + 4 >= outlen)
				break;
			out[w++] = '\\';
			out[w++] = 'x';
			out[w++] = "0123456789abcdef"[*s >> 4];
			out[w++] = "0123456789abcdef"[*s & 15];
			s++;
			continue;
		}
		if (w + n >= outlen)
			break;
		memcpy(out + w, s, n);
		w += n;
		s += n;
	}
	out[w] = '\0';
}

/* ---- reading the target ---- */

struct rd {
	pid_t pid;
	const struct pylayout *l;
	struct pytypememo memo;
	/* the types of the Thread objects seen (Thread, _MainThread, subclasses) */
	struct {
		uint64_t addr, flags, cached_keys;
		int64_t basicsize, dictoffset;
	} types[4];
	unsigned ntypes;
	/* the last keys object parsed (the Threads of a class share theirs) */
	uint64_t keys;
	struct pykeys k;
	/* the last entry whose key was proven to be the str looked for */
	struct {
		uint64_t keys, key;
		uint32_t ix;
		const char *want;
	} match;
};

/* A dict's table: its keys, and for a split table its values. */
struct table {
	uint64_t keys;
	uint64_t values; /* split: address of values[0]; combined: 0 */
	struct pykeys k;
};

/* Errors that say the memory was not what it should be, unified. */
static int bad(int err)
{
	return err == -ESRCH || err == -ENOMEM ? err : -EINVAL;
}

static int rd_u64(struct rd *r, uint64_t addr, uint64_t *v)
{
	return pymem__read_u64(r->pid, addr, v);
}

static int check_type(struct rd *r, uint64_t obj, enum py_type which)
{
	uint64_t type;
	int err = rd_u64(r, obj + r->l->ob_type, &type);

	return err ? bad(err) : pytype__check(r->pid, r->l, &r->memo, which, type);
}

static int table_load(struct rd *r, uint64_t keys, uint64_t values, struct table *t)
{
	uint8_t hdr[PYKEYS_HDR];
	int err;

	t->keys = keys;
	t->values = values ? values + r->l->values_off : 0;
	if (keys && keys == r->keys) {
		t->k = r->k;
		return 0;
	}
	err = pymem__read(r->pid, keys, hdr, sizeof(hdr));
	if (err)
		return bad(err);
	err = pykeys__parse(r->l, keys, hdr, &t->k);
	if (err)
		return err;
	r->keys = keys;
	r->k = t->k;
	return 0;
}

static int dict_table(struct rd *r, uint64_t dict, struct table *t)
{
	const struct pylayout *l = r->l;
	uint8_t hdr[128];
	int err;

	if ((size_t)l->dict_values + 8 > sizeof(hdr) || l->dict_keys < 0 || l->dict_values < 0)
		return -EINVAL;
	err = pymem__read(r->pid, dict, hdr, (size_t)l->dict_values + 8);
	if (err)
		return bad(err);
	err = pytype__check(r->pid, l, &r->memo, PY_T_DICT, get_u64(hdr, l->ob_type));
	if (err)
		return err;
	return table_load(r, get_u64(hdr, l->dict_keys), get_u64(hdr, l->dict_values), t);
}

/* Value of entry ix of a split table. */
static int split_value(struct rd *r, const struct table *t, uint32_t ix, uint64_t *v)
{
	int err = rd_u64(r, t->values + 8ULL * ix, v);

	return err ? bad(err) : 0;
}

/* 1 when the object at addr is the compact ASCII str want, 0 when not, -ESRCH. */
static int str_is(struct rd *r, uint64_t addr, const char *want)
{
	const struct pylayout *l = r->l;
	size_t n = strlen(want), hs = l->str_ascii_size;
	uint8_t buf[256];
	uint32_t state;
	unsigned sh = l->str_kind_shift;
	int err;

	if (hs + n > sizeof(buf))
		return 0;
	err = pymem__read(r->pid, addr, buf, hs + n);
	if (err)
		return err == -ESRCH ? err : 0;
	if ((uint64_t)get_u64(buf, l->str_length) != n)
		return 0;
	state = get_u32(buf, l->str_state);
	/* kind 1, compact, ascii */
	if (((state >> sh) & 7) != 1 || !((state >> (sh + 3)) & 1) || !((state >> (sh + 4)) & 1))
		return 0;
	if (memcmp(buf + hs, want, n))
		return 0;
	err = pytype__check(r->pid, l, &r->memo, PY_T_STR, get_u64(buf, l->ob_type));
	return err == -ESRCH ? err : !err;
}

/*
 * Entries [from, from + n) of a table, key and value each (a split table's
 * values are read only for a key that matches).
 */
static int read_entries(struct rd *r, const struct table *t, uint32_t from, uint32_t n,
			uint64_t *key, uint64_t *val)
{
	uint8_t buf[CHUNK * 24];
	int err;

	err = pymem__read(r->pid, t->k.entries + (uint64_t)from * t->k.esize, buf,
			  (size_t)n * t->k.esize);
	if (err)
		return bad(err);
	for (uint32_t i = 0; i < n; i++) {
		key[i] = get_u64(buf, (int32_t)(i * t->k.esize + t->k.ekey));
		val[i] = t->values ? 0 : get_u64(buf, (int32_t)(i * t->k.esize + t->k.evalue));
	}
	return 0;
}

/* The value of entry ix whose key is key, if that key is want; 1 found, 0 not. */
static int try_entry(struct rd *r, const struct table *t, uint32_t ix, uint64_t key, uint64_t val,
		     const char *want, uint64_t *out)
{
	int ret;

	if (!key || (!t->values && !val))
		return 0; /* empty, or deleted */
	/* a table holds a reference to its key: the same entry, the same key */
	if (r->match.keys != t->keys || r->match.ix != ix || r->match.key != key ||
	    r->match.want != want) {
		ret = str_is(r, key, want);
		if (ret <= 0)
			return ret;
		r->match.keys = t->keys;
		r->match.ix = ix;
		r->match.key = key;
		r->match.want = want;
	}
	if (t->values) {
		ret = split_value(r, t, ix, &val);
		if (ret)
			return ret;
	}
	if (!val)
		return 0; /* this instance does not have that attribute */
	*out = val;
	return 1;
}

/* The value under the str key want: 0, -ENOENT, or an error. */
static int table_find(struct rd *r, const struct table *t, const char *want, struct pyhint *h,
		      uint64_t *out)
{
	uint64_t key[CHUNK], val[CHUNK];
	uint32_t n = t->k.nentries < MAX_SCAN ? t->k.nentries : MAX_SCAN;
	int ret;

	if (h && h->keys == t->keys && h->ix < n) {
		ret = read_entries(r, t, h->ix, 1, key, val);
		if (!ret)
			ret = try_entry(r, t, h->ix, key[0], val[0], want, out);
		if (ret == 1)
			return 0;
		if (ret == -ESRCH)
			return ret;
	}
	for (uint32_t from = 0; from < n; from += CHUNK) {
		uint32_t m = n - from < CHUNK ? n - from : CHUNK;

		ret = read_entries(r, t, from, m, key, val);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < m; i++) {
			ret = try_entry(r, t, from + i, key[i], val[i], want, out);
			if (ret < 0)
				return ret;
			if (ret == 1) {
				if (h) {
					h->keys = t->keys;
					h->ix = from + i;
				}
				return 0;
			}
		}
	}
	return -ENOENT;
}

static int dict_find(struct rd *r, uint64_t dict, const char *want, struct pyhint *h, uint64_t *out)
{
	struct table t;
	int err = dict_table(r, dict, &t);

	return err ? err : table_find(r, &t, want, h, out);
}

/* What a Thread's class says about where its instances keep attributes. */
static int type_info(struct rd *r, uint64_t type, unsigned *slot)
{
	const struct pylayout *l = r->l;
	uint8_t buf[512];
	int32_t span = l->tp_basicsize;
	unsigned i;
	int err;

	for (i = 0; i < r->ntypes; i++) {
		if (r->types[i].addr == type) {
			*slot = i;
			return 0;
		}
	}
	if (l->tp_flags > span)
		span = l->tp_flags;
	if (l->tp_dictoffset > span)
		span = l->tp_dictoffset;
	if (span < 0 || (size_t)span + 8 > sizeof(buf))
		return -EINVAL;
	err = pymem__read(r->pid, type, buf, (size_t)span + 8);
	if (err)
		return bad(err);
	i = r->ntypes < 4 ? r->ntypes++ : 3;
	r->types[i].addr = type;
	r->types[i].basicsize = (int64_t)get_u64(buf, l->tp_basicsize);
	r->types[i].flags = get_u64(buf, l->tp_flags);
	r->types[i].dictoffset = (int64_t)get_u64(buf, l->tp_dictoffset);
	r->types[i].cached_keys = 0;
	/* the keys instances share live in the heap type (a class made by Python) */
	if ((r->types[i].flags & TPFLAGS_HEAPTYPE) && l->ht_cached_keys > 0) {
		err = rd_u64(r, type + l->ht_cached_keys, &r->types[i].cached_keys);
		if (err) {
			r->ntypes--;
			return bad(err);
		}
	}
	if (r->types[i].basicsize < 16 || r->types[i].basicsize > (1 << 20)) {
		r->ntypes--;
		return -EINVAL;
	}
	*slot = i;
	return 0;
}

/*
 * Where obj keeps its attributes: the table to look them up in. 3.11+ keep
 * pointers before the object (the values or dict at -32 and -24, the GC
 * head after them): one read takes those and the object's header.
 */
static int attr_table(struct rd *r, uint64_t obj, struct table *t)
{
	const struct pylayout *l = r->l;
	uint64_t type, flags, keys, v, dict = 0;
	uint8_t buf[32 +
		    64]; /* what precedes the object, and its header (32 bytes free-threaded) */
	size_t pre = l->inst_dict == PY_INST_DICTOFFSET ? 0 : 32;
	unsigned s;
	int err;

	if ((size_t)l->ob_type + 8 > sizeof(buf) - 32)
		return -EINVAL;
	err = pymem__read(r->pid, obj - pre, buf, pre + (size_t)l->ob_type + 8);
	if (err == -EFAULT && pre) {
		pre = 0; /* nothing before it: not an object with a managed dict */
		err = pymem__read(r->pid, obj, buf, (size_t)l->ob_type + 8);
	}
	if (err)
		return bad(err);
	type = get_u64(buf, (int32_t)pre + l->ob_type);
	err = type_info(r, type, &s);
	if (err)
		return err;
	flags = r->types[s].flags;
	keys = r->types[s].cached_keys;
	if (pre && (flags & TPFLAGS_MANAGED_DICT)) {
		switch (l->inst_dict) {
		case PY_INST_311:
			/* values at obj - 32 until a __dict__ is made; then the dict at obj - 24 */
			v = get_u64(buf, 0);
			if (v)
				return keys ? table_load(r, keys, v, t) : -EINVAL;
			dict = get_u64(buf, 8);
			break;
		case PY_INST_312:
			/* PyDictOrValues: values - 1 (low bit set), or the dict */
			v = get_u64(buf, 8);
			if (v & 1)
				return keys ? table_load(r, keys, v + 1, t) : -EINVAL;
			dict = v;
			break;
		case PY_INST_313:
		case PY_INST_313FT:
			/* the managed dict at obj - 24 (GIL), obj - 8 (free-threaded) */
			dict = get_u64(buf, l->inst_dict == PY_INST_313 ? 8 : 24);
			if (dict || !(flags & TPFLAGS_INLINE_VALUES))
				break;
			/* PyDictValues inline after the object: capacity, size, embedded, valid */
			{
				uint8_t hdr[4];
				uint64_t values = obj + (uint64_t)r->types[s].basicsize;

				err = pymem__read(r->pid, values, hdr, sizeof(hdr));
				if (err)
					return bad(err);
				if (!hdr[3])
					return -ENOENT; /* not valid, and no dict: none */
				return keys ? table_load(r, keys, values, t) : -EINVAL;
			}
		default:
			return -EINVAL;
		}
	} else if (r->types[s].dictoffset > 0 && r->types[s].dictoffset < MAX_DICTOFFSET) {
		err = rd_u64(r, obj + (uint64_t)r->types[s].dictoffset, &dict);
		if (err)
			return bad(err);
	} else {
		return -EINVAL; /* no instance dict: not a Thread */
	}
	if (!dict)
		return -ENOENT; /* no attributes at all */
	return dict_table(r, dict, t);
}

/* The _name of the Thread at obj, cleaned. */
static int thread_name(struct rd *r, uint64_t obj, struct pyhint *h, char *out)
{
	struct table t;
	uint64_t name;
	char *s = NULL;
	int err;

	err = attr_table(r, obj, &t);
	if (!err)
		err = table_find(r, &t, "_name", h, &name);
	if (!err)
		err = pystr__read(r->pid, r->l, &r->memo, name, NAME_READ_CHARS, &s);
	if (err)
		return err == -EFAULT ? -EINVAL : err;
	pyname__clean(s, out, PYNAME_MAX);
	free(s);
	return out[0] ? 0 : -EINVAL;
}

static int read_ident(struct rd *r, uint64_t obj, uint64_t *ident)
{
	const struct pylayout *l = r->l;
	/* a pthread_t has 47 bits: 2 digits; an int is never read past them */
	size_t len = (size_t)l->long_digits + 8;
	uint8_t buf[64];
	int err;

	if (l->long_digits < 0 || (size_t)l->long_digits + 12 > sizeof(buf) ||
	    (size_t)l->ob_type + 8 > len)
		return -EINVAL;
	err = pymem__read(r->pid, obj, buf, len);
	if (err)
		return bad(err);
	err = pytype__check(r->pid, l, &r->memo, PY_T_INT, get_u64(buf, l->ob_type));
	if (err)
		return err;
	err = pylong__u64(l, buf, len, ident);
	if (err != -ENOSPC)
		return err;
	len += 4;
	err = pymem__read(r->pid, obj, buf, len);
	return err ? bad(err) : pylong__u64(l, buf, len, ident);
}

/* Every (ident, name) of the dict threading._active, appended to out. */
static int active_names(struct rd *r, uint64_t active, struct pynames_hints *hints,
			struct pyname *out, size_t max, size_t *n)
{
	uint64_t key[CHUNK], val[CHUNK];
	struct table t;
	uint32_t cnt;
	int err;

	err = dict_table(r, active, &t);
	if (err)
		return err;
	cnt = t.k.nentries < MAX_SCAN ? t.k.nentries : MAX_SCAN;
	for (uint32_t from = 0; from < cnt && *n < max; from += CHUNK) {
		uint32_t m = cnt - from < CHUNK ? cnt - from : CHUNK;

		err = read_entries(r, &t, from, m, key, val);
		if (err)
			return err;
		for (uint32_t i = 0; i < m && *n < max; i++) {
			struct pyname *p = &out[*n];

			if (t.values && key[i]) {
				err = split_value(r, &t, from + i, &val[i]);
				if (err)
					return err;
			}
			if (!key[i] || !val[i])
				continue;
			err = read_ident(r, key[i], &p->ident);
			if (err == -ESRCH)
				return err;
			if (err || !p->ident)
				return -EINVAL; /* _active is keyed by idents: this is not it */
			err = thread_name(r, val[i], &hints->name, p->name);
			if (err == -ESRCH)
				return err;
			if (err)
				p->name[0] = '\0';
			(*n)++;
		}
	}
	return 0;
}

/* threading._active of one interpreter: its address, or -ENOENT. */
static int find_active(struct rd *r, uint64_t interp, struct pynames_hints *hints, uint64_t *active)
{
	uint64_t modules, module, globals;
	int err;

	err = rd_u64(r, interp + r->l->is_modules, &modules);
	if (err)
		return bad(err);
	if (!modules)
		return -ENOENT; /* not initialized yet, or finalized */
	err = dict_find(r, modules, "threading", &hints->threading, &module);
	if (!err)
		err = check_type(r, module, PY_T_MODULE);
	if (!err)
		err = rd_u64(r, module + r->l->md_dict, &globals);
	if (err)
		return err == -EFAULT ? -EINVAL : err;
	err = dict_find(r, globals, "_active", &hints->active, active);
	return err == -EFAULT ? -EINVAL : err;
}

int pythreads__names(pid_t pid, const struct pyinfo *info, struct pynames_hints *hints,
		     struct pyname *out, size_t max)
{
	const struct pylayout *l = pyinfo__layout(info);
	struct rd *r;
	uint64_t interps[MAX_INTERPS], interp = 0, active;
	size_t ninterp = 0, n = 0, n0;
	bool found = false;
	int err, first_err = -ENOENT;

	if (!info->runtime || l->is_modules <= 0 || !l->keys_fmt || !l->inst_dict || !l->long_fmt)
		return -ENOTSUP;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pid = pid;
	r->l = l;
	err = rd_u64(r, info->runtime + l->rt_interp_head, &interp);
	if (err) {
		first_err = bad(err);
		interp = 0;
	}
	while (interp && ninterp < MAX_INTERPS) {
		for (size_t i = 0; i < ninterp; i++)
			if (interps[i] == interp)
				goto done; /* a cycle */
		interps[ninterp++] = interp;
		n0 = n;
		err = find_active(r, interp, hints, &active);
		if (!err)
			err = active_names(r, active, hints, out, max, &n);
		if (!err) {
			found = true;
		} else {
			n = n0; /* none of a table that turned out not to be one */
			if (err == -ESRCH || first_err == -ENOENT)
				first_err = err;
		}
		if (err == -ESRCH)
			break;
		if (rd_u64(r, interp + l->is_next, &interp))
			break;
	}
done:
	free(r);
	if (first_err == -ESRCH)
		return first_err;
	return found ? (int)n : first_err;
}
