#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The module graph of user/: which module includes which, and its cycles.

A module is a directory under user/ (collect, aggregate, write, ...) or, for
a file at user/'s top (cli.c, main.c, registry.c), that file's stem. An edge
A -> B is an `#include "B/..."` (or "B.h") in a file of A. The modules must
form a DAG (docs/design.md, "Layout"): a cycle means two modules can only be
understood, tested or changed together. Exit status 1 when there is one; the
include lines that make it are printed.

  tools/modgraph.py            edges, then cycles (none: "no cycles")
  tools/modgraph.py --layers   the modules bottom-up: each line includes only lines above it
"""
import os
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(user, path):
    parts = os.path.relpath(path, user).split(os.sep)
    return parts[0] if len(parts) > 1 else os.path.splitext(parts[0])[0]


def graph(user):
    """{module: {module it includes: [\"file -> header\", ...]}}"""
    edges = defaultdict(lambda: defaultdict(list))
    for d, _, files in os.walk(user):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            src = module_of(user, path)
            edges[src]  # a module that includes no other still counts
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if d != user and os.path.exists(os.path.join(d, inc)):
                        dst = src  # "x.h" next to the file
                    elif os.path.exists(os.path.join(user, inc)):
                        dst = module_of(user, os.path.join(user, inc))
                    else:
                        continue  # include/, build/ (skeletons), system
                    if dst != src:
                        edges[src][dst].append(f"{os.path.relpath(path, user)} -> {inc}")
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layers(edges):
    """Modules grouped by the length of their longest include chain down (DAG only)."""
    depth = {}

    def d(v):
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((d(w) for w in edges.get(v, {})), default=-1)
        return depth[v]

    for v in edges:
        d(v)
    by = defaultdict(list)
    for v, n in depth.items():
        by[n].append(v)
    return [sorted(by[n]) for n in sorted(by)]


def main():
    user = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "user")
    edges = graph(os.path.normpath(user))
    found = cycles(edges)
    if "--layers" in sys.argv[1:]:
        if found:
            print("cycles: no layers", file=sys.stderr)
            return 1
        for i, layer in enumerate(layers(edges)):
            print(f"{i}: {' '.join(layer)}")
        return 0
    for v in sorted(edges):
        print(f"{v} -> {' '.join(sorted(edges[v])) or '(nothing)'}")
    if not found:
        print("no cycles")
        return 0
    for comp in found:
        print(f"cycle: {' <-> '.join(comp)}")
        for a in comp:
            for b in comp:
                for why in edges[a].get(b, []):
                    print(f"  {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
