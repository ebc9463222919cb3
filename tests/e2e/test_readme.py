# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The README's two commands, as a new user on a fresh Debian 12 meets them.

The cheap checks run always: the first command needs nothing the fresh
machine lacks before it installs it, `make deps` stays small, and
`make test` reports every step. The real thing (tools/minbase.sh: the
first command in a copy of a minbase debootstrap root, with this tree as
`git archive` gives it) takes minutes and the Debian mirror, so it is
opt-in: BPFPROF_TEST_README=1 (2: the second command, the whole suite, too),
or `make check-readme`."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
MINBASE = os.path.join(ROOT, "tools/minbase.sh")
DEPS = os.path.join(ROOT, "tools/install-deps.sh")
# a folded line: frames, a space, a count
FOLDED = re.compile(r"^\S.*? \d+$")


def readme_commands():
    """The ```sh blocks under '## Two commands', as tools/minbase.sh reads them."""
    blocks, cur, sec = [], None, False
    for line in open(os.path.join(ROOT, "README.md")).read().splitlines():
        if line.startswith("## "):
            sec = line.startswith("## Two commands")
        elif sec and line == "```sh":
            cur = []
        elif sec and cur is not None and line == "```":
            blocks.append("\n".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def deps(*groups):
    r = subprocess.run([DEPS, "--list", *groups], capture_output=True, text=True, check=True)
    return set(r.stdout.split())


def test_first_command_needs_only_what_a_fresh_debian_has():
    """A minbase Debian 12 has bash and apt, not make, git or a compiler: the
    first command starts with the script that installs them."""
    cmds = readme_commands()
    assert len(cmds) == 2, cmds
    first, second = cmds
    assert first.startswith("./tools/install-deps.sh && make "), first
    assert os.access(DEPS, os.X_OK)
    assert open(DEPS).readline() == "#!/usr/bin/env bash\n"
    assert "build/bpfprof -a " in first and "make" in deps()
    assert second == "make test"


def test_make_deps_is_what_building_and_running_need():
    """make deps: no test or benchmark packages (they were 675 MB of 'make
    deps' on a fresh root); make test-deps and make bench-deps add theirs."""
    build, test, bench = deps(), deps("test"), deps("bench")
    heavy = {"chromium", "golang-go", "nodejs", "python3-torch", "postgresql", "bpfcc-tools",
             "linux-perf", "heaptrack", "libc6-dbg", "python3-pytest", "libcmocka-dev", "tmux"}
    assert not build & heavy, build & heavy
    assert build < test and build < bench
    assert {"tmux", "python3-pytest", "libcmocka-dev", "chromium", "debootstrap"} <= test
    assert {"linux-perf", "python3-torch", "postgresql"} <= bench
    assert not (test - build) & (bench - build), "a package in both test and bench"


def test_make_test_and_bench_install_their_packages():
    for target, group in (("test", "test"), ("bench", "bench")):
        r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "-n", target], capture_output=True, text=True,
                           env={**os.environ, "MAKEFLAGS": ""})
        assert r.stdout.splitlines()[0] == f"tools/install-deps.sh {group}", r.stdout[:500]


def test_make_test_runs_every_step_and_reports_all(tmp_path):
    """A failing step (e2e) still leaves the next (the fuzzers) their run; the
    last line gives every result and the status is non-zero."""
    mk = tmp_path / "steps.mk"
    mk.write_text("step_fail:\n\t@echo ran-fail; false\nstep_pass:\n\t@echo ran-pass\n")
    r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "test",
                        "TEST_STEPS=step_fail step_pass"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "MAKEFILES": str(mk), "MAKEFLAGS": ""})
    out = r.stdout.splitlines()
    assert r.returncode != 0, r.stdout + r.stderr
    assert "ran-fail" in out and "ran-pass" in out, r.stdout + r.stderr
    assert re.fullmatch(r"make test: step_fail FAILED \(\d+ s\), step_pass passed \(\d+ s\)",
                        out[-1]), r.stdout + r.stderr


@pytest.mark.skipif(os.environ.get("BPFPROF_TEST_README", "0") not in ("1", "2"),
                    reason="opt-in (minutes, the Debian mirror): BPFPROF_TEST_README=1, "
                           "or make check-readme")
def test_readme_in_a_minbase_debian_root():
    """The first command in a fresh minbase bookworm root: from the tarball to
    a profile; with BPFPROF_TEST_README=2 the second (make test) as well."""
    args = [MINBASE] + (["--test"] if os.environ["BPFPROF_TEST_README"] == "2" else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=4 * 3600)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-6000:]
    # head -3 machine.folded: whole-machine stacks, the profiler among them
    assert sum(1 for l in r.stdout.splitlines() if FOLDED.match(l)) >= 3, log[-6000:]
    assert re.search(r"minbase: \[first\] exit 0 after \d+ s", r.stdout), log[-6000:]
    print("\n".join(l for l in r.stdout.splitlines() if l.startswith("minbase: ")))
