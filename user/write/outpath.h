/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * outpath: where the agent, as root, may write a profile. A path is walked
 * one component at a time from / (or the working directory) without letting
 * the kernel follow a symlink: a symlink is followed only when nobody but
 * root or the agent's user can have made it (the link root's or ours, in a
 * directory root's or ours that no other user may write, or a sticky one),
 * so that a link another user planted in their own directory, in /tmp or in
 * a group-writable one can never send the profile (or a file of the agent's
 * choosing) somewhere else: to their tty, over /etc/crontab. Links of
 * procfs (/dev/stdout -> /proc/self/fd/1) are the kernel's and ours: opened
 * as they are.
 */
#ifndef BPFPROF_OUTPATH_H
#define BPFPROF_OUTPATH_H

#include <limits.h>
#include <stdbool.h>

struct outpath {
	int dirfd;		 /* O_PATH fd of the directory the name is in */
	char name[NAME_MAX + 1]; /* the last component */
	bool magic;		 /* name is a procfs link of ours (/proc/self/fd/N): open it */
	bool untrusted_link;	 /* name is a symlink we would not follow: replace it */
};

/*
 * Resolve path as above, following trusted symlinks up to the last
 * component. 0, or -errno with *why set to one phrase for the error line
 * ("'/tmp/x' is a symlink another user could have made").
 */
int outpath__resolve(const char *path, struct outpath *out, char *why, size_t whylen);

/*
 * An O_RDONLY|O_DIRECTORY fd of the directory path (resolved as above, made
 * 0700 if missing) that --continuous may write into: root's or ours, and
 * writable by nobody else unless it is sticky. -errno with *why otherwise.
 */
int outpath__open_dir(const char *path, char *why, size_t whylen);

/* Whether nobody but root or us may add, replace or remove names in the directory dirfd. */
bool outpath__dir_private(int dirfd);

#endif
