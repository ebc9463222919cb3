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

from conftest import BPFPROF, have, python_params, run, workload


def tmux(*args, check=True):
    return subprocess.run(["tmux"] + list(args), capture_output=True, text=True, check=check)


def screen(session):
    return tmux("capture-pane", "-p", "-t", session).stdout


@pytest.mark.skipif(not have("tmux"), reason="tmux not installed")
def test_top_in_tmux_shows_hottest_and_quits():
    wl = subprocess.Popen([workload("cpu_split"), "30"], stdout=subprocess.DEVNULL)
    session = "bpfprof-top-" + uuid.uuid4().hex[:8]
    cmd = (f"{shlex.quote(os.path.abspath(BPFPROF))} top -p {wl.pid} -F 499 -q; "
           "echo EXIT=$?; sleep 30")
    try:
        tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd)
        # within 3 s a screen shows the hottest function (work_a: 50% of the
        # CPU) as the first row sorted by self; the first screen may cover a
        # fraction of a second, which a phase of the workload can dominate
        t0 = time.monotonic()
        text, rows = "", []
        while time.monotonic() - t0 < 3.0:
            text = screen(session)
            rows = [l for l in text.splitlines() if re.match(r"\s*[\d.]+% +[\d.]+%", l)]
            if rows and rows[0].rstrip().endswith("work_a"):
                break
            time.sleep(0.1)
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


def test_top_cuts_names_by_character(tmp_path):
    # A Python function whose name is 70 two-byte characters: cut by bytes at
    # the name column (103 columns when not a terminal), the line would end in
    # half a character; cut by characters the whole name fits.
    name = "\u00e9" * 70
    script = tmp_path / "wide.py"
    script.write_text(f"def {name}():\n    x = 0\n    while True:\n        x += 1\n{name}()\n",
                      encoding="utf-8")
    wl = subprocess.Popen(["/usr/bin/python3", str(script)])
    try:
        time.sleep(0.5)
        r = subprocess.run([BPFPROF, "top", "-p", str(wl.pid), "-d", "2.5", "-q"],
                           capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr
        out = r.stdout.decode("utf-8")  # strict: a split character raises
        assert f"{name} (wide.py:" in out, out
    finally:
        wl.kill()
        wl.wait()


def test_top_rejects_output():
    r = run(["top", "-o", "x.folded"])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("py", python_params(("pyenv-3.13", "sid-3.14", "sid-3.15", "ft-3.14t")))
def test_top_thread_filter(py):
    """--thread keeps the threads whose 'name [tid]' frame contains the text:
    a Python thread's threading name here."""
    script = os.path.join(os.path.dirname(__file__), "../workloads/py/threads.py")
    wl = subprocess.Popen([py, script, "12"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)  # threads started and named
        r = run(["top", "-p", str(wl.pid), "--thread", "worker-a", "-d", "4.5", "-q"], timeout=30)
        assert r.returncode == 0, r.stderr
        last = r.stdout.split("bpfprof top:")[-1]
        assert "threads ~ worker-a" in last, r.stdout
        # worker-a's code (the table is cut to its top rows sorted by self,
        # so its entry function busy_a may be below the cut), no one else's
        assert "spin (threads.py:" in last and "Thread.run" in last, last
        for other in ("busy_b", "busy_main", "busy_r", "busy_u", "busy_raw"):
            assert other not in r.stdout, r.stdout
        # six busy threads share 2 CPUs: worker-a's share of the samples is
        # about 1/6, far below the whole process's
        r2 = run(["top", "-p", str(wl.pid), "-d", "4.5", "-q"], timeout=30)
        per_s = [int(n) for n in re.findall(r"(\d+) samples in the last second", r.stdout)[1:]]
        all_s = [int(n) for n in re.findall(r"(\d+) samples in the last second", r2.stdout)[1:]]
        assert per_s and all_s and sum(per_s) / len(per_s) < 0.5 * sum(all_s) / len(all_s), \
            (per_s, all_s)
    finally:
        wl.kill()
        wl.wait()


def test_thread_is_a_top_option():
    r = run(["--thread", "x", "-d", "1"])
    assert r.returncode == 2 and "top" in r.stderr and len(r.stderr.splitlines()) == 1
