# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python heap ground truth for tools/bench_heap.py, run under memray and under
bpfprof alike (each in the same interpreter):

  churn   creates and drops CHURN bytearrays of 64 KiB (malloc'd: > pymalloc's
          512 bytes), 2 GiB allocated in all, little held at once
  peak    holds 80 MiB (20 bytearrays of 4 MiB) at once, then lets them go
  leak    16 blocks of 1 MiB from libc's malloc through ctypes, never freed:
          still held when the interpreter has exited

Prints what it did."""
import ctypes
import sys

MIB = 1 << 20
CHURN = int(sys.argv[1]) if len(sys.argv) > 1 else 32768


def churn():
    for _ in range(CHURN):
        b = bytearray(64 * 1024)
        b[0] = 1


def peak():
    held = [bytearray(4 * MIB) for _ in range(20)]
    return len(held)


def leak():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    return [libc.malloc(MIB) for _ in range(16)]


churn()
n = peak()
kept = leak()
print(f"churn {CHURN} x 64 KiB, peak {n * 4} MiB, leak {len(kept)} MiB")
