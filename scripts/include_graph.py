#!/usr/bin/env python3
"""The include graph of src/ by module (folder), and the check that every include points down.

Each module has a level; a file may include headers of its own module and of modules on lower
levels only. Modules on one level are siblings and never include each other (cpu and vulkan,
engine and convert). Prints the graph, lowest module first; with --check, exits 1 and names each
include that points up or sideways.
"""
import argparse
import pathlib
import re
import sys

LEVELS = {
    "core": 0,
    "quant": 1,
    "gguf": 2,
    "tokenizer": 3,
    "template": 3,
    "model": 4,
    "executor": 5,
    "cpu": 6,
    "vulkan": 6,
    "engine": 7,
    "convert": 7,
    "server": 8,
    "tools": 9,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/[^"]+"', re.M)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default=str(pathlib.Path(__file__).parent.parent / "src"))
    ap.add_argument("--check", action="store_true", help="fail on an include that points up")
    args = ap.parse_args()
    src = pathlib.Path(args.src)
    graph: dict[str, set[str]] = {}
    wrong = []
    for f in sorted(src.rglob("*")):
        if f.suffix not in (".h", ".cpp"):
            continue
        module = f.relative_to(src).parts[0]
        if module not in LEVELS:
            wrong.append(f"{f}: module '{module}' has no level in scripts/include_graph.py")
            continue
        deps = graph.setdefault(module, set())
        for target in INCLUDE.findall(f.read_text(errors="replace")):
            if target == module or target not in LEVELS:
                continue
            deps.add(target)
            if LEVELS[target] >= LEVELS[module]:
                wrong.append(f"{f.relative_to(src.parent)}: {module} (level {LEVELS[module]}) "
                             f"includes {target} (level {LEVELS[target]})")
    for m in sorted(graph, key=lambda m: (LEVELS[m], m)):
        deps = sorted(graph[m], key=lambda d: (LEVELS[d], d))
        print(f"{LEVELS[m]} {m:<10} -> {' '.join(deps) if deps else '(nothing)'}")
    for w in wrong:
        print("points up: " + w, file=sys.stderr)
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
