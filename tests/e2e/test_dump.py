# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""bpfprof dump -p PID against hung programs whose threads block in known
functions: blocked_read (C: read() on a pipe, nanosleep, a spinning thread)
and py/lock_wait.py (a thread blocked on a threading.Lock)."""
import json
import os
import re
import select
import subprocess
import time

import pytest

from conftest import python_params, run, workload

HERE = os.path.dirname(__file__)
LOCK_WAIT = os.path.join(HERE, "../workloads/py/lock_wait.py")


def start(cmd, ready_re):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    if not select.select([p.stdout], [], [], 60)[0]:  # a workload that never gets ready
        p.kill()
        p.wait()
        pytest.fail(f"{cmd[0]} printed nothing in 60 s")
    line = p.stdout.readline()
    m = re.search(ready_re, line)
    assert m, f"workload printed {line!r}"
    time.sleep(0.3)  # every thread reaches its blocking call
    return p, int(m.group(1))


def dump_json(pid):
    r = run(["dump", "-p", str(pid), "--json"], timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["pid"] == pid
    return d


def thread_with(d, fn):
    ts = [t for t in d["threads"] if any(f == fn or f.startswith(fn + " (") for f in t["frames"])]
    assert len(ts) == 1, (fn, d)
    return ts[0]


def test_dump_c_blocked_read():
    p, pid = start([workload("blocked_read")], r"pid (\d+)")
    try:
        d = dump_json(pid)
        assert len(d["threads"]) == 3
        main = thread_with(d, "wait_for_input")
        assert main["tid"] == pid and main["syscall"] == "read" and main["state"] == "S"
        # leaf first: libc's read, then the function that called it, then main
        fr = main["frames"]
        assert fr.index("wait_for_input") < fr.index("main")
        assert any("pipe_read" in k for k in main["kernel"]), main["kernel"]
        nap = thread_with(d, "nap_forever")
        assert nap["name"] == "napper" and nap["syscall"] in ("clock_nanosleep", "nanosleep")
        spin = thread_with(d, "spin_forever")
        assert spin["name"] == "spinner" and spin["frames"][0] == "spin_forever"
        # stopped briefly (generous: 2 shared CPUs), and not harmed: still blocked in read
        assert d["stopped_ms"] < 100, d["stopped_ms"]
        time.sleep(0.2)
        assert p.poll() is None
        with open(f"/proc/{pid}/syscall") as f:
            assert f.read().split()[0] == "0"  # read, restarted after the interrupt
        # the text form names the same things
        r = run(["dump", "-p", str(pid)], timeout=60)
        assert r.returncode == 0, r.stderr
        assert re.search(r'Thread %d "blocked_read" sleeping in read\(\)' % pid, r.stdout)
        assert "wait_for_input" in r.stdout and "stopped for" in r.stdout
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("python", python_params(("pyenv-3.12", "pyenv-3.13", "sid-3.14",
                                                   "sid-3.15", "ft-3.13t", "ft-3.14t")))
def test_dump_python_lock(python):
    """A free-threaded interpreter has no GIL: its threads' "gil" is null, not false."""
    p, pid = start([python, LOCK_WAIT], r"ready (\d+)")
    released = None if os.path.basename(python).endswith("t") else False
    try:
        d = dump_json(pid)
        waiter = thread_with(d, "wait_on_lock")
        assert waiter["syscall"] == "futex", waiter
        assert waiter["gil"] is released
        # the Python frame sits above the native lock acquire, under Thread.run
        fr = waiter["frames"]
        i = next(i for i, f in enumerate(fr) if f.startswith("wait_on_lock ("))
        assert re.match(r"wait_on_lock \(lock_wait\.py:\d+\)", fr[i])
        # (a stripped interpreter, Debian's, names only its exported functions:
        # the semaphore it waits on, not lock_PyThread_acquire_lock)
        assert any(w in f.lower() for f in fr[:i] for w in ("acquire", "semaphore")), fr
        main = thread_with(d, "hold_and_sleep")
        assert main["tid"] == pid and main["gil"] is released
        spin = thread_with(d, "spin_forever")
        assert spin["state"] == "R" or spin["gil"] is not None
    finally:
        p.kill()
        p.wait()


def test_dump_usage():
    r = run(["dump"])
    assert r.returncode == 2 and r.stderr.startswith("bpfprof: ") and len(r.stderr.splitlines()) == 1
    r = run(["dump", "-p", "999999999"])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    r = run(["dump", "--help"])
    assert r.returncode == 0 and "--json" in r.stdout
