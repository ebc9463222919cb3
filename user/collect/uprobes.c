// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "collect/uprobes.h"
#include "proc/objfile.h"
#include "proc/proc.h"
#include "util/htab.h"
#include "util/log.h"

#define NO_OFFSET UINT64_MAX

struct ufile {
	bool matched;
	char path
		[PATH_MAX]; /* what the kernel and libbpf open: /proc/self/fd/N, or --cuda-lib PATH */
	uint64_t *offs;	    /* per spec; NO_OFFSET: the file lacks it */
	struct bpf_link **links; /* whole-machine mode: per spec */
};

struct upid {
	uint32_t *objs; /* files probed in this process */
	uint32_t nobjs;
	struct bpf_link **links;
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
	struct htab *files; /* objfile id -> struct ufile * */
	struct htab *pids;  /* pid -> struct upid * */
	struct uprobes_stats st;
	int reapers; /* threads still destroying links of exited processes */
};

int uprobes__func_offset(int fd, const char *func, uint64_t *off)
{
	size_t flen = strlen(func), shnum, phnum;
	Elf_Scn *scn = NULL;
	uint64_t vaddr = 0;
	bool found = false;
	GElf_Shdr sh;
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
		uint32_t want = pass ? SHT_SYMTAB : SHT_DYNSYM;

		scn = NULL;
		while (!found && (scn = elf_nextscn(e, scn))) {
			Elf_Data *d;
			size_t n;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			if (!d)
				continue;
			n = sh.sh_size / sh.sh_entsize;
			for (size_t i = 0; i < n; i++) {
				GElf_Sym sym;
				const char *name;

				if (!gelf_getsym(d, i, &sym) || sym.st_shndx == SHN_UNDEF ||
				    !sym.st_value || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
					continue;
				name = elf_strptr(e, sh.sh_link, sym.st_name);
				if (!name || strncmp(name, func, flen) ||
				    (name[flen] && name[flen] != '@'))
					continue;
				vaddr = sym.st_value;
				found = true;
				break;
			}
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
	if (!u->files || !u->pids) {
		uprobes__free(u);
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

/*
 * Removing a uprobe makes the kernel wait for RCU grace periods (0.3-2 s per
 * probe measured on a VM: 22 probes took 9 s to detach one by one), so links
 * are destroyed by one thread each, all at once: concurrent waits share the
 * grace periods.
 */
static void *destroy_one(void *l)
{
	bpf_link__destroy(l);
	return NULL;
}

static void destroy_links(struct bpf_link **links, size_t n)
{
	pthread_t *t = calloc(n, sizeof(*t));
	bool *started = calloc(n, sizeof(*started));

	for (size_t i = 0; i < n; i++) {
		if (!links[i])
			continue;
		if (t && started && !pthread_create(&t[i], NULL, destroy_one, links[i]))
			started[i] = true;
		else
			bpf_link__destroy(links[i]);
	}
	for (size_t i = 0; t && started && i < n; i++)
		if (started[i])
			pthread_join(t[i], NULL);
	free(t);
	free(started);
}

struct reap {
	struct uprobes *u;
	struct bpf_link **links;
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
	struct reap *r = wait ? NULL : malloc(sizeof(*r));
	pthread_t t;

	if (r) {
		*r = (struct reap){ .u = u, .links = up->links, .n = up->nlinks };
		__atomic_add_fetch(&u->reapers, 1, __ATOMIC_ACQUIRE);
		if (!pthread_create(&t, NULL, reap, r)) {
			pthread_detach(t);
			up->links = NULL;
		} else {
			__atomic_sub_fetch(&u->reapers, 1, __ATOMIC_RELEASE);
			free(r);
		}
	}
	if (up->links)
		destroy_links(up->links, up->nlinks);
	free(up->links);
	free(up->objs);
	free(up);
}

void uprobes__free(struct uprobes *u)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!u)
		return;
	struct bpf_link **all = NULL;
	size_t n = 0, cap = 0;

	/* every link at once (see destroy_links) */
	while (u->files && (e = htab__next(u->files, &it))) {
		struct ufile *f = (struct ufile *)(uintptr_t)e->val;

		for (size_t i = 0; f->links && i < u->nspecs; i++) {
			if (!f->links[i])
				continue;
			if (n == cap) {
				struct bpf_link **a =
					realloc(all, (cap = cap ? 2 * cap : 64) * sizeof(*a));

				if (!a) {
					bpf_link__destroy(f->links[i]);
					continue;
				}
				all = a;
			}
			all[n++] = f->links[i];
		}
		free(f->links);
		free(f->offs);
		free(f);
	}
	it = 0;
	while (u->pids && (e = htab__next(u->pids, &it))) {
		struct upid *up = (struct upid *)(uintptr_t)e->val;
		struct bpf_link **a = realloc(all, (n + up->nlinks) * sizeof(*a));

		if (a) {
			all = a;
			memcpy(all + n, up->links, up->nlinks * sizeof(*a));
			n += up->nlinks;
			up->nlinks = 0;
		}
		free_upid(u, up, true);
	}
	destroy_links(all, n);
	free(all);
	/* exited processes' links still being destroyed */
	for (int i = 0; i < 6000 && __atomic_load_n(&u->reapers, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	htab__free(u->files);
	htab__free(u->pids);
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
	if (o && (o->fd < 0 || !u->match(o, u->arg)))
		return NULL;
	if (o)
		snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", o->fd);
	else
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
			} else if (u->specs[i].place) {
				u->specs[i].place(fd, &f->offs[i]);
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

static struct bpf_link *attach(struct uprobes *u, const struct ufile *f, size_t i, int pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = u->specs[i].retprobe);
	struct bpf_link *l;

	l = bpf_program__attach_uprobe_opts(u->specs[i].prog, pid, f->path, f->offs[i], &opts);
	if (!l) {
		u->st.attach_failed++;
		pr_debug("%s: cannot attach %s in %s (pid %d): %s", u->name, u->specs[i].func,
			 f->path, pid, strerror(errno));
		return NULL;
	}
	u->st.probes++;
	return l;
}

/* Whole-machine mode: probe the file for everyone, once. */
static void attach_all(struct uprobes *u, struct ufile *f)
{
	for (size_t i = 0; i < u->nspecs; i++)
		if (f->offs[i] != NO_OFFSET && !f->links[i])
			f->links[i] = attach(u, f, i, -1);
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
	for (size_t i = 0; i < u->nspecs; i++) {
		struct bpf_link *l;

		if (f->offs[i] == NO_OFFSET)
			continue;
		l = attach(u, f, i, pid);
		if (!l)
			continue;
		if (up->nlinks == up->cap) {
			uint32_t cap = up->cap ? up->cap * 2 : 16;
			struct bpf_link **ls = realloc(up->links, cap * sizeof(*ls));

			if (!ls) {
				bpf_link__destroy(l);
				continue;
			}
			up->links = ls;
			up->cap = cap;
		}
		up->links[up->nlinks++] = l;
	}
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

int uprobes__add_path(struct uprobes *u, const char *path)
{
	struct ufile *f = get_file(u, NULL, path);

	if (!f)
		return -ENOENT;
	for (size_t i = 0; i < u->nspecs; i++)
		if (f->offs[i] != NO_OFFSET && !f->links[i])
			f->links[i] = attach(u, f, i, -1);
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
