#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Installs every Debian package that building, testing and benchmarking
# bpfprof needs. Run as root; non-interactive; does nothing (and touches no
# network) when all of them are already installed.
set -euo pipefail

PACKAGES=(
	# build: BPF objects, skeletons, the agent
	clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev liblzma-dev
	protobuf-c-compiler libprotobuf-c-dev make gcc g++ binutils pkg-config
	# --upload (Pyroscope HTTP ingest)
	libcurl4-openssl-dev
	# native source lines (DWARF) through elfutils' libdw; debug files by build id
	# from debuginfod servers (DEBUGINFOD_URLS) through its libdebuginfod
	libdw-dev libdebuginfod-dev
	# tests: a debuginfod server on 127.0.0.1 over test debug files
	debuginfod
	# pprof's profile.proto (build) and go tool pprof (tests)
	golang-go golang-github-google-pprof-dev
	# tests
	libcmocka-dev python3-pytest xz-utils
	# tests: node and npm, for the second pprof decoder (npm pprof-format, below)
	nodejs
	# tests: libFuzzer and the ASan/UBSan runtimes (make fuzz, make test SANITIZE=1),
	# llvm-symbolizer for their reports
	libclang-rt-14-dev llvm-14
	# tests: glibc's separate debug files (symbols found through build-id links)
	libc6-dbg
	# tests: headless browser that loads the SVG flame graph (render, click, search)
	chromium
	# tests: node (and npm, below) for speedscope + puppeteer-core (tests/e2e/speedscope/,
	# installed by the test with npm ci from its package-lock.json into build/e2e-js)
	nodejs
	# benchmark: the peer profiler and /usr/bin/time
	linux-perf time
	# CUDA: <sys/sdt.h> for the CUPTI injection library's USDT probes
	systemtap-sdt-dev
	# benchmark: bcc's memleak for --alloc, and the headers bcc compiles with
	# (tools/bench.sh merges the common and amd64 dirs for kernels without them)
	bpfcc-tools linux-headers-amd64
	# benchmark, "real host" section: a PyTorch training loop (~315 mapped
	# libraries) next to pgbench against a scratch PostgreSQL cluster
	python3-torch python3-numpy postgresql postgresql-contrib
	# tests: --alloc under the common allocators; benchmark: the peer heap profiler
	libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 heaptrack
)

# npm packages the tests use, pinned by their lock files; fetched once (npm ci)
npm_deps() {
	local here dir
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	for dir in "$here/tests/e2e/pprof-format"; do
		[[ -d $dir/node_modules ]] && continue
		echo "install-deps: npm ci in ${dir#"$here"/}"
		(cd "$dir" && npm ci --no-audit --no-fund)
	done
}

missing=()
for p in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done
# Debian's npm, unless a nodejs that brings its own (NodeSource's) is installed
command -v npm >/dev/null || missing+=(npm)

if ((${#missing[@]} == 0)); then
	echo "install-deps: all ${#PACKAGES[@]} packages already installed"
	npm_deps
	exit 0
fi

if ((EUID != 0)); then
	echo "install-deps: must run as root to install: ${missing[*]}" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
npm_deps
