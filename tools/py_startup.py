#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python start-up attribution: how much of short Python commands' profile
lacks Python frames (bench/history/2026-11.md, "Python start-up attribution").

  py_startup.py BPFPROF PYTHON [K [SECS [cpu|alloc|cmd]]]

all (default cpu): `BPFPROF -a --per-pid -F 999` (alloc: `--alloc
--alloc-rate 16384 --alloc-metric alloc_space`) records while K commands run
one after another, each tests/workloads/py/short.py SECS (alloc: SECS of CPU
allocating 3000-byte bytes objects); cmd: `BPFPROF -F 999 -- PYTHON
short.py SECS`, K times. Prints, over those processes' samples (bytes):
total, those with no Python frame (nopy: the start-up before the first
thread state and the exit have none to show) and those whose native stack
has the eval loop without Python frames (eval_nopy: Python was running and
was not named)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHORT = os.path.join(HERE, "..", "tests", "workloads", "py", "short.py")
PYF = re.compile(r" \([^;()]*:\d+\)$")
ALLOC = ("import time\nt = time.process_time()\nk = []\n"
         "while time.process_time() - t < {secs}:\n"
         "    k.append(bytes(3000))\n    if len(k) > 100: k = []\n")


def tally(text, pids):
    tot = nopy = ev = 0
    for line in text.splitlines():
        st, _, c = line.rpartition(" ")
        fr = st.split(";")
        m = re.search(r"\[(\d+)\]$", fr[0])
        if pids is not None and (not m or int(m.group(1)) not in pids):
            continue
        c = int(c)
        tot += c
        if not any(PYF.search(f) for f in fr):
            nopy += c
            if "_PyEval_EvalFrameDefault" in fr:
                ev += c
    return tot, nopy, ev


def main():
    bp, py = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    secs = sys.argv[4] if len(sys.argv) > 4 else "0.05"
    mode = sys.argv[5] if len(sys.argv) > 5 else "cpu"
    load = os.getloadavg()[0]
    cmd = ([py, "-c", ALLOC.format(secs=secs)] if mode == "alloc" else [py, SHORT, secs])
    if mode == "cmd":
        tot = nopy = ev = 0
        for _ in range(k):
            r = subprocess.run([bp, "--per-pid", "-F", "999", "--"] + cmd,
                               capture_output=True, text=True)
            t = tally(r.stdout, None)
            tot, nopy, ev = tot + t[0], nopy + t[1], ev + t[2]
    else:
        ev_args = (["--alloc", "--alloc-rate", "16384", "--alloc-metric", "alloc_space"]
                   if mode == "alloc" else ["-F", "999"])
        p = subprocess.Popen([bp, "-a", "--per-pid"] + ev_args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if line.startswith("bpfprof: recording"):
                break
        pids = set()
        for _ in range(k):
            c = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
            pids.add(c.pid)
            c.wait()
        p.send_signal(2)
        out, _ = p.communicate()
        tot, nopy, ev = tally(out, pids)
    print(f"{mode} {py} load={load:.1f} total={tot} "
          f"nopy={nopy} ({100 * nopy / max(tot, 1):.1f}%) "
          f"eval_nopy={ev} ({100 * ev / max(tot, 1):.1f}%)")


if __name__ == "__main__":
    main()
