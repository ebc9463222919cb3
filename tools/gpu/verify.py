#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Check what tools/gpu/check.sh run wrote (OUT): the launches of
torch_work.py's train_step()/evaluate() under those Python functions with a
[cuda] kernel leaf, CUPTI's GPU times joined to them, a valid Chrome trace
with GPU tracks and flows, and the same launches seen by -a. Prints one line
per check ("ok"/"FAIL") and figures; exit 1 if any check failed.

    tools/gpu/verify.py OUT"""
import json
import os
import re
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import check_chrome  # noqa: E402

out = sys.argv[1]
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += not ok


def read(name):
    p = os.path.join(out, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""


def folded(name):
    st = Counter()
    for line in read(name).splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            st[stack] += int(n)
    return st


alone = dict(l.split(" ", 1) for l in read("alone.stdout").splitlines() if " " in l)
steps, evals = int(alone.get("steps", 0)), int(alone.get("evals", 0))
print(f"workload: {alone}")
check(steps > 0, "the workload ran alone")


def launches(st, fn):
    """launches (or ns) under fn, by kernel leaf"""
    by = Counter()
    for stack, n in st.items():
        frames = stack.split(";")
        if any(f.startswith(fn + " (torch_work.py:") for f in frames) and \
                frames[-1].startswith("[cuda] "):
            by[frames[-1][7:60]] += n
    return by


for name, err in (("launch.folded", "launch.err"), ("gpu.folded", "gputime.err"),
                  ("all.folded", "all.err")):
    if not os.path.exists(os.path.join(out, err)):
        print(f"skip {name}: not run")
        continue
    st = folded(name)
    tr, ev = launches(st, "train_step"), launches(st, "evaluate")
    summ = [l for l in read(err).splitlines() if re.search(r"samples|lost|CUDA|GPU|cuda", l)]
    print(f"{name}: train_step {sum(tr.values())} {tr.most_common(3)}; "
          f"evaluate {sum(ev.values())} {ev.most_common(3)}")
    for l in summ[-6:]:
        print("    " + l[:300])
    if name == "gpu.folded":
        # weights are GPU ns: a 2048^3 fp32 GEMM takes 0.05-5 ms on any current GPU
        per = sum(tr.values()) / steps if steps else 0
        check(per > 20e3 and per < 20e6, f"{name}: GPU time per train_step kernel {per:.0f} ns")
        check(sum(ev.values()) > 0, f"{name}: evaluate's kernels have GPU time")
    else:
        check(sum(tr.values()) >= 0.95 * steps, f"{name}: >= 95% of {steps} GEMM launches "
              f"under train_step ({sum(tr.values())})")
        check(sum(ev.values()) >= 0.95 * 2 * evals, f"{name}: >= 95% of {2 * evals} "
              f"elementwise launches under evaluate ({sum(ev.values())})")

raw = read("trace.json")
if not raw:
    print("skip trace.json: not run")
    sys.exit(1 if failed else 0)
try:
    trace = json.loads(raw)
except ValueError as e:
    trace = None
    check(False, f"trace.json parses ({e})")
if trace:
    problems, summary = check_chrome.check(trace)
    check(problems == [], f"trace.json passes check_chrome {problems[:5]}")
    ev = trace["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "cuda_kernel"]
    api = [e for e in ev if e.get("cat") == "cuda_api"]
    print(f"trace: {len(api)} driver calls, {len(kernels)} kernels, {summary['flows']} flows, "
          f"categories {summary['categories']}")
    print(f"trace processes: {summary['processes']}")
    check(len(kernels) >= steps + 2 * evals, f"trace: >= {steps + 2 * evals} GPU kernels")
    check(summary["flows"] >= steps + 2 * evals, "trace: a flow per launch")
    check(any(v.startswith("GPU ") for v in summary["processes"].values()), "trace: GPU track")
    check(summary["categories"].get("cpu", 0) > 0, "trace: CPU slices")
    gemm = [e["dur"] for e in kernels if "gemm" in e["name"].lower()]
    if gemm:
        gemm.sort()
        print(f"trace: GEMM kernel median {gemm[len(gemm) // 2]:.1f} us ({len(gemm)})")
print("FAILED" if failed else "ALL OK", failed)
sys.exit(1 if failed else 0)
