// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * irqgap: what interrupts take from a running thread, measured without
 * relying on wall-time ratios (tools/bench.sh, cost section).
 *
 *   irqgap SECS [CPU] [--empty FREQ]
 *
 * Pinned to CPU (default 0), reads CLOCK_MONOTONIC in a tight loop for SECS
 * seconds; every step longer than GAP_NS is time the CPU spent elsewhere.
 * Steps up to LONG_NS (interrupts, with whatever BPF program they run) are
 * summed; longer ones (preemption, the hypervisor running another guest) are
 * counted apart and left out of the running time. Prints
 *
 *   gaps N gap_us G run_s R long L
 *
 * so that a caller can take (G/R with a profiler - G/R alone) / samples per
 * second: the time each sampling interrupt costs the interrupted thread.
 *
 * --empty FREQ: opens the perf events bpfprof's sampler opens (cycles, else
 * cpu-clock, frequency mode, one per online CPU) with a BPF program that
 * only returns: the interrupt's own cost, without any stack walk.
 */
#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#define GAP_NS	400
#define LONG_NS 30000

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int empty_prog(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_PERF_EVENT;
	attr.insns = (uintptr_t)insns;
	attr.insn_cnt = 2;
	attr.license = (uintptr_t) "GPL";
	return syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

static int open_event(int cpu, unsigned int freq, __u32 type, __u64 config)
{
	struct perf_event_attr attr = {
		.type = type,
		.size = sizeof(attr),
		.config = config,
		.sample_freq = freq,
		.freq = 1,
	};

	return syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The sampler's events with an empty program; returns 0 or -1 (printed). */
static int open_empty(unsigned int freq)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int prog = empty_prog();
	bool hw = true;

	if (prog < 0) {
		fprintf(stderr, "irqgap: cannot load the empty BPF program: %s\n", strerror(errno));
		return -1;
	}
	for (long cpu = 0; cpu < ncpu; cpu++) {
		int fd = hw ? open_event(cpu, freq, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES)
			    : -1;

		if (fd < 0 && errno == ENODEV)
			continue; /* offline */
		if (fd < 0) {
			hw = false;
			fd = open_event(cpu, freq, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
		}
		if (fd < 0 && errno == ENODEV)
			continue;
		if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog)) {
			fprintf(stderr, "irqgap: cannot open the perf event on CPU %ld: %s\n", cpu,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0;
	int cpu = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 0;
	uint64_t gaps = 0, gap_ns = 0, longs = 0, long_ns = 0, start, end, prev;
	cpu_set_t set;

	if (secs <= 0 || secs > 3600) {
		fprintf(stderr, "usage: irqgap SECS [CPU] [--empty FREQ]\n");
		return 2;
	}
	for (int i = 1; i < argc - 1; i++)
		if (!strcmp(argv[i], "--empty") && open_empty(atoi(argv[i + 1])))
			return 1;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "irqgap: cannot run on CPU %d: %s\n", cpu, strerror(errno));
		return 1;
	}
	start = prev = now_ns();
	end = start + (uint64_t)(secs * 1e9);
	while (prev < end) {
		uint64_t t = now_ns(), d = t - prev;

		if (d > LONG_NS) {
			longs++;
			long_ns += d;
		} else if (d > GAP_NS) {
			gaps++;
			gap_ns += d;
		}
		prev = t;
	}
	printf("gaps %llu gap_us %.1f run_s %.4f long %llu\n", (unsigned long long)gaps,
	       gap_ns / 1e3, (prev - start - long_ns) / 1e9, (unsigned long long)longs);
	return 0;
}
