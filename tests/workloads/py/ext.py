# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A Python function whose time is spent in C: zlib compressing a large
buffer. Usage: ext.py SECONDS."""
import sys
import time
import zlib

DATA = bytes((i * 7919 + (i >> 5)) % 251 for i in range(1 << 20))


def compress_work():
    return len(zlib.compress(DATA, 9))  # LINE:compress_work


def main():
    end = time.monotonic() + float(sys.argv[1])
    n = 0
    while time.monotonic() < end:
        n += compress_work()
    print(n)


if __name__ == "__main__":
    main()
