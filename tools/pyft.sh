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
#   tools/pyft.sh [3.13 3.14 3.15 ...]   default: 3.13 3.14 3.15
#
# Prints the paths (inside the root) of those built, one a line; one that
# cannot be built gets one line on stderr ("pyft: python3.14t: ...") and the
# exit status is 1. A version whose source cannot be had leaves that line in
# SIDROOT/opt/bpfprof/python3.Xt.nosource: the tests skip it with that
# reason without asking the mirror again (make test-roots asks again). A finished build is marked PREFIX/.bpfprof-ft-ok and
# never built again; a half-built one is removed and built again. About 9-12 minutes per version on 2 CPUs
# (configure ~1.5 min, make ~8 min, install ~1 min), most of it the
# compiler; the source package is ~25 MB from the mirror. The build's log
# is kept at SIDROOT/var/tmp/bpfprof-ft/build-3.Xt.log. Takes
# SIDROOT.ft.lock, so parallel callers wait for one build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "pyft: $*" >&2; exit 1; }
((EUID == 0)) || die "must run as root (chroot)"

versions=("$@")
((${#versions[@]})) || versions=(3.13 3.14 3.15)

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

# The source: Debian's package (apt-get source, newest version the mirror
# really has: a mirror may list a source whose files it does not carry), or
# a tarball of CPython's in $BPFPROF_CPYTHON_SRC (python3.X_*.orig.tar.* or
# Python-3.X.*.tar.*) where the mirror has none.
fetch_source() { # v -> unpacked tree in the current directory (in the root)
	in_root sh -c '
		set -e
		v=$1 src=$2 dir=$3
		cd "$src" && rm -rf "python$v" && mkdir "python$v" && cd "python$v"
		if [ -n "$dir" ]; then
			t=$(ls "$dir"/python"$v"_*.orig.tar.* "$dir"/Python-"$v".*.tar.* 2>/dev/null | tail -1)
			[ -n "$t" ] && tar xf "$t" && exit 0
		fi
		for ver in $(apt-cache showsrc "python$v" | sed -n "s/^Version: //p" | sort -rV); do
			apt-get -o Acquire::Check-Valid-Until=false -q source "python$v=$ver" && exit 0
			rm -rf ./*
		done
		exit 1
	' sh "$1" "$src" "${BPFPROF_CPYTHON_SRC:+/bpfprof-src}" >"$ROOT$src/fetch-${1}t.log" 2>&1
}

failed=0
for v in "${versions[@]}"; do
	prefix=$(prefix_of "$v")
	[[ -f $ROOT$prefix/.bpfprof-ft-ok ]] && continue
	rm -rf "${ROOT:?}$prefix"
	log=$src/build-${v}t.log
	if [[ -n ${BPFPROF_CPYTHON_SRC:-} ]]; then
		mkdir -p "$ROOT/bpfprof-src"
		cp -f "$BPFPROF_CPYTHON_SRC"/* "$ROOT/bpfprof-src/" 2>/dev/null || true
	fi
	if ! fetch_source "$v"; then
		why="pyft: python${v}t: no CPython $v source: the mirror has no python$v source package (apt-get source: see $ROOT$src/fetch-${v}t.log) and BPFPROF_CPYTHON_SRC has no tarball of it"
		echo "$why" >&2
		# the tests read this and skip saying so, without asking the mirror again
		mkdir -p "$ROOT/opt/bpfprof"
		echo "$why" >"$ROOT$prefix.nosource"
		failed=1
		continue
	fi
	rm -f "$ROOT$prefix.nosource"
	echo "pyft: building python${v}t into $ROOT$prefix (log: $ROOT$log)" >&2
	start=$SECONDS
	if ! in_root sh -c '
		set -e
		v=$1 prefix=$2 src=$3
		cd "$src/python$v"
		cd "$(find . -mindepth 1 -maxdepth 1 -type d | head -1)"
		./configure --disable-gil --prefix="$prefix" --without-ensurepip --disable-test-modules
		make -j"$(nproc)"
		make altinstall
		cd "$src" && rm -rf "python$v"
	' sh "$v" "$prefix" "$src" >"$ROOT$log" 2>&1; then
		echo "pyft: python${v}t: the build failed: see $ROOT$log" >&2
		failed=1
		continue
	fi
	if ! in_root "$prefix/bin/python${v}t" -c \
		'import sys; assert not sys._is_gil_enabled(), "GIL on"'; then
		echo "pyft: python${v}t: $ROOT$prefix/bin/python${v}t does not run free-threaded" >&2
		failed=1
		continue
	fi
	touch "$ROOT$prefix/.bpfprof-ft-ok"
	echo "pyft: python${v}t built in $((SECONDS - start)) s" >&2
done
for v in "${versions[@]}"; do
	[[ -f $ROOT$(prefix_of "$v")/.bpfprof-ft-ok ]] && echo "$(prefix_of "$v")/bin/python${v}t"
done
exit $failed
