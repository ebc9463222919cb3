# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""finalize_space ground truth: hold_a() keeps 48 MiB and hold_b() 32 MiB
(blocks of 4 MiB: each is sampled with P = 1 - e^-32 at the
--alloc-rate 128k its tests use) until
the script ends normally; the interpreter frees them at shutdown, after
Py_FinalizeEx is entered. In use at the end: ~nothing; at Py_FinalizeEx
entry and at the peak: 48 + 32 MiB."""
MIB = 1 << 20
held_a = []
held_b = []


def hold_a():
    for _ in range(12):
        held_a.append(bytearray(4 * MIB))


def hold_b():
    for _ in range(8):
        held_b.append(bytearray(4 * MIB))


hold_a()
hold_b()
print("holding", (len(held_a) + len(held_b)) * 4, "MiB")
