# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A Python function whose time is spent in C: zlib compressing a large
buffer. Usage: ext.py SECONDS (of its CPU time, so that a test gets its
samples however loaded the host is)."""
import sys
import time
import zlib

DATA = bytes((i * 7919 + (i >> 5)) % 251 for i in range(1 << 20))


def compress_work():
    return len(zlib.compress(DATA, 9))  # LINE:compress_work


def main():
    end = time.thread_time() + float(sys.argv[1])
    n = 0
    while time.thread_time() < end:
        n += compress_work()
    print(n)


if __name__ == "__main__":
    main()
