# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Two threads on two CPUs: hot() runs pure Python (holds the GIL), while
compress_loop() spends its time in zlib's deflate with the GIL released.
Each runs SECONDS of its own CPU time (however loaded the host) and prints
the CPU time it used in its loop ("cpu NAME SECONDS"): the samples a profile
should hold of it, whatever else the machine runs. Not the main thread's
whole thread_time(): that includes building DATA at import (~170 samples'
worth next to two busy loops, a quarter of what hot() got in 3 s of wall
time then).
Usage: gil.py SECONDS."""
import sys
import threading
import time
import zlib

DATA = bytes((i * 7919 + (i >> 5)) % 251 for i in range(1 << 20))


def compress_loop(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:
        zlib.compress(DATA, 9)  # LINE:compress
    # one write: no interleaving
    sys.stdout.write(f"cpu compress {time.thread_time() - t0}\n")


def hot(secs):
    x = 0
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:
        for i in range(10000):  # LINE:hot
            x += i
    sys.stdout.write(f"cpu hot {time.thread_time() - t0}\n")


def main():
    secs = float(sys.argv[1])
    t = threading.Thread(target=compress_loop, args=(secs,))
    t.start()
    hot(secs)
    t.join()


if __name__ == "__main__":
    main()
