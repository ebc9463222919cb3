// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap coverage per process (alloc_cover.h): the state of each target
 * process, what its exec'd image is (read from /proc at its exec mark: the
 * executable, its auxv, its environment), the fallback to uprobes, and the
 * summary's words for what was not covered.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bpfprof.h"
#include "collect/alloc_cover.h"
#include "collect/recorder.h"
#include "collect/uprobes.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/tfile.h"

/* Processes named in the summary (the counts cover all of them). */
#define MAX_NAMED 6

struct cov {
	enum cover_state state;
	enum cover_why why;
	uint64_t exec_ns;   /* its image began (0: before us, or unknown) */
	uint64_t exec_cpu;  /* its leader's CPU time then (ns) ... */
	bool cpu_known;	    /* ... when known (BPF's marks) */
	uint64_t probed_ns; /* uprobes attached */
	uint64_t ran_ns;    /* CPU it had had since its exec when probed */
	bool late;	    /* its allocator was mapped before the probes: early calls missed */
	bool exited;
	char comm[17];
};

struct cover {
	struct cover_ops ops;
	dev_t lib_dev;
	ino_t lib_ino;
	bool uprobes_only;
	struct htab *procs; /* pid -> struct cov * */
};

static const char *const why_words[WHY_MAX] = {
	[WHY_NONE] = "",
	[WHY_UPROBES_ASKED] = "uprobes asked for",
	[WHY_STATIC] = "a static executable (no loader to preload the sampler)",
	[WHY_OWN_MALLOC] = "its executable defines malloc (it comes before any preloaded one)",
	[WHY_SECURE] = "set-user-ID or with capabilities (the loader ignores LD_PRELOAD)",
	[WHY_NO_ENV] = ("started without the sampler in its environment (a raw execve, or by a "
			"program without it)"),
	[WHY_NOT_LOADED] = "its loader did not load the sampler its environment names",
	[WHY_FOREIGN_RATE] = "its environment set another sampling rate than bpfprof's",
	[WHY_EXITED] = "it ended before it could be probed",
	[WHY_NO_ALLOCATOR] = "no file it maps defines malloc",
};

const char *cover__why(enum cover_why why)
{
	return why < WHY_MAX ? why_words[why] : "?";
}

struct cover *cover__new(const struct cover_ops *ops, dev_t lib_dev, ino_t lib_ino,
			 bool uprobes_only)
{
	struct cover *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ops = *ops;
	c->lib_dev = lib_dev;
	c->lib_ino = lib_ino;
	c->uprobes_only = uprobes_only;
	c->procs = htab__new(64, HTAB_COPY_KEYS);
	if (!c->procs) {
		free(c);
		return NULL;
	}
	return c;
}

void cover__free(struct cover *c)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!c)
		return;
	while ((e = htab__next(c->procs, &it)))
		free((void *)(uintptr_t)e->val);
	htab__free(c->procs);
	free(c);
}

static struct cov *find(const struct cover *c, uint32_t pid)
{
	struct htab_entry *e =
		htab__find(c->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)));

	return e ? (struct cov *)(uintptr_t)e->val : NULL;
}

/* pid's entry, a fresh one (state COV_PENDING) if new or its image was replaced. */
static struct cov *get(struct cover *c, uint32_t pid, bool fresh)
{
	struct htab_entry *e;
	struct cov *v;
	int ret = htab__upsert(c->procs, &pid, sizeof(pid), htab__hash(&pid, sizeof(pid)), &e);

	if (ret < 0)
		return NULL;
	if (ret == 1) {
		v = calloc(1, sizeof(*v));
		if (!v) {
			htab__delete(c->procs, &pid, sizeof(pid), e->hash);
			return NULL;
		}
		e->val = (uintptr_t)v;
	}
	v = (struct cov *)(uintptr_t)e->val;
	if (fresh && ret == 0)
		*v = (struct cov){ 0 };
	return v;
}

/* A process names itself: nothing but printable ASCII into our stderr. */
static void set_comm(char *out, const char *comm)
{
	memcpy(out, comm, 16);
	out[16] = '\0';
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
}

static void read_comm(uint32_t pid, char *out)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, out, 16) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		n = 0;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	/* a process names itself: nothing but printable ASCII into our stderr */
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
}

/* The CPU time (ns) pid's leader has had (/proc/PID/schedstat), 0 if unknown. */
static uint64_t leader_cpu(uint32_t pid)
{
	char path[64], buf[96];
	unsigned long long ns = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/schedstat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return sscanf(buf, "%llu", &ns) == 1 ? ns : 0;
}

static void fall_back(struct cover *c, uint32_t pid, struct cov *v, enum cover_why why,
		      uint64_t now_ns)
{
	int ret = c->ops.fallback(c->ops.ctx, pid);
	uint64_t cpu = leader_cpu(pid);

	v->why = why;
	if (ret < 0) {
		v->state = COV_NONE;
		if (ret == -ESRCH)
			v->why = WHY_EXITED;
		return;
	}
	v->state = COV_UPROBES;
	v->probed_ns = now_ns;
	/*
	 * Late: its allocator was mapped already, so it may have called it
	 * before the probes. How much it may have run: its CPU time since its
	 * exec or fork, an upper bound (the kernel's account at the exec lags
	 * by up to a scheduler tick). Nothing tells a program that slept at
	 * once from one that allocated in its first milliseconds and is ending:
	 * both are said (a warning that its first allocations may be missing).
	 */
	v->ran_ns = v->cpu_known && cpu > v->exec_cpu ? cpu - v->exec_cpu : 0;
	v->late = ret > 0;
	pr_verbose("heap: %s [%u]: uprobes %.1f ms after its exec (%.2f ms of CPU)%s: %s", v->comm,
		   pid, v->exec_ns ? (now_ns - v->exec_ns) / 1e6 : 0.0, v->ran_ns / 1e6,
		   v->late ? ", late" : "", cover__why(why));
}

void cover__set(struct cover *c, uint32_t pid, enum cover_state s, enum cover_why why)
{
	struct cov *v = get(c, pid, true);

	if (!v)
		return;
	v->state = s;
	v->why = why;
	read_comm(pid, v->comm);
}

enum cover_state cover__classify(const struct cover_image *im, enum cover_why *why)
{
	*why = WHY_NONE;
	if (im->elf_ok && !im->interp)
		*why = WHY_STATIC;
	else if (im->elf_ok && im->own_malloc)
		*why = WHY_OWN_MALLOC;
	else if (im->secure)
		*why = WHY_SECURE;
	else if (!im->env_names_us)
		*why = WHY_NO_ENV;
	return *why == WHY_NONE ? COV_PENDING : COV_UPROBES;
}

/* PT_INTERP and a defined malloc in .dynsym, of the process's executable. */
static void read_exe(uint32_t pid, struct cover_image *im)
{
	char link[64];
	struct stat st;
	size_t phnum;
	Elf *e;
	int fd;

	snprintf(link, sizeof(link), "/proc/%u/exe", pid);
	fd = tfile__open_link(link, &st);
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &phnum))
		goto out;
	im->elf_ok = true;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_INTERP)
			im->interp = true;
	}
	im->own_malloc = !uprobes__elf_func(e, SHT_DYNSYM, "malloc", NULL);
out:
	elf_end(e);
	close(fd);
}

/* Up to len bytes of /proc/PID/<what>; returns how many (0 on failure). */
static size_t read_proc(uint32_t pid, const char *what, char *buf, size_t len)
{
	char path[64];
	size_t got = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (got < len && (n = read(fd, buf + got, len - got)) > 0)
		got += (size_t)n;
	close(fd);
	return got;
}

static bool read_secure(uint32_t pid)
{
	Elf64_auxv_t aux[64];
	size_t n = read_proc(pid, "auxv", (char *)aux, sizeof(aux)) / sizeof(aux[0]);

	for (size_t i = 0; i < n && aux[i].a_type != AT_NULL; i++)
		if (aux[i].a_type == AT_SECURE)
			return aux[i].a_un.a_val != 0;
	return false;
}

/* Whether one LD_PRELOAD entry of pid's names our library (the same file). */
static bool entry_is_us(struct cover *c, uint32_t pid, int root, const char *entry)
{
	struct stat st;
	int fd;

	if (!strncmp(entry, "/proc/self/fd/", 14)) {
		char link[64];

		snprintf(link, sizeof(link), "/proc/%u/fd/%s", pid, entry + 14);
		fd = tfile__open_link(link, &st);
	} else {
		fd = tfile__open(root, entry, &st);
	}
	if (fd < 0)
		return false;
	close(fd);
	return st.st_dev == c->lib_dev && st.st_ino == c->lib_ino;
}

/* Whether the environment pid was exec'd with preloads our library. */
static bool env_names_us(struct cover *c, uint32_t pid)
{
	static char env[256 * 1024];
	size_t n = read_proc(pid, "environ", env, sizeof(env) - 1);
	bool yes = false;
	int root;

	env[n] = '\0';
	for (size_t at = 0; at < n && !yes; at += strlen(env + at) + 1) {
		char *v = env + at, *save, *tok;

		if (strncmp(v, "LD_PRELOAD=", 11))
			continue;
		root = tfile__root(pid);
		for (tok = strtok_r(v + 11, " :", &save); tok && !yes;
		     tok = strtok_r(NULL, " :", &save))
			yes = entry_is_us(c, pid, root, tok);
		if (root >= 0)
			close(root);
		break; /* the loader takes the first */
	}
	return yes;
}

void cover__exec(struct cover *c, uint32_t pid, const char *comm, uint64_t time_ns, uint64_t cpu_ns)
{
	struct cover_image im = { 0 };
	enum cover_why why;
	struct cov *v = find(c, pid);

	/* the command's own exec: its coverage was set before it ran */
	if (v && !v->exec_ns && v->state != COV_PENDING && !v->exited) {
		v->exec_ns = time_ns;
		set_comm(v->comm, comm);
		return;
	}
	v = get(c, pid, true);
	if (!v)
		return;
	v->exec_ns = time_ns;
	v->exec_cpu = cpu_ns;
	v->cpu_known = true;
	set_comm(v->comm, comm);
	pr_debug("heap: exec of %s [%u] read %.1f ms after it", v->comm, pid,
		 (mono_ns() - time_ns) / 1e6);
	if (c->uprobes_only) {
		fall_back(c, pid, v, WHY_UPROBES_ASKED, time_ns);
		return;
	}
	read_exe(pid, &im);
	if (!im.elf_ok) {
		/*
		 * Gone already (or a zombie: no exe), read late on a busy host: its
		 * hello, if it had the sampler, is further on in the ring buffer.
		 */
		v->exited = true;
		return;
	}
	im.secure = read_secure(pid);
	im.env_names_us = env_names_us(c, pid);
	pr_debug("heap: exec of %s [%u]: elf %d interp %d own malloc %d secure %d preloads us %d",
		 v->comm, pid, im.elf_ok, im.interp, im.own_malloc, im.secure, im.env_names_us);
	if (cover__classify(&im, &why) == COV_UPROBES)
		fall_back(c, pid, v, why, mono_ns());
}

void cover__hello(struct cover *c, uint32_t pid, uint64_t flags, uint64_t time_ns)
{
	struct cov *v = get(c, pid, false);

	(void)time_ns;
	if (!v)
		return;
	if (!v->comm[0])
		read_comm(pid, v->comm);
	if (v->state == COV_UPROBES || v->state == COV_NONE)
		return; /* decided already (it fell back; its sampler's records are its own) */
	if (v->exited &&
	    (!(flags & PRELOAD_HELLO_INTERPOSING) || !(flags & PRELOAD_HELLO_RATE_OK))) {
		/* gone before this record was read: too late to probe it */
		v->state = COV_NONE;
		v->why = flags & PRELOAD_HELLO_INTERPOSING ? WHY_FOREIGN_RATE : WHY_OWN_MALLOC;
		return;
	}
	if (!(flags & PRELOAD_HELLO_INTERPOSING))
		fall_back(c, pid, v, WHY_OWN_MALLOC, mono_ns());
	else if (!(flags & PRELOAD_HELLO_RATE_OK))
		fall_back(c, pid, v, WHY_FOREIGN_RATE, mono_ns());
	else
		v->state = COV_PRELOAD;
}

void cover__fork(struct cover *c, uint32_t parent, uint32_t child, uint64_t time_ns)
{
	struct cov *p = find(c, parent), *v;

	/*
	 * The side band's fork record comes after the ring buffer's records of
	 * the child: one that exec'd meanwhile has its own entry already.
	 */
	if (!p || find(c, child))
		return;
	v = get(c, child, true);
	if (!v)
		return;
	*v = *p;
	v->late = false;
	v->exited = false;
	v->exec_ns = time_ns;
	v->exec_cpu = 0; /* a new task's CPU time starts from 0 */
	v->cpu_known = true;
	if (p->state == COV_UPROBES)
		fall_back(c, child, v, p->why, mono_ns());
}

void cover__exit(struct cover *c, uint32_t pid, uint64_t time_ns)
{
	struct cov *v = find(c, pid);

	(void)time_ns;
	/*
	 * Its hello may still be in the ring buffer (the side band's exit
	 * record is read first): a process still waiting is judged at the end.
	 */
	if (v)
		v->exited = true;
}

void cover__poll(struct cover *c, uint64_t now_ns)
{
	struct htab_entry *e;
	size_t it = 0;

	while ((e = htab__next(c->procs, &it))) {
		struct cov *v = (struct cov *)(uintptr_t)e->val;

		if (v->state == COV_PENDING && !v->exited && now_ns > v->exec_ns + HELLO_WAIT_NS)
			fall_back(c, *(const uint32_t *)e->key, v, WHY_NOT_LOADED, now_ns);
	}
}

bool cover__on_uprobes(const struct cover *c, uint32_t pid)
{
	const struct cov *v = find(c, pid);

	return v && v->state == COV_UPROBES;
}

static enum cover_why why_of(const struct cov *v)
{
	return v->state == COV_PENDING ? WHY_NOT_LOADED : v->why;
}

/* "name [pid] (why), ..." of up to MAX_NAMED entries matching pred, and how many in all. */
static size_t list(const struct cover *c, FILE *f, bool (*pred)(const struct cov *), bool why)
{
	struct htab_entry *e;
	size_t it = 0, n = 0;

	while ((e = htab__next(c->procs, &it))) {
		const struct cov *v = (const struct cov *)(uintptr_t)e->val;

		if (!pred(v))
			continue;
		if (f && n < MAX_NAMED) {
			fprintf(f, "%s%s [%u]", n ? "; " : "", v->comm[0] ? v->comm : "?",
				*(const uint32_t *)e->key);
			if (why && v->late && v->ran_ns)
				fprintf(f, " (%s; probed after up to %.1f ms of its CPU time)",
					cover__why(why_of(v)), v->ran_ns / 1e6);
			else if (why)
				fprintf(f, " (%s)", cover__why(why_of(v)));
		}
		n++;
	}
	if (f && n > MAX_NAMED)
		fprintf(f, "; %zu more", n - MAX_NAMED);
	return n;
}

/* never covered: probing failed, or it ended waiting for a hello that never came */
static bool is_never(const struct cov *v)
{
	return v->state == COV_NONE || (v->state == COV_PENDING && v->exited);
}

static bool is_late(const struct cov *v)
{
	return v->state == COV_UPROBES && v->late;
}

static bool is_preload(const struct cov *v)
{
	return v->state == COV_PRELOAD;
}

static bool is_uprobes(const struct cov *v)
{
	return v->state == COV_UPROBES && v->why != WHY_UPROBES_ASKED;
}

size_t cover__count(const struct cover *c, enum cover_state s)
{
	struct htab_entry *e;
	size_t it = 0, n = 0;

	while ((e = htab__next(c->procs, &it)))
		n += ((const struct cov *)(uintptr_t)e->val)->state == s;
	return n;
}

/* The names (and why) of the processes pred selects, as list() prints them. */
static char *list_str(const struct cover *c, bool (*pred)(const struct cov *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	list(c, f, pred, true);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void cover__warn(const struct cover *c, struct recorder *r)
{
	size_t never = list(c, NULL, is_never, false), late = list(c, NULL, is_late, false);
	char *names;

	if (never && (names = list_str(c, is_never))) {
		rec__warn(
			r,
			"run such a program under bpfprof directly (-- CMD), or use --alloc-uprobes",
			"heap: %zu process%s not covered, %s allocations are missing: %s", never,
			never == 1 ? "" : "es", never == 1 ? "its" : "their", names);
		free(names);
	}
	if (late && (names = list_str(c, is_late))) {
		rec__warn(
			r,
			"run such a program under bpfprof directly (-- CMD) to cover it from its start",
			"heap: %zu process%s probed with uprobes only after %s allocator was "
			"loaded, %s first allocations may be missing: %s",
			late, late == 1 ? "" : "es", late == 1 ? "its" : "their",
			late == 1 ? "its" : "their", names);
		free(names);
	}
}

void cover__summary(const struct cover *c, FILE *f)
{
	fprintf(f,
		"bpfprof: heap: coverage: %zu processes sampled in process, %zu by uprobes "
		"instead",
		list(c, NULL, is_preload, false), list(c, NULL, is_uprobes, false));
	if (list(c, NULL, is_uprobes, false)) {
		fprintf(f, ": ");
		list(c, f, is_uprobes, true);
	}
	fputc('\n', f);
}
