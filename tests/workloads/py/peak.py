# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Heap peak ground truth: hold_a() holds 48 MiB and hold_b() 32 MiB (blocks
of 4 MiB: each is sampled with P = 1 - e^-32 at the --alloc-rate 128k its
tests use), both held at
once, then the script returns normally and the interpreter frees everything
at shutdown. In use at the end: ~nothing; at the peak: 48 + 32 MiB."""
import time

MIB = 1 << 20
held = []


def hold_a():
    for _ in range(12):
        held.append(bytearray(4 * MIB))


def hold_b():
    for _ in range(8):
        held.append(bytearray(4 * MIB))


hold_a()
hold_b()
time.sleep(0.2)
held.clear()
print("done")
