#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPU time of `bpfprof -p` against the kernel's own account.

    tools/cpu_account.py [--runs N] [--seconds S] [--freq F] [--bpfprof PATH]
                         [--mp-server PATH] MAX_US [MAX_US...]

For each MAX_US, N times: start `mp_server 3 S MAX_US` (three forked
workers answering requests of MAX_US/10..MAX_US of CPU, idle before and
after), profile its workers with `bpfprof -p W1,W2,W3 -F F -f pprof`, and
print the profile's CPU time (the summary's "cpu time" line; a bpfprof
without it: samples / F) and the samples / F over the workers'
/proc/PID/schedstat delta, with the load average.
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


def one(args, max_us):
    srv = subprocess.Popen([args.mp_server, "3", str(args.seconds), str(max_us)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pids = srv.stdout.readline().split()[1].split(",")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "p.pb.gz")
        prof = subprocess.Popen([args.bpfprof, "-p", ",".join(pids), "-F", str(args.freq),
                                 "-o", out], stderr=subprocess.PIPE, text=True)
        err = ""
        for line in prof.stderr:
            err += line
            if "recording" in line:
                break
        before = schedstat(pids)
        srv.stdin.write("go\n")
        srv.stdin.flush()
        assert srv.stdout.readline().strip() == "done"
        after = schedstat(pids)
        prof.send_signal(2)
        err += prof.stderr.read()
        prof.wait()
    srv.stdin.close()
    srv.wait()
    samples = int(re.search(r"(\d+) samples", err).group(1))
    m = re.search(r"cpu time: ([\d.]+) s", err)
    kernel = (after - before) / 1e9
    counted = samples / args.freq
    prof_s = float(m.group(1)) if m else counted
    return kernel, prof_s, counted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--bpfprof", default=os.path.join(HERE, "../build/bpfprof"))
    ap.add_argument("--mp-server", default=os.path.join(HERE, "../build/workloads/mp_server"))
    ap.add_argument("max_us", type=int, nargs="+")
    args = ap.parse_args()
    print("max_us  kernel_s  profile_s  ratio  samples/F ratio  load1")
    for max_us in args.max_us:
        for _ in range(args.runs):
            k, p, c = one(args, max_us)
            print(f"{max_us:6d}  {k:8.3f}  {p:9.3f}  {p / k:5.3f}  {c / k:15.3f}  "
                  f"{os.getloadavg()[0]:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
