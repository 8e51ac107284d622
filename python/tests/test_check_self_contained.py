"""scripts/check-self-contained.py (ctest `self-contained`) on planted trees.

The planted references are built from pieces so that this file itself
passes the check it tests.
"""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-self-contained.py"
UP = ".."
SIBLING = "sha" + "red"
WORK, HOME = "/" + "work", "/" + "home"
SOURCE_DIR = "${PROJECT_SOURCE_DIR}/"


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


def plant(root: Path, files: dict) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


CLEAN = {
    "README.md": "See [docs](docs/design.md) and <https://example.com/a/../b>.\n",
    "docs/design.md": "[up](../README.md), [data](../bench/data/README.md)\n",
    "bench/data/README.md": "[schedules](../../docs/schedules.md)\n",
    "bench/CMakeLists.txt": "set(x ${CMAKE_CURRENT_SOURCE_DIR}/../include)\n"
                            "set(y ${CMAKE_BINARY_DIR}/../whatever)\n",
    "scripts/run.sh": 'cd "$(dirname "$0")/.."\nls src/home/work/x\n',
    ".ci/run": f"# on CI, with {UP}/{SIBLING} beside it\nexec bash scripts/test.sh\n",
}


def test_clean_tree_passes(tmp_path):
    plant(tmp_path, CLEAN)
    proc = check(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 files refer only to the tree" in proc.stdout


@pytest.mark.parametrize("name, line, text, found", [
    ("README.md", 2, f"see [arch]({UP}/{SIBLING}/docs/A.md)\n", f"{UP}/{SIBLING}"),
    ("bench/Bench.cpp", 3,
     f'append(path, "{UP}", "{SIBLING}", "anchors", file);\n',
     f'{SIBLING}", "anchors'),
    ("docs/x.md", 1, f"`{SIBLING}/docs/X.md` beside the repository\n",
     f"{SIBLING}/docs"),
    ("python/t.py", 2, f"DATA = '{WORK}/main/bench/data'\n", f"{WORK}/m"),
    ("scripts/s.sh", 1, f"cat {HOME}/someone/profile.csv\n", f"{HOME}/s"),
    ("docs/y.md", 1, "[other](../../other/README.md)\n", "leaves the repository from docs/"),
    ("CMakeLists.txt", 1, f"include({SOURCE_DIR}{UP}/x.cmake)\n",
     "leaves the repository from ./"),
    ("test/CMakeLists.txt", 1, "add(${CMAKE_CURRENT_SOURCE_DIR}/../../y)\n",
     "leaves the repository from test/"),
    # Only comments of .ci/run are allowed, not its code.
    (".ci/run", 2, f"cat {UP}/{SIBLING}/x\n", f"{UP}/{SIBLING}"),
])
def test_planted_reference_fails(tmp_path, name, line, text, found):
    files = dict(CLEAN)
    lines = files.get(name, "").splitlines(keepends=True)
    lines += ["\n"] * (line - 1 - len(lines))
    lines.insert(line - 1, text)
    files[name] = "".join(lines)
    plant(tmp_path, files)
    proc = check(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    reported = [l for l in proc.stdout.splitlines() if l.startswith(f"{name}:{line}: ")]
    assert reported, proc.stdout
    assert any(found in l for l in reported), proc.stdout
    # Nothing else is reported: the clean lines stay clean.
    assert all(l.startswith(f"{name}:{line}: ") for l in proc.stdout.splitlines())


def test_bad_root_is_a_usage_error(tmp_path):
    proc = check(tmp_path / "missing")
    assert proc.returncode == 2
    assert "is not a directory" in proc.stderr
