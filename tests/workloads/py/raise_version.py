# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Pretends to be a newer CPython to out-of-process tools: overwrites the
version word of its own _PyRuntime's _Py_DebugOffsets block (which only
such tools read) with 3.MINOR, prints "ready PID", then runs Python in
spin_newer() for SECS of CPU. Usage: raise_version.py MINOR SECS"""
import ctypes
import os
import sys
import time


def spin_newer(secs):
    t = time.process_time()
    x = 0
    while time.process_time() - t < secs:
        x += 1  # LINE:spin_newer
    return x


def main():
    minor, secs = int(sys.argv[1]), float(sys.argv[2])
    rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    assert ctypes.string_at(rt, 8) == b"xdebugpy"
    ver = ctypes.c_uint64.from_address(rt + 8)
    ver.value = (3 << 24) | (minor << 16) | (ver.value & 0xffff)
    print(f"ready {os.getpid()}", flush=True)
    time.sleep(float(os.environ.get("RAISE_VERSION_WAIT", "3")))
    spin_newer(secs)


main()
