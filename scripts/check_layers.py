#!/usr/bin/env python3
"""Checks the include graph between the folders under src/lockstep/.

A folder is a room with a door: two rooms that include each other are one room, and
whoever reads one must read both. So, for every folder F (the root, runtime/, comm/, ...),
the graph whose nodes are F's child folders, with an edge X -> Y when a file anywhere
under X includes a file anywhere under Y, must have no cycle. Files directly in F are F's
own and no node. An include counts at one level only, the deepest folder holding both
files: runtime/launch/a.cc -> runtime/training/b.h is an edge launch -> training in
runtime/, and nothing at the root.

With --cmake (on by default for the default root), each top-level folder may also include
only the folders its CMake target links, directly or through other targets: the layers
of CMakeLists.txt's lockstep_layer(NAME DEPS lockstep_...) lines, read from that file so
that the order lives in one place. A header taken from a layer the target does not link
is an upward include, a cycle waiting to happen.

Usage: scripts/check_layers.py [ROOT] [--cmake CMAKELISTS]
Exit 0 with a one-line summary when clean; 1 with every cycle and upward include listed.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

EXTENSIONS = (".h", ".cc")
PREFIX = "lockstep/"  # #include "lockstep/x/y.h" names ROOT/x/y.h
# Top-level folders not built as the library lockstep_<folder>: the target built from them.
TARGET_OF_FOLDER = {"cli": "lockstep"}

INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def includes(roots):
    """Yields (file, its path under its root, line, header as written, header's path under
    the roots) for every quoted include of a file under the roots, resolved as the compiler
    does: the including file's own folder first, then the include path (where lockstep/...
    lives: src/ and include/, two roots of one tree)."""
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(EXTENSIONS)):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, text in enumerate(f, 1):
                        match = INCLUDE.match(text)
                        if not match:
                            continue
                        header = match.group(1)
                        beside = os.path.normpath(os.path.join(folder, header))
                        if os.path.isfile(beside):
                            target = os.path.relpath(beside, root)  # ../ if outside root
                        elif header.startswith(PREFIX):
                            target = header[len(PREFIX):]  # may be generated (core/version.h)
                        else:
                            continue  # a third-party or test header
                        if not target.startswith(".."):
                            yield path, os.path.relpath(path, root), number, header, target.replace(os.sep, "/")


def folder_edges(roots):
    """{(F, X, Y): ["file:line -> header", ...]} for every include crossing from child
    folder X of F into child folder Y of F, F the deepest folder holding both files."""
    edges = defaultdict(list)
    for path, relative, number, header, target in includes(roots):
        src, dst = relative.split(os.sep)[:-1], target.split("/")[:-1]
        depth = 0
        while depth < min(len(src), len(dst)) and src[depth] == dst[depth]:
            depth += 1
        if depth < len(src) and depth < len(dst):
            f = "/".join(src[:depth])
            edges[(f, src[depth], dst[depth])].append(f"{path}:{number} -> {header}")
    return edges


def simple_cycles(graph):
    """Every elementary cycle of {node: set(next nodes)}, each once, from its least node."""
    cycles = []

    def walk(path):
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                cycles.append(path)
            elif nxt > path[0] and nxt not in path:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return cycles


def linked_folders(cmake_file):
    """{top-level folder: folders its CMake target links, itself included}, following
    lockstep_layer(NAME DEPS ...) and target_link_libraries(TARGET ...) transitively."""
    with open(cmake_file, encoding="utf-8") as f:
        text = re.sub(r"#[^\n]*", "", f.read())
    links = defaultdict(set)
    for name, args in re.findall(r"\blockstep_layer\(\s*(\w+)([^)]*)\)", text):
        links["lockstep_" + name] |= set(re.findall(r"\blockstep_\w+", args))
    if not links:
        sys.exit(f"check_layers: no lockstep_layer(...) line in {cmake_file}")
    for target, args in re.findall(r"\btarget_link_libraries\(\s*(\w+)([^)]*)\)", text):
        links[target] |= set(re.findall(r"\blockstep_\w+", args))
    folder_of = {t: f for f, t in TARGET_OF_FOLDER.items()}
    folder_of.update({t: t[len("lockstep_"):] for t in links if t.startswith("lockstep_")})
    allowed = {}
    for target in links:
        seen, todo = {target}, [target]
        while todo:
            for nxt in links.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        if target in folder_of:
            allowed[folder_of[target]] = {folder_of[t] for t in seen if t in folder_of}
    return allowed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", help="source root (default: src/lockstep)")
    parser.add_argument("--cmake", help="CMakeLists.txt whose links bound each top-level "
                        "folder's includes (default: the repository's, for the default root)")
    args = parser.parse_args()
    if not args.root:  # CI's case: paths printed from the repository's root
        os.chdir(REPO)
    root = args.root or "src/lockstep"
    cmake = args.cmake or (None if args.root else "CMakeLists.txt")
    if not os.path.isdir(root):
        sys.exit(f"check_layers: {root} is not a folder")
    # The public headers (include/lockstep/<layer>/...) belong to the layers of src/lockstep/.
    roots = [root] + (
        ["include/lockstep"] if not args.root and os.path.isdir("include/lockstep") else [])

    edges = folder_edges(roots)
    graphs = defaultdict(lambda: defaultdict(set))
    for f, x, y in edges:
        graphs[f][x].add(y)
    cycles, unlinked = [], []
    for f in sorted(graphs):
        for cycle in simple_cycles(graphs[f]):
            cycles.append(f"cycle in {os.path.join(root, f)}: {' -> '.join(cycle + cycle[:1])}")
            for x, y in zip(cycle, cycle[1:] + cycle[:1]):
                examples = edges[(f, x, y)]
                more = f" (+{len(examples) - 1} more)" if len(examples) > 1 else ""
                cycles.append(f"  {x} -> {y}: {examples[0]}{more}")
    if cmake:
        allowed = linked_folders(cmake)
        for (f, x, y), examples in sorted(edges.items()):
            if not f and y not in allowed.get(x, ()):
                why = "is built by no target" if x not in allowed else f"does not link {y}/"
                unlinked.append(f"{x}/ includes {y}/ but {x}/ {why} in {cmake}:")
                unlinked += [f"  {example}" for example in examples]

    folders = len({os.path.relpath(d, r) for r in roots for d, _, _ in os.walk(r)} - {"."})
    summary = f"layers: {folders} folders, {len(edges)} include edges"
    if cycles or unlinked:
        print("\n".join(cycles + unlinked))
        print(f"{summary}, {sum(not c.startswith(' ') for c in cycles)} cycles"
              + (f", {sum(not u.startswith(' ') for u in unlinked)} unlinked" if cmake else ""))
        return 1
    print(f"{summary}, no cycle" + (", every include within its CMake links" if cmake else ""))
    return 0

if __name__ == "__main__":
    sys.exit(main())
