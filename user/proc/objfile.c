// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "proc/objfile.h"
#include "symbolize/dwlines.h"
#include "symbolize/elfsym.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"
#include "util/tfile.h"

struct objtab {
	struct objfile **objs; /* by id - OBJ_FIRST */
	uint32_t n, cap;
	struct htab *by_file; /* struct file_key -> id */
	struct objfile *vdso;
	struct objtab_stats st;
	struct membudget_cache lines; /* the objects' open DWARF (dwlines) */
	uint64_t lines_tick;
};

static size_t lines_evict(void *ctx, size_t want);

/* A file that keeps failing to open is not retried on every mapping of it. */
#define MAX_OPEN_TRIES 16

struct file_key {
	uint32_t dev_major, dev_minor;
	uint64_t ino;
};

struct objtab *objtab__new(void)
{
	struct objtab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->by_file = htab__new(1024, HTAB_COPY_KEYS);
	if (!t->by_file) {
		free(t);
		return NULL;
	}
	t->lines.name = "native lines";
	t->lines.evict = lines_evict;
	t->lines.ctx = t;
	membudget__add(&t->lines);
	return t;
}

static void objfile__free(struct objfile *o)
{
	if (!o)
		return;
	if (o->fd >= 0)
		close(o->fd);
	if (o->root_fd >= 0)
		close(o->root_fd);
	elfsym__free(o->syms);
	dwlines__free(o->dw);
	free(o->path);
	free(o);
}

void objtab__free(struct objtab *t)
{
	if (!t)
		return;
	membudget__remove(&t->lines);
	for (uint32_t i = 0; i < t->n; i++)
		objfile__free(t->objs[i]);
	free(t->objs);
	htab__free(t->by_file);
	free(t);
}

static struct objfile *add_obj(struct objtab *t, const char *path)
{
	struct objfile *o, **v;
	const char *slash;

	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;

		v = realloc(t->objs, cap * sizeof(*v));
		if (!v)
			return NULL;
		t->objs = v;
		t->cap = cap;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->path = strdup(path);
	if (!o->path) {
		free(o);
		return NULL;
	}
	slash = strrchr(o->path, '/');
	o->name = slash ? slash + 1 : o->path;
	o->fd = -1;
	o->root_fd = -1;
	o->id = OBJ_FIRST + t->n;
	t->objs[t->n++] = o;
	return o;
}

static bool same_file(int fd, uint32_t maj, uint32_t min, uint64_t ino)
{
	struct stat st;

	if (fstat(fd, &st))
		return false;
	/*
	 * maps shows the device of the superblock the inode lives on; overlayfs
	 * reports its own device in stat, so only the inode number is compared
	 * when the devices differ only because of that.
	 */
	if (st.st_ino != ino)
		return false;
	return (major(st.st_dev) == maj && minor(st.st_dev) == min) || maj == 0;
}

/* The root of pid as an O_PATH fd, or -1 when it is the host's own (or gone). */
static int foreign_root(uint32_t pid)
{
	struct stat a, b;
	int fd = tfile__root(pid);

	if (fd < 0)
		return -1;
	if (fstat(fd, &a) || stat("/", &b) || (a.st_dev == b.st_dev && a.st_ino == b.st_ino)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Through map_files while the process lives (deleted files, other mount
 * namespaces); else by path inside its root, or once it is gone in ours,
 * taken only when device and inode are the ones it mapped. Every open goes
 * through tfile: a regular file, never a FIFO or device, never blocking.
 */
static void open_obj(struct objtab *t, struct objfile *o, uint32_t pid, uint64_t start,
		     uint64_t end)
{
	char p[PATH_MAX + 64];
	int fd, root;

	snprintf(p, sizeof(p), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	fd = tfile__open_link(p, NULL);
	root = foreign_root(pid);
	if (fd < 0 && o->path[0] == '/') {
		fd = tfile__open(root, o->path, NULL);
		if (fd >= 0 && !same_file(fd, o->dev_major, o->dev_minor, o->ino)) {
			/* replaced on disk since it was mapped: its symbols would lie */
			close(fd);
			fd = -ESTALE;
		}
		if (fd >= 0)
			t->st.by_path++;
	}
	if (fd < 0) {
		if (root >= 0)
			close(root);
		o->open_err = fd;
		t->st.open_failed++;
		pr_debug("cannot open %s of pid %u: %s", o->path, pid, strerror(-fd));
		return;
	}
	o->open_err = 0;
	o->fd = fd;
	t->st.opened++;
	/* Debug files are looked up in the same root; the fd outlives the process. */
	if (o->root_fd >= 0)
		close(o->root_fd);
	o->root_fd = root;
	o->foreign = root >= 0;
}

struct objfile *objtab__get(struct objtab *t, uint32_t dev_major, uint32_t dev_minor, uint64_t ino,
			    const char *path, uint32_t pid, uint64_t start, uint64_t end)
{
	struct file_key k = { .dev_major = dev_major, .dev_minor = dev_minor, .ino = ino };
	struct htab_entry *e;
	struct objfile *o;
	int ret;

	ret = htab__upsert(t->by_file, &k, sizeof(k), htab__hash(&k, sizeof(k)), &e);
	if (ret < 0)
		return NULL;
	if (ret == 0) {
		o = t->objs[e->val - OBJ_FIRST];
		/*
		 * Closed once no live process mapped it, or never opened (its
		 * process was gone): this process maps it now, try again.
		 */
		if (o->fd < 0 && (o->closed || o->open_tries < MAX_OPEN_TRIES)) {
			if (!o->closed)
				o->open_tries++;
			open_obj(t, o, pid, start, end);
			if (o->fd >= 0)
				o->closed = false;
			if (o->fd >= 0 && !o->syms)
				o->loaded = false;
		}
		o->live = true;
		return o;
	}
	o = add_obj(t, path);
	if (!o) {
		htab__delete(t->by_file, &k, sizeof(k), e->hash);
		return NULL;
	}
	e->val = o->id;
	o->dev_major = dev_major;
	o->dev_minor = dev_minor;
	o->ino = ino;
	o->live = true;
	open_obj(t, o, pid, start, end);
	return o;
}

/* Copy our own vdso into a memfd so that elfsym can read it like a file. */
static int vdso_fd(void)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	FILE *f;
	char line[512];
	uint64_t s, e, len = 0;
	int fd;

	if (!base)
		return -ENOENT;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "[vdso]") && sscanf(line, "%" SCNx64 "-%" SCNx64, &s, &e) == 2 &&
		    s == base) {
			len = e - s;
			break;
		}
	}
	fclose(f);
	if (!len)
		return -ENOENT;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, (void *)base, len) != (ssize_t)len) {
		close(fd);
		return -EIO;
	}
	return fd;
}

struct objfile *objtab__vdso(struct objtab *t)
{
	if (t->vdso)
		return t->vdso;
	t->vdso = add_obj(t, "[vdso]");
	if (!t->vdso)
		return NULL;
	t->vdso->fd = vdso_fd();
	if (t->vdso->fd < 0) {
		t->vdso->open_err = t->vdso->fd;
		t->vdso->fd = -1;
	}
	return t->vdso;
}

struct objfile *objtab__by_id(const struct objtab *t, uint32_t id)
{
	if (id < OBJ_FIRST || id - OBJ_FIRST >= t->n)
		return NULL;
	return t->objs[id - OBJ_FIRST];
}

uint32_t objtab__count(const struct objtab *t)
{
	return t->n;
}

static void load_syms(struct objfile *o)
{
	struct elfsym_opts opts = { .has_root_fd = true, .root_fd = o->root_fd };
	int err;

	o->loaded = true;
	if (o->fd < 0) {
		o->load_err = o->open_err ? o->open_err : -ENOENT;
		return;
	}
	err = elfsym__open(&o->syms, o->fd, o->path[0] == '/' ? o->path : NULL, &opts);
	if (err) {
		o->load_err = err;
		o->syms = NULL;
		pr_debug("no symbols for %s: %s", o->path, strerror(-err));
	} else {
		pr_debug("%s: %zu symbols from %s", o->path, elfsym__count(o->syms),
			 elfsym__source(o->syms));
	}
	/* the fd stays: unwind tables and Python probing read the file too */
}

int objfile__symbolize(struct objfile *obj, uint64_t file_off, const char **name, uint64_t *vaddr)
{
	*name = NULL;
	*vaddr = file_off;
	if (!obj->loaded)
		load_syms(obj);
	if (!obj->syms)
		return obj->load_err ? obj->load_err : -ENOENT;
	if (elfsym__offset_to_vaddr(obj->syms, file_off, vaddr))
		*vaddr = file_off;
	*name = elfsym__lookup(obj->syms, *vaddr, NULL);
	return 0;
}

void objfile__note_mapping(struct objfile *o, uint64_t start, uint64_t end, uint64_t pgoff)
{
	if (!o || o->has_map || end <= start)
		return;
	o->map_start = start;
	o->map_end = end;
	o->map_pgoff = pgoff;
	o->has_map = true;
}

bool objfile__executable(struct objfile *o)
{
	if (!o->loaded)
		load_syms(o);
	return elfsym__executable(o->syms);
}

static void lines_drop(struct objtab *t, struct objfile *o)
{
	membudget__charge(&t->lines, -(long long)dwlines__bytes(o->dw));
	dwlines__free(o->dw);
	o->dw = NULL;
}

/* Least recently used first, until want bytes are back. */
static size_t lines_evict(void *ctx, size_t want)
{
	struct objtab *t = ctx;
	size_t freed = 0;

	while (freed < want) {
		struct objfile *lru = NULL;

		for (uint32_t i = 0; i < t->n; i++)
			if (t->objs[i]->dw && (!lru || t->objs[i]->dw_used < lru->dw_used))
				lru = t->objs[i];
		if (!lru)
			break;
		freed += dwlines__bytes(lru->dw);
		lines_drop(t, lru);
		t->lines.evicted++;
	}
	return freed;
}

/* An fd of o's file: its own (dup), or once closed, by path in the host's root. */
static int lines_file_fd(struct objfile *o)
{
	int fd;

	if (o->fd >= 0)
		return o->fd;
	if (o->foreign || o->path[0] != '/')
		return -ENOENT;
	fd = tfile__open(-1, o->path, NULL);
	if (fd >= 0 && !same_file(fd, o->dev_major, o->dev_minor, o->ino)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int objtab__lines(struct objtab *t, struct objfile *o, uint64_t vaddr, struct dwline *out)
{
	struct elfsym_opts opts = { .has_root_fd = true, .root_fd = o->root_fd };
	int fd, dfd, err;

	if (!o->dw) {
		if (o->lines_err)
			return o->lines_err;
		fd = lines_file_fd(o);
		if (fd < 0)
			return fd;
		dfd = elfsym__dwarf_fd(fd, o->path[0] == '/' ? o->path : NULL, &opts);
		if (fd != o->fd)
			close(fd);
		/* one object may take half the budget, no more */
		err = dfd < 0 ? dfd : dwlines__open(&o->dw, dfd, membudget__get() / 2);
		if (err) {
			if (err != -ENOMEM)
				o->lines_err = err;
			pr_debug("no source lines for %s: %s", o->path, strerror(-err));
			return err;
		}
		pr_debug("%s: source lines, %zu bytes of DWARF", o->path, dwlines__bytes(o->dw));
		o->dw_used = ++t->lines_tick;
		/* over budget, others go first (LRU); one larger than the budget goes too */
		membudget__charge(&t->lines, (long long)dwlines__bytes(o->dw));
	}
	o->dw_used = ++t->lines_tick;
	return o->dw ? dwlines__lookup(o->dw, vaddr, out) : -ENOENT;
}

const char *objfile__build_id(struct objfile *obj)
{
	const char *b;

	if (!obj->loaded)
		load_syms(obj);
	if (!obj->syms)
		return NULL;
	b = elfsym__build_id(obj->syms);
	return b && *b ? b : NULL;
}

void objtab__mark_unused(struct objtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		t->objs[i]->live = false;
	if (t->vdso)
		t->vdso->live = true;
}

void objfile__mark_used(struct objtab *t, uint32_t id)
{
	struct objfile *o = objtab__by_id(t, id);

	if (o)
		o->live = true;
}

size_t objtab__close_unused(struct objtab *t)
{
	size_t n = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		struct objfile *o = t->objs[i];

		if (o->live || o->fd < 0)
			continue;
		/* what samples already named must still be named: symbols first */
		if (!o->loaded)
			load_syms(o);
		close(o->fd);
		o->fd = -1;
		o->closed = true;
		if (o->root_fd >= 0)
			close(o->root_fd);
		o->root_fd = -1;
		n++;
	}
	t->st.closed += n;
	return n;
}

const struct objtab_stats *objtab__stats(const struct objtab *t)
{
	return &t->st;
}
