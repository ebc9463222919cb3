// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * user/python against real interpreters: every pyenv CPython 3.8-3.13 and
 * the system's python3.11 that this machine has (one missing is skipped).
 *
 *  - line tables: each interpreter dumps the line tables of a generated
 *    module and some of its standard library with PyCode_Addr2Line's answer
 *    for every instruction (lines.py); pycode__line must agree everywhere.
 *  - live: live.py defines functions (a nested class method, names of each
 *    string kind, one in a second file), starts a thread and blocks; the
 *    test finds the interpreter in /proc/PID/maps, probes it, finds both
 *    threads, decodes the code objects, walks the main thread's frames the
 *    way the BPF walker does (struct bpf_pyproc only) and compares with the
 *    frames Python itself reported, then has a code object freed and its
 *    address reused.
 *  - garbage: bogus addresses, a process that exited, a pid that does not
 *    exist, damaged _Py_DebugOffsets, random line tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip.h"

#include <bpf/bpf.h>
#include <linux/types.h>

#include "bpfprof.h"
#include "collect/pytrack.h"
#include "proc/objfile.h"
#include "proc/proc.h"

#include "proc/procmaps.h"
#include "python/pyimpl.h"
#include "python/python.h"
#include "util/clock.h"

#define LINE_TIMEOUT_MS 20000
#define MAX_CODES	16
#define MAX_FRAMES	16
/* Beyond any pid_max: process_vm_readv must say ESRCH. */
#define NO_SUCH_PID 0x7ffffff0

struct pyexe {
	const char *label;
	int minor;
	const char *fixed; /* a fixed path, else found under $PYENV_ROOT */
	char path[PATH_MAX];
};

static struct pyexe exes[] = {
	{ "3.8", 8, NULL, "" },
	{ "3.9", 9, NULL, "" },
	{ "3.10", 10, NULL, "" },
	{ "3.11", 11, NULL, "" },
	{ "3.12", 12, NULL, "" },
	{ "3.13", 13, NULL, "" },
	{ "system 3.11", 11, "/usr/bin/python3.11", "" },
};

static char scripts[PATH_MAX];

static const char *pyenv_root(void)
{
	const char *r = getenv("PYENV_ROOT");

	return r && *r ? r : "/root/.pyenv";
}

/* $PYENV_ROOT/versions/3.M.*\/bin/python3.M, newest micro last in glob order. */
static void find_pyenv(const char *root, int minor, char *out, size_t len)
{
	char pat[PATH_MAX];
	glob_t g;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "%s/versions/3.%d.*/bin/python3.%d", root, minor, minor);
	if (glob(pat, 0, NULL, &g))
		return;
	if (g.gl_pathc)
		snprintf(out, len, "%s", g.gl_pathv[g.gl_pathc - 1]);
	globfree(&g);
}

static int setup_all(void **state)
{
	const char *fx = getenv("FIXTURES");
	size_t i;
	char probe[PATH_MAX + 16];

	(void)state;
	/* Built fixtures first; the source tree when run by hand from the top. */
	snprintf(scripts, sizeof(scripts), "%s/python", fx ? fx : "/nonexistent");
	snprintf(probe, sizeof(probe), "%s/live.py", scripts);
	if (access(probe, R_OK))
		snprintf(scripts, sizeof(scripts), "tests/unit/fixtures/python");
	for (i = 0; i < sizeof(exes) / sizeof(exes[0]); i++) {
		if (exes[i].fixed)
			snprintf(exes[i].path, sizeof(exes[i].path), "%s", exes[i].fixed);
		else
			find_pyenv(pyenv_root(), exes[i].minor, exes[i].path, sizeof(exes[i].path));
		if (exes[i].path[0] && access(exes[i].path, X_OK))
			exes[i].path[0] = '\0';
		if (!exes[i].path[0])
			fprintf(stderr, "test_python: no CPython %s here, its tests are skipped\n",
				exes[i].label);
	}
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* A child interpreter with a pipe each way, read line by line with a timeout. */
struct child {
	pid_t pid;
	int in, out;
	char *buf;
	size_t len, cap;
	char *line;
};

static int child_spawn(struct child *c, char *const argv[])
{
	int to[2], from[2];

	memset(c, 0, sizeof(*c));
	c->pid = -1;
	if (pipe2(to, O_CLOEXEC))
		return -errno;
	if (pipe2(from, O_CLOEXEC)) {
		close(to[0]);
		close(to[1]);
		return -errno;
	}
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (!c->pid) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	c->in = to[1];
	c->out = from[0];
	return 0;
}

/* exe -I -B $scripts/script [arg1 [arg2]] */
static int child_start(struct child *c, const char *exe, const char *script, const char *arg1,
		       const char *arg2)
{
	char spath[PATH_MAX + 64];
	char *argv[] = { (char *)exe, "-I", "-B", spath, (char *)arg1, (char *)arg2, NULL };

	snprintf(spath, sizeof(spath), "%s/%s", scripts, script);
	return child_spawn(c, argv);
}

/* The next line without its newline, or NULL at EOF or timeout. */
static char *child_line(struct child *c)
{
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		struct pollfd p = { .fd = c->out, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - c->buf);

			free(c->line);
			c->line = malloc(l + 1);
			if (!c->line)
				return NULL;
			memcpy(c->line, c->buf, l);
			c->line[l] = '\0';
			memmove(c->buf, nl + 1, c->len - l - 1);
			c->len -= l + 1;
			return c->line;
		}
		if (c->cap - c->len < 65536) {
			char *b = realloc(c->buf, c->cap + (1 << 20));

			if (!b)
				return NULL;
			c->buf = b;
			c->cap += 1 << 20;
		}
		if (poll(&p, 1, LINE_TIMEOUT_MS) != 1)
			return NULL;
		n = read(c->out, c->buf + c->len, c->cap - c->len);
		if (n <= 0)
			return NULL;
		c->len += (size_t)n;
	}
}

static void child_say(struct child *c, const char *cmd)
{
	ssize_t n = write(c->in, cmd, strlen(cmd));

	(void)n;
}

/* Ends the child (EOF on its stdin, then SIGKILL if it lingers) and reaps it. */
static void child_stop(struct child *c)
{
	int i, status;

	if (c->in > 0)
		close(c->in);
	c->in = -1;
	for (i = 0; c->pid > 0 && i < 200; i++) {
		if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
			c->pid = -1;
			break;
		}
		usleep(10000);
	}
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	c->pid = -1;
	if (c->out > 0)
		close(c->out);
	c->out = -1;
	free(c->buf);
	free(c->line);
	c->buf = c->line = NULL;
}

/* Skips saying which interpreter was not found, and where it was looked for. */
static void skip_no_exe(const struct pyexe *e)
{
	if (e->fixed)
		skip_because("no CPython %s here (%s)", e->label, e->fixed);
	skip_because("no CPython %s here (%s/versions/3.%d.*/bin/python3.%d)", e->label,
		     pyenv_root(), e->minor, e->minor);
}

static struct pyexe *exe_or_skip(void **state)
{
	struct pyexe *e = *state;

	if (!e->path[0])
		skip_no_exe(e);
	return e;
}

static uint32_t minor_version(int minor)
{
	return PYVER(3, minor);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* ---- line tables ---- */

static void test_lines(void **state)
{
	struct pyexe *e = exe_or_skip(state);
	size_t ncode = 0, ninstr = 0, bad = 0;
	struct child ch;
	char *l;
	bool end = false;

	assert_int_equal(child_start(&ch, e->path, "lines.py", "argparse", "inspect"), 0);
	while ((l = child_line(&ch))) {
		struct pycode c = { .version = minor_version(e->minor) };
		unsigned long first, nbytes;
		const char *hex;
		char *p, *q;
		size_t i;

		if (!strcmp(l, "end")) {
			end = true;
			break;
		}
		if (!strncmp(l, "disagree", 8))
			fail_msg("%s: co_lines() and PyCode_Addr2Line disagree: %s", e->label, l);
		if (strncmp(l, "code ", 5))
			fail_msg("%s: unexpected line from lines.py: %.80s", e->label, l);
		first = strtoul(l + 5, &p, 10);
		nbytes = strtoul(p, &q, 10);
		assert_true(q != p && *q == ' ');
		hex = q + 1;
		c.firstlineno = (uint32_t)first;
		c.linetable = calloc(1, strlen(hex) / 2 + 1);
		assert_non_null(c.linetable);
		for (i = 0; strcmp(hex, "-") && hex[2 * i] && hex[2 * i + 1]; i++)
			c.linetable[i] =
				(uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
		c.linetable_len = i;

		l = child_line(&ch);
		assert_non_null(l);
		assert_true(!strncmp(l, "lines", 5));
		p = l + 5;
		for (i = 0; i < nbytes / 2; i++) {
			long want = strtol(p, &q, 10);
			uint32_t got = pycode__line(&c, (uint32_t)(2 * i));

			assert_true(q != p);
			p = q;
			if (want < 0)
				want = 0;
			if (got != (uint32_t)want && bad++ < 10)
				fprintf(stderr,
					"%s: code at line %lu, offset %zu: line %u, CPython %ld\n",
					e->label, first, 2 * i, got, want);
			ninstr++;
		}
		/* Past the end: whatever it answers, it answers without reading past. */
		(void)pycode__line(&c, nbytes + 1000);
		(void)pycode__line(&c, UINT32_MAX);
		free(c.linetable);
		ncode++;
	}
	child_stop(&ch);
	assert_true(end);
	assert_true(ncode > 300);
	fprintf(stderr, "test_python: %s: %zu code objects, %zu instructions, %zu wrong lines\n",
		e->label, ncode, ninstr, bad);
	assert_int_equal(bad, 0);
}

/* ---- live interpreter ---- */

struct expect_code {
	char label[32];
	uint64_t addr;
	uint32_t firstlineno;
	char filename[512];
	char qualname[256];
};

struct expect_frame {
	char qualname[256];
	uint32_t line;
	char filename[512];
};

struct live {
	struct child ch;
	pid_t pid; /* the interpreter: ch.pid, or its child under unshare */
	uint32_t hexversion;
	uint32_t main_tid, worker_tid;
	struct expect_code codes[MAX_CODES];
	size_t ncodes;
	struct expect_frame frames[MAX_FRAMES];
	size_t nframes;
	int reused;
	struct pyinfo info;
	char lib[PATH_MAX]; /* the file that probed as CPython */
	uint64_t bias;
};

/*
 * live.py says "ready" just before it reads stdin: its frames are final only
 * once the main thread sits in read(0, ...) (x86-64 syscall 0).
 */
static bool main_blocked_in_read(pid_t pid)
{
	char path[64], buf[64];
	int i;

	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	for (i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		bool in_read = false;

		if (!f)
			return false;
		if (fgets(buf, sizeof(buf), f))
			in_read = !strncmp(buf, "0 0x0 ", 6);
		fclose(f);
		if (in_read)
			return true;
		usleep(2000);
	}
	return false;
}

/* Lines up to "ready"; false on EOF, timeout or a line we do not know. */
static bool live_read(struct live *lv)
{
	char *l;

	lv->nframes = 0;
	while ((l = child_line(&lv->ch))) {
		char *f[8], *save = NULL;
		int n = 0;

		if (!strcmp(l, "ready"))
			return main_blocked_in_read(lv->pid);
		f[0] = strtok_r(l, "\t", &save);
		while (f[n] && n < 7)
			f[++n] = strtok_r(NULL, "\t", &save);
		if (n == 2 && !strcmp(f[0], "version")) {
			lv->hexversion = (uint32_t)strtoul(f[1], NULL, 10);
		} else if (n == 3 && !strcmp(f[0], "thread")) {
			uint32_t tid = (uint32_t)strtoul(f[2], NULL, 10);

			if (!strcmp(f[1], "main"))
				lv->main_tid = tid;
			else
				lv->worker_tid = tid;
		} else if (n == 6 && !strcmp(f[0], "code") && lv->ncodes < MAX_CODES) {
			struct expect_code *c = &lv->codes[lv->ncodes++];

			snprintf(c->label, sizeof(c->label), "%s", f[1]);
			c->addr = strtoull(f[2], NULL, 10);
			c->firstlineno = (uint32_t)strtoul(f[3], NULL, 10);
			snprintf(c->filename, sizeof(c->filename), "%s", f[4]);
			snprintf(c->qualname, sizeof(c->qualname), "%s", f[5]);
		} else if (n == 4 && !strcmp(f[0], "frame") && lv->nframes < MAX_FRAMES) {
			struct expect_frame *fr = &lv->frames[lv->nframes++];

			snprintf(fr->qualname, sizeof(fr->qualname), "%s", f[1]);
			fr->line = (uint32_t)strtoul(f[2], NULL, 10);
			snprintf(fr->filename, sizeof(fr->filename), "%s", f[3]);
		} else if (n == 2 && !strcmp(f[0], "reused")) {
			lv->reused = atoi(f[1]);
		} else {
			fprintf(stderr, "live.py said: %s\n", l);
			return false;
		}
	}
	return false;
}

/* Load bias of a file mapped with its first page at start. */
static int elf_bias(int fd, uint64_t start, uint64_t *bias)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	Elf *elf;
	size_t i, n;
	int err = -ENOENT;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (!elf_getphdrnum(elf, &n)) {
		for (i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    !ph.p_offset) {
				*bias = start - (ph.p_vaddr & ~(page - 1));
				err = 0;
				break;
			}
		}
	}
	elf_end(elf);
	return err;
}

/*
 * Probe every file mapped from offset 0 whose name looks like CPython's:
 * libpython*, or the interpreter's own executable. Exactly one must be it.
 */
static void live_probe(struct live *lv, const char *exe)
{
	char path[64], real_exe[PATH_MAX], *line = NULL;
	size_t cap = 0, found = 0;
	FILE *f;

	assert_non_null(realpath(exe, real_exe));
	snprintf(path, sizeof(path), "/proc/%d/maps", lv->pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		struct procmaps_entry m;
		struct pyinfo info;
		const char *base;
		uint64_t bias;
		int fd, err;

		if (procmaps__parse_line(line, &m) || m.pgoff || m.path[0] != '/')
			continue;
		base = strrchr(m.path, '/') + 1;
		if (strncmp(base, "libpython", 9) && strcmp(m.path, real_exe))
			continue;
		fd = open(m.path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(elf_bias(fd, m.start, &bias), 0);
		err = pyproc__probe(lv->pid, fd, m.path, bias, &info);
		if (!err) {
			struct pyfile pf;
			uint64_t vaddr;

			/* the per-file facts pytrack caches give the same load bias */
			assert_int_equal(pyproc__file(fd, &pf), 0);
			assert_int_equal(pyproc__vaddr(&pf, m.pgoff, &vaddr), 0);
			assert_true(m.start - vaddr == bias);
		}
		close(fd);
		if (err) {
			/* pyenv's executable only refers to libpython's _PyRuntime. */
			assert_int_equal(err, -ENOENT);
			continue;
		}
		found++;
		lv->info = info;
		lv->bias = bias;
		snprintf(lv->lib, sizeof(lv->lib), "%s", m.path);
	}
	free(line);
	fclose(f);
	assert_int_equal(found, 1);
}

static int rd64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return pymem__read_u64(pid, addr, v);
}

/*
 * The thread state whose thread_id is ident, found as py_find_tstate
 * (bpf/python.bpf.h) finds it, from struct bpf_pyproc alone: the first
 * interpreter's list, at most 8 states, each pointing back at it. 0: none.
 */
static uint64_t bpf_list_find(pid_t pid, const struct bpf_pyproc *b, uint64_t ident)
{
	uint64_t interp = 0, ts = 0, id = 0, back = 0;

	if (!b->runtime || rd64(pid, b->runtime + b->rt_interp_head, &interp) || !interp ||
	    rd64(pid, interp + b->is_threads_head, &ts))
		return 0;
	for (int i = 0; i < 8 && ts; i++) {
		if (rd64(pid, ts + b->ts_thread_id, &id) || rd64(pid, ts + b->ts_interp, &back) ||
		    back != interp)
			return 0;
		if (id == ident)
			return ts;
		if (rd64(pid, ts + b->ts_next, &ts))
			return 0;
	}
	return 0;
}
/*
 * The frame chain of one thread as the BPF walker reads it, from struct
 * bpf_pyproc alone: (code, raw position), leaf first, shim frames skipped.
 */
static size_t walk_frames(pid_t pid, const struct bpf_pyproc *b, uint64_t tstate, uint64_t *code,
			  uint64_t *raw, size_t max)
{
	uint64_t frame = 0, v;
	size_t n = 0, steps;

	if (rd64(pid, tstate + b->tstate_frame, &frame))
		return 0;
	if (b->model == PY_MODEL_CFRAME && (!frame || rd64(pid, frame + b->cframe_current, &frame)))
		return 0;
	for (steps = 0; frame && n < max && steps < 1000; steps++) {
		if (b->frame_owner >= 0) {
			uint8_t owner;

			if (pymem__read(pid, frame + b->frame_owner, &owner, 1))
				break;
			if (owner >= b->owner_cstack)
				goto next;
		}
		if (rd64(pid, frame + b->frame_code, &code[n]))
			break;
		if (b->model == PY_MODEL_FRAMEOBJ) {
			uint32_t lasti;

			if (pymem__read(pid, frame + b->frame_instr, &lasti, 4))
				break;
			raw[n] = lasti;
		} else if (rd64(pid, frame + b->frame_instr, &raw[n])) {
			break;
		}
		n++;
next:
		if (rd64(pid, frame + b->frame_back, &v))
			break;
		frame = v;
	}
	return n;
}

static void check_stack(struct live *lv, uint64_t tstate)
{
	uint64_t code[MAX_FRAMES * 2], raw[MAX_FRAMES * 2];
	size_t n, i;

	n = walk_frames(lv->pid, &lv->info.bpf, tstate, code, raw, MAX_FRAMES * 2);
	for (i = 0; n != lv->nframes && i < n; i++) {
		struct pycode c;

		if (!pycode__read(lv->pid, &lv->info, code[i], &c))
			fprintf(stderr, "walked: %s %s:%u\n", c.qualname, c.filename,
				pycode__line(&c, pycode__instr_offset(&lv->info, code[i], raw[i])));
		else
			fprintf(stderr, "walked: %#llx ?\n", (unsigned long long)code[i]);
		pycode__free(&c);
	}
	assert_int_equal(n, lv->nframes);
	for (i = 0; i < n; i++) {
		struct pycode c;
		uint32_t off;

		assert_int_equal(pycode__read(lv->pid, &lv->info, code[i], &c), 0);
		off = pycode__instr_offset(&lv->info, code[i], raw[i]);
		assert_true(off != UINT32_MAX);
		assert_string_equal(c.qualname, lv->frames[i].qualname);
		assert_string_equal(c.filename, lv->frames[i].filename);
		assert_int_equal(pycode__line(&c, off), lv->frames[i].line);
		pycode__free(&c);
	}
}

static const struct expect_code *code_by_label(const struct live *lv, const char *label)
{
	size_t i;

	for (i = 0; i < lv->ncodes; i++)
		if (!strcmp(lv->codes[i].label, label))
			return &lv->codes[i];
	fail_msg("live.py did not report code %s", label);
	return NULL;
}

static void test_live(void **state)
{
	struct pyexe *e = exe_or_skip(state);
	struct pythread th[64];
	uint64_t main_ts = 0, worker_ts = 0;
	const struct expect_code *dyn;
	struct live *lv;
	struct pycode c;
	int n, i;
	pid_t pid;

	lv = calloc(1, sizeof(*lv));
	assert_non_null(lv);
	assert_int_equal(child_start(&lv->ch, e->path, "live.py", NULL, NULL), 0);
	pid = lv->pid = lv->ch.pid;
	assert_true(live_read(lv));
	assert_int_equal(lv->hexversion >> 16, minor_version(e->minor) >> 16);

	/* probe: version, model, layout */
	live_probe(lv, e->path);
	if (e->minor >= 11)
		assert_int_equal(lv->info.version, lv->hexversion);
	else
		assert_int_equal(PYVER_MINOR(lv->info.version), minor_version(e->minor));
	assert_int_equal(lv->info.bpf.version, lv->info.version);
	assert_int_equal(lv->info.bpf.model, e->minor <= 10   ? PY_MODEL_FRAMEOBJ
					     : e->minor <= 12 ? PY_MODEL_CFRAME
							      : PY_MODEL_IFRAME);
	assert_true(e->minor < 11 || lv->info.code_adaptive > 0);

	/* threads: both native ids, distinct thread states */
	n = pyproc__threads(pid, &lv->info, th, 64);
	assert_true(n >= 2);
	for (i = 0; i < n; i++) {
		if (th[i].tid == lv->main_tid)
			main_ts = th[i].tstate;
		if (th[i].tid == lv->worker_tid)
			worker_ts = th[i].tstate;
	}
	assert_true(main_ts && worker_ts && main_ts != worker_ts);
	/* what BPF's py_find_tstate walks, from struct bpf_pyproc alone: each by its ident */
	for (i = 0; i < n; i++)
		assert_true(bpf_list_find(pid, &lv->info.bpf, th[i].ident) == th[i].tstate);
	assert_int_equal(pyproc__threads(pid, &lv->info, th, 1), 1);

	/* code objects: names of every string kind, nested qualname, second file */
	assert_int_equal(lv->ncodes, 6);
	for (i = 0; i < (int)lv->ncodes; i++) {
		const struct expect_code *x = &lv->codes[i];

		assert_int_equal(pycode__read(pid, &lv->info, x->addr, &c), 0);
		assert_string_equal(c.qualname, x->qualname);
		assert_string_equal(c.filename, x->filename);
		assert_int_equal(c.firstlineno, x->firstlineno);
		assert_true(c.code_addr == x->addr);
		assert_true(c.linetable_len > 0);
		assert_int_equal(pycode__same(pid, &lv->info, &c), 1);
		/* The first instruction is on the def line or the one after it. */
		assert_true(pycode__line(&c, 0) >= x->firstlineno &&
			    pycode__line(&c, 0) <= x->firstlineno + 1);
		pycode__free(&c);
	}
	assert_string_equal(code_by_label(lv, "method")->qualname,
			    e->minor >= 11 ? "Outer.Inner.method" : "method");

	/* frames, walked as BPF does, against what Python reported */
	check_stack(lv, main_ts);

	/* things that are not code objects */
	assert_int_equal(pycode__read(pid, &lv->info, 8, &c), -EFAULT);
	assert_int_equal(pycode__read(pid, &lv->info, 1ULL << 60, &c), -EFAULT);
	assert_int_equal(pycode__read(pid, &lv->info, lv->info.runtime, &c), -EINVAL);
	assert_int_equal(pycode__read(pid, &lv->info, main_ts, &c), -EINVAL);
	assert_true(pycode__read(pid, &lv->info, code_by_label(lv, "dyn")->addr + 8, &c) < 0);
	assert_null(c.qualname);

	/* address reuse: the dyn code object freed, another made in its place */
	dyn = code_by_label(lv, "dyn");
	assert_int_equal(pycode__read(pid, &lv->info, dyn->addr, &c), 0);
	child_say(&lv->ch, "free\n");
	assert_true(live_read(lv));
	if (lv->reused) {
		struct pycode now;

		assert_int_equal(pycode__same(pid, &lv->info, &c), 0);
		assert_int_equal(pycode__read(pid, &lv->info, dyn->addr, &now), 0);
		assert_string_equal(now.filename, "dyn_b.py");
		assert_int_equal(now.firstlineno, 4);
		pycode__free(&now);
	} else {
		fprintf(stderr, "test_python: %s: freed code object's address not reused\n",
			e->label);
		assert_true(pycode__same(pid, &lv->info, &c) <= 1);
	}
	check_stack(lv, main_ts);

	/* the process ends: every read says so */
	child_say(&lv->ch, "exit\n");
	child_stop(&lv->ch);
	assert_int_equal(pycode__same(pid, &lv->info, &c), -ESRCH);
	pycode__free(&c);
	assert_int_equal(pycode__read(pid, &lv->info, dyn->addr, &c), -ESRCH);
	assert_int_equal(pyproc__threads(pid, &lv->info, th, 64), -ESRCH);
	{
		int fd = open(lv->lib, O_RDONLY | O_CLOEXEC);
		struct pyinfo info;

		assert_true(fd >= 0);
		assert_int_equal(pyproc__probe(pid, fd, lv->lib, lv->bias, &info), -ESRCH);
		assert_int_equal(pyproc__probe(NO_SUCH_PID, fd, lv->lib, lv->bias, &info), -ESRCH);
		close(fd);
	}
	assert_int_equal(pyproc__threads(NO_SUCH_PID, &lv->info, th, 64), -ESRCH);
	free(lv);
}

/* ---- a target in its own pid namespace (a container) ---- */

static uint32_t nspid_of(pid_t pid, uint32_t tid)
{
	char path[96], line[256];
	uint32_t last = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%u/status", pid, tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			last = (uint32_t)v;
			p = end;
		}
	}
	fclose(f);
	return last;
}

/*
 * Thread ids inside the namespace (live.py prints those) must come back as
 * this side's tids. Needs root (unshare); 3.9 finds ids through pthread_t,
 * 3.12 reads native_thread_id.
 */
static void test_pid_namespace(void **state)
{
	struct pyexe *e = exe_or_skip(state);
	char spath[PATH_MAX + 64], path[64], buf[64];
	char *argv[] = { "/usr/bin/unshare",
			 "--pid",
			 "--fork",
			 "--kill-child",
			 e->path,
			 "-I",
			 "-B",
			 spath,
			 NULL };
	struct pythread th[64];
	uint64_t main_ts = 0;
	bool seen_main = false, seen_worker = false;
	struct live *lv;
	FILE *f;
	int n, i;

	if (geteuid())
		skip_because("not root: needs a new pid namespace");
	if (access(argv[0], X_OK))
		skip_because("no %s", argv[0]);
	snprintf(spath, sizeof(spath), "%s/live.py", scripts);
	lv = calloc(1, sizeof(*lv));
	assert_non_null(lv);
	assert_int_equal(child_spawn(&lv->ch, argv), 0);
	/* unshare forks the interpreter: its only child. */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", lv->ch.pid, lv->ch.pid);
	for (i = 0; i < 500 && !lv->pid; i++) {
		f = fopen(path, "r");
		if (f && fgets(buf, sizeof(buf), f))
			lv->pid = atoi(buf);
		if (f)
			fclose(f);
		if (!lv->pid)
			usleep(2000);
	}
	assert_true(lv->pid > 0);
	assert_true(live_read(lv));
	assert_int_equal(lv->main_tid, 1); /* pid 1 of its namespace */
	live_probe(lv, e->path);
	n = pyproc__threads(lv->pid, &lv->info, th, 64);
	assert_true(n >= 2);
	for (i = 0; i < n; i++) {
		uint32_t ns = nspid_of(lv->pid, th[i].tid);

		assert_true(ns != 0); /* a tid of this namespace, of this process */
		if (ns == lv->main_tid) {
			seen_main = true;
			main_ts = th[i].tstate;
			assert_int_equal(th[i].tid, lv->pid);
		}
		if (ns == lv->worker_tid)
			seen_worker = true;
	}
	assert_true(seen_main && seen_worker);
	check_stack(lv, main_ts);
	child_stop(&lv->ch);
	free(lv);
}

/* ---- thread names (threading.Thread.name) ---- */

#define MAX_NAMED 16

struct named {
	uint32_t tid; /* native id */
	uint64_t ident;
	char name[512];
};

struct names_target {
	struct live lv; /* child, pid, probe */
	struct named th[MAX_NAMED];
	size_t n;
	uint32_t raw_tid;
	uint64_t raw_ident;
};

/* names.py's lines up to "ready"; a "named" line for a thread seen updates it. */
static bool names_read(struct names_target *t)
{
	char *l;

	while ((l = child_line(&t->lv.ch))) {
		char *p, *q;
		struct named x;
		size_t i;

		if (!strcmp(l, "ready"))
			return true;
		if (!strncmp(l, "raw\t", 4)) {
			t->raw_tid = (uint32_t)strtoul(l + 4, &p, 10);
			t->raw_ident = strtoull(p, NULL, 10);
			continue;
		}
		if (strncmp(l, "named\t", 6))
			return false;
		/* the name is the rest of the line: it may hold a tab */
		x.tid = (uint32_t)strtoul(l + 6, &p, 10);
		x.ident = strtoull(p, &q, 10);
		if (*q != '\t')
			return false;
		snprintf(x.name, sizeof(x.name), "%s", q + 1);
		for (i = 0; i < t->n && t->th[i].tid != x.tid; i++)
			;
		if (i == t->n && t->n == MAX_NAMED)
			return false;
		t->th[i] = x;
		if (i == t->n)
			t->n++;
	}
	return false;
}

static const struct pyname *name_of(const struct pyname *names, int n, uint64_t ident)
{
	for (int i = 0; i < n; i++)
		if (names[i].ident == ident)
			return &names[i];
	return NULL;
}

/* What bpfprof shows for a name: cleaned, cut to PYNAME_MAX - 1 bytes. */
static void shown(const char *name, char *out)
{
	pyname__clean(name, out, PYNAME_MAX);
}

/*
 * Memory that is not what the layout says: every offset the reader uses
 * moved by a few words, one at a time, and _PyRuntime itself moved. Each
 * read ends (bounded), and what it returns is either an error or names that
 * are clean UTF-8 and no longer than bpfprof keeps; nothing crashes.
 */
static void names_lie(pid_t pid, const struct pyinfo *good)
{
	static const int32_t deltas[] = { -16, -8, 8, 16, 24, 64 };
	struct pyname names[64], truth[64];
	struct pynames_hints h0;
	char again[PYNAME_MAX];
	size_t f, d;
	int n, i, j, ntruth, tried = 0, failed = 0;

	memset(&h0, 0, sizeof(h0));
	ntruth = pythreads__names(pid, good, &h0, truth, 64);
	assert_int_equal(ntruth, 11);

	for (f = 0; f < 11; f++) {
		for (d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++) {
			struct pyinfo info = *good;
			struct pylayout *l = pyinfo__layout_mut(&info);
			struct pynames_hints hints;
			int32_t *fields[] = { &l->is_modules, &l->md_dict,	 &l->tp_basicsize,
					      &l->tp_flags,   &l->tp_dictoffset, &l->ht_cached_keys,
					      &l->dict_keys,  &l->dict_values,	 &l->long_digits,
					      &l->long_size,  &l->ob_type };

			if (f == 10)
				info.runtime += (uint64_t)(int64_t)deltas[d] * 64;
			else
				*fields[f] += deltas[d];
			memset(&hints, 0, sizeof(hints));
			n = pythreads__names(pid, &info, &hints, names, 64);
			tried++;
			failed += n <= 0;
			assert_true(n != -ESRCH && n <= 64);
			for (i = 0; i < n; i++) {
				bool real = !names[i].name[0];

				assert_true(strlen(names[i].name) < PYNAME_MAX);
				pyname__clean(names[i].name, again, sizeof(again));
				assert_string_equal(again, names[i].name);
				/* a name is found by its key, so it is a Thread's real name */
				for (j = 0; j < ntruth; j++)
					real |= !strcmp(names[i].name, truth[j].name);
				if (!real)
					fail_msg("field %zu %+d: read '%s', not a thread's name", f,
						 deltas[d], names[i].name);
			}
		}
	}
	assert_true(failed > tried / 2); /* most lies are caught, not decoded */
}

/*
 * Every Thread of names.py found by ident with its name (and the ident is
 * what PyThreadState.thread_id of that tid holds); the _thread one has no
 * Thread; a rename is seen with warm hints; a gone process says so.
 */
static void test_thread_names(void **state)
{
	struct pyexe *e = exe_or_skip(state);
	struct pynames_hints hints;
	struct pyname names[64];
	struct pythread th[64];
	struct names_target *t;
	char want[PYNAME_MAX];
	int n, nth, i;
	size_t k;

	t = calloc(1, sizeof(*t));
	assert_non_null(t);
	assert_int_equal(child_start(&t->lv.ch, e->path, "names.py", NULL, NULL), 0);
	t->lv.pid = t->lv.ch.pid;
	assert_true(names_read(t));
	assert_int_equal(t->n, 11);
	live_probe(&t->lv, e->path);

	memset(&hints, 0, sizeof(hints));
	n = pythreads__names(t->lv.pid, &t->lv.info, &hints, names, 64);
	assert_int_equal(n, 11); /* every Thread; not the _thread one */
	nth = pyproc__threads(t->lv.pid, &t->lv.info, th, 64);
	assert_true(nth >= 12);
	for (k = 0; k < t->n; k++) {
		const struct pyname *nm = name_of(names, n, t->th[k].ident);
		bool mapped = false;

		assert_non_null(nm);
		shown(t->th[k].name, want);
		if (strcmp(nm->name, want))
			fail_msg("%s: thread %u: read '%s', named '%s'", e->label, t->th[k].tid,
				 nm->name, want);
		for (i = 0; i < nth; i++)
			if (th[i].tid == t->th[k].tid)
				mapped = th[i].ident == t->th[k].ident;
		assert_true(mapped);
	}
	assert_null(name_of(names, n, t->raw_ident));
	/* what cleaning did to the awkward ones */
	assert_string_equal(name_of(names, n, t->th[5].ident)->name, "tab\\x09here");
	assert_int_equal(strlen(name_of(names, n, t->th[6].ident)->name), PYNAME_MAX - 1);
	/* max is respected */
	assert_int_equal(pythreads__names(t->lv.pid, &t->lv.info, &hints, names, 3), 3);

	/* renamed: read again through the hints the first read left */
	assert_true(hints.threading.keys && hints.active.keys && hints.name.keys);
	child_say(&t->lv.ch, "rename\n");
	assert_true(names_read(t));
	n = pythreads__names(t->lv.pid, &t->lv.info, &hints, names, 64);
	assert_int_equal(n, 11);
	assert_string_equal(name_of(names, n, t->th[1].ident)->name, "renamed");
	/* stale hints (another table's keys) are only a hint */
	hints.threading.keys ^= 0x1000;
	hints.name.ix = 1000;
	assert_int_equal(pythreads__names(t->lv.pid, &t->lv.info, &hints, names, 64), 11);

	/* a layout that points at the wrong field reads nothing, and no garbage */
	{
		struct pyinfo bad = t->lv.info;
		struct pylayout *l = pyinfo__layout_mut(&bad);

		memset(&hints, 0, sizeof(hints));
		l->is_modules += 8;
		n = pythreads__names(t->lv.pid, &bad, &hints, names, 64);
		assert_true(n < 0 && n != -ESRCH);
		l->is_modules -= 8;
		l->md_dict += 8;
		n = pythreads__names(t->lv.pid, &bad, &hints, names, 64);
		assert_true(n < 0 && n != -ESRCH);
		l->md_dict -= 8;
		l->is_modules = -1;
		assert_int_equal(pythreads__names(t->lv.pid, &bad, &hints, names, 64), -ENOTSUP);
	}
	names_lie(t->lv.pid, &t->lv.info);

	child_say(&t->lv.ch, "exit\n");
	child_stop(&t->lv.ch);
	assert_int_equal(pythreads__names(t->lv.pid, &t->lv.info, &hints, names, 64), -ESRCH);
	free(t);
}

/* ---- versions we do not support, files that are not Python ---- */

/* Start the first interpreter matching pattern and probe its libpython. */
static void probe_old(const char *pattern, int want)
{
	char exe[PATH_MAX], maps[64], *line = NULL;
	char *argv[] = { exe, "-c", "import sys; print(1, flush=True); sys.stdin.read()", NULL };
	struct pyinfo info;
	struct child ch;
	size_t cap = 0;
	bool probed = false;
	glob_t g;
	FILE *f;

	if (glob(pattern, 0, NULL, &g) || !g.gl_pathc) {
		globfree(&g);
		fprintf(stderr, "test_python: no %s here\n", pattern);
		return;
	}
	snprintf(exe, sizeof(exe), "%s", g.gl_pathv[0]);
	globfree(&g);
	assert_int_equal(child_spawn(&ch, argv), 0);
	assert_non_null(child_line(&ch));
	snprintf(maps, sizeof(maps), "/proc/%d/maps", ch.pid);
	f = fopen(maps, "r");
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		struct procmaps_entry m;
		uint64_t bias;
		int fd;

		if (procmaps__parse_line(line, &m) || m.pgoff || !strstr(m.path, "libpython"))
			continue;
		fd = open(m.path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(elf_bias(fd, m.start, &bias), 0);
		assert_int_equal(pyproc__probe(ch.pid, fd, m.path, bias, &info), want);
		close(fd);
		probed = true;
	}
	free(line);
	fclose(f);
	child_stop(&ch);
	assert_true(probed);
}

static void test_unsupported(void **state)
{
	char pat[PATH_MAX];
	struct pyinfo info;
	int fd;

	(void)state;
	/* 3.7 has _PyRuntime but no layout here; 3.6 has no _PyRuntime at all. */
	snprintf(pat, sizeof(pat), "%s/versions/3.7.*/bin/python3.7", pyenv_root());
	probe_old(pat, -ENOTSUP);
	snprintf(pat, sizeof(pat), "%s/versions/3.6.*/bin/python3.6", pyenv_root());
	probe_old(pat, -ENOENT);

	fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pyproc__probe(getpid(), fd, "/bin/true", 0, &info), -ENOENT);
	close(fd);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pyproc__probe(getpid(), fd, "python3.9", 0, &info), -ENOENT);
	close(fd);
}

/* ---- _Py_DebugOffsets: the real block of 3.13, then damaged copies ---- */

/* A _Py_DebugOffsets block of a real interpreter (the fixtures debug_offsets-3.X.Y.bin) into buf. */
static size_t read_block(const char *name, uint8_t *buf, size_t cap)
{
	char path[PATH_MAX + 64];
	size_t n;
	FILE *f;

	memset(buf, 0, cap);
	snprintf(path, sizeof(path), "%s/%s", scripts, name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

static void set_version(uint8_t *buf, uint32_t v)
{
	uint64_t w = v;

	memcpy(buf + 8, &w, 8);
}

/*
 * Debian's 3.13, 3.14 and 3.15 blocks decode to the offsets their headers
 * give; a 3.15 block with its version raised (a 3.16 or 3.20 that kept
 * 3.15's block) still decodes, with 3.15's layout, said in info.layout; an
 * older block claiming a newer version does not fit and is refused; damage
 * is refused.
 */
static void test_debug_offsets(void **state)
{
	static const struct {
		const char *file;
		uint32_t minor;
		int32_t ts_frame, ts_tid, ts_native, ceval_gil, co_filename, co_adaptive;
		uint8_t shim;
	} blocks[] = {
		/*
		 * offsetof()s compiled against each one's headers (python3.X-dev
		 * in the sid root, gcc there): PyThreadState current_frame,
		 * thread_id, native_thread_id; PyInterpreterState ceval.gil;
		 * PyCodeObject co_filename, co_code_adaptive
		 */
		{ "debug_offsets-3.13.18.bin", 13, 72, 152, 160, 16, 112, 200, 3 },
		{ "debug_offsets-3.14.10.bin", 14, 72, 152, 160, 16, 112, 208, 3 },
		{ "debug_offsets-3.15.2.bin", 15, 72, 176, 184, 16, 112, 208, 3 },
	};
	uint8_t real[PY_DEBUG_OFFSETS_MAX], buf[PY_DEBUG_OFFSETS_MAX];
	struct pyinfo info, raised;
	const struct pylayout *l;
	size_t len;
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		len = read_block(blocks[i].file, real, sizeof(real));
		assert_true(len >= 73 * 8);
		assert_int_equal(pyoffsets__from_debug(real, len, &info), 0);
		l = pyinfo__layout(&info);
		assert_int_equal(info.layout, PYVER(3, blocks[i].minor));
		assert_int_equal(PYVER_MINOR(info.version), PYVER(3, blocks[i].minor));
		assert_int_equal(info.bpf.model, PY_MODEL_IFRAME);
		assert_int_equal(info.bpf.frame_code, 0);
		assert_int_equal(info.bpf.frame_back, 8);
		assert_int_equal(info.bpf.frame_globals, 24);
		assert_int_equal(info.bpf.tstate_frame, blocks[i].ts_frame);
		assert_int_equal(info.bpf.owner_cstack, blocks[i].shim);
		assert_int_equal(info.bpf.frame_tlbc, 0); /* GIL builds: no per-thread bytecode */
		assert_int_equal(l->ts_thread_id, blocks[i].ts_tid);
		assert_int_equal(l->ts_native_id, blocks[i].ts_native);
		assert_int_equal(l->co_filename, blocks[i].co_filename);
		assert_int_equal(l->co_code_adaptive, blocks[i].co_adaptive);
		assert_int_equal(l->ob_type, 8);
		assert_int_equal(l->free_threaded, 0);
		/* the GIL: interp->ceval.gil, then last_holder, locked in it */
		assert_int_equal(l->is_ceval_gil, blocks[i].ceval_gil);
		assert_int_equal(l->gil_holder, 8);
		assert_int_equal(l->gil_locked, 16);
		/* thread names: derived where the block is silent, given from 3.15 */
		assert_int_equal(l->md_dict, 16);
		assert_int_equal(l->tp_basicsize, 32);
		assert_int_equal(l->tp_dictoffset, 288);
		assert_int_equal(l->inst_dict, PY_INST_313);
		assert_true(l->is_modules > 0);

		/* the same block claiming a newer version: the newest layout, said */
		memcpy(buf, real, sizeof(buf));
		set_version(buf, PYVER(3, 20) | 0x00a1);
		if (blocks[i].minor == 15) {
			assert_int_equal(pyoffsets__from_debug(buf, len, &raised), 0);
			assert_int_equal(raised.layout, PYVER(3, 15));
			assert_int_equal(raised.version, PYVER(3, 20) | 0x00a1);
			assert_memory_equal(&raised.bpf.tstate_frame, &info.bpf.tstate_frame,
					    sizeof(info.bpf) -
						    offsetof(struct bpf_pyproc, tstate_frame));
			assert_memory_equal(raised.priv, info.priv, sizeof(info.priv));
			set_version(buf, PYVER(3, 16) | 0xf0);
			assert_int_equal(pyoffsets__from_debug(buf, len, &raised), 0);
			assert_int_equal(raised.layout, PYVER(3, 15));
		} else {
			/* an older block does not fit the newest layout: refused */
			assert_int_equal(pyoffsets__from_debug(buf, len, &raised), -EINVAL);
		}
	}
	/* 3.15 gives tp_basicsize, tp_dictoffset, ht_cached_keys: the 3.13/3.14 derivations hold */
	len = read_block("debug_offsets-3.15.2.bin", real, sizeof(real));
	assert_int_equal(pyoffsets__from_debug(real, len, &info), 0);
	l = pyinfo__layout(&info);
	{
		uint64_t tp_size, tp_name, ht;

		memcpy(&tp_size, real + 8 * 60, 8); /* type_object.size */
		memcpy(&tp_name, real + 8 * 61, 8);
		memcpy(&ht, real + 8 * 67, 8); /* heap_type_object.ht_cached_keys */
		assert_int_equal(l->tp_basicsize, tp_name + 8);
		assert_int_equal(l->tp_dictoffset, tp_name + 264);
		assert_int_equal(l->ht_cached_keys, ht);
		assert_int_equal(ht, tp_size + 464);
	}

	/*
	 * A target's word of 2^64 - 1 (or just under) where an offset goes: its
	 * sum with the field's width wraps below the struct's size, and once
	 * made the layout's -1 ("absent"): pycode read 8 bytes before its
	 * buffer (fuzz_pycode, ASan). Refused, or every field still in bounds.
	 */
	len = read_block("debug_offsets-3.15.2.bin", real, sizeof(real));
	for (size_t w = 3; w < len / 8; w++) {
		for (uint64_t bad = UINT64_MAX - 8; bad; bad++) {
			memcpy(buf, real, sizeof(buf));
			memcpy(buf + 8 * w, &bad, 8);
			if (pyoffsets__from_debug(buf, len, &info))
				continue;
			l = pyinfo__layout(&info);
			assert_true(l->ob_type >= 0 && l->co_filename >= 0 && l->co_name >= 0 &&
				    l->co_linetable >= 0 && l->co_varnames >= 0 &&
				    l->co_firstlineno >= 0 && l->co_argcount >= 0 &&
				    l->co_read <= 512);
		}
	}

	len = read_block("debug_offsets-3.13.18.bin", real, sizeof(real));
	assert_int_equal(pyoffsets__from_debug(real, 16, &info), -EINVAL);
	memcpy(buf, real, sizeof(buf));
	buf[0] = 'y';
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	/* Claiming 3.12: those never carry the block. */
	memcpy(buf, real, sizeof(buf));
	set_version(buf, PYVER(3, 12) | 0xf0);
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	/* 3.13's block read as 3.14's: the fields do not fit the sizes. */
	set_version(buf, PYVER(3, 14) | 0xf0);
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	/* free_threaded neither 0 nor 1 */
	memcpy(buf, real, sizeof(buf));
	v = 7;
	memcpy(buf + 16, &v, 8);
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	/* thread_state.size too small for its fields, then absurdly large offsets */
	memcpy(buf, real, sizeof(buf));
	v = 8;
	memcpy(buf + 8 * 19, &v, 8);
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	memcpy(buf, real, sizeof(buf));
	v = 1ULL << 40;
	memcpy(buf + 8 * 35, &v, 8);
	assert_int_equal(pyoffsets__from_debug(buf, len, &info), -EINVAL);
	/* a block cut before its last member */
	assert_int_equal(pyoffsets__from_debug(real, 8 * 60, &info), -EINVAL);
}

/* ---- pure functions ---- */

static void test_instr_offset(void **state)
{
	struct pyinfo info;
	uint64_t code = 0x7f0000001000ULL;

	(void)state;
	assert_int_equal(pyoffsets__from_table(PYVER(3, 9) | 0xf0, &info), 0);
	assert_int_equal(pycode__instr_offset(&info, code, 0xffffffffULL), 0);
	assert_int_equal(pycode__instr_offset(&info, code, 24), 24);
	assert_int_equal(pycode__instr_offset(&info, code, 25), UINT32_MAX);
	assert_int_equal(pycode__instr_offset(&info, code, 24 | PYFRAME_F_ENTRY), 24);
	assert_int_equal(pyoffsets__from_table(PYVER(3, 10) | 0xf0, &info), 0);
	assert_int_equal(pycode__instr_offset(&info, code, 12), 24);
	assert_int_equal(pycode__instr_offset(&info, code, 0xffffffffULL), 0);
	assert_int_equal(pyoffsets__from_table(PYVER(3, 11) | 0x7f0, &info), 0);
	assert_int_equal(info.code_adaptive, 184);
	assert_int_equal(pycode__instr_offset(&info, code, code + 184 - 2), 0);
	assert_int_equal(pycode__instr_offset(&info, code, code + 184 + 30), 30);
	assert_int_equal(pycode__instr_offset(&info, code, code + 184 + 31), UINT32_MAX);
	assert_int_equal(pycode__instr_offset(&info, code, code), UINT32_MAX);
	assert_int_equal(pycode__instr_offset(&info, code, 0), UINT32_MAX);
	assert_int_equal(pyoffsets__from_table(PYVER(3, 12) | 0x1f0, &info), 0);
	assert_int_equal(pycode__instr_offset(&info, code, code + 192 + 8), 8);
	assert_int_equal(pyoffsets__from_table(PYVER(3, 7), &info), -ENOTSUP);
	assert_int_equal(pyoffsets__from_table(PYVER(3, 13), &info), -ENOTSUP);
}

static void test_line_tables_by_hand(void **state)
{
	/* 3.9 lnotab: +6 bytes +1 line, +4 bytes -2 lines. */
	uint8_t lnotab[] = { 6, 1, 4, 0xfe };
	/* 3.10: 4 bytes no line, 0-width +300 via two pairs, 6 bytes +1. */
	uint8_t t310[] = { 4, 0x80, 0, 127, 0, 127, 6, 1 };
	/*
	 * 3.11 locations: 2 units one-line +1 (code 11), 1 unit no-columns -3
	 * (code 13, varint 7), 1 unit none (code 15), 1 unit long +200 (varint
	 * 400: 0x50 | 0x40, 6) with three more varints.
	 */
	uint8_t loc[] = { 0x80 | 11 << 3 | 1,
			  0,
			  4,
			  0x80 | 13 << 3,
			  7,
			  0x80 | 15 << 3,
			  0x80 | 14 << 3,
			  0x40 | 16,
			  6,
			  0,
			  1,
			  2 };
	struct pycode c = { .firstlineno = 10 };

	(void)state;
	c.version = PYVER(3, 9);
	c.linetable = lnotab;
	c.linetable_len = sizeof(lnotab);
	assert_int_equal(pycode__line(&c, 0), 10);
	assert_int_equal(pycode__line(&c, 6), 11);
	assert_int_equal(pycode__line(&c, 10), 9);
	assert_int_equal(pycode__line(&c, 1000), 9);

	c.version = PYVER(3, 10);
	c.linetable = t310;
	c.linetable_len = sizeof(t310);
	assert_int_equal(pycode__line(&c, 0), 0);
	assert_int_equal(pycode__line(&c, 4), 10 + 254 + 1);
	assert_int_equal(pycode__line(&c, 9), 265);
	assert_int_equal(pycode__line(&c, 10), 0);

	c.version = PYVER(3, 12);
	c.linetable = loc;
	c.linetable_len = sizeof(loc);
	assert_int_equal(pycode__line(&c, 0), 11);
	assert_int_equal(pycode__line(&c, 2), 11);
	assert_int_equal(pycode__line(&c, 4), 8);
	assert_int_equal(pycode__line(&c, 6), 0);
	assert_int_equal(pycode__line(&c, 8), 208);
	assert_int_equal(pycode__line(&c, 10), 0);
	/* A varint that never ends, an entry that does not start an entry. */
	c.linetable_len = 8;
	assert_int_equal(pycode__line(&c, 8), 0);
	loc[0] = 0x10;
	assert_int_equal(pycode__line(&c, 0), 0);
}

/*
 * A varint that runs into a byte starting the next entry (0x80 set) is
 * garbage: no line from it on. Read on, it would end entries elsewhere than
 * pyline__covered counts them, and a cut table would disagree with the
 * whole below what it claims to cover (found by tests/fuzz/fuzz_pyline).
 */
static void test_line_varint_into_entry(void **state)
{
	/* +1 (no columns, varint 2); no columns with varint 0x41, 0x88; two entries */
	static const uint8_t loc[] = { 0x80 | 13 << 3, 2, 0x80 | 13 << 3, 0x41, 0x88, 0x88 };
	struct pycode c = { .firstlineno = 1000, .version = PYVER(3, 11) };

	(void)state;
	c.linetable = (uint8_t *)loc;
	c.linetable_len = sizeof(loc);
	assert_int_equal(pycode__line(&c, 0), 1001);
	assert_int_equal(pycode__line(&c, 2), 0);
	assert_int_equal(pycode__line(&c, 4), 0);
	/* what a cut after the third entry's first byte covers: the first two entries */
	assert_int_equal(pyline__covered(c.version, loc, 5), 4);
}

static void test_line_fuzz(void **state)
{
	static const uint32_t versions[] = { PYVER(3, 8), PYVER(3, 10), PYVER(3, 11) };
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	uint8_t buf[96];
	size_t round, i, v;

	(void)state;
	for (round = 0; round < 3000; round++) {
		struct pycode c = { .firstlineno = (uint32_t)(round * 7919) };
		size_t len = round % sizeof(buf);

		for (i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = (uint8_t)x;
		}
		/* Exactly the table's bytes: ASan/valgrind see any read past them. */
		c.linetable = malloc(len ? len : 1);
		assert_non_null(c.linetable);
		memcpy(c.linetable, buf, len);
		c.linetable_len = len;
		for (v = 0; v < 3; v++) {
			c.version = versions[v];
			for (i = 0; i < 600; i += 2)
				(void)pycode__line(&c, (uint32_t)i);
			(void)pycode__line(&c, UINT32_MAX);
		}
		free(c.linetable);
	}
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

static void put32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}

static void test_dict_keys(void **state)
{
	struct pyinfo info;
	const struct pylayout *l = pyinfo__layout(&info);
	uint8_t h[PYKEYS_HDR];
	struct pykeys k;
	uint64_t a = 0x7f0000002000ULL;

	(void)state;
	/* 3.8-3.10: dk_size 8 (1-byte indices), 5 entries */
	assert_int_equal(pyoffsets__from_table(PYVER(3, 9) | 0xf0, &info), 0);
	memset(h, 0, sizeof(h));
	put64(h, 8, 8);
	put64(h, 32, 5);
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_true(k.entries == a + 40 + 8);
	assert_int_equal(k.nentries, 5);
	assert_int_equal(k.esize, 24);
	assert_int_equal(k.ekey, 8);
	assert_int_equal(k.evalue, 16);
	put64(h, 8, 512); /* 2-byte indices */
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_true(k.entries == a + 40 + 1024);
	put64(h, 8, 1 << 17); /* 4-byte indices */
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_true(k.entries == a + 40 + 4 * (1 << 17));
	put64(h, 8, 24); /* not a power of two */
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
	put64(h, 8, 8);
	put64(h, 32, 6); /* more than 2/3 of 8 */
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
	put64(h, 32, (uint64_t)-1);
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);

	/* 3.11+: log2 sizes, kind */
	assert_int_equal(pyoffsets__from_table(PYVER(3, 12) | 0x1f0, &info), 0);
	memset(h, 0, sizeof(h));
	h[8] = 3;
	h[9] = 3;
	h[10] = 1; /* DICT_KEYS_UNICODE */
	put64(h, 24, 5);
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_true(k.entries == a + 32 + 8);
	assert_int_equal(k.esize, 16);
	assert_int_equal(k.ekey, 0);
	assert_int_equal(k.evalue, 8);
	h[10] = 0; /* DICT_KEYS_GENERAL */
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_int_equal(k.esize, 24);
	assert_int_equal(k.ekey, 8);
	h[10] = 2; /* DICT_KEYS_SPLIT */
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_int_equal(k.esize, 16);
	h[10] = 3;
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
	h[10] = 1;
	h[8] = 8; /* 256 slots: 2-byte indices */
	h[9] = 9;
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	assert_true(k.entries == a + 32 + 512);
	h[9] = 8; /* index bytes that do not fit the size */
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
	h[8] = 16;
	h[9] = 18;
	assert_int_equal(pykeys__parse(l, a, h, &k), 0);
	h[8] = 40; /* absurd */
	h[9] = 42;
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
	h[8] = 2;
	h[9] = 2;
	assert_int_equal(pykeys__parse(l, a, h, &k), -EINVAL);
}

static void test_long_ident(void **state)
{
	struct pyinfo info;
	const struct pylayout *l = pyinfo__layout(&info);
	/* a pthread_t: 0x7f3a12345678 = digits 0x12345678, 0x1fce8 (30 bits each) */
	uint64_t ident = 0x7f3a12345678ULL, v = 0;
	uint8_t o[48];

	(void)state;
	assert_int_equal(pyoffsets__from_table(PYVER(3, 11) | 0x7f0, &info), 0);
	memset(o, 0, sizeof(o));
	put64(o, 16, 2); /* ob_size */
	put32(o, 24, (uint32_t)(ident & 0x3fffffff));
	put32(o, 28, (uint32_t)(ident >> 30));
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), 0);
	assert_true(v == ident);
	put64(o, 16, (uint64_t)-2); /* negative */
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
	put64(o, 16, 4); /* more than 64 bits */
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
	put64(o, 16, 3); /* top digit beyond 64 bits */
	put32(o, 32, 16);
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
	put32(o, 32, 15);
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), 0);
	assert_true(v >> 60 == 15);
	assert_int_equal(pylong__u64(l, o, 32, &v), -ENOSPC); /* the third digit not given */
	put64(o, 16, 1);
	put32(o, 24, 1u << 30); /* not a 30-bit digit */
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
	assert_int_equal(pylong__u64(l, o, 20, &v), -EINVAL); /* short buffer */

	assert_int_equal(pyoffsets__from_table(PYVER(3, 12) | 0x1f0, &info), 0);
	memset(o, 0, sizeof(o));
	put64(o, 16, 2 << 3); /* lv_tag: 2 digits, positive */
	put32(o, 24, (uint32_t)(ident & 0x3fffffff));
	put32(o, 28, (uint32_t)(ident >> 30));
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), 0);
	assert_true(v == ident);
	put64(o, 16, 2 << 3 | 2); /* negative */
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
	put64(o, 16, 1); /* zero */
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), 0);
	assert_true(v == 0);
	put64(o, 16, 4 << 3);
	assert_int_equal(pylong__u64(l, o, sizeof(o), &v), -EINVAL);
}

static void test_name_clean(void **state)
{
	char out[PYNAME_MAX], big[400];

	(void)state;
	pyname__clean("worker-3", out, sizeof(out));
	assert_string_equal(out, "worker-3");
	pyname__clean("a\tb\nc\x7f"
		      "d",
		      out, sizeof(out));
	assert_string_equal(out, "a\\x09b\\x0ac\\x7fd");
	/* an escape is cut whole, never half */
	pyname__clean("ab\x1b", out, 6);
	assert_string_equal(out, "ab");
	pyname__clean("ab\x1b", out, 7);
	assert_string_equal(out, "ab\\x1b");
	/* cut at a character boundary: "é" does not fit in the last byte */
	pyname__clean("ab\xc3\xa9", out, 4);
	assert_string_equal(out, "ab");
	pyname__clean("ab\xc3\xa9", out, 5);
	assert_string_equal(out, "ab\xc3\xa9");
	/* invalid UTF-8 ends the name */
	pyname__clean("ok\xc3(x", out, sizeof(out));
	assert_string_equal(out, "ok");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pyname__clean(big, out, sizeof(out));
	assert_int_equal(strlen(out), PYNAME_MAX - 1);
	pyname__clean("x", out, 1);
	assert_string_equal(out, "");
}

/*
 * pytrack (collect/pytrack.c) over a live interpreter: found from its
 * mappings, its layout and threads written to BPF maps (real ones: needs
 * root), code objects named by stable ids, its state let go after its exit.
 */
static void test_pytrack(void **state)
{
	struct pyexe *e = exe_or_skip(state);
	int procs_fd, threads_fd;
	struct objtab *objs;
	struct proctab *pt;
	struct pytrack *t;
	struct live *lv;
	uint64_t ids[MAX_CODES], tstate;
	struct bpf_pyproc layout;
	struct proc *p;
	uint32_t off;
	pid_t pid;

	if (geteuid())
		skip_because("not root: creates BPF maps");
	procs_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "t_py_procs", sizeof(__u32),
				  sizeof(struct bpf_pyproc), 16, NULL);
	threads_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "t_py_threads", sizeof(__u32), sizeof(__u64),
				    256, NULL);
	assert_true(procs_fd >= 0 && threads_fd >= 0);
	objs = objtab__new();
	pt = objs ? proctab__new(objs) : NULL;
	assert_non_null(pt);
	assert_int_equal(pytrack__new(&t, procs_fd, threads_fd, objs), 0);

	lv = calloc(1, sizeof(*lv));
	assert_non_null(lv);
	assert_int_equal(child_start(&lv->ch, e->path, "live.py", NULL, NULL), 0);
	pid = lv->pid = lv->ch.pid;
	assert_true(live_read(lv));

	/* found from its mappings: layout and both threads' states in BPF */
	assert_false(pytrack__seen(t, pid));
	p = proctab__lookup(pt, pid, 0);
	assert_non_null(p);
	pytrack__sync(t, p);
	assert_true(pytrack__seen(t, pid));
	assert_true(pytrack__is_python(t, pid));
	assert_int_equal(bpf_map_lookup_elem(procs_fd, &pid, &layout), 0);
	assert_int_equal((layout.version >> 16) & 0xff, e->minor); /* 0x030b0000: 3.11 */
	assert_int_equal(bpf_map_lookup_elem(threads_fd, &lv->main_tid, &tstate), 0);
	assert_true(tstate != 0);
	assert_int_equal(bpf_map_lookup_elem(threads_fd, &lv->worker_tid, &tstate), 0);
	assert_int_equal(pytrack__stats(t)->interpreters, 1);

	/* code objects: one id each, the same id again, named as Python says */
	for (size_t i = 0; i < lv->ncodes; i++) {
		const char *qualname, *file;
		uint32_t line;

		ids[i] = pytrack__code(t, pid, lv->codes[i].addr, 0, &off);
		assert_true(ids[i] > 0);
		for (size_t j = 0; j < i; j++)
			assert_true(ids[j] != ids[i]);
		assert_true(pytrack__code(t, pid, lv->codes[i].addr, 0, &off) == ids[i]);
		assert_int_equal(pytrack__describe(t, ids[i], UINT32_MAX, &qualname, &file, &line),
				 0);
		assert_string_equal(file, lv->codes[i].filename);
		assert_int_equal(line, lv->codes[i].firstlineno);
		if (e->minor >= 11)
			assert_string_equal(qualname, lv->codes[i].qualname);
	}
	/*
	 * A cached code object sampled all the time is checked for reuse every
	 * 0.1 s until it is 0.4 s old, then each time twice as late while it is
	 * found the same (REVALIDATE_FLAT, REVALIDATE_MAX_SHIFT): over 3 s of
	 * samples every 20 ms, 7 checks (0.1, 0.2, 0.3, 0.4, 0.6, 1.0, 1.8 s,
	 * later with the sampling's 20 ms steps), not 25-30. Once per run of
	 * the suite: it sleeps.
	 */
	{
		static bool backoff_done;
		uint64_t checks0 = pytrack__stats(t)->code_checks;
		uint64_t t0 = mono_ns(), n;

		if (!backoff_done) {
			backoff_done = true;
			while (mono_ns() - t0 < 3000 * 1000000ULL) {
				assert_true(pytrack__code(t, pid, lv->codes[0].addr, 0, &off) ==
					    ids[0]);
				usleep(20000);
			}
			n = pytrack__stats(t)->code_checks - checks0;
			assert_true(n >= 6 && n <= 9);
			assert_int_equal(pytrack__stats(t)->code_reused, 0);
		}
	}
	/* not a code object: an id (its snapshot might still come) that names nothing */
	{
		const char *qualname, *file;
		uint32_t line;
		uint64_t id =
			pytrack__code(t, pid, lv->info.runtime ? lv->info.runtime : 8, 0, &off);

		assert_true(id == 0 || pytrack__describe(t, id, UINT32_MAX, &qualname, &file,
							 &line) == -ENOENT);
	}
	/* a process pytrack never saw, and address 0: no id */
	assert_true(pytrack__code(t, 1, lv->codes[0].addr, 0, &off) == 0);
	assert_true(pytrack__code(t, pid, 0, 0, &off) == 0);

	/* the process ends: forgotten, its BPF entries gone, its code objects freed */
	child_say(&lv->ch, "exit\n");
	child_stop(&lv->ch);
	pytrack__forget(t, pid, true);
	/* samples taken before the exit are still named until gc (end of an interval) */
	{
		const char *qualname, *file;
		uint32_t line;

		assert_int_equal(pytrack__describe(t, ids[0], UINT32_MAX, &qualname, &file, &line),
				 0);
		assert_string_equal(file, lv->codes[0].filename);
	}
	assert_int_equal(bpf_map_lookup_elem(procs_fd, &pid, &layout), -ENOENT);
	assert_int_equal(bpf_map_lookup_elem(threads_fd, &lv->main_tid, &tstate), -ENOENT);
	assert_true(pytrack__gc(t) >= lv->ncodes);

	pytrack__free(t);
	proctab__free(pt);
	objtab__free(objs);
	close(procs_fd);
	close(threads_fd);
	free(lv);
}

#define PER_EXE(fn)                                                                               \
	cmocka_unit_test_prestate(fn, &exes[0]), cmocka_unit_test_prestate(fn, &exes[1]),         \
		cmocka_unit_test_prestate(fn, &exes[2]), cmocka_unit_test_prestate(fn, &exes[3]), \
		cmocka_unit_test_prestate(fn, &exes[4]), cmocka_unit_test_prestate(fn, &exes[5]), \
		cmocka_unit_test_prestate(fn, &exes[6])

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_tables_by_hand),
		cmocka_unit_test(test_line_varint_into_entry),
		cmocka_unit_test(test_line_fuzz),
		cmocka_unit_test(test_instr_offset),
		cmocka_unit_test(test_dict_keys),
		cmocka_unit_test(test_long_ident),
		cmocka_unit_test(test_name_clean),
		PER_EXE(test_lines),
		PER_EXE(test_live),
		PER_EXE(test_thread_names),
		PER_EXE(test_pytrack),
		cmocka_unit_test_prestate(test_pid_namespace, &exes[1]),
		cmocka_unit_test_prestate(test_pid_namespace, &exes[4]),
		cmocka_unit_test(test_debug_offsets),
		cmocka_unit_test(test_unsupported),
	};

	_Static_assert(sizeof(exes) / sizeof(exes[0]) == 7, "PER_EXE covers exes");
	return cmocka_run_group_tests(tests, setup_all, NULL);
}
