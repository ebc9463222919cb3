#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Cost you can quote (run by tools/bench.sh first, or alone; as root): what
# a sample costs the machine in CPU time, not in wall-time ratios, which on a
# shared VM drift by more than the overhead being measured.
#
# Per sample, at each of COST_FREQS (whole machine, every CPU busy with
# bench_cpu, `bpfprof -a -F F -d COST_SECS -v`):
#   BPF      the sampling program's time per walked sample: bpfprof -v times
#            each sample it walks in BPF and prints the median (from a
#            log-linear histogram, 6% buckets) and the mean; the median is
#            the figure that repeats on a shared VM (the mean is the tail's:
#            samples that find caches cold or lose the vCPU), the mean is
#            what the machine pays. bpfprof -v also turns on BPF run-time
#            statistics, as kernel.bpf_stats_enabled does, and prints
#            run_time_ns/run_cnt from bpf_prog_info, which agrees with the
#            mean where every run walks (-a);
#   agent    its user+sys CPU from the ready line to the stop (getrusage at
#            both; the -v "cost:" line) over the samples; start-up (CPU
#            before the ready line) apart; and that CPU split (the second
#            "cost:" line) into unwind table builds (CFI compiled or loaded
#            from --unwind-cache, rows written: once per binary met, s) and
#            the steady state (samples, side band, processes, Python reads:
#            us per sample);
#   irq      the sampling interrupt itself: tests/workloads/irqgap pinned to
#            CPU 0 sums the short gaps in its clock reads while the sampler's
#            perf events at 999 Hz, carrying an empty BPF program, are
#            switched on and off in 250 ms slices (--alternate, COST_IRQ_SECS
#            in all); each pair of slices gives (gap time per second of
#            running, on - off) over the interrupts per second; all on
#            slices against all off slices (pooled) is the cost of one
#            interrupt (measured at 999 Hz, applied at every rate; the median
#            pair is printed too, and moved more between runs: 11.0 -> 13.1
#            us against pooled 11.1 -> 11.9 on 2026-11-26). Slices a few
#            hundred ms apart see nearly the same
#            hypervisor and neighbours; runs seconds apart did not (the gap
#            time with no events moved by more than the figure);
# and as % of the machine: ((irq + BPF mean) x samples + agent) / (COST_SECS x
# CPUs). perf record -a -g gets the same: its user+sys CPU (/usr/bin/time,
# start-up included) per sample it wrote, and its interrupt (with perf's
# kernel callchain walk and copy) measured as above, perf record's events
# switched through --control fifo:CTL,ACK.
# Each figure is measured COST_REPS times: the median and the spread
# ((max-min)/median) are printed.
#
# Environment: BPFPROF, WORKLOADS, COST_FREQS ("19 99 999"), COST_SECS (5),
# COST_REPS (3), COST_IRQ_SECS (20), BENCH_RECORD=1 to add a row to
# bench/history/runs.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BPFPROF=${BPFPROF:-$root/build/bpfprof}
WORKLOADS=${WORKLOADS:-$root/build/workloads}
COST_FREQS=${COST_FREQS:-"19 99 999"}
COST_SECS=${COST_SECS:-5}
COST_REPS=${COST_REPS:-3}
COST_IRQ_SECS=${COST_IRQ_SECS:-20}
BENCH_RECORD=${BENCH_RECORD:-0}

die() {
	echo "cost: $*" >&2
	exit 1
}

((EUID == 0)) || die "must run as root"
[[ $COST_SECS =~ ^[1-9][0-9]*$ ]] || die "bad COST_SECS '$COST_SECS': expected a positive integer"
[[ $COST_REPS =~ ^[1-9][0-9]*$ ]] || die "bad COST_REPS '$COST_REPS': expected a positive integer"
[[ $COST_IRQ_SECS =~ ^[1-9][0-9]*$ ]] || die "bad COST_IRQ_SECS '$COST_IRQ_SECS': expected a positive integer"
for f in $COST_FREQS; do
	[[ $f =~ ^[1-9][0-9]*$ ]] || die "bad COST_FREQS entry '$f': expected Hz"
done
[[ -x $BPFPROF ]] || die "bpfprof not found at '$BPFPROF' (make)"
for w in bench_cpu irqgap; do
	[[ -x $WORKLOADS/$w ]] || die "$WORKLOADS/$w not found: make -C tests/workloads BUILD=$WORKLOADS"
done
command -v perf >/dev/null || die "perf not found: run tools/install-deps.sh"

ncpu=$(nproc)
tmp=$(mktemp -d /tmp/bpfprof-cost.XXXXXX)
bg_pids=()
cleanup() {
	local p

	for p in "${bg_pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

start_load() {
	(
		trap 'kill "$child" 2>/dev/null; exit 0' TERM
		while :; do
			"$WORKLOADS/bench_cpu" >/dev/null &
			child=$!
			wait "$child" || true
		done
	) &
	load_pid=$!
	bg_pids+=("$load_pid")
	sleep 0.5
}

stop_load() {
	kill -TERM "$load_pid" 2>/dev/null || true
	wait "$load_pid" 2>/dev/null || true
}

# wait_line FILE PATTERN PID: until FILE has a line matching PATTERN (60 s)
wait_line() {
	local i

	for ((i = 0; i < 600; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || die "exited at start: $(tail -n 3 "$1")"
		sleep 0.1
	done
	die "no '$2' within 60 s"
}

stop() {
	kill -INT "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# med_spread V...: "median spread%" of the values
med_spread() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3g %.0f%%\n", m, m ? 100 * (v[NR] - v[1]) / (m < 0 ? -m : m) : 0 }'
}

# irq_once MODE: ns per interrupt on CPU 0 at 999 Hz, the events switched on
# and off in 250 ms slices (irqgap --alternate): "median pooled"
irq_once() {
	local out pid

	case $1 in
	empty) out=$("$WORKLOADS/irqgap" "$COST_IRQ_SECS" 0 --alternate 999) ;;
	perf)
		rm -f "$tmp/ctl" "$tmp/ack"
		mkfifo "$tmp/ctl" "$tmp/ack"
		(exec perf record -a -g -F 999 -D -1 --control "fifo:$tmp/ctl,$tmp/ack" \
			-o "$tmp/i.data" -q 2>"$tmp/i.err" >/dev/null) &
		pid=$!
		bg_pids+=("$pid")
		sleep 2
		out=$("$WORKLOADS/irqgap" "$COST_IRQ_SECS" 0 --alternate 999 \
			--control "$tmp/ctl" "$tmp/ack")
		stop "$pid"
		;;
	esac
	[[ $out =~ median_ns\ ([0-9.-]+).*pooled_ns\ ([0-9.-]+) ]] || die "irqgap printed '$out'"
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}

echo "cost: $ncpu CPUs, $(uname -r); window $COST_SECS s, $COST_REPS runs each (median, spread = (max-min)/median)"

# 1. The sampling interrupt: an empty program's events, perf record -g's, switched on and off
declare -A irq
for ((rep = 0; rep < COST_REPS; rep++)); do
	for m in empty perf; do
		read -r med pooled < <(irq_once "$m")
		irq[$m]+="$(awk -v v="$med" 'BEGIN { printf "%.3f", v / 1e3 }') "
		irq[$m.pooled]+="$(awk -v v="$pooled" 'BEGIN { printf "%.3f", v / 1e3 }') "
	done
done
read -r irq_empty irq_empty_sp < <(med_spread ${irq[empty]})
read -r irq_p irq_p_sp < <(med_spread ${irq[perf]})
read -r irq_empty_pool irq_empty_pool_sp < <(med_spread ${irq[empty.pooled]})
read -r irq_p_pool irq_p_pool_sp < <(med_spread ${irq[perf.pooled]})
printf '\n%-52s %10s %8s\n' "interrupt, CPU 0 at 999 Hz (us per sample)" median spread
printf '%-52s %10s %8s\n' "empty BPF program: the interrupt itself" "$irq_empty_pool" "$irq_empty_pool_sp"
printf '%-52s %10s %8s\n' "  (median pair)" "$irq_empty" "$irq_empty_sp"
printf '%-52s %10s %8s\n' "perf record -a -g (interrupt + callchain + copy)" "$irq_p_pool" "$irq_p_pool_sp"
printf '%-52s %10s %8s\n' "  (median pair)" "$irq_p" "$irq_p_sp"

# 2. BPF and agent per sample, whole machine busy
start_load
declare -A res
printf '\n%-6s %-34s %10s %8s\n' Hz "per sample (us) / machine" median spread
for f in $COST_FREQS; do
	bpf=() bpfmed=() agent=() tables=() steady=() startup=() pct=() perfus=() perfpct=() runs=()
	for ((rep = 0; rep < COST_REPS; rep++)); do
		"$BPFPROF" -a -F "$f" -d "$COST_SECS" -v -o "$tmp/c.folded" 2>"$tmp/c.err" ||
			die "bpfprof failed: $(tail -n 3 "$tmp/c.err")"
		[[ $(grep 'bpfprof: BPF:' "$tmp/c.err") =~ BPF:\ ([0-9.]+)\ ns\ per\ run\ \(([0-9]+)\ runs ]] ||
			die "no BPF line from bpfprof -v: $(tail -n 3 "$tmp/c.err")"
		bns=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
		[[ $(grep 'bpfprof: BPF:' "$tmp/c.err") =~ median\ ([0-9.]+)\ ns ]] ||
			die "no median from bpfprof -v: $(tail -n 3 "$tmp/c.err")"
		bpfmed+=("$(awk -v b="${BASH_REMATCH[1]}" 'BEGIN { printf "%.3f", b / 1e3 }')")
		[[ $(grep 'bpfprof: cost:' "$tmp/c.err") =~ start-up\ ([0-9.]+)\ s.*recording\ ([0-9.]+)\ s\ CPU ]] ||
			die "no cost line from bpfprof -v: $(tail -n 3 "$tmp/c.err")"
		startup+=("${BASH_REMATCH[1]}")
		rec=${BASH_REMATCH[2]}
		[[ $(grep 'bpfprof: cost: recording =' "$tmp/c.err") =~ unwind\ tables\ ([0-9.]+)\ s.*steady\ ([0-9.]+)\ s\ CPU\ \(([0-9.]+)\ us ]] ||
			die "no recording split from bpfprof -v: $(tail -n 3 "$tmp/c.err")"
		tables+=("${BASH_REMATCH[1]}")
		steady+=("${BASH_REMATCH[3]}")
		((n > 0)) || die "no samples at $f Hz"
		runs+=("$n")
		bpf+=("$(awk -v b="$bns" 'BEGIN { printf "%.3f", b / 1e3 }')")
		agent+=("$(awk -v a="$rec" -v n="$n" 'BEGIN { printf "%.3f", a * 1e6 / n }')")
		pct+=("$(awk -v a="$rec" -v b="$bns" -v i="$irq_empty_pool" -v n="$n" -v s="$COST_SECS" \
			-v c="$ncpu" 'BEGIN { printf "%.4f", 100 * (a + (b / 1e9 + i / 1e6) * n) / (s * c) }')")

		/usr/bin/time -f 'rusage %U %S' -o "$tmp/p.time" perf record -a -g -F "$f" \
			-o "$tmp/c.data" -- sleep "$COST_SECS" 2>"$tmp/p.err" >/dev/null ||
			die "perf record failed: $(tail -n 3 "$tmp/p.err")"
		[[ $(cat "$tmp/p.err") =~ \(([0-9]+)\ samples\) ]] || die "perf printed no sample count"
		n=${BASH_REMATCH[1]}
		[[ $(cat "$tmp/p.time") =~ rusage\ ([0-9.]+)\ ([0-9.]+) ]] || die "no rusage for perf"
		a=$(awk -v u="${BASH_REMATCH[1]}" -v s="${BASH_REMATCH[2]}" 'BEGIN { print u + s }')
		perfus+=("$(awk -v a="$a" -v n="$n" 'BEGIN { printf "%.3f", a * 1e6 / n }')")
		perfpct+=("$(awk -v a="$a" -v i="$irq_p_pool" -v n="$n" -v s="$COST_SECS" -v c="$ncpu" \
			'BEGIN { printf "%.4f", 100 * (a + i / 1e6 * n) / (s * c) }')")
	done
	for k in runs startup bpfmed bpf agent tables steady pct perfus perfpct; do
		declare -n arr=$k
		res[$f.$k]=$(med_spread "${arr[@]}")
		unset -n arr
	done
	printf '%-6s %-34s %10s %8s\n' "$f" "samples in the window" ${res[$f.runs]}
	printf '%-6s %-34s %10s %8s\n' "" "bpfprof start-up CPU (s)" ${res[$f.startup]}
	printf '%-6s %-34s %10s %8s\n' "" "bpfprof BPF median" ${res[$f.bpfmed]}
	printf '%-6s %-34s %10s %8s\n' "" "bpfprof BPF per run (mean)" ${res[$f.bpf]}
	printf '%-6s %-34s %10s %8s\n' "" "bpfprof agent" ${res[$f.agent]}
	printf '%-6s %-34s %10s %8s\n' "" "  of it unwind table builds (s)" ${res[$f.tables]}
	printf '%-6s %-34s %10s %8s\n' "" "  the rest: steady state" ${res[$f.steady]}
	printf '%-6s %-34s %10s %8s\n' "" "bpfprof % of machine (irq+BPF+agent)" ${res[$f.pct]}
	printf '%-6s %-34s %10s %8s\n' "" "perf record agent" ${res[$f.perfus]}
	printf '%-6s %-34s %10s %8s\n' "" "perf record % of machine (irq+agent)" ${res[$f.perfpct]}
done
stop_load

if [[ $BENCH_RECORD == 1 ]]; then
	results=$root/bench/history/runs.md
	mkdir -p "$(dirname "$results")"
	[[ -f $results ]] || printf '%s\n' '<!-- SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) -->' \
		'# bpfprof benchmark runs' '' \
		'Rows are appended by `BENCH_RECORD=1 make bench`; the current figures are in ../RESULTS.md.' \
		>"$results"
	if ! grep -q '^## Cost' "$results"; then
		head="| date | runs | irq µs (empty prog) | irq µs perf -g"
		sep="|---|---|---|---"
		for f in $COST_FREQS; do
			head+=" | $f Hz"
			sep+="|---"
		done
		printf '\n## Cost\n\nColumns as in bench/history/2026-11.md, "Cost".\n\n%s\n%s\n' \
			"$head | start-up s CPU |" "$sep|---|" >>"$results"
	fi
	row="| $(date -u +%Y-%m-%dT%H:%MZ) | $COST_REPS | $irq_empty_pool ($irq_empty_pool_sp) | $irq_p_pool ($irq_p_pool_sp)"
	cell() { echo "$(cut -d' ' -f1 <<<"${res[$1]}") ($(cut -d' ' -f2 <<<"${res[$1]}"))"; }
	for f in $COST_FREQS; do
		row+=" | $(cell "$f.bpf") + $(cell "$f.agent") [steady $(cell "$f.steady")]"
		row+=" = $(cut -d' ' -f1 <<<"${res[$f.pct]}")%"
		row+=" / perf $(cell "$f.perfus") = $(cut -d' ' -f1 <<<"${res[$f.perfpct]}")%"
	done
	row+=" | $(cut -d' ' -f1 <<<"${res[$(awk '{ print $1 }' <<<"$COST_FREQS").startup]}") |"
	python3 - "$results" "$row" <<'PY'
import sys
path, row = sys.argv[1:]
lines = open(path).read().rstrip("\n").split("\n")
i = next(i for i, l in enumerate(lines) if l.startswith("## Cost"))
j = i + 1
while j < len(lines) and not lines[j].startswith("|"):
    j += 1
while j < len(lines) and lines[j].startswith("|"):
    j += 1
lines.insert(j, row)
open(path, "w").write("\n".join(lines) + "\n")
PY
	echo "cost: appended to $results"
fi
