#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python split accuracy and per-sample cost, interpreter by interpreter (make
bench, or alone as root):

  tools/bench_pyphases.py [SECS [ID,ID...]]   (default 10 s, every interpreter)

For each CPython the suite knows (pyenv's 3.13, Debian sid's 3.13/3.14/3.15
and the free-threaded builds, in their root: tests/e2e/sidroot.py) it runs
tests/workloads/py/split.py under `bpfprof -v -F 999 -- PY split.py SECS`
and prints the share of the main thread's samples under work_a/work_b/work_c
against the CPU time the script measured for each (split.py prints it), the
largest difference in points, and the BPF time of a sample (median and 90th
percentile from -v's histogram). Then, where the interpreter has PyTorch
(Debian's python3-torch: /usr/bin/python3, sid's python3.14), the training
loop of tools/realhost_train.py: each phase's share of train_step's samples
against the script's own per-phase CPU timers, and of the loop's samples
with a PyTorch native frame the share with a libtorch frame
(tools/realhost_stats.py's measure, on train_step's samples: the import
before the loop is not the loop). One line per interpreter and workload."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests/e2e"))
import sidroot  # noqa: E402

BPFPROF = os.environ.get("BPFPROF", os.path.join(REPO, "build/bpfprof"))
SPLIT = os.path.join(REPO, "tests/workloads/py/split.py")
TRAIN = os.path.join(HERE, "realhost_train.py")
TORCH = re.compile(r"at::|torch::|c10::|libtorch|libc10|THP")  # as tools/realhost_stats.py
TORCH_CPU = re.compile(r"at::|libtorch_cpu")
PHASES = {"forward": "forward_pass", "loss": "compute_loss", "backward": "backward_pass",
          "step": "optimizer_step"}


def folded(path):
    for line in open(path, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if stack and n.isdigit():
            yield stack.split(";"), int(n)


def has_frame(frames, fn):
    return any(f.startswith(fn + " (") for f in frames)


def cost(stderr):
    m = re.search(r"median (\d+) ns, 90th percentile (\d+) ns", stderr)
    a = re.search(r"steady [\d.]+ s CPU \(([\d.]+) us per sample\)", stderr)
    if not m:
        return "cost n/a"
    return (f"BPF {int(m.group(1)) / 1000:.1f} us/sample median, {int(m.group(2)) / 1000:.1f} p90"
            + (f", agent steady {a.group(1)} us/sample" if a else ""))


def record(py, args, out):
    r = subprocess.run([BPFPROF, "-v", "-F", "999", "-o", out, "--", py] + args,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return r


def bench_split(name, py, secs, tmp):
    out = os.path.join(tmp, f"{name}.split.folded")
    r = record(py, [SPLIT, str(secs)], out)
    truth = {k: float(v) for k, v in re.findall(r"(work_[abc])=([\d.]+)", r.stdout)}
    got = {k: 0 for k in truth}
    for frames, c in folded(out):
        for k in got:
            if has_frame(frames, k):
                got[k] += c
    n, t = sum(got.values()), sum(truth.values())
    if not n or not t:
        print(f"{name}: split: no samples under the work functions")
        return
    diffs = {k: 100.0 * (got[k] / n - truth[k] / t) for k in truth}
    worst = max(abs(d) for d in diffs.values())
    shares = " ".join(f"{k}={100.0 * got[k] / n:.1f}%/{100.0 * truth[k] / t:.1f}%" for k in truth)
    print(f"{name}: split (profile/timer) {shares}; worst {worst:.2f} points over {n} samples; "
          f"{cost(r.stderr)}", flush=True)


def bench_torch(name, py, secs, tmp):
    out = os.path.join(tmp, f"{name}.train.folded")
    r = record(py, [TRAIN, str(secs)], out)
    lines = re.findall(r"phases (.*)", r.stdout)
    if not lines:
        print(f"{name}: torch: the script printed no phases: {r.stdout[-300:]}")
        return
    truth = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", lines[-1])}
    got = {k: 0 for k in PHASES}
    for frames, c in folded(out):
        for k, fn in PHASES.items():
            if has_frame(frames, fn):
                got[k] += c
    n, t = sum(got.values()), sum(truth.values())
    diffs = {k: 100.0 * (got[k] / n - truth[k] / t) for k in PHASES} if n and t else {}
    worst = max((abs(d) for d in diffs.values()), default=float("nan"))
    shares = " ".join(f"{k}={100.0 * got[k] / n:.1f}%/{100.0 * truth[k] / t:.1f}%"
                      for k in PHASES) if n and t else "n/a"
    # of train_step's samples with a PyTorch native frame, those with a
    # libtorch_cpu one (tools/realhost_stats.py's measure, on the loop alone:
    # not the import before it); and train_step's samples whose native walk
    # stopped short ([missing frames])
    loop = torch_n = torch_cpu = missing = 0
    for frames, c in folded(out):
        if not has_frame(frames, "train_step"):
            continue
        loop += c
        us = [f for f in frames[1:] if not f.endswith("_[k]")]
        missing += c if "[missing frames]" in frames else 0
        if any(TORCH.search(f) for f in us):
            torch_n += c
            torch_cpu += c if any(TORCH_CPU.search(f) for f in us) else 0
    torch_share = (f"{100.0 * torch_cpu / torch_n:.1f}% of {torch_n} torch samples with a "
                   f"libtorch_cpu frame, {100.0 * missing / loop:.1f}% [missing frames]"
                   if torch_n and loop else "no torch samples")
    print(f"{name}: torch phases (profile/timer) {shares}; worst {worst:.2f} points over {n} "
          f"samples; {torch_share}; {cost(r.stderr)}", flush=True)


def has_torch(py):
    return subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0


def main():
    if os.geteuid():
        sys.exit("bench_pyphases: must run as root")
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    pys = []
    import glob
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13.*/bin/python3.13")))
    if pyenv:
        pys.append(("pyenv-3.13", pyenv[-1]))
    if os.path.exists("/usr/bin/python3"):
        pys.append(("debian-3.11", "/usr/bin/python3"))
    for pid, path, why in sidroot.interpreters():
        if path:
            pys.append((pid, path))
        else:
            print(f"{pid}: skipped: {why}")
    with tempfile.TemporaryDirectory(prefix="bpfprof-pyphases-") as tmp:
        for name, py in pys:
            if only and name not in only:
                continue
            if name != "debian-3.11":
                bench_split(name, py, secs, tmp)
            if has_torch(py):
                bench_torch(name, py, secs, tmp)


main()
