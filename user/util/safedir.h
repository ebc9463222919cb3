/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * safedir: a directory the agent keeps files in across runs (the unwind
 * table cache, the CO-RE types file), opened so that no other user can have
 * put or swapped anything on the way. Every component is opened from / with
 * O_NOFOLLOW; each directory above must be root's or ours and not writable
 * by group or others, unless it is root's and sticky (/tmp, /var/tmp: others
 * can add entries there but not rename or remove ours, and an entry they
 * made is not ours, so the next step refuses it); the last must be ours,
 * mode 0700. Missing components are created 0700.
 */
#ifndef BPFPROF_SAFEDIR_H
#define BPFPROF_SAFEDIR_H

/*
 * An O_RDONLY|O_DIRECTORY fd of the absolute path, or -errno with *why set
 * to one phrase that says what is wrong (for "bpfprof: ... DIR: <why>").
 */
int safedir__open(const char *path, const char **why);

#endif
