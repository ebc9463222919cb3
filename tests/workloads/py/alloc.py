# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Known Python heap behaviour: keep_buffers() allocates KEEP bytearrays of
1 MiB and keeps them, churn_buffers() allocates CHURN of 1 MiB and drops each
at once. Usage: alloc.py [KEEP] [CHURN]. Prints "done", then leaves with
os._exit: no interpreter shutdown to free what was kept."""
import os
import sys
import time

MIB = 1 << 20
kept = []


def keep_buffers(n):
    for _ in range(n):
        kept.append(bytearray(MIB))  # LINE:keep


def churn_buffers(n):
    total = 0
    for _ in range(n):
        b = bytearray(MIB)  # LINE:churn
        total += len(b)
    return total


def main():
    keep = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    churn = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    # The profiler builds a new process's unwind tables and finds its
    # interpreter within ~100 ms of exec; allocations before that have no
    # Python frames. This test is about attribution, not that race.
    time.sleep(0.5)
    keep_buffers(keep)
    churn_buffers(churn)
    # The profiler names a Python frame by reading its code object from this
    # process; one that exits within milliseconds of its last sampled call
    # can leave it nothing to read (counted as frames dropped). Stay a moment.
    time.sleep(1)
    print("done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
