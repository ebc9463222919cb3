/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tcache: unwind tables kept on disk between runs (--unwind-cache DIR), so
 * that an agent restarted on the same host (every deploy of an always-on
 * agent) loads the rows of the binaries it met before instead of compiling
 * their CFI again (libtorch_cpu: 1.4M rows, ~0.1-0.15 s of CPU).
 *
 * One file per table, named by the digest of what the table is made from
 * (cfidigest.h: the CFI sections' bytes and the program headers, hashed by
 * us), never by the build id, which anyone can write into an ELF file: a
 * file that changed, or another file carrying the same build id, is a miss,
 * never another file's rows. A file that a user other than root (or the
 * agent's) could change between the digest and the compile is named by its
 * identity on this host too (device, inode, size, mtime, ctime), so that its
 * rows serve only that same file again. The directory must be the agent's
 * own (owner euid, mode 0700, every directory above it owned by root or the
 * agent and writable by no one else), so that no other user can plant,
 * replace or read a table; a cached file must be a regular file of the same
 * owner, mode 0600, one link. Writes go to a temporary name and are renamed
 * into place; every read is checked (magic, version, identity, size, a
 * CRC-32 of the rows, rows sorted, rules known) and a bad file is deleted.
 * The directory holds at most max_bytes: least recently used tables are
 * deleted first (a hit refreshes the file's mtime). Beside the tables, a
 * root-owned file's digest is kept by its identity (IDENTITY.dig, checked
 * as a table is), so that a restart need not hash it again.
 */
#ifndef BPFPROF_TCACHE_H
#define BPFPROF_TCACHE_H

#include <stdint.h>

#include <linux/types.h>

#include "bpfprof.h"

struct tcache;

/* What a cached table is for: the file's CFI as it is now. */
struct tcache_key {
	uint8_t digest[32]; /* cfi__digest */
	/* a file others may write: its identity too; all 0 for a root-owned one */
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct tcache_stats {
	uint64_t hits, misses;
	uint64_t stored, store_failed;
	uint64_t invalid;	/* files that failed a check on read (deleted) */
	uint64_t evicted;	/* deleted for room */
	uint64_t digests_known; /* root-owned files whose digest was not computed again */
	uint64_t bytes;		/* the directory's tables now */
	uint64_t files;
};

/*
 * Open (and create, mode 0700) dir; *why names a failed check for the
 * caller's error line. Returns 0 or -errno (-EPERM: unsafe ownership or
 * mode).
 */
int tcache__open(struct tcache **out, const char *dir, uint64_t max_bytes, const char **why);
void tcache__free(struct tcache *c);

/*
 * The table for k: 0 with *rows (malloc'd, n rows, row pc relative to
 * *base), -ENOENT when there is none, another -errno when a file was there
 * but failed a check (it is deleted).
 */
int tcache__load(struct tcache *c, const struct tcache_key *k, struct bpf_urow **rows, uint32_t *n,
		 uint64_t *base);
/* Keep rows for k, evicting the least recently used tables for room. 0 or -errno. */
int tcache__store(struct tcache *c, const struct tcache_key *k, const struct bpf_urow *rows,
		  uint32_t n, uint64_t base);

/*
 * The digest of a root-owned file known by its identity (k's dev, ino,
 * size, mtime_ns, ctime_ns: anything else in it is ignored) into
 * k->digest: 0, or -ENOENT (hash it, then tcache__note_digest).
 */
int tcache__known_digest(struct tcache *c, struct tcache_key *k);
/* Remember k->digest for k's identity (a root-owned file's only). 0 or -errno. */
int tcache__note_digest(struct tcache *c, const struct tcache_key *k);

const struct tcache_stats *tcache__stats(const struct tcache *c);

#endif
