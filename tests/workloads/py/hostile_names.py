# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A process whose names carry terminal escape sequences, as an attacker on
the host would choose them: its comm (prctl PR_SET_NAME) sets the terminal
title, its threading name and OS thread name switch colours, and the Python
function it spins in has a code object named with a clear-screen sequence.
Usage: hostile_names.py SECONDS. Prints "ready" once every name is set."""
import ctypes
import sys
import threading
import time
import types

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)


def set_os_name(name):
    libc.prctl(PR_SET_NAME, name, 0, 0, 0)


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x += i
    return x


# the code object's own names are what a profiler reads from memory
code = spin.__code__.replace(co_name="hot\x1b[2J", co_qualname="hot\x1b[2Jspin\x1b]0;pwn\x07")
hot = types.FunctionType(code, globals(), "hot")


def worker(seconds):
    set_os_name(b"thr\x1b[31mred")
    hot(seconds)


seconds = float(sys.argv[1])
set_os_name(b"ev\x1b]0;pwn\x07il")
t = threading.Thread(target=worker, args=(seconds,), name="py\x1b[5mthread")
t.start()
print("ready", flush=True)
hot(seconds)
t.join()
