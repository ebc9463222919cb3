# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--alloc is never silently empty (issue 25, findings 2, 3 and 6; issue 26,
items 5 and 6): every process of `-- CMD` is covered, by the in-process sampler
where the loader can preload it (it follows the program's execs, whatever
environment they pass), by uprobes where not, and the summary names any
process covered late or never. The preload path counts what glibc allocates
for the program; both paths agree, thread stacks included.

Ground truth: alloc_early (16 MiB leaked at leak_early), libc_leak (16 MiB at
each of leak_keep, leak_strdup, leak_getline). At --alloc-rate 1 every call is
recorded with weight 1: the values are exact."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BPFPROF, parse_folded, run, workload

MIB = 1 << 20
EARLY = 16 * MIB
ALLOCATORS = {
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
}
SIDROOT = os.environ.get("BPFPROF_SIDROOT", "/var/cache/bpfprof/sid")


def leaked(out, fn="leak_early"):
    return sum(c for f, c in parse_folded(out.read_text()) if fn in f)


def heap_run(tmp_path, cmd, *opts, env=None, timeout=180):
    out = tmp_path / "heap.folded"
    r = run(["-v", "--alloc", "--alloc-rate", "1", *opts, "-o", str(out), "--"] + cmd,
            env=env, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r, out


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("bpfprof: warning: heap:")]


@pytest.mark.parametrize("allocator", sorted(ALLOCATORS))
def test_env_sets_preload(tmp_path, allocator):
    """`-- env LD_PRELOAD=<allocator> ./leak`: env's exec keeps the sampler first
    (was 0 MiB: env replaced LD_PRELOAD and the sampler was gone)."""
    lib = ALLOCATORS[allocator]
    if not os.path.exists(lib):
        pytest.skip(f"{lib} not installed (make deps)")
    r, out = heap_run(tmp_path, ["env", f"LD_PRELOAD={lib}", workload("alloc_early")])
    assert leaked(out) == EARLY, r.stderr
    assert not warnings(r.stderr), r.stderr


@pytest.mark.parametrize("how", [["env", "-i"], ["env", "-u", "LD_PRELOAD"]])
def test_env_drops_preload(tmp_path, how):
    """`env -i`, `env -u LD_PRELOAD`: the sampler goes on into the program (was 0)."""
    r, out = heap_run(tmp_path, how + [workload("alloc_early")])
    assert leaked(out) == EARLY, r.stderr
    assert "1 processes sampled in process" in r.stderr or "2 processes sampled in process" \
        in r.stderr, r.stderr


def test_python_subprocess_empty_env(tmp_path):
    """subprocess.run(..., env={}) (vfork + execve in _posixsubprocess): covered."""
    code = f"import subprocess; subprocess.run([{workload('alloc_early')!r}], env={{}}, check=True)"
    r, out = heap_run(tmp_path, [sys.executable, "-c", code])
    assert leaked(out) == EARLY, r.stderr
    assert not warnings(r.stderr), r.stderr


def static_alloc_early(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "../workloads/alloc_early.c")
    exe = tmp_path / "alloc_early_static"
    c = subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-static",
                        "-I" + os.path.dirname(src), src, "-o", str(exe)],
                       capture_output=True, text=True)
    if c.returncode:
        pytest.skip("no static libc: " + c.stderr[-200:])
    return str(exe)


def test_static_child_of_shell(tmp_path):
    """A static program started by `sh -c` cannot preload anything: it is probed with
    uprobes as soon as it is exec'd (was 0 MiB, nothing said). One that waits a second
    before it allocates (the agent's reaction on a loaded host is well under that) is
    all there; one that allocates at once is all there or named in a warning, never
    silently missing. (Its allocator is its executable, mapped from its exec: the
    probes always come after it, and the summary says its first allocations may be
    missing.)"""
    exe = static_alloc_early(tmp_path)
    r, out = heap_run(tmp_path, ["/bin/sh", "-c", f"{exe} 1000; true"])
    assert leaked(out) == EARLY, r.stderr
    assert "by uprobes instead: alloc_early_sta" in r.stderr, r.stderr
    assert "a static executable" in r.stderr, r.stderr
    r, out = heap_run(tmp_path, ["/bin/sh", "-c", f"{exe}; true"])
    got = leaked(out)
    assert got == EARLY or any("alloc_early_sta" in w for w in warnings(r.stderr)), r.stderr


def test_raw_execve_child(tmp_path):
    """A child exec'd by the execve system call itself (as Go and static programs do)
    with an environment without the sampler: probed with uprobes, all there."""
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"exe = {workload('alloc_early')!r}.encode()\n"
            "argv = (ctypes.c_char_p * 3)(exe, b'1000', None)\n"
            "envp = (ctypes.c_char_p * 2)(b'PATH=/usr/bin:/bin', None)\n"
            "if os.fork() == 0:\n"
            "    libc.syscall(59, exe, argv, envp)\n"
            "    os._exit(127)\n"
            "_, st = os.wait()\n"
            "assert os.waitstatus_to_exitcode(st) == 0\n")
    r, out = heap_run(tmp_path, [sys.executable, "-c", code])
    assert leaked(out) == EARLY, r.stderr
    assert "started without the sampler in its environment" in r.stderr, r.stderr


def test_executable_defining_malloc(tmp_path):
    """A child whose executable defines malloc (its own comes first, the sampler is
    loaded but not called): probed with uprobes on that executable, all there."""
    src = os.path.join(os.path.dirname(__file__), "../workloads")
    exe = tmp_path / "alloc_early_own"
    c = subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-rdynamic", "-I" + src,
                        os.path.join(src, "alloc_early.c"), os.path.join(src, "nop5_alloc.c"),
                        "-o", str(exe)], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    r, out = heap_run(tmp_path, ["/bin/sh", "-c", f"{exe} 1000; true"])
    assert leaked(out) == EARLY, r.stderr
    assert "its executable defines malloc" in r.stderr, r.stderr


@pytest.mark.skipif(not os.path.exists(os.path.join(SIDROOT, ".bpfprof-sidroot-ok")),
                    reason="no Debian sid root (tools/sidroot.sh)")
def test_chroot_python(tmp_path):
    """`-- chroot ROOT python3.14 ...` (was '0 allocation calls': the library's host
    path is not in the root): the sampler reaches it through /proc/self/fd."""
    script = ("import sys\n"
              "def hold(): return [bytearray(4 << 20) for _ in range(8)]\n"
              "x = hold()\nprint('held', len(x))\n")
    cmd = ["unshare", "-m", "sh", "-c",
           f'mount -t proc proc "$0/proc" && exec chroot "$0" python3.14 -c "$1"',
           SIDROOT, script]
    r, out = heap_run(tmp_path, cmd, "--alloc-metric", "peak_space", timeout=300)
    assert "held 8" in r.stdout, r.stdout + r.stderr
    # the 32 MiB held plus the interpreter's own (a few MiB); by total, not by the
    # script's frames (Python 3.14's are issue 24's)
    peak = sum(c for _, c in parse_folded(out.read_text()))
    assert 32 * MIB <= peak <= 40 * MIB, (peak, r.stderr)
    assert "ERROR: ld.so" not in r.stderr, r.stderr
    assert not warnings(r.stderr), r.stderr


@pytest.mark.parametrize("path", ["", "--alloc-uprobes"])
def test_libc_allocations_for_the_program(tmp_path, path):
    """strdup, getline (and fopen) allocate inside libc for the program: counted at the
    function that called them, on both paths (the preload path read 0 for strdup and
    getline), and libc's cached thread stacks on neither (the uprobe path read 8 MiB
    at pthread_create)."""
    opts = [path] if path else []
    r, out = heap_run(tmp_path, [workload("libc_leak")], *opts)
    want = dict(l.split() for l in r.stdout.splitlines())
    for fn in ("leak_keep", "leak_strdup", "leak_getline"):
        assert leaked(out, fn) == int(want[fn]), (fn, r.stdout, r.stderr)
    assert leaked(out, "pthread_create") < 64 * 1024, out.read_text()  # its DTV, not its 8 MiB stack


def test_uprobes_child_preloading_allocator(tmp_path):
    """The uprobe path (--alloc-uprobes) and a child exec'd with LD_PRELOAD=tcmalloc:
    its allocator is probed for it at its exec, before its loader maps it (was 0 MiB:
    found 100 ms later by the side band, after the program had run). Where the agent
    loses that race the summary says so: never silently missing."""
    lib = ALLOCATORS["tcmalloc"]
    if not os.path.exists(lib):
        pytest.skip(f"{lib} not installed (make deps)")
    r, out = heap_run(tmp_path, ["/bin/sh", "-c",
                                 f"LD_PRELOAD={lib} exec {workload('alloc_early')}"],
                      "--alloc-uprobes")
    got = leaked(out)
    assert got == EARLY or any("alloc_early" in w for w in warnings(r.stderr)), r.stderr
    r, out = heap_run(tmp_path, ["/bin/sh", "-c",
                                 f"LD_PRELOAD={lib} exec {workload('alloc_early')} 1000"],
                      "--alloc-uprobes")
    assert leaked(out) == EARLY, r.stderr


def test_rate_not_taken_from_the_targets_environment(tmp_path):
    """A child started with BPFPROF_ALLOC_RATE=1 samples at bpfprof's rate (was: every
    call, 401,000 samples instead of 66, 104,864 MB reported for 12.8 MB); one exec'd
    past the library (a raw execve) at its own rate has its records dropped, counted,
    and is probed with uprobes instead."""
    out = tmp_path / "heap.folded"
    r = run(["-v", "--alloc", "--alloc-metric", "alloc_space", "-o", str(out), "--", "/bin/sh",
             "-c", f"BPFPROF_ALLOC_RATE=1 exec {workload('malloc_loop')} 100000"], timeout=180)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stderr.splitlines() if " allocation calls," in l][-1]
    sampled = int(line.split(" sampled (")[0].split("; ")[-1])
    assert sampled < 200, line  # 12.8 MB at 512 KiB: ~24 expected
    total = sum(c for f, c in parse_folded(out.read_text()) if "main" in f)
    assert total < 4 * 12_800_000, (total, line)
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"exe = {workload('alloc_early')!r}.encode()\n"
            "argv = (ctypes.c_char_p * 3)(exe, b'1000', None)\n"
            f"envp = (ctypes.c_char_p * 3)(b'LD_PRELOAD=' + {os.path.join(os.path.dirname(BPFPROF), 'libbpfprof_heap.so')!r}.encode(), b'BPFPROF_ALLOC_RATE=1', None)\n"
            "if os.fork() == 0:\n"
            "    libc.syscall(59, exe, argv, envp)\n"
            "    os._exit(127)\n"
            "_, st = os.wait()\n"
            "assert os.waitstatus_to_exitcode(st) == 0\n")
    r, out = heap_run(tmp_path, [sys.executable, "-c", code], "--alloc-rate", "65536")
    assert "another sampling rate than bpfprof's" in r.stderr, r.stderr
    got = leaked(out)
    assert abs(got - EARLY) <= 0.15 * EARLY, (got, r.stderr)


def test_preload_path_with_a_space(tmp_path):
    """bpfprof installed under a directory with a space: LD_PRELOAD would split the
    library's path and load 'dir/libbpfprof_heap.so' from the command's working
    directory (a root command running code from a directory a user controls). It goes
    as /proc/self/fd/N instead: nothing of the working directory is loaded, and the
    sampler works."""
    inst = tmp_path / "opt" / "my dir"
    inst.mkdir(parents=True)
    for f in ("bpfprof", "libbpfprof_heap.so"):
        shutil.copy2(os.path.join(os.path.dirname(BPFPROF), f), inst / f)
    cwd = tmp_path / "work"
    (cwd / "dir").mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    planted = cwd / "plant.c"
    planted.write_text('#include <stdio.h>\n__attribute__((constructor)) static void c(void)'
                       f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    c = subprocess.run(["cc", "-shared", "-fPIC", str(planted), "-o",
                        str(cwd / "dir" / "libbpfprof_heap.so")], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    out = tmp_path / "heap.folded"
    r = subprocess.run([str(inst / "bpfprof"), "-v", "--alloc", "--alloc-rate", "1", "-o",
                        str(out), "--", workload("alloc_early")], cwd=cwd, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), "the command loaded a library from its working directory"
    assert "ERROR: ld.so" not in r.stderr, r.stderr
    assert leaked(out) == EARLY, r.stderr


def test_every_call_exact_at_any_number_of_live_blocks(tmp_path):
    """--alloc-rate 1 with 530,000 blocks live at once: more than the in-process set
    held (65,536: 34,466 of 50,000 were untracked, 2.00 MiB reported for 6.10) and more
    than bpfprof's own table of live blocks (524,288, then evicted): in use at exit is
    exact, at each function."""
    n, size = 530000, 16
    churned = (n + 96) // 97  # churn_some frees and allocates every 97th block again
    out = tmp_path / "heap.pb.gz"
    r = run(["-v", "--alloc", "--alloc-rate", "1", "-o", str(out.with_suffix(".folded")), "--",
             workload("many_live"), str(n), str(size)], timeout=600)
    assert r.returncode == 0, r.stderr
    stacks = parse_folded(out.with_suffix(".folded").read_text())
    at = lambda fn: sum(c for f, c in stacks if fn in f)
    assert at("hold_many") == n * size + n * 8 - churned * size, (at("hold_many"), r.stderr)
    assert at("churn_some") == churned * size, r.stderr
    lost = [l for l in r.stderr.splitlines() if l.startswith("bpfprof: heap: lost:")]
    assert not lost or (" 0 blocks untracked" in lost[0] and " 0 oldest blocks evicted" in lost[0]), \
        lost
