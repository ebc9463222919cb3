# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/walk_floor.py (make bench's in-run A/B timing) still applies to the
sample path, builds, verifies and splits the samples between its variants."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_walk_floor_smoke():
    r = subprocess.run([os.path.join(ROOT, "tools/walk_floor.py"), "--smoke"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {m.group(1): m.groups() for m in re.finditer(
        r"^(kfp|none|aa)\s+1\s+\S+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%$", r.stdout, re.M)}
    assert set(rows) == {"kfp", "none", "aa"}, r.stdout
    # every variant walked the whole 64-frame stack (the tool fails below 90%)
    for name, (_, a, b, ratio, whole) in rows.items():
        assert int(a) > 0 and int(b) > 0 and float(whole) >= 90, (name, r.stdout)
    # no user walk at all is cheaper than one; the control is no variant
    assert float(rows["none"][3]) < 1, r.stdout
