// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * inject (inject.h): a function call made in a running process through
 * ptrace, at a safe point, with the thread put back as it was.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <asm/unistd.h>
#include <gelf.h>
#include <libelf.h>

#include "collect/inject.h"
#include "collect/uprobes.h"
#include "proc/procmaps.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/tfile.h"

/* errnos of a system call interrupted to stop the thread (the kernel restarts it) */
#define ERESTARTSYS	      512
#define ERESTARTNOINTR	      513
#define ERESTARTNOHAND	      514
#define ERESTART_RESTARTBLOCK 516

#define SAFE_FOR_NS  (1000ULL * 1000 * 1000) /* looking for a safe point */
#define CALL_WAIT_NS (10ULL * 1000 * 1000 * 1000)
#define STACK_SCAN   8192 /* bytes above the stack pointer looked at */

static void whyf(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* Executable mappings of the process, by what they are. */
struct region {
	uint64_t lo, hi, pgoff;
	uint32_t maj, min;
	uint64_t ino;
	bool alloc; /* its file defines malloc (libc, jemalloc, an executable with its own) */
	char path[256];
};

struct maps {
	struct region r[512];
	int n;
};

static int maps_cb(const struct procmaps_entry *e, void *ctx)
{
	struct maps *m = ctx;

	if (m->n >= (int)(sizeof(m->r) / sizeof(m->r[0])))
		return 0;
	m->r[m->n] = (struct region){ .lo = e->start,
				      .hi = e->end,
				      .pgoff = e->pgoff,
				      .maj = e->dev_major,
				      .min = e->dev_minor,
				      .ino = e->ino };
	snprintf(m->r[m->n].path, sizeof(m->r[0].path), "%s", e->path);
	m->n++;
	return 0;
}

static int maps_read(uint32_t pid, struct maps *m)
{
	char path[64];
	FILE *f;

	m->n = 0;
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	procmaps__for_each_exec(f, maps_cb, m);
	fclose(f);
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static bool is_libc(const struct region *r)
{
	const char *b = base_name(r->path);

	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5);
}

static bool is_loader(const struct region *r)
{
	return !strncmp(base_name(r->path), "ld-linux", 8);
}

/*
 * Code the process must not be stopped in: libc, the loader, an allocator
 * (any file that defines malloc: jemalloc, or an executable with its own),
 * ours.
 */
static bool is_runtime(const struct region *r)
{
	const char *b = base_name(r->path);

	return r->alloc || is_libc(r) || is_loader(r) ||
	       (!strncmp(b, "lib", 3) && strstr(b, "malloc")) || strstr(b, "libbpfprof_heap") ||
	       !strncmp(b, "libpthread", 10) || !strncmp(b, "libdl", 5);
}

/* Mark the mappings of files that define malloc (maps_read's, once per injection). */
static void mark_allocators(uint32_t pid, struct maps *m)
{
	for (int i = 0; i < m->n; i++) {
		struct region *r = &m->r[i];
		char link[96];
		struct stat st;
		uint64_t off;
		int fd;

		if (r->path[0] != '/')
			continue;
		for (int j = 0; j < i; j++)
			if (m->r[j].ino == r->ino && m->r[j].maj == r->maj &&
			    m->r[j].min == r->min) {
				r->alloc = m->r[j].alloc;
				goto next;
			}
		snprintf(link, sizeof(link), "/proc/%u/map_files/%llx-%llx", pid,
			 (unsigned long long)r->lo, (unsigned long long)r->hi);
		fd = tfile__open_link(link, &st);
		if (fd < 0) {
			r->alloc = true; /* unknown: as if */
			continue;
		}
		r->alloc = !uprobes__func_offset(fd, "malloc", &off);
		close(fd);
next:;
	}
}

static const struct region *region_of(const struct maps *m, uint64_t addr)
{
	for (int i = 0; i < m->n; i++)
		if (addr >= m->r[i].lo && addr < m->r[i].hi)
			return &m->r[i];
	return NULL;
}

/* The run-time address of func in the file of the mapping pred picks; 0 if none. */
static uint64_t func_addr(uint32_t pid, const struct maps *m,
			  bool (*pred)(const struct region *, const void *), const void *arg,
			  const char *func)
{
	for (int i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];
		char link[96];
		struct stat st;
		uint64_t off;
		int fd;

		if (!pred(r, arg))
			continue;
		snprintf(link, sizeof(link), "/proc/%u/map_files/%llx-%llx", pid,
			 (unsigned long long)r->lo, (unsigned long long)r->hi);
		fd = tfile__open_link(link, &st);
		if (fd < 0)
			continue;
		if (uprobes__func_offset(fd, func, &off)) {
			close(fd);
			continue;
		}
		close(fd);
		/* the executable mapping that holds that file offset */
		for (int j = 0; j < m->n; j++) {
			const struct region *x = &m->r[j];

			if (x->ino == r->ino && x->maj == r->maj && x->min == r->min &&
			    off >= x->pgoff && off - x->pgoff < x->hi - x->lo)
				return x->lo + (off - x->pgoff);
		}
	}
	return 0;
}

/* The size of libc's function func (.dynsym), into *size; 0 or -ENOENT. */
static int func_size(uint32_t pid, const struct maps *m, const char *func, uint64_t *size)
{
	for (int i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];
		char link[96];
		struct stat st;
		GElf_Sym sym;
		Elf *e;
		int fd, ret;

		if (!is_libc(r))
			continue;
		snprintf(link, sizeof(link), "/proc/%u/map_files/%llx-%llx", pid,
			 (unsigned long long)r->lo, (unsigned long long)r->hi);
		fd = tfile__open_link(link, &st);
		if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE ||
		    !(e = elf_begin(fd, ELF_C_READ, NULL))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		ret = uprobes__elf_func(e, SHT_DYNSYM, func, &sym);
		if (!ret)
			*size = sym.st_size;
		elf_end(e);
		close(fd);
		return ret;
	}
	return -ENOENT;
}

static bool pick_libc(const struct region *r, const void *arg)
{
	(void)arg;
	return is_libc(r);
}

static bool pick_file(const struct region *r, const void *arg)
{
	const struct stat *st = arg;

	return r->ino == st->st_ino && r->maj == major(st->st_dev) && r->min == minor(st->st_dev);
}

/*
 * System calls a thread can be stopped in with no lock held that the loader
 * or the allocator needs: it waits for the outside world. Not futex (a lock
 * it waits for may be one of theirs, and it may hold another), not mmap,
 * brk, munmap, madvise or mprotect (the allocator's own, under its lock).
 */
static bool safe_syscall(long nr)
{
	switch (nr) {
	case __NR_read:
	case __NR_readv:
	case __NR_pread64:
	case __NR_poll:
	case __NR_ppoll:
	case __NR_select:
	case __NR_pselect6:
	case __NR_epoll_wait:
	case __NR_epoll_pwait:
	case __NR_epoll_pwait2:
	case __NR_nanosleep:
	case __NR_clock_nanosleep:
	case __NR_pause:
	case __NR_rt_sigsuspend:
	case __NR_rt_sigtimedwait:
	case __NR_accept:
	case __NR_accept4:
	case __NR_recvfrom:
	case __NR_recvmsg:
	case __NR_recvmmsg:
	case __NR_wait4:
	case __NR_waitid:
	case __NR_msgrcv:
	case __NR_semtimedop:
	case __NR_io_getevents:
	case __NR_io_uring_enter:
		return true;
	}
	return false;
}

static bool interrupted(const struct user_regs_struct *r)
{
	long ax = (long)r->rax;

	return (long)r->orig_rax >= 0 &&
	       (ax == -EINTR || ax == -ERESTARTSYS || ax == -ERESTARTNOINTR ||
		ax == -ERESTARTNOHAND || ax == -ERESTART_RESTARTBLOCK);
}

/* Whether the code at addr is a signal return trampoline (mov $15, %eax/%rax; syscall). */
static bool sigreturn_at(pid_t tid, uint64_t addr)
{
	static const uint8_t rt1[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	static const uint8_t rt2[] = { 0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	uint8_t code[sizeof(rt1)];
	struct iovec local = { code, sizeof(code) }, remote = { (void *)addr, sizeof(code) };

	if (process_vm_readv(tid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(code))
		return true; /* unreadable: as if */
	return !memcmp(code, rt1, sizeof(rt1)) || !memcmp(code, rt2, sizeof(rt2));
}

/*
 * Whether the stopped thread may run the loader and the allocator now
 * (inject.h). In its own code, the words above its stack pointer are its
 * frames up to the first return into libc: a return into the loader or an
 * allocator before that is a constructor or a hook running (their locks
 * held), one into libc's dl_iterate_phdr a callback of it (the loader's
 * write lock, not recursive); a return into libc's signal trampoline is a
 * handler that may have interrupted malloc. The first other libc address
 * ends the look (qsort's callback, or the start: __libc_start_main keeps a
 * pointer into the loader higher up). No libc address in STACK_SCAN bytes:
 * not known, so not safe.
 */
static bool safe_point(pid_t tid, const struct user_regs_struct *r, const struct maps *m,
		       uint64_t iter_lo, uint64_t iter_hi)
{
	const struct region *at = region_of(m, r->rip);
	static uint64_t words[STACK_SCAN / 8];
	ssize_t n;

	bool in_syscall = interrupted(r);

	/* a system call made by the loader or an allocator (their locks may be held) */
	if (in_syscall ? !safe_syscall((long)r->orig_rax) || (at && is_runtime(at) && !is_libc(at))
		       : !at || is_runtime(at))
		return false;
	/* up to the stack's top, which may be nearer than STACK_SCAN: page by page */
	for (n = 0; n < (ssize_t)sizeof(words);) {
		uint64_t a = r->rsp + (uint64_t)n, chunk = 4096 - (a & 4095);
		struct iovec l, rm;

		if (chunk > sizeof(words) - (size_t)n)
			chunk = sizeof(words) - (size_t)n;
		l = (struct iovec){ (char *)words + n, chunk };
		rm = (struct iovec){ (void *)a, chunk };
		if (process_vm_readv(tid, &l, 1, &rm, 1, 0) != (ssize_t)chunk)
			break;
		n += (ssize_t)chunk;
	}
	/*
	 * Blocked in a system call: unless a signal handler made it (on top of
	 * a malloc, say), or a callback of dl_iterate_phdr.
	 */
	for (ssize_t i = 0; in_syscall && i < n / 8; i++) {
		const struct region *x = region_of(m, words[i]);

		if (x && ((words[i] >= iter_lo && words[i] < iter_hi) ||
			  (is_libc(x) && sigreturn_at(tid, words[i]))))
			return false;
	}
	if (in_syscall)
		return true;
	for (ssize_t i = 0; i < n / 8; i++) {
		const struct region *x = region_of(m, words[i]);

		if (!x)
			continue;
		if (is_loader(x) || (words[i] >= iter_lo && words[i] < iter_hi))
			return false;
		if (is_libc(x))
			return !sigreturn_at(tid, words[i]);
		if (is_runtime(x))
			return false;
	}
	return false;
}

/*
 * Whether the stack at sp has room for dlopen (STACK_ROOM bytes below it):
 * the main thread's grows; a thread's or a coroutine's is its mapping. A
 * call that ran off it would fault in the loader.
 */
#define STACK_ROOM (128 * 1024)

static bool stack_room(uint32_t pid, uint64_t sp)
{
	char path[64], line[PATH_MAX + 128];
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		struct procmaps_entry e;

		if (procmaps__parse_line(line, &e) || sp - 1 < e.start || sp - 1 >= e.end)
			continue;
		ok = !strcmp(e.path, "[stack]") || sp - e.start >= STACK_ROOM;
		break;
	}
	fclose(f);
	return ok;
}

/* Wait for tid to stop (up to ns); its status, or -ETIMEDOUT / -errno. */
static int wait_stop(pid_t tid, uint64_t ns, int *status)
{
	uint64_t end = mono_ns() + ns;

	for (;;) {
		pid_t w = waitpid(tid, status, __WALL | WNOHANG);

		if (w == tid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -errno;
		if (mono_ns() > end)
			return -ETIMEDOUT;
		usleep(200);
	}
}

struct thread {
	pid_t tid;
	struct user_regs_struct saved;
	uint64_t mask; /* its signal mask, put back after the calls */
	bool mask_set; /* the calls' mask is in place */
	/*
	 * Its x87/SSE/AVX state (XSAVE layout): the calls use vector registers
	 * (memcpy, strlen), which a thread stopped in its own code may have live.
	 */
	uint8_t xstate[16384] __attribute__((aligned(64)));
	size_t xlen; /* 0: not saved */
};

/* The thread's extended register state into t->xstate; 0 or -errno. */
static int save_xstate(struct thread *t)
{
	struct iovec v = { t->xstate, sizeof(t->xstate) };

	if (ptrace(PTRACE_GETREGSET, t->tid, NT_X86_XSTATE, &v)) {
		/* no XSAVE: the x87/SSE part */
		v = (struct iovec){ t->xstate, sizeof(struct user_fpregs_struct) };
		if (ptrace(PTRACE_GETREGSET, t->tid, NT_PRFPREG, &v))
			return -errno;
		t->xlen = (size_t)-1 - v.iov_len; /* marked: NT_PRFPREG */
		return 0;
	}
	t->xlen = v.iov_len;
	return 0;
}

static void restore_xstate(struct thread *t)
{
	bool fp = t->xlen > sizeof(t->xstate);
	struct iovec v = { t->xstate, fp ? (size_t)-1 - t->xlen : t->xlen };

	if (t->xlen && ptrace(PTRACE_SETREGSET, t->tid, fp ? NT_PRFPREG : NT_X86_XSTATE, &v))
		pr_warn("heap: thread %d: its vector registers could not be put back: %s", t->tid,
			strerror(errno));
}

/* A field of /proc/PID[/task/TID]/status as a number (base 10 or 16); -1 if absent. */
static long long status_field(uint32_t pid, pid_t tid, const char *key, int base)
{
	char path[64], line[256];
	long long v = -1;
	size_t kl = strlen(key);
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtoll(line + kl + 1, NULL, base);
			break;
		}
	fclose(f);
	return v;
}

/*
 * The interrupt stop ended a system call that returns EINTR rather than
 * being restarted (epoll_wait, sigtimedwait, io_getevents, ...): with no
 * signal of its own pending, the thread would see an EINTR that only this
 * stop caused. Such a call is made again instead, as the kernel restarts
 * the others (a timeout starts again from its full length).
 */
static void unsee_eintr(uint32_t pid, struct thread *t)
{
	long long pend, shared, blocked;

	if ((long)t->saved.orig_rax < 0 || (long)t->saved.rax != -EINTR)
		return;
	pend = status_field(pid, t->tid, "SigPnd", 16);
	shared = status_field(pid, t->tid, "ShdPnd", 16);
	blocked = status_field(pid, t->tid, "SigBlk", 16);
	if (pend < 0 || shared < 0 || blocked < 0 || ((pend | shared) & ~blocked))
		return;
	t->saved.rax = t->saved.orig_rax;
	t->saved.rip -= 2; /* syscall: 0f 05 */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->saved))
		pr_debug("inject: %d: cannot restart its system call: %s", t->tid, strerror(errno));
}

/*
 * Stop tid (seized); 0, or -errno. A signal that comes first is delivered
 * at once (its handler runs; the stop comes after it).
 */
static int interrupt(pid_t tid, uint64_t ns)
{
	int st, err;

	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -errno;
	for (;;) {
		err = wait_stop(tid, ns, &st);
		if (err)
			return err;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP)
			return 0;
		/* (the interrupt stays pending; asked again all the same: idempotent) */
		if (WIFSTOPPED(st) && (ptrace(PTRACE_CONT, tid, 0, (long)WSTOPSIG(st)) ||
				       ptrace(PTRACE_INTERRUPT, tid, 0, 0)))
			return -errno;
	}
}

/*
 * The signals a call runs with: all blocked (they stay pending, delivered
 * once the thread is its own again: no handler runs on top of the loader
 * or the allocator) but those a fault raises, SIGSEGV first, which ends
 * the call: blocked, the kernel would reset its handler to the default.
 */
#define SIGBIT(s) (1ULL << ((s)-1))
#define CALL_MASK                                                                       \
	(~0ULL & ~(SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | \
		   SIGBIT(SIGTRAP) | SIGBIT(SIGSYS) | SIGBIT(SIGKILL) | SIGBIT(SIGSTOP)))

/* Before the calls: the thread's vector registers kept, its signals blocked. */
static int prepare_calls(struct thread *t)
{
	uint64_t m = CALL_MASK;

	int err = save_xstate(t);

	if (err)
		return err;
	if (ptrace(PTRACE_GETSIGMASK, t->tid, sizeof(t->mask), &t->mask) ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(m), &m))
		return -errno;
	t->mask_set = true;
	return 0;
}

/*
 * Call fn(a1, a2) in the stopped thread, data (len bytes) copied below its
 * stack first (at *data_at); the return value in *ret. The call returns to
 * address 0: its SIGSEGV stop is the end of the call (the signal is never
 * delivered).
 */
static int call(struct thread *t, uint64_t fn, uint64_t a1, uint64_t a2, const void *data,
		size_t len, uint64_t *data_at, uint64_t *ret)
{
	struct user_regs_struct r = t->saved;
	uint64_t sp = (t->saved.rsp - 256 - len) & ~15ULL, zero = 0, at = sp;
	struct iovec l[2] = { { (void *)data, len }, { &zero, 8 } }, rm[2];
	uint64_t end = mono_ns() + CALL_WAIT_NS;
	int st;

	/* data at sp (below the red zone), the return address 0 right below the call frame */
	sp -= 16;
	rm[0] = (struct iovec){ (void *)at, len };
	rm[1] = (struct iovec){ (void *)(sp + 8), 8 };
	if (process_vm_writev(t->tid, len ? l : l + 1, len ? 2 : 1, len ? rm : rm + 1, len ? 2 : 1,
			      0) < 0)
		return -errno;
	if (data_at)
		*data_at = at;
	r.rsp = sp + 8; /* as after a call: 16-byte aligned + 8 */
	r.rip = fn;
	r.rdi = data_at && len ? at : a1;
	r.rsi = data_at && len ? a1 : a2;
	r.rax = 0;
	r.eflags &= ~0x400UL;		/* the direction flag clear, as at any call */
	r.orig_rax = (unsigned long)-1; /* no system call to restart now */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) || ptrace(PTRACE_CONT, t->tid, 0, 0))
		return -errno;
	for (;;) {
		int err = wait_stop(t->tid, end > mono_ns() ? end - mono_ns() : 0, &st);

		if (err == -ETIMEDOUT) {
			/*
			 * Not back yet: never left at a return to address 0. Wait on:
			 * the only way out that does not crash the process.
			 */
			pr_warn("heap: injecting into %d: the call is taking long; waiting for it",
				t->tid);
			end = mono_ns() + CALL_WAIT_NS;
			continue;
		}
		if (err)
			return err;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		if (WSTOPSIG(st) == SIGSEGV && (st >> 16) == 0) {
			struct user_regs_struct now;

			if (ptrace(PTRACE_GETREGS, t->tid, 0, &now))
				return -errno;
			if (now.rip == 0) {
				*ret = now.rax;
				return 0;
			}
		}
		/*
		 * A fault in the call (the loader or the library): never
		 * delivered, it would kill a process that did nothing wrong. The
		 * thread is put back as it was (release); what the call left
		 * half done is said.
		 */
		if ((st >> 16) == 0 && (WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS ||
					WSTOPSIG(st) == SIGILL || WSTOPSIG(st) == SIGFPE)) {
			pr_warn("heap: thread %d: the call into it faulted (signal %d); it is put "
				"back as it was, but a library load may be left half done",
				t->tid, WSTOPSIG(st));
			return -EFAULT;
		}
		/* a stop (SIGSTOP, which the mask cannot block), a trap: let it go on */
		if (ptrace(PTRACE_CONT, t->tid, 0,
			   (st >> 16) == PTRACE_EVENT_STOP || WSTOPSIG(st) == SIGTRAP
				   ? 0
				   : (long)WSTOPSIG(st)))
			return -errno;
	}
}

/* The registers and the signal mask back, the thread let go. */
static void release(struct thread *t)
{
	restore_xstate(t);
	ptrace(PTRACE_SETREGS, t->tid, 0, &t->saved);
	if (t->mask_set)
		ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(t->mask), &t->mask);
	ptrace(PTRACE_DETACH, t->tid, 0, 0);
}

/* A thread's state letter (R, S, D, T, Z, ...), from its stat; 0 if gone. */
static char thread_state(uint32_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/task/%d/stat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Seize a thread of pid at a safe point (up to SAFE_FOR_NS, every thread in
 * turn, each let run a few ms between looks). 0 with t stopped, or -errno.
 * any: every point will do (bpfprof_heap_eject takes no lock and calls
 * neither the loader nor the allocator: it stores the old values back).
 */
static int seize_safe(uint32_t pid, const struct maps *m, struct thread *t, bool any, char *why,
		      size_t whylen)
{
	uint64_t iter_lo = func_addr(pid, m, pick_libc, NULL, "dl_iterate_phdr"), iter_hi;
	uint64_t size = 0;
	uint64_t end = mono_ns() + SAFE_FOR_NS;
	char path[64];
	int looks = 0;

	func_size(pid, m, "dl_iterate_phdr", &size);
	iter_hi = iter_lo + (size ? size : 1024);
	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	while (mono_ns() < end) {
		DIR *d = opendir(path);
		struct dirent *de;

		if (!d)
			return -ESRCH;
		while ((de = readdir(d))) {
			pid_t tid = atoi(de->d_name);
			int err;

			if (tid <= 0 || thread_state(pid, tid) == 'D')
				continue; /* in an uninterruptible wait: it would not stop */
			*t = (struct thread){ .tid = tid };
			if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
				err = -errno;
				if (err == -ESRCH) /* a thread that just ended */
					continue;
				closedir(d);
				whyf(why, whylen, "cannot trace it: %s", strerror(-err));
				return err;
			}
			err = interrupt(tid, 200ULL * 1000 * 1000);
			if (!err && !ptrace(PTRACE_GETREGS, tid, 0, &t->saved)) {
				bool safe =
					any || (safe_point(tid, &t->saved, m, iter_lo, iter_hi) &&
						stack_room(pid, t->saved.rsp));

				unsee_eintr(pid, t);
				if (safe) {
					closedir(d);
					pr_debug("inject: %u: thread %d at a safe point after %d "
						 "looks",
						 pid, tid, looks);
					return 0;
				}
			}
			looks++;
			if (err == -ETIMEDOUT) {
				/*
				 * In an uninterruptible wait: it stops when it leaves it,
				 * and must not find no tracer then (it would wait for
				 * ever). Wait for that stop, then let it go.
				 */
				int st;

				while (wait_stop(tid, 2ULL * 1000 * 1000 * 1000, &st) == -ETIMEDOUT)
					pr_info("heap: waiting for thread %d of %u to leave an "
						"uninterruptible wait",
						tid, pid);
			}
			ptrace(PTRACE_DETACH, tid, 0, 0);
			usleep(2000 + rand() % 8000);
		}
		closedir(d);
	}
	whyf(why, whylen,
	     "no thread of it was at a safe point in a second (always inside libc or "
	     "the allocator)");
	return -EAGAIN;
}

/*
 * What rules a process out before it is touched (the reason in why): gone
 * or a zombie, stopped, traced, under a seccomp filter (a load it forbids
 * may kill it), ignoring SIGSEGV (the end of a call), the library not the
 * same file where it runs (another root or mount namespace), ptrace off.
 */
static int check_process(uint32_t pid, const char *lib, const struct stat *lst, char *why,
			 size_t whylen)
{
	char path[PATH_MAX + 64], st[512], *p;
	long long tracer, seccomp, ign;
	struct stat there;
	FILE *f;
	int yama = 0;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f || !fgets(st, sizeof(st), f) || !(p = strrchr(st, ')')) || p[1] != ' ') {
		if (f)
			fclose(f);
		whyf(why, whylen, "it has exited");
		return -ESRCH;
	}
	fclose(f);
	if (p[2] == 'Z' || p[2] == 'X') {
		whyf(why, whylen, "it has exited");
		return -ESRCH;
	}
	if (p[2] == 'T' || p[2] == 't') {
		whyf(why, whylen, "it is stopped (SIGSTOP or a debugger)");
		return -EBUSY;
	}
	tracer = status_field(pid, 0, "TracerPid", 10);
	if (tracer > 0) {
		whyf(why, whylen, "it is traced by process %lld (a debugger or strace)", tracer);
		return -EBUSY;
	}
	seccomp = status_field(pid, 0, "Seccomp", 10);
	if (seccomp == 2) {
		whyf(why, whylen,
		     "it runs under a seccomp filter (loading a library may be "
		     "forbidden to it)");
		return -EPERM;
	}
	ign = status_field(pid, 0, "SigIgn", 16);
	if (ign > 0 && (ign & SIGBIT(SIGSEGV))) {
		whyf(why, whylen, "it ignores SIGSEGV");
		return -EPERM;
	}
	snprintf(path, sizeof(path), "/proc/%u/root%s", pid, lib);
	if (stat(path, &there) || there.st_dev != lst->st_dev || there.st_ino != lst->st_ino) {
		whyf(why, whylen,
		     "%s is not the same file where it runs (another root or mount "
		     "namespace)",
		     lib);
		return -ENOENT;
	}
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &yama) != 1)
			yama = 0;
		fclose(f);
	}
	if (yama >= 3) {
		whyf(why, whylen, "ptrace is off on this host (kernel.yama.ptrace_scope = 3)");
		return -EPERM;
	}
	return 0;
}

static long remote(uint32_t pid, const char *lib, const char *func, uint64_t arg, bool load,
		   char *why, size_t whylen)
{
	struct stat st;
	struct maps *m = calloc(1, sizeof(*m));
	struct thread t;
	uint64_t dlopen_at = 0, fn, ret = 0, at;
	long res;
	int err;

	if (!m)
		return -ENOMEM;
	if (stat(lib, &st)) {
		whyf(why, whylen, "cannot find %s: %s", lib, strerror(errno));
		free(m);
		return -ENOENT;
	}
	err = check_process(pid, lib, &st, why, whylen);
	if (err && (load || err == -ESRCH)) {
		free(m);
		return err;
	}
	why[0] = '\0';
	if (maps_read(pid, m)) {
		whyf(why, whylen, "it has exited");
		free(m);
		return -ESRCH;
	}
	mark_allocators(pid, m);
	if (!load && !func_addr(pid, m, pick_file, &st, func)) {
		/* the library is gone (it ran exec since): nothing to put back */
		free(m);
		return 0;
	}
	if (load) {
		dlopen_at = func_addr(pid, m, pick_libc, NULL, "dlopen");
		if (!dlopen_at) {
			whyf(why, whylen,
			     "no dlopen in its libc (a static program, or glibc before "
			     "2.34)");
			free(m);
			return -ENOENT;
		}
	}
	err = seize_safe(pid, m, &t, !load, why, whylen);
	if (err) {
		free(m);
		return err;
	}
	err = prepare_calls(&t);
	if (!err && load) {
		/* RTLD_NOW: its symbols resolved now, not by a lazy binding inside a malloc */
		err = call(&t, dlopen_at, 0x2 /* RTLD_NOW */, 0, lib, strlen(lib) + 1, &at, &ret);
		if (!err && !ret) {
			whyf(why, whylen, "its dlopen of %s failed (not readable where it runs?)",
			     lib);
			err = -ENOENT;
		}
		if (!err)
			err = maps_read(pid, m);
	}
	fn = err ? 0 : func_addr(pid, m, pick_file, &st, func);
	if (!err && !fn) {
		whyf(why, whylen, "%s is not mapped in it", lib);
		err = -ENOENT;
	}
	if (!err)
		err = call(&t, fn, arg, 0, NULL, 0, NULL, &ret);
	if (err == -EFAULT && load && fn) {
		/* the hook faulted half way: put back what it did, best effort */
		uint64_t ej = func_addr(pid, m, pick_file, &st, "bpfprof_heap_eject"), r2;

		if (ej && !call(&t, ej, 0, 0, NULL, 0, NULL, &r2))
			pr_verbose("heap: %u: %ld calls put back after the fault", pid, (long)r2);
	}
	release(&t);
	free(m);
	if (err) {
		if (!why[0])
			whyf(why, whylen, "%s", strerror(-err));
		return err;
	}
	res = (long)ret;
	if (res == -EALREADY)
		whyf(why, whylen,
		     "another bpfprof run has its sampler in it (running, or killed "
		     "before it put the calls back)");
	else if (res <= 0)
		whyf(why, whylen, "%s returned %s", func, strerror((int)-res));
	return res;
}

long inject__heap(uint32_t pid, const char *lib, uint64_t rate, char *why, size_t whylen)
{
	why[0] = '\0';
	return remote(pid, lib, "bpfprof_heap_inject", rate, true, why, whylen);
}

long inject__heap_eject(uint32_t pid, const char *lib, char *why, size_t whylen)
{
	long n = -EAGAIN;

	/* -EAGAIN: the thread stopped was patching a dlopen's objects; another look */
	for (int tries = 0; tries < 100 && n == -EAGAIN; tries++) {
		if (tries)
			usleep(10000);
		why[0] = '\0';
		n = remote(pid, lib, "bpfprof_heap_eject", 0, false, why, whylen);
	}
	return n;
}
