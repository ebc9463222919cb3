# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""ctypes_nocfi.py LIB SECONDS: Python -> outer() -> call_spin() -> nocfi_spin (C, no CFI, no FP),
for SECONDS of CPU time."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.nocfi_spin.argtypes = [ctypes.c_double]


def call_spin(secs):
    lib.nocfi_spin(secs)


def outer(secs):
    call_spin(secs)


print("pid", __import__("os").getpid(), flush=True)
outer(float(sys.argv[2]))
