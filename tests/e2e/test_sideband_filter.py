# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The side band follows only what the run profiles: with --cgroup, -p or
-- CMD, a process outside the target that maps files of its own (an
unprivileged one: attack surface for a root agent) never has them opened by
the agent, while the targets, a library dlopen()ed after the start, a process
moved into the cgroup after its mappings and one moved in before its exec
included, are fully named."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import (BPFPROF, CGROUP2, drain, in_cgroup_as, parse_folded, wait_recording,
                      workload)

NOBODY = 65534
SPLIT = ("work_a", "work_b", "work_c")
NLIBS = 40
# DIR: waits for a line on stdin, loads every .so of DIR, says so, holds them until killed
OUTSIDE = r"""
import ctypes, os, sys, time
sys.stdin.readline()
d = sys.argv[1]
libs = [ctypes.CDLL(os.path.join(d, n)) for n in sorted(os.listdir(d)) if n.endswith(".so")]
print("loaded %d" % len(libs), flush=True)
time.sleep(600)
"""


@pytest.fixture
def outside_libs():
    """NLIBS distinct copies of a small library, in a directory nobody can read."""
    d = tempfile.mkdtemp(prefix="bpfprof-sbf-")
    os.chmod(d, 0o755)
    src = os.path.join(d, "lib.c")
    with open(src, "w") as f:
        f.write("int lib_func(int x) { return x * 3 + 1; }\n")
    so = os.path.join(d, "lib.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", so, src], check=True)
    libs = os.path.join(d, "libs")
    os.mkdir(libs)
    for i in range(NLIBS):
        shutil.copy(so, os.path.join(libs, f"outlib{i:03d}.so"))
    script = os.path.join(d, "outside.py")
    with open(script, "w") as f:
        f.write(OUTSIDE)
    yield libs, script
    shutil.rmtree(d, ignore_errors=True)


def opened_under(pid, d):
    """The agent's fds on files under d."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(d + "/"):
                n += 1
        except OSError:
            pass
    return n


def by_pid(stacks):
    out = {}
    for frames, c in stacks:
        m = re.search(r"\[(\d+)\]$", frames[0])
        out.setdefault(int(m.group(1)), []).append((frames, c))
    return out


def check_named(stacks, what):
    """Most of a split workload's samples in work_X reach main through dispatch:
    its executable's (and dlopen()ed library's) mappings were known."""
    work = [(f, c) for f, c in stacks if any(w in f for w in SPLIT)]
    n = sum(c for _, c in work)
    good = sum(c for f, c in work if "dispatch" in f and "main" in f)
    assert n >= 30, (what, n, stacks[:5])
    assert good >= 0.9 * n, (what, good, n, sorted(work, key=lambda x: -x[1])[:5])


def kill(*procs):
    for p in procs:
        if p and p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("mode", ["cgroup", "pid", "cmd"])
def test_outside_files_never_opened(mode, outside_libs, slice_dir, tmp_path):
    """A process outside the target dlopen()s NLIBS libraries while the agent
    records: none of them is ever among the agent's open files (the agent used
    to open every file any process mapped: 40 here, 554 on a churning host for
    an empty cgroup), and -v counts what the side band skipped."""
    if mode == "cgroup" and CGROUP2 is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    libs, script = outside_libs
    out = tmp_path / "out.folded"
    inside = os.path.join(slice_dir, "app") if mode == "cgroup" else None
    target = late = outside = agent = started = None
    try:
        outside = subprocess.Popen(in_cgroup_as(None, NOBODY, [sys.executable, script, libs]),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        args = [BPFPROF, "--per-pid", "-F", "499", "-v", "-o", str(out)]
        if mode == "cgroup":
            os.mkdir(inside)
            # in the cgroup from the start, its library dlopen()ed after the agent's
            target = subprocess.Popen(in_cgroup_as(inside, 0, [workload("dlopen_split"),
                                                               "--wait-stdin", "4"]),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            # mapped everything outside the cgroup, before the agent; moved in later
            late = subprocess.Popen([workload("cpu_split"), "600"], stdout=subprocess.DEVNULL)
            args += ["--cgroup", inside]
        elif mode == "pid":
            target = subprocess.Popen([workload("dlopen_split"), "--wait-stdin", "4"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if target:
            pid = int(target.stdout.readline().split()[1])
        if mode == "pid":
            args += ["-p", str(pid)]
        elif mode == "cmd":
            args += ["--", workload("dlopen_split"), "5"]
        agent = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        stderr = drain(agent, wait_recording(agent))
        outside.stdin.write("go\n")
        outside.stdin.flush()
        assert outside.stdout.readline().strip() == f"loaded {NLIBS}"
        if target:
            target.stdin.write("go\n")
            target.stdin.flush()
        if late:
            with open(os.path.join(inside, "cgroup.procs"), "w") as f:
                f.write(str(late.pid))
            # forked outside, moved in, then exec'd (as a runtime starts a container's process)
            started = subprocess.Popen(in_cgroup_as(inside, 0, [workload("dlopen_split"), "2"]),
                                       stdout=subprocess.PIPE, text=True)
            spid = int(started.stdout.readline().split()[1])
        opened = []
        for _ in range(4):  # while the outside process holds them mapped
            time.sleep(0.5)
            opened.append(opened_under(agent.pid, libs))
        for w in (target, started):
            if w:
                w.communicate(timeout=120)
        if mode != "cmd":
            time.sleep(1)
            agent.send_signal(signal.SIGINT)
        err = stderr(120)
    finally:
        kill(target, late, started, outside, agent)
    assert agent.returncode == 0, err
    assert opened == [0] * 4, (opened, err)
    stacks = by_pid(parse_folded(out.read_text()))
    assert outside.pid not in stacks, sorted(stacks)
    sb = re.search(r"side band: \d+ records read, records of other processes skipped (\d+) "
                   r"\(([^;]*);", err)
    assert sb, err
    # the outside process's exec, its NLIBS mmaps and its exit at least
    assert int(sb.group(1)) >= NLIBS, err
    if mode == "cgroup":
        assert sb.group(2) == "the cgroup's processes kept", err
        check_named(stacks.get(pid, []), "in the cgroup")
        check_named(stacks.get(late.pid, []), "moved into the cgroup")
        check_named(stacks.get(spid, []), "exec'd in the cgroup")
        assert set(stacks) <= {pid, late.pid, spid}, sorted(stacks)
    elif mode == "pid":
        check_named(stacks.get(pid, []), "-p")
    else:
        mine = [s for ss in stacks.values() for s in ss if s[0][0].startswith("dlopen_split")]
        check_named(mine, "-- CMD")
