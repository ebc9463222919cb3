#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# The README's two commands on a fresh Debian 12, as a new user meets them:
# a minbase debootstrap root (no make, no git, no compiler), a copy of this
# tree as a tarball would give it (git archive: tracked files only, no build/,
# no node_modules), root inside. Prints how long each command took.
#
#   tools/minbase.sh [--test] [--keep] [--rev REV] [--tree DIR]
#
#   --test      also run the README's second command (the whole test suite)
#   --keep      keep the root afterwards (its path is printed), else removed
#   --rev REV   the tree at this commit (default HEAD of --tree)
#   --tree DIR  the checkout to take the tree from (default this one)
#
# The base root, debootstrap --variant=minbase bookworm from the host's own
# Debian mirror (read from /etc/apt), is built once into
# $BPFPROF_MINBASE (default /var/cache/bpfprof/minbase-bookworm) and copied
# for every run, so each run starts from the same untouched root; the apt
# downloads of a run are its own (a fresh machine's). Everything runs in a
# private mount namespace (unshare -m): the root is bind-mounted onto itself
# (so it is a mount point, as a container's root is) and made the
# namespace's root by pivot_root (a chroot would refuse user namespaces to
# the tests that play an unprivileged user), with /proc, /sys and
# /dev from the host: the kernel is the host's, so BPF, perf events and
# uprobes work as on the host. Mounts end with the namespace.
#
# The commands are read from README.md's "Two commands" section: the first
# and second ```sh blocks under it. Between them, `make install` (which the
# README names next) must put bpfprof and its man page in place. Exit status: 0 when every command run
# succeeded; 1 otherwise (the failing command's output is above).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tree=$here
rev=HEAD
run_test=0
keep=0
while (($#)); do
	case $1 in
	--test) run_test=1 ;;
	--keep) keep=1 ;;
	--rev) rev=$2; shift ;;
	--tree) tree=$2; shift ;;
	*) echo "usage: tools/minbase.sh [--test] [--keep] [--rev REV] [--tree DIR]" >&2; exit 2 ;;
	esac
	shift
done

BASE=${BPFPROF_MINBASE:-/var/cache/bpfprof/minbase-bookworm}
STAMP=$BASE/.bpfprof-minbase-ok

die() { echo "minbase: $*" >&2; exit 1; }
((EUID == 0)) || die "must run as root (debootstrap, chroot, BPF)"
for t in git unshare pivot_root flock; do
	command -v $t >/dev/null || die "$t not found"
done

# the README's commands: first and second ```sh block under "## Two commands"
readme_cmds=$(git -C "$tree" show "$rev:README.md" | awk '
	/^## / { sec = ($0 ~ /^## Two commands/) }
	sec && /^```sh$/ { inb = 1; n++; next }
	inb && /^```$/ { inb = 0; next }
	inb { print n "\t" $0 }')
first=$(awk -F'\t' '$1 == 1 { print $2 }' <<<"$readme_cmds")
second=$(awk -F'\t' '$1 == 2 { print $2 }' <<<"$readme_cmds")
[[ -n $first && -n $second ]] || die "README.md at $rev has no two \`\`\`sh blocks under '## Two commands'"

# 1. the base root, once
if [[ ! -f $STAMP ]]; then
	mkdir -p "$(dirname "$BASE")"
	exec 9>"$BASE.lock"
	flock 9
	if [[ ! -f $STAMP ]]; then
		command -v debootstrap >/dev/null || {
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=900 \
				debootstrap </dev/null >&2 || die "cannot install debootstrap"
		}
		mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\?$/\1/p' \
			/etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
		[[ -n $mirror ]] || mirror=$(sed -n 's/^deb \[\?[^]]*\]\? *\(http[^ ]*\/debian\)\/\? .*/\1/p' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
		[[ -n $mirror ]] || die "no Debian mirror found in /etc/apt"
		rm -rf "$BASE"
		echo "minbase: debootstrap --variant=minbase bookworm from $mirror into $BASE" >&2
		debootstrap --variant=minbase bookworm "$BASE" "$mirror" >&2 ||
			die "debootstrap failed (see above)"
		rm -rf "$BASE/var/cache/apt/archives/"*.deb "$BASE/var/lib/apt/lists/"* 2>/dev/null || true
		touch "$STAMP"
	fi
	exec 9>&-
fi

# 2. a fresh copy, and the tree as a tarball gives it
work=$(mktemp -d /var/tmp/bpfprof-minbase.XXXXXX)
root=$work/root
cleanup() {
	local p
	# what still runs in the root (an interrupted command, a daemon a test left)
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/root" 2>/dev/null) == "$root" ]] && kill -KILL "${p#/proc/}" 2>/dev/null
	done
	if ((keep)); then
		echo "minbase: kept $root"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cp -a "$BASE" "$root"
rm -f "$root/.bpfprof-minbase-ok"
# what a machine on this network is given: its resolver, as the installer
# writes it, and the site's own CA certificates (a TLS-inspecting proxy's:
# without them npm ci fails with SELF_SIGNED_CERT_IN_CHAIN), which the
# ca-certificates package adds to the store when make test-deps installs it
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
commit=$(git -C "$tree" rev-parse --short "$rev")
mkdir -p "$root/root"
# umask 022: the modes a clone gets (git archive's default, 002, leaves every
# directory group-writable, and bpfprof refuses a cache below such a directory)
git -C "$tree" -c tar.umask=0022 archive --prefix=bpfprof/ "$rev" | tar -x -C "$root/root"
echo "minbase: $(. "$root/etc/os-release"; echo "$PRETTY_NAME"), minbase, tree $commit in /root/bpfprof"
for t in make git gcc clang; do
	[[ -e $root/usr/bin/$t ]] && echo "minbase: note: the base root has $t"
done

# 3. each command in the root, as root, in a login-like clean environment
in_root() { # LABEL COMMAND
	local label=$1 cmd=$2 t0 t1 rc=0
	echo "minbase: [$label] $cmd"
	t0=$(date +%s)
	unshare -m --propagation private -- bash -c '
		set -e
		r=$1
		mount --bind "$r" "$r"
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		# pivot_root, not chroot: the kernel refuses user namespaces to a
		# chrooted process (unshare -U), as no fresh machine or container does
		cd "$r"
		mkdir -p .minbase-old
		pivot_root . .minbase-old
		umount -l /.minbase-old
		rmdir /.minbase-old
		exec /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			/bin/bash -c "cd /root/bpfprof || exit; $2"' bash "$root" "$cmd" </dev/null &
	wait $! || rc=$? # in the background: a signal to this script is taken at once
	t1=$(date +%s)
	echo "minbase: [$label] exit $rc after $((t1 - t0)) s ($(cut -d' ' -f1-3 /proc/loadavg) load)"
	timings+=("$label: $((t1 - t0)) s, exit $rc")
	return $rc
}

timings=()
status=0
in_root first "$first" || status=1
if ((status == 0)); then
	du_s=$(du -sm "$root" | cut -f1)
	echo "minbase: root after the first command: $du_s MB"
	# what the README says next: make install, then man bpfprof works
	in_root install 'make install && man -w bpfprof && bpfprof --version' || status=1
fi
if ((run_test && status == 0)); then
	in_root second "$second" || status=1
fi
echo "minbase: tree $commit: ${timings[*]}"
exit $status
