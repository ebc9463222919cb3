#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Huge files' partial unwind tables on Debian's PyTorch (python3-torch:
libtorch_cpu.so has 220k FDEs, 1.4M rows whole), two builds interleaved.

  tools/partial_torch.py [--pairs N] [--secs S] [--modes pid,cmd] [--unwind-mem SIZE]
                         BEFORE AFTER

Per pair and build, two runs (root):
  pid: tools/realhost_train.py started, bpfprof -p PID -F 99 -d S -v after 5 s
       (torch imported, the loop running)
  cmd: bpfprof -F 99 -v -- /usr/bin/python3 tools/realhost_train.py S
       (`import torch` recorded too)
both with --unwind-cache off (each run compiles what it builds) under
/usr/bin/time -v. Prints per run: samples, % with a [missing frames]
marker, % walked by frame pointers for lack of room (the end-of-run
warning), % with a frame in a partial table's gap, rows in use and peak,
ms compiling CFI, the agent's CPU in unwind tables, its peak RSS (-v's,
and /usr/bin/time's, which under -- CMD is python's), and the load
average. Not part of `make test` (torch, ~20 s a run)."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "realhost_train.py")
EXTRA = []  # --unwind-mem SIZE, passed on


def num(pat, text, default=0.0):
    m = re.search(pat, text)
    return float(m.group(1)) if m else default


def parse(err):
    r = {}
    r["samples"] = num(r"warning: \d+ of (\d+) samples", err) or num(r"agent: .*?(\d+) samples", err)
    r["room%"] = num(r"\(([\d.]+)%\) were unwound with frame pointers in files the unwind", err)
    r["gap%"] = num(r"samples \(([\d.]+)%\) had a frame in a function not in them yet", err)
    r["missing"] = num(r"unwinding: (\d+) samples with a \[missing frames\] marker", err)
    r["rows"] = num(r"unwind tables: .*?, (\d+) rows in use", err)
    r["peak"] = num(r"unwind tables: .*?rows in use, peak (\d+)", err)
    r["cfi_ms"] = num(r"([\d.]+) ms compiling CFI", err)
    r["tables_s"] = num(r"recording = unwind tables ([\d.]+) s CPU", err)
    # the agent's own high-water mark (-v): /usr/bin/time's is the largest of
    # its waited-for children's too, which under -- CMD is python's
    r["rss_kb"] = num(r"agent: .*peak RSS (\d+) KiB", err)
    r["time_kb"] = num(r"Maximum resident set size \(kbytes\): (\d+)", err)
    r["partial_rows"] = num(r"functions in (\d+) rows\)", err)
    return r


def run_pid(bpf, secs):
    w = subprocess.Popen([sys.executable, TRAIN, str(secs + 9)], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert w.stdout.readline().startswith("ready")
        time.sleep(5)  # the loop running
        out = "/tmp/partial_torch.folded"
        r = subprocess.run(["/usr/bin/time", "-v", bpf, "-p", str(w.pid), "-F", "99", "-d",
                            str(secs), "-v", "--unwind-cache", "off", "-o", out] + EXTRA,
                           capture_output=True, text=True, timeout=300)
    finally:
        w.kill()
        w.wait()
    return r.stderr, out


def run_cmd(bpf, secs):
    out = "/tmp/partial_torch.folded"
    r = subprocess.run(["/usr/bin/time", "-v", bpf, "-F", "99", "-v", "--unwind-cache", "off",
                        "-o", out] + EXTRA + ["--", sys.executable, TRAIN, str(secs)],
                       capture_output=True, text=True, timeout=300)
    return r.stderr, out


def folded_total(path):
    n = 0
    for line in open(path):
        n += int(line.rsplit(" ", 1)[1])
    return n


def main():
    args = sys.argv[1:]
    pairs, secs, modes = 3, 5, ["pid", "cmd"]
    while args and args[0].startswith("--"):
        if args[0] == "--pairs":
            pairs = int(args[1])
        elif args[0] == "--secs":
            secs = int(args[1])
        elif args[0] == "--modes":
            modes = args[1].split(",")
        elif args[0] == "--unwind-mem":
            EXTRA[:] = ["--unwind-mem", args[1]]
        args = args[2:]
    before, after = args
    print("mode build  samples missing%  room%  gap%  rows_in_use  peak  partial_rows "
          "cfi_ms tables_s rss_MB time_MB load")
    for i in range(pairs):
        for mode, fn in (("pid", run_pid), ("cmd", run_cmd)):
            if mode not in modes:
                continue
            order = ((before, "before"), (after, "after"))
            if i % 2:
                order = order[::-1]
            for bpf, name in order:
                load = os.getloadavg()[0]
                err, out = fn(bpf, secs)
                r = parse(err)
                n = folded_total(out)
                print(f"{mode:4} {name:6} {n:7d} {100 * r['missing'] / max(n, 1):8.1f} "
                      f"{r['room%']:6.1f} {r['gap%']:5.1f} {r['rows']:12.0f} {r['peak']:8.0f} "
                      f"{r['partial_rows']:8.0f} {r['cfi_ms']:7.1f} {r['tables_s']:7.3f} "
                      f"{r['rss_kb'] / 1024:6.1f} {r['time_kb'] / 1024:7.1f} {load:4.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
