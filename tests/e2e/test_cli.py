# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The CLI contract: bad values get one stderr line starting 'bpfprof: ', exit 2
(usage) or 1 (runtime), and leave no output file behind."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BPFPROF, record_around, run, summary_line, wait_recording, workload


def free_pid():
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid


def max_rate():
    with open("/proc/sys/kernel/perf_event_max_sample_rate") as f:
        return int(f.read())


BAD = [
    (["-p", str(free_pid())], "pid"),
    (["-p", "abc"], "pid"),
    (["-p", "0"], "pid"),
    (["-F", "0"], "-F"),
    (["-F", "abc"], "-F"),
    (["-F", "-5"], "-F"),
    (["-F", str(max_rate() + 1)], "maximum"),
    (["-d", "-1"], "-d"),
    (["-d", "0"], "-d"),
    (["-d", "soon"], "-d"),
    (["-f", "xml"], "xml"),
    (["--frobnicate"], "--frobnicate"),
    (["-d"], "-d"),
    (["-a", "-p", "1"], "target"),
    (["--no-kernel", "--no-user"], "no frames"),
    (["stray"], "stray"),
    (["--"], "command"),
    (["--unwind", "magic"], "magic"),
    (["--gil", "--no-python"], "--gil"),
]


@pytest.mark.parametrize("args,word", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_usage(tmp_path, args, word):
    out = tmp_path / "x.folded"
    r = run(["-o", str(out), "-d", "1"] + args if args[0] != "stray" else args + ["-o", str(out)])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("bpfprof: ")
    assert word in lines[0]
    assert r.stdout == ""
    assert list(tmp_path.iterdir()) == [], "output or temp file left behind"


@pytest.mark.parametrize("path", ["/nonexistent-dir/x.folded", "/proc/x.folded", "/tmp"])
def test_unwritable_output(path):
    r = run(["-d", "1", "-o", path])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfprof: ") and path in lines[0]


def test_command_not_found(tmp_path):
    out = tmp_path / "x.folded"
    r = run(["-o", str(out), "--", "/nonexistent/program"])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfprof: ") and "/nonexistent/program" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_help_and_version():
    r = run(["--help"])
    assert r.returncode == 0
    for opt in ["-a, --all", "-p, --pid", "-F, --freq", "-d, --duration", "-o, --output",
                "-f, --format", "--per-pid", "--per-thread", "--no-kernel", "--no-user",
                "-v, --verbose", "-q, --quiet", "-V, --version", "EXAMPLES", "-- CMD"]:
        assert opt in r.stdout, opt
    r = run(["-V"])
    assert r.returncode == 0 and r.stdout.startswith("bpfprof ")


def test_unknown_command():
    r = run(["flamgraph"])  # a typo is not taken for record's arguments
    assert r.returncode == 2
    assert r.stderr.startswith("bpfprof: unknown command 'flamgraph'")
    assert len(r.stderr.splitlines()) == 1


def test_option_given_a_value_it_does_not_take():
    # getopt reports "--all=x" like an unknown option; the message names the real fault
    for args, sub in [(["--all=x"], ""), (["dump", "--json=1"], "dump "),
                      (["flamegraph", "--inverted=yes"], "flamegraph ")]:
        r = run(args)
        assert r.returncode == 2, args
        opt = args[-1].split("=")[0]
        assert r.stderr == f"bpfprof: option '{opt}' takes no value (see bpfprof {sub}--help)\n"
    r = run(["--bogus"])
    assert r.returncode == 2 and r.stderr == "bpfprof: unknown option '--bogus' (see bpfprof --help)\n"


def test_pid_run_ends_when_the_process_exits(tmp_path):
    """-p: as perf record -p, the run ends when every process named has exited,
    also while it is a zombie its parent (here, this test) has not reaped."""
    out = tmp_path / "p.folded"
    # it works once the agent records (1 s of wall time from its start ended
    # before a loaded host's agent was up: an empty profile) and for 0.5 s of
    # its CPU time
    t = subprocess.Popen([workload("cpu_split"), "--wait-stdin", "--cpu", "0.5"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    p = None
    try:
        p = subprocess.Popen([BPFPROF, "-p", str(t.pid), "-d", "60", "-F", "499", "-o", str(out)],
                             stderr=subprocess.PIPE, text=True)
        err = wait_recording(p)
        t.stdin.write("go\n")
        t.stdin.close()
        err += p.communicate(timeout=50)[1]
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        t.wait()
    assert p.returncode == 0, err
    secs = float(re.search(r"unresolved, ([\d.]+) s", summary_line(err)).group(1))
    assert secs < 30, err  # ended with the process, not at -d 60
    assert "work_a" in out.read_text()


def test_sigint_writes_complete_output(tmp_path):
    out = tmp_path / "run.folded"

    def work():
        subprocess.run([workload("cpu_split"), "3"], stdout=subprocess.DEVNULL, timeout=30)
    # Ctrl-C once the events are on (before, there would be nothing to write)
    rc, err = record_around(["-a", "-F", "499", "-o", str(out)], work)
    assert rc == 0, err
    text = out.read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert any("work_a" in l for l in lines)
    for l in lines:
        stack, _, n = l.rpartition(" ")
        assert stack and n.isdigit()
    assert [f.name for f in tmp_path.iterdir()] == ["run.folded"]


def cpu_seconds(pid):
    """pid's CPU time so far (user + system), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_sigterm_with_command_stops_and_writes(tmp_path):
    """SIGTERM to bpfprof while its command runs: it stops and writes what it
    has. The signal goes once the command has had 1 s of CPU (~99 samples;
    work_a's share is 0.5), not after a fixed sleep: on a loaded host 2 s of
    wall time gave the command 0.14 s of CPU, 7 samples, none in work_a."""
    out = tmp_path / "run.folded"
    p = subprocess.Popen([BPFPROF, "-o", str(out), "--", workload("cpu_split"), "--cpu", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = ""
    try:
        err = wait_recording(p)
        pid = int(p.stdout.readline().split()[1])  # "pid N", once it runs
        deadline = time.monotonic() + 120
        while cpu_seconds(pid) < 1.0:
            assert time.monotonic() < deadline, f"cpu_split had no 1 s of CPU in 120 s\n{err}"
            time.sleep(0.1)
        p.terminate()
        err += p.communicate(timeout=60)[1]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # the output is complete; bpfprof passed SIGTERM on, and exits with the command's status
    assert p.returncode == 128 + signal.SIGTERM, err
    text = out.read_text()
    samples = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines())
    assert samples >= 50 and "work_a" in text, f"{samples} samples\n{err}\n{text[:2000]}"


READY = re.compile(r"bpfprof: recording (.+) \((\d+) CPUs, (\d+) probes\); Ctrl-C to stop")


def ready_lines(stderr):
    return [(i, READY.fullmatch(l)) for i, l in enumerate(stderr.splitlines())
            if l.startswith("bpfprof: recording ")]


def test_ready_line_before_the_command_runs(tmp_path):
    """Once every event and probe is attached: one line naming what is
    recorded; the command is released only after it (its own stderr line
    comes later in the same pipe)."""
    out = tmp_path / "x.folded"
    r = run(["--cpu", "--alloc", "-o", str(out), "--", "sh", "-c", "echo child-started >&2"])
    assert r.returncode == 0, r.stderr
    ready = ready_lines(r.stderr)
    assert len(ready) == 1 and ready[0][1], r.stderr
    i, m = ready[0]
    assert m.group(1) == "cpu at 99 Hz, heap of 'sh'", m.group(0)
    assert int(m.group(2)) == os.cpu_count()
    assert int(m.group(3)) > 0, "the malloc family of the held child's libc is probed"
    assert i < r.stderr.splitlines().index("child-started"), r.stderr


def test_ready_line_whole_machine_and_quiet(tmp_path):
    out = tmp_path / "x.folded"
    r = run(["-a", "-F", "19", "-d", "0.5", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    ready = ready_lines(r.stderr)
    assert len(ready) == 1 and ready[0][1], r.stderr
    assert ready[0][1].group(1) == "cpu at 19 Hz of every process for 0.5 s"
    assert ready[0][1].group(3) == "0"
    r = run(["-q", "-a", "-d", "0.5", "-o", str(out)])
    assert r.returncode == 0 and ready_lines(r.stderr) == [], r.stderr
