// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "bpfprof.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "symbolize/elfsym.h"
#include "unwind/cfi.h"
#include "unwind/tables.h"
#include "util/htab.h"
#include "util/clock.h"
#include "util/log.h"

#define MAX_SEGS 16

enum otable_state {
	OT_NONE = 0, /* not tried */
	OT_READY,    /* rows [first, first + count) */
	OT_NO_TABLE, /* no CFI, unreadable or no room: frame pointers */
};

struct otable {
	uint32_t state;
	uint32_t first, count;
	uint32_t refs;
	uint32_t owner; /* objfile id whose rows this file shares (same build id) */
	uint64_t base;	/* vaddr of row pc 0 */
	uint32_t nsegs;
	struct {
		uint64_t off, filesz, vaddr;
	} segs[MAX_SEGS]; /* PT_LOAD */
};

struct extent {
	uint32_t first, count;
};

struct pentry {
	uint32_t *objs; /* objfile ids whose tables this process holds */
	uint32_t nobjs;
};

struct unwinder {
	int rows_fd, procs_fd, gen_fd;
	uint32_t gen; /* unwind_gen: bumped when rows are freed (BPF's row cache) */
	uint32_t cap;
	uint32_t bump;	     /* rows below are allocated or on the free list */
	struct extent *free; /* freed extents, first fit */
	uint32_t nfree, capfree;
	struct otable *tables; /* by objfile id */
	uint32_t ntables;
	struct objtab *objs;
	struct htab *procs;  /* pid -> struct pentry * */
	struct htab *by_bid; /* build id -> objfile id owning its rows */
	struct bpf_proc_unwind *buf;
	struct unwinder_stats st;
};

/* A new generation of rows: BPF's cached row lookups made before are void. */
static void bump_gen(struct unwinder *u)
{
	uint32_t zero = 0;

	if (u->gen_fd < 0)
		return;
	if (++u->gen == 0)
		u->gen = 1;
	if (bpf_map_update_elem(u->gen_fd, &zero, &u->gen, BPF_ANY)) {
		/* cannot tell BPF: turn its cache off (gen 0) rather than trust it */
		u->gen = 0;
		bpf_map_update_elem(u->gen_fd, &zero, &u->gen, BPF_ANY);
		u->gen_fd = -1;
	}
}

int unwinder__new(struct unwinder **out, int rows_map_fd, uint32_t rows_cap, int procs_map_fd,
		  int gen_map_fd, struct objtab *objs)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->rows_fd = rows_map_fd;
	u->procs_fd = procs_map_fd;
	u->gen_fd = gen_map_fd;
	bump_gen(u);
	u->cap = rows_cap;
	u->objs = objs;
	u->st.rows_cap = rows_cap;
	u->procs = htab__new(256, HTAB_COPY_KEYS);
	u->by_bid = htab__new(256, HTAB_COPY_KEYS);
	u->buf = calloc(1, sizeof(*u->buf));
	if (!u->procs || !u->by_bid || !u->buf) {
		unwinder__free(u);
		return -ENOMEM;
	}
	elf_version(EV_CURRENT);
	*out = u;
	return 0;
}

void unwinder__free(struct unwinder *u)
{
	size_t it = 0;
	struct htab_entry *e;

	if (!u)
		return;
	if (u->procs) {
		while ((e = htab__next(u->procs, &it))) {
			struct pentry *pe = (struct pentry *)(uintptr_t)e->val;

			free(pe->objs);
			free(pe);
		}
		htab__free(u->procs);
	}
	htab__free(u->by_bid);
	free(u->tables);
	free(u->free);
	free(u->buf);
	free(u);
}

/* First-fit allocation of n rows; returns the first index or -ENOSPC. */
static int64_t rows_alloc(struct unwinder *u, uint32_t n)
{
	for (uint32_t i = 0; i < u->nfree; i++) {
		struct extent *x = &u->free[i];

		if (x->count >= n) {
			uint32_t first = x->first;

			x->first += n;
			x->count -= n;
			if (!x->count)
				u->free[i] = u->free[--u->nfree];
			return first;
		}
	}
	if (u->cap - u->bump < n)
		return -ENOSPC;
	u->bump += n;
	return u->bump - n;
}

static void rows_free(struct unwinder *u, uint32_t first, uint32_t n)
{
	if (!n)
		return;
	bump_gen(u);
	if (first + n == u->bump) {
		u->bump = first;
		return;
	}
	if (u->nfree == u->capfree) {
		uint32_t cap = u->capfree ? u->capfree * 2 : 64;
		struct extent *v = realloc(u->free, cap * sizeof(*v));

		if (!v)
			return; /* leaked until exit: only capacity is lost */
		u->free = v;
		u->capfree = cap;
	}
	u->free[u->nfree++] = (struct extent){ first, n };
}

static struct otable *otable_of(struct unwinder *u, uint32_t id)
{
	if (id >= u->ntables) {
		uint32_t n = id * 2 + 64;
		struct otable *v = realloc(u->tables, n * sizeof(*v));

		if (!v)
			return NULL;
		memset(v + u->ntables, 0, (n - u->ntables) * sizeof(*v));
		u->tables = v;
		u->ntables = n;
	}
	return &u->tables[id];
}

static int read_segments(int fd, struct otable *t)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t n;
	int err = 0;

	if (!elf)
		return -ENOEXEC;
	if (elf_getphdrnum(elf, &n)) {
		err = -ENOEXEC;
		goto out;
	}
	t->nsegs = 0;
	for (size_t i = 0; i < n && t->nsegs < MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		t->segs[t->nsegs].off = ph.p_offset;
		t->segs[t->nsegs].filesz = ph.p_filesz;
		t->segs[t->nsegs].vaddr = ph.p_vaddr;
		t->nsegs++;
	}
out:
	elf_end(elf);
	return err;
}

static uint8_t rules(uint8_t cfa, uint8_t rbp)
{
	return cfa | rbp << 4;
}

/* Convert the compiler's rows into the BPF layout; returns rows written. */
static uint32_t convert(struct unwinder *u, const struct unwind_row *in, size_t n,
			struct bpf_urow *out, uint64_t base)
{
	uint32_t w = 0;

	for (size_t i = 0; i < n; i++) {
		const struct unwind_row *r = &in[i];
		uint8_t cfa = r->cfa_rule, rbp = r->rbp_rule;
		struct bpf_urow o = { 0 };

		if (r->pc - base > UINT32_MAX)
			break; /* a 4 GiB text: the rest unwinds as unsupported */
		o.pc = r->pc - base;
		if ((cfa == CFA_RULE_SP || cfa == CFA_RULE_FP) &&
		    (r->cfa_off > INT16_MAX || r->cfa_off < INT16_MIN)) {
			cfa = CFA_RULE_UNSUPPORTED;
		}
		if (rbp == RBP_RULE_CFA &&
		    (r->rbp_off % 8 || r->rbp_off / 8 > INT8_MAX || r->rbp_off / 8 < INT8_MIN))
			rbp = RBP_RULE_UNSUPPORTED;
		if (cfa == CFA_RULE_UNSUPPORTED)
			u->st.rows_unsupported++;
		/* PLT rows carry the threshold of their expression (11, or 9 for IBT PLTs) */
		o.cfa_off = (cfa == CFA_RULE_SP || cfa == CFA_RULE_FP || cfa == CFA_RULE_PLT)
				    ? r->cfa_off
				    : 0;
		o.rbp_off8 = rbp == RBP_RULE_CFA ? r->rbp_off / 8 : 0;
		/* cfi.h's rule numbers are the BPF ones (checked in tests) */
		o.rules = rules(cfa, rbp);
		out[w++] = o;
	}
	return w;
}

/*
 * Convert and write rows into unwind_rows at [first, ...) with batched updates:
 * one syscall per 64k rows. (An mmap'd array would save the copy but counts
 * its whole capacity in our RSS from the first byte.)
 */
static int upload(struct unwinder *u, const struct unwind_row *rows, size_t n, uint32_t first,
		  uint64_t base, uint32_t *written)
{
	enum {
		CHUNK = 65536
	};
	struct bpf_urow *vals = malloc(CHUNK * sizeof(*vals));
	uint32_t *keys = malloc(CHUNK * sizeof(*keys));
	size_t done = 0;
	int err = 0;

	*written = 0;
	if (!vals || !keys) {
		err = -ENOMEM;
		goto out;
	}
	while (done < n) {
		size_t want = n - done < CHUNK ? n - done : CHUNK;
		uint32_t got = convert(u, rows + done, want, vals, base), cnt = got;

		for (uint32_t i = 0; i < got; i++)
			keys[i] = first + done + i;
		if (got && bpf_map_update_batch(u->rows_fd, keys, vals, &cnt, NULL)) {
			err = -errno;
			break;
		}
		*written += got;
		if (got < want)
			break; /* the rest is beyond 4 GiB of text */
		done += want;
	}
out:
	free(vals);
	free(keys);
	return err;
}

static void build_table(struct unwinder *u, struct objfile *o, struct otable *t)
{
	struct unwind_row *rows = NULL;
	struct cfi_stats cs = { 0 };
	uint64_t t0 = mono_ns();
	size_t n = 0;
	int64_t first;
	int err;

	t->state = OT_NO_TABLE;
	if (o->fd < 0 || read_segments(o->fd, t))
		goto fail;
	err = cfi__build(o->fd, &rows, &n, &cs);
	u->st.build_ns += mono_ns() - t0;
	if (err || !n) {
		pr_debug("%s: no unwind table (%s)", o->path, err ? strerror(-err) : "no CFI");
		goto fail;
	}
	first = rows_alloc(u, n);
	if (first < 0) {
		pr_verbose("unwind table memory full (%u rows): %s unwinds with frame pointers",
			   u->cap, o->path);
		goto fail;
	}
	t->base = rows[0].pc;
	t->first = first;
	t->count = 0;
	err = upload(u, rows, n, first, t->base, &t->count);
	if (t->count < n)
		rows_free(u, first + t->count, n - t->count);
	if (err) {
		pr_verbose("%s: cannot load its unwind table: %s", o->path, strerror(-err));
		rows_free(u, first, t->count);
		goto fail;
	}
	t->state = OT_READY;
	u->st.tables++;
	u->st.rows_used += t->count;
	if (u->st.rows_used > u->st.rows_peak)
		u->st.rows_peak = u->st.rows_used;
	pr_debug("%s: %u unwind rows from %s (%u FDEs)", o->path, t->count,
		 cs.source ? cs.source : "?", cs.fdes);
	free(rows);
	return;
fail:
	u->st.tables_failed++;
	free(rows);
}

static void release(struct unwinder *u, uint32_t id)
{
	struct otable *t = id < u->ntables ? &u->tables[id] : NULL;

	if (!t || !t->refs || --t->refs)
		return;
	if (t->state == OT_READY) {
		rows_free(u, t->first, t->count);
		u->st.rows_used -= t->count;
		u->st.tables_evicted++;
	}
	t->state = OT_NONE; /* rebuilt if the file is mapped again */
	t->owner = 0;
}

/* bias such that row pc = ip - bias, for a mapping of t's file */
static bool mapping_bias(const struct otable *t, const struct mapping *m, uint64_t *bias)
{
	for (uint32_t i = 0; i < t->nsegs; i++) {
		if (m->pgoff >= t->segs[i].off &&
		    m->pgoff < t->segs[i].off + (t->segs[i].filesz ? t->segs[i].filesz : 1)) {
			/* vaddr = ip - start + pgoff + (seg.vaddr - seg.off) */
			*bias = m->start - m->pgoff - (t->segs[i].vaddr - t->segs[i].off) + t->base;
			return true;
		}
	}
	return false;
}

static struct pentry *pentry_of(struct unwinder *u, uint32_t pid, bool create)
{
	struct htab_entry *e;
	int ret;

	if (!create) {
		e = htab__find(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
		return e ? (struct pentry *)(uintptr_t)e->val : NULL;
	}
	ret = htab__upsert(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 1) {
		struct pentry *pe = calloc(1, sizeof(*pe));

		if (!pe) {
			htab__delete(u->procs, &pid, sizeof(pid), e->hash);
			return NULL;
		}
		e->val = (uintptr_t)pe;
		u->st.procs++;
	}
	return (struct pentry *)(uintptr_t)e->val;
}

/*
 * The table that serves objfile o: its own, or that of another file with the
 * same build id (the same library in two container layers is one table).
 * Builds it on first use. Returns the id whose otable holds the rows.
 */
static uint32_t table_for(struct unwinder *u, struct objfile *o)
{
	struct otable *t = &u->tables[o->id], *ot;
	struct htab_entry *e;
	char bid[128];
	int n;

	if (t->owner && t->owner != o->id) {
		ot = &u->tables[t->owner];
		if (ot->state == OT_NONE)
			build_table(u, objtab__by_id(u->objs, t->owner), ot);
		if (ot->state == OT_READY)
			return t->owner;
		t->owner = 0;
	}
	if (t->state != OT_NONE)
		return o->id;
	n = o->fd >= 0 ? elf_read_build_id(o->fd, bid, sizeof(bid)) : 0;
	if (n > 0) {
		e = htab__find(u->by_bid, bid, strlen(bid), htab__hash(bid, strlen(bid)));
		if (e && e->val != o->id && e->val < u->ntables &&
		    u->tables[e->val].state == OT_READY) {
			t->owner = e->val;
			u->st.tables_shared++;
			/* same build id, same segments: only the bias differs per mapping */
			return t->owner;
		}
	}
	build_table(u, o, t);
	if (n > 0 && t->state == OT_READY &&
	    htab__upsert(u->by_bid, bid, strlen(bid), htab__hash(bid, strlen(bid)), &e) >= 0)
		e->val = o->id;
	return o->id;
}

int unwinder__sync(struct unwinder *u, const struct proc *p)
{
	struct bpf_proc_unwind *b = u->buf;
	uint32_t *held, nheld = 0, n = 0;
	struct pentry *pe;

	pe = pentry_of(u, p->pid, true);
	held = malloc((p->nmaps + 1) * sizeof(*held));
	if (!pe || !held) {
		free(held);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->nmaps; i++) {
		const struct mapping *m = &p->maps[i];
		struct bpf_umap *um;
		struct otable *t;
		uint64_t bias;
		uint32_t id;
		struct objfile *o;

		if (n == MAX_UMAPS) {
			u->st.maps_dropped += p->nmaps - i;
			break;
		}
		um = &b->maps[n++];
		memset(um, 0, sizeof(*um));
		um->start = m->start;
		um->end = m->end;
		o = objtab__by_id(u->objs, m->obj);
		if (!o) {
			um->kind = UMAP_ANON;
			continue;
		}
		t = otable_of(u, o->id);
		if (!t) {
			um->kind = UMAP_FP;
			continue;
		}
		id = table_for(u, o);
		t = &u->tables[id];
		/* hold a reference once per table, even if mapped in several pieces */
		{
			bool dup = false;

			for (uint32_t j = 0; j < nheld && !dup; j++)
				dup = held[j] == id;
			if (!dup) {
				held[nheld++] = id;
				t->refs++;
			}
		}
		if (t->state == OT_READY && mapping_bias(t, m, &bias)) {
			um->bias = bias;
			um->kind = UMAP_TABLE;
			um->first = t->first;
			um->count = t->count;
		} else {
			um->kind = UMAP_FP;
		}
	}
	b->nmaps = n;
	u->st.procs_synced++;
	/* only the used part of maps[] matters to BPF, but the value is fixed-size */
	if (bpf_map_update_elem(u->procs_fd, &p->pid, b, BPF_ANY)) {
		int err = -errno;

		for (uint32_t j = 0; j < nheld; j++)
			release(u, held[j]);
		free(held);
		return err;
	}
	/* drop what the previous description held (after: shared tables stay) */
	for (uint32_t j = 0; j < pe->nobjs; j++)
		release(u, pe->objs[j]);
	free(pe->objs);
	pe->objs = held;
	pe->nobjs = nheld;
	return 0;
}

bool unwinder__has(const struct unwinder *u, uint32_t pid)
{
	return htab__find(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid))) != NULL;
}

void unwinder__forget(struct unwinder *u, uint32_t pid)
{
	struct pentry *pe = pentry_of(u, pid, false);

	if (!pe)
		return;
	bpf_map_delete_elem(u->procs_fd, &pid);
	for (uint32_t j = 0; j < pe->nobjs; j++)
		release(u, pe->objs[j]);
	free(pe->objs);
	free(pe);
	htab__delete(u->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));
	u->st.procs--;
}

const struct unwinder_stats *unwinder__stats(const struct unwinder *u)
{
	return &u->st;
}
