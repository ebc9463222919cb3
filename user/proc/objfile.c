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
#include "symbolize/debuginfod.h"
#include "symbolize/dwlines.h"
#include "symbolize/elfsym.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"
#include "util/tfile.h"

struct symmemo {
	uint64_t off, vaddr;
	uint64_t func;	  /* no symbol there: its function's start by the CFI, 0: none */
	const char *name; /* in the memo's own pool; NULL: no symbol there */
	const char *file; /* source file (memo_lines), in the pool; NULL: none */
	uint32_t line, start_line;
};

struct objtab {
	struct objfile **objs; /* by id - OBJ_FIRST */
	uint32_t n, cap;
	struct htab *by_file; /* struct file_key -> id */
	struct objfile *vdso;
	struct objtab_stats st;
	struct membudget_cache lines; /* the objects' open DWARF (dwlines) */
	uint64_t lines_tick;
	struct membudget_cache mb_syms; /* symbol tables: evicted least recently used first */
	struct membudget_cache mb_objs; /* the objects themselves, paths, memos: reported */
	uint64_t tick;			/* last_use clock */
	struct objfile *busy;		/* being loaded: never its own victim */
	void (*frames_fn)(void *ctx, objtab_visit_fn visit, void *arg);
	void *frames_ctx;
	struct dinfod *dinfod; /* debuginfod's fetches (objtab__set_debuginfod), or NULL */
	uint64_t dinfod_wait_ns;
	uint64_t dinfod_late; /* still coming when the end's wait was over */
	bool dinfod_waited;
	elfsym_functions_fn functions; /* objtab__set_functions */
};

static size_t lines_evict(void *ctx, size_t want);
static size_t syms_evict(void *ctx, size_t want);
static void close_fds(struct objtab *t, struct objfile *o);
static void load_syms(struct objfile *o);
static size_t drop_syms(struct objtab *t, struct objfile *o);
static void drop_memo(struct objtab *t, struct objfile *o);

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
	t->mb_syms =
		(struct membudget_cache){ .name = "elf symbols", .evict = syms_evict, .ctx = t };
	t->mb_objs = (struct membudget_cache){ .name = "mapped files" };
	membudget__add(&t->mb_syms);
	membudget__add(&t->mb_objs);
	return t;
}

static void objfile__free(struct objtab *t, struct objfile *o)
{
	if (!o)
		return;
	close_fds(t, o);
	if (o->debug_fd >= 0) {
		close(o->debug_fd);
		t->st.fds--;
	}
	elfsym__free(o->syms);
	dwlines__free(o->dw);
	free(o->build_id);
	free(o->memo);
	free(o->path);
	free(o);
}

void objtab__free(struct objtab *t)
{
	if (!t)
		return;
	dinfod__free(t->dinfod);
	membudget__remove(&t->lines);
	membudget__remove(&t->mb_syms);
	membudget__remove(&t->mb_objs);
	for (uint32_t i = 0; i < t->n; i++)
		objfile__free(t, t->objs[i]);
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
	o->debug_fd = -1;
	o->tab = t;
	o->last_use = ++t->tick;
	o->id = OBJ_FIRST + t->n;
	t->objs[t->n++] = o;
	t->mb_objs.entries++;
	membudget__charge(&t->mb_objs, sizeof(*o) + strlen(path) + 1 + sizeof(*v));
	return o;
}

/*
 * The device of the superblock of the mount fd was opened through, as
 * /proc/PID/mountinfo (pid 0: ours) gives it, or 0: the device maps shows
 * for an overlayfs file whose layers are on several file systems (stat
 * then gives the layer's own pseudo-device).
 */
static dev_t mount_dev(int fd, uint32_t pid)
{
	struct statx stx;
	char path[64], line[4096];
	unsigned long long id;
	unsigned int maj, min;
	dev_t dev = 0;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		return 0;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%u/mountinfo", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/mountinfo");
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llu %*u %u:%u", &id, &maj, &min) == 3 && id == stx.stx_mnt_id) {
			dev = makedev(maj, min);
			break;
		}
	fclose(f);
	return dev;
}

/*
 * Whether fd is the file a process mapped (maps' device and inode), the
 * device always compared: inode numbers repeat across file systems (every
 * fresh tmpfs numbers its first file 2), so a user's tmpfs library was once
 * taken for a root-only one of the same inode elsewhere. Where stat's device
 * differs from maps' (overlayfs over several file systems reports a layer's
 * pseudo-device), the device of the mount fd was opened through is asked
 * (pid: whose mount namespace that is, 0: ours).
 */
static bool same_file(int fd, uint32_t pid, uint32_t maj, uint32_t min, uint64_t ino)
{
	struct stat st;

	if (fstat(fd, &st) || st.st_ino != ino)
		return false;
	if (major(st.st_dev) == maj && minor(st.st_dev) == min)
		return true;
	return mount_dev(fd, pid) == makedev(maj, min);
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

/* fds o holds (its file, its root) */
static uint32_t fds_of(const struct objfile *o)
{
	return (o->fd >= 0) + (o->root_fd >= 0);
}

static void close_fds(struct objtab *t, struct objfile *o)
{
	t->st.fds -= fds_of(o);
	if (o->fd >= 0)
		close(o->fd);
	if (o->root_fd >= 0)
		close(o->root_fd);
	o->fd = -1;
	o->root_fd = -1;
}

static int fd_used_cmp(const void *pa, const void *pb)
{
	const struct objfile *a = *(struct objfile *const *)pa, *b = *(struct objfile *const *)pb;

	return a->fd_used < b->fd_used ? -1 : a->fd_used > b->fd_used;
}

/*
 * Past the cap, the least recently used fds of files are closed (their
 * symbols stay), down to 7/8 of it so that this runs once per cap/8 opens.
 * keep: the file just opened. Pinned files and the vdso (a memfd) stay.
 */
static void enforce_fd_cap(struct objtab *t, const struct objfile *keep)
{
	uint32_t target = t->st.fd_cap - t->st.fd_cap / 8, k = 0;
	struct objfile **v;

	if (!t->st.fd_cap || t->st.fds <= t->st.fd_cap)
		return;
	v = malloc(t->n * sizeof(*v));
	if (!v)
		return;
	for (uint32_t i = 0; i < t->n; i++) {
		struct objfile *o = t->objs[i];

		if (o->fd >= 0 && o != keep && !o->pinned && o != t->vdso)
			v[k++] = o;
	}
	qsort(v, k, sizeof(*v), fd_used_cmp);
	for (uint32_t i = 0; i < k && t->st.fds > target; i++) {
		/*
		 * What samples named must stay nameable if its processes exit
		 * before it is opened again (a deleted library cannot be):
		 * symbols first, as for files closed at an exit.
		 */
		if (!v[i]->loaded && v[i]->sampled)
			load_syms(v[i]);
		close_fds(t, v[i]);
		v[i]->parked = true;
		t->st.parked++;
	}
	free(v);
}

void objtab__set_fd_cap(struct objtab *t, uint32_t cap)
{
	t->st.fd_cap = cap;
	enforce_fd_cap(t, NULL);
}

/*
 * Through map_files while the process lives (deleted files, other mount
 * namespaces); else by path inside its root, or once it is gone in ours,
 * taken only when device and inode are the ones it mapped. Every open goes
 * through tfile: a regular file, never a FIFO or device, never blocking.
 * A reopen (the fd cap closed it) checks the inode of map_files too: the
 * pid may have been reused since. Returns 0 or -errno.
 */
static int open_obj(struct objtab *t, struct objfile *o, uint32_t pid, uint64_t start, uint64_t end,
		    bool reopen)
{
	char p[PATH_MAX + 64];
	struct stat st;
	int fd, root;

	snprintf(p, sizeof(p), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	fd = tfile__open_link(p, &st);
	if (reopen && fd >= 0 && !same_file(fd, pid, o->dev_major, o->dev_minor, o->ino)) {
		close(fd);
		fd = -ESTALE;
	}
	root = foreign_root(pid);
	if (fd < 0 && o->path[0] == '/') {
		fd = tfile__open(root, o->path, NULL);
		if (fd >= 0 &&
		    !same_file(fd, root >= 0 ? pid : 0, o->dev_major, o->dev_minor, o->ino)) {
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
		if (!reopen)
			t->st.open_failed++;
		pr_debug("cannot open %s of pid %u: %s", o->path, pid, strerror(-fd));
		return fd;
	}
	o->open_err = 0;
	if (o->fd >= 0 || o->root_fd >= 0)
		close_fds(t, o);
	o->fd = fd;
	t->st.opened++;
	/* Debug files are looked up in the same root; the fd outlives the process. */
	o->root_fd = root;
	o->foreign = root >= 0;
	o->parked = false;
	o->fd_used = ++t->tick;
	t->st.fds += fds_of(o);
	enforce_fd_cap(t, o);
	if (t->st.fds > t->st.fds_peak)
		t->st.fds_peak = t->st.fds;
	return 0;
}

int objfile__fd(struct objfile *o)
{
	struct objtab *t = o->tab;

	if (o->fd < 0 && o->parked) {
		if (open_obj(t, o, o->last_pid, o->last_start, o->last_end, true)) {
			/* the mapping is gone: a file of exited processes, as close_unused makes */
			t->st.reopen_failed++;
			o->parked = false;
			o->closed = true;
			return -1;
		}
		t->st.reopened++;
	}
	if (o->fd >= 0)
		o->fd_used = ++t->tick;
	return o->fd;
}

void objfile__pin(struct objfile *o)
{
	o->pinned = true;
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
		o->last_pid = pid;
		o->last_start = start;
		o->last_end = end;
		/*
		 * Closed once no live process mapped it, or never opened (its
		 * process was gone): this process maps it now, try again.
		 */
		if (o->fd < 0 && !o->parked && (o->closed || o->open_tries < MAX_OPEN_TRIES)) {
			if (!o->closed)
				o->open_tries++;
			open_obj(t, o, pid, start, end, false);
			if (o->fd >= 0)
				o->closed = false;
			if (o->fd >= 0 && !o->syms)
				o->loaded = false;
		}
		o->live = true;
		o->last_use = ++t->tick;
		if (o->fd >= 0)
			o->fd_used = o->last_use;
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
	o->last_pid = pid;
	o->last_start = start;
	o->last_end = end;
	open_obj(t, o, pid, start, end, false);
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
	} else {
		t->st.fds++;
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
	struct objtab *t = o->tab;
	uint64_t c0;
	const char *b;
	int err;

	o->loaded = true;
	opts.has_debug_fd = o->debug_fd >= 0;
	opts.debug_fd = o->debug_fd;
	opts.functions = t->functions;
	c0 = thread_cpu_ns();
	if (objfile__fd(o) >= 0) {
		opts.root_fd =
			o->root_fd; /* opened again with the file when the fd cap closed it */
		err = elfsym__open(&o->syms, o->fd, o->path[0] == '/' ? o->path : NULL, &opts);
	} else if (o->debug_fd >= 0) {
		/* closed (its processes are gone): its debug file holds every symbol */
		opts.has_debug_fd = false;
		err = elfsym__open(&o->syms, o->debug_fd, NULL, &opts);
	} else {
		o->load_err = o->open_err ? o->open_err : -ENOENT;
		return;
	}
	t->st.syms_cpu_ns += thread_cpu_ns() - c0;
	t->st.syms_loaded++;
	if (err) {
		o->load_err = err;
		o->syms = NULL;
		pr_debug("no symbols for %s: %s", o->path, strerror(-err));
		return;
	}
	pr_debug("%s: %zu symbols from %s", o->path, elfsym__count(o->syms),
		 elfsym__source(o->syms));
	/* the fd stays: unwind tables and Python probing read the file too */
	b = elfsym__build_id(o->syms);
	if (!o->build_id && b && *b) {
		o->build_id = strdup(b);
		if (o->build_id)
			membudget__charge(&t->mb_objs, strlen(b) + 1);
	}
	o->is_exec = elfsym__executable(o->syms);
	o->info_known = true;
	if (o->evicted)
		t->st.syms_reread++;
	o->sym_bytes = elfsym__bytes(o->syms);
	t->mb_syms.entries++;
	t->busy = o;
	membudget__charge(&t->mb_syms, o->sym_bytes);
	t->busy = NULL;
}

static const struct symmemo *memo_find(const struct objfile *o, uint64_t off)
{
	uint32_t lo = 0, hi = o->nmemo;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (o->memo[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->nmemo && o->memo[lo].off == off ? &o->memo[lo] : NULL;
}

int objfile__symbolize(struct objfile *obj, uint64_t file_off, const char **name, uint64_t *vaddr)
{
	*name = NULL;
	*vaddr = file_off;
	obj->last_use = ++obj->tab->tick;
	if (!obj->syms && obj->nmemo) {
		const struct symmemo *m = memo_find(obj, file_off);

		if (m) {
			*name = m->name;
			*vaddr = m->vaddr;
			obj->memo_last = m; /* objtab__lines of this vaddr, next */
			return 0;
		}
	}
	if (!obj->loaded)
		load_syms(obj);
	if (!obj->syms && obj->evicted)
		obj->tab->st.syms_lost++;
	if (!obj->syms)
		return obj->load_err ? obj->load_err : -ENOENT;
	if (elfsym__offset_to_vaddr(obj->syms, file_off, vaddr))
		*vaddr = file_off;
	*name = elfsym__lookup(obj->syms, *vaddr, NULL);
	return 0;
}

int objfile__function(struct objfile *obj, uint64_t file_off, uint64_t *start)
{
	uint64_t vaddr;

	if (!obj->syms && obj->nmemo) {
		const struct symmemo *m = memo_find(obj, file_off);

		if (m) {
			*start = m->func;
			return m->func ? 0 : -ENOENT;
		}
	}
	if (!obj->loaded)
		load_syms(obj);
	if (!obj->syms)
		return -ENOENT;
	if (elfsym__offset_to_vaddr(obj->syms, file_off, &vaddr))
		vaddr = file_off;
	return elfsym__function(obj->syms, vaddr, start);
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
	if (!o->syms && o->info_known)
		return o->is_exec;
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

		/* not the file being named (objtab__name_frames): it would be opened again per frame */
		for (uint32_t i = 0; i < t->n; i++)
			if (t->objs[i]->dw && t->objs[i] != t->busy &&
			    (!lru || t->objs[i]->dw_used < lru->dw_used))
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

	if (objfile__fd(o) >= 0)
		return o->fd;
	if (o->foreign || o->path[0] != '/')
		return -ENOENT;
	fd = tfile__open(-1, o->path, NULL);
	if (fd >= 0 && !same_file(fd, 0, o->dev_major, o->dev_minor, o->ino)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int objtab__lines(struct objtab *t, struct objfile *o, uint64_t vaddr, struct dwline *out)
{
	struct elfsym_opts opts = { .has_root_fd = true,
				    .root_fd = o->root_fd,
				    .has_debug_fd = o->debug_fd >= 0,
				    .debug_fd = o->debug_fd };
	int fd, dfd, err;

	/* named file by file at the end of a run (objtab__name_frames): the line is kept */
	if (!o->dw && o->memo_lines && o->memo_last && o->memo_last->vaddr == vaddr) {
		if (!o->memo_last->file)
			return -ENOENT;
		*out = (struct dwline){ .file = o->memo_last->file,
					.line = o->memo_last->line,
					.start_line = o->memo_last->start_line };
		return 0;
	}
	if (!o->dw) {
		if (o->lines_err)
			return o->lines_err;
		fd = lines_file_fd(o);
		if (fd < 0 && o->debug_fd >= 0) {
			fd = o->debug_fd; /* closed: its debug file has the lines */
			opts.has_debug_fd = false;
		}
		if (fd < 0)
			return fd;
		opts.root_fd = o->root_fd;
		dfd = elfsym__dwarf_fd(fd, o->path[0] == '/' ? o->path : NULL, &opts);
		if (fd != o->fd && fd != o->debug_fd)
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
	if (!obj->build_id && !obj->loaded && !obj->info_known)
		load_syms(obj);
	return obj->build_id;
}

void objtab__mark_unused(struct objtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		t->objs[i]->live = false;
	if (t->vdso)
		t->vdso->live = true;
}

/*
 * Debug files that arrived: a file's symbols (and lines) are read again with
 * its own, its names from the memo of a closed file too.
 */
static void dinfod_apply(struct objtab *t)
{
	struct objfile *o;
	uint32_t id;
	int fd;

	while (dinfod__take(t->dinfod, &id, &fd)) {
		o = objtab__by_id(t, id);
		if (!o || o->debug_fd >= 0) {
			close(fd);
			continue;
		}
		o->debug_fd = fd;
		t->st.fds++;
		drop_syms(t, o);
		o->loaded = false;
		o->load_err = 0;
		if (o->nmemo && !o->memo_pending)
			drop_memo(t, o);
		if (o->dw)
			lines_drop(t, o);
		o->lines_err = 0;
		pr_debug("%s: debug file from debuginfod", o->path);
	}
}

void objtab__set_functions(struct objtab *t, elfsym_functions_fn fn)
{
	t->functions = fn;
}

void objtab__set_debuginfod(struct objtab *t, uint64_t wait_ns)
{
	t->dinfod = dinfod__new();
	t->dinfod_wait_ns = wait_ns;
}

void objtab__debuginfod_report(struct objtab *t)
{
	struct dinfod_stats st;

	if (!t->dinfod)
		return;
	dinfod__stats(t->dinfod, &st);
	pr_verbose(
		"debuginfod: %llu stripped files asked for, %llu debug files received (%.1f MiB), "
		"%llu not found, %llu failed; %llu not asked for (full symbols, or a debug file on "
		"the host); waited %.2f s at the end",
		(unsigned long long)(st.asked - st.skipped), (unsigned long long)st.found,
		st.bytes / 1048576.0, (unsigned long long)st.not_found,
		(unsigned long long)st.failed, (unsigned long long)st.skipped, st.wait_ns / 1e9);
}

uint64_t objtab__debuginfod_late(const struct objtab *t)
{
	return t->dinfod_late;
}

void objtab__sampled(struct objtab *t, uint32_t id)
{
	struct objfile *o = objtab__by_id(t, id);

	if (!o)
		return;
	if (t->dinfod) {
		dinfod_apply(t);
		/* the fetch decides: a file with its full symbols or no build id is not asked for */
		if (!o->debuginfod_asked && o->fd >= 0 && o != t->vdso) {
			o->debuginfod_asked = true;
			dinfod__want(t->dinfod, o->id, o->fd);
		}
	}
	o->sampled = true;
	/*
	 * Closed by the fd cap before samples named it: its process lives now
	 * (it was just sampled), so its symbols are read while the file can
	 * still be opened through it.
	 */
	if (o->parked && !o->loaded && !o->nmemo)
		load_syms(o);
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

		if (o->live || (o->fd < 0 && !o->parked))
			continue;
		/*
		 * What samples already named must still be named: symbols first
		 * (a file the fd cap closed had them read when it was closed or
		 * sampled; evicted since, its memo has the names)
		 */
		if (!o->loaded && o->sampled && !(o->parked && o->nmemo))
			load_syms(o);
		close_fds(t, o);
		o->parked = false;
		o->closed = true;
		n++;
	}
	t->st.closed += n;
	return n;
}

const struct objtab_stats *objtab__stats(const struct objtab *t)
{
	return &t->st;
}

/* Give o's symbol table back; what reads it next loads it again. */
static size_t drop_syms(struct objtab *t, struct objfile *o)
{
	size_t bytes = o->sym_bytes;

	if (!o->syms)
		return 0;
	elfsym__free(o->syms);
	o->syms = NULL;
	o->loaded = false;
	o->sym_bytes = 0;
	t->mb_syms.entries--;
	membudget__charge(&t->mb_syms, -(long long)bytes);
	return bytes;
}

static void drop_memo(struct objtab *t, struct objfile *o)
{
	free(o->memo);
	free(o->memo_pool);
	o->memo = NULL;
	o->memo_pool = NULL;
	o->memo_last = NULL;
	o->nmemo = 0;
	o->memo_lines = false;
	membudget__charge(&t->mb_objs, -(long long)o->memo_bytes);
	o->memo_bytes = 0;
}

struct frame_ref {
	uint32_t obj;
	uint64_t off;
};

struct collect {
	struct objtab *t;
	struct frame_ref *v;
	size_t n, cap;
	bool failed;
};

static void collect_push(struct collect *c, uint32_t obj, uint64_t off)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct frame_ref *v = realloc(c->v, cap * sizeof(*v));

		if (!v) {
			c->failed = true;
			return;
		}
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct frame_ref){ .obj = obj, .off = off };
}

static void memo_visit(void *arg, uint32_t obj, uint64_t off)
{
	struct collect *c = arg;
	struct objfile *o = objtab__by_id(c->t, obj);

	if (!o || !o->memo_pending || c->failed)
		return;
	/* the builder looks a caller up at return address - 1, then at it */
	collect_push(c, obj, off);
	if (off)
		collect_push(c, obj, off - 1);
}

static int ref_cmp(const void *pa, const void *pb)
{
	const struct frame_ref *a = pa, *b = pb;

	if (a->obj != b->obj)
		return a->obj < b->obj ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* Copy s into the growing pool; returns its offset + 1 (0: out of memory). */
static uintptr_t pool_add(char **pool, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*len + n > *cap) {
		size_t c = (*cap ? *cap * 2 : 4096) + n;
		char *p = realloc(*pool, c);

		if (!p)
			return 0;
		*pool = p;
		*cap = c;
	}
	memcpy(*pool + *len, s, n);
	*len += n;
	return *len - n + 1;
}

/*
 * The names of refs[0..n) (one object's distinct offsets, sorted) from its
 * symbols, kept; with lines, their source lines too (its DWARF, opened here
 * if need be). Strings go to one pool, consecutive repeats stored once.
 */
static void build_memo(struct objtab *t, struct objfile *o, const struct frame_ref *refs, size_t n,
		       bool lines)
{
	uintptr_t name_at = 0, file_at = 0;
	const char *prev = NULL, *nm;
	size_t plen = 0, pcap = 0;
	struct symmemo *m;
	struct dwline dl;
	char *pool = NULL;

	drop_memo(t, o);
	m = calloc(n ? n : 1, sizeof(*m));
	if (!m)
		return;
	for (size_t i = 0; i < n; i++) {
		m[i].off = refs[i].off;
		if (elfsym__offset_to_vaddr(o->syms, refs[i].off, &m[i].vaddr))
			m[i].vaddr = refs[i].off;
		nm = elfsym__lookup(o->syms, m[i].vaddr, NULL);
		if (nm && nm != prev && !(name_at = pool_add(&pool, &plen, &pcap, nm)))
			goto fail;
		prev = nm;
		m[i].name = nm ? (const char *)name_at : NULL;
		if (!nm && elfsym__function(o->syms, m[i].vaddr, &m[i].func))
			m[i].func = 0;
		if (!lines || !nm || objtab__lines(t, o, m[i].vaddr, &dl) || !dl.file)
			continue;
		if ((!file_at || strcmp(pool + file_at - 1, dl.file)) &&
		    !(file_at = pool_add(&pool, &plen, &pcap, dl.file)))
			goto fail;
		m[i].file = (const char *)file_at;
		m[i].line = dl.line;
		m[i].start_line = dl.start_line;
	}
	/* offsets into the pool (+ 1) become pointers now that it stopped moving */
	for (size_t i = 0; i < n; i++) {
		if (m[i].name)
			m[i].name = pool + (uintptr_t)m[i].name - 1;
		if (m[i].file)
			m[i].file = pool + (uintptr_t)m[i].file - 1;
	}
	o->memo = m;
	o->memo_pool = pool;
	o->nmemo = n;
	o->memo_lines = lines;
	o->memo_bytes = n * sizeof(*m) + pcap;
	membudget__charge(&t->mb_objs, o->memo_bytes);
	return;
fail:
	free(m);
	free(pool);
}

static int last_use_cmp(const void *pa, const void *pb)
{
	const struct objfile *a = *(struct objfile *const *)pa, *b = *(struct objfile *const *)pb;

	return a->last_use < b->last_use ? -1 : a->last_use > b->last_use;
}

/*
 * Least recently used symbol tables first. Those of files still open are
 * read again when needed; for a closed file (no process maps it: it may be
 * deleted, its container gone) the names of the frames the stacks hold are
 * kept first, from one pass over the stacks for all such victims.
 */
static size_t syms_evict(void *ctx, size_t want)
{
	struct objtab *t = ctx;
	struct collect c = { .t = t };
	struct objfile **v;
	size_t k = 0, nv, freed = 0;
	bool closed = false;

	v = malloc((t->n ? t->n : 1) * sizeof(*v));
	if (!v)
		return 0;
	for (uint32_t i = 0; i < t->n; i++)
		if (t->objs[i]->syms && t->objs[i] != t->busy)
			v[k++] = t->objs[i];
	qsort(v, k, sizeof(*v), last_use_cmp);
	for (nv = 0; nv < k && freed < want; nv++) {
		freed += v[nv]->sym_bytes;
		if (v[nv]->fd < 0) {
			v[nv]->memo_pending = true;
			closed = true;
		}
	}
	if (closed && t->frames_fn) {
		t->frames_fn(t->frames_ctx, memo_visit, &c);
		if (!c.failed) {
			qsort(c.v, c.n, sizeof(*c.v), ref_cmp);
			for (size_t i = 0, j; i < c.n; i = j) {
				size_t u = 0;

				/* one object's run, deduplicated in place */
				for (j = i; j < c.n && c.v[j].obj == c.v[i].obj; j++)
					if (j == i || c.v[j].off != c.v[i + u - 1].off)
						c.v[i + u++] = c.v[j];
				build_memo(t, objtab__by_id(t, c.v[i].obj), &c.v[i], u, false);
			}
		}
		free(c.v);
	}
	freed = 0;
	for (size_t i = 0; i < nv; i++) {
		v[i]->memo_pending = false;
		v[i]->evicted = true;
		freed += drop_syms(t, v[i]);
		t->mb_syms.evicted++;
		t->st.syms_evicted++;
	}
	free(v);
	return freed;
}

static void refs_unique(struct collect *c)
{
	size_t u = 0;

	qsort(c->v, c->n, sizeof(*c->v), ref_cmp);
	for (size_t i = 0; i < c->n; i++)
		if (!u || c->v[i].obj != c->v[u - 1].obj || c->v[i].off != c->v[u - 1].off)
			c->v[u++] = c->v[i];
	c->n = u;
}

/* Every frame, deduplicated as it goes: the vector holds at most twice the distinct ones. */
static void all_visit(void *arg, uint32_t obj, uint64_t off)
{
	struct collect *c = arg;

	if (c->failed || !objtab__by_id(c->t, obj))
		return;
	if (c->n + 2 > c->cap) {
		if (c->cap)
			refs_unique(c);
		/* grown when more than half is distinct: each sort is paid for by cap/2 pushes */
		if (c->n + 2 > c->cap / 2) {
			size_t cap = c->cap ? c->cap * 2 : 4096;
			struct frame_ref *v = realloc(c->v, cap * sizeof(*v));

			if (!v) {
				c->failed = true;
				return;
			}
			membudget__charge(&c->t->mb_objs, (long long)((cap - c->cap) * sizeof(*v)));
			c->v = v;
			c->cap = cap;
		}
	}
	/* the builder looks a caller up at return address - 1, then at it */
	c->v[c->n++] = (struct frame_ref){ .obj = obj, .off = off };
	if (off)
		c->v[c->n++] = (struct frame_ref){ .obj = obj, .off = off - 1 };
}

size_t objtab__name_frames(struct objtab *t, bool lines)
{
	struct collect c = { .t = t };
	size_t named = 0;

	if (!t->frames_fn)
		return 0;
	if (t->dinfod && !t->dinfod_waited) {
		struct dinfod_stats st;

		/* once, at the end: what is still coming gets a bounded wait */
		t->dinfod_waited = true;
		dinfod__wait(t->dinfod, t->dinfod_wait_ns);
		dinfod__stats(t->dinfod, &st);
		t->dinfod_late = st.pending;
		dinfod_apply(t);
	}
	t->frames_fn(t->frames_ctx, all_visit, &c);
	if (c.failed) {
		membudget__charge(&t->mb_objs, -(long long)(c.cap * sizeof(*c.v)));
		free(c.v);
		return 0;
	}
	refs_unique(&c);
	for (size_t i = 0, j; i < c.n; i = j) {
		struct objfile *o = objtab__by_id(t, c.v[i].obj);

		for (j = i; j < c.n && c.v[j].obj == c.v[i].obj; j++)
			;
		/* a closed file whose symbols were evicted kept its frames' names: not reopened */
		if (!o->syms && !o->loaded && !(o->fd < 0 && o->nmemo))
			load_syms(o);
		if (!o->syms)
			continue; /* none, or a closed file's memo from an eviction: kept */
		t->busy = o;	  /* the memo's line lookups charge the budget: not this one */
		build_memo(t, o, &c.v[i], j - i, lines);
		t->busy = NULL;
		if (o->dw)
			lines_drop(t, o);
		/* every name its frames need is in the memo now */
		drop_syms(t, o);
		named++;
	}
	membudget__charge(&t->mb_objs, -(long long)(c.cap * sizeof(*c.v)));
	free(c.v);
	return named;
}

void objtab__release(struct objtab *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		struct objfile *o = t->objs[i];

		drop_syms(t, o);
		if (o->nmemo)
			drop_memo(t, o);
		if (o->dw)
			lines_drop(t, o);
	}
}

size_t objtab__evict_syms(struct objtab *t, struct objfile *obj)
{
	uint64_t keep = obj->last_use;
	size_t freed;

	/* the least recently used of all, for a moment */
	obj->last_use = 0;
	freed = obj->syms ? syms_evict(t, 1) : 0;
	obj->last_use = keep;
	return freed;
}

void objtab__set_frames(struct objtab *t, void (*fn)(void *ctx, objtab_visit_fn visit, void *arg),
			void *ctx)
{
	t->frames_fn = fn;
	t->frames_ctx = ctx;
}

void objtab__interval(struct objtab *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		struct objfile *o = t->objs[i];

		o->sampled = false; /* the stacks were emptied */
		if (o->nmemo)
			drop_memo(t, o);
		if (o->fd < 0 && o != t->vdso)
			drop_syms(t, o);
	}
}
