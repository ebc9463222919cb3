# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The _Py_DebugOffsets layouts bpfprof knows (user/python/pyoffsets.c: each
version's block as the list of its members' names, in order) are the
interpreters' own: every header that declares the struct here (Debian sid's
python3.13/3.14/3.15-dev, pyenv's 3.13, the free-threaded builds) is parsed
and its member list compared, word for word, with the one for its version.
A version whose header is not here is skipped saying so."""
import glob
import os
import re

import pytest

import sidroot

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "../.."))
PYOFFSETS = os.path.join(ROOT, "user/python/pyoffsets.c")


def header_members(path):
    """The members of struct _Py_DebugOffsets as a header declares them,
    'group.member' for those in a nested struct."""
    s = open(path).read()
    m = re.search(r"typedef struct _Py_DebugOffsets \{(.*?)\n\} _Py_DebugOffsets;", s, re.S)
    assert m, f"{path}: no struct _Py_DebugOffsets"
    body = re.sub(r"//[^\n]*", "", m.group(1))
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, pending, depth = [], [], 0
    for tok in re.finditer(r"struct\s*\w*\s*\{|\}\s*(\w+)\s*;|(?:char|uint64_t)\s+(\w+)", body):
        t = tok.group(0)
        if t.startswith("struct"):
            depth += 1
            pending = []
        elif t.startswith("}"):
            depth -= 1
            out += [f"{tok.group(1)}.{f}" for f in pending]
            pending = []
        elif depth:
            pending.append(tok.group(2))
        else:
            out.append(tok.group(2))
    return out


def known_layouts():
    """minor -> member list, from pyoffsets.c's dbg_3XX arrays."""
    src = open(PYOFFSETS).read()
    out = {}
    for m in re.finditer(r"static const char \*const dbg_3(\d+)\[\] = \{(.*?)\};", src, re.S):
        out[int(m.group(1))] = re.findall(r'"([^"]+)"', m.group(2))
    return out


def headers():
    """(label, minor, path) of every header declaring the block that is here."""
    found = []
    roots = [("pyenv", p) for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.1*/include"))]
    path, _ = sidroot.root()
    if path:
        roots.append(("sid", os.path.join(path, "usr/include")))
        roots += [("ft", p) for p in glob.glob(os.path.join(path, "opt/bpfprof/*/include"))]
    for label, inc in roots:
        for d in glob.glob(os.path.join(inc, "python3.*")):
            m = re.match(r"python3\.(\d+)t?$", os.path.basename(d))
            if not m or int(m.group(1)) < 13:
                continue
            for name in ("pycore_debug_offsets.h", "pycore_runtime.h"):
                h = os.path.join(d, "internal", name)
                if os.path.exists(h) and "typedef struct _Py_DebugOffsets" in open(h).read():
                    found.append((f"{label}-{os.path.basename(d)}", int(m.group(1)), h))
                    break
    return found


def test_every_known_version_has_a_header_here():
    have = {minor for _, minor, _ in headers()}
    missing = sorted(set(known_layouts()) - have)
    if missing:
        pytest.skip(f"no header here for 3.{missing[0]} (make test-roots builds the sid root)")


@pytest.mark.parametrize("label,minor,path", headers() or [("none", 0, None)])
def test_layout_is_the_headers(label, minor, path):
    if not path:
        pytest.skip("no CPython 3.13+ header here (make test-roots builds the sid root)")
    known = known_layouts()
    members = header_members(path)
    if minor not in known:
        # newer than any we know: decoded with the newest, which must be a prefix-compatible guess
        pytest.skip(f"3.{minor} is newer than the layouts bpfprof knows (decoded with "
                    f"3.{max(known)}'s)")
    assert members == known[minor], (label, [
        (i, a, b) for i, (a, b) in enumerate(zip(members, known[minor])) if a != b][:5],
        len(members), len(known[minor]))
