#!/usr/bin/env python3
"""circles.py: no circles among the files of a module (issue "One core for the dispatcher").

Usage: circles.py NAME OBJECT... : reads each object file's defined and undefined symbols
with `nm`, draws an edge from a file to every other file of the same module that defines a
symbol it uses (a call, or a table it refers to), and fails, naming the files and the symbols,
when the edges form a circle. Prints the edges of each file either way."""
import collections
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[-1].startswith("lt_"):
            continue
        if parts[-2] == "U":
            used.add(parts[-1])
        elif parts[-2] in ("T", "D", "R", "B"):
            defined.add(parts[-1])
    return defined, used


def cycles(edges):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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


def main():
    name, objs = sys.argv[1], sys.argv[2:]
    owner, uses = {}, {}
    for obj in objs:
        f = os.path.basename(obj).split(".")[0]
        defined, used = symbols(obj)
        for d in defined:
            owner[d] = f
        uses[f] = used
    edges = collections.defaultdict(set)
    why = collections.defaultdict(set)
    for f, used in uses.items():
        edges[f]
        for u in used:
            g = owner.get(u)
            if g is not None and g != f:
                edges[f].add(g)
                why[(f, g)].add(u)
    for f in sorted(edges):
        print("%s -> %s" % (f, " ".join(sorted(edges[f])) or "-"))
    found = cycles(edges)
    for comp in found:
        print("circle in %s: %s" % (name, " ".join(comp)))
        for f in comp:
            for g in sorted(edges[f] & set(comp)):
                print("  %s -> %s: %s" % (f, g, " ".join(sorted(why[(f, g)]))))
    print("%s: %d files, %d circles" % (name, len(edges), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
