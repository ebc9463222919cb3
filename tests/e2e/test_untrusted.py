# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A root agent that an unprivileged user cannot mislead, stall or read
through (issue 26). Each test plays the local user (setpriv --reuid=65534, or
unshare -Urm) against bpfprof running as root, and fails on the agent that
trusted what the user controls: build ids, perf maps, inode numbers, links
in the user's directories."""
import os
import pathlib
import re
import shutil
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import BPFPROF, drain, parse_folded, total, wait_recording, workload

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


@pytest.fixture
def pub_path():
    """A directory the unprivileged user can reach (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix="bpfprof-untrusted-")
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def build_id_note(data):
    """(offset, bytes) of the GNU build id in an ELF64 file's bytes."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)

    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = sh(shstrndx)[4]
    for i in range(shnum):
        s = sh(i)
        name = data[strtab + s[0]:data.index(b"\0", strtab + s[0])]
        if name == b".note.gnu.build-id":
            namesz, descsz, _ = struct.unpack_from("<III", data, s[4])
            desc = s[4] + 12 + ((namesz + 3) & ~3)
            return desc, data[desc:desc + descsz]
    raise AssertionError("no build id note")


def with_build_id_of(src, dst, victim):
    """Copy src to dst with victim's build id written into its note, as
    `-Wl,--build-id=0x<victim's>` would: what any user can do."""
    data = bytearray(pathlib.Path(src).read_bytes())
    off, old = build_id_note(data)
    _, bid = build_id_note(pathlib.Path(victim).read_bytes())
    assert len(bid) == len(old)
    data[off:off + len(bid)] = bid
    pathlib.Path(dst).write_bytes(bytes(data))
    os.chmod(dst, 0o755)


def wait_for_line(path, pattern, proc, timeout=120):
    """Wait until the file (a drained stderr) has a line matching pattern."""
    end = time.time() + timeout
    while time.time() < end:
        if re.search(pattern, path.read_text(errors="replace"), re.M):
            return
        assert proc.poll() is None, path.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"no line {pattern!r} in {path.read_text(errors='replace')[-3000:]}")


def test_build_id_of_a_users_program_shares_no_table(pub_path):
    """A user's program carrying a root service's build id, running first:
    the service's stacks are unwound with the service's own rows. Before,
    share_by_build_id() gave the service the imposter's 29-row table: 0 of
    1486 samples of the victim reached main."""
    victim, imposter = pub_path / "victim", pub_path / "imposter"
    shutil.copy(workload("cpu_split_nofp"), victim)
    with_build_id_of(workload("deep_recursion"), imposter, victim)
    os.chown(imposter, NOBODY, NOBODY)  # the user's own file
    err = pub_path / "agent.err"
    imp = subprocess.Popen(AS_NOBODY + [str(imposter), "10", "300"])
    try:
        with open(err, "w") as ef:
            # -vv names each table as it is built: the victim starts only
            # once the imposter's is ready, as on the host where it came first
            agent = subprocess.Popen([BPFPROF, "-a", "-vv", "-F", "499", "-o",
                                      str(pub_path / "out.folded")], stderr=ef, text=True)
        try:
            wait_for_line(err, r"^bpfprof: recording ", agent)
            wait_for_line(err, re.escape(str(imposter)) + r": \d+ unwind rows from", agent)
            v = subprocess.run([str(victim), "--cpu", "2"], capture_output=True, text=True,
                               timeout=300)
            assert v.returncode == 0, v.stderr
        finally:
            agent.send_signal(2)
            agent.wait(timeout=120)
    finally:
        imp.kill()
        imp.wait()
    assert agent.returncode == 0, err.read_text()[-3000:]
    stacks = parse_folded((pub_path / "out.folded").read_text())
    work = [(f, c) for f, c in stacks
            if f[0] == "victim" and any(w in f for w in ("work_a", "work_b", "work_c"))]
    good = sum(c for f, c in work if "dispatch" in f and "main" in f)
    n = total(work)
    # 2 s of CPU at 499 Hz; only the samples of the victim's first moments,
    # before its own table was built, may stop short (0.6% here; 0% before)
    assert n > 300, (n, err.read_text()[-2000:])
    assert good >= 0.9 * n, (good, n)
