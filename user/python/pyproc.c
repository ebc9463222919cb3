// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pyproc: is a mapped ELF file a CPython, which one, and which native thread
 * runs which PyThreadState.
 *
 * The version comes from the target itself where it says it: 3.13+ start
 * _PyRuntime with _Py_DebugOffsets, 3.11+ export Py_Version. 3.8-3.10 say
 * nothing at run time; their minor version comes from the file name and,
 * independently, from the C API the file exports (Py_IsNone is new in 3.10,
 * PyFrame_GetCode in 3.9, PyVectorcall_Call in 3.8); the two must agree.
 * In every version, a live interpreter's first thread state must point back
 * at its interpreter through the offsets chosen, or the layout is refused.
 *
 * Thread ids: 3.11+ keep the kernel tid in PyThreadState.native_thread_id.
 * 3.8-3.10 keep only thread_id, the pthread_t, which with glibc and musl is
 * the address of the thread's struct pthread; its tid field sits at an
 * offset fixed per libc (0x2d0 in x86-64 glibc 2.x). Which libc's offset
 * holds is proven against the process's real tasks, never guessed.
 * PyThreadState ids are those of the target's pid namespace; they are
 * translated to this side's tids through /proc/PID/task/TID/status NSpid.
 */
#include <ctype.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/proc.h"
#include "python/pyimpl.h"
#include "util/log.h"
#include "util/procfs.h"

/* Bounds of the walks over the target's lists. */
#define MAX_INTERPS 64
#define MAX_TSTATES 4096
#define MAX_TASKS   4096
/* PyThreadState's fields we read are within its first bytes (176 at most). */
#define TSTATE_READ_MAX 1024
/* Threads whose struct pthread is read to prove the tid offset. */
#define PTHREAD_SCAN_THREADS 32

static const char *const sym_names[PYSYM__MAX] = {
	"_PyRuntime", "Py_Version", "Py_IsNone", "PyFrame_GetCode", "PyVectorcall_Call",
};

static void scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct pyfile *s)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n, k;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_name)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (name[0] != '_' && name[0] != 'P'))
			continue;
		for (k = 0; k < PYSYM__MAX; k++) {
			if (!(s->found & (1u << k)) && !strcmp(name, sym_names[k])) {
				s->found |= 1u << k;
				s->addr[k] = sym.st_value;
			}
		}
	}
}

/* Where each PT_LOAD segment's file bytes land (pyproc__vaddr). */
static void read_loads(Elf *elf, struct pyfile *s)
{
	size_t i, n;

	if (elf_getphdrnum(elf, &n))
		return;
	for (i = 0; i < n && s->nloads < PYFILE_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		s->loads[s->nloads].off = ph.p_offset;
		s->loads[s->nloads].filesz = ph.p_filesz;
		s->loads[s->nloads].vaddr = ph.p_vaddr;
		s->loads[s->nloads].flags = ph.p_flags;
		s->nloads++;
	}
}

/* .dynsym first (always there for the exported API), then .symtab. */
int pyproc__file(int fd, struct pyfile *s)
{
	static const Elf64_Word types[] = { SHT_DYNSYM, SHT_SYMTAB };
	Elf *elf;
	size_t t;

	memset(s, 0, sizeof(*s));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOENT;
	if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64) {
		elf_end(elf);
		return -ENOENT;
	}
	for (t = 0; t < 2; t++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) && sh.sh_type == types[t])
				scan_symtab(elf, scn, &sh, s);
		}
	}
	read_loads(elf, s);
	elf_end(elf);
	return s->found & (1u << PYSYM_RUNTIME) ? 0 : -ENOENT;
}

int pyproc__vaddr(const struct pyfile *f, uint64_t pgoff, uint64_t *vaddr)
{
	const uint64_t page = 4096;
	uint32_t i;

	for (i = 0; i < f->nloads; i++) {
		uint64_t lo = f->loads[i].off & ~(page - 1),
			 hi = f->loads[i].off + f->loads[i].filesz;

		if (pgoff >= lo && pgoff < hi) {
			*vaddr = f->loads[i].vaddr - f->loads[i].off + pgoff;
			return 0;
		}
	}
	return -ENOENT;
}

/* "libpython3.9.so.1.0", "python3.10", "libpython3.8d.so": the minor, or -1. */
static int minor_from_name(const char *path)
{
	const char *base, *p;
	int minor = 0, digits = 0;

	if (!path)
		return -1;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (!strncmp(base, "lib", 3))
		base += 3;
	if (strncmp(base, "python3.", 8))
		return -1;
	for (p = base + 8; isdigit((unsigned char)*p) && digits < 3; p++, digits++)
		minor = minor * 10 + (*p - '0');
	if (!digits || isdigit((unsigned char)*p))
		return -1;
	return minor;
}

static int minor_from_api(const struct pyfile *s)
{
	if (s->found & (1u << PYSYM_API_310))
		return 10;
	if (s->found & (1u << PYSYM_API_39))
		return 9;
	if (s->found & (1u << PYSYM_API_38))
		return 8;
	return -1;
}

/* 3.8-3.10: no version in memory; name and exported API must agree. */
static int version_without_runtime_info(const char *path, const struct pyfile *s, uint32_t *version)
{
	int by_name = minor_from_name(path), by_api = minor_from_api(s), minor;

	if (by_name >= 0 && by_api >= 0 && by_name != by_api) {
		pr_debug("%s: named 3.%d but exports the API of 3.%d", path, by_name, by_api);
		return -EINVAL;
	}
	minor = by_name >= 0 ? by_name : by_api;
	if (minor < 0)
		return -ENOTSUP; /* 3.7 or older: has _PyRuntime, no known API marker */
	/* Micro and release level are unknown: 3.X.0 final stands for any 3.X. */
	*version = PYVER(3, minor) | 0xf0;
	return 0;
}

/*
 * A live interpreter (after Py_Initialize) has a thread state whose interp
 * points back at it: with the wrong offsets, that is not so. Before
 * initialisation there is nothing to check; the version decides alone.
 */
static int check_live(pid_t pid, const struct pyinfo *info)
{
	const struct pylayout *l = pyinfo__layout(info);
	uint64_t interp, ts, back;
	int err;

	err = pymem__read_u64(pid, info->runtime + l->rt_interp_head, &interp);
	if (err || !interp)
		return err;
	err = pymem__read_u64(pid, interp + l->is_threads_head, &ts);
	if (err == -ESRCH)
		return err;
	if (err)
		return -ENOTSUP;
	if (!ts)
		return 0;
	err = pymem__read_u64(pid, ts + l->ts_interp, &back);
	if (err == -ESRCH)
		return err;
	if (err || back != interp) {
		pr_debug("pid %d: CPython %#x: thread state %#llx does not point back at "
			 "interpreter %#llx: layout mismatch",
			 pid, info->version, (unsigned long long)ts, (unsigned long long)interp);
		return -ENOTSUP;
	}
	return 0;
}

/* What BPF needs to find a thread's state in the thread list itself (bpf_pyproc.ts_walk). */
static void walk_offsets(struct pyinfo *info)
{
	const struct pylayout *l = pyinfo__layout(info);

	info->bpf.runtime = info->runtime;
	info->bpf.rt_interp_head = l->rt_interp_head;
	info->bpf.is_threads_head = l->is_threads_head;
	info->bpf.ts_next = l->ts_next;
	info->bpf.ts_thread_id = l->ts_thread_id;
	info->bpf.ts_interp = l->ts_interp;
}

int pyproc__probe_file(pid_t pid, const struct pyfile *s, const char *path, uint64_t bias,
		       struct pyinfo *info)
{
	uint8_t dbg[PY_DEBUG_OFFSETS_MAX];
	uint32_t version;
	int err;

	memset(info, 0, sizeof(*info));
	if (!(s->found & (1u << PYSYM_RUNTIME)))
		return -ENOENT;
	info->runtime = s->addr[PYSYM_RUNTIME] + bias;

	err = pymem__read(pid, info->runtime, dbg, 8);
	if (err)
		return err;
	if (!memcmp(dbg, "xdebugpy", 8)) {
		err = pymem__read(pid, info->runtime, dbg, sizeof(dbg));
		if (err)
			return err;
		err = pyoffsets__from_debug(dbg, sizeof(dbg), info);
	} else if (s->found & (1u << PYSYM_VERSION)) {
		err = pymem__read(pid, s->addr[PYSYM_VERSION] + bias, &version, sizeof(version));
		if (err)
			return err;
		/* 3.13+ always carry the debug offsets: without them this is not 3.13+. */
		if (version < PYVER(3, 11) || version >= PYVER(3, 13))
			return -EINVAL;
		err = pyoffsets__from_table(version, info);
	} else {
		err = version_without_runtime_info(path, s, &version);
		if (!err)
			err = pyoffsets__from_table(version, info);
	}
	if (!err)
		err = check_live(pid, info);
	if (err) {
		uint64_t runtime = info->runtime;

		memset(info, 0, sizeof(*info));
		info->runtime = runtime;
		return err;
	}
	walk_offsets(info);
	return 0;
}

int pyproc__probe(pid_t pid, int fd, const char *path, uint64_t bias, struct pyinfo *info)
{
	struct pyfile s;
	int err;

	memset(info, 0, sizeof(*info));
	err = pyproc__file(fd, &s);
	if (err)
		return err;
	return pyproc__probe_file(pid, &s, path, bias, info);
}

/* The process's tasks: tid here, tid in the process's own pid namespace. */
struct task {
	uint32_t tid;
	uint32_t nstid;
};

struct tasks {
	struct task *v;
	size_t n;
};

struct tasks_ctx {
	struct tasks *t;
	pid_t pid;
	bool nested;
};

static int add_task(void *ctx, uint32_t tid)
{
	struct tasks_ctx *c = ctx;
	struct tasks *t = c->t;
	char path[64];

	if (t->n >= MAX_TASKS)
		return 1;
	t->v[t->n].tid = tid;
	t->v[t->n].nstid = tid;
	if (c->nested) {
		snprintf(path, sizeof(path), "/proc/%d/task/%u/status", c->pid, tid);
		t->v[t->n].nstid = procfs__nspid(path, 0);
	}
	t->n++;
	return 0;
}

static int read_tasks(pid_t pid, struct tasks *t)
{
	struct tasks_ctx c = { .t = t, .pid = pid };
	char path[64];
	int err;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	c.nested = procfs__nspid(path, 0) != (uint32_t)pid;
	t->v = calloc(MAX_TASKS, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	t->n = 0;
	err = proc__for_each_task((uint32_t)pid, add_task, &c);
	if (err < 0) {
		free(t->v);
		t->v = NULL;
		return err == -ENOENT ? -ESRCH : err;
	}
	return 0;
}

static uint32_t task_by_nstid(const struct tasks *t, uint32_t nstid)
{
	size_t i;

	for (i = 0; nstid && i < t->n; i++)
		if (t->v[i].nstid == nstid)
			return t->v[i].tid;
	return 0;
}

/* A PyThreadState as read: its id fields. */
struct tsread {
	uint64_t tstate;
	uint64_t pthread; /* thread_id */
	uint64_t native;  /* native_thread_id, 0 if none */
};

/*
 * offsetof(struct pthread, tid) in each libc we know, on x86-64: glibc 2.x;
 * musl 1.2 (self, dtv, prev, next, sysinfo, canary, tid); musl 1.1.
 */
static const size_t pthread_tid_offsets[] = { 0x2d0, 0x30, 0x38 };

/*
 * At off in their struct pthread, at least half of the threads (up to
 * PTHREAD_SCAN_THREADS; a thread that just ended may have left its state
 * behind) hold the id of one of the process's tasks, each a different one.
 */
static bool tid_offset_fits(pid_t pid, const struct tsread *ts, size_t n, const struct tasks *t,
			    size_t off)
{
	int32_t v, ids[PTHREAD_SCAN_THREADS];
	size_t i, j, tried = 0, hits = 0;

	for (i = 0; i < n && tried < PTHREAD_SCAN_THREADS; i++) {
		if (!ts[i].pthread)
			continue;
		tried++;
		if (pymem__read(pid, ts[i].pthread + off, &v, sizeof(v)) || v <= 0 ||
		    !task_by_nstid(t, (uint32_t)v))
			continue;
		for (j = 0; j < hits; j++)
			if (ids[j] == v)
				return false;
		ids[hits++] = v;
	}
	return hits && 2 * hits >= tried;
}

/* The libc's tid offset, proven on the threads themselves; -ENOENT when none fits. */
static int pthread_tid_offset(pid_t pid, const struct tsread *ts, size_t n, const struct tasks *t,
			      size_t *off)
{
	size_t i;

	for (i = 0; i < sizeof(pthread_tid_offsets) / sizeof(pthread_tid_offsets[0]); i++) {
		if (tid_offset_fits(pid, ts, n, t, pthread_tid_offsets[i])) {
			*off = pthread_tid_offsets[i];
			return 0;
		}
	}
	return -ENOENT;
}

static bool seen(const uint64_t *v, size_t n, uint64_t x)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static bool tstate_seen(const struct tsread *v, size_t n, uint64_t ts)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i].tstate == ts)
			return true;
	return false;
}

/*
 * Every thread state of every interpreter, at most MAX_TSTATES. A state that
 * does not point back at its interpreter, or one seen before (a cycle), ends
 * its list; an unreadable one too.
 */
static int walk_tstates(pid_t pid, const struct pyinfo *info, struct tsread *out, size_t *n)
{
	const struct pylayout *l = pyinfo__layout(info);
	uint64_t interps[MAX_INTERPS], interp, ts;
	int32_t span = l->ts_next;
	uint8_t buf[TSTATE_READ_MAX];
	size_t ninterp = 0;
	int err;

	/* One read per thread state: its fields we use are in its first bytes. */
	if (l->ts_interp > span)
		span = l->ts_interp;
	if (l->ts_thread_id > span)
		span = l->ts_thread_id;
	if (l->ts_native_id > span)
		span = l->ts_native_id;
	if (span < 0 || span + 8 > TSTATE_READ_MAX)
		return -EINVAL;
	*n = 0;
	err = pymem__read_u64(pid, info->runtime + l->rt_interp_head, &interp);
	if (err)
		return err;
	while (interp && ninterp < MAX_INTERPS && !seen(interps, ninterp, interp)) {
		interps[ninterp++] = interp;
		if (pymem__read_u64(pid, interp + l->is_threads_head, &ts))
			break;
		while (ts && *n < MAX_TSTATES && !tstate_seen(out, *n, ts)) {
			struct tsread *r = &out[*n];

			if (pymem__read(pid, ts, buf, (size_t)span + 8) ||
			    get_u64(buf, l->ts_interp) != interp)
				break;
			r->tstate = ts;
			r->pthread = get_u64(buf, l->ts_thread_id);
			r->native = l->ts_native_id >= 0 ? get_u64(buf, l->ts_native_id) : 0;
			ts = get_u64(buf, l->ts_next);
			(*n)++;
		}
		if (pymem__read_u64(pid, interp + l->is_next, &interp))
			break;
	}
	return 0;
}

int pyproc__threads(pid_t pid, const struct pyinfo *info, struct pythread *out, size_t max)
{
	const struct pylayout *l = pyinfo__layout(info);
	struct tasks tasks = { 0 };
	struct tsread *ts;
	size_t n, i, off = 0, w = 0;
	bool need_tasks;
	int err;

	if (!info->runtime || !l->instr)
		return -EINVAL;
	ts = calloc(MAX_TSTATES, sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	err = walk_tstates(pid, info, ts, &n);
	if (err)
		goto cleanup;

	/* Own-namespace native ids need nothing more; the rest need the task list. */
	need_tasks = l->ts_native_id < 0;
	if (!need_tasks) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/status", pid);
		need_tasks = procfs__nspid(path, 0) != (uint32_t)pid;
	}
	if (need_tasks && n) {
		err = read_tasks(pid, &tasks);
		if (err)
			goto cleanup;
		if (l->ts_native_id < 0) {
			err = pthread_tid_offset(pid, ts, n, &tasks, &off);
			if (err == -ENOENT) {
				err = 0;
				goto cleanup; /* no thread can be placed */
			}
			if (err)
				goto cleanup;
		}
	}

	for (i = 0; i < n && w < max; i++) {
		uint32_t nstid = (uint32_t)ts[i].native, tid;
		int32_t v;

		if (l->ts_native_id < 0) {
			if (!ts[i].pthread ||
			    pymem__read(pid, ts[i].pthread + off, &v, sizeof(v)) || v <= 0)
				continue;
			nstid = (uint32_t)v;
		}
		if (!nstid)
			continue; /* not bound to an OS thread yet */
		tid = need_tasks ? task_by_nstid(&tasks, nstid) : nstid;
		if (!tid)
			continue; /* gone, or not a thread of this process */
		out[w].tid = tid;
		out[w].tstate = ts[i].tstate;
		out[w].ident = ts[i].pthread;
		w++;
	}
	err = 0;
cleanup:
	free(tasks.v);
	free(ts);
	return err ? err : (int)w;
}

/*
 * The GIL: 3.8-3.11 keep it in _PyRuntime.ceval.gil; 3.12 in the interpreter
 * (interp->ceval.gil points at it). Offsets read with gdb from the pyenv
 * builds (ptype/o), last_holder then locked in each. 3.13+ say where in
 * _Py_DebugOffsets (pyoffsets.c: is_ceval_gil, gil_holder, gil_locked).
 */
int pyproc__gil(pid_t pid, struct pyinfo *info)
{
	const struct pylayout *l = pyinfo__layout(info);
	uint32_t minor = PYVER_MINOR(info->version);
	uint64_t interp = 0, gil = 0;
	int64_t rt_off = -1, interp_off = -1, holder = 8, locked = 16;
	int err;

	if (minor == PYVER(3, 8))
		rt_off = 0x488;
	else if (minor == PYVER(3, 9) || minor == PYVER(3, 10))
		rt_off = 0x168;
	else if (minor == PYVER(3, 11))
		rt_off = 0x170;
	else if (minor == PYVER(3, 12))
		interp_off = 0x180;
	else if (minor >= PYVER(3, 13) && l->is_ceval_gil > 0 && !l->free_threaded)
		interp_off = l->is_ceval_gil, holder = l->gil_holder, locked = l->gil_locked;
	else
		return -ENOTSUP;
	if (rt_off >= 0) {
		gil = info->runtime + rt_off - 8; /* last_holder is at +8 */
	} else {
		err = pymem__read_u64(pid, info->runtime + l->rt_interp_head, &interp);
		if (err)
			return err;
		if (!interp)
			return -EAGAIN;
		err = pymem__read_u64(pid, interp + interp_off, &gil);
		if (err)
			return err;
		if (!gil)
			return -EAGAIN;
	}
	info->bpf.gil_holder = gil + holder;
	info->bpf.gil_locked = gil + locked;
	return 0;
}
