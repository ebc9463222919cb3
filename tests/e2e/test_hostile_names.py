# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Names a process chooses (comm, OS thread name, threading name, a code
object's qualname) carrying terminal escape sequences never reach a terminal
or a text output raw: folded on stdout, -vvv logs and the summary, dump (text
and --json), top in a terminal and as plain text. Each is escaped visibly
(\\x1b), so the admin sees that the name is odd."""
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import BPFPROF, pyenv_pythons

PYDIR = os.path.join(os.path.dirname(__file__), "../workloads/py")
SCRIPT = os.path.join(PYDIR, "hostile_names.py")
# what top itself writes to a terminal: alternate screen, cursor, home, clear
TOP_OWN = [b"\033[?1049h", b"\033[?25l", b"\033[H", b"\033[2J", b"\033[?25h", b"\033[?1049l"]


def python():
    """An interpreter with co_qualname (3.11+), which the workload renames."""
    for v, path in pyenv_pythons():
        if v in ("3.11", "3.12", "3.13"):
            return path
    if os.path.exists("/usr/bin/python3.11"):
        return "/usr/bin/python3.11"
    pytest.skip("no Python 3.11+ here")


def bpfprof(args, timeout=60):
    return subprocess.run([BPFPROF] + args, capture_output=True, timeout=timeout)


def start(seconds):
    p = subprocess.Popen([python(), SCRIPT, str(seconds)], stdout=subprocess.PIPE)
    if not select.select([p.stdout], [], [], 30)[0]:
        p.kill()
        p.wait()
        pytest.fail("hostile_names.py printed nothing in 30 s")
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.3)  # the worker thread has renamed itself
    return p


def stop(p):
    p.kill()
    p.wait()


def test_folded_stdout_and_logs_escape_names():
    r = bpfprof(["--per-thread", "-F", "199", "-vvv", "--", python(), SCRIPT, "2"])
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout
    assert b"\x1b" not in r.stderr and b"\x07" not in r.stderr
    out = r.stdout.decode()
    # the folded writer turns ';' into ':' on top of the escaping
    assert "ev\\x1b]0:pwn\\x07il;" in out, out[:2000]
    assert "hot\\x1b[2Jspin\\x1b]0:pwn\\x07 (hostile_names.py:" in out, out[:2000]
    # the worker thread shows under its (escaped or replaced) threading name
    assert "py\\x1b[5mthread [" in out or "py?[5mthread [" in out, out[:2000]
    assert b" samples, " in r.stderr
    # -vvv's debug lines name the code objects read: escaped there too
    assert b"hot\\x1b[2Jspin" in r.stderr, r.stderr[-3000:]


def test_dump_text_and_json_escape_names():
    p = start(30)
    try:
        r = bpfprof(["dump", "-p", str(p.pid)])
        assert r.returncode == 0, r.stderr
        assert b"\x1b" not in r.stdout + r.stderr and b"\x07" not in r.stdout + r.stderr
        text = r.stdout.decode()
        assert f"Process {p.pid} (ev\\x1b]0;pwn\\x07il)" in text, text
        assert '"thr\\x1b[31mred"' in text, text
        assert "hot\\x1b[2Jspin\\x1b]0;pwn\\x07 (hostile_names.py:" in text, text
        r = bpfprof(["dump", "-p", str(p.pid), "--json"])
        assert r.returncode == 0, r.stderr
        assert b"\x1b" not in r.stdout
        d = json.loads(r.stdout)  # still valid JSON
        assert d["comm"] == "ev\\x1b]0;pwn\\x07il"
        assert "thr\\x1b[31mred" in [t["name"] for t in d["threads"]], d
        frames = [f for t in d["threads"] for f in t["frames"]]
        assert any(f.startswith("hot\\x1b[2Jspin") for f in frames), frames
    finally:
        stop(p)


def test_top_plain_text_escapes_names():
    p = start(30)
    try:
        r = bpfprof(["top", "-p", str(p.pid), "-d", "2.5", "-q"])
        assert r.returncode == 0, r.stderr
        assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout
        assert b"hot\\x1b[2Jspin" in r.stdout, r.stdout
    finally:
        stop(p)


def test_top_in_a_terminal_writes_only_its_own_sequences():
    """Everything top writes to a pty, less its own screen handling, has no
    ESC or BEL left: the function name's sequences arrive escaped."""
    p = start(30)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(BPFPROF, [BPFPROF, "top", "-p", str(p.pid), "-q"])
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        raw, t0, quit_sent = b"", time.monotonic(), False
        while time.monotonic() - t0 < 15:
            if not quit_sent and b"hot\\x1b[2Jspin" in raw and time.monotonic() - t0 > 2.5:
                os.write(fd, b"q")
                quit_sent = True
            if not select.select([fd], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: top exited and the pty closed
                break
            if not chunk:
                break
            raw += chunk
        if not quit_sent:  # the escaped name never showed: stop top anyway
            os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert quit_sent, raw[-3000:]
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        for seq in TOP_OWN:
            raw = raw.replace(seq, b"")
        assert b"\x1b" not in raw and b"\x07" not in raw, raw[-3000:]
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
        stop(p)
