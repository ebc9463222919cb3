#!/bin/bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# bpfprof's CUDA paths on a real GPU (the tests run against a fake libcuda).
#
#   tools/gpu/check.sh pack DIR        here: copy the built bpfprof, its CUPTI
#                                      library and the Debian libraries it needs
#                                      that a CUDA image may lack into DIR
#   tools/gpu/check.sh run DIR OUT     there (root, a GPU, PyTorch in python3):
#                                      profile tools/gpu/torch_work.py four ways,
#                                      outputs and stderr into OUT
#   tools/gpu/verify.py OUT            here or there: check what OUT holds
#
# The runs: the workload alone; --cuda (launch stacks); --cuda --cuda-weight
# gpu-time (CUPTI's kernel times); --cpu --cuda -f chrome (the timeline); -a
# --cuda with the workload started outside bpfprof (CUDA_INJECTION64_PATH set
# by hand, as docs/cuda.md says for processes started elsewhere).
set -u
cmd=${1:-}; dir=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
case "$cmd" in
pack)
	[ -n "$dir" ] || { echo "usage: $0 pack DIR" >&2; exit 2; }
	root=$here/../..
	mkdir -p "$dir/bin" "$dir/lib"
	cp "$root/build/bpfprof" "$root/build/libbpfprof_cupti.so" "$dir/bin/" || exit 1
	# what bpfprof links that is not glibc/libstdc++ (a CUDA image has those)
	for l in libbpf.so.1 libdw.so.1 libelf.so.1 libprotobuf-c.so.1; do
		cp -L "$(ldd "$root/build/bpfprof" | awk -v l=$l '$1 == l { print $3 }')" "$dir/lib/" || exit 1
	done
	exit 0 ;;
run) ;;
*) echo "usage: $0 pack DIR | run DIR OUT" >&2; exit 2 ;;
esac
out=${3:-}
[ -n "$dir" ] && [ -n "$out" ] || { echo "usage: $0 run DIR OUT" >&2; exit 2; }
dir=$(cd "$dir" && pwd); mkdir -p "$out"; out=$(cd "$out" && pwd)
py=$(command -v python3)
work=$here/torch_work.py
steps=${GPU_STEPS:-300} evals=${GPU_EVALS:-300}
runs=" ${GPU_RUNS:-alone launch gputime trace all} "
want() { case "$runs" in *" $1 "*) return 0 ;; esac; return 1; }
{
	echo "kernel $(uname -r)"
	nvidia-smi -L 2>&1 | head -2
	ls -l /sys/kernel/btf/vmlinux 2>&1
	echo "python $py"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcupti\.so' | head -4
} > "$out/facts.txt" 2>&1
cat "$out/facts.txt"
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
# the workload, with the image's library path, not ours
work_cmd=(env -u LD_LIBRARY_PATH "$py" "$work" "$steps" "$evals" 2)
child() { timeout ${GPU_TIMEOUT:-240} "${work_cmd[@]}"; }
run1() { # name, bpfprof args...
	local name=$1; shift
	local t0=$(date +%s.%N)
	timeout ${GPU_TIMEOUT:-240} env LD_LIBRARY_PATH="$dir/lib" "$dir/bin/bpfprof" "$@" \
		> "$out/$name.stdout" 2> "$out/$name.err"
	echo "$name rc=$? wall=$(since $t0)s"
	grep -E "^bpfprof: |Error|error" "$out/$name.err" | head -8
}
t0=$(date +%s.%N)
child > "$out/alone.stdout" 2> "$out/alone.err"
echo "alone rc=$? wall=$(since $t0)s"; cat "$out/alone.stdout"
want launch && run1 launch -v --cuda -o "$out/launch.folded" -- "${work_cmd[@]}"
want gputime && run1 gputime -v --cuda --cuda-weight gpu-time -o "$out/gpu.folded" -- "${work_cmd[@]}"
want trace && run1 trace -v --cpu --cuda -F 499 -o "$out/trace.json" -- "${work_cmd[@]}"
want all || { ls -l "$out"; exit 0; }
# -a: bpfprof first, the workload started by hand with the injection library
# (env execs bpfprof: $! is bpfprof, not a subshell that would not pass SIGINT on)
env LD_LIBRARY_PATH="$dir/lib" "$dir/bin/bpfprof" -v -a --cuda -o "$out/all.folded" \
	> "$out/all.stdout" 2> "$out/all.err" &
bpid=$!
for _ in $(seq 100); do grep -q "Ctrl-C to stop" "$out/all.err" && break; sleep 0.1; done
CUDA_INJECTION64_PATH=$dir/bin/libbpfprof_cupti.so child > "$out/all_child.stdout" 2>&1
kill -INT $bpid
for _ in $(seq 300); do kill -0 $bpid 2>/dev/null || break; sleep 0.1; done
kill -0 $bpid 2>/dev/null && { echo "all: bpfprof still running 30 s after SIGINT"; kill -9 $bpid; }
wait $bpid; echo "all rc=$?"
grep -E "^bpfprof: " "$out/all.err" | head -8
ls -l "$out"
