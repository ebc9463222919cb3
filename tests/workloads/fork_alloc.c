// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fork_alloc [N]: a program that allocates, then starts children in every
 * way a program does, each of which allocates in turn; it says how many
 * failed and exits 1 if any did. Under `bpfprof --alloc` nothing may change:
 * the ground truth for issue 25's "never harm the target".
 *
 *   fork      N children by fork(), each allocating 20,000 x 4 KiB
 *   thread    a child that allocates in a second thread too
 *   vfork     vfork() + exec of this program ("child" mode)
 *   spawn     posix_spawn() of this program ("child" mode)
 *   signal    a child that allocates in a signal handler (not async-signal-
 *             safe in general; glibc's malloc tolerates it outside malloc)
 *   nested    a child that forks a grandchild
 *
 * Every child's allocations are sampled at any rate (80 MiB each), and the
 * parent's before its first fork, so that a probe site the kernel rewrote
 * in the parent is in every child's copy of the page.
 */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

extern char **environ;

static void __attribute__((noinline)) churn(int n)
{
	for (int i = 0; i < n; i++) {
		char *volatile p = malloc(4096);

		if (!p)
			_exit(3);
		p[0] = (char)i;
		free(p);
	}
}

static void *thread_churn(void *arg)
{
	(void)arg;
	churn(20000);
	return NULL;
}

static volatile sig_atomic_t got;

static void on_usr1(int sig)
{
	(void)sig;
	churn(100);
	got = 1;
}

static int child_work(const char *how)
{
	churn(20000);
	if (!strcmp(how, "thread")) {
		pthread_t t;

		if (pthread_create(&t, NULL, thread_churn, NULL) || pthread_join(t, NULL))
			return 4;
	} else if (!strcmp(how, "signal")) {
		signal(SIGUSR1, on_usr1);
		raise(SIGUSR1);
		if (!got)
			return 5;
	} else if (!strcmp(how, "nested")) {
		int st;
		pid_t g = fork();

		if (g < 0)
			return 6;
		if (!g)
			_exit(child_work("fork"));
		if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st))
			return 7;
	}
	return 0;
}

/* One child started `how`; 0 if it ended well, else 1 (and a line why). */
static int one(const char *self, const char *how)
{
	char *argv[] = { (char *)self, "child", NULL };
	pid_t c;
	int st;

	if (!strcmp(how, "vfork")) {
		c = vfork();
		if (!c) {
			execv(self, argv);
			_exit(127);
		}
	} else if (!strcmp(how, "spawn")) {
		if (posix_spawn(&c, self, NULL, NULL, argv, environ))
			c = -1;
	} else {
		c = fork();
		if (!c)
			_exit(child_work(how));
	}
	if (c < 0 || waitpid(c, &st, 0) != c) {
		printf("%s: could not start or wait\n", how);
		return 1;
	}
	if (WIFSIGNALED(st)) {
		printf("%s: child killed by signal %d\n", how, WTERMSIG(st));
		return 1;
	}
	if (WEXITSTATUS(st)) {
		printf("%s: child exited with %d\n", how, WEXITSTATUS(st));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const hows[] = {
		"fork", "thread", "vfork", "spawn", "signal", "nested"
	};
	int n = 5, failed = 0, total = 0;

	if (argc > 1 && !strcmp(argv[1], "child"))
		return child_work("fork");
	if (argc > 1)
		n = atoi(argv[1]);
	churn(20000); /* the parent's own sampled allocations, before any fork */
	for (int i = 0; i < n; i++) {
		failed += one(argv[0], "fork");
		total++;
	}
	for (size_t i = 1; i < sizeof(hows) / sizeof(hows[0]); i++) {
		failed += one(argv[0], hows[i]);
		total++;
	}
	printf("fork_alloc: %d of %d children failed\n", failed, total);
	fflush(stdout);
	return failed ? 1 : 0;
}
