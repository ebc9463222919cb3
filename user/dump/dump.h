/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bpfprof dump -p PID [--json]: every thread's stack, now (dump.c). */
#ifndef BPFPROF_DUMP_H
#define BPFPROF_DUMP_H

/* argv[0] is "dump". Returns the exit status. */
int dump__main(int argc, char **argv);

#endif
