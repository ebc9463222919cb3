#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Heap profiling against its peers, section 7c of `make bench` (as root).

Accuracy, one program at a time, bpfprof's estimate against the peer's figure:
  C programs (tests/workloads: churn_hold, libc_leak, many_live) against
  heaptrack: peak heap, total allocated (heaptrack's size histogram), leaked;
  bpfprof at the default rate and at --alloc-rate 1.
  Python (tools/heap_py_work.py in the Debian sid root's python3.14,
  tools/sidroot.sh) against memray 1.20 (the same interpreter): peak, total
  allocated, and what was held when the script ended (memray's leaked
  records, bpfprof's finalize_space: in use when the interpreter began to
  shut down).

Cost, as ratios of runs interleaved in rounds (medians):
  malloc_loop (64-byte malloc/free pairs, its loop thread's CPU time) alone,
  under `bpfprof --alloc -p` (the sampler injected), `bpfprof --alloc -p
  --alloc-uprobes` (a uprobe per call), memleak-bpfcc -p and heaptrack -p (gdb
  injection); `bpfprof --alloc -- CMD` (the in-process path) beside them.
  A PostgreSQL backend (pgbench -c 1, TPC-B-like) alone, under
  `bpfprof --alloc -p BACKEND` (with and without --alloc-uprobes) and
  memleak-bpfcc -p: transactions per
  second while attached.

Environment: BPFPROF, WORKLOADS (default: build/ of this checkout),
HEAP_ROUNDS (3), HEAP_PG_SECS (45: each pgbench run), BPFPROF_SIDROOT (default /var/cache/bpfprof/sid; the Python
part is skipped, saying so, without it). Prints tables; exits 1 if a run
failed.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BPFPROF = os.environ.get("BPFPROF", os.path.join(ROOT, "build/bpfprof"))
WORKLOADS = os.environ.get("WORKLOADS", os.path.join(ROOT, "build/workloads"))
ROUNDS = int(os.environ.get("HEAP_ROUNDS", "3"))
PG_SECS = int(os.environ.get("HEAP_PG_SECS", "45"))  # each pgbench run
SIDROOT = os.environ.get("BPFPROF_SIDROOT", "/var/cache/bpfprof/sid")
MIB = 1 << 20
failed = []


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def bpfprof_heap(cmd, rate=None, cwd=None):
    """(allocated, in use at the end, peak, finalize) bytes from bpfprof's -v lines."""
    args = [BPFPROF, "-v", "--alloc", "-o", os.path.join(tmp, "b.pb.gz")]
    if rate:
        args += ["--alloc-rate", rate]
    r = sh(args + ["--"] + cmd, cwd=cwd, timeout=900)
    m = re.search(r"estimated ([\d.]+) MiB allocated, ([\d.]+) MiB in .*; peak ([\d.]+) MiB in use",
                  r.stderr)
    if r.returncode or not m:
        failed.append(" ".join(cmd))
        print(f"  bpfprof failed on {cmd}: {r.stderr[-500:]}", file=sys.stderr)
        return None
    f = re.search(r"heap: ([\d.]+) MiB in use when \d+ Python processes entered", r.stderr)
    vals = [float(x) * MIB for x in m.groups()]
    return vals + [float(f.group(1)) * MIB if f else 0.0]


SI = {"": 1, "B": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def si(text):
    m = re.match(r"([\d.]+)([KMGT]?)", text)
    return float(m.group(1)) * SI[m.group(2)]


def heaptrack(cmd):
    """(allocated, leaked, peak) bytes: heaptrack run, heaptrack_print."""
    out = os.path.join(tmp, "ht")
    for f in os.listdir(tmp):
        if f.startswith("ht."):
            os.unlink(os.path.join(tmp, f))
    r = sh(["heaptrack", "-o", out] + cmd, timeout=900)
    data = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("ht.")]
    if r.returncode or not data:
        failed.append("heaptrack " + " ".join(cmd))
        return None
    hist = os.path.join(tmp, "hist.txt")
    p = sh(["heaptrack_print", "-f", data[0], "-H", hist], timeout=900)
    peak = re.search(r"peak heap memory consumption: (\S+)", p.stdout)
    leak = re.search(r"total memory leaked: (\S+)", p.stdout)
    total = 0
    with open(hist) as f:  # "SIZE COUNT" per line
        for line in f:
            size, count = line.split()[:2]
            total += int(size) * int(count)
    return [total, si(leak.group(1)), si(peak.group(1))]


def pct(ours, peer):
    return f"{100.0 * (ours - peer) / peer:+.1f}%" if peer else "n/a"


def accuracy_c():
    print("heap vs heaptrack (C; MiB; bpfprof's difference from heaptrack's figure; bpfprof at "
          "the default rate: the mean of 3 runs)")
    print(f"  {'program':<28} {'value':<10} {'heaptrack':>10} {'bpfprof':>10} {'diff':>8} "
          f"{'rate 1':>10} {'diff':>8}")
    progs = [("churn_hold 100 64 300000", [os.path.join(WORKLOADS, "churn_hold"), "100", "64",
                                           "300000"]),
             ("libc_leak", [os.path.join(WORKLOADS, "libc_leak")]),
             ("many_live 200000 64", [os.path.join(WORKLOADS, "many_live"), "200000", "64"])]
    for name, cmd in progs:
        ht = heaptrack(cmd)
        runs = [bpfprof_heap(cmd) for _ in range(3)]  # sampled: the mean of 3 runs
        b1 = bpfprof_heap(cmd, rate="1")
        if not (ht and all(runs) and b1):
            continue
        bd = [statistics.mean(v) for v in zip(*runs)]
        # bpfprof (allocated, in use, peak) against heaptrack (allocated, leaked, peak)
        for label, i, j in (("total", 0, 0), ("leaked", 1, 1), ("peak", 2, 2)):
            print(f"  {name:<28} {label:<10} {ht[j] / MIB:>10.1f} {bd[i] / MIB:>10.1f} "
                  f"{pct(bd[i], ht[j]):>8} {b1[i] / MIB:>10.1f} {pct(b1[i], ht[j]):>8}")


def in_root(cmd):
    """cmd run in the sid root with our own /proc mount (no other session's mounts)."""
    return ["unshare", "-m", "sh", "-c", 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"',
            SIDROOT] + cmd


def accuracy_python():
    if not os.path.exists(os.path.join(SIDROOT, ".bpfprof-sidroot-ok")):
        print("heap vs memray: skipped, no Debian sid root (tools/sidroot.sh)")
        return
    work = tempfile.mkdtemp(dir=os.path.join(SIDROOT, "tmp"), prefix="bench-heap.")
    inner = "/tmp/" + os.path.basename(work)
    try:
        shutil.copy(os.path.join(ROOT, "tools/heap_py_work.py"), work)
        script = inner + "/heap_py_work.py"
        mr = sh(in_root(["sh", "-c", f"cd {inner} && memray run -q -o out.bin heap_py_work.py "
                                     f">/dev/null && memray stats --json -o st.json out.bin "
                                     f">/dev/null"]), timeout=900)
        rd = sh(in_root(["python3.14", "-c",
                         "import json, memray\n"
                         f"r = memray.FileReader('{inner}/out.bin')\n"
                         "leak = sum(a.size for a in r.get_leaked_allocation_records(merge_threads=True))\n"
                         f"st = json.load(open('{inner}/st.json'))\n"
                         "print(json.dumps([st['total_bytes_allocated'], leak, r.metadata.peak_memory]))"]),
                timeout=900)
        if mr.returncode or rd.returncode:
            failed.append("memray")
            print(f"  memray failed: {mr.stderr[-300:]} {rd.stderr[-300:]}", file=sys.stderr)
            return
        peer = json.loads(rd.stdout.strip().splitlines()[-1])
        ours = bpfprof_heap(in_root(["python3.14", script]))
        ours1 = bpfprof_heap(in_root(["python3.14", script]), rate="1")
        # memray tracks from the script's start; bpfprof from the exec: the interpreter's own
        # start-up (imports, ~4 MiB still held) is measured alone and taken off
        base = bpfprof_heap(in_root(["python3.14", "-c", "pass"]), rate="1")
        if not ours or not ours1 or not base:
            return
        for o in (ours, ours1):
            o[2] -= base[3]  # the peak, less what the interpreter holds of its own
            o[3] -= base[3]  # held at Py_FinalizeEx, the same
        print(f"heap vs memray 1.20 (python3.14, Debian sid root, tools/heap_py_work.py; MiB; "
              f"bpfprof less the {base[3] / MIB:.1f} MiB the interpreter holds of its own, "
              f"`python3.14 -c pass`)")
        print(f"  {'value':<34} {'memray':>10} {'bpfprof':>10} {'diff':>8} {'rate 1':>10} "
              f"{'diff':>8}")
        # bpfprof: allocated, finalize_space (held when the script ended), peak
        for label, i, j in (("total allocated", 0, 0),
                            ("held at the script's end (leaked)", 3, 1),
                            ("peak", 2, 2)):
            print(f"  {label:<34} {peer[j] / MIB:>10.1f} {ours[i] / MIB:>10.1f} "
                  f"{pct(ours[i], peer[j]):>8} {ours1[i] / MIB:>10.1f} {pct(ours1[i], peer[j]):>8}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def wait_line(pipe, pattern, timeout):
    """Read pipe's lines until one matches pattern; False at EOF or after timeout s."""
    end = time.monotonic() + timeout
    import select
    buf = ""
    while time.monotonic() < end:
        r, _, _ = select.select([pipe], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        line = pipe.readline()
        if not line:
            return False
        if re.search(pattern, line):
            return True
        buf += line
    return False


# What each profiler prints once it is attached: the workload starts only then.
READY = {"bpfprof -p": (["-p"], r"^bpfprof: recording"),
         "bpfprof -p --alloc-uprobes": (["-p"], r"^bpfprof: recording"),
         # its "Attaching to pid" comes before its probes are attached (3 of 5 rounds
         # ran the loop unprobed): its first report, 1 s later, comes after
         "memleak-bpfcc -p": (None, r"Top \d+ stacks"),
         "heaptrack -p": (None, r"injection finished|heaptrack output will be written")}


def loop_cpu(config, pairs):
    """malloc_loop's loop-thread CPU seconds under config."""
    cmd = [os.path.join(WORKLOADS, "malloc_loop"), str(pairs)]
    prof = None
    if config == "in-process":
        r = sh([BPFPROF, "--alloc", "-q", "-o", os.path.join(tmp, "l.folded"), "--"] + cmd,
               timeout=900)
        out = r.stdout
    else:
        wl = subprocess.Popen(cmd + ["-1"], stdout=subprocess.PIPE, text=True)
        if not wait_line(wl.stdout, r"^waiting", 60):
            failed.append("malloc_loop did not start")
            return None
        if config.startswith("bpfprof -p"):  # injected, or with --alloc-uprobes
            prof = subprocess.Popen([BPFPROF, "--alloc", "-p", str(wl.pid), "-o",
                                     os.path.join(tmp, "p.folded")] + config.split()[2:],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ready = wait_line(prof.stderr, READY[config][1], 120)
        elif config == "memleak-bpfcc -p":
            prof = subprocess.Popen(["memleak-bpfcc", "-p", str(wl.pid), "1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            ready = wait_line(prof.stdout, READY[config][1], 300)
        elif config == "heaptrack -p":
            prof = subprocess.Popen(["heaptrack", "-o", os.path.join(tmp, "htp"), "-p",
                                     str(wl.pid)],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            ready = wait_line(prof.stdout, READY[config][1], 120)
            time.sleep(2)  # its injection ends after that line; the loop must run under it
        else:
            ready = True
        if not ready:
            failed.append(f"{config} never said it was attached")
        os.kill(wl.pid, signal.SIGUSR1)
        out = wl.communicate(timeout=900)[0]
        if prof:
            if prof.poll() is None:
                prof.send_signal(signal.SIGINT)
            try:
                prof.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                prof.kill()
                prof.wait()
    m = re.search(r"cpu ([\d.]+)", out or "")
    if not m:
        failed.append("malloc_loop " + config)
        return None
    return float(m.group(1))


def bcc_headers():
    """memleak-bpfcc compiles against kernel headers: without /lib/modules/$(uname -r)/build
    (a custom kernel), Debian's linux-headers common and amd64 dirs merged (as bench.sh
    does). False if there are none."""
    if os.environ.get("BCC_KERNEL_SOURCE") or \
            os.path.isdir(f"/lib/modules/{os.uname().release}/build"):
        return True
    src = "/usr/src"
    common = sorted(d for d in os.listdir(src) if d.startswith("linux-headers-") and
                    d.endswith("-common"))
    if not common:
        return False
    hc = os.path.join(src, common[-1])
    ha = hc[:-len("-common")] + "-amd64"
    if not os.path.isdir(ha):
        return False
    ksrc = os.path.join(tmp, "ksrc")
    if not os.path.isdir(ksrc):
        os.makedirs(ksrc)
        subprocess.run(["cp", "-a", hc + "/.", ksrc + "/"], check=True)
        subprocess.run(["cp", "-a", ha + "/.", ksrc + "/"], check=True)
    os.environ["BCC_KERNEL_SOURCE"] = ksrc
    return True


# Pairs per run: enough for the cheap configurations' ratio to stand above the
# noise of a shared host (500,000 pairs alone are 3-9 ms), few for those that trap
# on every call (a uprobe each: 5,000,000 pairs would take minutes). Ratios are of
# CPU time per pair.
LOOP_PAIRS = int(os.environ.get("HEAP_LOOP_PAIRS", "5000000"))
TRAP_PAIRS = {"bpfprof -p --alloc-uprobes": 200000, "memleak-bpfcc -p": 100000}


def cost_loop():
    configs = ["alone", "bpfprof -p", "bpfprof -p --alloc-uprobes", "in-process"]
    if shutil.which("memleak-bpfcc") and bcc_headers():
        configs.append("memleak-bpfcc -p")
    if shutil.which("heaptrack") and shutil.which("gdb"):
        configs.append("heaptrack -p")
    times = {c: [] for c in configs}
    for r in range(ROUNDS):
        for c in configs[r % len(configs):] + configs[:r % len(configs)]:  # rotate the order
            n = TRAP_PAIRS.get(c, LOOP_PAIRS)
            t = loop_cpu(c, n)
            if t is not None:
                times[c].append(t / n * 1e9)
    alone = statistics.median(times["alone"])
    print(f"heap cost: malloc_loop, 64 B malloc/free pairs ({LOOP_PAIRS}; "
          f"{', '.join(f'{k}: {v}' for k, v in TRAP_PAIRS.items())}), loop CPU time per pair, "
          f"medians of {ROUNDS} interleaved rounds")
    for c in configs:
        if times[c]:
            med = statistics.median(times[c])
            print(f"  {c:<27} {med:9.1f} ns  {med / alone:8.1f}x  "
                  f"({', '.join(f'{t:.1f}' for t in times[c])})")


def pg():
    """A scratch cluster as the postgres user: (bin dir, data dir, socket dir) or None."""
    bins = sorted(d for d in os.listdir("/usr/lib/postgresql") if d.isdigit()) \
        if os.path.isdir("/usr/lib/postgresql") else []
    if not bins or not shutil.which("pgbench"):
        return None
    pgbin = f"/usr/lib/postgresql/{bins[-1]}/bin"
    d = tempfile.mkdtemp(prefix="bpfprof-heap-pg.")
    os.chmod(d, 0o755)
    shutil.chown(d, "postgres")
    data, sock = os.path.join(d, "data"), os.path.join(d, "sock")
    os.mkdir(sock)
    shutil.chown(sock, "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    r = sh(as_pg + [f"{pgbin}/initdb", "-D", data, "-A", "trust"])
    if r.returncode:
        print(f"  initdb: {r.stderr[-300:]}", file=sys.stderr)
        return None
    r = sh(as_pg + [f"{pgbin}/pg_ctl", "-D", data, "-l", os.path.join(sock, "log"), "-w", "-o",
                    f"-k {sock} -p 5498 -c listen_addresses=''", "start"])
    if r.returncode:
        print(f"  pg_ctl start: {r.stderr[-300:]}", file=sys.stderr)
        return None
    sh(as_pg + ["pgbench", "-h", sock, "-p", "5498", "-i", "-s", "2", "postgres"])
    return pgbin, d, data, sock


def backend_of(pgbench_pid):
    """The postgres backend serving pgbench's one connection (its client pid is pgbench)."""
    for _ in range(100):
        r = sh(["ps", "-eo", "pid=,args="])
        for line in r.stdout.splitlines():
            pid, _, args = line.strip().partition(" ")
            if args.startswith("postgres: postgres postgres [local]"):
                return int(pid)
        time.sleep(0.1)
    return None


def tps_under(config, sock):
    """pgbench -c 1 for PG_SECS s; the profiler attached once pgbench runs: mean tps of the
    seconds from 2 s after it said it was attached (or from second 10 alone) to the end."""
    as_pg = ["runuser", "-u", "postgres", "--"]
    pb = subprocess.Popen(as_pg + ["pgbench", "-h", sock, "-p", "5498", "-c", "1", "-j", "1",
                                   "-T", str(PG_SECS), "-P", "1", "postgres"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    prof, start = None, 10.0
    time.sleep(1)
    be = backend_of(pb.pid)
    if config.startswith("bpfprof -p") and be:
        prof = subprocess.Popen([BPFPROF, "--alloc", "-p", str(be), "-o",
                                 os.path.join(tmp, "pg.folded")] + config.split()[2:],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ok = wait_line(prof.stderr, READY["bpfprof -p"][1], 60)
        start = time.monotonic() - t0 + 2
    elif config == "memleak-bpfcc -p" and be:
        prof = subprocess.Popen(["memleak-bpfcc", "-p", str(be), "1"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        ok = wait_line(prof.stdout, READY["memleak-bpfcc -p"][1], 30)
        start = time.monotonic() - t0 + 2
    else:
        ok = config == "alone"
    # the backend's CPU time (its own rusage, from /proc), read each 0.2 s: CPU per
    # transaction stands above a shared host's swings in tps (2.5x between rounds)
    cpu, hz = [], os.sysconf("SC_CLK_TCK")
    while pb.poll() is None and be:
        try:
            with open(f"/proc/{be}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            cpu.append((time.monotonic() - t0, (int(fields[11]) + int(fields[12])) / hz))
        except OSError:
            break
        time.sleep(0.2)
    _, err = pb.communicate(timeout=300)
    if prof:
        prof.send_signal(signal.SIGINT)
        try:
            prof.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            prof.kill()
    # "progress: 6.0 s, 812.0 tps, lat ..."
    tps = [float(m.group(2)) for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps", err)
           if float(m.group(1)) >= start]
    if not ok or len(tps) < 5:
        failed.append(f"pgbench {config}: attached too late or not at all")
        return None
    # CPU per transaction over whole progress seconds from start to the last reading
    win = [(t, c) for t, c in cpu if t >= start]
    txns = sum(float(m.group(2)) for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps", err)
               if win and win[0][0] + 1 <= float(m.group(1)) <= win[-1][0])
    per = (win[-1][1] - win[0][1]) / txns * 1e6 if txns and len(win) > 1 else None
    return statistics.mean(tps), per


def cost_pg():
    c = pg()
    if not c:
        print("heap cost, PostgreSQL: skipped (postgresql/pgbench not installed, or the "
              "cluster did not start)")
        return
    pgbin, d, data, sock = c
    try:
        configs = ["alone", "bpfprof -p", "bpfprof -p --alloc-uprobes"] + (["memleak-bpfcc -p"] if shutil.which("memleak-bpfcc")
                                             and bcc_headers() else [])
        tps = {k: [] for k in configs}
        for r in range(ROUNDS):
            for k in configs[r % len(configs):] + configs[:r % len(configs)]:
                t = tps_under(k, sock)
                if t:
                    tps[k].append(t)
        alone = statistics.median(t for t, _ in tps["alone"])
        cpus = [c for _, c in tps["alone"] if c]
        alone_cpu = statistics.median(cpus) if cpus else None
        print(f"heap cost: a PostgreSQL backend (pgbench -c 1, scale 2, {PG_SECS} s), tps and "
              f"the backend's CPU per transaction while attached, medians of {ROUNDS} "
              f"interleaved rounds")
        for k in configs:
            if tps[k]:
                med = statistics.median(t for t, _ in tps[k])
                cs = [c for _, c in tps[k] if c]
                line = (f"  {k:<27} {med:8.0f} tps  {alone / med:6.2f}x  "
                        f"({', '.join(f'{t:.0f}' for t, _ in tps[k])})")
                if cs and alone_cpu:
                    mc = statistics.median(cs)
                    line += (f"; CPU {mc:7.1f} us/txn {mc / alone_cpu:6.2f}x "
                             f"({', '.join(f'{c:.0f}' for c in cs)})")
                print(line)
    finally:
        sh(["runuser", "-u", "postgres", "--", f"{pgbin}/pg_ctl", "-D", data, "-m", "immediate",
            "stop"])
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("bench_heap: must run as root")
    tmp = tempfile.mkdtemp(prefix="bpfprof-bench-heap.")
    try:
        parts = sys.argv[1:] or ["c", "python", "loop", "pg"]
        if "c" in parts:
            accuracy_c()
        if "python" in parts:
            accuracy_python()
        if "loop" in parts:
            cost_loop()
        if "pg" in parts:
            cost_pg()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        sys.exit("bench_heap: failed: " + "; ".join(failed))
