// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A running program for `bpfprof --alloc -p` (tests/e2e/test_alloc_inject.py):
 * the profiler loads its sampler into it while it waits, and puts its calls
 * back while it waits again. What the program sees must not change.
 *
 * Usage: inject_target MODE     MODE: read | epoll | sleep | spin
 *
 * Prints "ready", then waits (twice) for "go":
 *   read   read() on stdin for one line: the line must come whole, once
 *   epoll  epoll_wait(-1) on stdin, then read the line (epoll_wait is never
 *          restarted by the kernel: an EINTR here was caused from outside)
 *   sleep  nanosleep(1 hour) until SIGUSR1 (its handler sets the flag): an
 *          EINTR without the flag was caused from outside
 *   spin   computes in its own code, in vector registers, until SIGUSR1;
 *          then does the same number of steps again: the results must be
 *          the same bits (a call made in it must leave its registers alone)
 * After the first "go": leak_inject keeps LEAK_N blocks of 1 MiB, leak_strdup
 * keeps STRDUP_N strdup copies of 1 MiB (glibc's malloc call, for the
 * program), churn_inject allocates and frees CHURN_N blocks of 64 KiB; prints
 * "phase1 SUM". After the second: churns again, frees the strdup copies and
 * prints "phase2 SUM". Exits 0; 3 when a wait went wrong (the reason on
 * stderr).
 */
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>

#include "common.h"

#define LEAK_N	 48
#define STRDUP_N 16
#define CHURN_N	 2000
#define MIB	 (1024 * 1024)

static volatile sig_atomic_t go;
static char *text;
void *kept[LEAK_N];
char *copies[STRDUP_N];

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void fail(const char *what)
{
	fprintf(stderr, "inject_target: %s: %s\n", what, strerror(errno));
	exit(3);
}

/* one line "go\n" from stdin, in one read (the test writes it in one write) */
static void read_go(void)
{
	char buf[64];
	ssize_t n = read(0, buf, sizeof(buf));

	if (n != 3 || memcmp(buf, "go\n", 3)) {
		if (n < 0)
			fail("read");
		fprintf(stderr, "inject_target: read %zd bytes, not \"go\\n\"\n", n);
		exit(3);
	}
}

/* Two doubles stepped n times (or until go): what lives in xmm registers. */
static NOINLINE uint64_t spin(uint64_t n, double *out_a, double *out_b)
{
	double a = 1.0, b = 0.5;
	uint64_t i;

	for (i = 0; n ? i < n : !go; i++) {
		a = a * 1.0000000001 + b * 1e-9;
		b = b * 0.9999999999 - a * 1e-12;
	}
	*out_a = a;
	*out_b = b;
	return i;
}

static void spin_go(void)
{
	double a, b, a2, b2;
	uint64_t n = spin(0, &a, &b);

	go = 0;
	spin(n, &a2, &b2);
	if (memcmp(&a, &a2, sizeof(a)) || memcmp(&b, &b2, sizeof(b))) {
		fprintf(stderr, "inject_target: %lu steps gave %a %a, then %a %a\n",
			(unsigned long)n, a, b, a2, b2);
		exit(3);
	}
}

static void wait_go(const char *mode)
{
	if (!strcmp(mode, "spin")) {
		spin_go();
		return;
	}
	if (!strcmp(mode, "read")) {
		read_go();
	} else if (!strcmp(mode, "epoll")) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };

		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev))
			fail("epoll");
		if (epoll_wait(ep, &ev, 1, -1) != 1)
			fail("epoll_wait");
		close(ep);
		read_go();
	} else {
		struct timespec t = { 3600, 0 };

		while (!go)
			if (nanosleep(&t, NULL) && !go)
				fail("nanosleep");
		go = 0;
	}
}

static NOINLINE void leak_inject(void)
{
	for (int i = 0; i < LEAK_N; i++) {
		char *p = malloc(MIB);

		if (!p)
			fail("malloc");
		p[0] = (char)i;
		kept[i] = p;
	}
	BARRIER();
}

static NOINLINE void leak_strdup(void)
{
	for (int i = 0; i < STRDUP_N; i++)
		copies[i] = strdup(text); /* malloc(MIB) inside libc */
	BARRIER();
}

static NOINLINE unsigned long churn_inject(void)
{
	unsigned long sum = 0;

	for (int i = 0; i < CHURN_N; i++) {
		unsigned char *p = malloc(64 * 1024);

		if (!p)
			fail("malloc");
		p[i % 1000] = (unsigned char)i;
		sum += p[i % 1000];
		free(p);
	}
	BARRIER();
	return sum;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "read";
	struct sigaction sa = { .sa_handler = on_usr1 };
	unsigned long sum = 0;

	sigaction(SIGUSR1, &sa, NULL);
	text = malloc(MIB);
	memset(text, 'x', MIB - 1);
	text[MIB - 1] = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	wait_go(mode);
	leak_inject();
	leak_strdup();
	sum += churn_inject();
	for (int i = 0; i < LEAK_N; i++)
		sum += ((unsigned char *)kept[i])[0];
	for (int i = 0; i < STRDUP_N; i++)
		sum += (unsigned long)strlen(copies[i]);
	printf("phase1 %lu\n", sum);
	wait_go(mode);
	sum += churn_inject();
	for (int i = 0; i < STRDUP_N; i++)
		free(copies[i]);
	printf("phase2 %lu\n", sum);
	return 0;
}
