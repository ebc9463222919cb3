# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--cuda against the fake driver (tests/workloads/cuda/fakecuda.c, exporting
the real libcuda signatures): every launch counted and named under the
function that launched it, syncs timed, memory calls recorded; with the CUPTI
stand-in (cuda_app_cupti), the injection library's USDT probes received, GPU
records joined to their launches, and the Chrome trace checked by
tools/check_chrome.py."""
import json
import os
import re
import sys

import pytest

from conftest import WORKLOADS, count_with, parse_folded, pyenv_pythons, run, workload

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tools"))
import check_chrome  # noqa: E402

LIB = os.path.join(WORKLOADS, "cuda", "libcuda.so.1")
ADD = "[cuda] vector_add(float*, float const*, float const*, int)"
SCALE = "[cuda] scale_kernel(float*, float)"
SIM_KERNEL_NS = 5000  # tests/workloads/cuda/cupti_sim.c

pytestmark = pytest.mark.skipif(not os.path.exists(LIB),
                                reason="no fake libcuda (CUDA toolkit headers missing)")


def app_output(stdout):
    return {k: v for k, v in (l.split(" ", 1) for l in stdout.splitlines() if " " in l)}


def cuda_run(tmp_path, out_name, app="cuda_app", extra=(), app_args=(), env=None):
    out = tmp_path / out_name
    # --cuda-lib: probes in place before the program starts; --wait-ms gives the
    # unwind tables (built at exec) time before the first launch
    # -v: the CUDA account (driver calls, GPU records) is detail
    r = run(["-v", "--cuda", "--cuda-lib", LIB, *extra, "-o", str(out), "--", workload(app),
             "--wait-ms", "800", *app_args], env=env, timeout=180)
    assert r.returncode == 0, r.stderr
    return out, r


def test_every_launch_counted_and_named_with_its_stack(tmp_path):
    out, r = cuda_run(tmp_path, "run.folded",
                      app_args=["--launches", "3000", "--scale-launches", "700"])
    app = app_output(r.stdout)
    stacks = parse_folded(out.read_text())
    # every launch, once, named from cuModuleGetFunction / cuLibraryGetKernel +
    # cuKernelGetFunction, demangled, as the leaf under the launching function
    assert count_with(stacks, ADD) == int(app["launches_vector_add"]) == 3000
    assert count_with(stacks, SCALE) == int(app["launches_scale"]) == 700
    for frames, n in stacks:
        assert frames[-1] in (ADD, SCALE), frames
        assert frames[-2] == ("launch_vector_add" if frames[-1] == ADD else "launch_scale")
        assert frames[0] == "cuda_app"
    # the whole stack (table-driven unwinding from the return probe) for nearly all
    assert count_with(stacks, ADD, lambda f: "main" in f) >= 0.95 * 3000
    # launches only in folded output: no sync or copy leaves
    assert sum(n for _, n in stacks) == 3700


def test_syncs_timed_and_memory_calls_recorded(tmp_path):
    env = dict(os.environ, FAKECUDA_SYNC_US="20000")
    out, r = cuda_run(tmp_path, "run.folded", app_args=["--launches", "10", "--syncs", "4"],
                      env=env)
    summary = [l for l in r.stderr.splitlines() if "driver calls" in l]
    assert summary, r.stderr
    line = summary[0]
    for call in ("cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"):
        m = re.search(call + r" (\d+) \(([\d.]+) ms\)", line)
        assert m, line
        assert int(m.group(1)) == 4
        # each blocks 20 ms in the fake driver: entry and return times must say so
        per_call = float(m.group(2)) / 4
        assert 19.0 <= per_call <= 40.0, line
    for call, n in (("cuMemAlloc", 2), ("cuMemFree", 2), ("cuMemcpyHtoD", 1),
                    ("cuMemcpyDtoH", 1), ("cuMemcpyDtoD", 1), ("cuLaunchKernel", 510)):
        assert re.search(rf"{call} {n} \(", line), (call, line)
    app = app_output(r.stdout)
    copied = 3 * int(app["copy_bytes"])
    assert f"{copied} bytes copied" in r.stderr
    assert " 0 lost" in line


def test_cupti_usdt_gpu_records_joined_with_launches(tmp_path):
    out, r = cuda_run(tmp_path, "gpu.folded", app="cuda_app_cupti",
                      extra=["--cuda-weight", "gpu-time"],
                      app_args=["--launches", "600", "--scale-launches", "200"])
    m = re.search(r"GPU \(CUPTI in \d+ files\): (\d+) kernels, (\d+) memcpys.*?; (\d+) kernels "
                  r"joined with their launch, (\d+) calls without a GPU record", r.stderr)
    assert m, r.stderr
    kernels, memcpys, joined, unjoined = map(int, m.groups())
    assert kernels == 800 and memcpys == 3
    assert joined == 800 and unjoined == 0
    # folded weighted by GPU time: each simulated kernel ran SIM_KERNEL_NS
    stacks = parse_folded(out.read_text())
    assert count_with(stacks, ADD) == 600 * SIM_KERNEL_NS
    assert count_with(stacks, SCALE) == 200 * SIM_KERNEL_NS


def test_chrome_trace_of_a_cuda_run(tmp_path):
    out, r = cuda_run(tmp_path, "trace.json", app="cuda_app_cupti", extra=["--cpu", "-F", "999"],
                      app_args=["--launches", "400", "--scale-launches", "100"])
    trace = json.loads(out.read_text())
    problems, summary = check_chrome.check(trace)
    assert not problems, problems[:10]
    ev = trace["traceEvents"]
    api = [e for e in ev if e.get("cat") == "cuda_api"]
    kernels = [e for e in ev if e.get("cat") == "cuda_kernel"]
    assert sum(1 for e in api if e["name"] == "cuLaunchKernel") == 500
    assert len(kernels) == 500
    assert sum(1 for e in kernels if e["name"].startswith("vector_add(")) == 400
    assert all(abs(e["dur"] - SIM_KERNEL_NS / 1000) < 0.002 for e in kernels)
    # one flow per launch and copy, from the call to its GPU slice, never backwards
    assert summary["flows"] == 503
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    for f in (e for e in ev if e["ph"] == "f"):
        assert f["ts"] >= starts[f["id"]]["ts"]
    # GPU work on its own process/stream track, calls on a track under the thread
    procs = summary["processes"]
    assert any(v.startswith("GPU 0 (cuda_app_cupti") for v in procs.values()), procs
    assert "stream 7" in summary["threads"].values()
    assert any(v.endswith(" CUDA") for v in summary["threads"].values())
    # CPU samples became complete slices (their ends are known), no B/E
    assert summary["categories"].get("cpu", 0) > 0
    assert "B" not in summary["phases"] and "E" not in summary["phases"]
    assert summary["samples"] > 0
    assert summary["unnamed_threads"] == [] and summary["unnamed_processes"] == []


def _pythons():
    found = pyenv_pythons()
    pick = [p for p in found if p[0] in ("3.8", "3.11", "3.13")] or found[-1:]
    return [pytest.param(path, id=f"pyenv-{v}") for v, path in pick] + \
        ([pytest.param("/usr/bin/python3.11", id="debian-3.11")]
         if os.path.exists("/usr/bin/python3.11") else [])


@pytest.mark.parametrize("python", _pythons())
def test_python_frames_in_launch_stacks(tmp_path, python):
    """Launches made from Python (ctypes): each under the Python function and
    line that made it, the [cuda] kernel leaf on top, native frames between.
    The process exits right after its last launch (EXIT_WAIT 0): those
    launches' Python frames are named from the code object snapshots BPF
    sent, the process being gone when bpfprof reads the ring buffer."""
    script = os.path.join(os.path.dirname(__file__), "../workloads/py/cuda_launch.py")
    out = tmp_path / "py.folded"
    r = run(["-v", "--cuda", "--cuda-lib", LIB, "-o", str(out), "--", python, script, LIB,
             "2000", "500", "1", "0"], timeout=180)
    assert r.returncode == 0, r.stderr
    app = app_output(r.stdout)
    assert app["launches_train"] == "2000" and app["launches_eval"] == "500"
    lines = {tag: n for n, l in enumerate(open(script), 1)
             for tag in ("forward", "train_step", "evaluate") if f"LINE:{tag}" in l}
    stacks = parse_folded(out.read_text())
    # every launch counted, under its kernel
    assert count_with(stacks, ADD) == 2000, stacks[:5]
    assert count_with(stacks, SCALE) == 500
    fwd = f"forward (cuda_launch.py:{lines['forward']})"
    step = f"train_step (cuda_launch.py:{lines['train_step']})"
    ev = f"evaluate (cuda_launch.py:{lines['evaluate']})"
    # nearly all with their Python frames (the interpreter is known after 1 s)
    with_py = count_with(stacks, ADD, lambda f: fwd in f)
    assert with_py >= 0.98 * 2000, (with_py, stacks[:5])
    assert count_with(stacks, SCALE, lambda f: ev in f) >= 0.98 * 500
    for frames, n in stacks:
        if fwd in frames:
            # root to leaf: train_step, forward, launch (Python, the interpreter's own
            # frames between them), then ctypes/libffi, then the leaf
            py = [f for f in frames if "(cuda_launch.py:" in f]
            assert py[-3:-1] == [step, fwd] and py[-1].startswith("launch ("), frames
            assert any(f.startswith("ffi_call") for f in frames[frames.index(py[-1]):]), frames
            assert frames[-1] == ADD, frames
            assert ev not in frames
    assert not any("[python: unreadable]" in f for f, _ in stacks), stacks


def test_cuda_weight_rejects_unknown():
    r = run(["--cuda", "--cuda-weight", "bytes", "-d", "1"])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfprof: ") and "bytes" in lines[0]


def test_launch_functions_told_apart_by_cookie(tmp_path):
    """cuLaunchKernel and cuGraphLaunch share one BPF program, the probe's
    cookie saying which function fired: each launch keeps its own kind and
    its own caller, with uprobe_multi links and with per-probe uprobes."""
    for env in (None, dict(os.environ, BPFPROF_NO_UPROBE_MULTI="1")):
        out, r = cuda_run(tmp_path, "graph.folded", env=env,
                          app_args=["--launches", "5", "--scale-launches", "0",
                                    "--graph-launches", "7", "--syncs", "0"])
        stacks = parse_folded(out.read_text())
        graph = [(f, c) for f, c in stacks if f[-1] == "[cuda] graph 0x6a11"]
        assert sum(c for _, c in graph) == 7, stacks
        assert all(f[-2] == "launch_graph" for f, _ in graph), graph
        add = [(f, c) for f, c in stacks if f[-1] == ADD]
        assert sum(c for _, c in add) == 5 and all(f[-2] == "launch_vector_add" for f, _ in add)
