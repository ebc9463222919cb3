# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""bpfprof top driven in an 80x24 tmux terminal (send-keys / capture-pane), and
its plain-text form when stdout is not a terminal."""
import os
import re
import shlex
import subprocess
import time
import uuid

import pytest

from conftest import BPFPROF, have, run, workload


def tmux(*args, check=True):
    return subprocess.run(["tmux"] + list(args), capture_output=True, text=True, check=check)


def screen(session):
    return tmux("capture-pane", "-p", "-t", session).stdout


@pytest.mark.skipif(not have("tmux"), reason="tmux not installed")
def test_top_in_tmux_shows_hottest_and_quits():
    wl = subprocess.Popen([workload("cpu_split"), "30"], stdout=subprocess.DEVNULL)
    session = "bpfprof-top-" + uuid.uuid4().hex[:8]
    cmd = f"{shlex.quote(os.path.abspath(BPFPROF))} top -p {wl.pid} -q; echo EXIT=$?; sleep 30"
    try:
        tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd)
        t0 = time.monotonic()
        text = ""
        while time.monotonic() - t0 < 3.0:
            text = screen(session)
            if "work_a" in text:
                break
            time.sleep(0.1)
        assert "work_a" in text, text
        # the hottest function (work_a: 50% of the CPU) is the first row sorted by self
        rows = [l for l in text.splitlines() if re.match(r"\s*[\d.]+% +[\d.]+%", l)]
        assert rows and rows[0].rstrip().endswith("work_a"), text
        assert all(len(l) <= 80 for l in text.splitlines())
        # switch to total: main (every sample) goes first
        tmux("send-keys", "-t", session, "t")
        time.sleep(1.5)
        text = screen(session)
        assert "sorted by total" in text, text
        tmux("send-keys", "-t", session, "q")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5 and "EXIT=" not in text:
            time.sleep(0.1)
            text = screen(session)
        assert "EXIT=0" in text, text
    finally:
        tmux("kill-session", "-t", session, check=False)
        wl.kill()
        wl.wait()


def test_top_plain_text_when_not_a_tty():
    wl = subprocess.Popen([workload("cpu_split"), "10"], stdout=subprocess.DEVNULL)
    try:
        r = run(["top", "-p", str(wl.pid), "-d", "3.5", "-q"], timeout=30)
        assert r.returncode == 0, r.stderr
        assert "\033[" not in r.stdout
        tables = r.stdout.count("bpfprof top:")
        assert 2 <= tables <= 4, r.stdout
        assert "work_a" in r.stdout
    finally:
        wl.kill()
        wl.wait()


def test_top_rejects_output():
    r = run(["top", "-o", "x.folded"])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
