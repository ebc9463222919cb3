#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Builds (once) a Debian sid root for the tests that need software newer than
# Debian 12: python3.13/3.14/3.15 with their -dev headers, python3-memray
# (the heap peer), python3-torch. Processes run in it with chroot, so to
# bpfprof their files live under another root, as a container's do.
#
#   tools/sidroot.sh [DIR]      default $BPFPROF_SIDROOT or /var/cache/bpfprof/sid
#
# The mirror is the host's own (read from /etc/apt), so this works where only
# Debian's mirror is reachable. DIR/.bpfprof-sidroot-ok marks a finished root;
# a half-built one (interrupted) is removed and built again. Prints DIR on
# success; on failure one line on stderr and exit 1. Takes the lock
# DIR.lock, so parallel callers wait for one build.
set -euo pipefail

DIR=${1:-${BPFPROF_SIDROOT:-/var/cache/bpfprof/sid}}
STAMP=$DIR/.bpfprof-sidroot-ok
PKGS=(python3.13 python3.13-dev python3.14 python3.14-dev python3.15 python3.15-dev
	python3-memray python3-torch python3-numpy gcc libc6-dev procps)

die() { echo "sidroot: $*" >&2; exit 1; }
((EUID == 0)) || die "must run as root (debootstrap, chroot)"
[[ -f $STAMP ]] && { echo "$DIR"; exit 0; }

mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"
flock 9
[[ -f $STAMP ]] && { echo "$DIR"; exit 0; }

command -v debootstrap >/dev/null || {
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
		debootstrap </dev/null >&2 || die "cannot install debootstrap"
}

# the host's Debian mirror: first URIs:/deb line that names a debian archive
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\?$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[[ -n $mirror ]] || mirror=$(sed -n 's/^deb \[\?[^]]*\]\? *\(http[^ ]*\/debian\)\/\? .*/\1/p' \
	/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
[[ -n $mirror ]] || die "no Debian mirror found in /etc/apt"

umount_all() {
	local m
	for m in dev/pts dev proc; do
		mountpoint -q "$DIR/$m" && umount -l "$DIR/$m" || true
	done
}
trap umount_all EXIT

umount_all
rm -rf "$DIR"
echo "sidroot: debootstrap sid from $mirror into $DIR" >&2
debootstrap --variant=minbase sid "$DIR" "$mirror" >&2 || die "debootstrap failed (see above)"

mount -t proc proc "$DIR/proc"
mount --bind /dev "$DIR/dev"
APT=(chroot "$DIR" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false -q -y)
"${APT[@]}" update >&2 || die "apt-get update in the root failed"
"${APT[@]}" install --no-install-recommends "${PKGS[@]}" </dev/null >&2 || die "apt-get install in the root failed"
"${APT[@]}" clean >&2 || true

touch "$STAMP"
echo "$DIR"
