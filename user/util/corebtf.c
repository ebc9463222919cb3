// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/corebtf.h"
#include "util/log.h"
#include "util/safedir.h"

/* tmpfs, emptied at boot; BPFPROF_CORE_CACHE names another directory ("" : none) */
#define CACHE_DIR "/run/bpfprof"

static const char *cache_dir(void)
{
	const char *d = getenv("BPFPROF_CORE_CACHE");

	return d ? d : CACHE_DIR;
}

/* This boot's id without dashes into id (33 bytes). 0, or -1. */
static int boot_id(char *id)
{
	char buf[64];
	size_t n = 0;
	ssize_t got;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	for (ssize_t i = 0; i < got && n < 32; i++)
		if ((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'))
			id[n++] = buf[i];
	id[n] = '\0';
	return n == 32 ? 0 : -1;
}

bool corebtf__cached(const struct corebtf_obj *objs, int n, char *path, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL, w; /* FNV-1a over 8-byte words (an ELF is ~800 KB) */
	const char *dir = cache_dir();
	const char *why;
	char id[33];
	struct stat st;
	int fd, dfd;

	path[0] = '\0';
	if (!*dir || boot_id(id))
		return false;
	for (int o = 0; o < n; o++) {
		const unsigned char *p = objs[o].elf;
		size_t sz = objs[o].sz;

		for (size_t i = 0; i < sz; i += sizeof(w)) {
			w = 0;
			memcpy(&w, p + i, sz - i < sizeof(w) ? sz - i : sizeof(w));
			h = (h ^ w) * 0x100000001b3ULL;
		}
		h = (h ^ sz) * 0x100000001b3ULL;
	}
	if ((size_t)snprintf(path, len, "%s/core-%s-%016llx.btf", dir, id, (unsigned long long)h) >=
	    len) {
		path[0] = '\0';
		return false;
	}
	/* libbpf opens path again by name: safe only in a directory nobody else can change */
	dfd = safedir__open(dir, &why);
	if (dfd < 0) {
		pr_debug("no CO-RE types cache in %s: %s", dir, why);
		path[0] = '\0';
		return false;
	}
	fd = openat(dfd, strrchr(path, '/') + 1, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	close(dfd);
	if (fd < 0)
		return false;
	/* ours only: a file someone else could have written is not believed */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		close(fd);
		path[0] = '\0';
		return false;
	}
	close(fd);
	return true;
}

struct copier {
	const struct btf *src;
	struct btf *dst;
	int *memo; /* src id -> dst id, 0: not yet */
	int ptr;   /* dst's void *, 0: not yet */
};

static bool named_kind(const struct btf_type *t)
{
	switch (btf_kind(t)) {
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		return true;
	default:
		return false;
	}
}

/*
 * src's type id into dst: ints, floats, enums, arrays, typedefs and
 * embedded structs and unions as they are (a field's offset, size and
 * existence are what relocations ask), every pointer a void * (a
 * relocation's access path never goes through one), modifiers dropped.
 * The new id, or a negative error.
 */
static int copy_type(struct copier *c, __u32 id)
{
	const struct btf_type *t;
	const char *name;
	int r, *m;

	if (!id)
		return 0;
	if (c->memo[id])
		return c->memo[id];
	t = btf__type_by_id(c->src, id);
	if (!t)
		return -EINVAL;
	name = btf__name_by_offset(c->src, t->name_off);
	switch (btf_kind(t)) {
	case BTF_KIND_INT:
		r = btf__add_int(c->dst, name, t->size, btf_int_encoding(t));
		break;
	case BTF_KIND_FLOAT:
		r = btf__add_float(c->dst, name, t->size);
		break;
	case BTF_KIND_PTR:
		if (!c->ptr)
			c->ptr = btf__add_ptr(c->dst, 0);
		r = c->ptr;
		break;
	case BTF_KIND_ARRAY: {
		const struct btf_array *a = btf_array(t);
		int elem = copy_type(c, a->type), index = copy_type(c, a->index_type);

		r = elem < 0	? elem
		    : index < 0 ? index
				: btf__add_array(c->dst, index, elem, a->nelems);
		break;
	}
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION: {
		const struct btf_member *mb = btf_members(t);
		int n = btf_vlen(t);

		/* members first: fields go onto the type added last */
		m = calloc(n + 1, sizeof(*m));
		if (!m)
			return -ENOMEM;
		r = 0;
		for (int i = 0; i < n && r >= 0; i++)
			r = m[i] = copy_type(c, mb[i].type);
		if (r >= 0)
			r = btf_is_struct(t) ? btf__add_struct(c->dst, name, t->size)
					     : btf__add_union(c->dst, name, t->size);
		for (int i = 0; i < n && r >= 0; i++) {
			int e = btf__add_field(c->dst, btf__name_by_offset(c->src, mb[i].name_off),
					       m[i], btf_member_bit_offset(t, i),
					       btf_member_bitfield_size(t, i));

			if (e)
				r = e;
		}
		free(m);
		break;
	}
	case BTF_KIND_ENUM: {
		const struct btf_enum *e = btf_enum(t);

		r = btf__add_enum(c->dst, name, t->size);
		for (int i = 0; i < btf_vlen(t) && r >= 0; i++)
			if (btf__add_enum_value(c->dst, btf__name_by_offset(c->src, e[i].name_off),
						e[i].val))
				r = -EINVAL;
		break;
	}
	case BTF_KIND_ENUM64: {
		const struct btf_enum64 *e = btf_enum64(t);

		r = btf__add_enum64(c->dst, name, t->size, btf_kflag(t));
		for (int i = 0; i < btf_vlen(t) && r >= 0; i++)
			if (btf__add_enum64_value(c->dst,
						  btf__name_by_offset(c->src, e[i].name_off),
						  btf_enum64_value(&e[i])))
				r = -EINVAL;
		break;
	}
	case BTF_KIND_TYPEDEF:
		r = copy_type(c, t->type);
		if (r >= 0)
			r = btf__add_typedef(c->dst, name, r);
		break;
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
		r = copy_type(c, t->type);
		break;
	case BTF_KIND_FWD:
		r = btf__add_fwd(c->dst, name, btf_kflag(t) ? BTF_FWD_UNION : BTF_FWD_STRUCT);
		break;
	default: /* functions, variables, sections: not inside a struct */
		return -EINVAL;
	}
	if (r > 0)
		c->memo[id] = r;
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* This boot's files of other builds kept beside the one just written (a host that runs
 * a few bpfprof builds keeps each one's; one that rebuilds all day does not fill /run). */
#define KEEP_OTHER_BUILDS 7

struct aged {
	char name[64];
	int64_t mtime;
};

static int cmp_newest(const void *a, const void *b)
{
	const struct aged *x = a, *y = b;

	return (x->mtime < y->mtime) - (x->mtime > y->mtime);
}

/*
 * The cache's old entries in the directory dfd: files of other boots, and
 * of this boot's other builds (objects no longer built) all but the newest
 * KEEP_OTHER_BUILDS.
 */
static void drop_others(int dfd, const char *name)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct aged *same = NULL, *grown;
	size_t n = 0, cap = 0;
	char keep[64];
	struct dirent *e;
	struct stat st;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	/* "core-" and the boot id */
	snprintf(keep, sizeof(keep), "%.37s", name);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "core-", 5) || !strstr(e->d_name, ".btf") ||
		    !strcmp(e->d_name, name))
			continue;
		if (strncmp(e->d_name, keep, strlen(keep))) {
			unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (strlen(e->d_name) >= sizeof(same->name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(same, cap * sizeof(*same));
			if (!grown)
				break;
			same = grown;
		}
		strcpy(same[n].name, e->d_name);
		same[n++].mtime = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	}
	qsort(same, n, sizeof(*same), cmp_newest);
	for (size_t i = KEEP_OTHER_BUILDS; i < n; i++)
		unlinkat(dirfd(d), same[i].name, 0);
	free(same);
	closedir(d);
}

/* The struct, union and enum names of obj's BTF, flavors (___x) stripped, onto names. */
static int add_names(const struct corebtf_obj *obj, char ***names, size_t *nnames)
{
	struct bpf_object *o = bpf_object__open_mem(obj->elf, obj->sz, NULL);
	struct btf *local = o ? bpf_object__btf(o) : NULL;
	char **more;
	__u32 n;
	int err = 0;

	if (!local) {
		bpf_object__close(o);
		return -EINVAL;
	}
	n = btf__type_cnt(local);
	more = realloc(*names, (*nnames + n) * sizeof(**names));
	if (!more) {
		bpf_object__close(o);
		return -ENOMEM;
	}
	*names = more;
	for (__u32 i = 1; i < n && !err; i++) {
		const struct btf_type *t = btf__type_by_id(local, i);
		const char *nm = btf__name_by_offset(local, t->name_off);
		const char *flavor;

		if (!named_kind(t) || !nm || !*nm)
			continue;
		flavor = strstr(nm, "___");
		more[*nnames] = flavor ? strndup(nm, flavor - nm) : strdup(nm);
		if (!more[*nnames])
			err = -ENOMEM;
		else
			(*nnames)++;
	}
	bpf_object__close(o);
	return err;
}

int corebtf__write(const struct corebtf_obj *objs, int nobjs, const char *path)
{
	struct btf *vmlinux = NULL;
	struct copier c = {};
	char **names = NULL, tmp[4200], *slash;
	size_t nnames = 0;
	const void *raw;
	const char *why;
	__u32 rawsz, n;
	int err = -ENOMEM, fd, dfd = -1;
	ssize_t wrote;

	if (!*path)
		return -EINVAL;
	for (int o = 0; o < nobjs; o++) {
		err = add_names(&objs[o], &names, &nnames);
		if (err)
			goto out;
	}
	err = -ENOMEM;
	qsort(names, nnames, sizeof(*names), cmp_str);
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux) {
		err = -errno;
		goto out;
	}
	n = btf__type_cnt(vmlinux);
	c.src = vmlinux;
	c.dst = btf__new_empty();
	c.memo = calloc(n, sizeof(*c.memo));
	if (!c.dst || !c.memo)
		goto out;
	for (__u32 i = 1; i < n; i++) {
		const struct btf_type *t = btf__type_by_id(vmlinux, i);
		const char *nm = btf__name_by_offset(vmlinux, t->name_off);
		int r;

		if (!named_kind(t) || !nm || !*nm ||
		    !bsearch(&nm, names, nnames, sizeof(*names), cmp_str))
			continue;
		r = copy_type(&c, i);
		if (r < 0) {
			err = r;
			goto out;
		}
	}
	raw = btf__raw_data(c.dst, &rawsz);
	if (!raw)
		goto out;
	/* the directory: ours, nobody else's to write (util/safedir.h) */
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash - path) >= sizeof(tmp) - 200) {
		err = -EINVAL;
		goto out;
	}
	memcpy(tmp, path, slash - path);
	tmp[slash - path] = '\0';
	dfd = safedir__open(tmp, &why);
	if (dfd < 0) {
		err = dfd;
		goto out;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", slash + 1, (int)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	wrote = write(fd, raw, rawsz);
	if (close(fd) || wrote != (ssize_t)rawsz || renameat(dfd, tmp, dfd, slash + 1)) {
		err = -EIO;
		unlinkat(dfd, tmp, 0);
		goto out;
	}
	drop_others(dfd, slash + 1);
	pr_debug("CO-RE types for the next runs: %s (%u types of %u)", path, btf__type_cnt(c.dst),
		 n);
	err = 0;
out:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(c.memo);
	btf__free(c.dst);
	btf__free(vmlinux);
	if (dfd >= 0)
		close(dfd);
	return err;
}
