# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A fixed amount of pure-Python work under a Python stack DEPTH frames deep.
Usage: deep.py DEPTH ITERATIONS. Prints "elapsed SECONDS"."""
import sys
import time


def leaf(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def down(depth, n):
    if depth <= 1:
        return leaf(n)
    return down(depth - 1, n) + 0  # not a tail position


def main():
    depth, iters = int(sys.argv[1]), int(sys.argv[2])
    start = time.monotonic()
    for _ in range(iters):
        down(depth, 20000)
    print("elapsed %.6f" % (time.monotonic() - start), flush=True)


if __name__ == "__main__":
    main()
