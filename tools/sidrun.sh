#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Runs a command inside a root made by tools/sidroot.sh, as a container runs
# one: chroot, in a private mount namespace that has proc, dev and sys, the
# host's /tmp, this repository and the current directory mounted at their own
# paths (so a test's scripts, files and bpfprof's heap sampler are where the
# host has them). The mounts live and die with the namespace: nothing is left
# mounted on the host, however the command ends, and nothing is mounted on
# the host's view of the root. One process throughout (each step execs the
# next), so `bpfprof -- tools/sidrun.sh ROOT python3.14 x.py` and `-p` of
# its pid profile the interpreter itself; the command's exit status is this
# script's.
#
#   tools/sidrun.sh ROOT CMD [ARG...]
#
# Extra directories to mount: BPFPROF_SIDRUN_BIND="/a:/b". Needs root.
set -eu

[ $# -ge 2 ] || { echo "usage: sidrun.sh ROOT CMD [ARG...]" >&2; exit 2; }
root=$1
shift
[ -x "$root/bin/sh" ] || { echo "sidrun: $root is not a root (no /bin/sh)" >&2; exit 126; }
repo=$(cd "$(dirname "$0")/.." && pwd)

exec unshare -m --propagation private -- sh -c '
	root=$1 repo=$2 cwd=$3
	shift 3
	mount -t proc proc "$root/proc" || exit 126
	for d in /dev /sys; do
		mount --rbind "$d" "$root$d" || exit 126
	done
	binds="/tmp:$repo:${BPFPROF_SIDRUN_BIND:-}"
	case $cwd in /) ;; *) binds="$binds:$cwd" ;; esac
	IFS=:
	for d in $binds; do
		[ -n "$d" ] && [ -d "$d" ] || continue
		mkdir -p "$root$d" && mount --rbind "$d" "$root$d" || exit 126
	done
	unset IFS
	exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$cwd" "$@"
' sh "$root" "$repo" "$PWD" "$@"
