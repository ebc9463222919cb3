/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* command: `-- CMD`, started held, released after the ready line, reaped (collect/command.c). */
#ifndef BPFPROF_COMMAND_H
#define BPFPROF_COMMAND_H

#include <stdbool.h>

struct recorder;

/* Fork env.cmd_argv, held before its exec (r->child, r->go_fd, r->err_fd). 0 or -errno. */
int command__spawn(struct recorder *r);
/* Whether cmd can be exec'd as execvp would find it: 0 or -errno (-ENOENT, -EACCES). */
int command__check(const char *cmd);
/* The unwind tables of the command's executable and libraries, before it runs. */
void command__prepare_tables(struct recorder *r);
/* Let the command exec; 0, or -errno of a failed exec (printed). */
int command__release(struct recorder *r);
/* SIGCHLD came: if the command exited, note its status (r->child_done, r->child_status). */
void command__reap(struct recorder *r);
/*
 * End of the run (failed: bpfprof's own failure): wait for the command (its
 * status noted), close the pipes.
 */
void command__end(struct recorder *r, bool failed);
/*
 * What bpfprof exits with: status (EXIT_*) when bpfprof failed or ran no
 * command; else the command's own status, 128+N when signal N ended it.
 */
int command__exit_status(const struct recorder *r, int status);

#endif
