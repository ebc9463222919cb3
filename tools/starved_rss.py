#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/starved_rss.py [--runs N] [--hogs K] [--parent-mib M] [BPFPROF]

The agent's peak RSS in test_untrusted.py's growing perf map scenario (a
64 MiB /tmp/perf-PID.map naming none of tiny_jit's code, appended every
50 ms by uid 65534; `bpfprof -p PID --mem-budget 8m -d 5 -vv`), with the
agent starved: `nice -n 19` next to K busy loops (default 2, one a CPU
here), and started by a parent holding M MiB (default 150, pytest's size
late in a full test run). Per run: -vv's `agent: ... peak RSS`, and the
agent's VmRSS sampled from /proc every 0.1 s with what it is made of
(smaps_rollup). Run as root after `make` and the workloads' make
(BUILD=build/workloads). A few minutes of two busy CPUs: run it on a host
you may load, and it removes its perf map at once after each run."""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

TOP = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests/e2e"))
from test_untrusted import AS_NOBODY, GROW  # noqa: E402


def one(bpfprof, hogs, d):
    jit = d / "tiny_jit"
    shutil.copy(TOP / "build/workloads/tiny_jit", jit)
    (d / "grow.py").write_text(GROW)
    busy = []
    p = subprocess.Popen(AS_NOBODY + [str(jit), "60"], stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline().split()[1])
    g = subprocess.Popen(AS_NOBODY + ["/usr/bin/python3", str(d / "grow.py"), str(pid), "64"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert g.stdout.readline().strip() == "ready"
        busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(hogs)]
        a = subprocess.Popen((["nice", "-n", "19"] if hogs else []) +
                             [bpfprof, "-p", str(pid), "--mem-budget", "8m", "-d", "5", "-vv",
                              "-o", str(d / "jit.folded")], stderr=subprocess.PIPE, text=True)
        err = []
        t = threading.Thread(target=lambda: err.append(a.stderr.read()))
        t.start()
        best, parts = 0, ""
        while a.poll() is None:
            try:
                st = (pathlib.Path(f"/proc/{a.pid}/status").read_text() +
                      pathlib.Path(f"/proc/{a.pid}/smaps_rollup").read_text())
            except OSError:
                break
            m = re.search(r"VmRSS:\s+(\d+)", st)
            if m and int(m.group(1)) > best:
                best = int(m.group(1))
                parts = " ".join(f"{k} {v}" for k, v in
                                 re.findall(r"^(RssAnon|RssFile):\s+(\d+)", st, re.M))
            time.sleep(0.1)
        t.join()
        a.wait()
    finally:
        for b in busy:
            b.kill()
            b.wait()
        g.kill()
        p.kill()
        g.wait()
        p.wait()
        pathlib.Path(f"/tmp/perf-{pid}.map").unlink(missing_ok=True)
    peak = re.search(r"agent: .*peak RSS (\d+) KiB", err[0])
    return a.returncode, peak.group(1) if peak else "?", best, parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--parent-mib", type=int, default=150)
    ap.add_argument("bpfprof", nargs="?", default=str(TOP / "build/bpfprof"))
    o = ap.parse_args()
    ballast = bytearray(o.parent_mib << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    for i in range(o.runs):
        d = pathlib.Path(tempfile.mkdtemp(prefix="bpfprof-starved-", dir="/var/tmp"))
        os.chmod(d, 0o755)
        try:
            rc, peak, best, parts = one(o.bpfprof, o.hogs, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(f"run {i + 1}: exit {rc}, -vv peak RSS {peak} KiB; sampled VmRSS at most "
              f"{best} KiB ({parts} KiB)", flush=True)


if __name__ == "__main__":
    main()
