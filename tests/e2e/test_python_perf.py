# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPython with its perf trampolines on (-X perf, PYTHONPERFSUPPORT=1, -X
perf_jit): every Python call runs through a trampoline in anonymous memory.
The native walk goes through them (pyenv's 3.12/3.13 build them without a
frame pointer, Debian's 3.13+ with one), the Python frames stand where the
eval loop was, and the trampolines' own frames (py::qualname:file from the
perf map, [trampoline] without one) are left out there."""
import os
import subprocess

import pytest

import sidroot
from conftest import BPFPROF, parse_folded, pyenv_pythons

SCRIPT = """\
import sys, time
def orchard_press(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
def harvest(secs):
    end = time.process_time() + secs
    while time.process_time() < end:
        orchard_press(20000)
harvest(float(sys.argv[1]))
"""


def interpreters():
    """pyenv's 3.12 and 3.13 (trampolines without a frame pointer), Debian sid's
    3.13-3.15 (with one, in the sid root: tests/e2e/sidroot.py): (id, path or
    None, skip reason, every mode or -X perf alone). Every mode on one of
    each kind; -X perf alone on the rest, to keep the suite's time."""
    found = [(f"pyenv-{v}", path, None, v == "3.12")
             for v, path in pyenv_pythons() if v in ("3.12", "3.13")]
    for pid, path, why in sidroot.interpreters():
        if pid.startswith("sid-"):
            found.append((pid, path, why, pid == "sid-3.14"))
    return [pytest.param(i, id=i[0]) for i in found]


def modes(version, every):
    out = [("-X perf", ["-X", "perf"], {})]
    if every:
        out.append(("PYTHONPERFSUPPORT=1", [], {"PYTHONPERFSUPPORT": "1"}))
        if version != "3.12":
            out.append(("-X perf_jit", ["-X", "perf_jit"], {}))
    return out


@pytest.mark.parametrize("interp", interpreters())
def test_perf_trampolines_walked_and_left_out(tmp_path, interp):
    name, python, why, every = interp
    if not python:
        pytest.skip(why)
    version = name.split("-")[1]
    script = tmp_path / "orchard.py"  # /tmp is the sid root's too (tools/sidrun.sh)
    script.write_text(SCRIPT)
    for mode, args, env in modes(version, every):
        out = tmp_path / "perf.folded"
        r = subprocess.run([BPFPROF, "-F", "499", "--per-pid", "-o", str(out), "--", python]
                           + args + [str(script), "1.5"], capture_output=True, text=True,
                           timeout=300, env=dict(os.environ, **env))
        assert r.returncode == 0, (mode, r.stderr)
        own = [(f, c) for f, c in parse_folded(out.read_text()) if f[0].startswith("python")]
        # CPython leaves its perf map (and jitdump) behind: ours to remove
        for pid in {f[0].rpartition("[")[2].rstrip("]") for f, _ in own}:
            for t in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
                if os.path.exists(t):
                    os.unlink(t)
        n = sum(c for _, c in own)
        main = sum(c for f, c in own if "Py_BytesMain" in f)
        py = [(f, c) for f, c in own if any("(orchard.py:" in x for x in f)]
        tramp = sum(c for f, c in py if any(x.startswith("py::") or x == "[trampoline]" for x in f))
        merged = sum(c for f, c in py if "Py_BytesMain" in f[:[i for i, x in enumerate(f)
                                                               if "(orchard.py:" in x][0]])
        print(version, mode, n, main, sum(c for _, c in py), tramp, merged)
        # > 300: a share of 1.5 s at 499 Hz a loaded host still gives
        assert n > 300, (mode, n, r.stderr[-2000:])
        # through the trampolines to the interpreter's main, as without -X perf
        assert main >= 0.95 * n, (mode, main, n, [f for f, _ in own if "Py_BytesMain" not in f][:3])
        # the Python frames in place of the eval loop, under the native ones that called it
        assert merged >= 0.9 * n, (mode, merged, n, own[:2])
        # and the trampoline frames left out where the Python frames name the call
        assert tramp <= 0.05 * n, (mode, tramp, n, [f for f, _ in py if any(
            x.startswith("py::") or x == "[trampoline]" for x in f)][:3])
