# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pprof output read back by `go tool pprof`: same totals and frames as folded."""
import gzip
import os
import re
import subprocess
import tempfile

import pytest

from conftest import count_with, have, parse_folded, run, total, workload

pytestmark = pytest.mark.skipif(not have("go"), reason="go (golang-go) not installed")


def go_pprof(*args):
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod",
               GOCACHE=tempfile.mkdtemp(prefix="gocache"), HOME=os.environ.get("HOME", "/root"))
    r = subprocess.run(["go", "tool", "pprof"] + list(args), capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def traces_total(text, unit_re):
    """Sum the per-trace values `go tool pprof -traces` prints."""
    n = 0
    for line in text.splitlines():
        m = re.match(r"^\s+(\d+)\s+" + unit_re, line)
        if m:
            n += int(m.group(1))
    return n


def test_pprof_matches_folded(tmp_path):
    pb = tmp_path / "app.pb.gz"
    r = run(["-F", "999", "-o", str(pb), "--", workload("cpu_split"), "3"])
    assert r.returncode == 0, r.stderr
    raw = pb.read_bytes()
    assert raw[:2] == b"\x1f\x8b", "pprof output must be gzipped"
    gzip.decompress(raw)

    # go's total must be the run's sample count, as the folded total is (below)
    m = re.search(r"(\d+) samples", r.stderr)
    samples = int(m.group(1))

    top = go_pprof("-sample_index=samples", "-top", "-nodecount=200", str(pb))
    tm = re.search(r"of (\d+) total", top)
    assert tm, top
    assert int(tm.group(1)) == samples
    assert "work_a" in top and "dispatch" in top

    traces = go_pprof("-sample_index=samples", "-traces", str(pb))
    assert traces_total(traces, r"") == samples
    # stacks are leaf first in pprof: work_a is followed by dispatch, main
    assert re.search(r"work_a\s*\n\s+dispatch\s*\n\s+main", traces), traces[:2000]

    cpu = go_pprof("-sample_index=cpu", "-top", str(pb))
    assert "Type: cpu" in cpu


def test_pprof_and_folded_same_totals(tmp_path):
    """Both writers account for every sample: go's sum over pprof samples and the
    sum of folded counts each equal the sample count of their run's summary."""
    pb = tmp_path / "x.pprof"
    r = run(["-F", "499", "-f", "pprof", "-o", str(pb), "--per-pid", "--", workload("cpu_split"), "2"])
    assert r.returncode == 0, r.stderr
    samples = int(re.search(r"(\d+) samples", r.stderr).group(1))
    raw = go_pprof("-raw", str(pb))
    assert "samples/count" in raw and "cpu/nanoseconds" in raw
    # -raw lists each sample's values: their sum is the run's sample count
    sect = raw.split("Samples:", 1)[1].split("Locations", 1)[0]
    vals = [int(l.split()[0]) for l in sect.splitlines()[2:] if re.match(r"^\s+\d+\s+\d+", l)]
    assert sum(vals) == samples
    assert "pid:" in raw or "pid" in raw

    folded = tmp_path / "x.folded"
    r2 = run(["-F", "499", "-o", str(folded), "--", workload("cpu_split"), "2"])
    assert r2.returncode == 0
    stacks = parse_folded(folded.read_text())
    assert total(stacks) == int(re.search(r"(\d+) samples", r2.stderr).group(1))
