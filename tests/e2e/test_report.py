# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What a run tells its user on stderr and by its exit status (issue 27):
after the ready line at most three lines (samples, what was written where
and how to open it), then one 'bpfprof: warning:' line per problem that
changes the answer, each naming its remedy, forced here one by one; -v for
the whole account; permission errors naming every missing capability; and
with -- CMD, CMD's own exit status, as time(1) gives it."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import BPFPROF, pyenv_pythons, run, wait_recording, workload

HERE = os.path.dirname(os.path.abspath(__file__))
NOCFI_PY = os.path.join(HERE, "../workloads/py/ctypes_nocfi.py")
MANY = os.path.join(os.path.dirname(workload("many_libs")), "many")
SPIN_2S = "import time\nt = time.time()\nwhile time.time() - t < 2: sum(range(1000))"
READY = re.compile(r"^bpfprof: recording .*; Ctrl-C to stop$")


def after_ready(stderr):
    lines = stderr.splitlines()
    ready = [i for i, l in enumerate(lines) if READY.match(l)]
    assert ready, stderr
    return lines[ready[0] + 1:]


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("bpfprof: warning: ")]


def python_with_symbols():
    """An interpreter whose frames all have names (pyenv's build: symbols, CFI)."""
    found = pyenv_pythons()
    if not found:
        pytest.skip("no pyenv interpreter (Debian's python3 is stripped: its frames are unnamed)")
    return found[-1][1]


def test_python_run_says_three_lines_at_most(tmp_path):
    """The issue's run: a 2-second `-- python3 -c ...`. Nothing is wrong with it,
    so after the ready line come the samples and what was written, no more
    (before: 11 lines of counters)."""
    out = tmp_path / "run.pb.gz"
    r = run(["-o", str(out), "--", python_with_symbols(), "-c", SPIN_2S], timeout=120)
    assert r.returncode == 0, r.stderr
    lines = after_ready(r.stderr)
    assert 1 <= len(lines) <= 3, r.stderr
    assert not warnings(r.stderr), r.stderr
    assert re.match(r"^bpfprof: \d+ samples, 0 lost, 1 process, [\d.]+% frames unresolved, "
                    r"[\d.]+ s$", lines[0]), lines
    assert lines[1] == f"bpfprof: wrote {out} (pprof): go tool pprof -http : {out}", lines
    assert out.stat().st_size > 0


def test_verbose_gives_the_account(tmp_path):
    out = tmp_path / "run.folded"
    r = run(["-v", "-o", str(out), "--", python_with_symbols(), "-c", SPIN_2S], timeout=120)
    assert r.returncode == 0, r.stderr
    for what in ("lost: ring buffer full 0", "cpu time: ", "python: 1 interpreters",
                 "counters: ", "cost: start-up"):
        assert what in r.stderr, (what, r.stderr)


@pytest.mark.parametrize("name,hint", [
    ("run.folded", "bpfprof flamegraph {p} -o {d}/run.svg (or flamegraph.pl {p} > {d}/run.svg)"),
    ("run.svg", "open it in a web browser"),
    ("run.json", "open it in https://ui.perfetto.dev or chrome://tracing"),
    ("my run.pb.gz", "go tool pprof -http : '{p}'"),
])
def test_says_how_to_open_what_it_wrote(tmp_path, name, hint):
    out = tmp_path / name
    r = run(["-F", "499", "-o", str(out), "--", workload("cpu_split"), "0.3"])
    assert r.returncode == 0, r.stderr
    kind = {"folded": "folded stacks", "svg": "flame graph", "json": "Chrome trace",
            "gz": "pprof"}[name.rsplit(".", 1)[1]]
    line = f"bpfprof: wrote {out} ({kind}): " + hint.format(p=out, d=tmp_path)
    assert line in r.stderr.splitlines(), r.stderr


def test_stdout_redirected_to_a_file_is_named(tmp_path):
    out = tmp_path / "run.folded"
    with open(out, "w") as f:
        r = subprocess.run([BPFPROF, "-F", "499", "--", workload("cpu_split"), "0.3"],
                           stdout=f, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"bpfprof: wrote {out} (folded stacks): bpfprof flamegraph {out}" in r.stderr


def test_quiet_says_nothing(tmp_path):
    r = run(["-q", "-o", str(tmp_path / "x.folded"), "--", "sh", "-c", "exit 0"])
    assert r.returncode == 0 and r.stderr == "", r.stderr


# --- each warning, its condition forced ---

def test_warns_of_lost_samples_with_the_remedy(tmp_path):
    """A 1 MiB ring buffer and an agent that stops reading (SIGSTOP, as a
    starved agent would): samples are lost, the warning says how many and
    names -F and --ring-mb."""
    out = tmp_path / "run.folded"
    p = subprocess.Popen([BPFPROF, "-F", "4999", "--ring-mb", "1", "-o", str(out), "--",
                          workload("deep_recursion"), "60", "10"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = wait_recording(p)
    time.sleep(0.5)
    # 60 frames, ~600 bytes a sample: 1 MiB is ~1700 samples, 0.35 s of one CPU at
    # 4999 Hz, 2 s at a sixth of one (a load of 12 on two CPUs): the 6 s stop is
    # three times that
    p.send_signal(signal.SIGSTOP)
    time.sleep(6)
    p.send_signal(signal.SIGCONT)
    _, rest = p.communicate(timeout=120)
    err += rest
    assert p.returncode == 0, err
    w = [l for l in warnings(err) if "were lost" in l]
    assert len(w) == 1, err
    assert re.match(r"bpfprof: warning: [\d.]+% of samples \(\d+ of \d+\) were lost: they came "
                    r"faster than bpfprof read them: lower -F \(now 4999 Hz\) or raise "
                    r"--ring-mb \(now 1\)$", w[0]), w[0]
    assert int(re.search(r"^bpfprof: \d+ samples, (\d+) lost", err, re.M).group(1)) > 0, err


def test_warns_of_missing_frames_with_their_cause(tmp_path):
    """Python calls a C library with neither CFI nor frame pointers: most
    stacks stop there; the warning names the library and how to rebuild it."""
    out = tmp_path / "nc.folded"
    r = run(["-F", "999", "-o", str(out), "--", "python3", NOCFI_PY, workload("libnocfi.so"),
             "2"], timeout=120)
    assert r.returncode == 0, r.stderr
    w = [l for l in warnings(r.stderr) if "[missing frames]" in l]
    assert len(w) == 1, r.stderr
    assert re.match(r"bpfprof: warning: [\d.]+% of samples \(\d+ of \d+\) have \[missing "
                    r"frames\] where the stack walk stopped: most stopped in "
                    + re.escape(workload("libnocfi.so"))
                    + r", which has neither unwind tables nor frame pointers: rebuild it with "
                    r"-fno-omit-frame-pointer or -fasynchronous-unwind-tables$", w[0]), w[0]
    pct = float(re.search(r"([\d.]+)% of samples", w[0]).group(1))
    assert pct > 50, w[0]


def test_warns_when_unwind_mem_is_short(tmp_path):
    """Twelve libraries of 14,000 rows each do not fit in --unwind-mem 1m
    (131,072 rows): the files left out are walked by frame pointers, and the
    warning gives the size that fits."""
    out = tmp_path / "run.folded"
    r = run(["-F", "999", "--unwind-mem", "1m", "--unwind-cache", "off", "-o", str(out), "--",
             workload("many_libs"), "--cpu", MANY, "0", "12", "1", "1.5"], timeout=120)
    assert r.returncode == 0, r.stderr
    w = [l for l in warnings(r.stderr) if "--unwind-mem" in l]
    assert len(w) == 1, r.stderr
    assert re.search(r"--unwind-mem is 1 MiB: raise it to --unwind-mem \d+M$", w[0]), w[0]


def test_warns_of_unnamed_frames_naming_the_file(tmp_path):
    """A stripped binary: most of its frames have no name; the warning names
    it and what gives it names."""
    out = tmp_path / "run.folded"
    prog = workload("cpu_split_stripped")
    r = run(["-F", "999", "-o", str(out), "--", prog, "--cpu", "1"], timeout=120)
    assert r.returncode == 0, r.stderr
    w = [l for l in warnings(r.stderr) if "have no name" in l]
    assert len(w) == 1, r.stderr
    assert f"most of them in {prog}: install its debug symbols" in w[0], w[0]


def test_warns_when_nothing_was_sampled(tmp_path):
    """-p a process that sleeps through the run: nothing to sample, and the
    user is told so rather than handed an empty file in silence."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.3)  # past its exec
        r = run(["-p", str(sleeper.pid), "-d", "1", "-o", str(tmp_path / "x.folded")])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert r.returncode == 0, r.stderr
    lines = after_ready(r.stderr)
    assert f"bpfprof: wrote {tmp_path}/x.folded (folded stacks, empty)" in lines, r.stderr
    w = warnings(r.stderr)
    assert w == ["bpfprof: warning: no CPU samples: the processes -p names did not run on a "
                 "CPU while recording: record for longer (-d) or more often (-F, now 99 Hz)"], \
        r.stderr


# --- permission errors: every missing capability, in the user's words ---

def setpriv_run(caps, args):
    """bpfprof as root with only caps in its bounding set (so also in its effective set)."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) not installed")
    return subprocess.run(["setpriv", "--bounding-set", "-all" + "".join(",+" + c for c in caps),
                           "--", BPFPROF] + args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("caps,missing", [
    ([], "CAP_BPF (to load its BPF programs and maps) and CAP_PERFMON (to sample every CPU "
         "and attach probes): run it as root or grant them"),
    # issue 26: with CAP_PERFMON kept the error said "needs root or CAP_PERFMON"
    (["perfmon"], "CAP_BPF (to load its BPF programs and maps): run it as root or grant it"),
    (["bpf"], "CAP_PERFMON (to sample every CPU and attach probes): run it as root or grant it"),
])
def test_permission_error_names_every_missing_capability(caps, missing):
    r = setpriv_run(caps, ["-d", "1", "-o", "/dev/null"])
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfprof: cannot "), r.stderr
    assert lines[0].endswith(": bpfprof lacks " + missing), r.stderr
    assert "side-band" not in r.stderr and "side band" not in r.stderr, r.stderr


def test_no_kernel_symbols_names_cap_syslog(tmp_path):
    """With CAP_BPF and CAP_PERFMON only, the run works; /proc/kallsyms shows
    zeros without CAP_SYSLOG (kptr_restrict 1, or 0 with perf_event_paranoid
    above 1: the kernel's kallsyms_show_value()), and the warning says so."""
    with open("/proc/sys/kernel/kptr_restrict") as f:
        restrict = int(f.read())
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    if restrict >= 2 or (restrict == 0 and paranoid <= 1):
        pytest.skip(f"kptr_restrict {restrict}, perf_event_paranoid {paranoid}: CAP_SYSLOG "
                    "changes nothing")
    r = setpriv_run(["bpf", "perfmon"], ["-F", "999", "-o", str(tmp_path / "x.folded"), "--",
                                         workload("syscall_heavy"), "1"])
    assert r.returncode == 0, r.stderr
    w = [l for l in warnings(r.stderr) if "kernel frames" in l]
    assert w and w[0].endswith("bpfprof lacks CAP_SYSLOG (to read kernel symbols' addresses): run "
                               "it as root or grant it"), r.stderr


# --- -- CMD's exit status is bpfprof's, as time(1) does ---

@pytest.mark.parametrize("cmd,status", [
    (["sh", "-c", "exit 0"], 0),
    (["false"], 1),
    (["sh", "-c", "exit 7"], 7),
    (["sh", "-c", "kill -9 $$"], 128 + 9),
    (["sh", "-c", "kill -TERM $$"], 128 + 15),
])
def test_exit_status_is_the_commands(tmp_path, cmd, status):
    out = tmp_path / "x.folded"
    r = run(["-o", str(out), "--"] + cmd)
    assert r.returncode == status, r.stderr
    assert out.exists(), r.stderr  # the profile is written all the same
    if status:
        word = "exited with status" if status < 128 else "killed by signal"
        n = status if status < 128 else status - 128
        assert f"bpfprof: command '{cmd[0]}' {word} {n}" in r.stderr, r.stderr


def test_exit_status_bpfprof_failure_and_usage(tmp_path):
    # bad usage: 2, whatever the command would have said
    assert run(["--ring-mb", "3", "--", "sh", "-c", "exit 7"]).returncode == 2
    assert run(["-o", str(tmp_path / "x.folded"), "--", "/nonexistent/cmd"]).returncode == 2
    # bpfprof's own failure (no CAP_BPF): 1, and the command never ran
    marker = tmp_path / "ran"
    r = setpriv_run(["perfmon"], ["-o", "/dev/null", "--", "sh", "-c", f"touch {marker}; exit 7"])
    assert r.returncode == 1, r.stderr
    assert not marker.exists()
