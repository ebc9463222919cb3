/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cgroup v2: find the hierarchy, resolve --cgroup PATH and --container ID to
 * one cgroup directory, and name the cgroup ids samples carry (path,
 * container id, Kubernetes pod) for --per-container and pprof labels.
 *
 * Container ids are read from the directory names container engines give
 * their cgroups, under the systemd driver (docker-ID.scope,
 * cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope inside
 * kubepods[-QOS]-podUID.slice or machine.slice/system.slice) and the cgroupfs
 * driver (/docker/ID, /kubepods/QOS/podUID/ID, /libpod_parent/libpod-ID):
 * no engine or API server is asked.
 */
#ifndef BPFPROF_CGROUP_H
#define BPFPROF_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGROUP_ID_HEX	64 /* a full container id */
#define CGROUP_SHORT_ID 12 /* the short form `docker ps` shows */

/* What a cgroup path says about the container and pod it belongs to. */
struct cgroup_info {
	char container_id[CGROUP_ID_HEX + 1]; /* "" when not in a container */
	char pod_uid[40];		      /* "" when not in a Kubernetes pod */
};

/*
 * The cgroup v2 mount point, from /proc/self/mountinfo. Returns 0 or -ENOENT
 * (no cgroup2 mount).
 */
int cgroup__mount(char *buf, size_t len);

/*
 * Parse a cgroup path (relative to the hierarchy root, e.g. from
 * /proc/PID/cgroup): the innermost container id and the pod uid found in it.
 * Pure; returns true when a container id was found.
 */
bool cgroup__parse(const char *path, struct cgroup_info *out);

/* A container id within one directory name, or false. */
bool cgroup__name_container(const char *name, char id[CGROUP_ID_HEX + 1]);

/* The target of --cgroup / --container. */
struct cgroup_target {
	char path[4096]; /* absolute path of the directory */
	char rel[4096];	 /* path below the hierarchy root, "/" for the root */
	uint64_t id;	 /* the kernel's cgroup id (bpf_get_current_cgroup_id) */
};

/*
 * --cgroup PATH: a directory of the cgroup v2 hierarchy, given as a path in
 * the file system (/sys/fs/cgroup/...) or relative to the hierarchy root (as
 * /proc/PID/cgroup shows it). Returns 0 or -errno with a one-line error printed.
 */
int cgroup__resolve_path(const char *arg, struct cgroup_target *out);

/*
 * --container ID: the one cgroup whose directory name carries a container id
 * starting with ID (hex, 1-64 digits). Unknown and ambiguous ids are errors
 * (printed). Returns 0 or -errno.
 */
int cgroup__resolve_container(const char *id, struct cgroup_target *out);

/* Put the directory's fd into slot 0 of a BPF cgroup array (the filter). Returns 0 or -errno. */
int cgroup__set_filter(int map_fd, const char *path);

/* Whether path (as /proc/PID/cgroup shows it) is the cgroup rel or below it. */
bool cgroup__path_under(const char *path, const char *rel);

/*
 * Whether process pid's cgroup v2 cgroup (the "0::" line of
 * /proc/PID/cgroup) is rel or below it: 1, 0, or -errno (gone: -ENOENT).
 */
int cgroup__pid_under(uint32_t pid, const char *rel);

/* The cgroup id of a directory (name_to_handle_at). Returns 0 or -errno. */
int cgroup__id_of(const char *path, uint64_t *id);

/*
 * cgroups: cgroup id -> path and what the path says, cached. An id not seen
 * before is looked up by handle (open_by_handle_at on the hierarchy), or by
 * walking the hierarchy when the kernel cannot open it; a cgroup removed
 * before anyone looked gets the name "[cgroup ID]".
 */
struct cgroup_name {
	uint64_t id;
	const char *path; /* below the hierarchy root, "/" for the root */
	struct cgroup_info info;
	uint32_t used_epoch; /* last epoch the entry was asked for */
};

struct cgroups;

struct cgroups *cgroups__new(void);
void cgroups__free(struct cgroups *c);
/* Look id up (cached). Never NULL for a live table: unknown cgroups get a placeholder. */
const struct cgroup_name *cgroups__get(struct cgroups *c, uint64_t id);
/*
 * Start a new epoch; entries not asked for during the last `keep_epochs`
 * epochs are dropped once more than `cap` are held. Returns how many were dropped.
 */
size_t cgroups__trim(struct cgroups *c, uint32_t keep_epochs, size_t cap);
size_t cgroups__count(const struct cgroups *c);

#endif
