"""bench/precision_throughput.py's --check without timing anything: the
loss comparison (compare_losses) on made-up losses, a count that differs
named rather than cut short by zip(), and the skip (exit 77, the reason
printed) where PyTorch cannot be imported, before anything is compiled."""

import importlib.util
import os
import subprocess
import sys

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "precision_throughput.py"


def load():
    spec = importlib.util.spec_from_file_location("precision_throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_losses_close_but_not_equal_pass():
    gap, failures = load().compare_losses([10.0, 9.0, 8.0], [10.0, 9.0, 8.04])
    assert failures == []
    assert abs(gap - 0.005) < 1e-12


def test_losses_too_far_or_equal_fail():
    bench = load()
    gap, failures = bench.compare_losses([10.0, 9.0], [10.0, 9.2])
    assert len(failures) == 1 and "more than 1e-2 (relative)" in failures[0]
    gap, failures = bench.compare_losses([10.0, 9.0], [10.0, 9.0])
    assert gap == 0.0
    assert len(failures) == 1 and "nothing was rounded" in failures[0]


def test_loss_counts_that_differ_fail_named():
    # zip() would compare the first two steps only, which agree to 1e-3.
    gap, failures = load().compare_losses([10.0, 9.0, 8.0], [10.0, 9.009])
    assert gap is None
    assert len(failures) == 1
    assert failures[0].startswith("the f32 program printed 3 losses and the bf16-mixed one 2: "
                                  "they cannot be compared step by step")


def test_skipped_without_torch(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    p = subprocess.run([sys.executable, str(SCRIPT), "--check", "--bin-dir",
                        str(tmp_path / "no-bin")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(fake.parent)), timeout=60)
    assert p.returncode == 77, p.stdout + p.stderr
    assert p.stdout.startswith(f"SKIP: torch is not importable by {sys.executable}: ")
    assert p.stdout.rstrip().endswith("no torch here")
    assert p.stderr == ""
