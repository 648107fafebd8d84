#!/usr/bin/env python3
"""The import graph between src/'s top-level modules, and its cycles.

    scripts/import_graph.py          prints the edges; exits 1 on a cycle

A module is a file or folder directly under src/ (main.rs and lib.rs are
not modules). An edge A -> B is any `crate::B` path in A's files outside
test code (tests may reach anywhere).
"""
import pathlib, re, sys

src = pathlib.Path(__file__).resolve().parent.parent / "src"
mods = {p.stem for p in src.iterdir() if p.suffix == ".rs" and p.stem not in ("main", "lib")}
mods |= {p.name for p in src.iterdir() if p.is_dir()}
edges = {m: set() for m in mods}
for m in mods:
    files = [src / f"{m}.rs"] if (src / f"{m}.rs").exists() else list((src / m).rglob("*.rs"))
    for f in files:
        if f.name == "tests.rs" or f.stem.endswith("_tests"):
            continue
        text = f.read_text()
        text = text.split("#[cfg(test)]\nmod tests {")[0]
        for b in re.findall(r"crate::([a-z_]+)", text):
            if b in mods and b != m:
                edges[m].add(b)
for m in sorted(edges):
    print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")
# Cycles: depth-first search.
state, stack, cycles = {}, [], []
def visit(n):
    state[n] = 1
    stack.append(n)
    for b in sorted(edges[n]):
        if state.get(b) == 1:
            cycles.append(stack[stack.index(b):] + [b])
        elif b not in state:
            visit(b)
    stack.pop()
    state[n] = 2
for m in sorted(mods):
    if m not in state:
        visit(m)
for c in cycles:
    print("cycle: " + " -> ".join(c))
sys.exit(1 if cycles else 0)
