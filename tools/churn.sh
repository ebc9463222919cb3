#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/churn.sh [SECONDS] [BPFPROF ARGS...]
#
# The agent's memory on a churning host: runs tests/workloads/py/churn.py
# (short processes, distinct libraries of 2000 functions dlopen'ed and
# unlinked, new code objects, new thread names) as nobody, and bpfprof
# (default: -a -F 499 -vv) beside it; prints the agent's RSS every 10 s and
# its own -vv "caches:" lines. Run as root.
set -eu
secs=${1:-120}
[ $# -gt 0 ] && shift
args=${*:--a -F 499 -vv}
top=$(cd "$(dirname "$0")/.." && pwd)
bpfprof=${BPFPROF:-$top/build/bpfprof}
dir=$(mktemp -d /tmp/churn.XXXXXX)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir/lib.c" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(2000):
        f.write("int churn_function_with_a_long_name_%d(int x) { return x * %d + 1; }\n" % (i, i))
    f.write("int lib_func(int x) { int s = 0; for (int i = 0; i < 1000; i++) s += x * i; return s; }\n")
PY
gcc -shared -fPIC -O1 -o "$dir/base.so" "$dir/lib.c"
chmod 1777 "$dir"
"$bpfprof" $args -o "$dir/out.pb.gz" 2>"$dir/agent.err" &
agent=$!
sleep 3
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$top/tests/workloads/py/churn.py" \
	"$secs" "$dir" &
work=$!
t=0
while kill -0 $work 2>/dev/null; do
	sleep 10
	t=$((t + 10))
	echo "t=${t}s rss_kib=$(awk '/^VmRSS/ {print $2}' /proc/$agent/status) fds=$(ls /proc/$agent/fd | wc -l)"
done
kill -INT $agent
wait $agent || true
grep -E "caches:|memory:|peak RSS|files:|side band:|end of run" "$dir/agent.err" | tail -12
