// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <bpf/bpf.h>

#include "proc/cgroup.h"
#include "util/clock.h"
#include "util/htab.h"
#include "util/log.h"
#include "util/membudget.h"

#define MAX_DEPTH 32
/* A hierarchy walk (when a cgroup cannot be opened by id) at most this often. */
#define WALK_INTERVAL_NS (1000 * 1000000ULL)

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/* The cgroup2 mount point and its root within the hierarchy ("/" outside a cgroup namespace). */
static int find_mount(char *mnt, size_t len, char *root, size_t rlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char r[PATH_MAX], m[PATH_MAX], fstype[64];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(dash, " - %63s", fstype) != 1 || strcmp(fstype, "cgroup2"))
			continue;
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
			continue;
		unescape(r);
		unescape(m);
		if (strlen(m) >= len || strlen(r) >= rlen)
			continue;
		strcpy(mnt, m);
		strcpy(root, r);
		err = 0;
		break;
	}
	free(line);
	fclose(f);
	return err;
}

int cgroup__mount(char *buf, size_t len)
{
	char root[PATH_MAX];

	return find_mount(buf, len, root, sizeof(root));
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

bool cgroup__name_container(const char *name, char id[CGROUP_ID_HEX + 1])
{
	static const char *const prefixes[] = { "docker-", "cri-containerd-", "crio-", "libpod-",
						"containerd-" };
	size_t n = strlen(name);

	if (n > 6 && !strcmp(name + n - 6, ".scope"))
		n -= 6;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (n > pl && starts_with(name, prefixes[i])) {
			name += pl;
			n -= pl;
			break;
		}
	}
	/* conmon-ID (cri-o, podman's monitor) is not hex: not a container */
	if (n != CGROUP_ID_HEX || !all_hex(name, n))
		return false;
	memcpy(id, name, n);
	id[n] = '\0';
	return true;
}

/* "kubepods-burstable-pod<uid>.slice" (systemd, '_' for '-') or "pod<uid>" (cgroupfs). */
static bool name_pod(const char *name, size_t n, char *uid, size_t len)
{
	const char *p = NULL;
	size_t m;

	if (starts_with(name, "kubepods") && n > 6 && !strncmp(name + n - 6, ".slice", 6)) {
		for (const char *q = name; q + 4 < name + n; q++)
			if (!strncmp(q, "-pod", 4))
				p = q + 4;
		n -= 6;
	} else if (n > 3 && starts_with(name, "pod")) {
		p = name + 3;
	}
	if (!p)
		return false;
	m = name + n - p;
	if (m < 8 || m >= len)
		return false;
	for (size_t i = 0; i < m; i++) {
		char c = p[i] == '_' ? '-' : p[i];

		if (!isxdigit((unsigned char)c) && c != '-')
			return false;
		uid[i] = c;
	}
	uid[m] = '\0';
	return true;
}

bool cgroup__parse(const char *path, struct cgroup_info *out)
{
	const char *s = path;

	memset(out, 0, sizeof(*out));
	while (*s) {
		const char *e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		char name[NAME_MAX + 1];

		if (n && n <= NAME_MAX) {
			memcpy(name, s, n);
			name[n] = '\0';
			/* the innermost container wins (nested engines) */
			cgroup__name_container(name, out->container_id);
			name_pod(name, n, out->pod_uid, sizeof(out->pod_uid));
		}
		s += n;
		while (*s == '/')
			s++;
	}
	return out->container_id[0] != '\0';
}

struct cg_handle {
	struct file_handle fh;
	uint64_t id;
};

int cgroup__id_of(const char *path, uint64_t *id)
{
	struct cg_handle h = { .fh.handle_bytes = sizeof(uint64_t) };
	int mount_id;

	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0))
		return -errno;
	if (h.fh.handle_bytes < sizeof(uint64_t))
		return -EINVAL;
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

/* rel: path below the hierarchy root, from an absolute path under the mount. */
static void rel_path(const char *mnt, const char *root, const char *abs, char *rel, size_t len)
{
	const char *tail = abs + strlen(mnt);

	while (*tail == '/')
		tail++;
	if (!strcmp(root, "/"))
		snprintf(rel, len, "/%s", tail);
	else
		snprintf(rel, len, "%s%s%s", root, *tail ? "/" : "", tail);
}

static bool under(const char *path, const char *mnt)
{
	size_t n = strlen(mnt);

	return !strncmp(path, mnt, n) && (path[n] == '/' || path[n] == '\0');
}

static int fill_target(const char *abs, const char *mnt, const char *root,
		       struct cgroup_target *out)
{
	int err;

	if (strlen(abs) >= sizeof(out->path))
		return -ENAMETOOLONG;
	strcpy(out->path, abs);
	rel_path(mnt, root, abs, out->rel, sizeof(out->rel));
	err = cgroup__id_of(abs, &out->id);
	if (err)
		pr_err("cannot read the cgroup id of '%s': %s", abs, strerror(-err));
	return err;
}

static bool is_cgroup2_dir(const char *path)
{
	struct statfs sfs;
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode) && !statfs(path, &sfs) &&
	       sfs.f_type == CGROUP2_SUPER_MAGIC;
}

int cgroup__resolve_path(const char *arg, struct cgroup_target *out)
{
	char mnt[PATH_MAX], root[PATH_MAX], cand[PATH_MAX * 2], real[PATH_MAX];
	const char *tail = arg;
	bool exists;

	memset(out, 0, sizeof(*out));
	if (find_mount(mnt, sizeof(mnt), root, sizeof(root))) {
		pr_err("--cgroup '%s': no cgroup v2 hierarchy is mounted (cgroup v1 is not supported)",
		       arg);
		return -ENOENT;
	}
	exists = realpath(arg, real) != NULL;
	if (exists && under(real, mnt) && is_cgroup2_dir(real))
		return fill_target(real, mnt, root, out);
	/* a path as /proc/PID/cgroup shows it: below the hierarchy root */
	while (*tail == '/')
		tail++;
	snprintf(cand, sizeof(cand), "%s/%s", mnt, tail);
	if (realpath(cand, real) && under(real, mnt) && is_cgroup2_dir(real))
		return fill_target(real, mnt, root, out);
	if (exists) {
		pr_err("--cgroup '%s' is not a cgroup v2 directory (the v2 hierarchy is mounted at %s)",
		       arg, mnt);
		return -EINVAL;
	}
	pr_err("--cgroup '%s': no such cgroup (looked for it as a path and under %s)", arg, mnt);
	return -ENOENT;
}

struct match {
	char id[CGROUP_ID_HEX + 1];
	char path[PATH_MAX];
};

struct walk {
	const char *prefix;
	size_t plen;
	struct match *m;
	size_t n, cap;
};

static int add_match(struct walk *w, const char *id, const char *path)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->m[i].id, id))
			return 0; /* the same container seen twice: keep the outer one */
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 8;
		struct match *m = realloc(w->m, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		w->m = m;
		w->cap = cap;
	}
	strcpy(w->m[w->n].id, id);
	snprintf(w->m[w->n].path, sizeof(w->m[w->n].path), "%s", path);
	w->n++;
	return 0;
}

/* Depth-first, not following links; a matching directory's children are its own. */
static int walk_containers(struct walk *w, char *path, size_t len, int depth)
{
	DIR *d;
	struct dirent *de;
	int err = 0;

	if (depth > MAX_DEPTH)
		return 0;
	d = opendir(path);
	if (!d)
		return 0; /* removed while we walk */
	while (!err && (de = readdir(d))) {
		char id[CGROUP_ID_HEX + 1];
		size_t n = strlen(path);

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (n + 1 + strlen(de->d_name) >= len)
			continue;
		path[n] = '/';
		strcpy(path + n + 1, de->d_name);
		if (cgroup__name_container(de->d_name, id)) {
			if (!strncmp(id, w->prefix, w->plen))
				err = add_match(w, id, path);
		} else {
			err = walk_containers(w, path, len, depth + 1);
		}
		path[n] = '\0';
	}
	closedir(d);
	return err;
}

int cgroup__resolve_container(const char *arg, struct cgroup_target *out)
{
	char mnt[PATH_MAX], root[PATH_MAX], path[PATH_MAX], q[CGROUP_ID_HEX + 1];
	struct walk w = { 0 };
	size_t n = strlen(arg);
	int err;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n && i < CGROUP_ID_HEX; i++)
		q[i] = (char)tolower((unsigned char)arg[i]);
	if (!n || n > CGROUP_ID_HEX || !all_hex(q, n)) {
		pr_err("invalid container id '%s' for --container: expected 1 to 64 hex digits",
		       arg);
		return -EINVAL;
	}
	q[n] = '\0';
	if (find_mount(mnt, sizeof(mnt), root, sizeof(root))) {
		pr_err("--container '%s': no cgroup v2 hierarchy is mounted (cgroup v1 is not "
		       "supported)",
		       arg);
		return -ENOENT;
	}
	w.prefix = q;
	w.plen = n;
	snprintf(path, sizeof(path), "%s", mnt);
	err = walk_containers(&w, path, sizeof(path), 0);
	if (err) {
		pr_err("--container '%s': %s", arg, strerror(-err));
	} else if (!w.n) {
		pr_err("no container '%s': no cgroup under %s is named like a docker, containerd, "
		       "cri-o, podman or kubepods container with that id",
		       arg, mnt);
		err = -ENOENT;
	} else if (w.n > 1) {
		pr_err("container id '%s' is ambiguous: %zu containers match (%s, %s%s); give "
		       "more digits",
		       arg, w.n, w.m[0].id, w.m[1].id, w.n > 2 ? ", ..." : "");
		err = -EINVAL;
	} else {
		err = fill_target(w.m[0].path, mnt, root, out);
	}
	free(w.m);
	return err;
}

/* cgroups: the id -> name cache */

struct cgroups {
	struct htab *ids; /* uint64_t id -> struct cgroup_name * */
	char mnt[PATH_MAX], root[PATH_MAX];
	bool have_mount;
	int mount_fd;	 /* for open_by_handle_at */
	int handle_type; /* the hierarchy's file handle type, -1: cannot open by id */
	uint64_t last_walk_ns;
	uint32_t epoch;
	struct membudget_cache mb; /* "cgroup names", reported; trimmed per interval */
};

struct cgroups *cgroups__new(void)
{
	struct cgroups *c = calloc(1, sizeof(*c));
	struct cg_handle h = { .fh.handle_bytes = sizeof(uint64_t) };
	int mount_id;

	if (!c)
		return NULL;
	/* borrowed keys (each entry's id): entries come and go for weeks */
	c->ids = htab__new(256, 0);
	if (!c->ids) {
		free(c);
		return NULL;
	}
	c->mount_fd = -1;
	c->mb.name = "cgroup names";
	membudget__add(&c->mb);
	c->handle_type = -1;
	c->have_mount = !find_mount(c->mnt, sizeof(c->mnt), c->root, sizeof(c->root));
	if (c->have_mount) {
		c->mount_fd = open(c->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (c->mount_fd >= 0 &&
		    !name_to_handle_at(c->mount_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH))
			c->handle_type = h.fh.handle_type;
	}
	return c;
}

static void free_name(struct cgroup_name *n)
{
	if (n) {
		free((char *)n->path);
		free(n);
	}
}

/* A name and its table entry, roughly. */
static size_t name_bytes(const struct cgroup_name *n)
{
	return sizeof(*n) + strlen(n->path) + 1 + 48;
}

/* A name leaves the table: given back to the budget. */
static void drop_name(struct cgroups *c, struct cgroup_name *n)
{
	if (!n)
		return;
	membudget__charge(&c->mb, -(long long)name_bytes(n));
	c->mb.entries--;
	free_name(n);
}

void cgroups__free(struct cgroups *c)
{
	struct htab_entry *e;
	size_t it = 0;

	if (!c)
		return;
	while ((e = htab__next(c->ids, &it)))
		free_name((struct cgroup_name *)(uintptr_t)e->val);
	htab__free(c->ids);
	membudget__remove(&c->mb);
	if (c->mount_fd >= 0)
		close(c->mount_fd);
	free(c);
}

static struct cgroup_name *put(struct cgroups *c, uint64_t id, const char *rel)
{
	struct cgroup_name *n = calloc(1, sizeof(*n));
	uint64_t hash = htab__hash(&id, sizeof(id));
	struct htab_entry *e;

	if (!n || !(n->path = strdup(rel)))
		goto fail;
	n->id = id;
	cgroup__parse(rel, &n->info);
	e = htab__find(c->ids, &id, sizeof(id), hash);
	if (e) { /* a placeholder, replaced */
		drop_name(c, (struct cgroup_name *)(uintptr_t)e->val);
		htab__delete(c->ids, &id, sizeof(id), hash);
	}
	if (htab__upsert(c->ids, &n->id, sizeof(n->id), hash, &e) < 0)
		goto fail;
	e->val = (uintptr_t)n;
	c->mb.entries++;
	membudget__charge(&c->mb, (long long)name_bytes(n));
	return n;
fail:
	free_name(n);
	return NULL;
}

/* The path of cgroup id, by handle: one syscall instead of a walk. */
static int open_by_id(struct cgroups *c, uint64_t id, char *rel, size_t len)
{
	struct cg_handle h = { .fh.handle_bytes = sizeof(uint64_t) };
	char link[64], abs[PATH_MAX];
	ssize_t n;
	int fd;

	if (c->handle_type < 0)
		return -EOPNOTSUPP;
	h.fh.handle_type = c->handle_type;
	memcpy(h.fh.f_handle, &id, sizeof(id));
	fd = open_by_handle_at(c->mount_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, abs, sizeof(abs) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	abs[n] = '\0';
	if (!under(abs, c->mnt))
		return -ENOENT; /* " (deleted)", or outside our view */
	rel_path(c->mnt, c->root, abs, rel, len);
	return 0;
}

static void walk_ids(struct cgroups *c, char *path, size_t len, int depth)
{
	DIR *d;
	struct dirent *de;
	uint64_t id;
	char rel[PATH_MAX];

	if (depth > MAX_DEPTH || !(d = opendir(path)))
		return;
	if (!cgroup__id_of(path, &id) &&
	    !htab__find(c->ids, &id, sizeof(id), htab__hash(&id, sizeof(id)))) {
		rel_path(c->mnt, c->root, path, rel, sizeof(rel));
		put(c, id, rel);
	}
	while ((de = readdir(d))) {
		size_t n = strlen(path);

		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    n + 1 + strlen(de->d_name) >= len)
			continue;
		path[n] = '/';
		strcpy(path + n + 1, de->d_name);
		walk_ids(c, path, len, depth + 1);
		path[n] = '\0';
	}
	closedir(d);
}

const struct cgroup_name *cgroups__get(struct cgroups *c, uint64_t id)
{
	struct htab_entry *e = htab__find(c->ids, &id, sizeof(id), htab__hash(&id, sizeof(id)));
	struct cgroup_name *n;
	char rel[PATH_MAX];

	if (e) {
		n = (struct cgroup_name *)(uintptr_t)e->val;
		n->used_epoch = c->epoch;
		return n;
	}
	n = NULL;
	if (c->have_mount && !open_by_id(c, id, rel, sizeof(rel))) {
		n = put(c, id, rel);
	} else if (c->have_mount && c->handle_type < 0 &&
		   mono_ns() - c->last_walk_ns > WALK_INTERVAL_NS) {
		char path[PATH_MAX];

		c->last_walk_ns = mono_ns();
		snprintf(path, sizeof(path), "%s", c->mnt);
		walk_ids(c, path, sizeof(path), 0);
		e = htab__find(c->ids, &id, sizeof(id), htab__hash(&id, sizeof(id)));
		n = e ? (struct cgroup_name *)(uintptr_t)e->val : NULL;
	}
	if (!n) {
		/* removed before we looked, or no v2 hierarchy: a name that says so */
		snprintf(rel, sizeof(rel), "[cgroup %llu]", (unsigned long long)id);
		n = put(c, id, rel);
	}
	if (n)
		n->used_epoch = c->epoch;
	return n;
}

size_t cgroups__trim(struct cgroups *c, uint32_t keep_epochs, size_t cap)
{
	struct htab_entry *e;
	uint64_t *drop = NULL;
	size_t it = 0, n = 0, i;

	c->epoch++;
	if (htab__count(c->ids) <= cap)
		return 0;
	drop = calloc(htab__count(c->ids), sizeof(*drop));
	if (!drop)
		return 0;
	while ((e = htab__next(c->ids, &it))) {
		struct cgroup_name *cn = (struct cgroup_name *)(uintptr_t)e->val;

		if (c->epoch - cn->used_epoch > keep_epochs)
			drop[n++] = cn->id;
	}
	for (i = 0; i < n; i++) {
		e = htab__find(c->ids, &drop[i], sizeof(drop[i]),
			       htab__hash(&drop[i], sizeof(drop[i])));
		if (e) {
			struct cgroup_name *cn = (struct cgroup_name *)(uintptr_t)e->val;

			htab__delete(c->ids, &drop[i], sizeof(drop[i]), e->hash);
			drop_name(c, cn);
		}
	}
	free(drop);
	return n;
}

size_t cgroups__count(const struct cgroups *c)
{
	return htab__count(c->ids);
}

bool cgroup__path_under(const char *path, const char *rel)
{
	size_t n = strlen(rel);

	while (n && rel[n - 1] == '/') /* "/a/b/" is "/a/b"; "/" is the root: everything */
		n--;
	return !strncmp(path, rel, n) && (path[n] == '\0' || path[n] == '/');
}

int cgroup__pid_under(uint32_t pid, const char *rel)
{
	char path[64], line[4096 + 16];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		ret = cgroup__path_under(line + 3, rel);
		break;
	}
	fclose(f);
	return ret;
}

int cgroup__set_filter(int map_fd, const char *path)
{
	uint32_t key = 0;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* the map takes its own reference to the cgroup */
	if (bpf_map_update_elem(map_fd, &key, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	return err;
}
