// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Permission errors that name every missing capability (util/caps.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>

#include "util/caps.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38 /* Linux 5.8 */
#endif
#ifndef CAP_BPF
#define CAP_BPF 39 /* Linux 5.8 */
#endif

static const struct {
	uint32_t need;
	int cap;
	const char *name;
	const char *what;   /* what bpfprof needs it for, in the user's words */
	bool admin_will_do; /* CAP_SYS_ADMIN is accepted in its place */
} caps[] = {
	{ CAPS_BPF, CAP_BPF, "CAP_BPF", "to load its BPF programs and maps", true },
	{ CAPS_PERFMON, CAP_PERFMON, "CAP_PERFMON", "to sample every CPU and attach probes", true },
	{ CAPS_PTRACE, CAP_SYS_PTRACE, "CAP_SYS_PTRACE", "to read other users' processes", false },
	{ CAPS_SYSLOG, CAP_SYSLOG, "CAP_SYSLOG", "to read kernel symbols' addresses", false },
};

/*
 * Whether the running kernel has cap: CAP_BPF and CAP_PERFMON came in 5.8;
 * before, CAP_SYS_ADMIN is what the kernel asks in their place.
 */
static bool kernel_has(int cap)
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

/* Whether cap is in the process's effective set. */
static bool has_cap(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capget, &h, d))
		return false;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

uint32_t caps__missing(uint32_t need)
{
	bool admin = has_cap(CAP_SYS_ADMIN);
	uint32_t missing = 0;

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if ((need & caps[i].need) && !has_cap(caps[i].cap) &&
		    !(caps[i].admin_will_do && admin))
			missing |= caps[i].need;
	return missing;
}

const char *caps__why(int err, uint32_t need, char *buf, size_t len)
{
	uint32_t missing;
	size_t n = 0, k = 0, count = 0;

	if (err < 0)
		err = -err;
	buf[0] = '\0';
	if (err != EPERM && err != EACCES)
		return buf;
	missing = caps__missing(need);
	if (!missing) {
		snprintf(buf, len,
			 ": bpfprof has the capabilities this needs, so a security policy refused "
			 "it (a container's seccomp profile, an LSM, kernel lockdown)");
		return buf;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		count += !!(missing & caps[i].need);
	n = snprintf(buf, len, ": bpfprof lacks ");
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]) && n < len; i++) {
		bool old = caps[i].admin_will_do && !kernel_has(caps[i].cap);

		if (!(missing & caps[i].need))
			continue;
		k++;
		n += snprintf(buf + n, len - n, "%s%s (%s%s)",
			      k == 1	   ? ""
			      : k == count ? " and "
					   : ", ",
			      old ? "CAP_SYS_ADMIN" : caps[i].name, caps[i].what,
			      old ? "; this kernel has no CAP_BPF or CAP_PERFMON" : "");
	}
	if (n < len)
		snprintf(buf + n, len - n, ": run it as root or grant %s",
			 count == 1 ? "it" : "them");
	return buf;
}
