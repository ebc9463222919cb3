// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * irqgap: what interrupts take from a running thread, measured without
 * relying on wall-time ratios (tools/bench.sh, cost section).
 *
 *   irqgap SECS [CPU] [--empty FREQ | --alternate FREQ [--control CTL ACK]]
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
 *
 * --alternate FREQ: the same event with the empty program, on CPU alone,
 * switched on and off in SLICE_MS slices (on-off, then off-on: a drift
 * cancels) for SECS. Each pair of slices gives (gap time per second of
 * running, on - off) / interrupts per second of running (the program's
 * run count, BPF_ENABLE_STATS): the cost of one interrupt, measured a few
 * hundred milliseconds apart rather than in runs seconds apart, so that
 * what the hypervisor and the other guests do to this CPU (gaps of the
 * same lengths, moving by more than the figure from one run to the next)
 * is nearly the same on both sides. Prints
 *
 *   alternate pairs N median_ns M q1_ns Q1 q3_ns Q3 pooled_ns P irq_per_s R
 *
 * (pooled: all on slices' gap time against all off slices', over all the
 * interrupts); irq_per_s: the program's runs per second while on.
 *
 * --control CTL ACK (with --alternate): switch `perf record --control
 * fifo:CTL,ACK` on and off instead (its events must start disabled: -D -1),
 * taking FREQ per second as its interrupt rate: the interrupt with perf's
 * own work in it (callchain, copy into its buffer).
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

static int empty_fd = -1, empty_prog_fd = -1;

/*
 * The sampler's events with an empty program, on every CPU, or only on
 * `only` (>= 0) and disabled; returns 0 or -1 (printed).
 */
static int open_empty(unsigned int freq, int only)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int prog = empty_prog();
	bool hw = true;

	if (prog < 0) {
		fprintf(stderr, "irqgap: cannot load the empty BPF program: %s\n", strerror(errno));
		return -1;
	}
	empty_prog_fd = prog;
	for (long cpu = 0; cpu < ncpu; cpu++) {
		int fd;

		if (only >= 0 && cpu != only)
			continue;
		fd = hw ? open_event(cpu, freq, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES) : -1;

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
		empty_fd = fd;
		if (only >= 0 && ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)) {
			fprintf(stderr, "irqgap: cannot switch the event off: %s\n",
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* How many times the empty program ran (BPF_ENABLE_STATS must be on). */
static uint64_t empty_runs(void)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = empty_prog_fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uintptr_t)&info;
	if (syscall(__NR_bpf, BPF_OBJ_GET_INFO_BY_FD, &attr, sizeof(attr)))
		return 0;
	return info.run_cnt;
}

/* What a spin saw: short gaps (counted, summed), long ones, running and wall time. */
struct slice {
	uint64_t gaps, gap_ns, longs, run_ns, wall_ns;
};

/*
 * Read the clock in a tight loop for ns: every step longer than GAP_NS is
 * time the CPU spent elsewhere; steps up to LONG_NS are summed as gaps,
 * longer ones counted apart and left out of the running time.
 */
static void spin(uint64_t ns, struct slice *sl)
{
	uint64_t start, end, prev, long_ns = 0;

	memset(sl, 0, sizeof(*sl));
	start = prev = now_ns();
	end = start + ns;
	while (prev < end) {
		uint64_t t = now_ns(), d = t - prev;

		if (d > LONG_NS) {
			sl->longs++;
			long_ns += d;
		} else if (d > GAP_NS) {
			sl->gaps++;
			sl->gap_ns += d;
		}
		prev = t;
	}
	sl->run_ns = prev - start - long_ns;
	sl->wall_ns = prev - start;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define SLICE_MS  250
#define MAX_PAIRS 4096

static FILE *ctl_f, *ack_f;

/*
 * Switch the measured events on or off: the empty program's event, or,
 * with --control, `perf record --control fifo:CTL,ACK`'s (waits for its ack).
 */
static int switch_events(bool on)
{
	char line[64];

	if (!ctl_f)
		return ioctl(empty_fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
	char *p = line;
	int c;

	if (fprintf(ctl_f, "%s\n", on ? "enable" : "disable") < 0 || fflush(ctl_f))
		return -1;
	/* perf writes "ack\n\0": the NUL is read before the next ack */
	while ((c = fgetc(ack_f)) != EOF && c != '\n')
		if (c && p < line + sizeof(line) - 1)
			*p++ = c;
	*p = 0;
	if (c == EOF || strcmp(line, "ack")) {
		fprintf(stderr, "irqgap: no ack from the control fifo\n");
		return -1;
	}
	return 0;
}

/* --alternate: see the top of the file. */
static int alternate(double secs, int cpu, unsigned int freq)
{
	static double cost[MAX_PAIRS];
	union bpf_attr attr;
	double wall_s = 0, irqs = 0, gap_on = 0, gap_off = 0, run_on = 0, run_off = 0;
	int stats, n = 0;

	memset(&attr, 0, sizeof(attr));
	attr.enable_stats.type = BPF_STATS_RUN_TIME;
	stats = ctl_f ? 0 : syscall(__NR_bpf, BPF_ENABLE_STATS, &attr, sizeof(attr));
	if (stats < 0) {
		fprintf(stderr, "irqgap: cannot turn BPF run statistics on: %s\n", strerror(errno));
		return 1;
	}
	if (!ctl_f && open_empty(freq, cpu))
		return 1;
	spin(SLICE_MS * 1000000ull, &(struct slice){}); /* settle the frequency */
	for (int i = 0; n < MAX_PAIRS && i < secs * 1000 / (2 * SLICE_MS); i++) {
		struct slice on = { 0 }, off = { 0 };
		uint64_t r0 = 0, r1 = 0;

		for (int k = 0; k < 2; k++) {
			bool want_on = (k == 0) == !(i & 1);

			if (want_on) {
				if (switch_events(true))
					return 1;
				r0 = ctl_f ? 0 : empty_runs();
				spin(SLICE_MS * 1000000ull, &on);
				/* perf's interrupts are not counted here: its rate */
				r1 = ctl_f ? (uint64_t)(freq * on.wall_ns / 1e9) : empty_runs();
				if (switch_events(false))
					return 1;
			} else {
				spin(SLICE_MS * 1000000ull, &off);
			}
		}
		if (r1 <= r0 || !on.run_ns || !off.run_ns)
			continue;
		/*
		 * Gap time per second of running, on - off, over the interrupts
		 * per second: per wall second, as the event counts CPU time,
		 * whoever runs (those that came while another task ran this
		 * CPU left no gap in ours).
		 */
		cost[n++] = ((double)on.gap_ns / on.run_ns - (double)off.gap_ns / off.run_ns) *
			    on.wall_ns / (r1 - r0);
		wall_s += on.wall_ns / 1e9;
		irqs += r1 - r0;
		gap_on += on.gap_ns;
		run_on += on.run_ns;
		gap_off += off.gap_ns;
		run_off += off.run_ns;
	}
	if (!n) {
		fprintf(stderr, "irqgap: the empty program never ran\n");
		return 1;
	}
	qsort(cost, n, sizeof(*cost), cmp_double);
	printf("alternate pairs %d median_ns %.0f q1_ns %.0f q3_ns %.0f pooled_ns %.0f irq_per_s "
	       "%.0f\n",
	       n, cost[n / 2], cost[n / 4], cost[3 * n / 4],
	       (gap_on / run_on - gap_off / run_off) * 1e9 / (irqs / wall_s), irqs / wall_s);
	return 0;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0;
	int cpu = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 0;
	unsigned int alternate_freq = 0;
	struct slice sl;
	cpu_set_t set;

	if (secs <= 0 || secs > 3600) {
		fprintf(stderr, "usage: irqgap SECS [CPU] [--empty FREQ | --alternate FREQ "
				"[--control CTL ACK]]\n");
		return 2;
	}
	for (int i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--empty") && open_empty(atoi(argv[i + 1]), -1))
			return 1;
		if (!strcmp(argv[i], "--alternate"))
			alternate_freq = atoi(argv[i + 1]);
		if (!strcmp(argv[i], "--control") && i + 2 < argc) {
			ctl_f = fopen(argv[i + 1], "w");
			ack_f = ctl_f ? fopen(argv[i + 2], "r") : NULL;
			if (!ack_f) {
				fprintf(stderr, "irqgap: cannot open %s: %s\n", argv[i + 1],
					strerror(errno));
				return 1;
			}
		}
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "irqgap: cannot run on CPU %d: %s\n", cpu, strerror(errno));
		return 1;
	}
	if (alternate_freq)
		return alternate(secs, cpu, alternate_freq);
	spin((uint64_t)(secs * 1e9), &sl);
	printf("gaps %llu gap_us %.1f run_s %.4f long %llu\n", (unsigned long long)sl.gaps,
	       sl.gap_ns / 1e3, sl.run_ns / 1e9, (unsigned long long)sl.longs);
	return 0;
}
