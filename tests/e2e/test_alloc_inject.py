# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--alloc -p: the in-process sampler is loaded into a running process
(user/collect/inject.c) at a safe point, and its calls are put back at the end
(issue 25, item 5: a uprobe trap per call cost 191x on a malloc loop).

The target (tests/workloads/inject_target.c) waits in read(), epoll_wait() or
nanosleep() while bpfprof injects; it checks itself that its wait was not
disturbed (the read gets its line whole, no EINTR it did not cause) and exits 3
if it was. Where the sampler cannot be loaded (a static program, a process
already traced) the uprobe path covers it, and -v says why."""
import ctypes
import os
import signal
import subprocess
import sys

import pytest

from conftest import BPFPROF, parse_folded, wait_recording, workload

MIB = 1 << 20
# inject_target.c's ground truth
LEAK = 48 * MIB
STRDUP = 16 * MIB
CHURN_SUM = sum(i % 256 for i in range(2000))  # churn_inject's checksum
PHASE1 = CHURN_SUM + sum(range(48)) + 16 * (MIB - 1)
PHASE2 = PHASE1 + CHURN_SUM


def leaf(stacks, fn):
    return sum(c for f, c in stacks if fn in f)


class Target:
    """inject_target MODE, waiting; go() ends one of its two waits."""

    def __init__(self, mode, pre=()):
        self.mode = mode
        self.p = subprocess.Popen(list(pre) + [workload("inject_target"), mode],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert self.p.stdout.readline() == "ready\n", self.p.stderr.read()

    def go(self):
        if self.mode in ("sleep", "spin"):
            os.kill(self.p.pid, signal.SIGUSR1)
        else:
            self.p.stdin.write("go\n")
            self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def finish(self):
        try:
            out, err = self.p.communicate(timeout=60)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        return self.p.returncode, out, err


def profile_pid(tmp_path, t, *opts):
    """bpfprof -v --alloc -p t for t's first phase, Ctrl-C, then t's second phase
    with bpfprof gone. -> (bpfprof's stderr, stacks, t's phase lines, t's exit)."""
    out = tmp_path / "heap.folded"
    p = subprocess.Popen([BPFPROF, "-v", "--alloc", "--alloc-rate", "1", *opts, "-p",
                          str(t.p.pid), "-o", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        err = wait_recording(p)
        phase1 = t.go()
        p.send_signal(signal.SIGINT)
        err += p.communicate(timeout=120)[1]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    maps = open(f"/proc/{t.p.pid}/maps").read()
    phase2 = t.go()
    rc, rest, terr = t.finish()
    return err, parse_folded(out.read_text()), (phase1, phase2, rest, terr, maps), rc


@pytest.mark.parametrize("mode", ["read", "epoll", "sleep", "spin"])
def test_injected_and_put_back(tmp_path, mode):
    """The sampler is injected while the target waits in read/epoll_wait/nanosleep, or
    computes in its own code (spin: with live vector registers, which it checks):
    the wait is resumed as if nothing happened (epoll_wait returned EINTR before the
    system call was made again), its registers are its own, the leaks are charged
    to their functions, exactly at
    --alloc-rate 1 (strdup's malloc inside libc too), and after bpfprof ends the
    target runs on with its calls put back, its output and exit status unchanged."""
    t = Target(mode)
    err, stacks, (phase1, phase2, rest, terr, maps), rc = profile_pid(tmp_path, t)
    assert rc == 0, terr
    assert phase1 == f"phase1 {PHASE1}" and phase2 == f"phase2 {PHASE2}", (phase1, phase2)
    assert f"heap: {t.p.pid}: in-process sampling" in err, err
    assert f"heap: {t.p.pid}: its calls are back as they were" in err, err
    assert "libbpfprof_heap" in maps  # it stays loaded, idle
    assert "warning" not in err, err
    assert leaf(stacks, "leak_inject") == LEAK, stacks
    # One sample of a -p run, after the leak's mmaps (a strdup or a churn block),
    # comes at times with no user frames and is left out of the stacks, uncounted:
    # on the uprobe path too, so not the injection's (reported). At most that one.
    assert STRDUP - MIB <= leaf(stacks, "leak_strdup") <= STRDUP, stacks
    assert leaf(stacks, "churn_inject") == 0, stacks


def test_full_relro_target(tmp_path):
    """A program linked with -z now (full RELRO, as PostgreSQL and most distribution
    daemons): its GOT is read-only from the page the RELRO part starts in. Writing
    a slot there faulted inside the injected call (a PostgreSQL backend: 'the call
    into it faulted'); now it is injected and put back like the others."""
    src = os.path.join(os.path.dirname(__file__), "../workloads/inject_target.c")
    exe = tmp_path / "inject_target_now"
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-Wl,-z,relro,-z,now",
                    "-I" + os.path.dirname(src), src, "-o", str(exe)], check=True)
    t = Target("read")
    t.p.kill()
    t.p.wait()
    t.p = subprocess.Popen([str(exe), "read"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert t.p.stdout.readline() == "ready\n"
    err, stacks, (phase1, phase2, rest, terr, maps), rc = profile_pid(tmp_path, t)
    assert rc == 0 and phase2 == f"phase2 {PHASE2}", terr
    assert f"heap: {t.p.pid}: in-process sampling" in err, err
    assert "warning" not in err, err
    assert leaf(stacks, "leak_inject") == LEAK, stacks


def test_uprobes_opt_out(tmp_path):
    """--alloc-uprobes: no injection (the library never enters the process), the same
    leaks by uprobes."""
    t = Target("read")
    err, stacks, (phase1, phase2, rest, terr, maps), rc = profile_pid(tmp_path, t,
                                                                      "--alloc-uprobes")
    assert rc == 0, terr
    assert "in-process sampling" not in err, err
    assert "libbpfprof_heap" not in maps
    assert leaf(stacks, "leak_inject") == LEAK, stacks


def test_exited_target_needs_no_eject(tmp_path):
    """A target that exits (a zombie its parent has not reaped yet) before the end:
    nothing to put back, no warning (it said 'could not be put back (cannot trace it)')."""
    t = Target("read")
    out = tmp_path / "heap.folded"
    p = subprocess.Popen([BPFPROF, "-v", "--alloc", "--alloc-rate", "1", "-p", str(t.p.pid),
                          "-o", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        err = wait_recording(p)
        t.go()
        t.p.stdin.write("go\n")
        t.p.stdin.flush()
        assert t.p.stdout.readline().startswith("phase2")
        # exited, not reaped: a zombie until t.finish()
        os.waitid(os.P_PID, t.p.pid, os.WEXITED | os.WNOWAIT)
        p.send_signal(signal.SIGINT)
        err += p.communicate(timeout=120)[1]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert t.finish()[0] == 0
    assert p.returncode == 0, err
    assert "could not be put back" not in err and "warning" not in err, err
    assert leaf(parse_folded(out.read_text()), "leak_inject") == LEAK


def test_static_binary_falls_back(tmp_path):
    """A static program has no dlopen: uprobes cover it, -v says why, no warning."""
    src = os.path.join(os.path.dirname(__file__), "../workloads/inject_target.c")
    exe = tmp_path / "inject_target_static"
    c = subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-static",
                        "-I" + os.path.dirname(src), src, "-o", str(exe)],
                       capture_output=True, text=True)
    if c.returncode:
        pytest.skip("no static libc: " + c.stderr[-200:])
    t = Target("read")
    t.p.kill()
    t.p.wait()
    p = subprocess.Popen([str(exe), "read"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    t.p = p
    err, stacks, (phase1, phase2, rest, terr, maps), rc = profile_pid(tmp_path, t)
    assert rc == 0 and phase2 == f"phase2 {PHASE2}", terr
    assert f"heap: {p.pid}: uprobes (the sampler could not be loaded: no dlopen" in err, err
    assert "warning" not in err, err
    assert leaf(stacks, "leak_inject") == LEAK, stacks


PTRACE_SEIZE = 0x4206


def test_traced_target_falls_back(tmp_path):
    """A process already traced (a debugger or strace on it: here this test, by
    PTRACE_SEIZE) cannot be injected: uprobes cover it, -v names the tracer."""
    t = Target("read")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    assert libc.ptrace(PTRACE_SEIZE, t.p.pid, None, None) == 0, os.strerror(ctypes.get_errno())
    err, stacks, (phase1, phase2, rest, terr, maps), rc = profile_pid(tmp_path, t)
    assert rc == 0 and phase2 == f"phase2 {PHASE2}", terr
    assert f"heap: {t.p.pid}: uprobes (the sampler could not be loaded: it is traced by " \
        f"process {os.getpid()}" in err, err
    assert "libbpfprof_heap" not in maps
    assert leaf(stacks, "leak_inject") == LEAK, stacks


PY_TARGET = r'''
import sys
def keep_buffers(n):
    return [bytearray(1 << 20) for _ in range(n)]
print("ready", flush=True)
sys.stdin.readline()
kept = keep_buffers(32)
print("phase1", len(kept), flush=True)
sys.stdin.readline()
more = keep_buffers(4)
print("phase2", len(kept) + len(more), flush=True)
'''


def test_python_target(tmp_path):
    """A Python process waiting on stdin: injected, its bytearrays charged to the
    Python function that made them, and it runs on after."""
    script = tmp_path / "hold.py"
    script.write_text(PY_TARGET)
    p = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    out = tmp_path / "heap.folded"
    b = subprocess.Popen([BPFPROF, "-v", "--alloc", "--alloc-rate", "128k", "-p", str(p.pid),
                          "-o", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        err = wait_recording(b)
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline() == "phase1 32\n"
        b.send_signal(signal.SIGINT)
        err += b.communicate(timeout=120)[1]
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline() == "phase2 36\n"
        assert p.wait(timeout=60) == 0
    finally:
        for x in (b, p):
            if x.poll() is None:
                x.kill()
                x.wait()
    assert b.returncode == 0, err
    assert f"heap: {p.pid}: in-process sampling" in err, err
    stacks = parse_folded(out.read_text())
    # 32 blocks of 1 MiB at 128 KiB: each missed with P = e^-8
    got = sum(c for f, c in stacks if any(x.startswith("keep_buffers") for x in f))
    assert 0.85 * 32 * MIB <= got <= 1.15 * 32 * MIB, (got, stacks)


def test_second_run_on_an_injected_target(tmp_path):
    """Two bpfprof -p runs on one process: the first injects; the second falls back to
    uprobes, says why, and does not count the first one's sampler's records as well
    (it read 2x the leak)."""
    t = Target("read")
    runs = []
    try:
        for name in ("first", "second"):
            out = tmp_path / f"{name}.folded"
            # allocated bytes: a block counted twice would read twice (in use, the
            # second record of an address replaces the first)
            p = subprocess.Popen([BPFPROF, "-v", "--alloc", "--alloc-rate", "1",
                                  "--alloc-metric", "alloc_space", "-p", str(t.p.pid), "-o",
                                  str(out)], stderr=subprocess.PIPE, text=True)
            runs.append((p, out, [wait_recording(p)]))
        assert t.go() == f"phase1 {PHASE1}"
        for p, _, err in reversed(runs):
            p.send_signal(signal.SIGINT)
            err.append(p.communicate(timeout=120)[1])
    finally:
        for p, _, _ in runs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert t.go() == f"phase2 {PHASE2}"
    assert t.finish()[0] == 0
    (p1, out1, err1), (p2, out2, err2) = runs
    err1, err2 = "".join(err1), "".join(err2)
    assert p1.returncode == 0 and p2.returncode == 0, (err1, err2)
    assert f"heap: {t.p.pid}: in-process sampling" in err1, err1
    assert "another bpfprof run has its sampler in it" in err2, err2
    for out, err in ((out1, err1), (out2, err2)):
        stacks = parse_folded(out.read_text())
        assert leaf(stacks, "leak_inject") == LEAK, err
        # (at most one sample without user frames: test_injected_and_put_back)
        assert 1999 * 64 * 1024 <= leaf(stacks, "churn_inject") <= 2000 * 64 * 1024, err


def test_injected_again_after_the_first_run(tmp_path):
    """A second -p run after the first one ended (its calls put back) loads the sampler
    again (it is still mapped: no second copy) and counts the second phase once."""
    t = Target("read")
    runs = []
    for phase in (1, 2):
        out = tmp_path / f"phase{phase}.folded"
        p = subprocess.Popen([BPFPROF, "-v", "--alloc", "--alloc-rate", "1", "--alloc-metric",
                              "alloc_space", "-p", str(t.p.pid), "-o", str(out)],
                             stderr=subprocess.PIPE, text=True)
        try:
            err = wait_recording(p)
            # injected twice, loaded once
            text = [l for l in open(f"/proc/{t.p.pid}/maps") if "libbpfprof_heap" in l]
            assert len([l for l in text if " r-xp " in l]) == 1, text
            line = t.go()
            p.send_signal(signal.SIGINT)
            err += p.communicate(timeout=120)[1]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, err
        runs.append((line, parse_folded(out.read_text()), err))
    assert t.finish()[0] == 0
    assert [l for l, _, _ in runs] == [f"phase1 {PHASE1}", f"phase2 {PHASE2}"]
    for _, _, err in runs:
        assert f"heap: {t.p.pid}: in-process sampling" in err, err
    stacks = runs[1][1]
    # phase 2: churn_inject's 2000 blocks of 64 KiB (at most one without user frames)
    assert 1999 * 64 * 1024 <= leaf(stacks, "churn_inject") <= 2000 * 64 * 1024, stacks
    assert leaf(stacks, "leak_inject") == 0, stacks
