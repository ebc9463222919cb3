/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cfi against three oracles:
 *  - readelf --debug-dump=frames-interp, row by row, for the fixtures of
 *    tests/unit/fixtures/cfi, libc, libstdc++ and every pyenv libpython;
 *  - asm.S's labels, for rules compilers rarely emit;
 *  - .eh_frame/.debug_frame blobs written here into a minimal ELF file, for
 *    encodings no toolchain here produces, overlaps and malformed entries,
 *    plus mutations of a real .eh_frame that must never crash.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip.h"

#include "unwind/cfi.h"

#define LIBC	  "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LIBSTDCXX "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
/* "well under 100 ms": the bound a slow CI machine must still meet */

static const char *fixtures;

static int setup(void **state)
{
	(void)state;
	fixtures = getenv("FIXTURES");
	if (!fixtures) {
		fprintf(stderr, "FIXTURES is not set (run through make unit)\n");
		return -1;
	}
	return elf_version(EV_CURRENT) == EV_NONE ? -1 : 0;
}

static const char *fx(const char *file)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/cfi/%s", fixtures, file);
	return path;
}

struct table {
	struct unwind_row *rows;
	size_t n;
	struct cfi_stats st;
	double ms;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* What every table must look like, whatever went in. */
static void check_invariants(const struct table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct unwind_row *r = &t->rows[i];

		assert_true(r->cfa_rule <= CFA_RULE_SIGNAL);
		assert_true(r->rbp_rule <= RBP_RULE_UNSUPPORTED);
		if (r->cfa_rule != CFA_RULE_SP && r->cfa_rule != CFA_RULE_FP &&
		    r->cfa_rule != CFA_RULE_PLT) {
			assert_int_equal(r->cfa_off, 0);
			assert_int_equal(r->rbp_rule, RBP_RULE_SAME);
		}
		if (r->rbp_rule != RBP_RULE_CFA)
			assert_int_equal(r->rbp_off, 0);
		if (!i)
			continue;
		assert_true(r[-1].pc < r->pc);
		assert_false(r[-1].cfa_rule == r->cfa_rule && r[-1].cfa_off == r->cfa_off &&
			     r[-1].rbp_rule == r->rbp_rule && r[-1].rbp_off == r->rbp_off);
	}
}

static int build_fd(int fd, struct table *t)
{
	double t0 = now_ms();
	int err;

	err = cfi__build(fd, &t->rows, &t->n, &t->st);
	t->ms = now_ms() - t0;
	if (!err)
		check_invariants(t);
	else
		assert_true(!t->rows && !t->n);
	return err;
}

static int build_path(const char *path, struct table *t)
{
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("%s: %s", path, strerror(errno));
	err = build_fd(fd, t);
	close(fd);
	return err;
}

/* ELF facts the checks need: symbols, section names, executable segments. */
struct sym {
	char name[64];
	uint64_t addr, size;
};

struct sec {
	char name[32];
	uint64_t addr, size;
};

struct elfinfo {
	struct sym *syms;
	size_t nsyms;
	struct sec *secs;
	size_t nsecs;
	uint64_t exec_lo[16], exec_hi[16];
	size_t nexec;
	bool has_load;
};

static void elfinfo_load(const char *path, struct elfinfo *ei)
{
	Elf_Scn *scn = NULL;
	Elf_Data *d;
	GElf_Shdr sh;
	GElf_Phdr ph;
	GElf_Sym s;
	size_t shstrndx, n, i;
	const char *name;
	Elf *elf;
	int fd;

	memset(ei, 0, sizeof(*ei));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		assert_non_null(gelf_getshdr(scn, &sh));
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		ei->secs = realloc(ei->secs, (ei->nsecs + 1) * sizeof(*ei->secs));
		assert_non_null(ei->secs);
		snprintf(ei->secs[ei->nsecs].name, sizeof(ei->secs->name), "%s", name ? name : "");
		ei->secs[ei->nsecs].addr = sh.sh_addr;
		ei->secs[ei->nsecs].size = sh.sh_size;
		ei->nsecs++;
		if (sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		assert_non_null(d);
		for (i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			if (!gelf_getsym(d, (int)i, &s) || !s.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			ei->syms = realloc(ei->syms, (ei->nsyms + 1) * sizeof(*ei->syms));
			assert_non_null(ei->syms);
			snprintf(ei->syms[ei->nsyms].name, sizeof(ei->syms->name), "%s", name);
			ei->syms[ei->nsyms].addr = s.st_value;
			ei->syms[ei->nsyms].size = s.st_size;
			ei->nsyms++;
		}
	}
	assert_int_equal(elf_getphdrnum(elf, &n), 0);
	for (i = 0; i < n; i++) {
		assert_non_null(gelf_getphdr(elf, (int)i, &ph));
		if (ph.p_type != PT_LOAD)
			continue;
		ei->has_load = true;
		if ((ph.p_flags & PF_X) && ei->nexec < 16) {
			ei->exec_lo[ei->nexec] = ph.p_vaddr;
			ei->exec_hi[ei->nexec++] = ph.p_vaddr + ph.p_memsz;
		}
	}
	elf_end(elf);
	close(fd);
}

static void elfinfo_free(struct elfinfo *ei)
{
	free(ei->syms);
	free(ei->secs);
}

static const struct sym *find_sym(const struct elfinfo *ei, const char *name)
{
	size_t i;

	for (i = 0; i < ei->nsyms; i++) {
		if (!strcmp(ei->syms[i].name, name))
			return &ei->syms[i];
	}
	return NULL;
}

static uint64_t sym_addr(const struct elfinfo *ei, const char *name)
{
	const struct sym *s = find_sym(ei, name);

	if (!s)
		fail_msg("no symbol %s", name);
	return s->addr;
}

static const struct sec *find_sec(const struct elfinfo *ei, const char *name)
{
	size_t i;

	for (i = 0; i < ei->nsecs; i++) {
		if (!strcmp(ei->secs[i].name, name))
			return &ei->secs[i];
	}
	return NULL;
}

static const char *sec_at(const struct elfinfo *ei, uint64_t addr)
{
	size_t i;

	for (i = 0; i < ei->nsecs; i++) {
		if (ei->secs[i].addr && addr >= ei->secs[i].addr &&
		    addr - ei->secs[i].addr < ei->secs[i].size)
			return ei->secs[i].name;
	}
	return "";
}

static bool in_exec(const struct elfinfo *ei, uint64_t pc)
{
	size_t i;

	if (!ei->has_load)
		return true;
	for (i = 0; i < ei->nexec; i++) {
		if (pc >= ei->exec_lo[i] && pc < ei->exec_hi[i])
			return true;
	}
	return false;
}

/* ---- readelf --debug-dump=frames-interp ---- */

struct rrow {
	uint64_t loc;
	char cfa[24];
	char rbp[24]; /* "" when readelf has no rbp column */
	char ra[24];  /* "" when it has no ra column */
};

struct rcie {
	int sect; /* 0 .eh_frame, 1 .debug_frame */
	uint64_t off;
	char aug[16];
	uint64_t ra;
	bool has_row;
	struct rrow row; /* the CIE's initial row */
};

struct rfde {
	int sect;
	uint64_t lo, hi;
	size_t cie;	 /* index in cies, or SIZE_MAX */
	size_t first, n; /* its rows in rows[] */
	bool used;
};

struct rdump {
	struct rcie *cies;
	size_t ncies;
	struct rfde *fdes;
	size_t nfdes;
	struct rrow *rows;
	size_t nrows, cap_rows;
};

static void *grow_array(void *v, size_t n, size_t elem)
{
	/*
	 * Room for element n: the capacity doubles each time n reaches a power
	 * of two, so callers need not keep one.
	 */
	if (n & (n - 1))
		return v;
	v = realloc(v, (n ? 2 * n : 1) * elem);
	assert_non_null(v);
	return v;
}

/* Split a row at spaces; readelf writes a register rule as "r0 (rax)". */
static int split_row(char *line, char **tok, int max)
{
	int n = 0;
	char *p;

	for (p = strtok(line, " \t\n"); p; p = strtok(NULL, " \t\n")) {
		if (*p == '(' && n) {
			p[-1] = ' ';
			continue;
		}
		if (n == max)
			break;
		tok[n++] = p;
	}
	return n;
}

static int parse_readelf(const char *path, struct rdump *rd)
{
	char cmd[PATH_MAX + 64], *line = NULL, *tok[64], *q;
	int sect = -1, ntok, rbp_col = -1, ra_col = -1, i, nsect = 0;
	enum {
		NONE,
		IN_CIE,
		IN_FDE
	} cur = NONE;
	unsigned long long a, b, c, d;
	struct rrow row;
	size_t cap = 0;
	FILE *fp;

	memset(rd, 0, sizeof(*rd));
	snprintf(cmd, sizeof(cmd), "readelf -wN --debug-dump=frames-interp '%s' 2>/dev/null", path);
	fp = popen(cmd, "r");
	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		if (!strncmp(line, "Contents of the ", 16)) {
			sect = strstr(line, "debug_frame")  ? 1
			       : strstr(line, ".eh_frame ") ? 0
							    : -1;
			nsect += sect >= 0;
			cur = NONE;
			continue;
		}
		if (sect < 0)
			continue;
		if (line[0] == '\n' || strstr(line, "ZERO terminator")) {
			cur = NONE; /* a table ends with a blank line */
			continue;
		}
		if (sscanf(line, "%llx %llx %llx CIE \"", &a, &b, &c) == 3 &&
		    strstr(line, "CIE \"")) {
			struct rcie *ci;

			rd->cies = grow_array(rd->cies, rd->ncies, sizeof(*rd->cies));
			ci = &rd->cies[rd->ncies++];
			memset(ci, 0, sizeof(*ci));
			ci->sect = sect;
			ci->off = a;
			q = strstr(line, "CIE \"") + 5;
			for (i = 0; *q && *q != '"' && i < (int)sizeof(ci->aug) - 1; q++)
				ci->aug[i++] = *q;
			q = strstr(line, "ra=");
			ci->ra = q ? strtoull(q + 3, NULL, 10) : ~0ULL;
			cur = IN_CIE;
			continue;
		}
		q = strstr(line, " FDE cie=");
		if (q && sscanf(q, " FDE cie=%llx pc=%llx..%llx", &a, &b, &c) == 3) {
			struct rfde *f;

			rd->fdes = grow_array(rd->fdes, rd->nfdes, sizeof(*rd->fdes));
			f = &rd->fdes[rd->nfdes++];
			memset(f, 0, sizeof(*f));
			f->sect = sect;
			f->lo = b;
			f->hi = c;
			f->cie = SIZE_MAX;
			for (d = 0; d < rd->ncies; d++) {
				if (rd->cies[d].sect == sect && rd->cies[d].off == a)
					f->cie = d;
			}
			f->first = rd->nrows;
			cur = IN_FDE;
			continue;
		}
		if (!strncmp(line, "   LOC", 6)) {
			ntok = split_row(line, tok, 64);
			rbp_col = ra_col = -1;
			for (i = 2; i < ntok; i++) {
				if (!strcmp(tok[i], "rbp"))
					rbp_col = i;
				else if (!strcmp(tok[i], "ra"))
					ra_col = i;
			}
			continue;
		}
		if (cur == NONE || !strchr("0123456789abcdef", line[0]) || line[0] == '\0')
			continue;
		ntok = split_row(line, tok, 64);
		if (ntok < 2)
			continue;
		memset(&row, 0, sizeof(row));
		row.loc = strtoull(tok[0], NULL, 16);
		snprintf(row.cfa, sizeof(row.cfa), "%s", tok[1]);
		if (rbp_col > 0 && rbp_col < ntok)
			snprintf(row.rbp, sizeof(row.rbp), "%s", tok[rbp_col]);
		if (ra_col > 0 && ra_col < ntok)
			snprintf(row.ra, sizeof(row.ra), "%s", tok[ra_col]);
		if (cur == IN_CIE) {
			rd->cies[rd->ncies - 1].row = row;
			rd->cies[rd->ncies - 1].has_row = true;
			continue;
		}
		rd->rows = grow_array(rd->rows, rd->nrows, sizeof(*rd->rows));
		rd->rows[rd->nrows++] = row;
		rd->fdes[rd->nfdes - 1].n++;
	}
	free(line);
	/* its exit status also reports complaints about other sections (NOBITS .eh_frame) */
	pclose(fp);
	return nsect ? 0 : -EIO;
}

static void rdump_free(struct rdump *rd)
{
	free(rd->cies);
	free(rd->fdes);
	free(rd->rows);
}

struct ival {
	uint64_t lo, hi;
};

static int cmp_ival(const void *pa, const void *pb)
{
	const struct ival *a = pa, *b = pb;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return 0;
}

/* Sorted intervals with a running maximum of their ends: "is pc in any?" */
struct cover {
	struct ival *v;
	uint64_t *maxhi;
	size_t n;
};

static void cover_init(struct cover *c, struct ival *v, size_t n)
{
	size_t i;

	qsort(v, n, sizeof(*v), cmp_ival);
	c->v = v;
	c->n = n;
	c->maxhi = calloc(n ? n : 1, sizeof(*c->maxhi));
	assert_non_null(c->maxhi);
	for (i = 0; i < n; i++)
		c->maxhi[i] = i && c->maxhi[i - 1] > v[i].hi ? c->maxhi[i - 1] : v[i].hi;
}

static bool cover_has(const struct cover *c, uint64_t pc)
{
	size_t lo = 0, hi = c->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (c->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && c->maxhi[lo - 1] > pc;
}

/* Does [lo, hi) meet any interval of c? */
static bool cover_meets(const struct cover *c, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = c->n, mid;

	while (a < b) {
		mid = a + (b - a) / 2;
		if (c->v[mid].lo < hi)
			a = mid + 1;
		else
			b = mid;
	}
	return a && c->maxhi[a - 1] > lo;
}

static bool fits16(long v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

/*
 * What cfi must say where readelf prints row rr of an FDE with CIE ci.
 * readelf prints any CFA expression as "exp": in .plt* sections that is the
 * PLT pattern, elsewhere one the table cannot express, except in
 * [exp_lo, exp_hi) (asm.S's cfx_asm_ops, whose every row test_asm_labels
 * pins down), where *either is set and both are accepted.
 */
static struct unwind_row expect(const struct rcie *ci, const struct rrow *rr, const char *sec,
				uint64_t exp_lo, uint64_t exp_hi, bool *either)
{
	struct unwind_row e = { .pc = rr->loc };
	long off;
	char *end;

	*either = false;
	if (strchr(ci->aug, 'S')) {
		e.cfa_rule = CFA_RULE_SIGNAL;
		return e;
	}
	if (ci->ra != 16 || !*rr->ra)
		return e;
	if (!strcmp(rr->ra, "u")) {
		e.cfa_rule = CFA_RULE_END;
		return e;
	}
	if (strcmp(rr->ra, "c-8"))
		return e;
	if (!strcmp(rr->cfa, "exp")) {
		if (!strncmp(sec, ".plt", 4))
			e.cfa_rule = CFA_RULE_PLT;
		else if (rr->loc >= exp_lo && rr->loc < exp_hi)
			*either = true;
	} else if (!strncmp(rr->cfa, "rsp", 3) || !strncmp(rr->cfa, "rbp", 3)) {
		e.cfa_rule = rr->cfa[1] == 's' ? CFA_RULE_SP : CFA_RULE_FP;
		e.cfa_off = (int32_t)strtol(rr->cfa + 3, &end, 10);
		assert_true(*end == '\0');
	}
	if (e.cfa_rule == CFA_RULE_UNSUPPORTED)
		return e;

	if (!*rr->rbp || !strcmp(rr->rbp, "u") || !strcmp(rr->rbp, "s")) {
		e.rbp_rule = RBP_RULE_SAME;
	} else if (rr->rbp[0] == 'c' && (rr->rbp[1] == '-' || rr->rbp[1] == '+')) {
		off = strtol(rr->rbp + 1, &end, 10);
		assert_true(*end == '\0');
		if (fits16(off)) {
			e.rbp_rule = RBP_RULE_CFA;
			e.rbp_off = (int16_t)off;
		} else {
			e.rbp_rule = RBP_RULE_UNSUPPORTED;
		}
	} else {
		e.rbp_rule = RBP_RULE_UNSUPPORTED;
	}
	return e;
}

struct tally {
	size_t checked, rules[CFA_RULE_SIGNAL + 1], rbp_saved, skipped, gaps, bad;
};

static void tally_add(struct tally *sum, const struct tally *t)
{
	int i;

	sum->checked += t->checked;
	for (i = 0; i <= CFA_RULE_SIGNAL; i++)
		sum->rules[i] += t->rules[i];
	sum->rbp_saved += t->rbp_saved;
	sum->skipped += t->skipped;
	sum->gaps += t->gaps;
	sum->bad += t->bad;
}

static void compare_at(const char *path, const struct table *t, uint64_t pc,
		       const struct unwind_row *e, bool either, const struct rrow *rr,
		       struct tally *ty)
{
	const struct unwind_row *r = cfi__find(t->rows, t->n, pc);
	bool ok;

	ok = r && (r->cfa_rule == e->cfa_rule || (either && r->cfa_rule == CFA_RULE_PLT));
	if (ok && (e->cfa_rule == CFA_RULE_SP || e->cfa_rule == CFA_RULE_FP))
		ok = r->cfa_off == e->cfa_off && r->rbp_rule == e->rbp_rule &&
		     r->rbp_off == e->rbp_off;
	if (ok && r->cfa_rule == CFA_RULE_PLT)
		ok = r->cfa_off >= 0 && r->cfa_off <= 15 && r->rbp_rule == e->rbp_rule &&
		     r->rbp_off == e->rbp_off;
	ty->checked++;
	ty->rules[e->cfa_rule]++;
	if (e->rbp_rule == RBP_RULE_CFA)
		ty->rbp_saved++;
	if (ok)
		return;
	if (ty->bad++ < 10)
		fprintf(stderr,
			"%s: %#llx (row %#llx: cfa %s rbp %s ra %s): "
			"want %d/%d/%d/%d, have %d/%d/%d/%d\n",
			path, (unsigned long long)pc, (unsigned long long)rr->loc, rr->cfa, rr->rbp,
			rr->ra, e->cfa_rule, e->cfa_off, e->rbp_rule, e->rbp_off,
			r ? r->cfa_rule : -1, r ? r->cfa_off : -1, r ? r->rbp_rule : -1,
			r ? r->rbp_off : -1);
}

/*
 * Every row readelf prints for an FDE that cfi uses is checked at its first
 * and its last byte; the byte after each FDE that no other covers must be a
 * gap. Points covered by two FDEs are skipped (readelf has no opinion there).
 */
static void check_against_readelf(const char *path, struct tally *ty)
{
	struct ival *used, *twice;
	struct cover c_used, c_twice, c_eh;
	struct rdump rd;
	struct elfinfo ei;
	struct table t;
	const struct sym *exp_sym;
	uint64_t exp_lo = 0, exp_hi = 0, next, pc;
	size_t i, j, k, nused = 0, ntwice = 0, neh = 0, last;
	bool any_eh = false;
	int err;

	memset(ty, 0, sizeof(*ty));
	err = build_path(path, &t);
	assert_int_equal(err, 0);
	assert_int_equal(t.st.bad_fdes, 0);
	err = parse_readelf(path, &rd);
	assert_int_equal(err, 0);
	elfinfo_load(path, &ei);
	exp_sym = find_sym(&ei, "cfx_asm_ops");
	if (exp_sym) {
		exp_lo = exp_sym->addr;
		exp_hi = exp_sym->addr + exp_sym->size;
	}

	/* the FDEs cfi uses: .eh_frame, then .debug_frame where .eh_frame is silent */
	used = calloc(rd.nfdes + 1, sizeof(*used));
	twice = calloc(rd.nfdes + 1, sizeof(*twice));
	assert_true(used && twice);
	for (i = 0; i < rd.nfdes; i++) {
		struct rfde *f = &rd.fdes[i];

		if (f->sect == 0 && f->hi > f->lo && in_exec(&ei, f->lo)) {
			f->used = true;
			used[neh++] = (struct ival){ f->lo, f->hi };
			any_eh = true;
		}
	}
	cover_init(&c_eh, used, neh);
	for (i = 0; i < rd.nfdes; i++) {
		struct rfde *f = &rd.fdes[i];

		if (f->sect == 1 && f->hi > f->lo && in_exec(&ei, f->lo) &&
		    !(any_eh && cover_meets(&c_eh, f->lo, f->hi)))
			f->used = true;
	}
	free(c_eh.maxhi);
	for (i = 0, nused = 0; i < rd.nfdes; i++) {
		if (rd.fdes[i].used)
			used[nused++] = (struct ival){ rd.fdes[i].lo, rd.fdes[i].hi };
	}
	cover_init(&c_used, used, nused);
	for (i = 1; i < nused; i++) {
		uint64_t hi = c_used.maxhi[i - 1] < used[i].hi ? c_used.maxhi[i - 1] : used[i].hi;

		if (c_used.maxhi[i - 1] > used[i].lo)
			twice[ntwice++] = (struct ival){ used[i].lo, hi };
	}
	cover_init(&c_twice, twice, ntwice);

	for (i = 0; i < rd.nfdes; i++) {
		const struct rfde *f = &rd.fdes[i];
		const struct rcie *ci;
		struct rrow *rows = &rd.rows[f->first], cie_row;
		struct unwind_row e;
		size_t n = f->n;
		bool either;

		if (!f->used)
			continue;
		assert_true(f->cie != SIZE_MAX);
		ci = &rd.cies[f->cie];
		if (!n && ci->has_row) {
			/* no instructions: the CIE's row, all through */
			cie_row = ci->row;
			cie_row.loc = f->lo;
			rows = &cie_row;
			n = 1;
		}
		for (j = 0; j < n; j++) {
			if (rows[j].loc < f->lo || rows[j].loc >= f->hi)
				continue;
			/* advance_loc 0 prints the same LOC twice: the last holds */
			if (j + 1 < n && rows[j + 1].loc == rows[j].loc)
				continue;
			for (k = j + 1; k < n && rows[k].loc == rows[j].loc; k++)
				;
			next = k < n && rows[k].loc < f->hi ? rows[k].loc : f->hi;
			e = expect(ci, &rows[j], sec_at(&ei, rows[j].loc), exp_lo, exp_hi, &either);
			for (last = 0; last < 2; last++) {
				pc = last ? next - 1 : rows[j].loc;
				if (last && pc == rows[j].loc)
					break;
				if (cover_has(&c_twice, pc)) {
					ty->skipped++;
					continue;
				}
				compare_at(path, &t, pc, &e, either, &rows[j], ty);
			}
		}
		if (!cover_has(&c_used, f->hi)) {
			const struct unwind_row *r = cfi__find(t.rows, t.n, f->hi);

			ty->gaps++;
			if (!r || r->cfa_rule != CFA_RULE_UNSUPPORTED) {
				fprintf(stderr, "%s: no gap marker at %#llx\n", path,
					(unsigned long long)f->hi);
				ty->bad++;
			}
		}
	}
	fprintf(stderr,
		"cfi: %s: %s, %zu points agree of %zu (sp %zu fp %zu plt %zu end %zu signal %zu "
		"unsupported %zu; rbp saved %zu), %zu gaps, %zu overlap points skipped, "
		"%zu rows in %.1f ms\n",
		path, t.st.source ? t.st.source : "no CFI", ty->checked - ty->bad, ty->checked,
		ty->rules[CFA_RULE_SP], ty->rules[CFA_RULE_FP], ty->rules[CFA_RULE_PLT],
		ty->rules[CFA_RULE_END], ty->rules[CFA_RULE_SIGNAL],
		ty->rules[CFA_RULE_UNSUPPORTED], ty->rbp_saved, ty->gaps, ty->skipped, t.n, t.ms);
	assert_int_equal(ty->bad, 0);

	free(c_used.maxhi);
	free(c_twice.maxhi);
	free(used);
	free(twice);
	elfinfo_free(&ei);
	rdump_free(&rd);
	free(t.rows);
}

static bool have_readelf(void)
{
	return system("readelf --version >/dev/null 2>&1") == 0;
}

static struct tally total;

static void test_readelf_fixtures(void **state)
{
	static const char *const files[] = {
		"omitfp", "keepfp",  "nopie",  "ibtplt", "df1.so",	"df3.so",
		"df4.so", "df64.so", "dfz.so", "mixed",	 "mixed.debug",
	};
	struct tally ty;
	size_t i;

	(void)state;
	if (!have_readelf())
		skip_because("no readelf (binutils) to compare against");
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		check_against_readelf(fx(files[i]), &ty);
		assert_true(ty.checked > 0);
		tally_add(&total, &ty);
	}
}

/* Best of three: the first run also pays for page faults on a cold file. */
static double build_ms(const char *path)
{
	struct table t;
	double best = 1e9;
	int i;

	for (i = 0; i < 3; i++) {
		assert_int_equal(build_path(path, &t), 0);
		if (t.ms < best)
			best = t.ms;
		free(t.rows);
	}
	return best;
}

static void check_system(const char *path, size_t min_points)
{
	struct tally ty;
	double ms;

	check_against_readelf(path, &ty);
	assert_true(ty.checked >= min_points);
	tally_add(&total, &ty);
	ms = build_ms(path);
	fprintf(stderr, "cfi: %s: built in %.2f ms (best of 3)\n", path, ms);
	/* the target is 100 ms: reported above, not asserted (speed is for make bench) */
}

static void test_readelf_libc(void **state)
{
	(void)state;
	if (!have_readelf())
		skip_because("no readelf (binutils) to compare against");
	if (access(LIBC, R_OK))
		skip_because("no %s", LIBC);
	check_system(LIBC, 20000);
	if (!access(LIBSTDCXX, R_OK))
		check_system(LIBSTDCXX, 10000);
}

static void test_readelf_libpython(void **state)
{
	char pattern[PATH_MAX];
	const char *root = getenv("PYENV_ROOT"), *home = getenv("HOME");
	glob_t g;
	size_t i;

	(void)state;
	if (root)
		snprintf(pattern, sizeof(pattern), "%s/versions/*/lib/libpython*.so.1.0", root);
	else
		snprintf(pattern, sizeof(pattern), "%s/.pyenv/versions/*/lib/libpython*.so.1.0",
			 home ? home : "/root");
	if (!have_readelf())
		skip_because("no readelf (binutils) to compare against");
	if (glob(pattern, 0, NULL, &g))
		skip_because("no pyenv libpython (%s)", pattern);
	for (i = 0; i < g.gl_pathc; i++)
		check_system(g.gl_pathv[i], 20000);
	globfree(&g);
}

static void test_total(void **state)
{
	(void)state;
	fprintf(stderr,
		"cfi: total: %zu points agree with readelf (sp %zu fp %zu plt %zu end %zu "
		"signal %zu unsupported %zu; rbp saved %zu), %zu gaps, %zu overlap points "
		"skipped\n",
		total.checked - total.bad, total.rules[CFA_RULE_SP], total.rules[CFA_RULE_FP],
		total.rules[CFA_RULE_PLT], total.rules[CFA_RULE_END], total.rules[CFA_RULE_SIGNAL],
		total.rules[CFA_RULE_UNSUPPORTED], total.rbp_saved, total.gaps, total.skipped);
	assert_int_equal(total.bad, 0);
}

/* ---- asm.S labels and compiled functions ---- */

struct want {
	const char *label;
	uint8_t cfa_rule;
	int32_t cfa_off;
	uint8_t rbp_rule;
	int16_t rbp_off;
};

static void assert_row(const struct table *t, uint64_t pc, const struct want *w)
{
	const struct unwind_row *r = cfi__find(t->rows, t->n, pc);

	if (!r)
		fail_msg("%s (%#llx): no row", w->label, (unsigned long long)pc);
	if (r->cfa_rule != w->cfa_rule || r->cfa_off != w->cfa_off || r->rbp_rule != w->rbp_rule ||
	    r->rbp_off != w->rbp_off)
		fail_msg("%s (%#llx): want %d/%d/%d/%d, have %d/%d/%d/%d", w->label,
			 (unsigned long long)pc, w->cfa_rule, w->cfa_off, w->rbp_rule, w->rbp_off,
			 r->cfa_rule, r->cfa_off, r->rbp_rule, r->rbp_off);
}

#define SP     CFA_RULE_SP
#define FP     CFA_RULE_FP
#define PLT    CFA_RULE_PLT
#define UNSUP  CFA_RULE_UNSUPPORTED
#define SAME   RBP_RULE_SAME
#define CFA    RBP_RULE_CFA
#define RUNSUP RBP_RULE_UNSUPPORTED

static const struct want asm_rows[] = {
	{ "cfx_asm_frame", SP, 8, SAME, 0 },
	{ "cfx_frame_1", SP, 16, CFA, -16 },
	{ "cfx_frame_2", FP, 16, CFA, -16 },
	{ "cfx_frame_3", SP, 8, SAME, 0 },
	{ "cfx_frame_4", FP, 16, CFA, -16 },
	{ "cfx_frame_5", SP, 48, CFA, -16 },
	{ "cfx_frame_6", FP, 16, CFA, -16 },
	{ "cfx_asm_ops", SP, 8, SAME, 0 },
	{ "cfx_ops_1", SP, 24, SAME, 0 },
	{ "cfx_ops_2", SP, 32, CFA, -16 },
	{ "cfx_ops_3", SP, 32, RUNSUP, 0 },
	{ "cfx_ops_4", SP, 32, RUNSUP, 0 },
	{ "cfx_ops_5", SP, 32, SAME, 0 },
	{ "cfx_ops_6", SP, 32, CFA, -24 },
	{ "cfx_ops_7", SP, 32, SAME, 0 },
	{ "cfx_ops_8", SP, 32, CFA, 32 },
	{ "cfx_ops_9", SP, 32, RUNSUP, 0 },
	{ "cfx_ops_10", SP, 32, SAME, 0 },
	{ "cfx_ops_11", UNSUP, 0, SAME, 0 },
	{ "cfx_ops_12", UNSUP, 0, SAME, 0 },
	{ "cfx_ops_13", PLT, 11, SAME, 0 },
	{ "cfx_ops_14", PLT, 10, SAME, 0 },
	{ "cfx_ops_15", PLT, 10, SAME, 0 },
	{ "cfx_ops_16", UNSUP, 0, SAME, 0 },
	{ "cfx_ops_17", SP, 16, SAME, 0 },
	{ "cfx_ops_18", SP, 16, RUNSUP, 0 },
	{ "cfx_ops_19", SP, 16, RUNSUP, 0 },
	{ "cfx_ops_20", SP, 16, RUNSUP, 0 },
	{ "cfx_ops_21", CFA_RULE_END, 0, SAME, 0 },
	{ "cfx_asm_start", CFA_RULE_END, 0, SAME, 0 },
	{ "cfx_gap", UNSUP, 0, SAME, 0 },
	{ "cfx_asm_sigreturn", CFA_RULE_SIGNAL, 0, SAME, 0 },
	{ "cfx_asm_retcol", UNSUP, 0, SAME, 0 },
	{ "cfx_asm_pers", SP, 8, SAME, 0 },
	{ "cfx_pers_1", SP, 16, SAME, 0 },
	{ "cfx_pers_2", SP, 8, SAME, 0 },
};

static void check_asm(const char *file)
{
	struct elfinfo ei;
	struct table t;
	uint64_t pc;
	size_t i;

	assert_int_equal(build_path(fx(file), &t), 0);
	assert_string_equal(t.st.source, ".eh_frame");
	assert_int_equal(t.st.bad_fdes, 0);
	elfinfo_load(fx(file), &ei);
	for (i = 0; i < sizeof(asm_rows) / sizeof(asm_rows[0]); i++) {
		pc = sym_addr(&ei, asm_rows[i].label);
		assert_row(&t, pc, &asm_rows[i]);
	}
	/* the signal rule covers the whole trampoline, its last byte included */
	pc = sym_addr(&ei, "cfx_asm_sigreturn") + find_sym(&ei, "cfx_asm_sigreturn")->size - 1;
	assert_row(&t, pc, &(struct want){ "cfx_asm_sigreturn end", CFA_RULE_SIGNAL, 0, 0, 0 });
	elfinfo_free(&ei);
	free(t.rows);
}

static void test_asm_labels(void **state)
{
	(void)state;
	check_asm("omitfp");
	check_asm("keepfp");
	check_asm("nopie");
	check_asm("ibtplt");
}

/* Some row in [lo, lo + size) satisfies ok(). */
static bool any_row(const struct table *t, uint64_t lo, uint64_t size,
		    bool (*ok)(const struct unwind_row *))
{
	const struct unwind_row *r = cfi__find(t->rows, t->n, lo);

	for (; r && r < t->rows + t->n && r->pc < lo + size; r++) {
		if (ok(r))
			return true;
	}
	return false;
}

static bool big_sp(const struct unwind_row *r)
{
	/* 4000 bytes of locals, less at most the 128-byte red zone */
	return r->cfa_rule == CFA_RULE_SP && r->cfa_off >= 4000 - 128;
}

static bool rbp_frame(const struct unwind_row *r)
{
	return r->cfa_rule == CFA_RULE_FP && r->cfa_off == 16 && r->rbp_rule == RBP_RULE_CFA &&
	       r->rbp_off == -16;
}

static bool pushed3(const struct unwind_row *r)
{
	return r->cfa_rule == CFA_RULE_SP && r->cfa_off >= 32;
}

static void check_compiled(const char *file, bool keepfp)
{
	static const char *const fns[] = { "cfx_big_frame", "cfx_pushes", "cfx_alloca", "cfx_plt" };
	const struct sym *s;
	struct elfinfo ei;
	struct table t;
	size_t i;

	assert_int_equal(build_path(fx(file), &t), 0);
	elfinfo_load(fx(file), &ei);
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		s = find_sym(&ei, fns[i]);
		if (!s)
			continue; /* not in lib.c */
		/* every function starts at its entry rule and ends where its FDE does */
		assert_row(&t, s->addr, &(struct want){ fns[i], SP, 8, SAME, 0 });
		if (keepfp)
			assert_true(any_row(&t, s->addr, s->size, rbp_frame));
	}
	/* with frame pointers the CFA is RBP-based as soon as RBP is set up */
	s = find_sym(&ei, "cfx_big_frame");
	assert_true(keepfp || any_row(&t, s->addr, s->size, big_sp));
	s = find_sym(&ei, "cfx_pushes");
	assert_true(keepfp || any_row(&t, s->addr, s->size, pushed3));
	/* alloca: even without frame pointers the CFA moves to RBP */
	s = find_sym(&ei, "cfx_alloca");
	assert_true(any_row(&t, s->addr, s->size, rbp_frame));
	elfinfo_free(&ei);
	free(t.rows);
}

static void test_compiled(void **state)
{
	(void)state;
	check_compiled("omitfp", false);
	check_compiled("keepfp", true);
	check_compiled("df1.so", false);
	check_compiled("mixed", false);
}

/* binutils' lazy .plt: PLT0 pushes twice, then every PLTn is the expression. */
static void check_plt(const char *file, int32_t lit)
{
	const struct sec *plt;
	struct elfinfo ei;
	struct table t;
	uint64_t pc;

	assert_int_equal(build_path(fx(file), &t), 0);
	elfinfo_load(fx(file), &ei);
	plt = find_sec(&ei, ".plt");
	assert_non_null(plt);
	assert_true(plt->size >= 32);
	assert_row(&t, plt->addr, &(struct want){ ".plt", SP, 16, SAME, 0 });
	assert_row(&t, plt->addr + 6, &(struct want){ ".plt+6", SP, 24, SAME, 0 });
	for (pc = plt->addr + 16; pc < plt->addr + plt->size; pc++)
		assert_row(&t, pc, &(struct want){ "PLTn", PLT, lit, SAME, 0 });
	elfinfo_free(&ei);
	free(t.rows);
}

static void test_plt(void **state)
{
	(void)state;
	check_plt("omitfp", 11);
	check_plt("nopie", 11);
	check_plt("mixed", 11);
	check_plt("ibtplt", 9);
}

static bool same_table(const struct table *a, const struct table *b)
{
	return a->n == b->n && !memcmp(a->rows, b->rows, a->n * sizeof(*a->rows));
}

/* The same CFI in every .debug_frame dialect gives the same table. */
static void test_debug_frame(void **state)
{
	static const char *const gas[] = { "df1.so", "df4.so", "dfz.so" };
	static const char *const gcc[] = { "df3.so", "df64.so" };
	struct table ref, t;
	size_t i;

	(void)state;
	assert_int_equal(build_path(fx(gas[0]), &ref), 0);
	assert_string_equal(ref.st.source, ".debug_frame");
	assert_true(ref.n > 4);
	for (i = 1; i < sizeof(gas) / sizeof(gas[0]); i++) {
		assert_int_equal(build_path(fx(gas[i]), &t), 0);
		assert_string_equal(t.st.source, ".debug_frame");
		assert_true(same_table(&ref, &t));
		free(t.rows);
	}
	free(ref.rows);
	assert_int_equal(build_path(fx(gcc[0]), &ref), 0);
	assert_string_equal(ref.st.source, ".debug_frame");
	assert_int_equal(build_path(fx(gcc[1]), &t), 0);
	assert_true(same_table(&ref, &t));
	free(t.rows);
	free(ref.rows);

	/* crt .eh_frame plus .debug_frame; the debug file has only the latter */
	assert_int_equal(build_path(fx("mixed"), &t), 0);
	assert_string_equal(t.st.source, ".eh_frame+.debug_frame");
	free(t.rows);
	assert_int_equal(build_path(fx("mixed.debug"), &t), 0);
	assert_string_equal(t.st.source, ".debug_frame");
	free(t.rows);
}

static void test_bad_files(void **state)
{
	static const char *const files[] = { "garbage.bin", "empty.bin", "trunc.bin" };
	struct unwind_row *rows = (void *)1;
	struct cfi_stats st;
	struct table t;
	size_t i, n = 1;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		assert_int_equal(build_path(fx(files[i]), &t), -ENOEXEC);
	assert_int_equal(cfi__build(-1, &rows, &n, &st), -EBADF);
	assert_null(rows);
	assert_int_equal(n, 0);
}

static void test_find(void **state)
{
	static const struct unwind_row rows[] = {
		{ .pc = 0x100, .cfa_rule = CFA_RULE_SP, .cfa_off = 8 },
		{ .pc = 0x104, .cfa_rule = CFA_RULE_SP, .cfa_off = 16 },
		{ .pc = 0x110, .cfa_rule = CFA_RULE_UNSUPPORTED },
	};

	(void)state;
	assert_null(cfi__find(rows, 0, 0x100));
	assert_null(cfi__find(rows, 3, 0xff));
	assert_ptr_equal(cfi__find(rows, 3, 0x100), &rows[0]);
	assert_ptr_equal(cfi__find(rows, 3, 0x103), &rows[0]);
	assert_ptr_equal(cfi__find(rows, 3, 0x104), &rows[1]);
	assert_ptr_equal(cfi__find(rows, 3, 0x10f), &rows[1]);
	assert_ptr_equal(cfi__find(rows, 3, UINT64_MAX), &rows[2]);
}

/* ---- hand-made sections in a minimal ELF file ---- */

#define TEXT_ADDR 0x1000
#define EH_ADDR	  0x20000
#define GOT_ADDR  0x30000

struct blob {
	uint8_t b[8192];
	size_t n;
};

static void put(struct blob *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void u8(struct blob *b, uint8_t v)
{
	put(b, &v, 1);
}

static void u16(struct blob *b, uint16_t v)
{
	put(b, &v, 2);
}

static void u32(struct blob *b, uint32_t v)
{
	put(b, &v, 4);
}

static void u64(struct blob *b, uint64_t v)
{
	put(b, &v, 8);
}

static void uleb(struct blob *b, uint64_t v)
{
	do {
		u8(b, (v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void sleb(struct blob *b, int64_t v)
{
	bool more = true;
	uint8_t byte;

	while (more) {
		byte = v & 0x7f;
		v >>= 7;
		more = !((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40)));
		u8(b, byte | (more ? 0x80 : 0));
	}
}

struct cie_spec {
	bool eh; /* .eh_frame, else .debug_frame */
	bool dwarf64;
	uint8_t version;
	const char *aug;
	uint8_t fde_enc;  /* 'R' */
	uint8_t pers_enc; /* 'P' */
	uint8_t lsda_enc; /* 'L' */
	uint64_t ra;
	uint8_t addr_size;  /* version 4 */
	const uint8_t *ins; /* NULL: def_cfa rsp+8, RA at cfa-8 */
	size_t nins;
};

static const uint8_t cie_std[] = { 0x0c, 0x07, 0x08, 0x90, 0x01 };

static size_t open_entry(struct blob *b, bool dwarf64)
{
	size_t at = b->n;

	if (dwarf64) {
		u32(b, 0xffffffff);
		u64(b, 0);
	} else {
		u32(b, 0);
	}
	return at;
}

static void close_entry(struct blob *b, size_t at, bool dwarf64)
{
	uint64_t len64;
	uint32_t len32;

	if (dwarf64) {
		len64 = b->n - at - 12;
		memcpy(b->b + at + 4, &len64, 8);
	} else {
		len32 = (uint32_t)(b->n - at - 4);
		memcpy(b->b + at, &len32, 4);
	}
}

/* A pointer as enc writes it at the end of b, for a section loaded at base. */
static void ptr(struct blob *b, uint8_t enc, uint64_t v, uint64_t base, uint8_t asz)
{
	uint64_t here = base + b->n;

	switch (enc & 0x70) {
	case 0x10:
		v -= here;
		break;
	case 0x30:
		v -= GOT_ADDR;
		break;
	case 0x50:
		while ((base + b->n) % asz)
			u8(b, 0);
		enc = 0;
		break;
	}
	switch (enc & 0x0f) {
	case 0x00:
		if (asz == 4)
			u32(b, (uint32_t)v);
		else
			u64(b, v);
		break;
	case 0x01:
		uleb(b, v);
		break;
	case 0x09:
		sleb(b, (int64_t)v);
		break;
	case 0x02:
	case 0x0a:
		u16(b, (uint16_t)v);
		break;
	case 0x03:
	case 0x0b:
		u32(b, (uint32_t)v);
		break;
	case 0x04:
	case 0x0c:
		u64(b, v);
		break;
	default:
		fail_msg("encoding %#x", enc);
	}
}

static uint64_t sect_base(const struct cie_spec *s)
{
	return s->eh ? EH_ADDR : 0;
}

static size_t add_cie(struct blob *b, const struct cie_spec *s)
{
	size_t at = open_entry(b, s->dwarf64), aug_at;
	uint8_t asz = s->addr_size ? s->addr_size : 8;
	const char *a;

	if (s->eh)
		u32(b, 0);
	else if (s->dwarf64)
		u64(b, ~0ULL);
	else
		u32(b, 0xffffffff);
	u8(b, s->version ? s->version : 1);
	put(b, s->aug ? s->aug : "", strlen(s->aug ? s->aug : "") + 1);
	if (s->version == 4) {
		u8(b, asz);
		u8(b, 0);
	}
	uleb(b, 1);
	sleb(b, -8);
	if ((s->version ? s->version : 1) == 1)
		u8(b, (uint8_t)(s->ra ? s->ra : 16));
	else
		uleb(b, s->ra ? s->ra : 16);
	if (s->aug && s->aug[0] == 'z') {
		/* built in place: 'P' pointers are relative to their own position */
		aug_at = b->n;
		u8(b, 0); /* length, patched: always < 128 here */
		for (a = s->aug + 1; *a; a++) {
			if (*a == 'R') {
				u8(b, s->fde_enc);
			} else if (*a == 'P') {
				u8(b, s->pers_enc);
				ptr(b, s->pers_enc & 0x7f, TEXT_ADDR + 0x800, sect_base(s), asz);
			} else if (*a == 'L') {
				u8(b, s->lsda_enc);
			}
		}
		b->b[aug_at] = (uint8_t)(b->n - aug_at - 1);
	}
	if (s->ins)
		put(b, s->ins, s->nins);
	else
		put(b, cie_std, sizeof(cie_std));
	close_entry(b, at, s->dwarf64);
	return at;
}

static void add_fde(struct blob *b, const struct cie_spec *s, size_t cie_at, uint64_t lo,
		    uint64_t len, const uint8_t *ins, size_t nins)
{
	size_t at = open_entry(b, s->dwarf64), aug_at;
	uint8_t asz = s->addr_size ? s->addr_size : 8;
	uint8_t enc = s->aug && strchr(s->aug, 'R') ? s->fde_enc : 0;

	if (s->eh)
		u32(b, (uint32_t)(b->n - cie_at));
	else if (s->dwarf64)
		u64(b, cie_at);
	else
		u32(b, (uint32_t)cie_at);
	ptr(b, enc, lo, sect_base(s), asz);
	ptr(b, enc & 0x0f, len, 0, asz);
	if (s->aug && s->aug[0] == 'z') {
		aug_at = b->n;
		u8(b, 0);
		if (strchr(s->aug, 'L'))
			ptr(b, s->lsda_enc, TEXT_ADDR + 0x900, sect_base(s), asz);
		b->b[aug_at] = (uint8_t)(b->n - aug_at - 1);
	}
	put(b, ins, nins);
	close_entry(b, at, s->dwarf64);
}

/*
 * advance 1; def_cfa_offset 16; rbp at cfa-16; advance 4; def_cfa_register rbp:
 * rows lo: rsp+8, lo+1: rsp+16 rbp c-16, lo+5: rbp+16 rbp c-16.
 */
static const uint8_t fde_std[] = { 0x41, 0x0e, 0x10, 0x86, 0x02, 0x44, 0x0d, 0x06 };

static void assert_std(const struct table *t, uint64_t lo, uint64_t hi)
{
	assert_row(t, lo, &(struct want){ "lo", SP, 8, SAME, 0 });
	assert_row(t, lo + 1, &(struct want){ "lo+1", SP, 16, CFA, -16 });
	assert_row(t, lo + 4, &(struct want){ "lo+4", SP, 16, CFA, -16 });
	assert_row(t, lo + 5, &(struct want){ "lo+5", FP, 16, CFA, -16 });
	assert_row(t, hi - 1, &(struct want){ "hi-1", FP, 16, CFA, -16 });
	assert_row(t, hi, &(struct want){ "hi", UNSUP, 0, SAME, 0 });
}

struct ssec {
	const char *name;
	uint32_t type;
	uint64_t flags, addr;
	const void *data;
	size_t size;
	uint64_t bad_off; /* nonzero: claim the data lies there */
};

/* An ELF file with just these sections (no program headers), in a memfd. */
static int synth_elf(const struct ssec *secs, size_t n, uint16_t machine, bool class64)
{
	Elf64_Shdr sh[8];
	Elf64_Ehdr eh;
	char names[256];
	size_t nlen = 1, i, off;
	int fd;

	assert_true(n + 2 <= 8);
	fd = memfd_create("cfi", MFD_CLOEXEC);
	assert_true(fd >= 0);
	memset(&eh, 0, sizeof(eh));
	memset(sh, 0, sizeof(sh));
	names[0] = '\0';
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = class64 ? ELFCLASS64 : ELFCLASS32;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = machine;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = (uint16_t)(n + 2);
	eh.e_shstrndx = (uint16_t)(n + 1);
	off = sizeof(eh);
	for (i = 0; i < n; i++) {
		sh[i + 1].sh_name = (uint32_t)nlen;
		nlen += (size_t)sprintf(names + nlen, "%s", secs[i].name) + 1;
		sh[i + 1].sh_type = secs[i].type;
		sh[i + 1].sh_flags = secs[i].flags;
		sh[i + 1].sh_addr = secs[i].addr;
		sh[i + 1].sh_size = secs[i].size;
		sh[i + 1].sh_addralign = 1;
		sh[i + 1].sh_offset = secs[i].bad_off ? secs[i].bad_off : off;
		if (secs[i].type != SHT_NOBITS) {
			assert_int_equal(pwrite(fd, secs[i].data, secs[i].size, (off_t)off),
					 (ssize_t)secs[i].size);
			off += secs[i].size;
		}
	}
	sh[n + 1].sh_name = (uint32_t)nlen;
	nlen += (size_t)sprintf(names + nlen, ".shstrtab") + 1;
	sh[n + 1].sh_type = SHT_STRTAB;
	sh[n + 1].sh_offset = off;
	sh[n + 1].sh_size = nlen;
	sh[n + 1].sh_addralign = 1;
	assert_int_equal(pwrite(fd, names, nlen, (off_t)off), (ssize_t)nlen);
	off += nlen;
	off = (off + 7) & ~(size_t)7;
	eh.e_shoff = off;
	assert_int_equal(pwrite(fd, sh, (n + 2) * sizeof(sh[0]), (off_t)off),
			 (ssize_t)((n + 2) * sizeof(sh[0])));
	assert_int_equal(pwrite(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	return fd;
}

/* Build the table of a file whose CFI section is blob b. */
static int build_blob(const struct blob *b, bool eh, struct table *t)
{
	struct ssec secs[] = {
		{ ".text", SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, TEXT_ADDR, NULL, 0x10000, 0 },
		{ eh ? ".eh_frame" : ".debug_frame", SHT_PROGBITS, eh ? SHF_ALLOC : 0,
		  eh ? EH_ADDR : 0, b->b, b->n, 0 },
		{ ".got.plt", SHT_NOBITS, SHF_ALLOC | SHF_WRITE, GOT_ADDR, NULL, 8, 0 },
	};
	int fd, err;

	fd = synth_elf(secs, 3, EM_X86_64, true);
	err = build_fd(fd, t);
	close(fd);
	return err;
}

static void test_blob_encodings(void **state)
{
	static const uint8_t encs[] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x09, 0x0a, 0x0b, 0x0c, /* absolute */
		0x10, 0x19, 0x1b, 0x1c,				      /* pcrel */
		0x3b, 0x3c,					      /* datarel */
		0x50,						      /* aligned */
		0x9b,						      /* indirect (ignored) */
	};
	struct cie_spec s = { .eh = true, .aug = "zR" };
	struct table t;
	struct blob b;
	size_t i, c;

	(void)state;
	for (i = 0; i < sizeof(encs); i++) {
		memset(&b, 0, sizeof(b));
		s.fde_enc = encs[i];
		c = add_cie(&b, &s);
		add_fde(&b, &s, c, TEXT_ADDR + 0x100, 0x40, fde_std, sizeof(fde_std));
		u32(&b, 0);
		assert_int_equal(build_blob(&b, true, &t), 0);
		if (t.st.bad_fdes || t.n != 4)
			fail_msg("encoding %#x: %u bad, %zu rows", encs[i], t.st.bad_fdes, t.n);
		assert_std(&t, TEXT_ADDR + 0x100, TEXT_ADDR + 0x140);
		assert_null(cfi__find(t.rows, t.n, TEXT_ADDR + 0xff));
		assert_string_equal(t.st.source, ".eh_frame");
		free(t.rows);
	}
}

/* 'P' with its pointer in every layout, 'L' and the FDE's LSDA pointer, no 'z'. */
static void test_blob_augmentation(void **state)
{
	static const struct {
		const char *aug;
		uint8_t pers, lsda;
	} cases[] = {
		{ "zPLR", 0x9b, 0x1b }, { "zPLR", 0x00, 0x00 }, { "zPLR", 0x50, 0x03 },
		{ "zPLR", 0x04, 0x0c }, { "zLPR", 0x1b, 0x01 }, { "zRPL", 0x3b, 0x3b },
		{ "zPR", 0x02, 0 },	{ "zLR", 0, 0x09 },	{ "zRL", 0, 0x1c },
		{ "zR", 0, 0 },		{ "zRB", 0, 0 },	{ "", 0, 0 },
		{ "z", 0, 0 },		{ "zRX?", 0, 0 },	{ "zPLR?", 0x00, 0x00 },
	};
	struct cie_spec s = { .eh = true, .fde_enc = 0x1b };
	struct table t;
	struct blob b;
	size_t i, c;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&b, 0, sizeof(b));
		s.aug = cases[i].aug;
		s.pers_enc = cases[i].pers;
		s.lsda_enc = cases[i].lsda;
		c = add_cie(&b, &s);
		add_fde(&b, &s, c, TEXT_ADDR + 0x100, 0x40, fde_std, sizeof(fde_std));
		add_fde(&b, &s, c, TEXT_ADDR + 0x200, 0x40, fde_std, sizeof(fde_std));
		assert_int_equal(build_blob(&b, true, &t), 0);
		if (t.st.bad_fdes)
			fail_msg("augmentation \"%s\": %u bad", cases[i].aug, t.st.bad_fdes);
		assert_std(&t, TEXT_ADDR + 0x100, TEXT_ADDR + 0x140);
		assert_std(&t, TEXT_ADDR + 0x200, TEXT_ADDR + 0x240);
		free(t.rows);
	}

	/* 'S' anywhere: the whole FDE is a signal frame */
	memset(&b, 0, sizeof(b));
	s.aug = "zRS";
	c = add_cie(&b, &s);
	add_fde(&b, &s, c, TEXT_ADDR + 0x100, 0x40, fde_std, sizeof(fde_std));
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.n, 2);
	assert_row(&t, TEXT_ADDR + 0x13f, &(struct want){ "S", CFA_RULE_SIGNAL, 0, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x140, &(struct want){ "S end", UNSUP, 0, SAME, 0 });
	free(t.rows);
}

/* .debug_frame: CIE versions 1, 3, 4, 32- and 64-bit, 4-byte addresses in v4. */
static void test_blob_debug_frame(void **state)
{
	static const struct cie_spec specs[] = {
		{ .version = 1 },
		{ .version = 3 },
		{ .version = 4 },
		{ .version = 4, .addr_size = 4 },
		{ .version = 1, .dwarf64 = true },
		{ .version = 3, .dwarf64 = true },
		{ .version = 4, .dwarf64 = true },
		{ .version = 3, .ra = 16 },
	};
	struct table t;
	struct blob b;
	size_t i, c1, c2;

	(void)state;
	for (i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		memset(&b, 0, sizeof(b));
		/* an FDE may come before its CIE; CIEs are found by offset */
		c1 = add_cie(&b, &specs[i]);
		add_fde(&b, &specs[i], c1, TEXT_ADDR + 0x100, 0x40, fde_std, sizeof(fde_std));
		c2 = add_cie(&b, &specs[i]);
		add_fde(&b, &specs[i], c2, TEXT_ADDR + 0x200, 0x40, fde_std, sizeof(fde_std));
		assert_int_equal(build_blob(&b, false, &t), 0);
		if (t.st.bad_fdes || t.st.fdes != 2)
			fail_msg("debug_frame spec %zu: %u bad of %u", i, t.st.bad_fdes, t.st.fdes);
		assert_string_equal(t.st.source, ".debug_frame");
		assert_std(&t, TEXT_ADDR + 0x100, TEXT_ADDR + 0x140);
		assert_std(&t, TEXT_ADDR + 0x200, TEXT_ADDR + 0x240);
		free(t.rows);
	}
}

static void one_fde(struct blob *b, const uint8_t *cie_ins, size_t ncie, const uint8_t *ins,
		    size_t nins)
{
	struct cie_spec s = {
		.eh = true, .aug = "zR", .fde_enc = 0x1b, .ins = cie_ins, .nins = ncie
	};
	size_t c;

	memset(b, 0, sizeof(*b));
	c = add_cie(b, &s);
	add_fde(b, &s, c, TEXT_ADDR + 0x100, 0x40, ins, nins);
}

/* Programs: set_loc, advances past the end, restore in the CIE, odd CIE rules. */
static void test_blob_programs(void **state)
{
	struct table t;
	struct blob b;
	uint8_t ins[64];
	size_t n;

	(void)state;
	/* set_loc (pcrel sdata4, relative to the operand) to lo+8, then rsp+16 */
	memset(&b, 0, sizeof(b));
	{
		struct cie_spec s = { .eh = true, .aug = "zR", .fde_enc = 0x1b };
		size_t c = add_cie(&b, &s), at = open_entry(&b, false);
		int32_t rel;

		u32(&b, (uint32_t)(b.n - c));
		ptr(&b, 0x1b, TEXT_ADDR + 0x100, EH_ADDR, 8);
		u32(&b, 0x40);
		u8(&b, 0);
		u8(&b, 0x01);
		rel = (int32_t)(TEXT_ADDR + 0x108 - (EH_ADDR + b.n));
		u32(&b, (uint32_t)rel);
		u8(&b, 0x0e);
		u8(&b, 0x10);
		close_entry(&b, at, false);
	}
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.bad_fdes, 0);
	assert_row(&t, TEXT_ADDR + 0x107, &(struct want){ "set_loc-1", SP, 8, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x108, &(struct want){ "set_loc", SP, 16, SAME, 0 });
	free(t.rows);

	/*
	 * rsp+16 at lo+1, replaced there (advance 0) by rsp+8, which merges with
	 * the row before; rsp+24 from lo+2 must still follow
	 */
	{
		static const uint8_t again[] = { 0x41, 0x0e, 0x10, 0x40, 0x0e,
						 0x08, 0x41, 0x0e, 0x18 };

		one_fde(&b, NULL, 0, again, sizeof(again));
		assert_int_equal(build_blob(&b, true, &t), 0);
		assert_int_equal(t.n, 3);
		assert_row(&t, TEXT_ADDR + 0x101, &(struct want){ "lo+1", SP, 8, SAME, 0 });
		assert_row(&t, TEXT_ADDR + 0x102, &(struct want){ "lo+2", SP, 24, SAME, 0 });
		free(t.rows);
	}

	/* an advance beyond the FDE's end: what follows it never applies */
	n = 0;
	ins[n++] = 0x02; /* advance_loc1 0x80 */
	ins[n++] = 0x80;
	ins[n++] = 0x0e;
	ins[n++] = 0x20;
	one_fde(&b, NULL, 0, ins, n);
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.n, 2);
	assert_row(&t, TEXT_ADDR + 0x13f, &(struct want){ "past end", SP, 8, SAME, 0 });
	free(t.rows);

	/*
	 * CIE: rbp at cfa-16, then restore (back to none); FDE: rbp at cfa-24,
	 * restore_extended rbp (back to the CIE's: none), 2^32 CFA offset.
	 */
	{
		static const uint8_t cie_ins[] = { 0x0c, 0x07, 0x08, 0x90, 0x01, 0x86, 0x02, 0xc6 };
		static const uint8_t fde_ins[] = { 0x41, 0x86, 0x03, 0x41, 0x06, 0x06, 0x41,
						   0x0e, 0x80, 0x80, 0x80, 0x80, 0x10 };

		one_fde(&b, cie_ins, sizeof(cie_ins), fde_ins, sizeof(fde_ins));
		assert_int_equal(build_blob(&b, true, &t), 0);
		assert_row(&t, TEXT_ADDR + 0x100, &(struct want){ "cie restore", SP, 8, SAME, 0 });
		assert_row(&t, TEXT_ADDR + 0x101, &(struct want){ "c-24", SP, 8, CFA, -24 });
		assert_row(&t, TEXT_ADDR + 0x102, &(struct want){ "restore_ext", SP, 8, SAME, 0 });
		assert_row(&t, TEXT_ADDR + 0x103, &(struct want){ "2^32", UNSUP, 0, SAME, 0 });
		assert_int_equal(t.st.unsupported, 1);
		free(t.rows);
	}

	/* a CIE whose RA rule is not cfa-8, and one with no CFA at all */
	{
		static const uint8_t ra16[] = { 0x0c, 0x07, 0x10, 0x90, 0x02 };
		static const uint8_t nocfa[] = { 0x90, 0x01 };

		one_fde(&b, ra16, sizeof(ra16), fde_std, sizeof(fde_std));
		assert_int_equal(build_blob(&b, true, &t), 0);
		assert_row(&t, TEXT_ADDR + 0x100, &(struct want){ "ra c-16", UNSUP, 0, SAME, 0 });
		free(t.rows);
		one_fde(&b, nocfa, sizeof(nocfa), fde_std, 0);
		assert_int_equal(build_blob(&b, true, &t), 0);
		assert_row(&t, TEXT_ADDR + 0x100, &(struct want){ "no cfa", UNSUP, 0, SAME, 0 });
		free(t.rows);
	}

	/* remember_state 32 deep is fine, 33 is not; restore_state with none is not */
	memset(ins, 0x0a, 33);
	one_fde(&b, NULL, 0, ins, 32);
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.bad_fdes, 0);
	free(t.rows);
	one_fde(&b, NULL, 0, ins, 33);
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.bad_fdes, 1);
	assert_int_equal(t.n, 0);
	ins[0] = 0x0b;
	one_fde(&b, NULL, 0, ins, 1);
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.bad_fdes, 1);
}

/* Nested, partial and duplicate FDEs; a zero terminator in the middle. */
static void test_blob_overlaps(void **state)
{
	struct cie_spec s = { .eh = true, .aug = "zR", .fde_enc = 0x1b };
	/* rsp+32 from lo+2 on: tells the FDEs apart */
	static const uint8_t other[] = { 0x42, 0x0e, 0x20 };
	struct table t;
	struct blob b;
	size_t c;

	(void)state;
	memset(&b, 0, sizeof(b));
	c = add_cie(&b, &s);
	/* outer [0x100, 0x200), inner [0x140, 0x160): outer resumes at 0x160 */
	add_fde(&b, &s, c, TEXT_ADDR + 0x100, 0x100, fde_std, sizeof(fde_std));
	add_fde(&b, &s, c, TEXT_ADDR + 0x140, 0x20, other, sizeof(other));
	u32(&b, 0); /* a terminator; readelf and ld read on */
	/* [0x300, 0x380) overlapped by [0x340, 0x400): the later wins to its end */
	add_fde(&b, &s, c, TEXT_ADDR + 0x300, 0x80, fde_std, sizeof(fde_std));
	add_fde(&b, &s, c, TEXT_ADDR + 0x340, 0xc0, other, sizeof(other));
	/* the same range twice: the first in the section wins */
	add_fde(&b, &s, c, TEXT_ADDR + 0x500, 0x40, other, sizeof(other));
	add_fde(&b, &s, c, TEXT_ADDR + 0x500, 0x40, fde_std, sizeof(fde_std));
	/* empty: nothing */
	add_fde(&b, &s, c, TEXT_ADDR + 0x600, 0, fde_std, sizeof(fde_std));
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.fdes, 7);
	assert_int_equal(t.st.bad_fdes, 0);
	assert_int_equal(t.st.dropped_fdes, 1);

	assert_row(&t, TEXT_ADDR + 0x13f, &(struct want){ "outer", FP, 16, CFA, -16 });
	assert_row(&t, TEXT_ADDR + 0x140, &(struct want){ "inner", SP, 8, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x142, &(struct want){ "inner+2", SP, 32, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x160, &(struct want){ "outer again", FP, 16, CFA, -16 });
	assert_row(&t, TEXT_ADDR + 0x200, &(struct want){ "gap", UNSUP, 0, SAME, 0 });

	assert_row(&t, TEXT_ADDR + 0x305, &(struct want){ "first", FP, 16, CFA, -16 });
	assert_row(&t, TEXT_ADDR + 0x340, &(struct want){ "second", SP, 8, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x380, &(struct want){ "second+", SP, 32, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x3ff, &(struct want){ "second end", SP, 32, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x400, &(struct want){ "gap 2", UNSUP, 0, SAME, 0 });

	assert_row(&t, TEXT_ADDR + 0x502, &(struct want){ "dup", SP, 32, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x540, &(struct want){ "gap 3", UNSUP, 0, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x600, &(struct want){ "empty", UNSUP, 0, SAME, 0 });
	free(t.rows);
}

/* Malformed entries cost themselves, or the rest of the section, never more. */
static void test_blob_malformed(void **state)
{
	struct cie_spec s = { .eh = true, .aug = "zR", .fde_enc = 0x1b };
	static const uint8_t unknown_op[] = { 0x41, 0x17 };
	struct table t;
	struct blob b;
	size_t c, at, f1;

	(void)state;
	memset(&b, 0, sizeof(b));
	c = add_cie(&b, &s);
	f1 = b.n;
	add_fde(&b, &s, c, TEXT_ADDR + 0x100, 0x40, fde_std, sizeof(fde_std));
	add_fde(&b, &s, c, TEXT_ADDR + 0x200, 0x40, unknown_op, sizeof(unknown_op));
	/* CIE pointer before the section, and one at an FDE */
	at = open_entry(&b, false);
	u32(&b, 0x7fffffff);
	u64(&b, 0);
	close_entry(&b, at, false);
	at = open_entry(&b, false);
	u32(&b, (uint32_t)(b.n - f1));
	u64(&b, 0);
	close_entry(&b, at, false);
	/* a CIE with an augmentation we cannot lay out, and its FDE */
	{
		struct cie_spec bad = { .eh = true, .aug = "xyz" };
		size_t c2 = add_cie(&b, &bad);

		add_fde(&b, &bad, c2, TEXT_ADDR + 0x300, 0x40, fde_std, sizeof(fde_std));
	}
	/* an FDE too short for its addresses */
	at = open_entry(&b, false);
	u32(&b, (uint32_t)(b.n - c));
	u16(&b, 0);
	close_entry(&b, at, false);
	add_fde(&b, &s, c, TEXT_ADDR + 0x400, 0x40, fde_std, sizeof(fde_std));
	/* and last, a length that runs past the section */
	u32(&b, 0x1000);
	u32(&b, 0);
	assert_int_equal(build_blob(&b, true, &t), 0);
	assert_int_equal(t.st.fdes, 7);
	assert_int_equal(t.st.bad_fdes, 6); /* five FDEs and the overrun */
	assert_std(&t, TEXT_ADDR + 0x100, TEXT_ADDR + 0x140);
	assert_std(&t, TEXT_ADDR + 0x400, TEXT_ADDR + 0x440);
	assert_row(&t, TEXT_ADDR + 0x200, &(struct want){ "bad", UNSUP, 0, SAME, 0 });
	assert_row(&t, TEXT_ADDR + 0x300, &(struct want){ "bad", UNSUP, 0, SAME, 0 });
	free(t.rows);
}

static void test_blob_elf_errors(void **state)
{
	static const uint8_t junk[16];
	struct ssec beyond[] = {
		{ ".eh_frame", SHT_PROGBITS, SHF_ALLOC, EH_ADDR, junk, sizeof(junk), 1 << 20 },
	};
	struct ssec ok[] = {
		{ ".eh_frame", SHT_PROGBITS, SHF_ALLOC, EH_ADDR, junk, sizeof(junk), 0 },
	};
	struct ssec nobits[] = {
		{ ".eh_frame", SHT_NOBITS, SHF_ALLOC, EH_ADDR, NULL, 64, 0 },
	};
	/* an unreadable .debug_frame costs only itself when .eh_frame is there */
	struct ssec df_beyond[] = {
		{ ".eh_frame", SHT_PROGBITS, SHF_ALLOC, EH_ADDR, junk, sizeof(junk), 0 },
		{ ".debug_frame", SHT_PROGBITS, 0, 0, junk, sizeof(junk), 1 << 20 },
	};
	struct table t;
	int fd;

	(void)state;
	fd = synth_elf(beyond, 1, EM_X86_64, true);
	assert_int_equal(build_fd(fd, &t), -ENOEXEC);
	close(fd);
	fd = synth_elf(ok, 1, EM_AARCH64, true);
	assert_int_equal(build_fd(fd, &t), -ENOEXEC);
	close(fd);
	fd = synth_elf(ok, 1, EM_386, false);
	assert_int_equal(build_fd(fd, &t), -ENOEXEC);
	close(fd);
	/* zeros: four terminators */
	fd = synth_elf(ok, 1, EM_X86_64, true);
	assert_int_equal(build_fd(fd, &t), 0);
	assert_int_equal(t.n, 0);
	assert_string_equal(t.st.source, ".eh_frame");
	close(fd);
	fd = synth_elf(df_beyond, 2, EM_X86_64, true);
	assert_int_equal(build_fd(fd, &t), 0);
	assert_string_equal(t.st.source, ".eh_frame");
	close(fd);
	fd = synth_elf(df_beyond + 1, 1, EM_X86_64, true);
	assert_int_equal(build_fd(fd, &t), -ENOEXEC);
	close(fd);
	fd = synth_elf(nobits, 1, EM_X86_64, true);
	assert_int_equal(build_fd(fd, &t), 0);
	assert_int_equal(t.n, 0);
	assert_null(t.st.source);
	close(fd);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/*
 * A real .eh_frame, mutated: flipped bytes, cut short, bytes of noise.
 * Nothing may crash or break the table's invariants (build_fd checks them).
 */
static void test_fuzz(void **state)
{
	static struct blob orig, b;
	Elf_Scn *scn = NULL;
	Elf_Data *d;
	GElf_Shdr sh;
	size_t shstrndx, i, k, flips;
	uint32_t bad = 0;
	struct table t;
	Elf *elf;
	int fd;

	(void)state;
	fd = open(fx("omitfp"), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		gelf_getshdr(scn, &sh);
		if (!strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".eh_frame"))
			break;
	}
	assert_non_null(scn);
	d = elf_getdata(scn, NULL);
	assert_true(d && d->d_size <= sizeof(orig.b));
	memcpy(orig.b, d->d_buf, d->d_size);
	orig.n = d->d_size;
	elf_end(elf);
	close(fd);

	for (i = 0; i < 4000; i++) {
		b = orig;
		flips = 1 + rng() % 8;
		for (k = 0; k < flips; k++)
			b.b[rng() % b.n] ^= (uint8_t)(1 + rng() % 255);
		if (i % 4 == 1)
			b.n = rng() % orig.n;
		if (i % 16 == 2) {
			for (k = 0; k < b.n; k++)
				b.b[k] = (uint8_t)rng();
		}
		assert_int_equal(build_blob(&b, true, &t), 0);
		bad += t.st.bad_fdes;
		free(t.rows);
		assert_int_equal(build_blob(&b, false, &t), 0);
		free(t.rows);
	}
	assert_true(bad > 0);
	/* and every prefix of the real thing */
	for (i = 0; i <= orig.n; i++) {
		b = orig;
		b.n = i;
		assert_int_equal(build_blob(&b, true, &t), 0);
		free(t.rows);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_asm_labels),
		cmocka_unit_test(test_compiled),
		cmocka_unit_test(test_plt),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_blob_encodings),
		cmocka_unit_test(test_blob_augmentation),
		cmocka_unit_test(test_blob_debug_frame),
		cmocka_unit_test(test_blob_programs),
		cmocka_unit_test(test_blob_overlaps),
		cmocka_unit_test(test_blob_malformed),
		cmocka_unit_test(test_blob_elf_errors),
		cmocka_unit_test(test_fuzz),
		cmocka_unit_test(test_readelf_fixtures),
		cmocka_unit_test(test_readelf_libc),
		cmocka_unit_test(test_readelf_libpython),
		cmocka_unit_test(test_total),
	};

	return cmocka_run_group_tests_name("cfi", tests, setup, NULL);
}
