#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Installs the Debian packages bpfprof needs, by what they are for:
#
#   tools/install-deps.sh              build and run bpfprof (make deps)
#   tools/install-deps.sh test         that, and what make test needs (make test-deps)
#   tools/install-deps.sh bench        that, and what make bench needs (make bench-deps)
#   tools/install-deps.sh test bench   both
#   tools/install-deps.sh --list [GROUP...]   print the packages, install nothing
#
# Needs nothing but bash and apt (a minbase Debian 12 root has both): it is
# how a fresh machine gets make itself. Run as root; non-interactive. Where
# every package of the groups asked for is installed (and, for `test`, the
# tests' npm modules are in tests/e2e/pprof-format/node_modules) it changes
# nothing and touches no network; otherwise it runs apt-get update and
# apt-get install, and for `test` npm ci (the npm registry) once per checkout.
set -euo pipefail

# build and run: the BPF objects and skeletons, the agent, its libraries
BUILD=(
	make gcc clang bpftool libbpf-dev libelf-dev libdw-dev zlib1g-dev liblzma-dev
	protobuf-c-compiler libprotobuf-c-dev
	# SHA-256 of the CFI an unwind table is made from: files share a table by it
	nettle-dev
	# pprof's profile.proto, compiled by protoc-c
	golang-github-google-pprof-dev
	# --upload (Pyroscope HTTP ingest): curl.h; libcurl is opened at run time
	libcurl4-openssl-dev
	# debug files by build id from debuginfod servers (DEBUGINFOD_URLS)
	libdebuginfod-dev
	# man bpfprof, once make install has put the page in place
	man-db
)
# CUDA: <sys/sdt.h> for the CUPTI injection library's USDT probes, built only
# where a CUDA toolkit is installed
[[ -e ${CUDA_HOME:-/usr/local/cuda}/include/cupti.h ]] && BUILD+=(systemtap-sdt-dev)

# make test: unit tests, end-to-end tests, the fuzzers
TEST=(
	libcmocka-dev python3-pytest
	# unit test fixtures: a C++ library, .gnu_debugdata (xz)
	g++ xz-utils
	# libFuzzer and the ASan/UBSan runtimes (make fuzz, make test SANITIZE=1),
	# llvm-symbolizer for their reports
	libclang-rt-14-dev llvm-14
	# go tool pprof, the reference reader of our pprof files
	golang-go
	# node and npm: the second pprof decoder (npm pprof-format, below) and
	# speedscope + puppeteer-core (tests/e2e/speedscope/, npm ci by the test)
	nodejs ca-certificates
	# headless browser that loads the SVG flame graph (render, click, search)
	chromium
	# glibc's separate debug files (symbols found through build-id links)
	libc6-dbg
	# a debuginfod server on 127.0.0.1 over a test program's debug file
	debuginfod
	# --alloc under the common allocators
	libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
	# bpfprof top in a terminal (test_top.py)
	tmux
	# systemd-analyze security/verify of packaging/bpfprof.service
	systemd
	# tools/sidroot.sh: the Debian sid root with python3.13/3.14/3.15 (make test-roots);
	# tools/minbase.sh: the README's commands in a fresh Debian 12 root
	debootstrap
)

# make bench: the peers and the real-host workloads
BENCH=(
	# the peer profiler and /usr/bin/time
	linux-perf time
	# bcc's memleak for --alloc, and the headers bcc compiles with
	# (tools/bench.sh merges the common and amd64 dirs for kernels without them)
	bpfcc-tools linux-headers-amd64
	# "real host": a PyTorch training loop (~315 mapped libraries) next to
	# pgbench against a scratch PostgreSQL cluster
	python3-torch python3-numpy postgresql postgresql-contrib
	# the peer heap profiler
	heaptrack
)

want_test=0
want_bench=0
list=0
for g in "$@"; do
	case $g in
	--list) list=1 ;;
	build) ;;
	test) want_test=1 ;;
	bench) want_bench=1 ;;
	*) echo "usage: tools/install-deps.sh [--list] [build] [test] [bench]" >&2; exit 2 ;;
	esac
done

PACKAGES=("${BUILD[@]}")
((want_test)) && PACKAGES+=("${TEST[@]}")
((want_bench)) && PACKAGES+=("${BENCH[@]}")
if ((list)); then
	printf '%s\n' "${PACKAGES[@]}"
	exit 0
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# npm packages the tests use, pinned by their lock files; fetched once (npm ci)
npm_deps() {
	local dir
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
((want_test)) && ! command -v npm >/dev/null && missing+=(npm)

if ((${#missing[@]})); then
	if ((EUID != 0)); then
		echo "install-deps: must run as root to install: ${missing[*]}" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 \
		"${missing[@]}" </dev/null
else
	echo "install-deps: all ${#PACKAGES[@]} packages already installed"
fi
((want_test)) && npm_deps
exit 0
