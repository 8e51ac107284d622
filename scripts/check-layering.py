#!/usr/bin/env python3
"""Fails if a library of Braid uses one above it.

Braid's C++ libraries form layers; each may use only itself and those below:

    Eval      the evaluator and the ops' reference semantics (EvalOpInterface
              and its external models)
    Dialect   the braid dialect: IR, Transforms, Utils
    Support   tensor values, safetensors        Schedule   pipeline schedules

    Planner   the cost model (hardware, model and plan costs): Dialect,
              Support, Schedule; never the evaluator or the runtime

The dialect knows nothing of evaluation: the evaluator attaches the ops'
semantics as external models, so a tool that only parses, verifies or
transforms IR does not carry the evaluator (docs/design.md, "Layers").

This check (ctest `layering`) reports, as FILE:LINE or as a chain of
targets:
  - every `#include "braid/<Layer>/..."` (C++) or `include "braid/<Layer>/..."`
    (TableGen) in include/braid/<Layer> or lib/<Layer> of a layer it may not
    use (braid/rt, the C runtime's headers, counts as the layer `rt`);
  - with --targets (written by CMake at generate time: one line per library
    target under lib/, `name<TAB>source dir<TAB>linked libraries`), every
    library of a layer that links, directly or through others, a library
    of a layer it may not use.

Usage: check-layering.py [--root DIR] [--targets FILE]
Exit status: 0 clean, 1 violations found, 2 bad usage.
"""

import argparse
import re
import sys
from pathlib import Path

# Layer: (folders under the root, the other layers it may use).
LAYERS = {
    "Support": (["include/braid/Support", "lib/Support"], set()),
    "Schedule": (["include/braid/Schedule", "lib/Schedule"], set()),
    "Dialect": (["include/braid/Dialect", "lib/Dialect"],
                {"Support", "Schedule"}),
    "Eval": (["include/braid/Eval", "lib/Eval"],
             {"Dialect", "Support", "Schedule", "rt"}),
    "Planner": (["include/braid/Planner", "lib/Planner"],
                {"Dialect", "Support", "Schedule"}),
}

INCLUDE = re.compile(r'^\s*#?\s*include\s*[<"]braid/(\w+)/')


def layer_of(root: Path, path: Path):
    """The layer whose folders hold `path`, or None."""
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    for name, (folders, _) in LAYERS.items():
        if any(rel == f or rel.startswith(f + "/") for f in folders):
            return name
    return None


def check_includes(root: Path) -> list:
    problems = []
    for name, (folders, allowed) in LAYERS.items():
        for folder in folders:
            for path in sorted((root / folder).rglob("*")):
                if not path.is_file():
                    continue
                try:
                    lines = path.read_text(errors="replace").splitlines()
                except OSError as e:
                    problems.append(f"{path}: cannot read: {e}")
                    continue
                for number, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) != name and m.group(1) not in allowed:
                        rel = path.relative_to(root).as_posix()
                        problems.append(
                            f"{rel}:{number}: {line.strip()}: layer {name} "
                            f"may not use {m.group(1)}")
    return problems


def read_targets(root: Path, targets: Path) -> dict:
    """name -> (layer or None, [linked names])."""
    graph = {}
    for number, line in enumerate(targets.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"{targets}:{number}: expected 3 tab-separated "
                             f"fields, got {len(fields)}")
        name, source_dir, links = fields
        # Targets linked from another directory carry a ::@(id) suffix.
        linked = [re.sub(r"::@.*$", "", l) for l in re.split(r"[;\s]+", links)
                  if l]
        try:
            layer = layer_of(root, Path(source_dir))
        except ValueError:
            layer = None
        graph[name] = (layer, linked)
    return graph


def check_links(graph: dict) -> list:
    problems = []
    for name, (layer, _) in sorted(graph.items()):
        if layer is None:
            continue
        allowed = LAYERS[layer][1] | {layer}
        # Breadth first, so each reported chain is a shortest one.
        parent, queue = {name: None}, [name]
        while queue:
            current = queue.pop(0)
            for dep in graph[current][1]:
                if dep not in graph or dep in parent:
                    continue
                parent[dep] = current
                queue.append(dep)
                dep_layer = graph[dep][0] or "(no layer)"
                if dep_layer not in allowed:
                    chain, at = [], dep
                    while at is not None:
                        chain.append(at)
                        at = parent[at]
                    problems.append(
                        f"{name} (layer {layer}) links {dep} (layer "
                        f"{dep_layer}): {' -> '.join(reversed(chain))}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path,
                        default=Path(__file__).resolve().parents[1])
    parser.add_argument("--targets", type=Path,
                        help="library targets and their links, from CMake")
    args = parser.parse_args()
    if not (args.root / "include" / "braid").is_dir():
        print(f"error: {args.root} has no include/braid", file=sys.stderr)
        return 2
    problems = check_includes(args.root)
    linked = 0
    if args.targets:
        try:
            graph = read_targets(args.root, args.targets)
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        linked = sum(1 for layer, _ in graph.values() if layer)
        problems += check_links(graph)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering violation(s); see "
              "scripts/check-layering.py for the layers")
        return 1
    print(f"layers clean: includes of {', '.join(LAYERS)}"
          + (f"; links of {linked} library targets" if args.targets else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
