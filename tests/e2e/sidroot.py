# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Interpreters that live in another root: Debian sid's python3.13/3.14/3.15
(tools/sidroot.sh) and free-threaded builds from Debian's sources
(tools/pyft.sh), both cached under /var/cache/bpfprof (make test-roots
builds them before the suite; here they are built on first use when
missing, and a root or build that cannot be made is skipped with one line
saying why).

Each is run as a container runs its processes: tools/sidrun.sh chroots into
the root in a private mount namespace (proc, dev, sys, /tmp and this
repository mounted there, nothing left mounted on the host). A test gets a
path to a small shim named like the interpreter (python3.14, python3.14t)
that execs all that, one process throughout, so `bpfprof -- SHIM x.py`,
`-p` of its pid and `comm` checks see the interpreter itself."""
import os
import stat
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
SIDROOT_SH = os.path.join(REPO, "tools/sidroot.sh")
PYFT_SH = os.path.join(REPO, "tools/pyft.sh")
SIDRUN_SH = os.path.join(REPO, "tools/sidrun.sh")

# What the suite runs in the sid root: (id, path in the root)
SID_PYTHONS = [("sid-3.13", "/usr/bin/python3.13"), ("sid-3.14", "/usr/bin/python3.14"),
               ("sid-3.15", "/usr/bin/python3.15")]
FT_VERSIONS = ["3.13", "3.14", "3.15"]

_root = None          # (path, None) or (None, reason)
_ft = {}              # version -> (path in the root, None) or (None, reason)
_shims = None


def _say(msg):
    print(f"sidroot: {msg}", file=sys.stderr, flush=True)


def _last_line(text, default):
    lines = [l for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else default


def root():
    """The sid root's path, or None; built (once, minutes) if missing."""
    global _root
    if _root is None:
        if os.geteuid() != 0:
            _root = (None, "the sid root needs root (debootstrap, chroot)")
        else:
            if not os.path.exists(os.path.join(
                    os.environ.get("BPFPROF_SIDROOT", "/var/cache/bpfprof/sid"),
                    ".bpfprof-sidroot-ok")):
                _say("building the Debian sid root (tools/sidroot.sh; minutes, once)")
            r = subprocess.run([SIDROOT_SH], capture_output=True, text=True)
            path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() \
                else None
            _root = (path, None) if path else \
                (None, "no sid root: " + _last_line(r.stderr, f"tools/sidroot.sh exit {r.returncode}"))
    return _root


def root_skip_reason():
    return root()[1]


def ft(version):
    """(path in the root, None) of the free-threaded build, or (None, why not)."""
    if version not in _ft:
        path, why = root()
        if os.environ.get("BPFPROF_NO_FT") == "1":
            _ft[version] = (None, "free-threaded builds not wanted (BPFPROF_NO_FT=1)")
        elif not path:
            _ft[version] = (None, why)
        else:
            prefix = f"/opt/bpfprof/python{version}t"
            nosource = f"{path}{prefix}.nosource"
            if not os.path.exists(f"{path}{prefix}/.bpfprof-ft-ok") and os.path.exists(nosource):
                # tools/pyft.sh found no source for it: make test-roots tries again
                _ft[version] = (None, _last_line(open(nosource).read(), "no source"))
                return _ft[version]
            if not os.path.exists(f"{path}{prefix}/.bpfprof-ft-ok"):
                _say(f"python{version}t not built yet: tools/pyft.sh {version} "
                     "(~10 min where its source can be had)")
            r = subprocess.run([PYFT_SH, version], capture_output=True, text=True)
            out = r.stdout.strip().splitlines()
            _ft[version] = (out[-1], None) if r.returncode == 0 and out else \
                (None, _last_line(r.stderr, f"tools/pyft.sh {version} exit {r.returncode}"))
    return _ft[version]


def _shim_dir():
    global _shims
    if _shims is None:
        _shims = tempfile.mkdtemp(prefix="bpfprof-sidshims-")
    return _shims


def shim(path_in_root):
    """An executable on the host that runs path_in_root inside the root."""
    rootp = root()[0]
    name = os.path.basename(path_in_root)
    d = os.path.join(_shim_dir(), name)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(f'#!/bin/sh\nexec "{SIDRUN_SH}" "{rootp}" "{path_in_root}" "$@"\n')
    os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def interpreters():
    """[(id, shim path or None, skip reason or None)] for every sid and
    free-threaded interpreter the suite runs."""
    out = []
    path, why = root()
    for pid, inroot in SID_PYTHONS:
        if path and os.access(path + inroot, os.X_OK):
            out.append((pid, shim(inroot), None))
        else:
            out.append((pid, None, why or f"{inroot} is not in the sid root"))
    for v in FT_VERSIONS:
        p, why = ft(v)
        out.append((f"ft-{v}t", shim(p) if p else None, None if p else why))
    return out


def is_free_threaded(python):
    return os.path.basename(python).endswith("t")


def root_path(python):
    """Where a shim's interpreter really is (host path), for tests that open it."""
    with open(python) as f:
        text = f.read()
    parts = text.split('"')
    return parts[3] + parts[5] if len(parts) > 5 else python
