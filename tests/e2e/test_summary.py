# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""One source of truth for counts: the end-of-run summary's samples and
unresolved share are what the written file holds, in every format. A
Python `-- CMD` run (its code-object records arrive through the same ring
buffer as samples but are no samples) and a binary without symbols (a large
unresolved share), written as folded, pprof, chrome and svg; each file is
read back and counted here, independently of bpfprof."""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import pytest

from conftest import BPFPROF, have, parse_folded, run, summary_line, workload

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../tools"))
import check_chrome  # noqa: E402

PY_SPLIT = os.path.join(HERE, "../workloads/py/split.py")
SVGNS = "{http://www.w3.org/2000/svg}"
# how bpfprof names a frame it could not resolve (docs/outputs.md)
UNRESOLVED = re.compile(r"^\[unknown\]|^\[python: unreadable\]$|\+0x[0-9a-f]+$")
# synthetic frames the summary does not count as frames: roots, the cut marker
NOT_FRAMES = {"[truncated]"}


def is_unresolved(name):
    return bool(UNRESOLVED.search(name))


def weigh(stacks):
    """[(frames below the process root, count)] -> (samples, frames, unresolved)."""
    samples = frames = unres = 0
    for fr, c in stacks:
        fr = [f for f in fr if f not in NOT_FRAMES]
        samples += c
        frames += c * len(fr)
        unres += c * sum(1 for f in fr if is_unresolved(f))
    return samples, frames, unres


def from_folded(path):
    return weigh([(f[1:], c) for f, c in parse_folded(path.read_text())])


def from_pprof(path):
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod",
               GOCACHE=tempfile.mkdtemp(prefix="gocache"), HOME=os.environ.get("HOME", "/root"))
    r = subprocess.run(["go", "tool", "pprof", "-sample_index=samples", "-traces", str(path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    stacks, cur = [], None
    for line in r.stdout.splitlines():
        if line.startswith("-----------+"):
            cur = None
            continue
        # the value, then the leaf's name (blank for a frame pprof has no name for)
        m = re.match(r"^\s+(\d+)(?:\s+(.*))?$", line)
        if cur is None and m:
            cur = [int(m.group(1)), [(m.group(2) or "").strip()]]
            stacks.append(cur)
        elif cur is not None and line:
            # a frame pprof shows with a blank name is a line of spaces
            cur[1].append(line.strip())
    # pprof lists leaf first, the process root (comm) last
    return weigh([(list(reversed(fr[:-1])), c) for c, fr in stacks])


def from_svg(path):
    root = ET.parse(path).getroot()
    total = int(root.get("data-total"))
    nodes = []  # (name, value, depth), drawn and merged
    for g in root.find(f".//{SVGNS}g[@id='frames']").findall(f"{SVGNS}g"):
        nodes.append((g.find(f"{SVGNS}title").text.split("\n")[0], int(g.get("data-v")),
                      int(g.get("data-d"))))
    drawn = list(nodes)
    merged = json.loads(root.find(f".//{SVGNS}script[@id='merged']").text)
    n, depth = merged["n"], []
    for i in range(0, len(n), 4):
        p = n[i]
        d = (drawn[-1 - p][2] if p < 0 else depth[p]) + 1
        depth.append(d)
        nodes.append((merged["names"][n[i + 1]][0], n[i + 3], d))
    # a frame's value is the samples through it: summed over frames below
    # the process root (depth 1) it is samples x frames
    frames = sum(v for name, v, d in nodes if d >= 2 and name not in NOT_FRAMES)
    unres = sum(v for name, v, d in nodes if d >= 2 and is_unresolved(name))
    return total, frames, unres


def from_chrome(path):
    obj = json.loads(path.read_text())
    problems, summary = check_chrome.check(obj)
    assert problems == [], problems[:10]
    # each CPU slice is open for the samples that have it, a period each:
    # durations weigh frames as sample counts do, up to the last sample of a
    # run (closed a period after it) and gaps
    frames = unres = 0.0
    for e in obj["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu" and e["name"] not in NOT_FRAMES:
            frames += e["dur"]
            if is_unresolved(e["name"]):
                unres += e["dur"]
    return summary["samples"], frames, unres


READERS = {"folded": from_folded, "pprof": from_pprof, "chrome": from_chrome, "svg": from_svg}
EXT = {"folded": "folded", "pprof": "pb.gz", "chrome": "json", "svg": "svg"}


@pytest.mark.parametrize("what", ["python", "stripped"])
@pytest.mark.parametrize("fmt", ["folded", "pprof", "chrome", "svg"])
def test_summary_is_what_was_written(tmp_path, fmt, what):
    if fmt == "pprof" and not have("go"):
        pytest.skip("go (golang-go) not installed")
    out = tmp_path / f"run.{EXT[fmt]}"
    cmd = ([sys.executable, PY_SPLIT, "2"] if what == "python"
           else [workload("cpu_split_stripped"), "--cpu", "1"])
    r = run(["-F", "499", "-o", str(out), "--"] + cmd, timeout=600)
    assert r.returncode == 0, r.stderr
    line = summary_line(r.stderr)
    said = int(re.search(r"(\d+) samples", line).group(1))
    said_pct = float(re.search(r"([\d.]+)% frames unresolved", line).group(1))
    samples, frames, unres = READERS[fmt](out)
    pct = 100.0 * unres / frames if frames else 0.0
    print(f"\n{fmt} {what}: summary {said} samples {said_pct}% unresolved; "
          f"file {samples} samples {pct:.2f}% unresolved")
    assert samples == said, (samples, line)
    # stripped: 1 s of its CPU time at 499 Hz, ~500 (2 s of wall time left 91 next
    # to two busy loops and a suite)
    assert samples > 100, line
    if fmt == "chrome":
        # weighed by time, not counted: within a point
        assert abs(pct - said_pct) <= 1.0, (pct, line)
    else:
        assert abs(pct - said_pct) <= 0.051, (pct, line)
    if what == "stripped":
        # main, dispatch and work_X have no names: a large share
        assert said_pct > 20, line


# A parent as big as pytest after a long suite: it touches 256 MiB, then
# starts the agent as a test, a supervisor or a shell script would.
BIG_PARENT = r"""
import subprocess, sys
ballast = bytearray(256 << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
r = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE, text=True)
sys.stderr.write(r.stderr)
sys.exit(r.returncode)
"""


def test_peak_rss_is_the_agents_not_its_parents(tmp_path):
    """-v's `agent: ... peak RSS` is the agent's own high-water mark. The
    kernel's ru_maxrss keeps the peak of the image an exec replaced, so an
    agent started by a 256 MiB parent read 256 MiB (a 150 MiB pytest made
    test_untrusted's 40 MiB agent read 147-157 MiB at the end of a full
    suite); VmHWM is the agent's alone."""
    r = subprocess.run([sys.executable, "-c", BIG_PARENT, os.path.abspath(BPFPROF), "-vv",
                        "-o", str(tmp_path / "out.folded"), "--", "/bin/true"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    peak = re.search(r"agent: .*peak RSS (\d+) KiB", r.stderr)
    assert peak, r.stderr
    # the agent alone is ~40 MiB (RESULTS.md); its parent's 256 MiB is not in it
    assert int(peak.group(1)) < 128 << 10, peak.group(0)
