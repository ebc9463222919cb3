// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collect/sampler.h"
#include "util/caps.h"
#include "util/log.h"

struct sampler {
	int *fds;
	struct bpf_link **links;
	int n;
	const char *event;
};

int parse_cpu_list(const char *s, bool **mask, int *n)
{
	bool *m = NULL;
	int max = -1;
	const char *p;
	char *end;

	/* two passes: size, then fill */
	for (int pass = 0; pass < 2; pass++) {
		p = s;
		while (*p && *p != '\n') {
			long a, b;

			a = strtol(p, &end, 10);
			if (end == p || a < 0 || a > 1 << 20)
				goto bad;
			b = a;
			p = end;
			if (*p == '-') {
				p++;
				b = strtol(p, &end, 10);
				if (end == p || b < a || b > 1 << 20)
					goto bad;
				p = end;
			}
			if (pass == 0 && b > max)
				max = b;
			for (long c = a; pass == 1 && c <= b; c++)
				m[c] = true;
			if (*p == ',')
				p++;
			else if (*p && *p != '\n')
				goto bad;
		}
		if (pass == 0) {
			if (max < 0)
				return -EINVAL;
			m = calloc(max + 1, sizeof(*m));
			if (!m)
				return -ENOMEM;
		}
	}
	*mask = m;
	*n = max + 1;
	return 0;
bad:
	free(m);
	return -EINVAL;
}

static int online_cpus(bool **mask, int *n)
{
	char buf[4096];
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	int err;

	if (!f)
		return -errno;
	err = fgets(buf, sizeof(buf), f) ? parse_cpu_list(buf, mask, n) : -EIO;
	fclose(f);
	return err;
}

static bool cpu_first_online(const bool *online, int cpu)
{
	for (int c = 0; c < cpu; c++)
		if (online[c])
			return false;
	return true;
}

/*
 * Frequency mode for both events, as perf does. A fixed cpu-clock period
 * (1e9/F ns) was tried: it phase-locks with programs that work in fixed
 * rounds (cpu_split's 10 ms rounds against 10.1 ms at 99 Hz sampled only
 * work_b for a whole 0.3 s interval); frequency mode's period adjustments
 * break that lock.
 */
static int open_event(int cpu, unsigned int freq, __u32 type, __u64 config)
{
	struct perf_event_attr attr = {
		.type = type,
		.size = sizeof(attr),
		.config = config,
		.sample_freq = freq,
		.freq = 1,
		/* the sample's local_clock() for the BPF program (cpu.bpf.c, task_runtime) */
		.sample_type = PERF_SAMPLE_TIME,
		.disabled = 1,
	};
	int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int sampler__new(struct sampler **out, struct bpf_program *prog, unsigned int freq)
{
	struct sampler *s;
	bool *online = NULL;
	int ncpus, err, cpu;
	bool hw = true;

	err = online_cpus(&online, &ncpus);
	if (err) {
		pr_err("cannot read the online CPUs: %s", strerror(-err));
		return err;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(online);
		return -ENOMEM;
	}
	s->fds = malloc(ncpus * sizeof(*s->fds));
	s->links = calloc(ncpus, sizeof(*s->links));
	if (!s->fds || !s->links) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (cpu = 0; cpu < ncpus; cpu++)
		s->fds[cpu] = -1;
	s->n = ncpus;
	s->event = "cycles";
	for (cpu = 0; cpu < ncpus; cpu++) {
		int fd = -ENOENT;

		if (!online[cpu])
			continue;
		if (hw)
			fd = open_event(cpu, freq, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
		if (hw && fd < 0 && cpu_first_online(online, cpu)) {
			/* no PMU (VMs often have none): cpu-clock on every CPU */
			pr_verbose("no hardware cycles event (%s); sampling cpu-clock",
				   strerror(-fd));
			hw = false;
			s->event = "cpu-clock";
		}
		if (!hw)
			fd = open_event(cpu, freq, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
		if (fd < 0) {
			char why[256];

			err = fd;
			pr_err("cannot open a %s perf event on CPU %d: %s%s", s->event, cpu,
			       strerror(-err), caps__why(err, CAPS_RECORD, why, sizeof(why)));
			goto cleanup;
		}
		s->fds[cpu] = fd;
		s->links[cpu] = bpf_program__attach_perf_event(prog, fd);
		if (!s->links[cpu]) {
			err = -errno;
			s->links[cpu] = NULL;
			pr_err("cannot attach the sampling program on CPU %d: %s", cpu,
			       strerror(-err));
			goto cleanup;
		}
		/*
		 * libbpf enables the event it attaches to: off again until
		 * sampler__enable, after the -p targets' tables are built and
		 * described (their first 90 ms of samples on a PyTorch process
		 * were walked before that, as not described: cut at the leaf).
		 */
		if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)) {
			err = -errno;
			pr_err("cannot disable the perf event on CPU %d: %s", cpu, strerror(-err));
			goto cleanup;
		}
	}
	free(online);
	*out = s;
	return 0;
cleanup:
	free(online);
	sampler__free(s);
	return err;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	for (int cpu = 0; cpu < s->n; cpu++) {
		if (s->links && s->links[cpu])
			bpf_link__destroy(s->links[cpu]);
		if (s->fds && s->fds[cpu] >= 0)
			close(s->fds[cpu]);
	}
	free(s->links);
	free(s->fds);
	free(s);
}

static int ioctl_all(struct sampler *s, unsigned long req)
{
	int err = 0;

	for (int cpu = 0; cpu < s->n; cpu++)
		if (s->fds[cpu] >= 0 && ioctl(s->fds[cpu], req, 0))
			err = -errno;
	return err;
}

int sampler__enable(struct sampler *s)
{
	return ioctl_all(s, PERF_EVENT_IOC_ENABLE);
}

int sampler__disable(struct sampler *s)
{
	return ioctl_all(s, PERF_EVENT_IOC_DISABLE);
}

const char *sampler__event_name(const struct sampler *s)
{
	return s->event;
}

int sampler__ncpus(const struct sampler *s)
{
	int n = 0;

	for (int cpu = 0; cpu < s->n; cpu++)
		n += s->fds[cpu] >= 0;
	return n;
}
