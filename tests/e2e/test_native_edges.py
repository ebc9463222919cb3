# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Native stacks at their edges (issue 28): the vDSO and the loader's entry
frame in processes BPF walks before user space has described them, and
anonymous code the process's description does not hold yet."""
import bisect
import os
import re
import subprocess

import pytest

from conftest import BPFPROF, parse_folded, workload

# user space never describes a process: every sample is walked from what BPF
# keeps itself (test_unwind.py's UNDESCRIBED), as a 2 ms program's are
UNDESCRIBED = {"BPFPROF_TEST_UNDESCRIBED": "1"}


def storm_children(tmp_path, mode_args):
    """`bpfprof -- storm 3 2 MODE_ARGS` with user space describing no process
    (its children are followed): the stacks of storm's children (pid above
    the parent's, which prints its own first), bpfprof's stderr and storm's
    output."""
    out = tmp_path / "storm.folded"
    r = subprocess.run([BPFPROF, "--per-pid", "-F", "999", "-v", "-o", str(out), "--",
                        workload("storm"), "3", "2"] + mode_args, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, **UNDESCRIBED))
    assert r.returncode == 0, r.stderr
    parent = int(r.stdout.split()[1])
    kids = []
    for f, c in parse_folded(out.read_text()):
        m = re.match(r"^storm \[(\d+)\]$", f[0])
        if m and int(m.group(1)) > parent:
            kids.append((f, c))
    return kids, r.stderr, r.stdout


def test_vdso_of_processes_not_described_yet(tmp_path):
    """2 ms processes that spend their time in clock_gettime: BPF finds the
    vDSO at mm->context.vdso and walks it with the table user space built
    for it at start (file_unwind), so their vDSO samples reach main. Before,
    the vDSO was anonymous code to BPF and the vDSO keeps no frame pointer:
    every such sample ended in [missing frames] at __vdso_clock_gettime."""
    kids, err, out = storm_children(tmp_path, ["vdso"])
    vdso = [(f, c) for f, c in kids if any(x.startswith(("__vdso_", "[vdso]")) for x in f)]
    n = sum(c for _, c in vdso)
    reach = sum(c for f, c in vdso if "main" in f and "storm_clock" in f)
    print(out.strip().splitlines()[-1], n, reach)
    assert n > 50, (n, out, err[-2000:])
    assert reach >= 0.9 * n, (reach, n, [f for f, _ in vdso if "main" not in f][:5])


def test_loader_entry_frame_is_not_missing_frames(tmp_path):
    """A short process's start-up runs in the dynamic loader under its _start,
    which has no CFI: its frame is the process's entry (the stack pointer
    at mm->start_stack), not a walk cut short. Before, every such sample
    (a third of a 2 ms program's) had a [missing frames] marker."""
    kids, err, out = storm_children(tmp_path, [])
    dl = [(f, c) for f, c in kids if "_dl_start" in f]
    n = sum(c for _, c in dl)
    missing = sum(c for f, c in dl if "[missing frames]" in f)
    assert n > 30, (n, out, err[-2000:])
    assert missing <= 0.05 * n, (missing, n, [f for f, _ in dl if "[missing frames]" in f][:5])
    assert "unwind: process entry" in err, err


def test_jit_code_made_executable_after_description(tmp_path):
    """A JIT without a perf map that makes new code executable with mprotect
    every 10 ms of CPU and calls through it (anon_jit): the process's
    description lags behind its newest code, so BPF looks the code up
    itself (bpf_find_vma: anonymous, executable) and takes the validated
    frame-pointer step through it. Before, the walk stopped there ("no
    mapping") until user space had caught up: 13-14% of the samples lost
    main on this host."""
    out = tmp_path / "anon_jit.folded"
    r = subprocess.run([BPFPROF, "-F", "999", "-vv", "-o", str(out), "--",
                        workload("anon_jit"), "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    own = [(f, c) for f, c in parse_folded(out.read_text())
           if f[0] == "anon_jit" and "jit_callback" in f]
    n = sum(c for _, c in own)
    reach = sum(c for f, c in own
                if f[f.index("jit_callback") - 2:f.index("jit_callback")] == ["call_jit", "[unknown]"]
                and "main" in f)
    assert n > 300, (n, r.stderr[-2000:])
    assert reach >= 0.98 * n, (reach, n, [f for f, _ in own if "main" not in f][:5])
    m = re.search(r"unwind: anonymous code found by BPF (\d+)", r.stderr)
    assert m and int(m.group(1)) > 0, r.stderr[-2000:]
    # the steps are frame-pointer steps: flagged as such
    assert "unwind: frame-pointer steps" in r.stderr


JSON_SORT = """\
import json, random, sys, time
random.seed(1)
data = [{"k": random.random(), "v": [random.randint(0, 1000) for _ in range(20)]} for _ in range(2000)]
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    d = json.loads(json.dumps(data))
    d.sort(key=lambda x: x["k"])
    sorted(x["v"][3] for x in d)
"""


def fde_starts(path):
    """{start: end} of the functions path's .eh_frame describes (readelf)."""
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                         text=True, check=True).stdout
    return {int(m.group(1), 16): int(m.group(2), 16)
            for m in re.finditer(r" FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out)}


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3.11"), reason="Debian's python3.11")
def test_stripped_python_one_frame_per_function(tmp_path):
    """Debian's /usr/bin/python3.11 keeps only its dynamic symbols: its static
    functions (the eval loop's helpers, json's scanner) have no name. Each
    is one frame, python3.11+0xSTART at its FDE's start, however many
    addresses of it the stacks hold; before, one frame per return address
    (375 distinct frames of a 3 s json/sort loop where 145 functions ran)."""
    script = tmp_path / "json_sort.py"
    script.write_text(JSON_SORT)
    out = tmp_path / "py311.folded"
    r = subprocess.run([BPFPROF, "-F", "499", "-o", str(out), "--", "/usr/bin/python3.11",
                        str(script), "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    starts = fde_starts("/usr/bin/python3.11")
    frames = {x for f, _ in parse_folded(out.read_text()) for x in f
              if x.startswith("python3.11+0x")}
    assert len(frames) > 20, frames
    # an address no FDE covers (.init's _init, run once at start) stays itself
    ranges = sorted(starts.items())
    bounds = [a for a, _ in ranges]

    def inside_not_at_start(a):
        i = bisect.bisect_right(bounds, a) - 1
        return i >= 0 and ranges[i][0] < a < ranges[i][1]
    off = [x for x in frames if inside_not_at_start(int(x.split("+0x")[1], 16))]
    assert not off, (len(off), len(frames), sorted(off)[:10])


STRIPPED_PROG = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static __attribute__((noinline)) uint64_t hidden_spin(uint64_t n)
{
	uint64_t x = 1;

	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + i;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static __attribute__((noinline)) uint64_t hidden_outer(uint64_t n)
{
	return hidden_spin(n) + 1;
}

int main(int argc, char **argv)
{
	double end = cpu_now() + atof(argv[1]);
	uint64_t s = 0;

	while (cpu_now() < end)
		s += hidden_outer(1000000);
	printf("%lu\n", (unsigned long)(s & 1));
	return 0;
}
"""


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stripped_prog(tmp_path):
    """A program stripped of every symbol (no .gnu_debuglink) and its separate
    debug file (objcopy --only-keep-debug) in a directory of its own."""
    src = tmp_path / "prog.c"
    src.write_text(STRIPPED_PROG)
    full, prog, srv = tmp_path / "prog.full", tmp_path / "prog", tmp_path / "srv"
    srv.mkdir()
    subprocess.run(["gcc", "-O2", "-g", "-Wl,--build-id", str(src), "-o", str(full)], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(full), str(srv / "prog.debug")],
                   check=True)
    subprocess.run(["strip", "-s", str(full), "-o", str(prog)], check=True)
    bid = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(
        ["readelf", "-n", str(prog)], capture_output=True, text=True, check=True).stdout).group(1)
    return prog, srv, bid


@pytest.fixture
def debuginfod_server(tmp_path, stripped_prog):
    """Debian's debuginfod on 127.0.0.1 (a free port) over the debug file; its URL,
    once it serves the program's debug file."""
    import shutil
    import time
    import urllib.request
    if not shutil.which("debuginfod"):
        pytest.skip("debuginfod (Debian package debuginfod) not installed")
    _, srv, bid = stripped_prog
    port = free_port()
    p = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", str(tmp_path / "db.sqlite"),
                          str(srv)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/buildid/{bid}/debuginfo", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert p.poll() is None, p.stderr.read().decode()
            assert time.monotonic() < deadline, "debuginfod never served the debug file"
            time.sleep(0.3)
        yield url
    finally:
        p.terminate()
        p.wait(timeout=30)


def hidden_named(stacks):
    """Samples in hidden_spin under hidden_outer (gcc may name its clones .constprop.0)."""
    n = 0
    for f, c in stacks:
        base = [x.split(".")[0] for x in f]
        if "hidden_spin" in base and base[base.index("hidden_spin") - 1] == "hidden_outer":
            n += c
    return n


def test_debuginfod_names_stripped_code(tmp_path, stripped_prog, debuginfod_server):
    """With DEBUGINFOD_URLS, the stripped program's debug file comes from the
    server (fetched on a thread while the program runs, kept in the
    client's cache): its static functions are named. Without it: the FDE
    starts. A later run, the server gone, names them from the cache."""
    prog, _, bid = stripped_prog
    cache = tmp_path / "cache"
    env = dict(os.environ, DEBUGINFOD_URLS=debuginfod_server, DEBUGINFOD_CACHE_PATH=str(cache))

    def once(name, env):
        out = tmp_path / f"{name}.folded"
        r = subprocess.run([BPFPROF, "-F", "499", "-v", "-o", str(out), "--", str(prog), "1"],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        own = [(f, c) for f, c in parse_folded(out.read_text()) if f[0] == "prog"]
        return own, r.stderr

    plain = dict(os.environ)
    plain.pop("DEBUGINFOD_URLS", None)
    own, err = once("plain", plain)
    n = sum(c for _, c in own)
    assert n > 250 and hidden_named(own) == 0, own[:3]
    assert "debuginfod:" not in err
    own, err = once("fetched", env)
    n = sum(c for _, c in own)
    assert hidden_named(own) >= 0.9 * n, (hidden_named(own), n, own[:3], err[-1500:])
    m = re.search(r"debuginfod: (\d+) stripped files asked for, (\d+) debug files received", err)
    assert m and int(m.group(2)) >= 1, err[-1500:]
    assert any(bid in p for p, _, _ in os.walk(cache)), list(os.walk(cache))
    # no server: from the cache
    own, err = once("cached", dict(env, DEBUGINFOD_URLS=f"http://127.0.0.1:{free_port()}"))
    assert hidden_named(own) >= 0.9 * sum(c for _, c in own), (own[:3], err[-1500:])


def test_debuginfod_never_holds_the_run(tmp_path, stripped_prog):
    """A server that accepts and never answers: the recording goes on (the
    fetch is on its own thread), the end waits --debuginfod-wait and says
    so, and the profile is written, the program's functions by FDE."""
    import socket
    import threading
    import time
    prog, _, _ = stripped_prog
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        env = dict(os.environ, DEBUGINFOD_URLS=f"http://127.0.0.1:{srv.getsockname()[1]}",
                   DEBUGINFOD_CACHE_PATH=str(tmp_path / "cache"), DEBUGINFOD_TIMEOUT="600")
        out = tmp_path / "held.folded"
        t0 = time.monotonic()
        r = subprocess.run([BPFPROF, "-F", "499", "--debuginfod-wait", "2", "-o", str(out), "--",
                            str(prog), "2"], capture_output=True, text=True, timeout=300, env=env)
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
    assert r.returncode == 0, r.stderr
    assert re.search(r"warning: \d+ debug files were still coming from debuginfod at the end.*"
                     r"raise --debuginfod-wait \(now 2 s\)", r.stderr), r.stderr
    own = [(f, c) for f, c in parse_folded(out.read_text()) if f[0] == "prog"]
    # 2 s of CPU at 499 Hz: the samples were taken while the fetch hung
    assert sum(c for _, c in own) > 500, own[:3]
    assert any(x.startswith("prog+0x") for f, _ in own for x in f), own[:3]
    # the program's 2 s of CPU, the 2 s wait, start-up and output on a loaded host
    assert took < 60, took
