# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pprof output read back by `go tool pprof`: same totals and frames as folded."""
import gzip
import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import WORKLOADS, count_with, have, parse_folded, run, total, workload

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


# --- issue 15: the pprof model (Function name + file + start line, Line line), real mappings,
# native source lines, a second decoder -----------------------------------------------------

PYDIR = os.path.realpath(os.path.join(os.path.dirname(__file__), "../workloads/py"))
DECODER = os.path.join(os.path.dirname(__file__), "pprof-format")


def npm_decoder():
    """The npm pprof-format decoder, installed from the lock file on first use."""
    if not have("node") or not have("npm"):
        pytest.skip("node/npm not installed")
    if not os.path.isdir(os.path.join(DECODER, "node_modules", "pprof-format")):
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=DECODER,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr


def decode(path):
    """The profile as the npm pprof-format package decodes it (decode.mjs)."""
    npm_decoder()
    import json
    r = subprocess.run(["node", os.path.join(DECODER, "decode.mjs"), str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def source_defs(path):
    """{function name: line of its def} of a script."""
    out = {}
    for n, l in enumerate(open(path), 1):
        m = re.match(r"\s*def (\w+)", l)
        if m:
            out[m.group(1)] = n
    return out


def tagged_lines(path):
    return {m.group(1): n for n, l in enumerate(open(path), 1)
            for m in [re.search(r"# LINE:(\w+)", l)] if m}


def top_rows(text):
    """`go tool pprof -top` rows: [(flat, cum, name)]."""
    rows = []
    for l in text.splitlines():
        m = re.match(r"^\s*([\d.]+\w*)\s+[\d.]+%\s+[\d.]+%\s+([\d.]+\w*)\s+[\d.]+%\s(.*)$", l)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3).strip()))
    return rows


def test_pprof_python_function_once(tmp_path):
    """Each Python function is one pprof Function: `-top` lists it once, with its name
    alone (`<module>` included, never blank); `-lines` gives file:line; `-list` shows
    its source; `-traces` and `-tagfocus` work on it."""
    script = os.path.join(PYDIR, "split.py")
    pb = tmp_path / "py.pb.gz"
    r = run(["-F", "499", "-o", str(pb), "--", sys.executable, script, "3"])
    assert r.returncode == 0, r.stderr
    top = go_pprof("-top", "-nodecount=1000", str(pb))
    names = [n for _, _, n in top_rows(top)]
    assert names, top
    assert "" not in names, top
    for fn in ("<module>", "main", "spin", "work_a", "middle", "work_b", "work_c"):
        assert names.count(fn) == 1, (fn, top)
    assert not any(re.search(r" \(\S+\.py:\d+\)$", n) for n in names), top
    # -lines: one row per line, file:line from the Line, at the lines the script marks
    lines = go_pprof("-lines", "-top", "-nodecount=1000", str(pb))
    tags = tagged_lines(script)
    for fn in ("spin", "work_a", "middle"):
        want = f"{fn} {script}:{tags[fn]}"
        assert any(n == want for _, _, n in top_rows(lines)), (want, lines)
    # -list: the function's source, from its file
    lst = go_pprof("-list", "^work_a$", str(pb))
    assert re.search(r"ROUTINE =+ work_a in " + re.escape(script), lst), lst
    assert "return spin(budget)  # LINE:work_a" in lst, lst
    # -traces: leaf first, the Python callers under spin
    traces = go_pprof("-traces", str(pb))
    assert re.search(r"spin\s*\n\s+work_b\s*\n\s+middle\s*\n\s+main\s*\n\s+<module>", traces), \
        traces[:3000]
    # -tagfocus on a label: the GIL-holding samples are most but not all of the total
    total = int(re.search(r"of (\d+) total", go_pprof("-sample_index=samples", "-top", str(pb)))
                .group(1))
    held = go_pprof("-sample_index=samples", "-tagfocus=gil=held", "-top", str(pb))
    m = re.search(r"Showing nodes accounting for (\d+), [\d.]+% of (\d+) total", held)
    assert m and int(m.group(2)) == total, held
    focused = sum(int(f) for f, _, n in top_rows(held))
    assert 0 < focused <= total, held
    # the same Functions through the second decoder: name alone, full path, def line
    d = decode(pb)
    defs = source_defs(script)
    mine = {f["name"]: f for f in d["functions"] if os.path.realpath(f["file"]) == script}
    for fn in ("spin", "work_a", "middle", "work_b", "work_c", "main"):
        assert mine[fn]["startLine"] == defs[fn], (fn, mine[fn])
        assert mine[fn]["systemName"] == "split." + fn, mine[fn]
    assert mine["<module>"]["startLine"] == 1
    assert len([f for f in d["functions"] if f["name"] == "spin"]) == 1


def addr2line(path, addr, lines=False):
    """Function names (lines: "file:line"s) addr2line gives for addr in path, innermost
    (inlined) first."""
    r = subprocess.run(["addr2line", "-f", "-i", "-e", path, hex(addr)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()[1 if lines else 0::2]


@pytest.mark.skipif(not have("addr2line"), reason="binutils not installed")
def test_pprof_mappings_addr2line(tmp_path):
    """Mappings are the process's own (start, limit, file offset, build id), the program
    first; for each native location, addr2line on (mapping file, address - start +
    offset) names the location's function. Native Lines come from DWARF: the workload's
    own (-g) and glibc's, from libc6-dbg's build-id debug file."""
    pb = tmp_path / "cpu.pb.gz"
    exe = os.path.realpath(workload("cpu_split"))
    r = run(["-F", "999", "-o", str(pb), "--", exe, "2"])
    assert r.returncode == 0, r.stderr
    top = go_pprof("-top", str(pb))
    assert "File: cpu_split" in top, top[:500]
    d = decode(pb)
    maps = {m["id"]: m for m in d["mappings"]}
    assert d["mappings"][0]["file"] == exe, d["mappings"][0]
    fns = {f["id"]: f for f in d["functions"]}
    checked = {}
    for loc in d["locations"]:
        m = maps.get(loc["mapping"])
        if not m or not m["file"].startswith("/"):
            continue
        assert m["start"] <= loc["address"] < m["limit"], (loc, m)
        name = fns[loc["lines"][0]["function"]]["name"]
        if name.startswith("[") or "+0x" in name:
            continue
        off = loc["address"] - m["start"] + m["offset"]
        got = addr2line(m["file"], off)
        if m["file"] == exe:
            assert name in got, (name, got, loc, m)
        else:
            # glibc's DWARF names aliases (__libc_start_main_impl, __GI_munmap, __mmap64):
            # the outermost line addr2line gives must be the location's Line
            fn = fns[loc["lines"][0]["function"]]
            if not loc["lines"][0]["line"]:
                continue
            where = addr2line(m["file"], off, lines=True)[-1].split(" ")[0]
            # (by number: for a function in an included file, binutils may name the
            # including one)
            assert where.endswith(":" + str(loc["lines"][0]["line"])), (name, where, fn, loc, m)
        checked[os.path.basename(m["file"])] = checked.get(os.path.basename(m["file"]), 0) + 1
    assert checked.get("cpu_split", 0) >= 4 and checked.get("libc.so.6", 0) >= 1, checked
    # build ids are the files' own
    for m in d["mappings"]:
        if m["file"] == exe:
            out = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True).stdout
            assert m["buildId"] and m["buildId"] in out, (m, out)
            assert m["hasFunctions"] and m["hasFilenames"] and m["hasLineNumbers"], m
    # native Lines: work_a at a line of its body in split.h, its Function at its def
    split_h = os.path.realpath(os.path.join(os.path.dirname(__file__), "../workloads/split.h"))
    src = open(split_h).read().splitlines()
    work_a = [f for f in d["functions"] if f["name"] == "work_a"]
    assert len(work_a) == 1 and os.path.realpath(work_a[0]["file"]) == split_h, work_a
    assert "work_a(" in src[work_a[0]["startLine"] - 1], work_a
    wl = {x["line"] for loc in d["locations"] for x in loc["lines"]
          if x["function"] == work_a[0]["id"]}
    assert wl and all(work_a[0]["startLine"] <= n <= work_a[0]["startLine"] + 3 for n in wl), wl
    # glibc's frames have lines too (libc6-dbg's separate debug file, found by build id)
    libc = [f for f in d["functions"] if f["name"] == "__libc_start_main"]
    assert libc and libc[0]["file"].endswith("libc-start.c") and libc[0]["startLine"] > 0, libc
    lines = go_pprof("-lines", "-top", "-nodecount=1000", str(pb))
    assert re.search(r"__libc_start_main \S*libc-start\.c:\d+", lines), lines


def test_native_lines_option(tmp_path):
    """--native-lines names native frames 'func (file:line)' in folded output; without
    it they stay bare (and the names are what pprof's Functions are called)."""
    out = tmp_path / "a.folded"
    r = run(["-F", "499", "--native-lines", "-o", str(out), "--", workload("cpu_split"), "1"])
    assert r.returncode == 0, r.stderr
    stacks = parse_folded(out.read_text())
    frames = {f for fs, _ in stacks for f in fs}
    assert any(re.fullmatch(r"work_a \(split\.h:\d+\)", f) for f in frames), sorted(frames)[:50]
    assert any(re.fullmatch(r"__libc_start_main \(libc-start\.c:\d+\)", f) for f in frames), \
        sorted(frames)[:50]
    out2 = tmp_path / "b.folded"
    r = run(["-F", "499", "-o", str(out2), "--", workload("cpu_split"), "1"])
    assert r.returncode == 0, r.stderr
    frames = {f for fs, _ in parse_folded(out2.read_text()) for f in fs}
    assert "work_a" in frames and not any("split.h" in f for f in frames)


FAKE_CUDA = os.path.join(WORKLOADS, "cuda", "libcuda.so.1")


@pytest.mark.parametrize("mode", ["cpu", "alloc", "off-cpu", "cuda"])
def test_pprof_two_decoders_agree(tmp_path, mode):
    """go tool pprof and the npm pprof-format decoder read the same profile: same
    sample types and totals; every id a sample or Line uses is defined; Python frames
    are Functions named without a location, native ones sit in a mapping."""
    script = os.path.join(PYDIR, {"cpu": "split.py", "alloc": "alloc.py",
                                  "off-cpu": "offcpu_split.py",
                                  "cuda": "cuda_launch.py"}[mode])
    args = {"cpu": ["2"], "alloc": ["32", "64"], "off-cpu": ["2"],
            "cuda": [FAKE_CUDA, "2000", "500", "1", "0"]}[mode]
    opts = [f"--{mode}"]
    if mode == "cuda":
        if not os.path.exists(FAKE_CUDA):
            pytest.skip("no fake libcuda (CUDA toolkit headers missing)")
        opts += ["--cuda-lib", FAKE_CUDA]
    pb = tmp_path / "p.pb.gz"
    r = run(opts + ["-o", str(pb), "--", sys.executable, script] + args, timeout=180)
    assert r.returncode == 0, r.stderr
    d = decode(pb)
    raw = go_pprof("-raw", str(pb))
    hdr = raw.split("Samples:", 1)[1].splitlines()[1]
    assert [t.replace("[dflt]", "") for t in hdr.split()] == \
        [f"{t}/{u}" for t, u in d["sampleTypes"]], (hdr, d["sampleTypes"])
    for i, (t, _) in enumerate(d["sampleTypes"]):
        tm = re.search(r"of (\S+) total", go_pprof(f"-sample_index={t}", "-top", "-unit=minimum",
                                                   "-nodecount=1", str(pb)))
        assert tm, t
        if d["totals"][i] and re.fullmatch(r"\d+", tm.group(1)):
            assert int(tm.group(1)) == d["totals"][i], (t, tm.group(1), d["totals"][i])
    locs = {l["id"]: l for l in d["locations"]}
    fns = {f["id"]: f for f in d["functions"]}
    maps = {m["id"] for m in d["mappings"]}
    assert all(i in locs for s in d["samples"] for i in s["locations"])
    assert all(x["function"] in fns for l in d["locations"] for x in l["lines"])
    assert all(l["mapping"] == 0 or l["mapping"] in maps for l in d["locations"])
    defs = source_defs(script)
    py = [f for f in d["functions"] if os.path.realpath(f["file"]) == script]
    assert py, [f["file"] for f in d["functions"]][:20]
    for f in py:
        assert f["name"] and " (" not in f["name"], f
        if f["name"] in defs:
            assert f["startLine"] == defs[f["name"]], f
    # every Python Function appears once per (name, file)
    keys = [(f["name"], f["file"]) for f in d["functions"]]
    assert len(keys) == len(set(keys))
    # native frames of the interpreter sit in a mapping with a real range
    native = [l for l in d["locations"] if l["mapping"]]
    assert native and all(l["address"] for l in native)
    if mode == "cuda":
        # the kernel leaf is a Function of its own, under its Python caller
        kern = [f for f in d["functions"] if f["name"].startswith("[cuda] vector_add")]
        assert len(kern) == 1, [f["name"] for f in d["functions"] if "cuda" in f["name"]]
        fwd = [f for f in py if f["name"] == "forward"]
        assert fwd and fwd[0]["startLine"] == defs["forward"], fwd
