#!/usr/bin/env python3
"""The import graph between src/'s top-level modules, and its cycles;
then the circles between the files of one module.

    scripts/import_graph.py          prints the edges; exits 1 on a cycle,
                                     a file circle, or a chain over 9

Then the longest import chain, from the binary's main.rs (its
`classifyd::B` paths) down: the depth of the layers, at most 9 (13 before
issue 62; CI keeps it there).

A module is a file or folder directly under src/ (main.rs and lib.rs are
not modules). An edge A -> B is any `crate::B` path in A's files outside
test code (tests may reach anywhere).

Within a folder, a file (not mod.rs) reaches a sibling through
`super::sibling`, `crate::...::sibling`, or a name the folder's mod.rs
re-exports from the sibling (`pub use sibling::{Name}`) used as
`super::Name`; comments do not count. Two files that reach each other are
a circle.
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


def longest_chain():
    """The longest path of modules from main (which the binary's main.rs
    imports), in the graph without cycles."""
    main = set(re.findall(r"classifyd::([a-z_]+)", (src / "main.rs").read_text())) & mods
    graph = {**edges, "main": main}
    best = {}

    def down(n):
        if n not in best:
            tails = [down(b) for b in sorted(graph[n])]
            best[n] = [n] + max(tails, key=len, default=[])
        return best[n]
    return down("main")


MAX_CHAIN = 9
chain = []
if not cycles:
    chain = longest_chain()
    print(f"longest import chain: {len(chain)} levels: {' -> '.join(chain)}")


def code(f):
    text = f.read_text().split("#[cfg(test)]\nmod tests {")[0]
    return re.sub(r"//.*", "", text)


def reexports(folder):
    """Names the folder's mod.rs re-exports, by the sibling they come from."""
    names = {}
    mod = folder / "mod.rs"
    if mod.exists():
        for child, items in re.findall(r"pub(?:\([a-z]+\))? use ([a-z_]+)::\{?([^;}]*)", code(mod)):
            for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", items):
                names[name] = child
    return names


file_edges = {}
for f in src.rglob("*.rs"):
    if f.name in ("mod.rs", "tests.rs", "main.rs", "lib.rs") or f.stem.endswith("_tests"):
        continue
    folder, rel = f.parent, f.relative_to(src).with_suffix("").parts
    sibs = {g.stem for g in folder.glob("*.rs") if g.name not in ("mod.rs", "tests.rs")}
    sibs |= {g.name for g in folder.iterdir() if g.is_dir()}
    sibs.discard(f.stem)
    names = reexports(folder)
    text = code(f)
    reached = set(re.findall(r"super::([A-Za-z_]+)", text))
    for group in re.findall(r"use super::\{([^;]*)\};", text):
        reached |= set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", group))
    for path in re.findall(r"crate::((?:[a-z_]+::)+)", text):
        parts = path.strip(":").split("::")
        if tuple(parts[: len(rel) - 1]) == rel[:-1] and len(parts) >= len(rel):
            reached.add(parts[len(rel) - 1])
    file_edges[f] = {m for m in reached if m in sibs} | {names[n] for n in reached if names.get(n) in sibs}
circles = sorted(
    {tuple(sorted((str(a.relative_to(src)), str((a.parent / f"{b}.rs").relative_to(src)))))
     for a, bs in file_edges.items() for b in bs if a.stem in file_edges.get(a.parent / f"{b}.rs", set())}
)
for a, b in circles:
    print(f"circle: {a} <-> {b}")
print(f"{len(cycles)} module cycles, {len(circles)} file circles")
if len(chain) > MAX_CHAIN:
    print(f"the longest import chain is over {MAX_CHAIN} levels")
sys.exit(1 if cycles or circles or len(chain) > MAX_CHAIN else 0)
