# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The layout docs/design.md describes holds: user/'s modules include each
other without a cycle (tools/modgraph.py), the recorder names no feature
(the registry, user/registry.c, sits above them), and collect/record.c stays
the run loop, its jobs in files named for them (issue 27)."""
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import modgraph  # noqa: E402

USER = os.path.join(ROOT, "user")
# the run loop's size when its jobs moved out (2,046 lines before); what it
# launches, loads, reports and writes lives in command.c, setup.c, report.c, writeout.c
RECORD_MAX_LINES = 600


def test_no_module_cycles():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools/modgraph.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "no cycles" in r.stdout, r.stdout + r.stderr


def test_modgraph_finds_a_cycle(tmp_path):
    """The checker itself: two modules including each other are reported."""
    for mod, other in (("a", "b"), ("b", "a")):
        (tmp_path / mod).mkdir()
        (tmp_path / mod / f"{mod}.h").write_text(f'#include "{other}/{other}.h"\n')
    (tmp_path / "main.c").write_text('#include "a/a.h"\n')
    edges = modgraph.graph(str(tmp_path))
    assert modgraph.cycles(edges) == [["a", "b"]]
    assert edges["main"]["a"] == ["main.c -> a/a.h"]


def test_the_recorder_names_no_feature():
    """collect/ must not include cuda/ (or any feature's header): the list is user/registry.c."""
    edges = modgraph.graph(USER)
    assert "cuda" not in edges["collect"], edges["collect"]["cuda"]
    assert set(edges["registry"]) >= {"collect", "cuda"}


def test_record_c_is_the_run_loop():
    with open(os.path.join(USER, "collect/record.c")) as f:
        n = sum(1 for _ in f)
    assert n <= RECORD_MAX_LINES, (
        f"user/collect/record.c has {n} lines: put what it launches (command.c), loads "
        f"(setup.c), reports (report.c) or writes (writeout.c) in those files, or a "
        f"feature's logic in the feature's own file")
