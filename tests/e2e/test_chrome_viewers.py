# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The Chrome trace of a CPU + off-CPU run, read by third-party viewers:
speedscope's web app (npm `speedscope`, the built app it ships) in Debian's
headless Chromium, driven by npm `puppeteer-core` (tests/e2e/speedscope/:
package.json + package-lock.json, installed with `npm ci` into the build
directory once per lock file), and tools/check_chrome.py (the Trace Event
Format rules). Perfetto's trace processor is in neither Debian nor npm, so
it is not run here."""
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from conftest import BPFPROF, run, summary_line, workload

HERE = os.path.dirname(os.path.abspath(__file__))
JS_SRC = os.path.join(HERE, "speedscope")
sys.path.insert(0, os.path.join(HERE, "../../tools"))
import check_chrome  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def speedscope():
    """The npm packages, installed once per package-lock.json into the build dir."""
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.skip("npm/node not installed (tools/install-deps.sh installs nodejs and npm)")
    if not CHROMIUM:
        pytest.skip("chromium not installed (tools/install-deps.sh installs it)")
    lock = open(os.path.join(JS_SRC, "package-lock.json"), "rb").read()
    dest = os.path.join(os.path.dirname(os.path.abspath(BPFPROF)), "e2e-js", "speedscope")
    stamp = os.path.join(dest, ".lock-sha256")
    want = hashlib.sha256(lock).hexdigest()
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for f in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(JS_SRC, f), dest)
        # --ignore-scripts: puppeteer-core downloads nothing; Debian's chromium is used
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                           cwd=dest, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stderr[-3000:]}"
        with open(stamp, "w") as f:
            f.write(want)
    shutil.copy(os.path.join(JS_SRC, "load.mjs"), dest)
    return dest


def serve(root):
    """A local HTTP server for root (speedscope fetches #profileURL=...)."""
    handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(root), **kw)
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def open_in_speedscope(js_dir, tmp_path, trace):
    www = tmp_path / "www"
    shutil.copytree(os.path.join(js_dir, "node_modules/speedscope/dist/release"), www)
    shutil.copy(trace, www / "trace.json")
    srv = serve(www)
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        r = subprocess.run(["node", "load.mjs", CHROMIUM,
                            f"{base}/index.html#profileURL={base}/trace.json"],
                           cwd=js_dir, capture_output=True, text=True, timeout=240)
    finally:
        srv.shutdown()
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


PY_SPLIT = os.path.join(HERE, "../workloads/py/offcpu_split.py")


@pytest.mark.parametrize("lang", ["c", "python"])
def test_speedscope_renders_cpu_and_offcpu_trace(speedscope, tmp_path, lang):
    """offcpu_split computes in compute_phase/computer and sleeps in
    sleep_phase/sleeper: both must be frames speedscope shows, with the
    trace nested as its importer needs (it warns "Tried to end ..." for every
    E that does not close the slice on top, and gave up on ours before)."""
    trace = tmp_path / "run.json"
    if lang == "c":
        cmd, comm = [workload("offcpu_split"), "2"], "offcpu_split"
        fns = ("compute_phase", "sleep_phase", "run", "main", "[off-CPU]")
    else:
        cmd, comm = [sys.executable, PY_SPLIT, "2"], "python3"
        fns = ("[off-CPU]",)
    r = run(["--cpu", "--off-cpu", "-F", "499", "-o", str(trace), "--"] + cmd, timeout=120)
    assert r.returncode == 0, r.stderr
    obj = json.loads(trace.read_text())
    problems, summary = check_chrome.check(obj)
    assert problems == [], problems[:10]
    # slices with known ends: no B/E at all; every track named
    assert summary["phases"].get("X", 0) > 100 and "B" not in summary["phases"]
    assert summary["unnamed_threads"] == [] and summary["unnamed_processes"] == []
    # the command's process, named (the python workload prints no pid)
    pids = [p for p, n in summary["processes"].items() if n == comm]
    assert len(pids) == 1, summary["processes"]
    pid = int(pids[0])
    assert summary["categories"].get("cpu", 0) > 0 and summary["categories"].get("off_cpu", 0) > 0
    assert summary["samples"] == int(re.search(r"(\d+) samples", summary_line(r.stderr)).group(1))

    page = open_in_speedscope(speedscope, tmp_path, trace)
    text = page.get("text", "") + page.get("sandwich", "")
    assert "Something went wrong" not in text, text[:2000]
    assert page["errors"] == [], page["errors"]
    # speedscope's importer warns "ts=...: Tried to end X when Y was on the top of the stack"
    bad = [w for w in page["warnings"] if w.startswith("ts=") or "stack" in w]
    assert bad == [], (len(bad), bad[:5])
    # the toolbar names the thread's profile: "offcpu_split (pid N), offcpu_split [N] (tid N)"
    assert f"{comm} (pid {pid})" in page["text"], page["text"][:2000]
    # flame chart canvases drawn
    assert any(c["w"] > 0 and c["h"] > 100 for c in page["canvases"]), page["canvases"]
    # the sandwich view's table lists the frames: the compute phase (CPU slices),
    # the sleep (off-CPU slices) and the block marker itself
    names = {l.strip() for l in page["sandwich"].splitlines()}
    for fn in fns:
        assert fn in names, (fn, sorted(names)[:80])
    if lang == "python":
        assert any(n.startswith("computer (offcpu_split.py:") for n in names), sorted(names)[:80]
        assert any(n.startswith("sleeper (offcpu_split.py:") for n in names), sorted(names)[:80]
