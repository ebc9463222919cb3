# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Shared helpers for the end-to-end tests: they run the real build/bpfprof as
root against real processes (tests/workloads) and read what it wrote."""
import os
import shutil
import subprocess
import threading

import pytest

BPFPROF = os.environ.get("BPFPROF", os.path.join(os.path.dirname(__file__), "../../build/bpfprof"))
WORKLOADS = os.environ.get("WORKLOADS", os.path.join(os.path.dirname(__file__), "../../build/workloads"))


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="end-to-end tests need root (BPF, perf events)")
        for item in items:
            item.add_marker(skip)


def workload(name):
    path = os.path.join(WORKLOADS, name)
    assert os.access(path, os.X_OK), f"{path} missing: run make -C tests/workloads"
    return path


def run(args, timeout=120, **kw):
    """Run bpfprof with args; returns CompletedProcess (text)."""
    return subprocess.run([BPFPROF] + list(args), capture_output=True, text=True,
                          timeout=timeout, **kw)


def wait_recording(p):
    """Read p's stderr up to its ready line ('bpfprof: recording ...'); returns what
    was read. A test that starts work for a running bpfprof waits for this, not
    for a fixed time: start-up takes seconds on a loaded host."""
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.startswith("bpfprof: recording "):
            return "".join(seen)
    raise AssertionError(f"bpfprof ended before recording: {''.join(seen)!r}")


def record_around(args, work):
    """Run bpfprof with args until its ready line, then work(), then Ctrl-C (SIGINT);
    -> (its exit status, its whole stderr). A failure in work() still stops it."""
    p = subprocess.Popen([BPFPROF] + args, stderr=subprocess.PIPE, text=True)
    try:
        err = wait_recording(p)
        work()
        p.send_signal(2)
        err += p.communicate(timeout=60)[1]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


def drain(p, seen=""):
    """Read p's stderr in a thread from now on; -> a function that waits for p to
    exit (timeout s) and returns seen + all of it. A bpfprof run with -vv on a
    busy host writes more than a pipe holds (64 KiB) while it records: left
    unread, it blocked in that write and stopped following the machine, so
    the files of a process that lived meanwhile were never opened."""
    chunks = [seen]
    t = threading.Thread(target=lambda: chunks.append(p.stderr.read()), daemon=True)
    t.start()

    def finish(timeout=120):
        p.wait(timeout=timeout)
        t.join(timeout)
        return "".join(chunks)
    return finish


def wait_cpu(proc):
    """Wait for a subprocess.Popen to exit; -> the CPU seconds (user + system) it
    and its waited-for children had, the kernel's account from wait4's rusage.
    Sample floors scaled by it hold however much CPU a loaded host left it."""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def cgroup2_mount():
    """Where the cgroup v2 hierarchy is mounted, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split()[0] == "cgroup2":
                return pre.split()[4]
    return None


CGROUP2 = cgroup2_mount()


@pytest.fixture
def slice_dir():
    """A test slice under the v2 root (None where there is no v2 hierarchy); every
    process moved in is moved back out."""
    if CGROUP2 is None:
        yield None
        return
    d = os.path.join(CGROUP2, f"bpfprof-test-{os.getpid()}.slice")
    os.mkdir(d)
    yield d
    for root, dirs, _ in sorted(os.walk(d), key=lambda w: -w[0].count("/")):
        with open(os.path.join(root, "cgroup.procs")) as f:
            for pid in f.read().split():
                try:
                    with open(os.path.join(CGROUP2, "cgroup.procs"), "w") as r:
                        r.write(pid)
                except OSError:
                    pass
        os.rmdir(root)


def in_cgroup_as(cg, uid, argv):
    """argv run in cgroup cg (None: where it is) as uid (and that gid, no
    supplementary groups): a root shell moves itself into cg, then setpriv
    drops to uid and execs argv, one pid throughout, so nothing of argv runs
    outside cg."""
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    if cg is None:
        return drop + list(argv)
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg] + drop + list(argv)


def parse_folded(text):
    """folded text -> list of (frames, count); asserts every line is well formed."""
    stacks = []
    for line in text.splitlines():
        assert line, "empty line in folded output"
        stack, _, count = line.rpartition(" ")
        assert stack and count.isdigit(), f"malformed folded line: {line!r}"
        stacks.append((stack.split(";"), int(count)))
    return stacks


def total(stacks):
    return sum(c for _, c in stacks)


def count_with(stacks, frame, pred=None):
    return sum(c for f, c in stacks if frame in f and (pred is None or pred(f)))


def summary_line(stderr):
    lines = [l for l in stderr.splitlines() if " samples, " in l]
    assert lines, f"no summary line on stderr: {stderr!r}"
    return lines[-1]


@pytest.fixture
def tmp_out(tmp_path):
    return tmp_path


def pyenv_pythons():
    """The newest pyenv interpreter of each supported minor version: (minor, path)."""
    import glob
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = []
    for v in ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]:
        paths = sorted(glob.glob(f"{root}/versions/{v}.*/bin/python{v}"))
        if paths:
            found.append((v, paths[-1]))
    return found


def have(cmd):
    return shutil.which(cmd) is not None


def python_params(ids=None, free_threaded=True):
    """Every CPython the suite runs, as pytest params (value: an executable
    path; id: pyenv-3.X, debian-3.11, sid-3.X, ft-3.Xt): pyenv's 3.8-3.13,
    Debian's stripped /usr/bin/python3.11, Debian sid's 3.13/3.14/3.15 and
    free-threaded builds from Debian's sources, the last two run in their
    root (sidroot.py). One that cannot be had is a skipped param whose
    reason says why, never left out. ids: only these; by default all but
    sid-3.13, whose layout is pyenv's 3.13's (a test that checks what a
    stripped build changes names it: make test's time is bounded)."""
    import sidroot
    found = [(f"pyenv-{v}", path, None) for v, path in pyenv_pythons()]
    if os.path.exists("/usr/bin/python3.11"):
        found.append(("debian-3.11", "/usr/bin/python3.11", None))
    if os.environ.get("BPFPROF_NO_SIDROOT") != "1":
        found += sidroot.interpreters()
    params = []
    for pid, path, why in found:
        if (ids is None and pid == "sid-3.13") or (ids is not None and pid not in ids):
            continue
        if not free_threaded and pid.startswith("ft-"):
            continue
        if path:
            params.append(pytest.param(path, id=pid))
        else:
            params.append(pytest.param(None, id=pid, marks=pytest.mark.skip(reason=why)))
    return params
