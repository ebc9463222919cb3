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
