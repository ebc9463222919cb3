# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CO-RE against the cached small BTF (user/util/corebtf.c): the first run of a
boot writes it, later runs relocate every object (CPU, off-CPU, heap, CUDA)
against it, and every relocation comes out as against the kernel's whole BTF;
a cache file that does not fit is dropped and the run goes on."""
import os
import re
import stat

import pytest

from conftest import run, parse_folded, workload


def relocations(stderr):
    """libbpf's CO-RE results (-vvvv), type ids left out (they differ by BTF)."""
    out = []
    for line in stderr.splitlines():
        if re.search(r"relo #\d+: (patched|<)", line):
            out.append(re.sub(r"\[\d+\] |matching candidate #\d+ ", "", line))
    return sorted(out)


def core_run(tmp_path, cache, args):
    env = dict(os.environ, BPFPROF_CORE_CACHE=str(cache))
    out = tmp_path / "c.folded"
    r = run(["-vvvv", "-o", str(out)] + args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, out


CUDA_LIB = os.path.join(os.path.dirname(workload("cpu_split")), "cuda", "libcuda.so.1")


@pytest.mark.parametrize("args", [
    ["-a", "-F", "99", "-d", "0.2"],
    ["-F", "499", "--", "@cpu_split", "0.3"],  # the fork/exit programs too
    ["--off-cpu", "--", "@cpu_split", "0.2"],
    ["--alloc", "--", "@malloc_loop", "20000"],
    ["--cuda", "--cuda-lib", CUDA_LIB, "--", "@cuda_app", "--launches", "10"],
], ids=["all", "cmd", "offcpu", "alloc", "cuda"])
def test_cached_btf_relocates_as_the_kernels(tmp_path, args):
    if "--cuda" in args and not os.path.exists(CUDA_LIB):
        pytest.skip("no fake libcuda (CUDA toolkit headers missing)")
    args = [workload(a[1:]) if a.startswith("@") else a for a in args]
    cache = tmp_path / "cache"
    for _ in (1,):
        r1, _ = core_run(tmp_path, cache, args)
        files = [f for f in os.listdir(cache) if f.startswith("core-")]
        assert len(files) == 1, files
        st = os.stat(cache / files[0])
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
        assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
        r2, out = core_run(tmp_path, cache, args)
        rel1, rel2 = relocations(r1.stderr), relocations(r2.stderr)
        assert rel1 and any("patched" in l for l in rel1), r1.stderr[-2000:]
        assert rel1 == rel2
        # the second run used the small file: no candidate among the kernel's 100k+ ids
        ids = [int(m) for m in re.findall(r"found target candidate \[(\d+)\]", r2.stderr)]
        assert ids and max(ids) < 10000, ids
        if "-F" in args and "--" in args:  # -a on an idle machine may take no sample
            assert any("work_a" in f for f, _ in parse_folded(out.read_text()))


def test_cache_file_that_does_not_fit_is_dropped(tmp_path):
    cache = tmp_path / "cache"
    args = ["-F", "499", "--", workload("cpu_split"), "0.3"]
    core_run(tmp_path, cache, args)
    (name,) = [f for f in os.listdir(cache) if f.startswith("core-")]
    (cache / name).write_bytes(b"not BTF at all")
    r, out = core_run(tmp_path, cache, args)
    assert "dropped" in r.stderr
    assert any("work_a" in f for f, _ in parse_folded(out.read_text()))
    # written again, whole, after the run
    assert (cache / name).stat().st_size > 1000


def test_cache_directory_others_could_change_is_not_used(tmp_path):
    """libbpf reopens the types file by name, so the directory must be one nobody else
    can change (util/safedir.c, as the unwind table cache): a symlink on the way, or a
    directory above that others may write (not root's sticky /tmp), means no cache;
    the run goes on against the kernel's BTF."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    os.symlink(real, tmp_path / "link")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    args = ["-F", "499", "--", workload("cpu_split"), "0.3"]
    for cache, look in ((tmp_path / "link", real), (shared / "c", shared / "c")):
        r, out = core_run(tmp_path, cache, args)
        assert "no CO-RE types cache in" in r.stderr, r.stderr[-2000:]
        assert not look.exists() or not os.listdir(look), os.listdir(look)
        assert any("work_a" in f for f, _ in parse_folded(out.read_text()))
    # the same directory made safe is used: 0700 and nothing writable above it
    os.chmod(shared, 0o755)
    core_run(tmp_path, shared / "c", args)
    assert [f for f in os.listdir(shared / "c") if f.startswith("core-")]


def test_old_entries_are_dropped(tmp_path):
    """Each build of the BPF objects has its own file: files of other boots go when a
    file is written, and of this boot's other builds only the 7 newest stay, so a
    host that rebuilds bpfprof all day does not fill /run."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    boot = open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "")
    other = cache / ("core-" + "0" * 32 + "-0000000000000001.btf")
    other.write_bytes(b"x")
    builds = []
    for i in range(10):
        f = cache / f"core-{boot}-{i:016x}.btf"
        f.write_bytes(b"x")
        os.utime(f, (1000 + i, 1000 + i))
        builds.append(f.name)
    core_run(tmp_path, cache, ["-F", "499", "--", workload("cpu_split"), "0.2"])
    left = sorted(f for f in os.listdir(cache) if f.startswith("core-"))
    assert other.name not in left
    assert sorted(set(left) & set(builds)) == sorted(builds[3:]), left
    assert len(left) == 8, left  # the 7 newest others and the one this run wrote
