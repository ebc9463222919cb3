/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tfile: files opened on behalf of a target process. The target controls
 * their paths, their contents and what kind of file sits at a path, so a
 * path is resolved inside the target's root (openat2 RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS: an absolute symlink cannot lead to the host's
 * files), looked at with O_PATH first (no open of a FIFO or device, which
 * could block or have side effects) and opened for reading only when it is a
 * regular file of a sane size, not on FUSE (its server could stall a read). Every refusal is counted for the summary.
 */
#ifndef BPFPROF_TFILE_H
#define BPFPROF_TFILE_H

#include <stdint.h>
#include <sys/stat.h>

/* Bigger than any real binary or debug file; what is read of it is capped too. */
#define TFILE_MAX_SIZE (4ULL << 30)

struct tfile_stats {
	uint64_t opened;	/* regular files opened */
	uint64_t refused_type;	/* not a regular file (FIFO, device, socket, directory) */
	uint64_t refused_size;	/* empty, or over TFILE_MAX_SIZE */
	uint64_t refused_fuse;	/* on a FUSE file system, whose server could stall reads */
	uint64_t refused_owner; /* a file read as the target's own (tfile__open_own) that is not */
	uint64_t changed;	/* changed while being read (truncated, replaced) */
};

/*
 * An O_PATH directory fd of pid's root (/proc/PID/root); it keeps naming that
 * root after the process exits. pid 0: the host's "/". Returns fd or -errno.
 */
int tfile__root(uint32_t pid);
/*
 * Open path (absolute or relative to root) resolved inside root_fd (from
 * tfile__root; a negative root_fd means the host's "/"), read-only,
 * O_NONBLOCK | O_NOCTTY | O_CLOEXEC. *st (if not NULL) gets its fstat.
 * Returns the fd, -EPERM for a file that is not regular or -EFBIG for one
 * whose size is refused (both counted), or another -errno.
 */
int tfile__open(int root_fd, const char *path, struct stat *st);
/*
 * A file the target itself keeps for tools to read (a JIT's perf map), read
 * only as the target could: path resolved as tfile__open does, its last
 * component not followed (a symlink is refused as not regular), and owned
 * by one of the target's uids (uids[0..nuids), as perf requires of a map:
 * a bind mount or a link in the target's namespace cannot hand over
 * another user's file). Returns the fd, -EPERM (counted) for a file that is
 * not regular or not the target's, or another -errno as tfile__open.
 */
int tfile__open_own(int root_fd, const char *path, const uint32_t *uids, int nuids,
		    struct stat *st);
/*
 * The same checks for a procfs magic link that names a file (e.g.
 * /proc/PID/map_files/START-END), which RESOLVE_NO_MAGICLINKS would refuse.
 */
int tfile__open_link(const char *link, struct stat *st);
/* Count a file found changed while it was read (a short read, a new size). */
void tfile__changed(void);
const struct tfile_stats *tfile__stats(void);

#endif
