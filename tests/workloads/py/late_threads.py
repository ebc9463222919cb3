# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Threads started late and short: the main thread runs Python for WARM
seconds of CPU (so that the process is no longer new to the profiler), then
starts N threads one after another, each running Python in late_work() for
SECS of CPU and ending. Prints each thread's tid and the CPU it got.
Usage: late_threads.py WARM N SECS"""
import sys
import threading
import time


def spin(secs):
    t = time.thread_time()
    x = 0
    while time.thread_time() - t < secs:
        x += 1  # LINE:spin
    return time.thread_time() - t


def late_work(secs, out):
    out.append((threading.get_native_id(), spin(secs)))


def main():
    warm, n, secs = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    spin(warm)
    got = []
    for i in range(n):
        t = threading.Thread(target=late_work, args=(secs, got), name=f"late-{i}")
        t.start()
        t.join()
    for tid, cpu in got:
        print(f"thread {tid} cpu={cpu:.4f}", flush=True)


main()
