#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# "Real host" benchmark (run by tools/bench.sh, or alone, as root): the whole
# machine at 99 Hz for REALHOST_SECS (30) s while a PyTorch training loop
# (tools/realhost_train.py, Debian's python3-torch: ~315 libraries mapped)
# and pgbench against a scratch PostgreSQL cluster run; then `perf record -a
# -g` for as long on the same workloads. Prints, for each profiler: share of
# samples with an [unknown]/[missing frames] user frame, share reaching a
# process root, and of the training loop's PyTorch samples the share with a
# libtorch_cpu frame (tools/realhost_stats.py); for bpfprof also the unwind
# table rows in use, evictions, and its CPU (% of one core, start-up
# included), that CPU split into start-up, unwind table builds (once per
# binary; none for binaries in --unwind-cache) and the steady state, and
# peak RSS. REALHOST_ARGS: more bpfprof options (e.g. --unwind-cache off). Skipped (exit 0) when torch or PostgreSQL is missing
# (tools/install-deps.sh installs them). REALHOST_KEEP=DIR keeps the profiles.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BPFPROF=${BPFPROF:-$root/build/bpfprof}
SECS=${REALHOST_SECS:-30}
PY=/usr/bin/python3

skip() {
	echo "real host: skipped: $*"
	exit 0
}
die() {
	echo "bench_realhost: $*" >&2
	exit 1
}

((EUID == 0)) || die "must run as root"
[[ -x $BPFPROF ]] || die "bpfprof not found at '$BPFPROF'"
"$PY" -c 'import torch' 2>/dev/null || skip "python3-torch not installed"
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -n $pgbin && -x $pgbin/initdb && -x $pgbin/pg_ctl ]] || skip "postgresql not installed"
command -v pgbench >/dev/null || skip "pgbench (postgresql-contrib) not installed"
command -v perf >/dev/null || die "perf not found"

tmp=$(mktemp -d /tmp/bpfprof-realhost.XXXXXX)
chmod 0755 "$tmp"
pids=()
cleanup() {
	local p

	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	if [[ -f $tmp/pg/postmaster.pid ]]; then
		runuser -u postgres -- "$pgbin/pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [[ -n ${REALHOST_KEEP:-} ]]; then
		mkdir -p "$REALHOST_KEEP"
		cp "$tmp"/b.* "$tmp"/p.txt "$REALHOST_KEEP"/ 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# a scratch cluster on a socket in $tmp, no TCP
mkdir -p "$tmp/pg" "$tmp/sock"
chown postgres: "$tmp/pg" "$tmp/sock"
runuser -u postgres -- "$pgbin/initdb" -D "$tmp/pg" -A trust >/dev/null
runuser -u postgres -- "$pgbin/pg_ctl" -D "$tmp/pg" -l "$tmp/sock/log" -w \
	-o "-k $tmp/sock -c listen_addresses= -p 5499" start >/dev/null
runuser -u postgres -- pgbench -h "$tmp/sock" -p 5499 -i -s 4 postgres >/dev/null 2>&1 ||
	die "pgbench -i failed"

# both workloads for both profilers in a row, started before either
wl_secs=$((2 * SECS + 30))
"$PY" "$root/tools/realhost_train.py" "$wl_secs" >"$tmp/train.out" &
pids+=($!)
disown $! # killed at the end: no "Killed" line
runuser -u postgres -- pgbench -h "$tmp/sock" -p 5499 -c 2 -j 1 -T "$wl_secs" postgres \
	>"$tmp/pgbench.out" 2>&1 &
pids+=($!)
disown $!
for ((i = 0; i < 300; i++)); do
	grep -q ready "$tmp/train.out" && break
	sleep 0.1
done
grep -q ready "$tmp/train.out" || die "the training loop did not start"
sleep 2

/usr/bin/time -f '%U %S %M' -o "$tmp/time.txt" "$BPFPROF" -a -F 99 -d "$SECS" -v ${REALHOST_ARGS:-} \
	-o "$tmp/b.folded" 2>"$tmp/b.err" || die "bpfprof failed: $(tail -n 3 "$tmp/b.err")"
read -r u s rss_kb < <(tail -n 1 "$tmp/time.txt")
# -v resets the kernel's peak RSS when the end of the run begins (to report
# the end apart), so time's %M is the end's peak only: the agent's own
# "agent: ... peak RSS" line has the whole run's
agent_kb=$(sed -nE 's/^bpfprof: agent: .* peak RSS ([0-9]+) KiB$/\1/p' "$tmp/b.err")
[[ -z $agent_kb ]] || ((agent_kb < rss_kb)) || rss_kb=$agent_kb
b_cpu=$(awk -v u="$u" -v s="$s" -v t="$SECS" 'BEGIN { printf "%.1f%%", (u + s) * 100 / t }')
b_rss=$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f MB", k / 1024 }')
tables=$(grep -E '^bpfprof: unwind tables:' "$tmp/b.err" | sed 's/^bpfprof: //')
walked=$(grep -E 'had their tables. room' "$tmp/b.err" | sed 's/^bpfprof: //' || true)
# the agent's recording CPU: unwind table builds (once per binary) and the steady state
split=$(grep -E '^bpfprof: cost: recording =' "$tmp/b.err" | sed 's/^bpfprof: cost: //')
steady=$(sed -nE 's/.*steady ([0-9.]+) s CPU.*/\1/p' <<<"$split")
b_steady=$(awk -v a="${steady:-0}" -v t="$SECS" 'BEGIN { printf "%.2f%%", a * 100 / t }')
cache=$(grep -E '^bpfprof: unwind table cache' "$tmp/b.err" | sed 's/^bpfprof: //' || true)
warn=$(grep -E 'had no room for' "$tmp/b.err" || true)

perf record -a -g -F 99 -o "$tmp/p.data" -q -- sleep "$SECS" 2>"$tmp/p.err" ||
	die "perf record failed: $(tail -n 3 "$tmp/p.err")"
perf script -i "$tmp/p.data" -F comm,pid,tid,ip,sym,dso 2>/dev/null >"$tmp/p.txt" ||
	die "perf script failed"

echo "real host: -a -F 99 for $SECS s; PyTorch training loop (torch $("$PY" -c \
	'import torch; print(torch.__version__)')) + pgbench -c 2 on PostgreSQL $(basename "$(dirname "$pgbin")")"
echo "  bpfprof: $("$PY" "$root/tools/realhost_stats.py" folded "$tmp/b.folded")"
echo "  perf:    $("$PY" "$root/tools/realhost_stats.py" perf "$tmp/p.txt")"
echo "  bpfprof agent: CPU $b_cpu of one core (start-up included), peak RSS $b_rss"
echo "  bpfprof agent: $(grep -E '^bpfprof: cost: start-up' "$tmp/b.err" | sed 's/^bpfprof: cost: //')"
echo "  bpfprof agent: $split; steady state $b_steady of one core"
echo "  bpfprof $tables"
[[ -z $walked ]] || echo "  bpfprof $walked"
[[ -z $cache ]] || echo "  bpfprof $cache"
grep -E '^bpfprof: [0-9]+ samples' "$tmp/b.err" | sed 's/^/  /' || true
[[ -z $warn ]] || echo "  $warn"
tps=$(grep -oE 'tps = [0-9.]+' "$tmp/pgbench.out" | head -n 1 || true)
echo "  pgbench: ${tps:-still running}"
