# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A process that exits right after running code it had not run before.
Usage: exit_fresh.py WARM_S FRESH_S COPIES. Spins in warm() for WARM_S of CPU
(the profiler knows the interpreter by then), then runs COPIES copies of
fresh() (fresh_0, fresh_1...: new code objects, same lines), never called
before, one after the other for FRESH_S of CPU in all, and exits at once
(os._exit: no finalization). bpfprof drains its ring buffer every 100 ms: the
copies that ran after its last drain are named from the snapshots of their
code objects that BPF sent while they ran. Prints "key value" lines."""
import os
import sys
import time
import types


def warm(budget):
    start = time.thread_time()
    x = 0
    while time.thread_time() - start < budget:
        for i in range(500):  # LINE:warm
            x += i * i
    return x


def fresh(budget):  # LINE:fresh_def
    start = time.thread_time()
    x = 0
    while time.thread_time() - start < budget:
        for i in range(500):
            x += i * i
    return x  # LINE:fresh_end


def copies(n):
    """n functions, each with its own copy of fresh's code object."""
    out = []
    for i in range(n):
        name = "fresh_%d" % i
        kw = {"co_name": name}
        if sys.version_info >= (3, 11):
            kw["co_qualname"] = name
        out.append(types.FunctionType(fresh.__code__.replace(**kw), globals(), name))
    return out


def main():
    warm(float(sys.argv[1]))
    fns = copies(int(sys.argv[3]))
    t0 = time.thread_time()
    for f in fns:
        f(float(sys.argv[2]) / len(fns))  # LINE:call_fresh
    print("fresh_cpu %.3f" % (time.thread_time() - t0), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
