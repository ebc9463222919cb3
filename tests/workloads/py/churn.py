# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""churn.py SECONDS LIBDIR

What a busy host does to a whole-machine profiler's caches, all at once
until SECONDS have passed: short processes (each a new process entry),
distinct libraries dlopen'ed then unlinked (each a new file: symbols, an fd),
new Python code objects (names, line tables), threads with new names. For
measuring the agent's memory (tools/churn.sh), not for a test's assertions.
"""
import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time

secs = float(sys.argv[1])
libdir = sys.argv[2]
end = time.monotonic() + secs
LIB = os.path.join(libdir, "base.so")


def spawner():
    while time.monotonic() < end:
        subprocess.run(["/bin/sh", "-c", "i=0; while [ $i -lt 300 ]; do i=$((i+1)); done"])


def dlopener():
    n = 0
    while time.monotonic() < end:
        p = os.path.join(libdir, "l%d.so" % n)
        shutil.copy(LIB, p)
        lib = ctypes.CDLL(p)
        os.unlink(p)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.02:
            lib.lib_func(3)
        n += 1


def coder():
    n = 0

    def template(a):
        s = 0
        for i in range(200):
            s += i * a
        return s
    while time.monotonic() < end:
        c = template.__code__.replace(co_name="f%d" % n, co_qualname="f%d" % n,
                                      co_filename="gen%d.py" % n)
        f = type(template)(c, globals())
        for _ in range(20):
            f(n)
        n += 1


def namer():
    n = 0
    while time.monotonic() < end:
        t = threading.Thread(target=lambda: sum(range(20000)), name="worker-%d" % n)
        t.start()
        t.join()
        n += 1


ts = [threading.Thread(target=fn) for fn in (spawner, dlopener, coder, namer)]
for t in ts:
    t.start()
for t in ts:
    t.join()
