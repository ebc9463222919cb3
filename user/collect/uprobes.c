// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "collect/uprobes.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "util/htab.h"
#include "util/log.h"

#define NO_OFFSET UINT64_MAX

/*
 * One attachment: a uprobe_multi link (fd, all of a program's offsets in one
 * file), or in the fallback one libbpf link per probe.
 */
struct ulink {
	struct bpf_link *bl;
	int fd;		  /* uprobe_multi link, or -1 */
	uint32_t nprobes; /* offsets it covers */
};

struct ufile {
	bool matched;
	bool attached; /* whole-machine mode: done once */
	char path
		[PATH_MAX]; /* what the kernel and libbpf open: /proc/self/fd/N, or --cuda-lib PATH */
	uint64_t *offs;	    /* per spec; NO_OFFSET: the file lacks it */
	struct ulink *links; /* whole-machine mode: up to one per spec */
	uint32_t nlinks;
};

struct upid {
	uint32_t *objs; /* files probed in this process */
	uint32_t nobjs;
	struct ulink *links;
	uint32_t nlinks, cap;
};

struct uprobes {
	const char *name;
	struct objtab *objs;
	bool all;
	bool (*match)(struct objfile *o, void *arg);
	void *arg;
	const struct uprobe_spec *specs;
	size_t nspecs;
	/* uprobe_multi: specs with the same program and direction share a link */
	uint32_t *group; /* spec -> group */
	uint32_t ngroups;
	uint64_t *scratch, *cookies; /* offsets of one group, their cookies */
	struct htab *files;	     /* objfile id -> struct ufile * */
	struct htab *pids;	     /* pid -> struct upid * */
	struct uprobes_stats st;
	int reapers; /* threads still destroying links of exited processes */
};

/* probes attached now, by every struct uprobes (the ready line's count) */
static uint64_t live_probes;

/*
 * uprobe_multi links (kernel 6.6, commit 89ae89f53d20 "bpf: Add multi uprobe
 * link"): one bpf(BPF_LINK_CREATE) attaches a program at many offsets of one
 * file, and closing it removes them all behind one RCU grace period. libbpf
 * 1.1.2 knows neither the attach type nor the section name, and the system's
 * linux/bpf.h predates the attr fields, so both are spelled out here
 * (vmlinux/x86/vmlinux.h has the kernel's union bpf_attr).
 */
#define UPROBE_MULTI_ATTACH 48 /* BPF_TRACE_UPROBE_MULTI */
#define UPROBE_MULTI_RETURN 1u /* BPF_F_UPROBE_MULTI_RETURN */

struct link_create_umulti {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, umulti_flags, pid;
};
_Static_assert(sizeof(struct link_create_umulti) <= sizeof(union bpf_attr), "bpf_attr");

static int umulti__create(int prog_fd, const char *path, const uint64_t *offs,
			  const uint64_t *cookies, uint32_t n, bool ret, int pid)
{
	union bpf_attr attr;
	struct link_create_umulti a = {
		.prog_fd = prog_fd,
		.attach_type = UPROBE_MULTI_ATTACH,
		.path = (uintptr_t)path,
		.offsets = (uintptr_t)offs,
		.cookies = (uintptr_t)cookies,
		.cnt = n,
		.umulti_flags = ret ? UPROBE_MULTI_RETURN : 0,
		.pid = pid > 0 ? pid : 0,
	};
	int fd;

	memset(&attr, 0, sizeof(attr));
	memcpy(&attr, &a, sizeof(a));
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

/*
 * Whether the kernel has uprobe_multi links: a link on "/" fails with EBADF
 * (not a regular file) where it does, EINVAL where the attach type is
 * unknown. Asked once per run.
 */
static bool umulti__supported(void)
{
	static int have = -1;
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = UPROBE_MULTI_ATTACH);
	uint64_t off = 0;
	int prog, fd;

	if (have >= 0)
		return have;
	have = 0;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "umulti_probe", "GPL", insns, 2, &o);
	if (prog < 0)
		return false;
	fd = umulti__create(prog, "/", &off, NULL, 1, false, 0);
	if (fd >= 0)
		close(fd);
	else
		have = fd == -EBADF;
	close(prog);
	pr_debug("uprobe_multi links: %s", have ? "yes" : "no");
	return have;
}

void uprobes__prepare(struct bpf_object *obj)
{
	struct bpf_program *p;

	if (getenv("BPFPROF_NO_UPROBE_MULTI") || !umulti__supported())
		return;
	bpf_object__for_each_program(p, obj) {
		const char *sec = bpf_program__section_name(p);

		if (!strcmp(sec, "uprobe") || !strcmp(sec, "uretprobe"))
			bpf_program__set_expected_attach_type(p, UPROBE_MULTI_ATTACH);
	}
}

/* Whether this run's programs were loaded for uprobe_multi (uprobes__prepare). */
static bool use_multi(const struct uprobes *u)
{
	return u->nspecs &&
	       bpf_program__expected_attach_type(u->specs[0].prog) == UPROBE_MULTI_ATTACH;
}

uint64_t uprobes__live(void)
{
	return __atomic_load_n(&live_probes, __ATOMIC_RELAXED);
}

int uprobes__elf_func(Elf *e, uint32_t sh_type, const char *name, GElf_Sym *sym)
{
	size_t len = strlen(name);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != sh_type || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, i, &s) || s.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strncmp(n, name, len) && (!n[len] || n[len] == '@')) {
				if (sym)
					*sym = s;
				return 0;
			}
		}
	}
	return -ENOENT;
}

int uprobes__func_offset(int fd, const char *func, uint64_t *off)
{
	size_t shnum, phnum;
	uint64_t vaddr = 0;
	bool found = false;
	GElf_Sym sym;
	Elf *e;
	int ret = -ENOENT;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || elf_getshdrnum(e, &shnum) || elf_getphdrnum(e, &phnum)) {
		ret = -EINVAL;
		goto out;
	}
	/* .dynsym first: the symbol the dynamic linker binds calls to */
	for (int pass = 0; pass < 2 && !found; pass++) {
		if (!uprobes__elf_func(e, pass ? SHT_SYMTAB : SHT_DYNSYM, func, &sym) &&
		    sym.st_value) {
			vaddr = sym.st_value;
			found = true;
		}
	}
	if (!found)
		goto out;
	/* the uprobe wants a file offset: through the PT_LOAD segment holding it */
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			ret = 0;
			goto out;
		}
	}
out:
	elf_end(e);
	return ret;
}

/*
 * Length of the x86-64 nop at c[0..n), 0 if c does not start with one: 0x90
 * (xchg %eax,%eax; not after F3, which makes it pause) or 0f 1f /0 (nopl),
 * with operand-size, segment and REX prefixes, as compilers and assemblers
 * pad with.
 */
static size_t nop_len(const uint8_t *c, size_t n)
{
	size_t i = 0, len;
	uint8_t modrm, mod, rm;

	while (i < n && i < 14 &&
	       (c[i] == 0x66 || c[i] == 0x2e || c[i] == 0x3e || c[i] == 0x26 || c[i] == 0x36 ||
		c[i] == 0x64 || c[i] == 0x65))
		i++;
	if (i < n && (c[i] & 0xf0) == 0x40) /* REX */
		i++;
	if (i < n && c[i] == 0x90)
		return i + 1;
	if (i + 2 >= n || c[i] != 0x0f || c[i + 1] != 0x1f)
		return 0;
	modrm = c[i + 2];
	if ((modrm >> 3) & 7)
		return 0; /* 0f 1f /1../7: reserved hint space, not the nop */
	mod = modrm >> 6;
	rm = modrm & 7;
	len = i + 3;
	if (mod != 3 && rm == 4) { /* SIB */
		if (len >= n)
			return 0;
		if (mod == 0 && (c[len] & 7) == 5)
			len += 4; /* no base: disp32 */
		len++;
	}
	if (mod == 1)
		len += 1;
	else if (mod == 2 || (mod == 0 && rm == 5))
		len += 4;
	return len <= n ? len : 0;
}

size_t uprobes__nop_skip(const uint8_t *code, size_t n)
{
	size_t at = 0, len;

	while ((len = nop_len(code + at, n - at)) >= 5)
		at += len;
	return at;
}

/*
 * No probe where the kernel could turn it into a call a fork loses. Kernel
 * 6.18 ("uprobes/x86: Add support to optimize uprobes") rewrites a uprobe on
 * a 5-byte nop, after its first hit, into a call to an [uprobes-trampoline]
 * page it maps in that process only (VM_DONTCOPY): a child forked later
 * keeps the call in its copy of the text page but has no page there, and
 * dies of SIGSEGV at its first call (issue 25). Later kernels may do the
 * same with longer nops. Functions built with patchable entries or tracing
 * hooks begin with such nops: the probe goes on the first instruction after
 * them, which sees the same registers and stack (a nop changes nothing but
 * the instruction pointer), so entry and return probes work unchanged.
 */
static void place_safe(int fd, uint64_t *off)
{
	uint8_t c[64];
	ssize_t n = pread(fd, c, sizeof(c), (off_t)*off);

	if (n > 0)
		*off += uprobes__nop_skip(c, (size_t)n);
}

int uprobes__new(struct uprobes **out, const char *name, struct objtab *objs, bool all,
		 bool (*match)(struct objfile *o, void *arg), void *arg,
		 const struct uprobe_spec *specs, size_t nspecs)
{
	struct uprobes *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->name = name;
	u->objs = objs;
	u->all = all;
	u->match = match;
	u->arg = arg;
	u->specs = specs;
	u->nspecs = nspecs;
	u->files = htab__new(256, HTAB_COPY_KEYS);
	u->pids = htab__new(256, HTAB_COPY_KEYS);
	u->group = calloc(nspecs ? nspecs : 1, sizeof(*u->group));
	u->scratch = calloc(nspecs ? nspecs : 1, sizeof(*u->scratch));
	u->cookies = calloc(nspecs ? nspecs : 1, sizeof(*u->cookies));
	if (!u->files || !u->pids || !u->group || !u->scratch || !u->cookies) {
		uprobes__free(u);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nspecs; i++) {
		size_t j;

		for (j = 0; j < i; j++)
			if (specs[j].prog == specs[i].prog &&
			    specs[j].retprobe == specs[i].retprobe)
				break;
		u->group[i] = j < i ? u->group[j] : u->ngroups++;
	}
	*out = u;
	return 0;
}

/*
 * Removing a uprobe makes the kernel wait for RCU grace periods (0.3-2 s per
 * probe measured on a VM: 22 probes took 9 s to detach one by one), so links
 * are destroyed by one thread each, all at once: concurrent waits share the
 * grace periods. A uprobe_multi link waits once for all its offsets.
 */
static void ulink__destroy(struct ulink *l)
{
	if (l->fd >= 0)
		close(l->fd);
	else
		bpf_link__destroy(l->bl);
	__atomic_sub_fetch(&live_probes, l->nprobes, __ATOMIC_RELAXED);
}

static void *destroy_one(void *l)
{
	ulink__destroy(l);
	return NULL;
}

static void destroy_links(struct ulink *links, size_t n)
{
	pthread_t *t = n > 1 ? calloc(n, sizeof(*t)) : NULL;
	bool *started = n > 1 ? calloc(n, sizeof(*started)) : NULL;

	for (size_t i = 0; i < n; i++) {
		if (t && started && !pthread_create(&t[i], NULL, destroy_one, &links[i]))
			started[i] = true;
		else
			ulink__destroy(&links[i]);
	}
	for (size_t i = 0; t && started && i < n; i++)
		if (started[i])
			pthread_join(t[i], NULL);
	free(t);
	free(started);
}

struct reap {
	struct uprobes *u;
	struct ulink *links;
	size_t n;
};

static void *reap(void *arg)
{
	struct reap *r = arg;

	destroy_links(r->links, r->n);
	__atomic_sub_fetch(&r->u->reapers, 1, __ATOMIC_RELEASE);
	free(r->links);
	free(r);
	return NULL;
}

/* A process is gone: its links go in the background, the run loop goes on. */
static void free_upid(struct uprobes *u, struct upid *up, bool wait)
{
	struct reap *r = wait || !up->nlinks ? NULL : malloc(sizeof(*r));
	pthread_t t;

	if (r) {
		*r = (struct reap){ .u = u, .links = up->links, .n = up->nlinks };
		__atomic_add_fetch(&u->reapers, 1, __ATOMIC_ACQUIRE);
		if (!pthread_create(&t, NULL, reap, r)) {
			pthread_detach(t);
			up->links = NULL;
			up->nlinks = 0;
		} else {
			__atomic_sub_fetch(&u->reapers, 1, __ATOMIC_RELEASE);
			free(r);
		}
	}
	destroy_links(up->links, up->nlinks);
	free(up->links);
	free(up->objs);
	free(up);
}

/* Append src[0..n) to *all (grown); links that do not fit are destroyed here. */
static void gather(struct ulink **all, size_t *n, size_t *cap, const struct ulink *src, size_t k)
{
	if (*n + k > *cap) {
		size_t c = *cap ? *cap : 64;
		struct ulink *a;

		while (c < *n + k)
			c *= 2;
		a = realloc(*all, c * sizeof(*a));
		if (!a) {
			for (size_t i = 0; i < k; i++)
				ulink__destroy((struct ulink *)&src[i]);
			return;
		}
		*all = a;
		*cap = c;
	}
	memcpy(*all + *n, src, k * sizeof(*src));
	*n += k;
}

void uprobes__free(struct uprobes *u)
{
	struct htab_entry *e;
	struct ulink *all = NULL;
	size_t n = 0, cap = 0, it = 0;

	if (!u)
		return;
	if (u->st.probes)
		pr_verbose("%s: %llu probes attached in %llu links (%s)", u->name,
			   (unsigned long long)u->st.probes, (unsigned long long)u->st.links,
			   use_multi(u) ? "uprobe_multi" : "one perf event each");
	/* every link at once (see destroy_links) */
	while (u->files && (e = htab__next(u->files, &it))) {
		struct ufile *f = (struct ufile *)(uintptr_t)e->val;

		gather(&all, &n, &cap, f->links, f->nlinks);
		free(f->links);
		free(f->offs);
		free(f);
	}
	it = 0;
	while (u->pids && (e = htab__next(u->pids, &it))) {
		struct upid *up = (struct upid *)(uintptr_t)e->val;

		gather(&all, &n, &cap, up->links, up->nlinks);
		up->nlinks = 0;
		free_upid(u, up, true);
	}
	destroy_links(all, n);
	free(all);
	/* exited processes' links still being destroyed */
	for (int i = 0; i < 6000 && __atomic_load_n(&u->reapers, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	htab__free(u->files);
	htab__free(u->pids);
	free(u->group);
	free(u->scratch);
	free(u->cookies);
	free(u);
}

/* Resolve the file's offsets once; NULL if it is not one to probe. */
static struct ufile *get_file(struct uprobes *u, struct objfile *o, const char *path)
{
	uint32_t id = o ? o->id : 0;
	struct htab_entry *e;
	struct ufile *f;
	int ret;

	ret = htab__upsert(u->files, &id, sizeof(id), htab__hash(&id, sizeof(id)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 0)
		return ((struct ufile *)(uintptr_t)e->val)->matched
			       ? (struct ufile *)(uintptr_t)e->val
			       : NULL;
	f = calloc(1, sizeof(*f));
	if (!f) {
		htab__delete(u->files, &id, sizeof(id), e->hash);
		return NULL;
	}
	e->val = (uintptr_t)f;
	if (o && (objfile__fd(o) < 0 || !u->match(o, u->arg) || objfile__fd(o) < 0))
		return NULL;
	if (o) {
		/* attached by this path for as long as we run: the fd cap leaves it open */
		objfile__pin(o);
		snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", o->fd);
	} else
		snprintf(f->path, sizeof(f->path), "%s", path);
	f->offs = calloc(u->nspecs, sizeof(*f->offs));
	f->links = calloc(u->nspecs, sizeof(*f->links));
	if (!f->offs || !f->links)
		return NULL;
	{
		int fd = o ? o->fd : open(path, O_RDONLY | O_CLOEXEC);

		for (size_t i = 0; i < u->nspecs; i++) {
			if (fd < 0 || uprobes__func_offset(fd, u->specs[i].func, &f->offs[i])) {
				f->offs[i] = NO_OFFSET;
				if (!u->specs[i].optional) {
					u->st.missing++;
					pr_debug("%s: %s has no %s", u->name, o ? o->path : path,
						 u->specs[i].func);
				}
			} else {
				if (u->specs[i].place)
					u->specs[i].place(fd, &f->offs[i]);
				place_safe(fd, &f->offs[i]);
			}
		}
		if (!o && fd >= 0)
			close(fd);
	}
	f->matched = true;
	u->st.files++;
	pr_debug("%s: probing %s", u->name, o ? o->path : path);
	return f;
}

/* Fallback: one perf-event uprobe per (spec, file). */
static int attach_one(struct uprobes *u, const struct ufile *f, size_t i, int pid,
		      struct ulink *out)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = u->specs[i].retprobe,
		    .bpf_cookie = u->specs[i].cookie);
	struct bpf_link *l;

	l = bpf_program__attach_uprobe_opts(u->specs[i].prog, pid, f->path, f->offs[i], &opts);
	if (!l) {
		u->st.attach_failed++;
		pr_debug("%s: cannot attach %s in %s (pid %d): %s", u->name, u->specs[i].func,
			 f->path, pid, strerror(errno));
		return -errno;
	}
	*out = (struct ulink){ .bl = l, .fd = -1, .nprobes = 1 };
	return 0;
}

/* One uprobe_multi link: every offset of group g in the file. */
static int attach_group(struct uprobes *u, const struct ufile *f, uint32_t g, int pid,
			struct ulink *out)
{
	const struct uprobe_spec *spec = NULL;
	uint32_t n = 0;
	int fd;

	for (size_t i = 0; i < u->nspecs; i++) {
		bool dup = false;

		if (u->group[i] != g || f->offs[i] == NO_OFFSET)
			continue;
		spec = &u->specs[i];
		/* aliases (memalign = aligned_alloc): the program runs once per call */
		for (uint32_t k = 0; k < n && !dup; k++)
			dup = u->scratch[k] == f->offs[i];
		if (!dup) {
			u->cookies[n] = spec->cookie;
			u->scratch[n++] = f->offs[i];
		}
	}
	if (!n)
		return -ENOENT;
	fd = umulti__create(bpf_program__fd(spec->prog), f->path, u->scratch, u->cookies, n,
			    spec->retprobe, pid);
	if (fd < 0) {
		u->st.attach_failed += n;
		pr_debug("%s: cannot attach %u offsets of %s in %s (pid %d): %s", u->name, n,
			 bpf_program__name(spec->prog), f->path, pid, strerror(-fd));
		return fd;
	}
	*out = (struct ulink){ .fd = fd, .nprobes = n };
	return 0;
}

/* Every probe of the file, for pid (-1: everyone); links go to out (room for nspecs). */
static uint32_t attach_file(struct uprobes *u, const struct ufile *f, int pid, struct ulink *out)
{
	uint32_t n = 0;

	if (use_multi(u)) {
		for (uint32_t g = 0; g < u->ngroups; g++)
			if (!attach_group(u, f, g, pid, &out[n]))
				n++;
	} else {
		for (size_t i = 0; i < u->nspecs; i++)
			if (f->offs[i] != NO_OFFSET && !attach_one(u, f, i, pid, &out[n]))
				n++;
	}
	for (uint32_t i = 0; i < n; i++) {
		u->st.probes += out[i].nprobes;
		__atomic_add_fetch(&live_probes, out[i].nprobes, __ATOMIC_RELAXED);
	}
	u->st.links += n;
	pr_debug("%s: %u links in %s for pid %d", u->name, n, f->path, pid);
	return n;
}

/* Whole-machine mode: probe the file for everyone, once. */
static void attach_all(struct uprobes *u, struct ufile *f)
{
	if (f->attached)
		return;
	f->attached = true;
	f->nlinks = attach_file(u, f, -1, f->links);
}

static struct upid *get_pid(struct uprobes *u, uint32_t pid)
{
	struct htab_entry *e;
	int ret = htab__upsert(u->pids, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);

	if (ret < 0)
		return NULL;
	if (ret == 1) {
		e->val = (uintptr_t)calloc(1, sizeof(struct upid));
		if (!e->val) {
			htab__delete(u->pids, &pid, sizeof(pid), e->hash);
			return NULL;
		}
	}
	return (struct upid *)(uintptr_t)e->val;
}

/* Targeted mode: probe the file in this process only, once. */
static void attach_pid(struct uprobes *u, struct ufile *f, uint32_t obj, uint32_t pid)
{
	struct upid *up = get_pid(u, pid);
	uint32_t *objs;

	if (!up)
		return;
	for (uint32_t i = 0; i < up->nobjs; i++)
		if (up->objs[i] == obj)
			return;
	objs = realloc(up->objs, (up->nobjs + 1) * sizeof(*objs));
	if (!objs)
		return;
	up->objs = objs;
	up->objs[up->nobjs++] = obj;
	if (up->nlinks + u->nspecs > up->cap) {
		uint32_t cap = up->nlinks + u->nspecs + up->cap;
		struct ulink *ls = realloc(up->links, cap * sizeof(*ls));

		if (!ls)
			return;
		up->links = ls;
		up->cap = cap;
	}
	up->nlinks += attach_file(u, f, pid, up->links + up->nlinks);
}

void uprobes__scan(struct uprobes *u, const struct proc *p)
{
	uint32_t last = UINT32_MAX;

	if (!p || p->exited)
		return;
	for (uint32_t i = 0; i < p->nmaps; i++) {
		uint32_t id = p->maps[i].obj;
		struct objfile *o;
		struct ufile *f;

		if (id < OBJ_FIRST || id == last)
			continue;
		last = id;
		o = objtab__by_id(u->objs, id);
		if (!o || !(f = get_file(u, o, NULL)))
			continue;
		if (u->all)
			attach_all(u, f);
		else
			attach_pid(u, f, id, p->pid);
	}
}

void uprobes__attach_obj(struct uprobes *u, struct objfile *o, uint32_t pid)
{
	struct ufile *f = o ? get_file(u, o, NULL) : NULL;

	if (!f)
		return;
	if (u->all)
		attach_all(u, f);
	else
		attach_pid(u, f, o->id, pid);
}

int uprobes__add_path(struct uprobes *u, const char *path)
{
	struct ufile *f = get_file(u, NULL, path);

	if (!f)
		return -ENOENT;
	attach_all(u, f);
	return 0;
}

void uprobes__forget(struct uprobes *u, uint32_t pid)
{
	struct htab_entry *e =
		htab__find(u->pids, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	if (!e)
		return;
	free_upid(u, (struct upid *)(uintptr_t)e->val, false);
	htab__delete(u->pids, &pid, sizeof(pid), e->hash);
}

const struct uprobes_stats *uprobes__stats(const struct uprobes *u)
{
	return &u->st;
}
