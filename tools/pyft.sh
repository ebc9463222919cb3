#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Builds (once) free-threaded CPython interpreters (./configure --disable-gil)
# from Debian's own source packages, inside the sid root of tools/sidroot.sh,
# for the tests: python3.14t and python3.15t. Each lands in
#   SIDROOT/opt/bpfprof/python3.Xt/bin/python3.Xt
# (a path inside the root: run it with tools/sidrun.sh, as the root's other
# interpreters). Debian's patches are applied (apt-get source); the build is
# upstream's default -O3 with symbols, not stripped, no PGO/LTO.
#
#   tools/pyft.sh [3.14 3.15 ...]   default: 3.14 3.15
#
# Prints the interpreter paths (inside the root), one a line. A finished
# build is marked PREFIX/.bpfprof-ft-ok and never built again; a half-built
# one is removed and built again. About 9-12 minutes per version on 2 CPUs
# (configure ~1.5 min, make ~8 min, install ~1 min), most of it the
# compiler; the source package is ~25 MB from the mirror. On failure one
# line on stderr ("pyft: ...") and exit 1; the build's log is kept at
# SIDROOT/var/tmp/bpfprof-ft/build-3.Xt.log. Takes SIDROOT.ft.lock, so
# parallel callers wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "pyft: $*" >&2; exit 1; }
((EUID == 0)) || die "must run as root (chroot)"

versions=("$@")
((${#versions[@]})) || versions=(3.14 3.15)

prefix_of() { echo "/opt/bpfprof/python$1t"; }

all_built() {
	local v
	for v in "${versions[@]}"; do
		[[ -f $ROOT$(prefix_of "$v")/.bpfprof-ft-ok ]] || return 1
	done
}

print_paths() {
	local v
	for v in "${versions[@]}"; do
		echo "$(prefix_of "$v")/bin/python${v}t"
	done
}

for v in "${versions[@]}"; do
	[[ $v =~ ^3\.[0-9]+$ ]] || die "not a CPython minor version: $v"
done

ROOT=$("$here/sidroot.sh") || die "no sid root (tools/sidroot.sh failed)"
all_built && { print_paths; exit 0; }

exec 9>"$ROOT.ft.lock"
flock 9
all_built && { print_paths; exit 0; }

# Builds run in the root, in a private mount namespace (proc, dev): nothing
# is left mounted on the host when this ends, however it ends.
in_root() {
	unshare -m -- sh -c 'root=$1; shift
		mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 126
		exec chroot "$root" "$@"' sh "$ROOT" "$@"
}

APT=(env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false
	-o DPkg::Lock::Timeout=600 -q -y)
# what configure and make need beyond the root's gcc; dpkg-dev unpacks the source
BUILD_DEPS=(dpkg-dev make pkg-config zlib1g-dev libffi-dev)

src=/var/tmp/bpfprof-ft
mkdir -p "$ROOT$src"
if ! grep -qs '^deb-src ' "$ROOT/etc/apt/sources.list"; then
	sed -n 's/^deb \(.*\)/deb-src \1/p' "$ROOT/etc/apt/sources.list" | head -1 \
		>>"$ROOT/etc/apt/sources.list"
fi
in_root "${APT[@]}" update >&2 || die "apt-get update in the root failed"
in_root "${APT[@]}" install --no-install-recommends "${BUILD_DEPS[@]}" </dev/null >&2 ||
	die "installing the build's packages in the root failed"

for v in "${versions[@]}"; do
	prefix=$(prefix_of "$v")
	[[ -f $ROOT$prefix/.bpfprof-ft-ok ]] && continue
	rm -rf "${ROOT:?}$prefix"
	log=$src/build-${v}t.log
	echo "pyft: building python${v}t into $ROOT$prefix (log: $ROOT$log)" >&2
	start=$SECONDS
	# one tree per version, unpacked afresh: a tree left by a killed build
	# may hold half-written objects
	in_root sh -c '
		set -e
		v=$1 prefix=$2 src=$3
		cd "$src"
		rm -rf "python$v" && mkdir "python$v" && cd "python$v"
		apt-get -o Acquire::Check-Valid-Until=false -q source "python$v"
		cd "$(find . -maxdepth 1 -type d -name "python$v-*" | head -1)"
		./configure --disable-gil --prefix="$prefix" --without-ensurepip
		make -j"$(nproc)"
		make altinstall
		cd "$src" && rm -rf "python$v"
	' sh "$v" "$prefix" "$src" >"$ROOT$log" 2>&1 ||
		die "building python${v}t failed: see $ROOT$log"
	in_root "$prefix/bin/python${v}t" -c \
		'import sys; assert not sys._is_gil_enabled(), "GIL on"' ||
		die "$ROOT$prefix/bin/python${v}t does not run free-threaded"
	touch "$ROOT$prefix/.bpfprof-ft-ok"
	echo "pyft: python${v}t built in $((SECONDS - start)) s" >&2
done
print_paths
