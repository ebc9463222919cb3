#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Check a Chrome Trace Event Format file the way a viewer would need it.

    tools/check_chrome.py TRACE.json [--summary]

Checks: the file is JSON (object form with traceEvents, or a bare array);
every event has the fields its phase requires, with the right types; B/E are
balanced per thread (every E closes an open B, nothing is left open, and an
E never comes before its B); every flow start (s) has exactly one flow end
(f) with the same id, not earlier; complete (X) slices on one thread nest
(none overlaps another partially); timestamps are monotonic per track in
file order. Exit status 0 when the file passes, 1 with one line per problem
(at most 20) otherwise. --summary prints counts per phase and category as
JSON on stdout (for tests).

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
    "E": {},
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
               "threads": {}, "processes": {}, "flows": 0}

    def bad(i, msg):
        problems.append(f"event {i}: {msg}")

    if isinstance(obj, dict):
        events = obj.get("traceEvents")
        if not isinstance(events, list):
            return ["no traceEvents array"], summary
    elif isinstance(obj, list):
        events = obj
    else:
        return ["top level is neither an object nor an array"], summary

    open_b = defaultdict(list)      # (pid, tid) -> [(name, ts)]
    open_x = defaultdict(list)      # (pid, tid) -> [end ts] of enclosing X
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
        elif ph == "B":
            open_b[(pid, tid)].append((e.get("name"), ts))
        elif ph == "E":
            if not open_b[(pid, tid)]:
                bad(i, f"E on {pid}/{tid} at {ts} closes nothing")
            else:
                open_b[(pid, tid)].pop()
        elif ph == "X":
            dur = e.get("dur")
            if _is(dur, NUM):
                if dur < 0:
                    bad(i, "X: negative dur")
                stack = open_x[(pid, tid)]
                while stack and stack[-1] <= ts:
                    stack.pop()
                if stack and ts + dur > stack[-1] + 1e-6:
                    bad(i, f"X {e.get('name')!r} at {ts} overlaps its enclosing slice "
                        f"(ends {ts + dur} > {stack[-1]}) on {pid}/{tid}")
                stack.append(ts + dur)
        elif ph in ("s", "f"):
            fid = e.get("id")
            table = flows_s if ph == "s" else flows_f
            if fid in table:
                bad(i, f"{ph}: flow id {fid!r} used twice")
            table[fid] = ts
            if ph == "f" and e.get("bp") not in (None, "e"):
                bad(i, "f: bp must be 'e'")
    for (pid, tid), stack in open_b.items():
        for name, ts in stack:
            problems.append(f"B {name!r} at {ts} on {pid}/{tid} never ends")
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
