#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Check a Chrome Trace Event Format file the way a viewer would need it.

    tools/check_chrome.py TRACE.json [--summary]

Checks (the Trace Event Format document, and what viewers built on it need:
chrome://tracing, Perfetto's JSON importer, speedscope): the file is JSON
(object form with traceEvents, or a bare array); displayTimeUnit, if given,
is "ms" or "ns"; every event has the fields its phase requires, with the
right types; B/E are balanced per thread (every E closes an open B, nothing
is left open, and an E never comes before its B) and an E that names
itself names the B it closes (speedscope refuses an E whose name differs;
we require E to carry the name, since it rejects a missing one too);
complete (X) slices and B/E spans on one thread nest with each other (none
overlaps another partially: at one timestamp an E closes before the next
slice opens); no X slice on a thread begins at the very time another one
there ends (speedscope turns X slices into B/E pairs and, at one time, puts
a B before an E when their names match: a frame reopened under a new parent
then lands on the old stack and every later end is refused); every flow start (s) has exactly one flow end (f) with the
same id, not earlier; timestamps are monotonic per track in file order;
metadata names are strings. Exit status 0 when the file passes, 1 with one
line per problem (at most 20) otherwise. --summary prints counts per phase
and category, the named processes and threads, the tracks with slices but
no thread_name ("unnamed_threads"), the processes of those tracks with no
process_name ("unnamed_processes") and otherData.cpu_samples (the CPU
samples bpfprof's slices stand for; null if absent) as JSON on stdout.

Usable as a module: check(obj) returns (problems, summary).
"""
import json
import sys
from collections import defaultdict

NUM = (int, float)

# phase -> {field: types}; pid/tid/ts checked separately
REQUIRED = {
    "X": {"name": str, "dur": NUM},
    "B": {"name": str},
    "E": {"name": str},
    "s": {"name": str, "id": (int, str)},
    "f": {"name": str, "id": (int, str)},
    "C": {"name": str, "args": dict},
    "M": {"name": str, "args": dict},
    "i": {"name": str},
    "I": {"name": str},
}
METADATA = {"process_name": "name", "thread_name": "name",
            "process_sort_index": "sort_index", "thread_sort_index": "sort_index",
            "process_labels": "labels"}


def _is(v, types):
    # bool is an int in Python; JSON true is not a number
    return isinstance(v, types) and not isinstance(v, bool)


def check(obj):
    problems = []
    summary = {"phases": defaultdict(int), "categories": defaultdict(int),
               "threads": {}, "processes": {}, "flows": 0, "unnamed_threads": [],
               "unnamed_processes": [],
               "samples": None}

    def bad(i, msg):
        problems.append(f"event {i}: {msg}")

    if isinstance(obj, dict):
        events = obj.get("traceEvents")
        if not isinstance(events, list):
            return ["no traceEvents array"], summary
        if isinstance(obj.get("otherData"), dict):
            summary["samples"] = obj["otherData"].get("cpu_samples")
        if obj.get("displayTimeUnit", "ms") not in ("ms", "ns"):
            problems.append(f"displayTimeUnit {obj['displayTimeUnit']!r} is neither 'ms' nor 'ns'")
    elif isinstance(obj, list):
        events = obj
    else:
        return ["top level is neither an object nor an array"], summary

    # (pid, tid) -> the open spans, outermost first: [kind, name, ts, end]
    # (end None for a B until its E); X and B/E share one stack per thread
    open_s = defaultdict(list)
    x_begins, x_ends = defaultdict(set), defaultdict(dict)
    tracks = set()
    last_ts = {}                    # track -> ts
    flows_s = {}
    flows_f = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            bad(i, "not an object")
            continue
        ph = e.get("ph")
        if ph not in REQUIRED:
            bad(i, f"unknown or missing ph {ph!r}")
            continue
        summary["phases"][ph] += 1
        if "cat" in e:
            if not isinstance(e["cat"], str):
                bad(i, "cat is not a string")
            else:
                summary["categories"][e["cat"]] += 1
        if not _is(e.get("pid"), int):
            bad(i, f"{ph}: pid missing or not an integer")
            continue
        if ph != "C" and ph != "M" and not _is(e.get("tid"), int):
            bad(i, f"{ph}: tid missing or not an integer")
            continue
        if ph != "M" and not _is(e.get("ts"), NUM):
            bad(i, f"{ph}: ts missing or not a number")
            continue
        for field, types in REQUIRED[ph].items():
            if field not in e or not _is(e[field], types):
                bad(i, f"{ph}: {field} missing or of the wrong type")
        if "args" in e and not isinstance(e["args"], dict):
            bad(i, f"{ph}: args is not an object")
        pid, tid = e["pid"], e.get("tid", 0)
        if ph == "M":
            key = METADATA.get(e.get("name"))
            if key is None:
                continue
            if not isinstance(e.get("args"), dict) or key not in e["args"]:
                bad(i, f"M {e.get('name')}: args.{key} missing")
            elif key == "name" and not isinstance(e["args"]["name"], str):
                bad(i, f"M {e.get('name')}: args.name is not a string")
            elif e["name"] == "thread_name":
                summary["threads"][f"{pid}/{tid}"] = e["args"]["name"]
            elif e["name"] == "process_name":
                summary["processes"][str(pid)] = e["args"]["name"]
            continue
        ts = e["ts"]
        track = (pid, tid) if ph != "C" else (pid, "C", e.get("name"))
        if track in last_ts and ts < last_ts[track]:
            bad(i, f"{ph} at {ts} goes back in time on track {track} (last {last_ts[track]})")
        last_ts[track] = ts
        if ph == "C":
            for k, v in (e.get("args") or {}).items():
                if not _is(v, NUM):
                    bad(i, f"C: series {k!r} is not a number")
        elif ph in ("B", "E", "X"):
            stack = open_s[(pid, tid)]
            tracks.add((pid, tid))
            # X slices that ended by now are closed (1 ns of slack for µs floats)
            while stack and stack[-1][0] == "X" and stack[-1][3] <= ts + 1e-6:
                stack.pop()
            if ph == "B":
                stack.append(["B", e.get("name"), ts, None])
            elif ph == "E":
                if not stack:
                    bad(i, f"E on {pid}/{tid} at {ts} closes nothing")
                elif stack[-1][0] != "B":
                    bad(i, f"E on {pid}/{tid} at {ts} would close X {stack[-1][1]!r} that "
                        f"ends at {stack[-1][3]}")
                else:
                    b = stack.pop()
                    if "name" in e and e["name"] != b[1]:
                        bad(i, f"E {e['name']!r} on {pid}/{tid} at {ts} closes B {b[1]!r}")
            else:
                dur = e.get("dur")
                if _is(dur, NUM):
                    if dur < 0:
                        bad(i, "X: negative dur")
                    outer = stack[-1] if stack else None
                    if outer and outer[0] == "X" and ts + dur > outer[3] + 1e-6:
                        bad(i, f"X {e.get('name')!r} at {ts} overlaps its enclosing slice "
                            f"(ends {ts + dur} > {outer[3]}) on {pid}/{tid}")
                    stack.append(["X", e.get("name"), ts, ts + dur])
                    x_begins[(pid, tid)].add(ts)
                    x_ends[(pid, tid)][ts + dur] = e.get("name")
        elif ph in ("s", "f"):
            fid = e.get("id")
            table = flows_s if ph == "s" else flows_f
            if fid in table:
                bad(i, f"{ph}: flow id {fid!r} used twice")
            table[fid] = ts
            if ph == "f" and e.get("bp") not in (None, "e"):
                bad(i, "f: bp must be 'e'")
    for track, ends in x_ends.items():
        for t in sorted(x_begins[track].intersection(ends))[:3]:
            problems.append(f"X {ends[t]!r} on {track[0]}/{track[1]} ends at {t}, where "
                            f"another X begins")
    for (pid, tid), stack in open_s.items():
        for kind, name, ts, _ in stack:
            if kind == "B":
                problems.append(f"B {name!r} at {ts} on {pid}/{tid} never ends")
    summary["unnamed_threads"] = sorted(f"{pid}/{tid}" for pid, tid in tracks
                                        if f"{pid}/{tid}" not in summary["threads"])
    summary["unnamed_processes"] = sorted({str(pid) for pid, _ in tracks} -
                                          set(summary["processes"]))
    for fid, ts in flows_s.items():
        if fid not in flows_f:
            problems.append(f"flow {fid!r} starts at {ts} and never ends")
        elif flows_f[fid] < ts:
            problems.append(f"flow {fid!r} ends at {flows_f[fid]} before it starts at {ts}")
    for fid in flows_f:
        if fid not in flows_s:
            problems.append(f"flow {fid!r} ends but never starts")
    summary["flows"] = len(flows_s)
    summary["phases"] = dict(summary["phases"])
    summary["categories"] = dict(summary["categories"])
    return problems, summary


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    try:
        with open(argv[1], "rb") as f:
            obj = json.load(f)
    except (OSError, ValueError) as err:
        print(f"check_chrome: {argv[1]}: {err}", file=sys.stderr)
        return 1
    problems, summary = check(obj)
    for p in problems[:20]:
        print(f"check_chrome: {argv[1]}: {p}", file=sys.stderr)
    if len(problems) > 20:
        print(f"check_chrome: ... and {len(problems) - 20} more", file=sys.stderr)
    if "--summary" in argv[2:]:
        json.dump(summary, sys.stdout, indent=1, sort_keys=True)
        print()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
