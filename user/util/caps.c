// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/caps.h"
#include "util/log.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

int caps__have(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (cap < 0 || cap >= 32 * _LINUX_CAPABILITY_U32S_3)
		return -EINVAL;
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return -errno;
	return !!(d[cap / 32].effective & (1U << (cap % 32)));
}

/* Whether the running kernel knows cap (CAP_BPF and CAP_PERFMON came in 5.8). */
static bool kernel_knows(int cap)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int last = -1;

	if (f) {
		if (fscanf(f, "%d", &last) != 1)
			last = -1;
		fclose(f);
	}
	return last < 0 || cap <= last;
}

static int check_record(char *msg, size_t len)
{
	bool admin = caps__have(CAP_SYS_ADMIN) == 1;
	bool bpf, perfmon;

	msg[0] = '\0';
	if (admin)
		return 0;
	if (!kernel_knows(CAP_BPF)) {
		snprintf(msg, len,
			 "this kernel has no CAP_BPF or CAP_PERFMON (before 5.8): bpfprof needs "
			 "CAP_SYS_ADMIN there; run it as root");
		return -EPERM;
	}
	bpf = caps__have(CAP_BPF) == 1;
	perfmon = caps__have(CAP_PERFMON) == 1;
	if (bpf && perfmon)
		return 0;
	if (!bpf && !perfmon)
		snprintf(
			msg, len,
			"missing CAP_BPF (to load bpfprof's BPF programs and maps) and "
			"CAP_PERFMON (to sample every CPU and attach probes): grant both (a "
			"unit's AmbientCapabilities=, setcap cap_bpf,cap_perfmon+ep) or run as root");
	else if (!bpf)
		snprintf(msg, len,
			 "missing CAP_BPF (to load bpfprof's BPF programs and maps; CAP_PERFMON "
			 "alone is not enough): grant it too, or run as root");
	else
		snprintf(msg, len,
			 "missing CAP_PERFMON (to sample every CPU and attach probes; CAP_BPF "
			 "alone is not enough): grant it too, or run as root");
	return -EPERM;
}

int caps__check_record(void)
{
	char msg[384];
	int err = check_record(msg, sizeof(msg));

	if (err)
		pr_err("%s", msg);
	return err;
}
