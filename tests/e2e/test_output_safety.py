# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What bpfprof writes on a shared host: profiles 0600 whatever the umask, a
--continuous directory it creates 0700, -o naming a FIFO refused at once
(and /dev/null written), --keep deleting only files it wrote itself."""
import os
import re
import signal
import stat
import subprocess
import time

from conftest import BPFPROF, workload

NAME_RE = re.compile(r"^bpfprof-\d{8}T\d{6}\.\d{3}Z\.pb\.gz$")
MANIFEST = ".bpfprof-written"


def umask022():
    os.umask(0o022)


def run(args, timeout=60):
    return subprocess.run([BPFPROF] + args, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=umask022)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def ours(d):
    return sorted(f for f in os.listdir(d) if NAME_RE.match(f))


def continuous(d, nfiles, *extra):
    """--continuous D at 0.2 s intervals until it has written nfiles files (seen in D
    as they come), then SIGTERM; returns stderr."""
    before = set(os.listdir(d)) if os.path.isdir(d) else set()
    p = subprocess.Popen([BPFPROF, "--continuous", str(d), "--interval", "0.2", "-F", "49"]
                         + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=umask022)
    seen = set()
    try:
        end = time.monotonic() + 60
        while len(seen) < nfiles and time.monotonic() < end and p.poll() is None:
            if os.path.isdir(d):
                seen |= {f for f in ours(d) if f not in before}
            time.sleep(0.03)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert len(seen) >= nfiles, (seen, err)
    return err


def test_profiles_0600_under_umask_022(tmp_path):
    old = tmp_path / "old.folded"
    old.write_text("x 1\n")
    os.chmod(old, 0o644)
    spin = subprocess.Popen([workload("cpu_split"), "10"], stdout=subprocess.DEVNULL)
    try:
        for name in ["new.folded", "new.pb.gz", "new.json", "new.svg", "old.folded"]:
            r = run(["-p", str(spin.pid), "-d", "0.5", "-o", str(tmp_path / name)])
            assert r.returncode == 0, r.stderr
            assert mode(tmp_path / name) == 0o600, (name, oct(mode(tmp_path / name)))
    finally:
        spin.kill()
        spin.wait()
    # an existing 0644 profile was replaced, not rewritten in place with its mode
    assert "x 1" not in old.read_text()


def test_continuous_creates_private_dir(tmp_path):
    d = tmp_path / "profiles"
    err = continuous(d, 3)
    assert mode(d) == 0o700, oct(mode(d))
    names = ours(d)
    assert len(names) >= 3, (os.listdir(d), err)
    for f in names + [MANIFEST]:
        assert mode(d / f) == 0o600, (f, oct(mode(d / f)))
    # a missing parent is not created: that is a typo more often than a wish
    r = run(["--continuous", str(tmp_path / "a" / "b"), "-d", "1"])
    assert r.returncode == 2 and r.stderr.startswith("bpfprof: ")
    assert len(r.stderr.splitlines()) == 1, r.stderr


def test_keep_deletes_only_files_it_wrote(tmp_path):
    d = tmp_path
    # named exactly as bpfprof names its files, older than any it will write
    planted = ["bpfprof-20200101T000000.000Z.pb.gz", "bpfprof-20200101T000001.000Z.pb.gz",
               "bpfprof-20200101T000002.000Z.pb.gz"]
    for f in planted:
        (d / f).write_bytes(b"not yours\n")
    # one of them owned by another user, one listed in a manifest nobody may trust
    os.chown(d / planted[1], 65534, 65534)
    st = os.stat(d / planted[2])
    (d / MANIFEST).write_text(f"{planted[2]} {st.st_ino} {st.st_ctime_ns}\n")
    os.chmod(d / MANIFEST, 0o666)
    err = continuous(d, 6, "--keep", "2")
    assert "ignoring" in err and MANIFEST in err, err
    for f in planted:
        assert (d / f).read_bytes() == b"not yours\n", f
    written = [f for f in ours(d) if f not in planted]
    assert len(written) == 2, (os.listdir(d), err)
    m = re.search(r"continuous: (\d+) intervals, (\d+) files written .*, (\d+) deleted", err)
    assert m and int(m.group(3)) == int(m.group(2)) - 2 and int(m.group(3)) >= 4, err
    # its own manifest replaced the forged one: private, ours, lists what it wrote
    assert mode(d / MANIFEST) == 0o600
    assert sorted(l.split()[0] for l in (d / MANIFEST).read_text().splitlines()) == written

    # a later run deletes the earlier run's files (they are in the manifest), still not
    # the planted ones, and spares a file of ours that someone replaced
    (d / written[0]).unlink()
    (d / written[0]).write_bytes(b"replaced\n")
    err = continuous(d, 3, "--keep", "2")
    for f in planted:
        assert (d / f).read_bytes() == b"not yours\n", f
    assert (d / written[0]).read_bytes() == b"replaced\n"
    assert written[1] not in os.listdir(d)
    assert re.search(r", 1 named like ours but not written by bpfprof left alone", err), err
    assert len([f for f in ours(d) if f not in planted + written]) == 2, os.listdir(d)


def test_output_fifo_refused_at_once(tmp_path):
    fifo = tmp_path / "out.folded"
    os.mkfifo(fifo)
    # before the fix this blocked in open() until killed: the timeout fails the test
    r = run(["-d", "1", "-o", str(fifo)], timeout=20)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfprof: ") and "FIFO" in lines[0], r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_dev_null_written_in_place():
    r = run(["-d", "0.5", "-o", "/dev/null"])
    assert r.returncode == 0, r.stderr
    st = os.lstat("/dev/null")
    assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
