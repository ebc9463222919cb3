// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "unwind/cfi.h"
#include "unwind/tcache.h"
#include "util/safedir.h"

/*
 * Bumped when the file layout below changes (the rows' meaning is
 * CFI_VERSION). 2: named by the CFI digest, not the build id.
 */
#define TCACHE_FORMAT 2
/* Far above any real table (libtorch_cpu: 1.4M rows); a header claiming more is bad. */
#define TCACHE_MAX_ROWS (1U << 28)
/* A temporary file this old is a crashed writer's, not another agent's in progress. */
#define TMP_STALE_S 60

static const char MAGIC[8] = "BPFPUTB";

struct hdr {
	char magic[8];
	uint32_t format;
	uint32_t cfi_version;
	uint32_t row_size;
	uint32_t nrows;
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	uint64_t base;
	uint32_t crc; /* CRC-32 of the rows */
	uint32_t pad;
	uint8_t digest[32];
	char spare[32];
};
_Static_assert(sizeof(struct hdr) == 144, "tcache header layout");

struct centry {
	char *name;
	uint64_t bytes;
	int64_t used; /* mtime: last stored or loaded */
};

struct tcache {
	int dfd;
	uint64_t max_bytes;
	struct centry *e;
	size_t n, cap;
	uint32_t seq;
	struct tcache_stats st;
};

static bool is_table_name(const char *s)
{
	size_t n = strlen(s);

	return n > 5 && n < 200 && s[0] != '.' &&
	       (!strcmp(s + n - 5, ".utab") || !strcmp(s + n - 4, ".dig"));
}

static int add_entry(struct tcache *c, const char *name, uint64_t bytes, int64_t used)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].name, name)) {
			c->st.bytes += bytes - c->e[i].bytes;
			c->e[i].bytes = bytes;
			c->e[i].used = used;
			return 0;
		}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct centry *v = realloc(c->e, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->e = v;
		c->cap = cap;
	}
	c->e[c->n].name = strdup(name);
	if (!c->e[c->n].name)
		return -ENOMEM;
	c->e[c->n].bytes = bytes;
	c->e[c->n].used = used;
	c->n++;
	c->st.bytes += bytes;
	c->st.files = c->n;
	return 0;
}

static void drop_entry(struct tcache *c, const char *name, bool unlink_it)
{
	if (unlink_it)
		unlinkat(c->dfd, name, 0);
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].name, name)) {
			c->st.bytes -= c->e[i].bytes;
			free(c->e[i].name);
			c->e[i] = c->e[--c->n];
			break;
		}
	c->st.files = c->n;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

/* What is there already: tables (their sizes and ages), and crashed writers' leftovers. */
static int scan(struct tcache *c)
{
	int fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct stat st;
	int err = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d)) && !err) {
		if (fstatat(c->dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (!strncmp(de->d_name, ".tmp-", 5)) {
			if (st.st_mtim.tv_sec + TMP_STALE_S < time(NULL))
				unlinkat(c->dfd, de->d_name, 0);
			continue;
		}
		if (is_table_name(de->d_name))
			err = add_entry(c, de->d_name, (uint64_t)st.st_size, mtime_ns(&st));
	}
	closedir(d);
	return err;
}

int tcache__open(struct tcache **out, const char *dir, uint64_t max_bytes, const char **why)
{
	struct tcache *c = calloc(1, sizeof(*c));
	int err;

	*out = NULL;
	*why = "";
	if (!c)
		return -ENOMEM;
	c->max_bytes = max_bytes;
	c->dfd = safedir__open(dir, why);
	if (c->dfd < 0) {
		err = c->dfd;
		c->dfd = -1;
		tcache__free(c);
		return err;
	}
	err = scan(c);
	if (err) {
		*why = "cannot list it";
		tcache__free(c);
		return err;
	}
	*out = c;
	return 0;
}

void tcache__free(struct tcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->e[i].name);
	free(c->e);
	if (c->dfd >= 0)
		close(c->dfd);
	free(c);
}

/* 64-bit FNV-1a of the file's identity (0 for a root-owned file: its digest alone names it). */
static uint64_t identity_hash(const struct tcache_key *k)
{
	uint64_t v[5] = { k->dev, k->ino, k->size, (uint64_t)k->mtime_ns, (uint64_t)k->ctime_ns };
	const unsigned char *p = (const unsigned char *)v;
	uint64_t h = 14695981039346656037ULL;

	if (!(v[0] | v[1] | v[2] | v[3] | v[4]))
		return 0;
	for (size_t i = 0; i < sizeof(v); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

/* "DIGEST-IDENTITY.utab", the digest in hex */
static int name_of(const struct tcache_key *k, char *buf, size_t len)
{
	char hex[2 * sizeof(k->digest) + 1];

	for (size_t i = 0; i < sizeof(k->digest); i++)
		snprintf(hex + 2 * i, 3, "%02x", k->digest[i]);
	if ((size_t)snprintf(buf, len, "%s-%016llx.utab", hex,
			     (unsigned long long)identity_hash(k)) >= len)
		return -EINVAL;
	return 0;
}

static bool hdr_matches(const struct hdr *h, const struct tcache_key *k)
{
	return h->dev == k->dev && h->ino == k->ino && h->size == k->size &&
	       h->mtime_ns == k->mtime_ns && h->ctime_ns == k->ctime_ns &&
	       !memcmp(h->digest, k->digest, sizeof(h->digest));
}

/* Sorted by pc, no repeats, only rules BPF knows. */
static bool rows_ok(const struct bpf_urow *rows, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if ((rows[i].rules & 15) > CFA_RULE_SIGNAL ||
		    (rows[i].rules >> 4) > RBP_RULE_UNSUPPORTED)
			return false;
		if (i && rows[i].pc <= rows[i - 1].pc)
			return false;
	}
	return true;
}

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;

	while (len) {
		ssize_t r = pread(fd, p, len, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		len -= r;
		off += r;
	}
	return 0;
}

int tcache__load(struct tcache *c, const struct tcache_key *k, struct bpf_urow **rows, uint32_t *n,
		 uint64_t *base)
{
	struct bpf_urow *v = NULL;
	char name[256];
	struct stat st;
	struct hdr h;
	int fd, err;

	*rows = NULL;
	*n = 0;
	if (name_of(k, name, sizeof(name))) {
		c->st.misses++;
		return -ENOENT;
	}
	fd = openat(c->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOENT ? -ENOENT : -errno;
		if (err != -ENOENT) /* a symlink or worse where a table should be */
			goto bad;
		c->st.misses++;
		drop_entry(c, name, false);
		return -ENOENT;
	}
	err = -EINVAL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_nlink != 1 || st.st_size < (off_t)sizeof(h) ||
	    (uint64_t)st.st_size > c->max_bytes)
		goto bad;
	if (read_full(fd, &h, sizeof(h), 0))
		goto bad;
	if (memcmp(h.magic, MAGIC, sizeof(MAGIC)) || h.format != TCACHE_FORMAT ||
	    h.row_size != sizeof(struct bpf_urow) || !h.nrows || h.nrows > TCACHE_MAX_ROWS ||
	    (uint64_t)st.st_size != sizeof(h) + (uint64_t)h.nrows * sizeof(*v))
		goto bad;
	if (h.cfi_version != CFI_VERSION || !hdr_matches(&h, k)) {
		/* an older compiler's rows, or another file hashed alike: compiled again */
		close(fd);
		c->st.misses++;
		return -ENOENT;
	}
	v = malloc((size_t)h.nrows * sizeof(*v));
	if (!v) {
		close(fd);
		return -ENOMEM;
	}
	if (read_full(fd, v, (size_t)h.nrows * sizeof(*v), sizeof(h)) ||
	    crc32(0, (const Bytef *)v, h.nrows * sizeof(*v)) != h.crc || !rows_ok(v, h.nrows))
		goto bad;
	futimens(fd, NULL); /* least recently used goes first */
	close(fd);
	add_entry(c, name, (uint64_t)st.st_size, (int64_t)time(NULL) * 1000000000LL);
	c->st.hits++;
	*rows = v;
	*n = h.nrows;
	*base = h.base;
	return 0;
bad:
	free(v);
	if (fd >= 0)
		close(fd);
	drop_entry(c, name, true);
	c->st.invalid++;
	return err;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= w;
	}
	return 0;
}

/* Delete least recently used tables until bytes more fit. */
static void make_room(struct tcache *c, uint64_t bytes, const char *keep)
{
	while (c->n && c->st.bytes + bytes > c->max_bytes) {
		size_t old = 0;

		for (size_t i = 1; i < c->n; i++)
			if (c->e[i].used < c->e[old].used)
				old = i;
		if (!strcmp(c->e[old].name, keep)) {
			drop_entry(c, keep, false); /* replaced below */
			continue;
		}
		drop_entry(c, c->e[old].name, true);
		c->st.evicted++;
	}
}

int tcache__store(struct tcache *c, const struct tcache_key *k, const struct bpf_urow *rows,
		  uint32_t n, uint64_t base)
{
	uint64_t bytes = sizeof(struct hdr) + (uint64_t)n * sizeof(*rows);
	struct hdr h = { .format = TCACHE_FORMAT,
			 .cfi_version = CFI_VERSION,
			 .row_size = sizeof(*rows),
			 .nrows = n,
			 .dev = k->dev,
			 .ino = k->ino,
			 .size = k->size,
			 .mtime_ns = k->mtime_ns,
			 .ctime_ns = k->ctime_ns,
			 .base = base };
	char name[256], tmp[64];
	int fd, err;

	if (!n || n > TCACHE_MAX_ROWS || bytes > c->max_bytes || name_of(k, name, sizeof(name)))
		return -E2BIG;
	memcpy(h.magic, MAGIC, sizeof(MAGIC));
	memcpy(h.digest, k->digest, sizeof(h.digest));
	h.crc = crc32(0, (const Bytef *)rows, n * sizeof(*rows));
	make_room(c, bytes, name);
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%u", (int)getpid(), c->seq++);
	fd = openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		c->st.store_failed++;
		return -errno;
	}
	err = write_full(fd, &h, sizeof(h));
	if (!err)
		err = write_full(fd, rows, (size_t)n * sizeof(*rows));
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(c->dfd, tmp, c->dfd, name))
		err = -errno;
	if (err) {
		unlinkat(c->dfd, tmp, 0);
		c->st.store_failed++;
		return err;
	}
	c->st.stored++;
	return add_entry(c, name, bytes, (int64_t)time(NULL) * 1000000000LL);
}

/*
 * A root-owned file's digest, remembered by its identity: its bytes can
 * change only by root's hand, and any change gives it a new change time, so
 * the same identity is the same bytes (a restart need not hash them again).
 */
static const char DIG_MAGIC[8] = "BPFPDIG";

struct dig {
	char magic[8];
	uint32_t format, pad;
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	uint8_t digest[32];
};
_Static_assert(sizeof(struct dig) == 88, "tcache digest layout");

static void dig_name(const struct tcache_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%016llx.dig", (unsigned long long)identity_hash(k));
}

int tcache__known_digest(struct tcache *c, struct tcache_key *k)
{
	char name[64];
	struct stat st;
	struct dig d;
	int fd;

	dig_name(k, name, sizeof(name));
	fd = openat(c->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_nlink != 1 || st.st_size != sizeof(d) ||
	    read_full(fd, &d, sizeof(d), 0) || memcmp(d.magic, DIG_MAGIC, sizeof(DIG_MAGIC)) ||
	    d.format != TCACHE_FORMAT) {
		close(fd);
		drop_entry(c, name, true);
		c->st.invalid++;
		return -EINVAL;
	}
	close(fd);
	if (d.dev != k->dev || d.ino != k->ino || d.size != k->size || d.mtime_ns != k->mtime_ns ||
	    d.ctime_ns != k->ctime_ns)
		return -ENOENT; /* another file hashed alike: hashed again, and stored over */
	memcpy(k->digest, d.digest, sizeof(k->digest));
	c->st.digests_known++;
	return 0;
}

int tcache__note_digest(struct tcache *c, const struct tcache_key *k)
{
	struct dig d = { .format = TCACHE_FORMAT,
			 .dev = k->dev,
			 .ino = k->ino,
			 .size = k->size,
			 .mtime_ns = k->mtime_ns,
			 .ctime_ns = k->ctime_ns };
	char name[64], tmp[64];
	int fd, err;

	memcpy(d.magic, DIG_MAGIC, sizeof(DIG_MAGIC));
	memcpy(d.digest, k->digest, sizeof(d.digest));
	dig_name(k, name, sizeof(name));
	make_room(c, sizeof(d), name);
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%u", (int)getpid(), c->seq++);
	fd = openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_full(fd, &d, sizeof(d));
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(c->dfd, tmp, c->dfd, name))
		err = -errno;
	if (err) {
		unlinkat(c->dfd, tmp, 0);
		return err;
	}
	return add_entry(c, name, sizeof(d), (int64_t)time(NULL) * 1000000000LL);
}

const struct tcache_stats *tcache__stats(const struct tcache *c)
{
	return &c->st;
}
