# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Two threads on two CPUs: hot() runs pure Python (holds the GIL), while
compress_loop() spends its time in zlib's deflate with the GIL released.
Each thread prints the CPU time it used ("cpu NAME SECONDS"): the samples a
profile should hold of it, whatever else the machine runs.
Usage: gil.py SECONDS."""
import sys
import threading
import time
import zlib

DATA = bytes((i * 7919 + (i >> 5)) % 251 for i in range(1 << 20))


def compress_loop(end):
    while time.monotonic() < end:
        zlib.compress(DATA, 9)  # LINE:compress
    sys.stdout.write(f"cpu compress {time.thread_time()}\n")  # one write: no interleaving


def hot(end):
    x = 0
    while time.monotonic() < end:
        for i in range(10000):  # LINE:hot
            x += i
    sys.stdout.write(f"cpu hot {time.thread_time()}\n")


def main():
    end = time.monotonic() + float(sys.argv[1])
    t = threading.Thread(target=compress_loop, args=(end,))
    t.start()
    hot(end)
    t.join()


if __name__ == "__main__":
    main()
