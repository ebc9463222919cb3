# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Known Python CPU split: work_a 0.50, work_b 0.30 (through middle), work_c
0.20 of the main thread's CPU time, plus a second thread spinning in
background(). Usage: split.py SECONDS. Prints the CPU each really got."""
import sys
import threading
import time


def spin(budget):
    start = time.thread_time()
    x = 0
    while time.thread_time() - start < budget:
        for i in range(2000):  # LINE:spin
            x += i * i
    return time.thread_time() - start


def work_a(budget):
    return spin(budget)  # LINE:work_a


def work_b(budget):
    return spin(budget)  # LINE:work_b


def middle(budget):
    return work_b(budget)  # LINE:middle


def work_c(budget):
    return spin(budget)  # LINE:work_c


def background(stop):
    x = 0
    while not stop.is_set():
        for i in range(2000):  # LINE:background
            x += i
        time.sleep(0.001)


def main():
    secs = float(sys.argv[1])
    stop = threading.Event()
    t = threading.Thread(target=background, args=(stop,), name="bg-worker")
    t.start()
    owed = [0.0, 0.0, 0.0]
    used = [0.0, 0.0, 0.0]
    shares = [0.005, 0.003, 0.002]
    fns = [work_a, middle, work_c]
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for i in range(3):
            owed[i] += shares[i]
            if owed[i] > used[i]:
                used[i] += fns[i](owed[i] - used[i])
    stop.set()
    t.join()
    print("cpu work_a=%.3f work_b=%.3f work_c=%.3f" % tuple(used), flush=True)


if __name__ == "__main__":
    main()
