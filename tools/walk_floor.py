#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""
In-run A/B timing of the CPU sample's parts, against the kernel's own unwinder.

Run by `make bench` (WALK_FLOOR=0 skips it) or alone, as root:

    tools/walk_floor.py [--rounds N] [--secs S] [--py PYTHON] [--smoke]

Why: on this shared VM one binary's per-sample BPF time moves by 3x from one
run to the next (bench/history/2026-11.md "Cost"), so two builds timed in separate
runs cannot be told apart, and an absolute target in µs says more about the
host than about the code. Here every figure is a difference or a ratio
between two variants timed in the same run, on alternating samples.

How: the tool copies this checkout's tracked files to a temporary tree,
patches bpf/cpu.bpf.c so that each sample `-v` times is variant A (the
sample path as committed) or variant B (chosen by BPFPROF_AB_VARIANT at
load time), by the low bit of its start time, each with its own histogram
and sums, and builds it. The variants B:

  kfp    the user stack walked by the kernel's frame-pointer unwinder
         (bpf_get_stack(BPF_F_USER_STACK): what perf record -g, bcc's
         profile and bpftrace's ustack use) instead of ours, on a 64-frame
         stack built with frame pointers (deep_recursion.c, -O1
         -fno-omit-frame-pointer) and walked by bpfprof's CFI tables
         (--unwind dwarf): the same frames, two unwinders;
  none   no user stack walk: the sample's fixed part (filter, header, CPU
         weight, output), on the same 64-frame workload;
  nopy   no Python walk, on deep.py 28 (30 Python frames over ~14 native
         ones, pyenv's 3.12): A - B is the Python walk's cost;
  aa     B = A: the control; its B/A says how far the split itself is off.

Each run prints A's and B's medians (ns a sample); the summary gives, per
variant, the median over runs of B/A. A run whose stacks are not whole
(fewer than 90% of samples with >= 60 frames, or with all 28 Python
frames: start-up and exit take the rest; of A's samples for none and nopy) fails the tool: the unwinders must have walked the same frames.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    print("walk_floor: " + msg, file=sys.stderr)
    sys.exit(1)


def patch(path, pairs):
    s = open(path).read()
    for old, new in pairs:
        if old not in s:
            die("%s changed: cannot find %r; update tools/walk_floor.py" % (path, old[:60]))
        s = s.replace(old, new, 1)
    open(path, "w").write(s)


def patch_tree(d):
    patch(os.path.join(d, "bpf/cpu.bpf.c"), [
        ("""static __always_inline void time_sample(__u64 t0)
{
	__u64 ns = bpf_ktime_get_ns() - t0, *c;
	__u32 b = sample_hist_bucket(ns);

	count_add(CNT_SAMPLE_NS, ns);
	c = bpf_map_lookup_elem(&sample_hist, &b);
	if (c)
		*c += 1;
}""", """const volatile __u32 ab_variant = 0; /* walk_floor.py: 1 kfp, 2 none, 3 nopy, 0 aa */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SAMPLE_HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sample_hist_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} ab_sum SEC(".maps");

static __always_inline void time_sample(__u64 t0, bool ab)
{
	__u64 ns = bpf_ktime_get_ns() - t0, *c;
	__u32 b = sample_hist_bucket(ns), k = ab ? 2 : 0;

	count_add(CNT_SAMPLE_NS, ns);
	c = bpf_map_lookup_elem(ab ? (void *)&sample_hist_b : (void *)&sample_hist, &b);
	if (c)
		*c += 1;
	c = bpf_map_lookup_elem(&ab_sum, &k);
	if (c)
		*c += ns;
	k++;
	c = bpf_map_lookup_elem(&ab_sum, &k);
	if (c)
		*c += 1;
}"""),
        ("""	if (time_samples)
		t0 = bpf_ktime_get_ns();
	count(CNT_SAMPLES);""", """	bool ab;

	if (time_samples)
		t0 = bpf_ktime_get_ns();
	ab = t0 & 1;
	asm volatile("" : "+r"(ab));
	count(CNT_SAMPLES);"""),
        ("""		ulen = user_frames(ctx, s, klen);""", """		if (ab && ab_variant == 1) {
			long n = bpf_get_stack(ctx, &s->frames[klen & (MAX_KSTACK - 1)],
					       MAX_USTACK * sizeof(__u64), BPF_F_USER_STACK);

			ulen = n > 0 ? (__u64)n / sizeof(__u64) : 0;
		} else if (ab && ab_variant == 2) {
			ulen = 0;
		} else {
			ulen = user_frames(ctx, s, klen);
		}"""),
        ("""	if (!(s->hdr.flags & SAMPLE_F_KTHREAD) && !(ts && pygen && ts->not_py == pygen)) {""",
         """	if (!(ab && ab_variant == 3) && !(s->hdr.flags & SAMPLE_F_KTHREAD) &&
	    !(ts && pygen && ts->not_py == pygen)) {"""),
        ("time_sample(t0);", "time_sample(t0, ab);"),
    ])
    patch(os.path.join(d, "user/collect/setup.c"), [
        ("""	r->skel->rodata->time_samples = log_level >= 2;""",
         """	r->skel->rodata->time_samples = log_level >= 2;
	if (getenv("BPFPROF_AB_VARIANT"))
		r->skel->rodata->ab_variant = atoi(getenv("BPFPROF_AB_VARIANT"));"""),
    ])
    patch(os.path.join(d, "user/collect/report.c"), [
        ("""			if (!bpf_obj_get_info_by_fd(bpf_program__fd(r->skel->progs.on_cpu_sample),""",
         """			{
				int af = bpf_map__fd(r->skel->maps.ab_sum);
				double ma = 0, mb = 0, pa = 0, pb = 0;
				uint64_t na = bpfmap__percpu_counter(af, 1);
				uint64_t nb = bpfmap__percpu_counter(af, 3);

				sample_hist_quantiles(bpf_map__fd(r->skel->maps.sample_hist), &ma, &pa);
				sample_hist_quantiles(bpf_map__fd(r->skel->maps.sample_hist_b), &mb, &pb);
				pr_verbose("AB: A %llu %.0f B %llu %.0f", (unsigned long long)na, ma,
					   (unsigned long long)nb, mb);
			}
			if (!bpf_obj_get_info_by_fd(bpf_program__fd(r->skel->progs.on_cpu_sample),"""),
    ])


def build(tmp):
    d = os.path.join(tmp, "tree")
    os.makedirs(d)
    try:
        r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True)
    except FileNotFoundError:  # no git on this machine (a fresh one, a tarball)
        r = None
    if r is not None and r.returncode == 0:
        files = r.stdout.split("\n")
    else:  # not a git checkout (a release tarball): everything but build outputs
        files = [os.path.relpath(os.path.join(dp, f), ROOT)
                 for dp, dn, fn in os.walk(ROOT)
                 if not os.path.relpath(dp, ROOT).split(os.sep)[0] in
                 ("build", "build-fuzz", "build-san", ".git")
                 for f in fn]
    for f in files:
        if not f or f.startswith("build/") or not os.path.isfile(os.path.join(ROOT, f)):
            continue
        os.makedirs(os.path.dirname(os.path.join(d, f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(d, f))
    patch_tree(d)
    r = subprocess.run(["make", "-j%d" % (os.cpu_count() or 2), "build/bpfprof"], cwd=d,
                       capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        die("the A/B build failed")
    deep = os.path.join(tmp, "deep_fp")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
                    "-fno-optimize-sibling-calls", "-D_GNU_SOURCE",
                    os.path.join(ROOT, "tests/workloads/deep_recursion.c"), "-o", deep], check=True)
    return os.path.join(d, "build/bpfprof"), deep


def whole(folded, py):
    n = ok = 0
    for line in open(folded):
        stack, _, cnt = line.rstrip("\n").rpartition(" ")
        c = int(cnt)
        n += c
        if py:
            ok += c if stack.count(";down (deep.py") >= 28 else 0
        else:
            ok += c if stack.count(";") >= 60 else 0
    return ok / n if n else 0.0


def run(bpfprof, variant, cmd, py, secs, out):
    env = dict(os.environ, BPFPROF_AB_VARIANT=str(variant))
    args = [bpfprof, "-F", "999", "-v", "-o", out]
    if not py:
        args += ["--unwind", "dwarf"]
    r = subprocess.run(args + ["--"] + cmd, env=env, capture_output=True, text=True,
                       timeout=secs + 60)
    m = re.search(r"AB: A (\d+) (\d+) B (\d+) (\d+)", r.stderr)
    if r.returncode or not m:
        sys.stderr.write(r.stderr[-2000:])
        die("bpfprof failed (variant %d)" % variant)
    na, ma, nb, mb = map(int, m.groups())
    if min(na, nb) < 100:
        die("too few samples (A %d, B %d): is the machine idle enough to run the workload?" % (na, nb))
    frac = whole(out, py)
    if variant in (2, 3):  # B walks no user (Python) stack: only A's samples can be whole
        frac = frac * (na + nb) / na
    if frac < 0.9:
        die("only %.1f%% of samples whole (variant %d): the variants did not walk the same frames"
            % (100 * frac, variant))
    return ma, mb, frac


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--secs", type=int, default=3)
    ap.add_argument("--py", default=None, help="a CPython 3.12 (default: pyenv's)")
    ap.add_argument("--smoke", action="store_true",
                    help="one 1 s round of the native variants (the test suite's check that "
                    "the patch still applies, builds, verifies and splits)")
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.secs, a.py = 1, 1, ""
    if os.geteuid():
        die("must run as root")
    py = a.py if a.py is not None else (sorted(glob.glob(os.path.expanduser(
        os.environ.get("PYENV_ROOT", "~/.pyenv")) + "/versions/3.12.*/bin/python3.12")) or [None])[-1]
    tmp = tempfile.mkdtemp(prefix="walk_floor.")
    try:
        bpfprof, deep = build(tmp)
        native = [deep, "60", str(a.secs)]
        python = [py, os.path.join(ROOT, "tests/workloads/py/deep.py"), "28",
                  str(500 * a.secs)] if py else None
        plan = [("kfp", 1, native, False), ("none", 2, native, False), ("aa", 0, native, False)]
        if python:
            plan += [("nopy", 3, python, True), ("aa-py", 0, python, True)]
        elif not a.smoke:
            print("walk_floor: no CPython 3.12 under pyenv: Python rows skipped")
        res = {name: [] for name, *_ in plan}
        print("%-6s %5s %6s %9s %9s %6s %7s" % ("var", "round", "load", "A ns", "B ns", "B/A", "whole"))
        for i in range(a.rounds):
            for name, v, cmd, isp in plan:
                load = open("/proc/loadavg").read().split()[0]
                ma, mb, frac = run(bpfprof, v, cmd, isp, a.secs, os.path.join(tmp, "o.folded"))
                res[name].append((ma, mb))
                print("%-6s %5d %6s %9d %9d %6.2f %6.1f%%" % (name, i + 1, load, ma, mb, mb / ma,
                                                              100 * frac), flush=True)
        print("\nmedians over %d rounds (ns a sample; B/A per run, then its median and range):" % a.rounds)
        for name, *_ in plan:
            r = res[name]
            ratios = [mb / ma for ma, mb in r]
            print("%-6s A %6.0f  B %6.0f  B/A %.2f (%.2f-%.2f)  A-B %6.0f" % (
                name, statistics.median(x for x, _ in r), statistics.median(y for _, y in r),
                statistics.median(ratios), min(ratios), max(ratios),
                statistics.median(x - y for x, y in r)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
