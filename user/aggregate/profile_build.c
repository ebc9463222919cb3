// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/profile.h"
#include "aggregate/profile_build.h"
#include "aggregate/stacks.h"
#include "proc/cgroup.h"
#include "python/python.h"
#include "proc/objfile.h"
#include "symbolize/dwlines.h"
#include "symbolize/ksyms.h"
#include "symbolize/perfmap.h"
#include "util/htab.h"

/* Weights per profile mapping: which file holds the most of something. */
struct file_tally {
	uint64_t *n;
	size_t cap;
};

struct builder {
	struct profile *p;
	struct objtab *objs;
	const struct ksyms *ks;
	struct htab *cache; /* (sframe, caller) -> frame index + 1, high bit: unresolved */
	struct build_stats *bs;
	const struct build_python *py;
	const void *py_arg;
	const char *eval_name;	      /* the interned "_PyEval_EvalFrameDefault", once seen */
	struct file_tally unresolved; /* unresolved frames (weighted) per profile mapping */
	struct file_tally stopped;    /* [missing frames] stacks by their outermost frame's file */
	uint32_t cv;		      /* build_opts.count_value */
	const struct build_opts *o;
	char sysbuf[512]; /* a Python frame's dotted name, until profile__add_frame copies it */
};

#define UNRESOLVED_BIT	  (1ULL << 63)
#define MAX_USTACK_FRAMES 512 /* >= MAX_USTACK */
#define MAX_PY_FRAMES	  512 /* >= MAX_PYSTACK */

struct cache_key {
	struct sframe f;
	uint64_t caller;
};

/* Return addresses point after the call: look callers up one byte earlier. */
static uint64_t lookup_addr(uint64_t addr, bool caller)
{
	return caller && addr ? addr - 1 : addr;
}

static int kernel_frame(struct builder *b, const struct sframe *f, bool caller, struct pframe *pf,
			char *buf, size_t len, bool *unresolved)
{
	const char *module = NULL, *name = NULL;
	uint64_t off;

	if (b->ks)
		name = ksyms__lookup(b->ks, lookup_addr(f->addr, caller), &off, &module);
	if (name) {
		snprintf(buf, len, "%s_[k]", name);
	} else {
		snprintf(buf, len, "[unknown]_[k]");
		*unresolved = true;
	}
	pf->name = buf;
	pf->kind = FRAME_KERNEL;
	pf->addr = f->addr;
	/* one mapping for the kernel, widened by profile__add_mapping to cover every frame */
	{
		struct pmapping m = { .path = "[kernel.kallsyms]",
				      .start = f->addr,
				      .limit = f->addr + 1,
				      .flags = *unresolved ? PMAP_UNNAMED : 0 };

		pf->mapping = profile__add_mapping(b->p, &m);
	}
	return pf->mapping < 0 ? pf->mapping : 0;
}

/*
 * The object's pprof mapping: its first executable mapping as a process had
 * it, where the process's maps were read (address = start + file offset -
 * file_offset); else, as for the vdso, the ELF addresses of its frames.
 */
static int obj_mapping(struct builder *b, struct objfile *o, uint64_t off, uint64_t vaddr,
		       uint32_t flags, uint64_t *addr)
{
	struct pmapping pm = {
		.path = o->path,
		.build_id = objfile__build_id(o),
		.start = vaddr,
		.limit = vaddr + 1,
		.flags = flags,
	};

	*addr = vaddr;
	if (o->has_map && off >= o->map_pgoff) {
		pm.start = o->map_start;
		pm.file_offset = o->map_pgoff;
		*addr = o->map_start + (off - o->map_pgoff);
		pm.limit = o->map_end > *addr ? o->map_end : *addr + 1;
		pm.flags |= PMAP_RUNTIME;
	}
	if (objfile__executable(o))
		pm.flags |= PMAP_MAIN;
	return profile__add_mapping(b->p, &pm);
}

/* "name (file:line)", the file by its base name. */
static void with_line(char *buf, size_t len, const char *name, const char *file, uint32_t line)
{
	const char *base = strrchr(file, '/');

	snprintf(buf, len, "%s (%s:%u)", name, base ? base + 1 : file, line);
}

static int user_frame(struct builder *b, const struct sframe *f, bool caller, struct pframe *pf,
		      char *buf, size_t len, bool *unresolved)
{
	struct objfile *o = objtab__by_id(b->objs, f->obj);
	uint64_t off = lookup_addr(f->addr, caller), vaddr, addr;
	struct dwline dl;
	const char *name = NULL;
	uint32_t flags = 0;
	int idx;

	pf->kind = FRAME_NATIVE;
	pf->mapping = -1;
	pf->addr = f->addr;
	if (!o && (f->aux & SFRAME_TRAMPOLINE)) { /* no perf map names it (-X perf_jit) */
		pf->name = "[trampoline]";
		return 0;
	}
	if (!o) { /* OBJ_UNMAPPED, OBJ_ANON */
		pf->name = "[unknown]";
		*unresolved = true;
		return 0;
	}
	/*
	 * A caller's frame is named, and its address given (module+0xADDR,
	 * pprof location), at return address - 1: inside the call, where
	 * addr2line finds the calling line, not the one after it.
	 */
	objfile__symbolize(o, off, &name, &vaddr);
	if (caller && !name) {
		/*
		 * A signal handler "returns" to the first byte of the sigreturn
		 * trampoline (__restore_rt): one byte earlier is another function.
		 */
		const char *at = NULL;
		uint64_t at_vaddr;

		objfile__symbolize(o, f->addr, &at, &at_vaddr);
		if (at) {
			name = at;
			vaddr = at_vaddr;
			off = f->addr;
		}
	}
	if (name) {
		pf->name = name;
		if (b->o->lines && !objtab__lines(b->objs, o, vaddr, &dl)) {
			pf->file = dl.file;
			pf->line = dl.line;
			pf->start_line = dl.start_line;
			flags |= PMAP_LINES;
			if (b->o->lines == BUILD_LINES_NAMES) {
				with_line(buf, len, name, dl.file, dl.line);
				pf->name = buf;
				pf->func = name;
			}
		}
	} else {
		uint64_t func;

		/*
		 * No symbol: the function by its FDE (module+0xSTART), one frame
		 * for all of it, as a symbol would be; pprof keeps the address
		 * in the location. No FDE either: the address itself.
		 */
		if (!objfile__function(o, off, &func))
			snprintf(buf, len, "%s+0x%" PRIx64, o->name, func);
		else
			snprintf(buf, len, "%s+0x%" PRIx64, o->name, vaddr);
		pf->name = buf;
		*unresolved = true;
		flags |= PMAP_UNNAMED;
	}
	idx = obj_mapping(b, o, off, vaddr, flags, &addr);
	if (idx < 0)
		return idx;
	pf->mapping = idx;
	pf->addr = addr;
	o->frames++;
	return 0;
}

const char *profile__short_path(const char *file)
{
	static const char *const roots[] = { "/site-packages/", "/dist-packages/" };
	const char *best = NULL, *p, *base;

	/* a package's file: its import path, from the last packages directory */
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		for (p = file; (p = strstr(p, roots[i])); p++)
			if (!best || p + strlen(roots[i]) > best)
				best = p + strlen(roots[i]);
	if (best && *best)
		return best;
	/* the standard library: from lib/pythonX.Y */
	for (p = file; (p = strstr(p, "/lib/python")); p++) {
		const char *q = p + strlen("/lib/python");

		while ((*q >= '0' && *q <= '9') || *q == '.')
			q++;
		if (*q == '/' && q[1])
			best = q + 1;
	}
	if (best)
		return best;
	/* anything else by its base name, a package's __init__ or __main__ with its directory */
	base = strrchr(file, '/');
	if (!base)
		return file;
	if (strcmp(base, "/__init__.py") && strcmp(base, "/__main__.py"))
		return base + 1;
	for (p = base; p > file && p[-1] != '/'; p--)
		;
	return p == base ? base + 1 : p;
}

/*
 * Python's dotted name of a function: its file's short path as a module
 * ("torch/autograd/__init__.py" -> "torch.autograd"), then the qualname.
 * Also what keeps pprof from taking "<module>" for a C++ template argument:
 * it leaves a name alone that differs from its system name.
 */
static void dotted_name(char *buf, size_t len, const char *shortp, const char *qualname)
{
	size_t n = strlen(shortp), i, o = 0;

	if (n > 3 && !strcmp(shortp + n - 3, ".py"))
		n -= 3;
	if (n >= 9 && !strncmp(shortp + n - 9, "/__init__", 9))
		n -= 9;
	for (i = 0; i < n && o + 1 < len; i++)
		buf[o++] = shortp[i] == '/' ? '.' : shortp[i];
	snprintf(buf + o, len - o, "%s%s", o ? "." : "", qualname);
}

static int python_frame(struct builder *b, const struct sframe *f, struct pframe *pf, char *buf,
			size_t len, bool *unresolved)
{
	const char *qualname, *file, *shortp;
	uint32_t line;

	pf->kind = FRAME_PYTHON;
	pf->mapping = -1;
	if (!b->py || b->py->describe(b->py_arg, f->addr, f->aux & ~SFRAME_PY_ENTRY, &qualname,
				      &file, &line)) {
		pf->name = "[python: unreadable]";
		*unresolved = true;
		return 0;
	}
	shortp = profile__short_path(file);
	snprintf(buf, len, "%s (%s:%u)", qualname, shortp, line);
	dotted_name(b->sysbuf, sizeof(b->sysbuf), shortp, qualname);
	pf->name = buf;
	pf->func = qualname;
	pf->sysname = b->sysbuf;
	pf->file = file;
	pf->line = line;
	pf->start_line = b->py->first_line ? b->py->first_line(b->py_arg, f->addr) : 0;
	return 0;
}

/* Weight w to the file of profile frame ix (none for frames in no file). */
static void tally_add(struct builder *b, struct file_tally *t, uint32_t ix, int64_t w)
{
	int32_t m = b->p->frames[ix].mapping;

	if (m < 0 || w <= 0)
		return;
	if ((size_t)m >= t->cap) {
		size_t n = (size_t)m + 16;
		uint64_t *a = realloc(t->n, n * sizeof(*a));

		if (!a)
			return; /* only the file a warning names is lost */
		memset(a + t->cap, 0, (n - t->cap) * sizeof(*a));
		t->n = a;
		t->cap = n;
	}
	t->n[m] += (uint64_t)w;
}

/* The file with the most weight in t: its path into file, the weight into *count. */
static void tally_top(const struct builder *b, const struct file_tally *t, char *file, size_t len,
		      uint64_t *count)
{
	size_t best = 0;

	for (size_t i = 1; i < t->cap; i++)
		if (t->n[i] > t->n[best])
			best = i;
	if (!t->cap || !t->n[best] || best >= b->p->nmappings || !b->p->mappings[best].path)
		return;
	snprintf(file, len, "%s", b->p->mappings[best].path);
	*count = t->n[best];
}

/* An unresolved frame (profile frame ix) in a sample of weight w: counted, and per file. */
static void unresolved_in(struct builder *b, uint32_t ix, int64_t w)
{
	b->bs->unresolved += w;
	tally_add(b, &b->unresolved, ix, w);
}

/* Profile frame index for f, symbolizing it on first sight. */
static int frame_index(struct builder *b, const struct sframe *f, bool caller, bool *unresolved)
{
	struct cache_key k = { .f = *f, .caller = caller };

	/* the same frame whether or not it began (or is) an eval call */
	k.f.aux &= ~(SFRAME_PY_ENTRY | SFRAME_PY_EVAL);
	struct pframe pf = { 0 };
	struct htab_entry *e;
	char buf[512];
	int ret, idx;

	ret = htab__upsert(b->cache, &k, sizeof(k), htab__hash(&k, sizeof(k)), &e);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		*unresolved = e->val & UNRESOLVED_BIT;
		return (int)(e->val & ~UNRESOLVED_BIT) - 1;
	}
	*unresolved = false;
	if (f->obj == OBJ_PYTHON) {
		ret = python_frame(b, f, &pf, buf, sizeof(buf), unresolved);
	} else if (f->obj == OBJ_SYNTH) {
		pf.kind = FRAME_NATIVE;
		pf.name = b->o->synth_name ? b->o->synth_name(b->o->synth_arg, f->addr, &pf.kind)
					   : NULL;
		pf.mapping = -1;
		*unresolved = !pf.name;
		if (!pf.name)
			pf.name = "[unknown]";
		ret = 0;
	} else if (f->obj == OBJ_JIT) {
		pf.kind = FRAME_NATIVE;
		pf.mapping = -1;
		pf.name = perfmaps__name(b->o->jit, (uint32_t)f->addr);
		*unresolved = !pf.name;
		if (!pf.name)
			pf.name = "[unknown]";
		ret = 0;
	} else if (f->obj == OBJ_KERNEL) {
		ret = kernel_frame(b, f, caller, &pf, buf, sizeof(buf), unresolved);
	} else {
		ret = user_frame(b, f, caller, &pf, buf, sizeof(buf), unresolved);
	}
	if (ret < 0)
		return ret;
	idx = profile__add_frame(b->p, &pf);
	if (idx < 0)
		return idx;
	/* the upsert entry may have moved while symbolizing: look it up again */
	e = htab__find(b->cache, &k, sizeof(k), htab__hash(&k, sizeof(k)));
	if (e)
		e->val = (uint64_t)(idx + 1) | (*unresolved ? UNRESOLVED_BIT : 0);
	b->bs->distinct_frames++;
	return idx;
}

static int by_file_cmp(const void *pa, const void *pb)
{
	const struct cache_key *a = pa, *b = pb;

	if (a->f.obj != b->f.obj)
		return a->f.obj < b->f.obj ? -1 : 1;
	if (a->f.addr != b->f.addr)
		return a->f.addr < b->f.addr ? -1 : 1;
	return (a->caller > b->caller) - (a->caller < b->caller);
}

/*
 * Name the native frames of the stacks to be built file by file, all of one
 * file's distinct frames before the next file's, so that each file's symbol
 * table is read once. In stack order the frames of a PyTorch process go
 * back and forth between libraries whose symbol tables do not fit the
 * memory budget together (libtorch_cpu, libtorch_cuda, libcublasLt...), and
 * each turn read one again: on an H200 host a 7.5 s trace re-read them 500
 * times, 117 s of output CPU. The names land in the frame cache, which the
 * stacks then find.
 */
static int name_by_file(struct builder *b, const struct stacks *st, const struct build_opts *o)
{
	struct htab *seen = htab__new(stacks__count(st) / 2 + 1024, HTAB_COPY_KEYS);
	struct cache_key *v = NULL;
	const struct stack_vals *vals;
	const struct stack_key *k;
	size_t n = 0, cap = 0, iter = 0;
	int err = -ENOMEM;

	if (!seen)
		return -ENOMEM;
	while ((k = stacks__next(st, &iter, &vals))) {
		bool any = false;

		for (uint32_t i = 0; i < o->nvalues; i++)
			any |= vals->v[i] != 0;
		if (!any) /* as profile__build: not built, so not named */
			continue;
		for (uint32_t j = 0; j < k->nuser; j++) {
			const struct sframe *f = &k->frames[k->nkernel + j];
			struct htab_entry *e;
			struct cache_key ck;
			int ret;

			if (f->obj < OBJ_FIRST)
				continue;
			memset(&ck, 0, sizeof(ck));
			ck.f = *f;
			ck.caller = j != 0; /* leaf first, as user_and_python asks */
			ret = htab__upsert(seen, &ck, sizeof(ck), htab__hash(&ck, sizeof(ck)), &e);
			if (ret < 0)
				goto out;
			if (!ret)
				continue;
			if (n == cap) {
				size_t c = cap ? 2 * cap : 4096;
				struct cache_key *nv = realloc(v, c * sizeof(*v));

				if (!nv)
					goto out;
				v = nv;
				cap = c;
			}
			v[n++] = ck;
		}
	}
	htab__free(seen);
	seen = NULL;
	if (n)
		qsort(v, n, sizeof(*v), by_file_cmp);
	for (size_t i = 0; i < n; i++) {
		bool unresolved;
		int ret = frame_index(b, &v[i].f, v[i].caller, &unresolved);

		if (ret < 0) {
			err = ret;
			goto out;
		}
	}
	err = 0;
out:
	htab__free(seen);
	free(v);
	return err;
}

static int root_frame(struct builder *b, const char *name)
{
	struct pframe pf = { .name = name, .kind = FRAME_ROOT, .mapping = -1 };

	return profile__add_frame(b->p, &pf);
}

static void comm_str(char *dst, const char *comm)
{
	memcpy(dst, comm, 16);
	dst[16] = '\0';
	if (!dst[0])
		strcpy(dst, "[unknown]");
}

static bool is_eval_loop(struct builder *b, int idx)
{
	/* frames differ by address; their names are interned, so one pointer compare */
	const char *name = b->p->frames[idx].name;

	if (b->eval_name)
		return name == b->eval_name;
	if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
		b->eval_name = name;
		return true;
	}
	return false;
}

/*
 * User frames root first, with each native _PyEval_EvalFrameDefault frame
 * (by its name, or by BPF's finding that its stack holds a Python entry
 * frame: SFRAME_PY_EVAL) replaced by the Python calls it was running (as py-spy --native does), so
 * that C extension frames sit above their Python caller. A Python frame
 * flagged SFRAME_PY_ENTRY begins the run of one eval call. When the counts
 * disagree (an eval frame the native unwinder missed), calls and eval frames
 * are paired from the leaf, where the time is; extra calls go to the
 * outermost eval frame, and with no eval frame at all the Python stack goes
 * below the native one.
 *
 * Under -X perf each eval call runs through a trampoline (SFRAME_TRAMPOLINE:
 * named py::qualname:file from the perf map, or [trampoline]): what it calls
 * is the eval loop, named or not (a stripped interpreter's, an LTO clone),
 * and the trampoline's frame is left out where the Python calls stand in
 * for the eval frame, since they name the same call.
 */
static int user_and_python(struct builder *b, const struct stack_key *k, const struct stack_vals *v,
			   uint32_t *idx, uint32_t *n)
{
	uint32_t nu = k->nuser, np = k->npython, m = 0, g = 0;
	const struct sframe *uf = &k->frames[k->nkernel], *pf = &k->frames[k->nkernel + nu];
	int32_t uidx[MAX_USTACK_FRAMES], pidx[MAX_PY_FRAMES];
	uint32_t gstart[MAX_PY_FRAMES + 1];
	bool unresolved, uunres[MAX_USTACK_FRAMES], punres[MAX_PY_FRAMES];
	bool ueval[MAX_USTACK_FRAMES], utramp[MAX_USTACK_FRAMES];
	int ret;

	if (nu > MAX_USTACK_FRAMES || np > MAX_PY_FRAMES)
		return -EINVAL;
	/* native frames, root first (uf is leaf first) */
	for (uint32_t i = 0; i < nu; i++) {
		uint32_t j = nu - 1 - i;

		ret = frame_index(b, &uf[j], j != 0, &unresolved);
		if (ret < 0)
			return ret;
		uidx[i] = ret;
		uunres[i] = unresolved;
		/*
		 * by the unwinder's finding, or by CPython's perf-map name for one
		 * (py::qualname:file): a sample decoded before the unwinder had
		 * looked at a new trampoline region has only the name
		 */
		utramp[i] = ((uf[j].obj == OBJ_ANON || uf[j].obj == OBJ_JIT) &&
			     (uf[j].aux & SFRAME_TRAMPOLINE)) ||
			    (uf[j].obj == OBJ_JIT && !strncmp(b->p->frames[ret].name, "py::", 4));
		ueval[i] = np && ((uf[j].aux & SFRAME_PY_EVAL) || is_eval_loop(b, ret) ||
				  (i && utramp[i - 1]));
		m += ueval[i];
	}
	/* Python frames root first, cut into one group per eval call */
	for (uint32_t i = 0; i < np; i++) {
		const struct sframe *f = &pf[np - 1 - i];

		ret = frame_index(b, f, false, &unresolved);
		if (ret < 0)
			return ret;
		pidx[i] = ret;
		punres[i] = unresolved;
		if (i == 0 || (f->aux & SFRAME_PY_ENTRY))
			gstart[g++] = i;
	}
	gstart[g] = np;
	if (np && m != g)
		b->bs->py_merge_mismatch++;

#define EMIT(ix, un)                                       \
	do {                                               \
		idx[(*n)++] = (ix);                        \
		b->bs->frames += v->v[b->cv];              \
		if (un)                                    \
			unresolved_in(b, ix, v->v[b->cv]); \
	} while (0)

	if (np && !m) {
		for (uint32_t i = 0; i < np; i++)
			EMIT(pidx[i], punres[i]);
	}
	if (nu && (k->flags & STACK_F_MISSING)) {
		/* the native walk stopped here: what called the outermost frame is unknown */
		ret = root_frame(b, "[missing frames]");
		if (ret < 0)
			return ret;
		EMIT(ret, false);
		tally_add(b, &b->stopped, uidx[0], v->v[b->cv]);
	}
	for (uint32_t i = 0, e = 0; i < nu; i++) {
		uint32_t first, last;

		if (!(np && m && ueval[i])) {
			/* a trampoline into an eval call the Python frames replace */
			if (!(m && utramp[i] && i + 1 < nu && ueval[i + 1]))
				EMIT(uidx[i], uunres[i]);
			continue;
		}
		/* eval frame e (root first) of m gets which groups? */
		if (g <= m) {
			if (e < m - g) { /* no Python call left for it */
				EMIT(uidx[i], uunres[i]);
				e++;
				continue;
			}
			first = last = e - (m - g);
		} else {
			first = e == 0 ? 0 : e + (g - m);
			last = e + (g - m);
		}
		for (uint32_t gi = first; gi <= last; gi++)
			for (uint32_t j = gstart[gi]; j < gstart[gi + 1]; j++)
				EMIT(pidx[j], punres[j]);
		e++;
	}
#undef EMIT
	return 0;
}

static int add_stack(struct builder *b, const struct stack_key *k, const struct stack_vals *v,
		     const struct build_opts *o, size_t stack, uint32_t *idx)
{
	const struct cgroup_name *cn = NULL;
	uint32_t n = 0;
	struct plabel labels[PROFILE_MAX_LABELS];
	uint32_t nlabels = 0;
	char name[64], pcomm[17], tcomm[17], tframe[PYNAME_MAX + 16];
	const char *tname = NULL;
	int64_t values[PROFILE_MAX_VALUES];
	int i, ret;
	bool unresolved;

	if (o->cg && k->cgroup_id)
		cn = cgroups__get(o->cg, k->cgroup_id);
	if (o->per_container) {
		char cname[CGROUP_SHORT_ID + 1];
		const char *root = "[no cgroup]";

		if (cn && cn->info.container_id[0]) {
			memcpy(cname, cn->info.container_id, CGROUP_SHORT_ID);
			cname[CGROUP_SHORT_ID] = '\0';
			root = cname;
		} else if (cn) {
			root = cn->path;
		}
		ret = root_frame(b, root);
		if (ret < 0)
			return ret;
		idx[n++] = ret;
	}
	comm_str(pcomm, k->pcomm);
	if (o->per_pid)
		snprintf(name, sizeof(name), "%s [%u]", pcomm, k->pid);
	else
		snprintf(name, sizeof(name), "%s", pcomm);
	ret = root_frame(b, name);
	if (ret < 0)
		return ret;
	idx[n++] = ret;
	if (o->per_thread) {
		comm_str(tcomm, k->tcomm);
		/* a Python thread's threading name, else its OS name (comm) */
		if (b->py && b->py->thread_name)
			tname = b->py->thread_name(b->py_arg, k->pid, k->tid);
		if (!tname)
			tname = tcomm;
		snprintf(tframe, sizeof(tframe), "%s [%u]", tname, k->tid);
		ret = root_frame(b, tframe);
		if (ret < 0)
			return ret;
		idx[n++] = ret;
	}
	if (k->flags & (STACK_F_USER_TRUNC | STACK_F_PY_TRUNC)) {
		/* the outermost frames are missing: say so rather than start mid-stack */
		ret = root_frame(b, "[truncated]");
		if (ret < 0)
			return ret;
		idx[n++] = ret;
	}
	ret = user_and_python(b, k, v, idx, &n);
	if (ret < 0)
		return ret;
	/* kernel frames root first */
	for (i = (int)k->nkernel - 1; i >= 0; i--) {
		ret = frame_index(b, &k->frames[i], i != 0, &unresolved);
		if (ret < 0)
			return ret;
		idx[n++] = ret;
		b->bs->frames += v->v[b->cv];
		if (unresolved)
			unresolved_in(b, ret, v->v[b->cv]);
	}
	for (i = 0; i < (int)o->nvalues; i++)
		values[i] = v->v[i];
	labels[nlabels++] = (struct plabel){ .key = "pid", .num = k->pid };
	labels[nlabels++] = (struct plabel){ .key = "comm", .str = pcomm };
	if (k->npython && (k->flags & STACK_F_GIL_KNOWN))
		labels[nlabels++] =
			(struct plabel){ .key = "gil",
					 .str = k->flags & STACK_F_GIL_HELD ? "held" : "released" };
	if (k->flags & STACK_F_HEURISTIC)
		labels[nlabels++] = (struct plabel){ .key = "unwind", .str = "heuristic" };
	if (o->per_thread) {
		labels[nlabels++] = (struct plabel){ .key = "tid", .num = k->tid };
		labels[nlabels++] = (struct plabel){ .key = "thread", .str = tname };
	}
	if (cn) {
		labels[nlabels++] = (struct plabel){ .key = "cgroup", .str = cn->path };
		if (cn->info.container_id[0])
			labels[nlabels++] = (struct plabel){ .key = "container_id",
							     .str = cn->info.container_id };
		if (cn->info.pod_uid[0])
			labels[nlabels++] =
				(struct plabel){ .key = "pod", .str = cn->info.pod_uid };
	}
	if (o->stack_labels)
		nlabels += o->stack_labels(o->stack_labels_arg, stack, &labels[nlabels],
					   PROFILE_MAX_LABELS - nlabels);
	return profile__add_sample(b->p, idx, n, values, labels, nlabels);
}

int profile__build(struct profile **out, const struct stacks *st, struct objtab *objs,
		   const struct ksyms *ks, const struct build_opts *o, struct build_stats *bs)
{
	struct builder b = {
		.objs = objs, .ks = ks, .bs = bs, .py = o->py, .py_arg = o->py_arg, .o = o
	};
	const struct stack_vals *v;
	const struct stack_key *k;
	uint32_t *idx = NULL;
	size_t iter = 0;
	int err = -ENOMEM;

	memset(bs, 0, sizeof(*bs));
	b.p = profile__new();
	/* grows with the distinct frames; sized for all of them up front it took 32 bytes x 4 x stacks */
	b.cache = htab__new(stacks__count(st) / 2 + 1024, HTAB_COPY_KEYS);
	idx = malloc((4 + 0xffff * 3) * sizeof(*idx));
	if (!b.p || !b.cache || !idx)
		goto cleanup;
	if (!o->nvalues || o->nvalues > PROFILE_MAX_VALUES || o->nvalues > STACK_MAX_VALUES ||
	    o->default_value >= o->nvalues || o->count_value >= o->nvalues) {
		err = -EINVAL;
		goto cleanup;
	}
	b.cv = o->count_value;
	for (uint32_t i = 0; i < o->nvalues; i++)
		if (profile__add_value_type(b.p, o->value_types[i].type, o->value_types[i].unit) <
		    0)
			goto cleanup;
	b.p->default_value = o->default_value;
	if (o->period_type.type &&
	    profile__set_period(b.p, o->period_type.type, o->period_type.unit, o->period) < 0)
		goto cleanup;
	b.p->time_ns = o->time_ns;
	b.p->duration_ns = o->duration_ns;

	err = name_by_file(&b, st, o);
	if (err < 0)
		goto cleanup;
	err = -ENOMEM;
	while ((k = stacks__next(st, &iter, &v))) {
		bool any = false;

		for (uint32_t i = 0; i < o->nvalues; i++)
			any |= v->v[i] != 0;
		if (!any) /* e.g. a heap stack whose blocks were all freed, in an in-use run */
			continue;
		err = add_stack(&b, k, v, o, stacks__index(st, v), idx);
		if (err < 0)
			goto cleanup;
	}
	for (uint32_t id = OBJ_FIRST; id < OBJ_FIRST + objtab__count(objs); id++) {
		struct objfile *ob = objtab__by_id(objs, id);

		/* named from a memo (objtab__name_frames) had symbols, read and freed since */
		if (ob && ob->frames && !ob->syms && !ob->info_known)
			bs->objects_without_symbols++;
	}
	tally_top(&b, &b.unresolved, bs->unresolved_file, sizeof(bs->unresolved_file),
		  &bs->unresolved_file_frames);
	tally_top(&b, &b.stopped, bs->stopped_file, sizeof(bs->stopped_file),
		  &bs->stopped_file_samples);
	*out = b.p;
	b.p = NULL;
	err = 0;
cleanup:
	profile__free(b.p);
	free(b.unresolved.n);
	free(b.stopped.n);
	htab__free(b.cache);
	free(idx);
	return err;
}
