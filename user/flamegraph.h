/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef BPFPROF_FLAMEGRAPH_H
#define BPFPROF_FLAMEGRAPH_H

/*
 * bpfprof flamegraph [IN.folded] [-o OUT.svg] [--inverted] [--title T]:
 * render folded stacks (ours or any other tool's) as the SVG flame graph.
 * argv[0] is the command word. Returns the exit status.
 */
int flamegraph__main(int argc, char **argv);

#endif
