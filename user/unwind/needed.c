// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/needed.h"

/* A command with more libraries than this is not a start-up worth waiting for. */
#define MAX_FILES 1024

struct list {
	char **v;
	size_t n, cap;
};

static int list__add(struct list *l, const char *s)
{
	char *d;

	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	d = strdup(s);
	if (!d)
		return -ENOMEM;
	l->v[l->n++] = d;
	return 1;
}

/* An x86-64 ELF file we can read: what the loader would accept for this process. */
static bool is_x86_64_elf(const char *path)
{
	unsigned char h[20];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool ok;

	if (fd < 0)
		return false;
	ok = read(fd, h, sizeof(h)) == sizeof(h) && !memcmp(h, ELFMAG, SELFMAG) &&
	     h[EI_CLASS] == ELFCLASS64 && h[18] == EM_X86_64;
	close(fd);
	return ok;
}

/* dirs: ':'-separated; $ORIGIN (and ${ORIGIN}) is origin. Returns 1 if found into out. */
static int search(const char *dirs, const char *origin, const char *name, char *out, size_t len)
{
	char buf[PATH_MAX];
	const char *p = dirs;

	while (p && *p) {
		const char *end = strchr(p, ':');
		size_t dl = end ? (size_t)(end - p) : strlen(p);
		char dir[PATH_MAX];

		if (dl && dl < sizeof(dir)) {
			memcpy(dir, p, dl);
			dir[dl] = 0;
			if (!strncmp(dir, "$ORIGIN", 7) || !strncmp(dir, "${ORIGIN}", 9)) {
				const char *rest = dir + (dir[1] == '{' ? 9 : 7);

				snprintf(buf, sizeof(buf), "%s%s", origin, rest);
			} else {
				snprintf(buf, sizeof(buf), "%s", dir);
			}
			if ((size_t)snprintf(out, len, "%s/%s", buf, name) < len &&
			    is_x86_64_elf(out))
				return 1;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* The directories of /etc/ld.so.conf and what it includes, ':'-joined. */
static char *ldso_conf_dirs(void)
{
	static const char *defaults = "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:"
				      "/lib64:/usr/lib64:/lib:/usr/lib";
	size_t cap = 4096, n = 0;
	char *out = malloc(cap), line[PATH_MAX];
	glob_t g = { 0 };
	FILE *f;

	if (!out)
		return NULL;
	out[0] = 0;
	if (!glob("/etc/ld.so.conf.d/*.conf", 0, NULL, &g)) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			f = fopen(g.gl_pathv[i], "re");
			if (!f)
				continue;
			while (fgets(line, sizeof(line), f)) {
				size_t l = strcspn(line, " \t\r\n#");

				line[l] = 0;
				if (line[0] != '/' || n + l + 2 > cap)
					continue;
				memcpy(out + n, line, l);
				n += l;
				out[n++] = ':';
				out[n] = 0;
			}
			fclose(f);
		}
	}
	globfree(&g);
	if (n + strlen(defaults) + 1 <= cap)
		strcpy(out + n, defaults);
	return out;
}

/* Append path's PT_INTERP and DT_NEEDED (resolved) to l. */
static int scan(struct list *l, const char *path, const char *conf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	char origin[PATH_MAX], found[PATH_MAX];
	const char *rpath = NULL, *runpath = NULL;
	const char *needed[256];
	size_t nneeded = 0, n;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int err = 0;

	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return -ENOEXEC;
	}
	snprintf(origin, sizeof(origin), "%s", path);
	*strrchr(origin, '/') = 0;
	if (!elf_getphdrnum(elf, &n)) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			char interp[PATH_MAX];

			if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_INTERP ||
			    ph.p_filesz >= sizeof(interp) ||
			    pread(fd, interp, ph.p_filesz, ph.p_offset) != (ssize_t)ph.p_filesz)
				continue;
			interp[ph.p_filesz] = 0;
			if (interp[0] == '/' && realpath(interp, found) && is_x86_64_elf(found) &&
			    list__add(l, found) < 0)
				err = -ENOMEM;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(d, i, &dyn))
				break;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RPATH &&
			    dyn.d_tag != DT_RUNPATH)
				continue;
			s = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_RPATH)
				rpath = s;
			else if (dyn.d_tag == DT_RUNPATH)
				runpath = s;
			else if (nneeded < sizeof(needed) / sizeof(needed[0]))
				needed[nneeded++] = s;
		}
	}
	for (size_t i = 0; i < nneeded && !err && l->n < MAX_FILES; i++) {
		const char *name = needed[i];
		char real[PATH_MAX];
		int ok = 0;

		if (strchr(name, '/'))
			ok = snprintf(found, sizeof(found), "%s", name) < (int)sizeof(found) &&
			     is_x86_64_elf(found);
		if (!ok && !runpath && rpath)
			ok = search(rpath, origin, name, found, sizeof(found));
		if (!ok && getenv("LD_LIBRARY_PATH"))
			ok = search(getenv("LD_LIBRARY_PATH"), origin, name, found, sizeof(found));
		if (!ok && runpath)
			ok = search(runpath, origin, name, found, sizeof(found));
		if (!ok)
			ok = search(conf, origin, name, found, sizeof(found));
		if (ok && realpath(found, real) && list__add(l, real) < 0)
			err = -ENOMEM;
	}
	elf_end(elf);
	close(fd);
	return err;
}

/* argv[0] as execvp finds it. */
static int find_exe(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		if (!realpath(cmd, out))
			return -errno;
	} else {
		char found[PATH_MAX];
		const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin";
		bool ok = false;

		while (p && *p && !ok) {
			const char *end = strchr(p, ':');
			size_t dl = end ? (size_t)(end - p) : strlen(p);

			if ((size_t)snprintf(found, sizeof(found), "%.*s/%s", (int)dl, dl ? p : ".",
					     cmd) < sizeof(found) &&
			    !access(found, X_OK))
				ok = realpath(found, out) != NULL;
			p = end ? end + 1 : NULL;
		}
		if (!ok)
			return -ENOENT;
	}
	(void)len;
	return is_x86_64_elf(out) ? 0 : -ENOEXEC;
}

int needed__files(const char *cmd, char ***files, size_t *n)
{
	struct list l = { 0 };
	char exe[PATH_MAX];
	char *conf;
	int err;

	*files = NULL;
	*n = 0;
	err = find_exe(cmd, exe, sizeof(exe));
	if (err)
		return err;
	conf = ldso_conf_dirs();
	if (!conf)
		return -ENOMEM;
	elf_version(EV_CURRENT);
	err = list__add(&l, exe) < 0 ? -ENOMEM : 0;
	/* breadth first: l grows while it is walked */
	for (size_t i = 0; !err && i < l.n; i++) {
		int e = scan(&l, l.v[i], conf);

		if (e == -ENOMEM)
			err = e;
	}
	free(conf);
	if (err) {
		needed__free(l.v, l.n);
		return err;
	}
	*files = l.v;
	*n = l.n;
	return 0;
}

void needed__free(char **files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
}
