# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--cgroup and --container: filtering in BPF by cgroup v2 ancestry, container
ids resolved from cgroup names, --per-container frames and pprof labels."""
import os
import re
import subprocess
import time
import uuid

import pytest

from conftest import CGROUP2, parse_folded, run, total, workload


MNT = CGROUP2
pytestmark = pytest.mark.skipif(MNT is None, reason="no cgroup v2 hierarchy mounted")
CID = "3f2a9c1b7d0e" + uuid.uuid4().hex + uuid.uuid4().hex[:20]   # 64 hex digits


def spin(secs=600):
    """A cpu_split of secs of wall time. The tests kill theirs at the end, so by
    default it outlives every bpfprof run of a test however slow the host: 10 s
    ran out before the fourth run of test_container_id_prefix_frame_and_labels
    next to two busy loops and a suite (an empty profile)."""
    return subprocess.Popen([workload("cpu_split"), str(secs)], stdout=subprocess.DEVNULL)


def move(pid, cg):
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(pid))


def pids_in(stacks):
    out = {}
    for frames, c in stacks:
        m = re.search(r"\[(\d+)\]$", frames[0])
        out[int(m.group(1))] = out.get(int(m.group(1)), 0) + c
    return out


def test_cgroup_only_its_tasks_and_new_children(slice_dir, tmp_path):
    inside = os.path.join(slice_dir, "app")
    os.mkdir(inside)
    a, b = spin(), spin()
    late = None
    try:
        move(b.pid, inside)
        out = tmp_path / "cg.folded"
        p = subprocess.Popen([os.environ.get("BPFPROF", "build/bpfprof"), "--cgroup", inside,
                              "--per-pid", "-d", "5", "-o", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        # a grandchild cgroup created after bpfprof started, and a third process in it
        grand = os.path.join(inside, "late")
        os.mkdir(grand)
        late = spin()
        move(late.pid, grand)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        stacks = parse_folded(out.read_text())
        by_pid = pids_in(stacks)
        assert a.pid not in by_pid, by_pid
        assert by_pid.get(b.pid, 0) > 20, by_pid
        assert by_pid.get(late.pid, 0) > 5, by_pid
        assert set(by_pid) <= {b.pid, late.pid}, by_pid
        # the same cgroup named as /proc/PID/cgroup shows it
        rel = "/" + os.path.relpath(inside, MNT)
        r = run(["--cgroup", rel, "--per-pid", "-d", "1"])
        assert r.returncode == 0, r.stderr
        assert set(pids_in(parse_folded(r.stdout))) <= {b.pid, late.pid}
        assert total(parse_folded(r.stdout)) > 0
    finally:
        for w in (a, b, late):
            if w:
                w.kill()
                w.wait()


def test_container_id_prefix_frame_and_labels(slice_dir, tmp_path):
    scope = os.path.join(slice_dir, f"docker-{CID}.scope")
    os.mkdir(scope)
    other = os.path.join(slice_dir, f"docker-{'0' * 64}.scope")   # a neighbour container
    os.mkdir(other)
    a, b = spin(), spin()
    try:
        move(b.pid, scope)
        move(a.pid, other)
        r = run(["--container", CID[:10], "--per-container", "--per-pid", "-d", "2"])
        assert r.returncode == 0, r.stderr
        stacks = parse_folded(r.stdout)
        assert total(stacks) > 10
        assert {f[0] for f, _ in stacks} == {CID[:12]}, {f[0] for f, _ in stacks}
        assert {f[1] for f, _ in stacks} == {f"cpu_split [{b.pid}]"}
        # the full id works too; the whole machine with --per-container splits by container
        r = run(["--container", CID, "-d", "1"])
        assert r.returncode == 0 and total(parse_folded(r.stdout)) > 0, r.stderr
        r = run(["-a", "--per-container", "-d", "2"])
        roots = {}
        for f, c in parse_folded(r.stdout):
            roots[f[0]] = roots.get(f[0], 0) + c
        assert roots.get(CID[:12], 0) > 5 and roots.get("0" * 12, 0) > 5, roots
        # pprof labels: container_id, cgroup, pid, comm
        pb = tmp_path / "c.pb.gz"
        r = run(["--container", CID[:8], "-d", "2", "-o", str(pb)])
        assert r.returncode == 0, r.stderr
        from test_pprof import go_pprof
        raw = go_pprof("-raw", str(pb))
        assert f"container_id:[{CID}]" in raw, raw[:2000]
        rel = "/" + os.path.relpath(scope, MNT)
        assert f"cgroup:[{rel}]" in raw and f"pid:[{b.pid}]" in raw and "comm:[cpu_split]" in raw
    finally:
        for w in (a, b):
            w.kill()
            w.wait()


def test_kubepods_pod_label(slice_dir, tmp_path):
    uid = str(uuid.uuid4())
    pod = os.path.join(slice_dir, "kubepods-burstable.slice",
                       f"kubepods-burstable-pod{uid.replace('-', '_')}.slice")
    ctr = os.path.join(pod, f"cri-containerd-{CID}.scope")
    os.makedirs(ctr)
    b = spin()
    try:
        move(b.pid, ctr)
        pb = tmp_path / "k.pb.gz"
        r = run(["--container", CID[:12], "-d", "2", "-o", str(pb)])
        assert r.returncode == 0, r.stderr
        from test_pprof import go_pprof
        raw = go_pprof("-raw", str(pb))
        assert f"pod:[{uid}]" in raw and f"container_id:[{CID}]" in raw, raw[:2000]
    finally:
        b.kill()
        b.wait()


def test_bad_ids_and_paths(slice_dir):
    os.mkdir(os.path.join(slice_dir, f"docker-{CID}.scope"))
    other = CID[:12] + ("1" if CID[12] == "0" else "0") * 52   # shares 12 digits, not 13
    os.mkdir(os.path.join(slice_dir, f"crio-{other}.scope"))
    cases = [
        (["--container", "deadbeef" * 8], "no container"),           # unknown
        (["--container", CID[:12]], "ambiguous"),                     # two containers share it
        (["--container", "xyz"], "hex digits"),
        (["--cgroup", "/no/such/cgroup"], "no such cgroup"),
        (["--cgroup", "/proc"], "not a cgroup v2"),
        (["--cgroup", slice_dir, "--container", CID], "choose one"),
    ]
    for args, what in cases:
        r = run(args + ["-d", "1"])
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("bpfprof: ") and len(r.stderr.splitlines()) == 1, r.stderr
        assert what in r.stderr, (args, r.stderr)
    # one more digit settles it
    r = run(["--container", CID[:13], "-d", "0.5"])
    assert r.returncode == 0, r.stderr
