"""scripts/check-layering.py (ctest `layering`) on planted trees.

The layering it guards: the braid dialect does not know the evaluator
(EvalOpInterface and its models live in lib/Eval), Support is below both.
"""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-layering.py"

CLEAN = {
    "include/braid/Support/Tensor.h": '#include "llvm/ADT/ArrayRef.h"\n',
    "lib/Support/Tensor.cpp": '#include "braid/Support/Tensor.h"\n',
    "include/braid/Dialect/Braid/IR/BraidOps.h":
        '#include "braid/Dialect/Braid/IR/BraidDialect.h"\n'
        '#include "braid/Support/Tensor.h"\n',
    "include/braid/Dialect/Braid/IR/BraidOps.td":
        'include "braid/Dialect/Braid/IR/BraidInterfaces.td"\n',
    "lib/Dialect/Braid/IR/BraidOps.cpp":
        '#include "braid/Dialect/Braid/IR/BraidOps.h"\n',
    "include/braid/Eval/EvalOpInterface.h":
        '#include "braid/Eval/EvalContext.h"\n',
    "lib/Eval/BraidOpsEval.cpp":
        '#include "braid/Eval/EvalOpInterface.h"\n'
        '#include "braid/Dialect/Braid/IR/BraidOps.h"\n'
        '#include "braid/rt/init.h"\n',
}


def plant(root: Path, files: dict) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def targets_file(root: Path, rows) -> Path:
    """rows: (name, folder under root, [linked])."""
    path = root / "targets.txt"
    path.write_text("".join(f"{n}\t{root / d}\t{' '.join(l)}\n"
                            for n, d, l in rows))
    return path


CLEAN_TARGETS = [
    ("BraidTensor", "lib/Support", ["LLVM"]),
    ("BraidSchedule", "lib/Schedule", []),
    ("BraidIR", "lib/Dialect/Braid/IR", ["MLIRIR", "BraidTensor"]),
    ("obj.BraidIR", "lib/Dialect/Braid/IR", ["MLIRIR", "BraidTensor"]),
    ("BraidUtils", "lib/Dialect/Braid/Utils", ["BraidIR", "BraidSchedule"]),
    ("BraidEvaluator", "lib/Eval", ["BraidIR", "BraidUtils", "braid_rt_common"]),
    ("BraidTarget", "lib/Target", ["BraidEvaluator"]),
]


def check(root: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root),
                           *map(str, extra)],
                          capture_output=True, text=True, timeout=60)


def test_clean_tree_passes(tmp_path):
    plant(tmp_path, CLEAN)
    proc = check(tmp_path, "--targets", targets_file(tmp_path, CLEAN_TARGETS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "links of 6 library targets" in proc.stdout


def test_the_repository_passes():
    proc = check(SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name, line, text, found", [
    # What issue 17 removed: the dialect's header reaching the evaluator.
    ("include/braid/Dialect/Braid/IR/BraidOps.h", 3,
     '#include "braid/Eval/EvalContext.h"\n', "layer Dialect may not use Eval"),
    ("include/braid/Dialect/Braid/IR/BraidOps.td", 2,
     'include "braid/Eval/EvalOpInterface.td"\n',
     "layer Dialect may not use Eval"),
    ("lib/Dialect/Braid/Transforms/Pass.cpp", 1,
     '#  include <braid/Eval/Evaluator.h>\n', "layer Dialect may not use Eval"),
    ("lib/Support/SafeTensors.cpp", 1, '#include "braid/Eval/EvalContext.h"\n',
     "layer Support may not use Eval"),
    ("include/braid/Support/Tensor.h", 2,
     '#include "braid/Dialect/Braid/IR/BraidOps.h"\n',
     "layer Support may not use Dialect"),
    ("lib/Dialect/Braid/IR/BraidOps.cpp", 2, '#include "braid/rt/init.h"\n',
     "layer Dialect may not use rt"),
])
def test_upward_include_fails(tmp_path, name, line, text, found):
    plant(tmp_path, CLEAN)
    path = tmp_path / name
    before = path.read_text() if path.exists() else ""
    lines = before.splitlines(keepends=True)
    lines.insert(line - 1, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    proc = check(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{name}:{line}:" in proc.stdout and found in proc.stdout, proc.stdout
    assert "1 layering violation(s)" in proc.stdout


def test_upward_link_fails_with_its_chain(tmp_path):
    plant(tmp_path, CLEAN)
    rows = [r if r[0] != "BraidUtils"
            else ("BraidUtils", r[1], r[2] + ["BraidTarget"]) for r in CLEAN_TARGETS]
    proc = check(tmp_path, "--targets", targets_file(tmp_path, rows))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("BraidIR (layer Dialect) links" not in proc.stdout)
    assert ("BraidUtils (layer Dialect) links BraidTarget (layer (no layer)): "
            "BraidUtils -> BraidTarget") in proc.stdout
    assert ("BraidUtils (layer Dialect) links BraidEvaluator (layer Eval): "
            "BraidUtils -> BraidEvaluator") not in proc.stdout


def test_dialect_linking_the_evaluator_fails(tmp_path):
    plant(tmp_path, CLEAN)
    rows = [r if r[0] != "BraidIR"
            else ("BraidIR", r[1], r[2] + ["BraidEvaluator"]) for r in CLEAN_TARGETS]
    proc = check(tmp_path, "--targets", targets_file(tmp_path, rows))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("BraidIR (layer Dialect) links BraidEvaluator (layer Eval): "
            "BraidIR -> BraidEvaluator") in proc.stdout
    # Through BraidIR, BraidUtils reaches it too.
    assert ("BraidUtils (layer Dialect) links BraidEvaluator (layer Eval): "
            "BraidUtils -> BraidIR -> BraidEvaluator") in proc.stdout


def test_bad_usage(tmp_path):
    assert check(tmp_path).returncode == 2
    plant(tmp_path, CLEAN)
    bad = tmp_path / "targets.txt"
    bad.write_text("BraidIR only-two-fields\n")
    proc = check(tmp_path, "--targets", bad)
    assert proc.returncode == 2 and "expected 3 tab-separated" in proc.stderr
