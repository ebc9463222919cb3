/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cfi: compile .eh_frame (and .debug_frame) into the flat table of cfi.h.
 *
 * Two stages. First every FDE's header is read (its CIE, start and length)
 * and kept as a "run": [start, end) and where the FDE is; CIEs are parsed
 * when an FDE first names them and cached by section offset. Then the runs
 * are sorted by start and swept into the final table: only there does each
 * FDE's CFA program run, its rows, already reduced to struct unwind_row,
 * going onto a stack that holds just the FDEs open at that point; that is
 * where gaps get their markers, overlaps are resolved and identical
 * neighbours merge. The table goes out to a sink in chunks as it is made.
 * So what a compile holds is the sections, 24 bytes per FDE and the sink's
 * copy of the table: running every program first into one scratch array
 * (16 bytes per raw row) and building the whole table next to it made
 * libtorch_cpu's compile (220k FDEs, 1.4M rows) peak at 53 MB above the
 * agent, against ~27 MB now.
 *
 * Where both sections exist, .eh_frame wins and .debug_frame only fills the
 * holes it leaves (code built with -fno-asynchronous-unwind-tables -g next to
 * crt files that have .eh_frame; Go with cgo). An .eh_frame FDE whose header
 * is sound but whose program is not (found only in the sweep) still keeps
 * .debug_frame out of its range, as it would keep libgcc's lookup.
 *
 * Overlapping FDEs (rare: hand-written assembly, stale duplicates): the FDE
 * that starts later wins from its start to its end, after which the earlier
 * one resumes if it is still open, so nested FDEs behave as libgcc's lookup
 * (greatest start <= pc) does. FDEs with the same range: the first in the
 * section wins.
 *
 * Every read is bounds-checked through struct rd: a malformed entry costs
 * that FDE (stats->bad_fdes), never the process.
 */
#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind/cfi.h"

/* Pointer encodings: LSB 5.0, "DWARF Extensions", DW_EH_PE_*. */
#define PE_ABSPTR  0x00
#define PE_ULEB128 0x01
#define PE_UDATA2  0x02
#define PE_UDATA4  0x03
#define PE_UDATA8  0x04
#define PE_SLEB128 0x09
#define PE_SDATA2  0x0a
#define PE_SDATA4  0x0b
#define PE_SDATA8  0x0c
#define PE_PCREL   0x10
#define PE_DATAREL 0x30
#define PE_ALIGNED 0x50
#define PE_OMIT	   0xff

/* DWARF 5 section 6.4.2, plus the GNU extensions binutils knows. */
#define CFA_advance_loc			 0x1
#define CFA_offset			 0x2
#define CFA_restore			 0x3
#define CFA_nop				 0x00
#define CFA_set_loc			 0x01
#define CFA_advance_loc1		 0x02
#define CFA_advance_loc2		 0x03
#define CFA_advance_loc4		 0x04
#define CFA_offset_extended		 0x05
#define CFA_restore_extended		 0x06
#define CFA_undefined			 0x07
#define CFA_same_value			 0x08
#define CFA_register			 0x09
#define CFA_remember_state		 0x0a
#define CFA_restore_state		 0x0b
#define CFA_def_cfa			 0x0c
#define CFA_def_cfa_register		 0x0d
#define CFA_def_cfa_offset		 0x0e
#define CFA_def_cfa_expression		 0x0f
#define CFA_expression			 0x10
#define CFA_offset_extended_sf		 0x11
#define CFA_def_cfa_sf			 0x12
#define CFA_def_cfa_offset_sf		 0x13
#define CFA_val_offset			 0x14
#define CFA_val_offset_sf		 0x15
#define CFA_val_expression		 0x16
#define CFA_MIPS_advance_loc8		 0x1d
#define CFA_GNU_window_save		 0x2d
#define CFA_GNU_args_size		 0x2e
#define CFA_GNU_negative_offset_extended 0x2f

/* x86-64 psABI DWARF register numbers. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA	16

/*
 * GCC nests remember_state two or three deep; anything near this is not a
 * compiler's output and the FDE is dropped as malformed.
 */
#define STATE_STACK_MAX 32

struct rd {
	const uint8_t *p;
	const uint8_t *end;
	bool bad;      /* sticky: every later read returns 0 */
	uint64_t bias; /* p + bias: the address p stands for (pcrel pointers' base) */
};

/* How a register is recovered; the DWARF register rules. */
enum how {
	HOW_UNREF = 0, /* not mentioned: the ABI default (callee-saved: same value) */
	HOW_UNDEF,
	HOW_SAME,
	HOW_OFF, /* saved at CFA + off */
	HOW_VAL_OFF,
	HOW_REG,
	HOW_EXPR,
	HOW_VAL_EXPR,
};

enum cfa_how {
	CFA_UNSET = 0,
	CFA_REG,  /* cfa_reg + cfa_off */
	CFA_PLT,  /* the PLT expression, with threshold plt_lit */
	CFA_EXPR, /* any other expression */
};

struct rule {
	int64_t off;
	uint8_t how;
};

/* The part of a CFI row that the table can use; other registers are ignored. */
struct state {
	int64_t cfa_off;
	uint64_t cfa_reg;
	struct rule rbp;
	struct rule ra;
	uint8_t cfa_how;
	uint8_t plt_lit;
};

struct cie {
	uint64_t off; /* cache key: section offset of the CIE */
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	struct state init; /* after the initial instructions; DW_CFA_restore's target */
	uint8_t fde_enc;
	uint8_t addr_size;
	bool aug_z;
	bool signal;
	bool bad;
};

/* One FDE: its range, and where its entry is (its program runs in the sweep). */
struct run {
	uint64_t start;
	uint64_t end;
	/*
	 * Section offset of the entry, ENTRY_DEBUG set for .debug_frame: also
	 * the tie-break between FDEs with one range (position in the sections).
	 */
	uint64_t entry;
};
#define ENTRY_DEBUG ((uint64_t)1 << 63)

/* An FDE open in the sweep: its rows are c->tmp[first .. first + n), row i in force. */
struct open_run {
	uint64_t end;
	uint32_t first, n, i;
};

struct sect {
	const uint8_t *data; /* the whole section, or NULL: read through a window */
	size_t size;
	uint64_t addr; /* sh_addr: the base of pcrel pointers */
	bool eh;       /* .eh_frame rules (CIE id 0, relative CIE pointers) */
	int fd;	       /* without data: the file, the section at foff */
	uint64_t foff;
};

/*
 * A window of a section read with pread: .eh_frame is read a window at a
 * time, not whole (libtorch_cpu's is 9.7 MiB; the sweep visits it in
 * address order, which is nearly the section's: 3.4 times the section
 * read in all with 256 KiB windows).
 */
#define WIN_BYTES (256 << 10)

struct win {
	uint8_t *buf;
	size_t cap, len;
	uint64_t off; /* section offset of buf[0] */
};

struct range {
	uint64_t lo, hi;
};

/* Parsed CIEs of one section, sorted by off. */
struct cies {
	struct cie *v;
	size_t n, cap, last;
};

struct ctx {
	struct sect sect;     /* the section being read: sects[0] or [1] */
	struct sect sects[2]; /* .eh_frame, .debug_frame */
	struct cies cies[2];
	struct cies *cc; /* the CIEs of sect */
	struct win wins[2];
	struct win *w;	 /* FDEs of sect are read through this one */
	struct win cwin; /* CIEs through this one: an FDE's stays put meanwhile */
	uint64_t got;	 /* DW_EH_PE_datarel base */
	bool have_got;

	struct run *runs;
	size_t nruns, cap_runs;

	/* the rows of the FDEs open in the sweep, innermost last */
	struct unwind_row *tmp;
	size_t ntmp, cap_tmp;

	struct range exec[16]; /* executable PT_LOADs */
	size_t nexec;
	bool check_exec;

	struct cfi_stats *stats;
	uint32_t dropped;
	/* where no FDE's rows are in force: no_row, or gap_row in a partial table */
	const struct unwind_row *gap;
};

/* One step of a CFA program: where it is and where its rows go. */
struct prog {
	const struct cie *cie;
	const struct state *init; /* NULL while running the CIE's own program */
	struct open_run *run;	  /* NULL likewise: a CIE makes no rows */
	uint64_t loc;
};

static bool rd_need(struct rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static void rd_skip(struct rd *r, uint64_t n)
{
	if (rd_need(r, n))
		r->p += n;
}

static uint8_t rd_u8(struct rd *r)
{
	return rd_need(r, 1) ? *r->p++ : 0;
}

static uint16_t rd_u16(struct rd *r)
{
	uint16_t v;

	if (!rd_need(r, sizeof(v)))
		return 0;
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return le16toh(v);
}

static uint32_t rd_u32(struct rd *r)
{
	uint32_t v;

	if (!rd_need(r, sizeof(v)))
		return 0;
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return le32toh(v);
}

static uint64_t rd_u64(struct rd *r)
{
	uint64_t v;

	if (!rd_need(r, sizeof(v)))
		return 0;
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return le64toh(v);
}

/* Bits past 64 are dropped; the value is then nonsense but harmless. */
static uint64_t rd_uleb(struct rd *r)
{
	unsigned int shift = 0;
	uint64_t v = 0;
	uint8_t b;

	do {
		if (!rd_need(r, 1))
			return 0;
		b = *r->p++;
		if (shift < 64) {
			v |= (uint64_t)(b & 0x7f) << shift;
			shift += 7;
		}
	} while (b & 0x80);
	return v;
}

static int64_t rd_sleb(struct rd *r)
{
	unsigned int shift = 0;
	uint64_t v = 0;
	uint8_t b;

	do {
		if (!rd_need(r, 1))
			return 0;
		b = *r->p++;
		if (shift < 64) {
			v |= (uint64_t)(b & 0x7f) << shift;
			shift += 7;
		}
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

/* A value in the format of the low four bits of a pointer encoding. */
static uint64_t rd_val(struct rd *r, uint8_t fmt, uint8_t addr_size)
{
	switch (fmt) {
	case PE_ABSPTR:
		return addr_size == 4 ? rd_u32(r) : rd_u64(r);
	case PE_ULEB128:
		return rd_uleb(r);
	case PE_UDATA2:
		return rd_u16(r);
	case PE_UDATA4:
		return rd_u32(r);
	case PE_UDATA8:
	case PE_SDATA8:
		return rd_u64(r);
	case PE_SLEB128:
		return (uint64_t)rd_sleb(r);
	case PE_SDATA2:
		return (uint64_t)(int64_t)(int16_t)rd_u16(r);
	case PE_SDATA4:
		return (uint64_t)(int64_t)(int32_t)rd_u32(r);
	default:
		r->bad = true;
		return 0;
	}
}

/*
 * An encoded pointer. DW_EH_PE_indirect is ignored: it only ever marks
 * personality routines, which are skipped, not followed. textrel and funcrel
 * have no defined base on x86-64 Linux; datarel is taken relative to the GOT
 * (.got.plt, what DT_PLTGOT names), as i386 and libgcc define it.
 */
static uint64_t rd_ptr(struct rd *r, const struct ctx *c, uint8_t enc, uint8_t addr_size)
{
	uint64_t here = (uint64_t)(uintptr_t)r->p + r->bias;
	uint64_t base = 0;

	if (enc == PE_OMIT) {
		r->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case PE_ABSPTR:
		break;
	case PE_PCREL:
		base = here;
		break;
	case PE_DATAREL:
		if (!c->have_got) {
			r->bad = true;
			return 0;
		}
		base = c->got;
		break;
	case PE_ALIGNED:
		rd_skip(r, (addr_size - here % addr_size) % addr_size);
		return rd_val(r, PE_ABSPTR, addr_size);
	default:
		r->bad = true;
		return 0;
	}
	return base + rd_val(r, enc & 0x0f, addr_size);
}

struct entry {
	uint64_t id;
	uint64_t id_off; /* section offset of the CIE id / CIE pointer */
	uint64_t next;	 /* section offset of the next entry */
	struct rd body;	 /* after the id, to the end of the entry */
	bool terminator;
	bool dwarf64;
};

static int pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n <= 0)
			return -EIO; /* short: the file was cut while read */
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* [off, off + n) of section s, valid until w moves; NULL past its end or on a short read. */
static const uint8_t *sect_get(const struct sect *s, struct win *w, uint64_t off, uint64_t n)
{
	size_t want;

	if (off > s->size || n > s->size - off)
		return NULL;
	if (s->data)
		return s->data + off;
	if (off >= w->off && off + n <= w->off + w->len)
		return w->buf + (off - w->off);
	want = n > WIN_BYTES ? n : WIN_BYTES;
	if (want > s->size - off)
		want = s->size - off;
	if (want > w->cap) {
		uint8_t *v = realloc(w->buf, want);

		if (!v)
			return NULL;
		w->buf = v;
		w->cap = want;
	}
	w->len = 0;
	if (pread_full(s->fd, w->buf, want, s->foff + off))
		return NULL;
	w->off = off;
	w->len = want;
	return w->buf;
}

/*
 * The entry at off, read through w. -EINVAL when its length runs past the
 * section: then the next entry cannot be found either. A zero length is a
 * terminator; readelf and ld carry on past one, so do we.
 */
static int read_entry(const struct sect *s, struct win *w, uint64_t off, struct entry *e)
{
	const uint8_t *p;
	uint64_t len, hdr = 4;
	struct rd r;
	uint32_t v32;
	bool dwarf64 = false;

	memset(e, 0, sizeof(*e));
	p = sect_get(s, w, off, 4);
	if (!p)
		return -EINVAL;
	memcpy(&v32, p, 4);
	len = le32toh(v32);
	if (len == 0) {
		e->terminator = true;
		e->next = off + 4;
		return 0;
	}
	if (len == 0xffffffff) {
		p = sect_get(s, w, off, 12);
		if (!p)
			return -EINVAL;
		memcpy(&len, p + 4, 8);
		len = le64toh(len);
		hdr = 12;
		dwarf64 = true;
	} else if (len >= 0xfffffff0) {
		return -EINVAL; /* reserved by DWARF for future formats */
	}
	if (len > s->size - off - hdr)
		return -EINVAL;
	p = sect_get(s, w, off, hdr + len);
	if (!p)
		return -EINVAL;
	r = (struct rd){ p + hdr, p + hdr + len, false, s->addr + off - (uint64_t)(uintptr_t)p };
	e->next = off + hdr + len;
	e->id_off = off + hdr;
	e->id = dwarf64 ? rd_u64(&r) : rd_u32(&r);
	e->dwarf64 = dwarf64;
	e->body = r;
	return 0;
}

static bool entry_is_cie(const struct sect *s, const struct entry *e)
{
	if (s->eh)
		return e->id == 0;
	return e->id == (e->dwarf64 ? ~(uint64_t)0 : 0xffffffff);
}

static bool fits(int64_t v, int64_t lo, int64_t hi)
{
	return v >= lo && v <= hi;
}

/* Everything an unsupported row says; gap markers look the same, so they merge. */
static const struct unwind_row no_row;
/* A partial table's gap: code whose FDE was not chosen (cfi__emit_fdes). */
static const struct unwind_row gap_row = { .cfa_rule = CFA_RULE_GAP };

static struct unwind_row to_row(const struct state *st, const struct cie *cie)
{
	struct unwind_row row = no_row;

	if (cie->signal) {
		row.cfa_rule = CFA_RULE_SIGNAL;
		return row;
	}
	if (cie->ra_reg != REG_RA)
		return row;
	if (st->ra.how == HOW_UNDEF) {
		row.cfa_rule = CFA_RULE_END;
		return row;
	}
	if (st->ra.how != HOW_OFF || st->ra.off != -8)
		return row;

	switch (st->cfa_how) {
	case CFA_REG:
		if (!fits(st->cfa_off, INT32_MIN, INT32_MAX))
			return row;
		if (st->cfa_reg == REG_RSP)
			row.cfa_rule = CFA_RULE_SP;
		else if (st->cfa_reg == REG_RBP)
			row.cfa_rule = CFA_RULE_FP;
		else
			return row;
		row.cfa_off = (int32_t)st->cfa_off;
		break;
	case CFA_PLT:
		row.cfa_rule = CFA_RULE_PLT;
		/* the RIP & 15 threshold: 11 for the lazy .plt */
		row.cfa_off = st->plt_lit;
		break;
	default:
		return row;
	}

	switch (st->rbp.how) {
	case HOW_UNREF:
	case HOW_UNDEF:
	case HOW_SAME:
		row.rbp_rule = RBP_RULE_SAME;
		break;
	case HOW_OFF:
		if (fits(st->rbp.off, INT16_MIN, INT16_MAX)) {
			row.rbp_rule = RBP_RULE_CFA;
			row.rbp_off = (int16_t)st->rbp.off;
		} else {
			row.rbp_rule = RBP_RULE_UNSUPPORTED;
		}
		break;
	default:
		row.rbp_rule = RBP_RULE_UNSUPPORTED;
		break;
	}
	return row;
}

static bool same_rule(const struct unwind_row *a, const struct unwind_row *b)
{
	return a->cfa_rule == b->cfa_rule && a->cfa_off == b->cfa_off &&
	       a->rbp_rule == b->rbp_rule && a->rbp_off == b->rbp_off;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t ncap = *cap ? *cap : first;
	void *tmp;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	tmp = realloc(*v, ncap * elem);
	if (!tmp)
		return -ENOMEM;
	*v = tmp;
	*cap = ncap;
	return 0;
}

/* The row in force at pg->loc, appended to the FDE's run. */
static int push_row(struct ctx *c, struct prog *pg, const struct state *st)
{
	struct open_run *run = pg->run;
	struct unwind_row row, *last;
	int err;

	/* An advance past the FDE's end: nothing more of it applies. */
	if (pg->loc >= run->end)
		return 0;
	row = to_row(st, pg->cie);
	row.pc = pg->loc;
	c->stats->rows_raw++;
	if (row.cfa_rule == CFA_RULE_UNSUPPORTED)
		c->stats->unsupported++;

	last = run->n ? &c->tmp[run->first + run->n - 1] : NULL;
	if (last && last->pc == row.pc) {
		/* advance by 0: the later state wins, and may now repeat the one before */
		*last = row;
		if (run->n > 1 && same_rule(last - 1, last)) {
			run->n--;
			c->ntmp--; /* the run being built is always the last */
		}
		return 0;
	}
	if (last && same_rule(last, &row))
		return 0;
	if (c->ntmp >= UINT32_MAX)
		return -E2BIG;
	err = grow((void **)&c->tmp, &c->cap_tmp, c->ntmp + 1, sizeof(*c->tmp), 4096);
	if (err)
		return err;
	c->tmp[c->ntmp++] = row;
	run->n++;
	return 0;
}

static int advance(struct ctx *c, struct prog *pg, const struct state *st, uint64_t to)
{
	int err;

	if (!pg->run || to < pg->loc)
		return -EINVAL; /* a CIE has no location; rows only go forward */
	err = push_row(c, pg, st);
	if (err)
		return err;
	pg->loc = to;
	return 0;
}

static struct rule *rule_of(struct state *st, const struct cie *cie, uint64_t reg)
{
	if (reg == cie->ra_reg)
		return &st->ra;
	if (reg == REG_RBP)
		return &st->rbp;
	return NULL;
}

static void set_rule(struct state *st, const struct cie *cie, uint64_t reg, uint8_t how,
		     int64_t off)
{
	struct rule *rl = rule_of(st, cie, reg);

	if (rl) {
		rl->how = how;
		rl->off = off;
	}
}

/* Factored offsets: wrap instead of overflowing; to_row rejects what does not fit. */
static int64_t factor(uint64_t v, int64_t data_align)
{
	return (int64_t)(v * (uint64_t)data_align);
}

/*
 * binutils' .plt CFA (elf_x86_64_eh_frame_lazy_plt): RSP + 8, plus 8 once
 * PLTn has pushed its relocation index, i.e. from byte 11 of the 16-byte
 * entry. Other PLT layouts only move that byte (binutils 2.40 emits lit9 for
 * -z ibtplt), so any DW_OP_litN is taken, and N kept.
 */
static bool plt_expr(const uint8_t *p, uint64_t len, uint8_t *lit)
{
	static const uint8_t pat[] = {
		0x77, 0x08, /* DW_OP_breg7 (rsp) 8 */
		0x80, 0x00, /* DW_OP_breg16 (rip) 0 */
		0x3f, 0x1a, /* DW_OP_lit15; DW_OP_and */
		0x3b, 0x2a, /* DW_OP_lit11; DW_OP_ge */
		0x33, 0x24, /* DW_OP_lit3; DW_OP_shl */
		0x22,	    /* DW_OP_plus */
	};

	if (len != sizeof(pat) || memcmp(p, pat, 6) || memcmp(p + 7, pat + 7, sizeof(pat) - 7))
		return false;
	if (p[6] < 0x30 || p[6] > 0x3f)
		return false;
	*lit = p[6] - 0x30;
	return true;
}

/* DW_CFA_restore: back to the CIE's rule, or to none inside the CIE itself. */
static void restore(struct state *st, const struct prog *pg, uint64_t reg)
{
	struct rule *rl = rule_of(st, pg->cie, reg);

	if (!rl)
		return;
	if (!pg->init)
		*rl = (struct rule){ 0 };
	else
		*rl = rl == &st->ra ? pg->init->ra : pg->init->rbp;
}

/*
 * Run a CFA program over st. For an FDE (pg->run set) every advance first
 * appends the row in force, and the end of the program appends the last.
 * -EINVAL: malformed (the caller drops the FDE), -ENOMEM.
 */
static int run_program(struct ctx *c, struct prog *pg, struct rd r, struct state *st)
{
	struct state stack[STATE_STACK_MAX];
	const struct cie *cie = pg->cie;
	unsigned int depth = 0;
	uint64_t reg, u, len;
	int64_t s;
	uint8_t op;
	int err = 0;

	while (!err && !r.bad && r.p < r.end) {
		op = rd_u8(&r);
		switch (op >> 6) {
		case CFA_advance_loc:
			err = advance(c, pg, st, pg->loc + (op & 0x3f) * cie->code_align);
			continue;
		case CFA_offset:
			u = rd_uleb(&r);
			set_rule(st, cie, op & 0x3f, HOW_OFF, factor(u, cie->data_align));
			continue;
		case CFA_restore:
			restore(st, pg, op & 0x3f);
			continue;
		}

		switch (op) {
		case CFA_nop:
		case CFA_GNU_window_save:
			break;
		case CFA_set_loc:
			u = rd_ptr(&r, c, cie->fde_enc, cie->addr_size);
			if (!r.bad)
				err = advance(c, pg, st, u);
			break;
		case CFA_advance_loc1:
			u = rd_u8(&r);
			if (!r.bad)
				err = advance(c, pg, st, pg->loc + u * cie->code_align);
			break;
		case CFA_advance_loc2:
			u = rd_u16(&r);
			if (!r.bad)
				err = advance(c, pg, st, pg->loc + u * cie->code_align);
			break;
		case CFA_advance_loc4:
			u = rd_u32(&r);
			if (!r.bad)
				err = advance(c, pg, st, pg->loc + u * cie->code_align);
			break;
		case CFA_MIPS_advance_loc8:
			u = rd_u64(&r);
			if (!r.bad)
				err = advance(c, pg, st, pg->loc + u * cie->code_align);
			break;
		case CFA_offset_extended:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			set_rule(st, cie, reg, HOW_OFF, factor(u, cie->data_align));
			break;
		case CFA_offset_extended_sf:
			reg = rd_uleb(&r);
			s = rd_sleb(&r);
			set_rule(st, cie, reg, HOW_OFF, factor((uint64_t)s, cie->data_align));
			break;
		case CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			set_rule(st, cie, reg, HOW_OFF, -factor(u, cie->data_align));
			break;
		case CFA_val_offset:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			set_rule(st, cie, reg, HOW_VAL_OFF, factor(u, cie->data_align));
			break;
		case CFA_val_offset_sf:
			reg = rd_uleb(&r);
			s = rd_sleb(&r);
			set_rule(st, cie, reg, HOW_VAL_OFF, factor((uint64_t)s, cie->data_align));
			break;
		case CFA_restore_extended:
			restore(st, pg, rd_uleb(&r));
			break;
		case CFA_undefined:
			set_rule(st, cie, rd_uleb(&r), HOW_UNDEF, 0);
			break;
		case CFA_same_value:
			set_rule(st, cie, rd_uleb(&r), HOW_SAME, 0);
			break;
		case CFA_register:
			reg = rd_uleb(&r);
			u = rd_uleb(&r);
			set_rule(st, cie, reg, HOW_REG, (int64_t)u);
			break;
		case CFA_expression:
		case CFA_val_expression:
			reg = rd_uleb(&r);
			len = rd_uleb(&r);
			rd_skip(&r, len);
			set_rule(st, cie, reg, op == CFA_expression ? HOW_EXPR : HOW_VAL_EXPR, 0);
			break;
		case CFA_remember_state:
			if (depth == STATE_STACK_MAX)
				return -EINVAL;
			stack[depth++] = *st;
			break;
		case CFA_restore_state:
			if (!depth)
				return -EINVAL;
			*st = stack[--depth];
			break;
		case CFA_def_cfa:
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = (int64_t)rd_uleb(&r);
			st->cfa_how = CFA_REG;
			break;
		case CFA_def_cfa_sf:
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = factor((uint64_t)rd_sleb(&r), cie->data_align);
			st->cfa_how = CFA_REG;
			break;
		case CFA_def_cfa_register:
			st->cfa_reg = rd_uleb(&r);
			st->cfa_how = CFA_REG;
			break;
		/* After an expression these change a number nothing reads (so readelf, libgcc). */
		case CFA_def_cfa_offset:
			st->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case CFA_def_cfa_offset_sf:
			st->cfa_off = factor((uint64_t)rd_sleb(&r), cie->data_align);
			break;
		case CFA_def_cfa_expression:
			len = rd_uleb(&r);
			if (!rd_need(&r, len))
				break;
			st->cfa_how = plt_expr(r.p, len, &st->plt_lit) ? CFA_PLT : CFA_EXPR;
			r.p += len;
			break;
		case CFA_GNU_args_size:
			rd_uleb(&r);
			break;
		default:
			/* unknown operands: the rest cannot be decoded */
			return -EINVAL;
		}
	}
	if (err)
		return err;
	if (r.bad)
		return -EINVAL;
	return pg->run ? push_row(c, pg, st) : 0;
}

/*
 * Augmentation data of a "z" CIE. Letters past one we do not know are
 * skipped with the rest of the data: its length is known, and FDE
 * augmentation data is length-prefixed too.
 */
static void parse_aug(struct ctx *c, struct cie *cie, const char *aug, struct rd *a)
{
	uint8_t enc;

	for (; *aug; aug++) {
		switch (*aug) {
		case 'R':
			cie->fde_enc = rd_u8(a);
			break;
		case 'P':
			/* personality routine: skipped, never followed */
			enc = rd_u8(a);
			if (enc == PE_OMIT)
				break;
			if ((enc & 0x70) == PE_ALIGNED)
				rd_ptr(a, c, enc, cie->addr_size);
			else
				rd_val(a, enc & 0x0f, cie->addr_size);
			break;
		case 'L':
			/* the LSDA pointer itself sits in each FDE's augmentation data */
			rd_u8(a);
			break;
		case 'S':
			cie->signal = true;
			break;
		case 'B': /* AArch64 BTI, G: MTE; no data */
		case 'G':
			break;
		default:
			return;
		}
	}
}

static void parse_cie(struct ctx *c, uint64_t off, struct cie *cie)
{
	struct prog pg = { .cie = cie };
	struct entry e;
	struct rd r, a;
	const char *aug;
	size_t n;
	uint64_t len;
	uint8_t version;

	memset(cie, 0, sizeof(*cie));
	cie->off = off;
	cie->bad = true;
	cie->addr_size = 8;
	cie->fde_enc = PE_ABSPTR;
	if (off >= c->sect.size || read_entry(&c->sect, &c->cwin, off, &e) || e.terminator ||
	    !entry_is_cie(&c->sect, &e))
		return;
	r = e.body;
	version = rd_u8(&r);
	if (r.bad || (version != 1 && version != 3 && version != 4))
		return;
	aug = (const char *)r.p;
	n = strnlen(aug, (size_t)(r.end - r.p));
	rd_skip(&r, n + 1);
	if (r.bad)
		return; /* no NUL before the end */
	if (!strcmp(aug, "eh"))
		rd_skip(&r, cie->addr_size); /* GCC 2.x's eh_ptr */
	else if (n && aug[0] != 'z')
		return; /* unknown layout: cannot find the instructions */
	if (version == 4) {
		cie->addr_size = rd_u8(&r);
		if (rd_u8(&r) != 0 || (cie->addr_size != 4 && cie->addr_size != 8))
			return; /* segment selectors: not on x86-64 */
	}
	cie->code_align = rd_uleb(&r);
	cie->data_align = rd_sleb(&r);
	cie->ra_reg = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	if (n && aug[0] == 'z') {
		cie->aug_z = true;
		len = rd_uleb(&r);
		if (!rd_need(&r, len))
			return;
		a = (struct rd){ r.p, r.p + len, false, r.bias };
		parse_aug(c, cie, aug + 1, &a);
		if (a.bad)
			return;
		r.p += len;
	}
	if (r.bad)
		return;
	if (run_program(c, &pg, r, &cie->init))
		return;
	cie->bad = false;
}

/* The CIE at section offset off of the section being read, parsed on first use; NULL on ENOMEM. */
static const struct cie *get_cie(struct ctx *c, uint64_t off)
{
	struct cies *cc = c->cc;
	size_t lo = 0, hi = cc->n, mid;

	if (cc->last < cc->n && cc->v[cc->last].off == off)
		return &cc->v[cc->last];
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (cc->v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == cc->n || cc->v[lo].off != off) {
		/* usually appended: CIEs tend to precede their FDEs */
		if (grow((void **)&cc->v, &cc->cap, cc->n + 1, sizeof(*cc->v), 16))
			return NULL;
		memmove(&cc->v[lo + 1], &cc->v[lo], (cc->n - lo) * sizeof(*cc->v));
		cc->n++;
		parse_cie(c, off, &cc->v[lo]);
	}
	cc->last = lo;
	return &cc->v[lo];
}

static bool in_exec(const struct ctx *c, uint64_t pc)
{
	size_t i;

	if (!c->check_exec)
		return true;
	for (i = 0; i < c->nexec; i++) {
		if (pc >= c->exec[i].lo && pc < c->exec[i].hi)
			return true;
	}
	return false;
}

/* Read .eh_frame (which 0) or .debug_frame (1) from now on. */
static void use_sect(struct ctx *c, int which)
{
	c->sect = c->sects[which];
	c->cc = &c->cies[which];
	c->w = &c->wins[which];
}

/*
 * An FDE's header: its CIE, range and program (*prog). 0, 1: well-formed
 * but nothing to add (empty, or code the linker discarded), -EINVAL:
 * malformed, -ENOMEM.
 */
static int fde_header(struct ctx *c, const struct entry *e, const struct cie **cie, uint64_t *start,
		      uint64_t *end, struct rd *prog)
{
	struct rd r = e->body;
	uint64_t cie_off, range;

	if (c->sect.eh) {
		/* relative to the CIE pointer's own position */
		if (e->id > e->id_off)
			return -EINVAL;
		cie_off = e->id_off - e->id;
	} else {
		cie_off = e->id;
	}
	*cie = get_cie(c, cie_off);
	if (!*cie)
		return -ENOMEM;
	if ((*cie)->bad)
		return -EINVAL;
	*start = rd_ptr(&r, c, (*cie)->fde_enc, (*cie)->addr_size);
	range = rd_val(&r, (*cie)->fde_enc & 0x0f, (*cie)->addr_size);
	if ((*cie)->aug_z)
		rd_skip(&r, rd_uleb(&r)); /* the LSDA pointer, if any */
	if (r.bad || *start + range < *start)
		return -EINVAL;
	if (!range || !in_exec(c, *start))
		return 1;
	*end = *start + range;
	*prog = r;
	return 0;
}

/* The FDE as a run to sort: 0, 1 (nothing to add), -EINVAL, -ENOMEM. */
static int add_run(struct ctx *c, const struct entry *e, uint64_t entry_off, uint64_t flag)
{
	const struct cie *cie;
	uint64_t start, end;
	struct rd prog;
	int err;

	err = fde_header(c, e, &cie, &start, &end, &prog);
	if (err)
		return err;
	err = grow((void **)&c->runs, &c->cap_runs, c->nruns + 1, sizeof(*c->runs), 1024);
	if (err)
		return err;
	c->runs[c->nruns++] = (struct run){ .start = start, .end = end, .entry = entry_off | flag };
	return 0;
}

/* An FDE read at entry_off: counted, and its run added. -ENOMEM, else 0 (a bad one counted). */
static int add_fde(struct ctx *c, const struct entry *e, uint64_t entry_off, uint64_t flag)
{
	int err;

	c->stats->fdes++;
	err = add_run(c, e, entry_off, flag);
	if (err == -ENOMEM)
		return err;
	if (err < 0)
		c->stats->bad_fdes++;
	else if (err > 0)
		c->dropped++;
	return 0;
}

static int walk_section(struct ctx *c, int which)
{
	uint64_t flag = which ? ENTRY_DEBUG : 0;
	struct entry e;
	uint64_t off;

	use_sect(c, which);
	for (off = 0; off < c->sect.size; off = e.next) {
		if (read_entry(&c->sect, c->w, off, &e)) {
			c->stats->bad_fdes++; /* lost the thread: the rest is unreadable */
			break;
		}
		if (e.terminator || entry_is_cie(&c->sect, &e))
			continue;
		if (add_fde(c, &e, off, flag))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Run r's CFA program: its rows are appended to c->tmp, described by *o.
 * -EINVAL: malformed (nothing appended), -ENOMEM, -E2BIG.
 */
static int run_fde(struct ctx *c, const struct run *r, struct open_run *o)
{
	const struct cie *cie;
	struct state st;
	struct prog pg;
	struct entry e;
	struct rd prog;
	uint64_t start, end;
	int err;

	use_sect(c, r->entry & ENTRY_DEBUG ? 1 : 0);
	/* read and found well-formed in walk_section: only ENOMEM can differ now */
	if (read_entry(&c->sect, c->w, r->entry & ~ENTRY_DEBUG, &e))
		return -EINVAL;
	err = fde_header(c, &e, &cie, &start, &end, &prog);
	if (err)
		return err < 0 ? err : -EINVAL;
	*o = (struct open_run){ .end = end, .first = (uint32_t)c->ntmp };
	pg = (struct prog){ .cie = cie, .init = &cie->init, .run = o, .loc = start };
	st = cie->init;
	/* 'S': the whole FDE is the trampoline; its rules describe the sigframe */
	if (cie->signal)
		err = push_row(c, &pg, &st);
	else
		err = run_program(c, &pg, prog, &st);
	if (err || !o->n) {
		c->ntmp = o->first;
		return err ? err : -EINVAL;
	}
	return 0;
}

static int cmp_run(const void *pa, const void *pb)
{
	const struct run *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	/* longer first, so that a nested FDE is pushed over the one holding it */
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	/* same range: the later is pushed last and wins, so the first in the section goes last */
	if (a->entry != b->entry)
		return a->entry > b->entry ? -1 : 1;
	return 0;
}

/*
 * Drop the .debug_frame runs [from, nruns) that overlap any .eh_frame run
 * [0, from); those are sorted here.
 */
static int drop_covered(struct ctx *c, size_t from)
{
	uint64_t *maxend;
	size_t i, k, lo, hi, mid;

	if (!from || from == c->nruns)
		return 0;
	qsort(c->runs, from, sizeof(*c->runs), cmp_run);
	maxend = malloc(from * sizeof(*maxend));
	if (!maxend)
		return -ENOMEM;
	for (i = 0; i < from; i++)
		maxend[i] = i && maxend[i - 1] > c->runs[i].end ? maxend[i - 1] : c->runs[i].end;
	for (i = k = from; i < c->nruns; i++) {
		/* the .eh_frame runs starting before this one ends: does any reach into it? */
		lo = 0;
		hi = from;
		while (lo < hi) {
			mid = lo + (hi - lo) / 2;
			if (c->runs[mid].start < c->runs[i].end)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && maxend[lo - 1] > c->runs[i].start) {
			c->dropped++;
			continue;
		}
		c->runs[k++] = c->runs[i];
	}
	c->nruns = k;
	free(maxend);
	return 0;
}

/*
 * The table on its way to the sink. The last two rows stay here: the last
 * may still be replaced by a row at its pc, which is then compared with the
 * one before it for merging; the rest is final.
 */
#define OUT_CHUNK 4096

struct out {
	struct unwind_row rows[OUT_CHUNK];
	size_t n;
	size_t total; /* rows handed to the sink */
	cfi_sink_fn sink;
	void *ctx;
};

static int flush(struct out *o, size_t keep)
{
	size_t n = o->n - keep;
	int err;

	if (!n)
		return 0;
	err = o->sink(o->ctx, o->rows, n);
	if (err)
		return err;
	memmove(o->rows, o->rows + n, keep * sizeof(*o->rows));
	o->n = keep;
	o->total += n;
	return 0;
}

/* Append, letting a row at the same pc replace the last and merging repeats. */
static int emit(struct out *o, uint64_t pc, const struct unwind_row *r)
{
	int err;

	if (o->n && o->rows[o->n - 1].pc == pc)
		o->n--;
	if (o->n && same_rule(&o->rows[o->n - 1], r))
		return 0;
	if (o->n == OUT_CHUNK) {
		err = flush(o, 2);
		if (err)
			return err;
	}
	o->rows[o->n] = *r;
	o->rows[o->n].pc = pc;
	o->n++;
	return 0;
}

/*
 * The open runs form a stack, innermost (latest start) on top. Before the
 * next run starts at s, the top emits its rows below s; a run that ends
 * first is popped (and its rows with it) and the one under it resumes with
 * the row in force there, or, with none left, a gap marker goes in. A run
 * whose program turns out malformed is left out as if it were not there.
 */
static int sweep(struct ctx *c, struct out *o)
{
	struct open_run *stk = NULL, *t;
	size_t depth = 0, cap = 0, k;
	uint64_t s, pos;
	int err = 0;

	for (k = 0; k <= c->nruns && !err; k++) {
		s = k < c->nruns ? c->runs[k].start : UINT64_MAX;
		while (depth && !err) {
			t = &stk[depth - 1];
			while (!err && t->i + 1 < t->n && c->tmp[t->first + t->i + 1].pc < s) {
				t->i++;
				err = emit(o, c->tmp[t->first + t->i].pc, &c->tmp[t->first + t->i]);
			}
			if (err || t->end > s)
				break;
			pos = t->end;
			while (depth && stk[depth - 1].end <= pos)
				depth--;
			if (!depth) {
				c->ntmp = 0;
				err = emit(o, pos, c->gap);
				break;
			}
			t = &stk[depth - 1];
			c->ntmp = t->first + t->n;
			while (t->i + 1 < t->n && c->tmp[t->first + t->i + 1].pc <= pos)
				t->i++;
			err = emit(o, pos, &c->tmp[t->first + t->i]);
		}
		if (err || k == c->nruns)
			break;
		err = grow((void **)&stk, &cap, depth + 1, sizeof(*stk), 16);
		if (err)
			break;
		err = run_fde(c, &c->runs[k], &stk[depth]);
		if (err == -EINVAL) {
			c->stats->bad_fdes++;
			err = 0;
			continue;
		}
		if (err)
			break;
		t = &stk[depth++];
		err = emit(o, c->runs[k].start, &c->tmp[t->first]);
	}
	free(stk);
	return err ? err : flush(o, 0);
}

static Elf_Data *section_data(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	if (sh->sh_type == SHT_NOBITS)
		return NULL; /* e.g. .eh_frame in a separate debug file */
	if (sh->sh_flags & SHF_COMPRESSED) {
		if (elf_compress(scn, 0, 0) < 0)
			return NULL;
	} else if (!strncmp(name, ".zdebug", 7)) {
		if (elf_compress_gnu(scn, 0, 0) < 0)
			return NULL;
	}
	return elf_getdata(scn, NULL);
}

static int find_sections(Elf *elf, int fd, uint64_t fsize, struct sect *eh, struct sect *df,
			 struct ctx *c, bool eh_only)
{
	Elf_Scn *scn = NULL, *eh_scn = NULL, *df_scn = NULL;
	GElf_Shdr sh, eh_sh, df_sh;
	const char *name, *df_name = NULL;
	bool got_plt = false;
	Elf_Data *d;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return -ENOEXEC;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (!strcmp(name, ".eh_frame")) {
			eh_scn = scn;
			eh_sh = sh;
		} else if (!eh_only &&
			   (!strcmp(name, ".debug_frame") || !strcmp(name, ".zdebug_frame"))) {
			df_scn = scn;
			df_sh = sh;
			df_name = name;
		} else if (!strcmp(name, ".got.plt") || (!strcmp(name, ".got") && !got_plt)) {
			got_plt = !strcmp(name, ".got.plt");
			c->got = sh.sh_addr;
			c->have_got = true;
		}
	}
	if (eh_scn && eh_sh.sh_type == SHT_PROGBITS && !(eh_sh.sh_flags & SHF_COMPRESSED)) {
		/* read a window at a time (sect_get), never whole */
		if (eh_sh.sh_offset > fsize || eh_sh.sh_size > fsize - eh_sh.sh_offset)
			return -ENOEXEC; /* truncated file */
		if (eh_sh.sh_size)
			*eh = (struct sect){ NULL, eh_sh.sh_size,  eh_sh.sh_addr, true,
					     fd,   eh_sh.sh_offset };
	} else if (eh_scn && (d = section_data(eh_scn, &eh_sh, ".eh_frame")) && d->d_buf) {
		*eh = (struct sect){ d->d_buf, d->d_size, eh_sh.sh_addr, true, -1, 0 };
	} else if (eh_scn && eh_sh.sh_type != SHT_NOBITS && eh_sh.sh_size) {
		return -ENOEXEC; /* there, but unreadable: truncated file */
	}
	if (df_scn && (d = section_data(df_scn, &df_sh, df_name)) && d->d_buf) {
		*df = (struct sect){ d->d_buf, d->d_size, df_sh.sh_addr, false, -1, 0 };
	} else if (df_scn && df_sh.sh_type != SHT_NOBITS && df_sh.sh_size && !eh->size) {
		return -ENOEXEC; /* with .eh_frame there, it only loses the extras */
	}
	return 0;
}

/* Executable PT_LOADs: an FDE elsewhere describes code the linker threw away. */
static int find_exec(Elf *elf, struct ctx *c)
{
	GElf_Phdr ph;
	size_t n, i;

	if (elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD)
			continue;
		c->check_exec = true;
		if (!(ph.p_flags & PF_X) || c->nexec == sizeof(c->exec) / sizeof(c->exec[0]))
			continue;
		c->exec[c->nexec++] = (struct range){ ph.p_vaddr, ph.p_vaddr + ph.p_memsz };
	}
	/* more executable segments than we keep: do not filter at all */
	if (c->nexec == sizeof(c->exec) / sizeof(c->exec[0]))
		c->check_exec = false;
	return 0;
}

/* The header tables lie inside the file: libelf takes a cut-off file for one with no sections. */
static bool tables_fit(const GElf_Ehdr *eh, uint64_t size)
{
	uint64_t sh_end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
	uint64_t ph_end = eh->e_phoff + (uint64_t)eh->e_phnum * eh->e_phentsize;

	if (eh->e_shnum && (sh_end < eh->e_shoff || sh_end > size))
		return false;
	if (eh->e_phnum && (ph_end < eh->e_phoff || ph_end > size))
		return false;
	return true;
}

/*
 * Only the FDEs at the given .eh_frame addresses (partial: fdes not NULL):
 * their entries are read where .eh_frame_hdr says they are, the rest of the
 * section is never walked, and code outside them is marked with gap_row.
 */
static int add_fdes(struct ctx *c, const uint64_t *fdes, size_t nfdes)
{
	struct entry e;
	size_t i;

	use_sect(c, 0);
	for (i = 0; i < nfdes; i++) {
		uint64_t off = fdes[i] - c->sect.addr;

		if (fdes[i] < c->sect.addr || off >= c->sect.size ||
		    read_entry(&c->sect, c->w, off, &e) || e.terminator ||
		    entry_is_cie(&c->sect, &e)) {
			c->stats->bad_fdes++;
			continue;
		}
		if (add_fde(c, &e, off, 0))
			return -ENOMEM;
	}
	return 0;
}

/* The lowest executable address: where a partial table's first gap starts. */
static uint64_t exec_lo(const struct ctx *c)
{
	uint64_t lo = UINT64_MAX;

	for (size_t i = 0; i < c->nexec; i++)
		if (c->exec[i].lo < lo)
			lo = c->exec[i].lo;
	return lo;
}

/* The ctx's buffers and the ELF handle, whatever state parse() left them in. */
static void ctx_free(struct ctx *c, Elf *elf)
{
	free(c->tmp);
	free(c->runs);
	free(c->cies[0].v);
	free(c->cies[1].v);
	free(c->wins[0].buf);
	free(c->wins[1].buf);
	free(c->cwin.buf);
	if (elf)
		elf_end(elf);
}

/*
 * Every FDE's range into c->runs (or only those at fdes, a partial table's),
 * .debug_frame's where .eh_frame has none, sorted; stats->source set. *elf
 * is ours to end (ctx_free) whatever is returned. 0 or -errno.
 */
static int parse(int fd, const uint64_t *fdes, size_t nfdes, struct ctx *c, Elf **elf)
{
	struct sect eh = { 0 }, df = { 0 };
	struct cfi_stats *stats = c->stats;
	size_t neh = 0;
	GElf_Ehdr ehdr;
	struct stat st;
	int err;

	*elf = NULL;
	memset(stats, 0, sizeof(*stats));
	if (fstat(fd, &st))
		return -errno;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	*elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!*elf || elf_kind(*elf) != ELF_K_ELF || !gelf_getehdr(*elf, &ehdr) ||
	    ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_ident[EI_DATA] != ELFDATA2LSB ||
	    ehdr.e_machine != EM_X86_64 || !tables_fit(&ehdr, (uint64_t)st.st_size))
		return -ENOEXEC;
	err = find_sections(*elf, fd, (uint64_t)st.st_size, &eh, &df, c, fdes != NULL);
	if (err)
		return err;
	err = find_exec(*elf, c);
	if (err)
		return err;
	c->sects[0] = eh;
	c->sects[1] = df;

	if (eh.size) {
		err = fdes ? add_fdes(c, fdes, nfdes) : walk_section(c, 0);
		if (err)
			return err;
		neh = c->nruns;
	}
	if (df.size) {
		err = walk_section(c, 1);
		if (err)
			return err;
		err = drop_covered(c, neh);
		if (err)
			return err;
	}
	if (neh && c->nruns > neh)
		stats->source = ".eh_frame+.debug_frame";
	else if (neh || (eh.size && !df.size))
		stats->source = ".eh_frame";
	else if (df.size)
		stats->source = ".debug_frame";
	stats->dropped_fdes = c->dropped;
	if (c->nruns > 1)
		qsort(c->runs, c->nruns, sizeof(*c->runs), cmp_run);
	return 0;
}

static int emit_table(int fd, const uint64_t *fdes, size_t nfdes, cfi_sink_fn sink, void *ctx,
		      struct cfi_stats *stats, size_t *nrows)
{
	struct ctx c = { .stats = stats, .gap = fdes ? &gap_row : &no_row };
	struct out *o = NULL;
	Elf *elf = NULL;
	int err;

	*nrows = 0;
	err = parse(fd, fdes, nfdes, &c, &elf);
	if (err)
		goto cleanup;
	o = malloc(sizeof(*o));
	if (!o) {
		err = -ENOMEM;
		goto cleanup;
	}
	o->n = o->total = 0;
	o->sink = sink;
	o->ctx = ctx;
	/*
	 * a partial table: the code below its first chosen FDE is a gap too,
	 * and with none chosen yet the table is that one gap row
	 */
	if (fdes && exec_lo(&c) != UINT64_MAX && (!c.nruns || exec_lo(&c) < c.runs[0].start)) {
		err = emit(o, exec_lo(&c), &gap_row);
		if (err)
			goto cleanup;
	}
	err = sweep(&c, o);
	if (!err)
		*nrows = o->total;
cleanup:
	free(o);
	ctx_free(&c, elf);
	return err;
}

int cfi__functions(int fd, struct elfsym_func **out, size_t *n)
{
	struct cfi_stats stats;
	struct ctx c = { .stats = &stats, .gap = &no_row };
	struct elfsym_func *v = NULL;
	size_t k = 0;
	Elf *elf = NULL;
	int err;

	*out = NULL;
	*n = 0;
	err = parse(fd, NULL, 0, &c, &elf);
	if (!err && c.nruns && !(v = malloc(c.nruns * sizeof(*v))))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < c.nruns; i++) {
		/* one function an FDE start: of FDEs at one address, the first in the sections */
		if (k && v[k - 1].start == c.runs[i].start)
			continue;
		v[k++] = (struct elfsym_func){ c.runs[i].start, c.runs[i].end };
	}
	ctx_free(&c, elf);
	if (err) {
		free(v);
		return err;
	}
	*out = v;
	*n = k;
	return 0;
}

int cfi__emit(int fd, cfi_sink_fn sink, void *ctx, struct cfi_stats *stats, size_t *nrows)
{
	return emit_table(fd, NULL, 0, sink, ctx, stats, nrows);
}

int cfi__emit_fdes(int fd, const uint64_t *fdes, size_t nfdes, cfi_sink_fn sink, void *ctx,
		   struct cfi_stats *stats, size_t *nrows)
{
	static const uint64_t none;

	return emit_table(fd, nfdes ? fdes : &none, nfdes, sink, ctx, stats, nrows);
}

struct array_sink {
	struct unwind_row *rows;
	size_t n, cap;
};

static int array_put(void *ctx, const struct unwind_row *rows, size_t n)
{
	struct array_sink *a = ctx;
	int err = grow((void **)&a->rows, &a->cap, a->n + n, sizeof(*a->rows), 4096);

	if (err)
		return err;
	memcpy(a->rows + a->n, rows, n * sizeof(*rows));
	a->n += n;
	return 0;
}

int cfi__build(int fd, struct unwind_row **rows, size_t *nrows, struct cfi_stats *stats)
{
	struct array_sink a = { 0 };
	struct unwind_row *shrunk;
	size_t n;
	int err;

	*rows = NULL;
	*nrows = 0;
	err = cfi__emit(fd, array_put, &a, stats, &n);
	if (err || !a.n) {
		free(a.rows);
		return err;
	}
	shrunk = realloc(a.rows, a.n * sizeof(*a.rows));
	*rows = shrunk ? shrunk : a.rows;
	*nrows = a.n;
	return 0;
}

const struct unwind_row *cfi__find(const struct unwind_row *rows, size_t nrows, uint64_t pc)
{
	size_t lo = 0, hi = nrows, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &rows[lo - 1] : NULL;
}
