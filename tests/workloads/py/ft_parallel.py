# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Four threads running Python at once, each in a function of its own
(par_0 ... par_3) for SECS of its own CPU time; on a free-threaded build they
run in parallel. Each thread specializes its own copy of the bytecode
(3.14t+: co_tlbc), so its frames' positions point into that copy.
Prints each thread's native id and CPU time, and whether the GIL was on.
Usage: ft_parallel.py SECS"""
import sys
import threading
import time


def spin(secs):
    t = time.thread_time()
    x = 0
    while time.thread_time() - t < secs:
        for i in range(500):
            x += i  # LINE:spin
    return time.thread_time() - t


def par_0(secs, out):
    out[0] = (threading.get_native_id(), spin(secs))  # LINE:par_0


def par_1(secs, out):
    out[1] = (threading.get_native_id(), spin(secs))  # LINE:par_1


def par_2(secs, out):
    out[2] = (threading.get_native_id(), spin(secs))  # LINE:par_2


def par_3(secs, out):
    out[3] = (threading.get_native_id(), spin(secs))  # LINE:par_3


def main():
    secs = float(sys.argv[1])
    out = [None] * 4
    fns = [par_0, par_1, par_2, par_3]
    threads = [threading.Thread(target=f, args=(secs, out), name=f"par-{i}")
               for i, f in enumerate(fns)]
    wall = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - wall
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    for i, (tid, cpu) in enumerate(out):
        print(f"par_{i} {tid} cpu={cpu:.4f}", flush=True)
    print(f"gil={gil} wall={wall:.3f}", flush=True)


main()
