/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* record: the `bpfprof [record]` command, from BPF load to the output file. */
#ifndef BPFPROF_RECORD_H
#define BPFPROF_RECORD_H

/* Runs with the options in env; returns an exit status (EXIT_*). */
int record__run(void);

#endif
