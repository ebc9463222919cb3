// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * many_libs [--cpu] DIR FIRST COUNT MS SECONDS [DELAY]
 *
 * Maps DIR/libmany_FIRST.so ... libmany_{FIRST+COUNT-1}.so
 * (gen_many_libs.sh: each with a large .eh_frame), prints "pid N" and "mapped", then calls each
 * library's many_spin() in turn for about MS milliseconds of CPU, round and
 * round, until SECONDS of wall time have passed: a process whose unwind
 * tables would, taken all at once, fill the row budget (as `import torch`
 * does), and whose samples land in a different few of its libraries every
 * moment. With DELAY it prints its pid first and maps the libraries DELAY
 * seconds later (a process that dlopen()s after a profiler attached). With
 * --cpu, SECONDS are of its CPU time: a test's sample floor then holds
 * however loaded the host.
 */
#include <dlfcn.h>
#include <string.h>

#include "common.h"

typedef void (*spin_fn)(long n);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	spin_fn *fns;
	double end, ms, c0, secs;
	long first, count, n = 1 << 20;
	char path[4096];
	int on_cpu = 0;

	if (argc > 1 && !strcmp(argv[1], "--cpu")) {
		on_cpu = 1;
		argv++;
		argc--;
	}
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: many_libs [--cpu] DIR FIRST COUNT MS SECONDS [DELAY]\n");
		return 2;
	}
	if (argc == 7) {
		struct timespec d;
		double s = parse_seconds("many_libs", argv[6]);

		print_pid();
		fflush(stdout);
		d.tv_sec = (time_t)s;
		d.tv_nsec = (long)((s - d.tv_sec) * 1e9);
		nanosleep(&d, NULL);
	}
	first = atol(argv[2]);
	count = atol(argv[3]);
	ms = atof(argv[4]);
	secs = parse_seconds("many_libs", argv[5]);
	end = now_s() + secs;
	fns = calloc(count, sizeof(*fns));
	if (count <= 0 || ms <= 0 || !fns)
		return 2;
	for (long i = 0; i < count; i++) {
		void *h;

		snprintf(path, sizeof(path), "%s/libmany_%ld.so", argv[1], first + i);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h || !(fns[i] = (spin_fn)dlsym(h, "many_spin"))) {
			fprintf(stderr, "many_libs: %s: %s\n", path, dlerror());
			return 1;
		}
	}
	if (argc == 6)
		print_pid();
	printf("mapped %ld\n", count);
	fflush(stdout);
	/* calibrate: iterations of many_spin per millisecond */
	c0 = cpu_s();
	fns[0](n);
	n = (long)(n / ((cpu_s() - c0) * 1e3) * ms);
	if (n < 1)
		n = 1;
	if (on_cpu) /* from here: the dlopens and the calibration not counted */
		end = cpu_s() + secs;
	while ((on_cpu ? cpu_s() : now_s()) < end)
		for (long i = 0; i < count && (on_cpu ? cpu_s() : now_s()) < end; i++)
			fns[i](n);
	return 0;
}
