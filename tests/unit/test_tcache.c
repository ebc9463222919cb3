/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tcache (unwind tables kept on disk between runs): round trip, misses for
 * another file, every check on read, the directory's ownership and mode,
 * the size bound. A scratch directory under $FIXTURES (the build tree: no
 * directory above it may be writable by others); no root needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip.h"

#include "unwind/cfi.h"
#include "unwind/tcache.h"

static char base[PATH_MAX], dir[PATH_MAX + 16];

static int mk(void **state)
{
	const char *fx = getenv("FIXTURES");
	char cwd[PATH_MAX];

	(void)state;
	if (!fx)
		fx = getcwd(cwd, sizeof(cwd));
	snprintf(base, sizeof(base), "%s/tcache-XXXXXX", fx);
	if (!mkdtemp(base))
		return -1;
	snprintf(dir, sizeof(dir), "%s/c", base);
	return 0;
}

static int rm(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) ? -1 : 0;
}

/* A fresh cache directory for each test. */
static struct tcache *fresh(uint64_t max)
{
	char cmd[PATH_MAX + 32];
	struct tcache *c;
	const char *why;
	int err;

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	err = tcache__open(&c, dir, max, &why);
	if (err == -EPERM) /* the build tree itself sits under a directory others may write */
		skip_because("cache directory %s refused: %s", dir, why);
	assert_int_equal(err, 0);
	return c;
}

/* A key for a file others may write: its digest (from tag) and its identity. */
static struct tcache_key key(const char *tag, uint64_t ino)
{
	struct tcache_key k = { .dev = 2049,
				.ino = ino,
				.size = 123456,
				.mtime_ns = 1700000000123456789LL,
				.ctime_ns = 1700000001LL };

	strncpy((char *)k.digest, tag, sizeof(k.digest));
	return k;
}

/* A root-owned file's key: the digest alone. */
static struct tcache_key root_key(const char *tag)
{
	struct tcache_key k = { 0 };

	strncpy((char *)k.digest, tag, sizeof(k.digest));
	return k;
}

static struct bpf_urow *rows_of(uint32_t n)
{
	struct bpf_urow *r = calloc(n, sizeof(*r));

	for (uint32_t i = 0; i < n; i++) {
		r[i].pc = i * 16;
		r[i].cfa_off = 8 + (i % 7) * 8;
		r[i].rules = (i % 3 ? CFA_RULE_SP : CFA_RULE_FP) | RBP_RULE_CFA << 4;
		r[i].rbp_off8 = -2;
	}
	return r;
}

/* The one table file in the directory (name into buf). */
static void only_file(char *buf, size_t len)
{
	char cmd[PATH_MAX + 64];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls '%s'/*.utab", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(buf, (int)len, p));
	buf[strcspn(buf, "\n")] = 0;
	pclose(p);
}

static void test_round_trip_and_misses(void **state)
{
	struct tcache *c = fresh(1 << 20);
	struct tcache_key k = key("0123abcd", 77), other;
	struct bpf_urow *in = rows_of(1000), *out;
	uint64_t b = 0;
	uint32_t n;

	(void)state;
	assert_int_equal(tcache__load(c, &k, &out, &n, &b), -ENOENT);
	assert_int_equal(tcache__store(c, &k, in, 1000, 0x401000), 0);
	assert_int_equal(tcache__load(c, &k, &out, &n, &b), 0);
	assert_int_equal(n, 1000);
	assert_int_equal(b, 0x401000);
	assert_memory_equal(out, in, 1000 * sizeof(*in));
	free(out);

	/*
	 * A file others may write: the same CFI in another file (or this one
	 * changed) never gets its rows; nor does a root-owned file of that digest.
	 */
	other = k;
	other.ino = 78;
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), -ENOENT);
	other = k;
	other.ctime_ns++;
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), -ENOENT);
	other = key("0123abce", 77);
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), -ENOENT);
	other = root_key("0123abcd");
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), -ENOENT);
	/* a root-owned file's table serves any file of its digest, and no other */
	assert_int_equal(tcache__store(c, &other, in, 10, 0), 0);
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), 0);
	assert_int_equal(n, 10);
	free(out);
	other = root_key("0123abce");
	assert_int_equal(tcache__load(c, &other, &out, &n, &b), -ENOENT);

	assert_int_equal(tcache__stats(c)->hits, 2);
	assert_int_equal(tcache__stats(c)->stored, 2);
	assert_int_equal(tcache__stats(c)->files, 2);
	tcache__free(c);

	/* a new agent finds them */
	assert_int_equal(tcache__open(&c, dir, 1 << 20, &(const char *){ NULL }), 0);
	assert_int_equal(tcache__stats(c)->files, 2);
	assert_int_equal(tcache__load(c, &k, &out, &n, &b), 0);
	free(out);
	tcache__free(c);
	free(in);
}

/* Damage the stored file with cmd, then expect the load to fail and the file gone. */
static void damaged(void (*damage)(const char *path))
{
	struct tcache *c = fresh(1 << 20);
	struct tcache_key k = key("feed", 5);
	struct bpf_urow *in = rows_of(100), *out;
	char path[PATH_MAX];
	struct stat st;
	uint64_t b;
	uint32_t n;

	assert_int_equal(tcache__store(c, &k, in, 100, 0), 0);
	only_file(path, sizeof(path));
	damage(path);
	assert_true(tcache__load(c, &k, &out, &n, &b) < 0);
	assert_null(out);
	assert_int_equal(tcache__stats(c)->invalid, 1);
	assert_int_equal(lstat(path, &st), -1);
	tcache__free(c);
	free(in);
}

static void flip_row_byte(const char *path)
{
	int fd = open(path, O_RDWR);
	char ch;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &ch, 1, 144 + 8 * 50 + 2), 1);
	ch ^= 1;
	assert_int_equal(pwrite(fd, &ch, 1, 144 + 8 * 50 + 2), 1);
	close(fd);
}

static void truncate_it(const char *path)
{
	assert_int_equal(truncate(path, 144 + 8 * 99), 0);
}

static void readable_by_others(const char *path)
{
	assert_int_equal(chmod(path, 0644), 0);
}

static void second_link(const char *path)
{
	char l[PATH_MAX + 8];

	snprintf(l, sizeof(l), "%s.lnk", path);
	assert_int_equal(link(path, l), 0);
}

static void symlink_planted(const char *path)
{
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
}

static void test_checked_on_read(void **state)
{
	(void)state;
	damaged(flip_row_byte);
	damaged(truncate_it);
	damaged(readable_by_others);
	damaged(second_link);
	damaged(symlink_planted);
}

static void test_rows_validated(void **state)
{
	struct tcache *c = fresh(1 << 20);
	struct tcache_key k = key("aa", 1);
	struct bpf_urow *in = rows_of(10), *out;
	uint64_t b;
	uint32_t n;

	(void)state;
	/* the CRC holds, the rows do not: out of order, then a rule BPF does not know */
	in[5].pc = in[4].pc;
	assert_int_equal(tcache__store(c, &k, in, 10, 0), 0);
	assert_true(tcache__load(c, &k, &out, &n, &b) < 0);
	free(in);
	in = rows_of(10);
	in[3].rules = 9;
	assert_int_equal(tcache__store(c, &k, in, 10, 0), 0);
	assert_true(tcache__load(c, &k, &out, &n, &b) < 0);
	assert_int_equal(tcache__stats(c)->invalid, 2);
	tcache__free(c);
	free(in);
}

static void test_directory_checked(void **state)
{
	char p[PATH_MAX + 32];
	struct tcache *c;
	const char *why;

	(void)state;
	tcache__free(fresh(1 << 20));
	/* created 0700; opened by others' rules only when it is ours and closed to them */
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(tcache__open(&c, dir, 1 << 20, &why), -EPERM);
	assert_null(c);
	assert_int_equal(chmod(dir, 0700), 0);
	assert_int_equal(tcache__open(&c, dir, 1 << 20, &why), 0);
	tcache__free(c);
	/* a symlink on the way, a relative path, '..' */
	snprintf(p, sizeof(p), "%s/link", base);
	assert_int_equal(symlink(dir, p), 0);
	assert_true(tcache__open(&c, p, 1 << 20, &why) < 0);
	assert_true(tcache__open(&c, "relative/dir", 1 << 20, &why) < 0);
	snprintf(p, sizeof(p), "%s/../x", dir);
	assert_true(tcache__open(&c, p, 1 << 20, &why) < 0);
	/* a directory above writable by others */
	snprintf(p, sizeof(p), "%s/open", base);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, 0777), 0);
	snprintf(p, sizeof(p), "%s/open/c", base);
	assert_int_equal(tcache__open(&c, p, 1 << 20, &why), -EPERM);
	assert_null(c);
	/* ... unless it is root's and sticky, as /tmp: others cannot move what is ours */
	snprintf(p, sizeof(p), "%s/open", base);
	assert_int_equal(chmod(p, 01777), 0);
	snprintf(p, sizeof(p), "%s/open/c", base);
	if (geteuid() == 0) {
		assert_int_equal(tcache__open(&c, p, 1 << 20, &why), 0);
		tcache__free(c);
	} else {
		assert_int_equal(tcache__open(&c, p, 1 << 20, &why), -EPERM);
	}
}

static void test_bounded_lru(void **state)
{
	/* room for two tables of 100 rows (944 bytes each) */
	struct tcache *c = fresh(2000);
	struct bpf_urow *in = rows_of(100), *out;
	struct tcache_key k1 = key("01", 1), k2 = key("02", 2), k3 = key("03", 3);
	char p[PATH_MAX + 64];
	struct timeval old[2] = { { 1000, 0 }, { 1000, 0 } };
	uint64_t b;
	uint32_t n;
	int fd;

	(void)state;
	assert_int_equal(tcache__store(c, &k1, in, 100, 0), 0);
	assert_int_equal(tcache__store(c, &k2, in, 100, 0), 0);
	tcache__free(c);
	/* k1 used last (a load refreshes it); k2 made old */
	assert_int_equal(tcache__open(&c, dir, 2000, &(const char *){ NULL }), 0);
	/* k2's name begins with its digest, "02", in hex */
	snprintf(p, sizeof(p), "touch -d @1000 '%s'/3032*.utab", dir);
	assert_int_equal(system(p), 0);
	tcache__free(c);
	assert_int_equal(tcache__open(&c, dir, 2000, &(const char *){ NULL }), 0);
	assert_int_equal(tcache__load(c, &k1, &out, &n, &b), 0);
	free(out);
	assert_int_equal(tcache__store(c, &k3, in, 100, 0), 0);
	assert_int_equal(tcache__stats(c)->evicted, 1);
	assert_int_equal(tcache__load(c, &k2, &out, &n, &b), -ENOENT);
	assert_int_equal(tcache__load(c, &k1, &out, &n, &b), 0);
	free(out);
	assert_true(tcache__stats(c)->bytes <= 2000);
	/* bigger than the whole bound: not kept */
	free(in);
	in = rows_of(300);
	assert_int_not_equal(tcache__store(c, &k2, in, 300, 0), 0);
	tcache__free(c);

	/* a crashed writer's temporary file goes; a fresh one (another agent's) stays */
	snprintf(p, sizeof(p), "%s/.tmp-1-0", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(utimes(p, old), 0);
	snprintf(p, sizeof(p), "%s/.tmp-1-1", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tcache__open(&c, dir, 2000, &(const char *){ NULL }), 0);
	tcache__free(c);
	snprintf(p, sizeof(p), "%s/.tmp-1-0", dir);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/.tmp-1-1", dir);
	assert_int_equal(access(p, F_OK), 0);
	free(in);
}

/* A root-owned file's digest by its identity: found again only for that identity, checked. */
static void test_digest_memo(void **state)
{
	struct tcache *c = fresh(1 << 20);
	struct tcache_key k = key("abc", 9), q;
	char path[PATH_MAX + 64];

	(void)state;
	q = k;
	memset(q.digest, 0, sizeof(q.digest));
	assert_int_equal(tcache__known_digest(c, &q), -ENOENT);
	assert_int_equal(tcache__note_digest(c, &k), 0);
	assert_int_equal(tcache__known_digest(c, &q), 0);
	assert_memory_equal(q.digest, k.digest, sizeof(k.digest));
	/* the file changed (a new change time), or another inode: hashed again */
	q = k;
	q.ctime_ns++;
	assert_int_equal(tcache__known_digest(c, &q), -ENOENT);
	q = k;
	q.ino++;
	assert_int_equal(tcache__known_digest(c, &q), -ENOENT);
	/* opened up to others: not believed, deleted */
	snprintf(path, sizeof(path), "chmod 644 '%s'/*.dig", dir);
	assert_int_equal(system(path), 0);
	q = k;
	assert_int_equal(tcache__known_digest(c, &q), -EINVAL);
	assert_int_equal(tcache__known_digest(c, &q), -ENOENT);
	tcache__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_and_misses),
		cmocka_unit_test(test_checked_on_read),
		cmocka_unit_test(test_rows_validated),
		cmocka_unit_test(test_directory_checked),
		cmocka_unit_test(test_digest_memo),
		cmocka_unit_test(test_bounded_lru),
	};

	return cmocka_run_group_tests_name("tcache", tests, mk, rm);
}
