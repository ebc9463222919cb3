// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pycode: code objects read out of a live CPython with process_vm_readv.
 *
 * The target is not trusted: every length is bounded before it is used, an
 * object must carry the type it should have (its ob_type's tp_name is
 * "code", "str" or "bytes"), strings must obey CPython's own invariants for
 * their kind. What fails those checks is -EINVAL; what cannot be read is
 * -EFAULT (or -ESRCH when the process is gone).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "python/pyimpl.h"

/* x86-64 user space ends below this; anything above is not a user pointer. */
#define USER_ADDR_END (1ULL << 47)
/* Code points kept of a name (co_qualname, co_name) and of co_filename. */
#define NAME_MAX_CHARS	   1024
#define FILENAME_MAX_CHARS 4096
/* A str or bytes claiming more than this is garbage, not a long name. */
#define STR_MAX_LEN   (1L << 20)
#define LINETABLE_MAX (1L << 20)
/* co_firstlineno beyond this is not a line of a source file. */
#define FIRSTLINENO_MAX 100000000
/* Bytecode offsets BPF can report: PYFRAME_INSTR_MASK, and sane code sizes. */
#define INSTR_OFF_MAX (1u << 28)
#define HDR_MAX	      512

int pymem__read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n;

	if (!len)
		return 0;
	if (!addr || addr >= USER_ADDR_END || len > USER_ADDR_END - addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ENOMEM ? -EFAULT : -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int pymem__read_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return pymem__read(pid, addr, v, sizeof(*v));
}

static const char *const type_names[PY_T__MAX] = {
	[PY_T_CODE] = "code", [PY_T_STR] = "str", [PY_T_BYTES] = "bytes",
	[PY_T_DICT] = "dict", [PY_T_INT] = "int", [PY_T_MODULE] = "module",
};

int pytype__check(pid_t pid, const struct pylayout *l, struct pytypememo *m, enum py_type which,
		  uint64_t type)
{
	const char *want = type_names[which];
	char name[8];
	size_t n = strlen(want) + 1;
	uint64_t name_addr;
	int err;

	if (m->addr[which] == type)
		return 0;
	err = pymem__read_u64(pid, type + l->tp_name, &name_addr);
	if (err)
		return err == -ESRCH ? err : -EINVAL;
	err = pymem__read(pid, name_addr, name, n);
	if (err)
		return err == -ESRCH ? err : -EINVAL;
	if (memcmp(name, want, n))
		return -EINVAL;
	m->addr[which] = type;
	return 0;
}

/* Append code point cp as UTF-8; lone surrogates become U+FFFD. */
static size_t put_utf8(char *p, uint32_t cp)
{
	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xfffd;
	if (cp < 0x80) {
		p[0] = cp ? (char)cp : '?';
		return 1;
	}
	if (cp < 0x800) {
		p[0] = (char)(0xc0 | cp >> 6);
		p[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		p[0] = (char)(0xe0 | cp >> 12);
		p[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		p[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	p[0] = (char)(0xf0 | cp >> 18);
	p[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	p[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	p[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Code points of kind 1, 2 or 4 to UTF-8. A string read whole must have the
 * smallest kind that holds its largest code point (CPython's invariant for
 * compact strings); one cut at max_chars cannot be checked that way.
 */
static int to_utf8(const uint8_t *data, size_t n, unsigned kind, bool ascii, bool whole, char **out)
{
	uint32_t cp, maxcp = 0;
	char *s, *p;
	size_t i;

	s = malloc(n * 4 + 1);
	if (!s)
		return -ENOMEM;
	for (i = 0, p = s; i < n; i++) {
		if (kind == 1) {
			cp = data[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, data + 2 * i, 2);
			cp = u;
		} else {
			memcpy(&cp, data + 4 * i, 4);
		}
		if (cp > 0x10ffff || (ascii && cp >= 0x80))
			goto bad;
		if (cp > maxcp)
			maxcp = cp;
		p += put_utf8(p, cp);
	}
	*p = '\0';
	if (whole && !ascii &&
	    ((kind == 1 && maxcp < 0x80) || (kind == 2 && maxcp < 0x100) ||
	     (kind == 4 && maxcp < 0x10000)))
		goto bad;
	*out = s;
	return 0;
bad:
	free(s);
	return -EINVAL;
}

/* What pycode__same compares of a str: bytes, of its data, at hand. */
static void str_id(const struct pylayout *l, uint64_t len, bool ascii, const uint8_t *data,
		   size_t bytes, struct pystr_id *id)
{
	if (!id)
		return;
	id->len = len;
	id->data_off = (uint16_t)(ascii ? l->str_ascii_size : l->str_compact_size);
	id->head_len = (uint8_t)(bytes < PYSTR_HEAD ? bytes : PYSTR_HEAD);
	memcpy(id->head, data, id->head_len);
}

/* A compact str (every str the compiler makes) at addr, as UTF-8. */
int pystr__read(pid_t pid, const struct pylayout *l, struct pytypememo *m, uint64_t addr,
		size_t max_chars, char **out)
{
	return pystr__read_id(pid, l, m, addr, max_chars, out, NULL);
}

int pystr__read_id(pid_t pid, const struct pylayout *l, struct pytypememo *m, uint64_t addr,
		   size_t max_chars, char **out, struct pystr_id *id)
{
	uint8_t hdr[HDR_MAX], *data;
	unsigned kind, sh = l->str_kind_shift;
	uint32_t state;
	int64_t len;
	size_t n;
	bool ascii;
	int err;

	if (l->str_ascii_size > sizeof(hdr))
		return -EINVAL;
	err = pymem__read(pid, addr, hdr, l->str_ascii_size);
	if (err)
		return err;
	err = pytype__check(pid, l, m, PY_T_STR, get_u64(hdr, l->ob_type));
	if (err)
		return err;
	len = (int64_t)get_u64(hdr, l->str_length);
	state = get_u32(hdr, l->str_state);
	kind = (state >> sh) & 7;
	ascii = (state >> (sh + 4)) & 1;
	/* Not compact: a legacy string, which code objects never hold. */
	if (len < 0 || len > STR_MAX_LEN || !((state >> (sh + 3)) & 1))
		return -EINVAL;
	if ((kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EINVAL;
	n = (size_t)len < max_chars ? (size_t)len : max_chars;
	data = malloc(n * kind + 1);
	if (!data)
		return -ENOMEM;
	err = pymem__read(pid, addr + (ascii ? l->str_ascii_size : l->str_compact_size), data,
			  n * kind);
	if (!err)
		err = to_utf8(data, n, kind, ascii, n == (size_t)len, out);
	if (!err)
		str_id(l, (uint64_t)len, ascii, data, n * kind, id);
	free(data);
	return err;
}

static int read_bytes(pid_t pid, const struct pylayout *l, struct pytypememo *m, uint64_t addr,
		      uint8_t **out, size_t *out_len)
{
	uint8_t hdr[HDR_MAX], *data;
	int64_t len;
	int err;

	if (l->bytes_sval < 0 || (size_t)l->bytes_sval > sizeof(hdr))
		return -EINVAL;
	err = pymem__read(pid, addr, hdr, (size_t)l->bytes_sval);
	if (err)
		return err;
	err = pytype__check(pid, l, m, PY_T_BYTES, get_u64(hdr, l->ob_type));
	if (err)
		return err;
	len = (int64_t)get_u64(hdr, l->bytes_size);
	if (len < 0 || len > LINETABLE_MAX)
		return -EINVAL;
	data = malloc((size_t)len + 1);
	if (!data)
		return -ENOMEM;
	err = pymem__read(pid, addr + l->bytes_sval, data, (size_t)len);
	if (err) {
		free(data);
		return err;
	}
	*out = data;
	*out_len = (size_t)len;
	return 0;
}

static uint64_t code_address(const struct pylayout *l, uint64_t addr)
{
	/* 3.14+: f_executable is a _PyStackRef, whose low bits are flags. */
	return l->code_tagged ? addr & ~7ULL : addr;
}

static void code_ident(const struct pylayout *l, const uint8_t *hdr, uint64_t *ident)
{
	ident[0] = get_u64(hdr, l->ob_type);
	ident[1] = get_u64(hdr, l->co_filename);
	ident[2] = get_u64(hdr, l->co_name);
	ident[3] = l->co_qualname >= 0 ? get_u64(hdr, l->co_qualname) : 0;
	ident[4] = get_u64(hdr, l->co_linetable);
	ident[5] = get_u64(hdr, l->co_varnames);
	ident[6] = get_u32(hdr, l->co_firstlineno) | (uint64_t)get_u32(hdr, l->co_argcount) << 32;
}

/* The str a code object is named by (co_qualname, co_name before 3.11), from its ident. */
static uint64_t code_name(const struct pylayout *l, const uint64_t *ident)
{
	return l->co_qualname >= 0 ? ident[3] : ident[2];
}

int pycode__read(pid_t pid, const struct pyinfo *info, uint64_t addr, struct pycode *out)
{
	const struct pylayout *l = pyinfo__layout(info);
	struct pytypememo memo = { { 0 } };
	uint8_t hdr[HDR_MAX];
	struct pycode c = { 0 };
	int32_t firstlineno;
	int err;

	memset(out, 0, sizeof(*out));
	if (!l->co_read || l->co_read > sizeof(hdr))
		return -EINVAL;
	addr = code_address(l, addr);
	err = pymem__read(pid, addr, hdr, l->co_read);
	if (err)
		return err;
	err = pytype__check(pid, l, &memo, PY_T_CODE, get_u64(hdr, l->ob_type));
	if (err)
		return err;
	firstlineno = (int32_t)get_u32(hdr, l->co_firstlineno);
	if (firstlineno < 0 || firstlineno > FIRSTLINENO_MAX)
		return -EINVAL;

	c.firstlineno = (uint32_t)firstlineno;
	c.code_addr = addr;
	c.version = info->version;
	code_ident(l, hdr, c.ident);
	err = pystr__read_id(pid, l, &memo, code_name(l, c.ident), NAME_MAX_CHARS, &c.qualname,
			     &c.name);
	if (!err)
		err = pystr__read(pid, l, &memo, get_u64(hdr, l->co_filename), FILENAME_MAX_CHARS,
				  &c.filename);
	if (!err)
		err = read_bytes(pid, l, &memo, get_u64(hdr, l->co_linetable), &c.linetable,
				 &c.linetable_len);
	c.lines_len = c.linetable_len;
	if (err) {
		pycode__free(&c);
		/* A pointer in a code object that leads nowhere: not a code object. */
		return err == -EFAULT ? -EINVAL : err;
	}
	*out = c;
	return 0;
}

void pycode__free(struct pycode *c)
{
	if (!c)
		return;
	free(c->qualname);
	free(c->filename);
	free(c->linetable);
	c->qualname = c->filename = NULL;
	c->linetable = NULL;
	c->linetable_len = 0;
}

bool pycode__same_object(const struct pycode *a, const struct pycode *b)
{
	return !memcmp(a->ident, b->ident, sizeof(a->ident)) && a->name.len == b->name.len &&
	       a->name.head_len == b->name.head_len &&
	       !memcmp(a->name.head, b->name.head, a->name.head_len) &&
	       a->lines_len == b->lines_len;
}

/*
 * One process_vm_readv: the header, the name str's length field and first
 * bytes, the line table's length field, each where they were when c was
 * read (meaningful when the header still points at them, which the ident
 * comparison decides).
 */
int pycode__same(pid_t pid, const struct pyinfo *info, const struct pycode *c)
{
	const struct pylayout *l = pyinfo__layout(info);
	uint64_t name = code_name(l, c->ident), lines = c->ident[4];
	struct pycode now = { .name = c->name };
	uint8_t hdr[HDR_MAX];
	struct iovec local[4] = {
		{ .iov_base = hdr, .iov_len = l->co_read },
		{ .iov_base = &now.name.len, .iov_len = sizeof(now.name.len) },
		{ .iov_base = now.name.head, .iov_len = c->name.head_len },
		{ .iov_base = &now.lines_len, .iov_len = sizeof(now.lines_len) },
	};
	struct iovec remote[4] = {
		{ .iov_base = (void *)(uintptr_t)c->code_addr, .iov_len = l->co_read },
		{ .iov_base = (void *)(uintptr_t)(name + (uint64_t)l->str_length), .iov_len = 8 },
		{ .iov_base = (void *)(uintptr_t)(name + c->name.data_off),
		  .iov_len = c->name.head_len },
		{ .iov_base = (void *)(uintptr_t)(lines + (uint64_t)l->bytes_size), .iov_len = 8 },
	};
	size_t want = 0;
	ssize_t n;

	if (!l->co_read || l->co_read > sizeof(hdr))
		return -EINVAL;
	if (!c->code_addr || c->code_addr >= USER_ADDR_END || name >= USER_ADDR_END - HDR_MAX ||
	    lines >= USER_ADDR_END - HDR_MAX)
		return -EFAULT;
	for (int i = 0; i < 4; i++)
		want += local[i].iov_len;
	n = process_vm_readv(pid, local, 4, remote, 4, 0);
	if (n < 0)
		return errno == ENOMEM ? -EFAULT : -errno;
	if ((size_t)n < l->co_read)
		return -EFAULT;
	code_ident(l, hdr, now.ident);
	/* the name or the table unreadable where the header still points: freed */
	return (size_t)n == want && pycode__same_object(&now, c);
}

uint32_t pycode__instr_offset(const struct pyinfo *info, uint64_t code_addr, uint64_t raw)
{
	const struct pylayout *l = pyinfo__layout(info);
	uint64_t code;
	int32_t lasti;

	raw &= PYFRAME_INSTR_MASK;
	switch (l->instr) {
	case PY_INSTR_LASTI_BYTES:
	case PY_INSTR_LASTI_UNITS:
		/* BPF reads the int: its sign bit may arrive zero-extended. */
		lasti = (int32_t)(uint32_t)raw;
		if (lasti < 0)
			return 0; /* -1: the frame has not run an instruction yet */
		if ((uint32_t)lasti >= INSTR_OFF_MAX)
			return UINT32_MAX;
		if (l->instr == PY_INSTR_LASTI_UNITS)
			return (uint32_t)lasti * 2;
		return lasti & 1 ? UINT32_MAX : (uint32_t)lasti;
	case PY_INSTR_PREV:
	case PY_INSTR_PTR:
		code = code_address(l, code_addr) + (uint64_t)info->code_adaptive;
		/* 3.11, 3.12: a frame that has not started points one unit before. */
		if (l->instr == PY_INSTR_PREV && raw == code - 2)
			return 0;
		if (raw < code || raw - code >= INSTR_OFF_MAX || (raw - code) & 1)
			return UINT32_MAX;
		return (uint32_t)(raw - code);
	default:
		return UINT32_MAX;
	}
}

/*
 * One string of a snapshot as UTF-8: the checks of pystr__read on what BPF
 * found, and the bytes it sent must be all of the string or the most that
 * fit (max) in whole code points.
 */
static int snap_str(const struct pylayout *l, const struct pysnap_obj *o, const uint8_t *data,
		    size_t data_len, size_t max, char **out, struct pystr_id *id)
{
	unsigned kind = (o->state >> l->str_kind_shift) & 7;
	bool ascii = (o->state >> (l->str_kind_shift + 4)) & 1;
	int64_t len = (int64_t)o->len;
	uint64_t want;
	int err;

	if (len < 0 || len > STR_MAX_LEN || !((o->state >> (l->str_kind_shift + 3)) & 1))
		return -EINVAL;
	if ((kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EINVAL;
	want = (uint64_t)len * kind;
	if (want > max)
		want = max & ~(uint64_t)(kind - 1);
	if (o->bytes != want || (size_t)o->off + o->bytes > data_len)
		return -EINVAL;
	err = to_utf8(data + o->off, o->bytes / kind, kind, ascii, o->bytes / kind == (uint64_t)len,
		      out);
	if (!err)
		str_id(l, (uint64_t)len, ascii, data + o->off, o->bytes, id);
	return err;
}

int pycode__from_snap(const struct pyinfo *info, const void *snap, size_t len, uint64_t code_type,
		      struct pycode *out)
{
	const struct pylayout *l = pyinfo__layout(info);
	const size_t head = offsetof(struct pycode_snap, data);
	const struct pycode_snap *s = snap;
	const struct pysnap_obj *lt;
	struct pycode c = { 0 };
	size_t data_len;
	int32_t firstlineno;
	int err;

	memset(out, 0, sizeof(*out));
	if (!snap || len < head || len > sizeof(*s))
		return -EINVAL;
	data_len = len - head;
	lt = &s->lines;
	/* the header as pycode__read reads it, all of it sent */
	if (!l->co_read || s->code_bytes != l->co_read || s->code_bytes > data_len ||
	    s->code_bytes > PYSNAP_CODE_MAX)
		return -EINVAL;
	if (code_type && get_u64(s->data, l->ob_type) != code_type)
		return -EINVAL;
	firstlineno = (int32_t)get_u32(s->data, l->co_firstlineno);
	if (firstlineno < 0 || firstlineno > FIRSTLINENO_MAX)
		return -EINVAL;
	/* two str of one type, and a bytes of another */
	if (!s->name.type || s->name.type != s->file.type || !lt->type ||
	    lt->type == s->name.type || lt->state)
		return -EINVAL;
	if ((int64_t)lt->len < 0 || (int64_t)lt->len > LINETABLE_MAX ||
	    lt->bytes != (lt->len < PYSNAP_LINES_MAX ? lt->len : PYSNAP_LINES_MAX) ||
	    (size_t)lt->off + lt->bytes > data_len)
		return -EINVAL;

	c.firstlineno = (uint32_t)firstlineno;
	c.code_addr = code_address(l, s->code);
	c.version = info->version;
	code_ident(l, s->data, c.ident);
	err = snap_str(l, &s->name, s->data, data_len, PYSNAP_NAME_MAX, &c.qualname, &c.name);
	if (!err)
		err = snap_str(l, &s->file, s->data, data_len, PYSNAP_FILE_MAX, &c.filename, NULL);
	if (!err) {
		c.linetable = malloc(lt->bytes + 1);
		if (!c.linetable)
			err = -ENOMEM;
	}
	if (err) {
		pycode__free(&c);
		return err;
	}
	memcpy(c.linetable, s->data + lt->off, lt->bytes);
	c.linetable_len = lt->bytes;
	c.lines_len = lt->len;
	if (lt->bytes < lt->len) {
		c.linetable_cut = true;
		c.linetable_covers = pyline__covered(c.version, c.linetable, c.linetable_len);
	}
	*out = c;
	return 0;
}
