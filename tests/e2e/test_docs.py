# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The option list lives in user/cli.c (getopt table and --help); the man page
and the docs are written by hand. These tests keep them in step: every option
--help defines has a man page entry, and every --option the man page, README
or docs/ name is one bpfprof accepts."""
import glob
import os
import re
import subprocess

from conftest import BPFPROF

ROOT = os.path.join(os.path.dirname(__file__), "../..")
# an option definition line of --help: "  -o, --output PATH" or "      --cpu"
DEF = re.compile(r"^\s{2,}(?:-\w, )?--([a-z][a-z0-9-]*)")
ANY = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])")
SUBCOMMANDS = ["", "dump", "flamegraph"]
# named in prose but belong to other tools (perf, py-spy, pprof, npm, pip, make, ...)
FOREIGN = {"idle", "pgbench", "now", "native", "debug-dump", "no", "bounding-set", "no-new-privs", "js-flags", "perf-basic-prof", "call-graph", "sample_index", "http",
           "no-install-recommends", "offline", "drop", "lines", "list", "top", "traces",
           "tagfocus", "noprofile", "inherit", "user", "group", "reuid", "regid", "caps",
           "clear-groups", "init-groups", "keep-caps", "inh-caps", "ambient-caps",
           "control", "build-id",  # ld -Wl,--build-id=0x..; perf record --control fifo: (docs/design.md, tools/cost.sh)
           "disable-gil"}  # CPython's ./configure (docs/python.md, free-threaded builds)


def help_text(sub):
    args = [BPFPROF] + ([sub] if sub else []) + ["--help"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def defined_options():
    opts = {}
    for sub in SUBCOMMANDS:
        for line in help_text(sub).splitlines():
            m = DEF.match(line)
            if m:
                opts.setdefault(m.group(1), sub or "record")
    return opts


def man_text():
    t = open(os.path.join(ROOT, "man/bpfprof.8")).read()
    t = re.sub(r"\\f[BIRP]", "", t)
    return t.replace("\\-", "-")


def test_every_help_option_has_a_man_entry():
    man = man_text()
    entries = set()
    for block in re.split(r"^\.TP\n", man, flags=re.M)[1:]:
        entries.update(ANY.findall(block.splitlines()[0]))
    missing = sorted(o for o in defined_options() if o not in entries)
    assert not missing, f"options in --help without a man page entry (.TP line): {missing}"


def test_every_option_the_docs_name_exists():
    known = set(defined_options())
    sources = {"man/bpfprof.8": man_text()}
    for path in ["README.md"] + sorted(glob.glob(os.path.join(ROOT, "docs/*.md"))):
        rel = os.path.relpath(os.path.join(ROOT, path), ROOT) if not os.path.isabs(path) else \
            os.path.relpath(path, ROOT)
        sources[rel] = open(os.path.join(ROOT, rel)).read()
    bad = []
    for name, text in sources.items():
        for o in sorted(set(ANY.findall(text)) - known - FOREIGN):
            bad.append(f"{name}: --{o}")
    assert not bad, f"options named in the docs that bpfprof does not define: {bad}"


def test_every_help_option_is_accepted():
    """Each option --help defines is in the getopt table (an unknown one is a usage error)."""
    for opt, sub in defined_options().items():
        # "--opt=x": an option with an argument takes x, one without is refused for
        # the argument; only an option missing from the table reads "unrecognized"
        args = [BPFPROF] + ([sub] if sub != "record" else []) + [f"--{opt}=x", "--help"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=10,
                           stdin=subprocess.DEVNULL)
        assert "unrecognized" not in r.stderr and "unknown option" not in r.stderr, \
            f"--{opt} ({sub}): {r.stderr.strip()}"
