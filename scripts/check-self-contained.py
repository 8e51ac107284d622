#!/usr/bin/env python3
"""Fails if a file of the repository refers to a path outside it.

A user's clone has nothing beside it, so the build, tests, benchmarks,
scripts and docs may only read and link files inside the tree. This check
(ctest `self-contained`) scans every file git knows of (tracked, or new and
not ignored; without git, every file outside build folders) and reports each
reference as FILE:LINE with the text and the reason:

  - the CI machine's sibling folder `shared` (reached through `..`), or its
    `anchors` and `docs` subfolders named in any form (path pieces too);
  - absolute paths of a particular machine (/work, /home, /root, /Users,
    /mnt);
  - a relative path with `..` that, resolved from the file's folder (or from
    the source root after ${PROJECT_SOURCE_DIR} and the like), leaves the
    repository.

Usage: check-self-contained.py [--root DIR]   (default: this script's repo)
Exit status: 0 clean, 1 references found, 2 bad usage.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

# Built from pieces so that this file does not match itself.
SIBLING = "sha" + "red"
PATTERNS = [
    (re.compile(r"\.\.[/\\]+" + SIBLING + r"\b"),
     "the CI machine's sibling folder; users do not have it"),
    (re.compile(r"\b" + SIBLING + r"""["',\s/\\]+(anchors|docs)\b"""),
     "the CI machine's sibling folder; copy what is needed into the tree"),
    (re.compile(r"(?<![\w.~$}-])/(work|home|root|Users|mnt)/[\w.-]"),
     "an absolute path of one machine"),
]

# A relative path that starts with `..`, after a variable or not inside a
# longer path ("a/../b" stays inside wherever a is).
RELATIVE = re.compile(r"(?:(\$\{\w+\}/|\$\w+/)|(?<![\w./-]))((?:\.\./)+)")
# Variables that name the source root (paths after them are resolved there).
ROOT_VARIABLES = {"${PROJECT_SOURCE_DIR}/", "${CMAKE_SOURCE_DIR}/",
                  "${BRAID_SOURCE_DIR}/"}
# Variables that name the file's own folder.
HERE_VARIABLES = {"${CMAKE_CURRENT_SOURCE_DIR}/", "${CMAKE_CURRENT_LIST_DIR}/"}

# Lines deliberately allowed, with the reason.
ALLOWED = [
    # The CI entry point may describe the CI machine in a comment; its code
    # runs scripts/test.sh like any user.
    (".ci/run", re.compile(r"^\s*#")),
]

BUILD_FOLDERS = re.compile(r"^(build.*|\.git|__pycache__|\.pytest_cache)$")


def list_files(root: Path) -> list:
    """Files git knows of (tracked, or untracked and not ignored)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            capture_output=True, check=True).stdout
        if (root / ".git").exists():
            names = [n for n in out.decode().split("\0") if n]
            return sorted(set(n for n in names if (root / n).is_file()))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [s for s in subfolders if not BUILD_FOLDERS.match(s)]
        for name in names:
            files.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(files)


def escapes(root: Path, base: Path, dots: str) -> bool:
    """Whether the run of `..` steps in `dots`, taken from `base`, leaves
    `root`."""
    depth = len(base.relative_to(root).parts)
    return dots.count("..") > depth


def check_file(root: Path, name: str) -> list:
    path = root / name
    try:
        data = path.read_bytes()
    except OSError as err:
        return [f"{name}: cannot read: {err.strerror}"]
    if b"\0" in data:
        return []  # binary
    text = data.decode("utf-8", errors="replace")
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if any(name == allowed and pattern.search(line)
               for allowed, pattern in ALLOWED):
            continue
        for pattern, reason in PATTERNS:
            for match in pattern.finditer(line):
                problems.append(
                    f"{name}:{number}: '{match.group(0)}': {reason}")
        for match in RELATIVE.finditer(line):
            prefix, dots = match.group(1), match.group(2)
            if prefix in ROOT_VARIABLES:
                base = root
            elif prefix is None or prefix in HERE_VARIABLES:
                base = path.parent
            else:
                continue  # relative to a folder this check cannot know
            if escapes(root, base, dots):
                problems.append(
                    f"{name}:{number}: '{match.group(0)}': leaves the "
                    f"repository from {base.relative_to(root)}/")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path,
                        default=Path(__file__).resolve().parents[1],
                        help="repository to check (default: this one)")
    args = parser.parse_args()
    root = args.root.resolve()
    if not root.is_dir():
        parser.error(f"{root} is not a directory")
    files = list_files(root)
    if not files:
        print(f"check-self-contained: no files found under {root}",
              file=sys.stderr)
        return 1
    problems = [p for name in files for p in check_file(root, name)]
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-self-contained: {len(problems)} reference(s) outside "
              f"the repository in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-self-contained: {len(files)} files refer only to the tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
