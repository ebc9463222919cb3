#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPU time of `bpfprof -p` against the kernel's own account.

    tools/cpu_account.py [--runs N] [--seconds S] [--freq F] [--bpfprof PATH]
                         [--mp-server PATH] MAX_US [MAX_US...]
    tools/cpu_account.py --pgbench [--runs N] [--seconds S] ...

For each MAX_US, N times: start `mp_server 3 S MAX_US` (three forked
workers answering requests of MAX_US/10..MAX_US of CPU, idle before and
after), profile its workers with `bpfprof -p W1,W2,W3 -F F -f pprof`, and
print the profile's CPU time (the summary's "cpu time" line; a bpfprof
without it: samples / F) and the samples / F over the workers'
/proc/PID/schedstat delta, with the load average.

--pgbench: a scratch PostgreSQL cluster (as tools/bench_realhost.sh makes
it) under `pgbench -c 2 -j 1`; each run profiles its two backends for S
seconds while they are busy. They are stopped (SIGSTOP) while the profiler
starts and stops and schedstat is read, so that on a loaded host a profiler
slow to stop does not count CPU time schedstat's window left out.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def schedstat(pids):
    return sum(int(open(f"/proc/{p}/schedstat").read().split()[0]) for p in pids)


def start_profiler(args, pids, out):
    """bpfprof -p PIDS, once its events are attached. -> (process, stderr so far)."""
    prof = subprocess.Popen([args.bpfprof, "-p", ",".join(pids), "-F", str(args.freq),
                             "-o", out], stderr=subprocess.PIPE, text=True)
    err = ""
    for line in prof.stderr:
        err += line
        if "recording" in line:
            break
    return prof, err


def stop_profiler(prof, err):
    """SIGINT, wait; -> its whole stderr."""
    prof.send_signal(2)
    err += prof.stderr.read()
    prof.wait()
    return err


def one(args, max_us):
    srv = subprocess.Popen([args.mp_server, "3", str(args.seconds), str(max_us)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pids = srv.stdout.readline().split()[1].split(",")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "p.pb.gz")
        prof, err = start_profiler(args, pids, out)
        before = schedstat(pids)
        srv.stdin.write("go\n")
        srv.stdin.flush()
        assert srv.stdout.readline().strip() == "done"
        after = schedstat(pids)
        err = stop_profiler(prof, err)
    srv.stdin.close()
    srv.wait()
    samples = int(re.search(r"(\d+) samples", err).group(1))
    m = re.search(r"cpu time: ([\d.]+) s", err)
    kernel = (after - before) / 1e9
    counted = samples / args.freq
    prof_s = float(m.group(1)) if m else counted
    return kernel, prof_s, counted


def signal_all(pids, sig):
    for p in pids:
        os.kill(int(p), sig)


def pg_backends(postmaster):
    """The client backends (children of the postmaster serving a connection)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/stat").read()
            cmd = open(f"/proc/{d}/cmdline").read()
        except OSError:
            continue
        if int(st.rsplit(")", 1)[1].split()[1]) == postmaster and "[local]" in cmd:
            out.append(d)
    return out


def pgbench(args):
    import glob
    import shutil
    import time
    pgbin = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    tmp = tempfile.mkdtemp(prefix="cpu_account.")
    os.chmod(tmp, 0o755)
    pg, sock = os.path.join(tmp, "pg"), os.path.join(tmp, "sock")
    os.makedirs(pg)
    os.makedirs(sock)
    shutil.chown(pg, "postgres", "postgres")
    shutil.chown(sock, "postgres", "postgres")
    asp = ["runuser", "-u", "postgres", "--"]
    bench = None
    try:
        subprocess.run(asp + [f"{pgbin}/initdb", "-D", pg, "-A", "trust"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(asp + [f"{pgbin}/pg_ctl", "-D", pg, "-l", f"{sock}/log", "-w", "-o",
                              f"-k {sock} -c listen_addresses= -p 5498", "start"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(asp + ["pgbench", "-h", sock, "-p", "5498", "-i", "-s", "4", "postgres"],
                       check=True, capture_output=True)
        secs = int(args.runs * (args.seconds + 5) + 10)
        bench = subprocess.Popen(asp + ["pgbench", "-h", sock, "-p", "5498", "-c", "2", "-j", "1",
                                        "-T", str(secs), "postgres"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(3)
        postmaster = int(open(f"{pg}/postmaster.pid").readline())
        pids = pg_backends(postmaster)
        assert len(pids) == 2, pids
        print("pgbench -c 2: kernel_s  profile_s  ratio  samples/F ratio  load1")
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as d:
                # the backends stopped (SIGSTOP) while the profiler starts and stops, so
                # that its window and schedstat's are the same on a loaded host
                signal_all(pids, 19)
                prof, err = start_profiler(args, pids, os.path.join(d, "p.pb.gz"))
                before = schedstat(pids)
                signal_all(pids, 18)
                time.sleep(args.seconds)
                signal_all(pids, 19)
                time.sleep(0.1)
                after = schedstat(pids)
                err = stop_profiler(prof, err)
                signal_all(pids, 18)
            samples = int(re.search(r"(\d+) samples", err).group(1))
            m = re.search(r"cpu time: ([\d.]+) s", err)
            k, c = (after - before) / 1e9, samples / args.freq
            p = float(m.group(1)) if m else c
            print(f"              {k:8.3f}  {p:9.3f}  {p / k:5.3f}  {c / k:15.3f}  "
                  f"{os.getloadavg()[0]:5.2f}", flush=True)
    finally:
        if bench:
            bench.kill()
            bench.wait()
        subprocess.run(asp + [f"{pgbin}/pg_ctl", "-D", pg, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--bpfprof", default=os.path.join(HERE, "../build/bpfprof"))
    ap.add_argument("--mp-server", default=os.path.join(HERE, "../build/workloads/mp_server"))
    ap.add_argument("--pgbench", action="store_true")
    ap.add_argument("max_us", type=int, nargs="*")
    args = ap.parse_args()
    if args.pgbench:
        return pgbench(args)
    print("max_us  kernel_s  profile_s  ratio  samples/F ratio  load1")
    for max_us in args.max_us:
        for _ in range(args.runs):
            k, p, c = one(args, max_us)
            print(f"{max_us:6d}  {k:8.3f}  {p:9.3f}  {p / k:5.3f}  {c / k:15.3f}  "
                  f"{os.getloadavg()[0]:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
