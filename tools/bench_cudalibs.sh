#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# The unwind budget next to torch's CUDA libraries, on a host without a GPU
# (as root): tools/torch_cuda_cpu.py (Debian's python3-torch, the CUDA
# toolkit's libraries mapped, NVRTC and nvJitLink compiling on the CPU)
# runs; `bpfprof -a -F 99 -d SECS -v` records the machine twice, with the
# default --unwind-mem (which grows with what is sampled) and with a fixed
# 32m (the default before it grew). Prints, for each, the share of samples
# that had their files' tables (no frame walked by frame pointers for lack
# of room) and the tables' line. CUDA_BENCH_SECS (30).
# Skipped (exit 0) without torch or a CUDA toolkit's NVRTC.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BPFPROF=${BPFPROF:-$root/build/bpfprof}
SECS=${CUDA_BENCH_SECS:-30}
CUDA=${CUDA_HOME:-/usr/local/cuda}

((EUID == 0)) || { echo "bench_cudalibs: must run as root" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "cuda libraries: skipped: no python3-torch"; exit 0; }
ls "$CUDA"/lib64/libnvrtc.so.* >/dev/null 2>&1 || { echo "cuda libraries: skipped: no NVRTC under $CUDA"; exit 0; }

tmp=$(mktemp -d /tmp/bpfprof-cudalibs.XXXXXX)
pid=
cleanup() {
	[[ -z $pid ]] || kill -KILL "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

/usr/bin/python3 "$root/tools/torch_cuda_cpu.py" $((2 * SECS + 30)) >"$tmp/w.out" &
pid=$!
for ((i = 0; i < 600; i++)); do
	grep -q ready "$tmp/w.out" && break
	sleep 0.1
done
grep -q ready "$tmp/w.out" || { echo "bench_cudalibs: the workload did not start" >&2; exit 1; }
sleep 2
echo "cuda libraries: -a -F 99 for $SECS s next to tools/torch_cuda_cpu.py ($(head -n 1 "$tmp/w.out"))"
for args in "" "--unwind-mem 32m"; do
	"$BPFPROF" -a -F 99 -d "$SECS" -v $args -o "$tmp/b.folded" 2>"$tmp/b.err" ||
		{ echo "bench_cudalibs: bpfprof failed: $(tail -n 3 "$tmp/b.err")" >&2; exit 1; }
	echo "  ${args:-default --unwind-mem}:"
	grep -E 'had their tables. room|^bpfprof: unwind tables:|unwound with frame pointers in files' \
		"$tmp/b.err" | sed 's/^bpfprof: /    /'
done
