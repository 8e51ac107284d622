"""Shared pytest setup: puts python/ on sys.path and locates Braid's tools.

The tools are looked up in $BRAID_BIN_DIR, by default <repo>/build/bin. A
test that needs a tool that has not been built fails (it does not skip), so
that a missing build can never pass for a green run.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO_ROOT / "python"
sys.path.insert(0, str(PYTHON_DIR))


def bin_dir() -> Path:
    """The directory holding braid-eval and braid-opt."""
    return Path(os.environ.get("BRAID_BIN_DIR", REPO_ROOT / "build" / "bin"))


class Tool:
    """A Braid command-line tool; `run` fails the calling test on any error."""

    def __init__(self, name: str):
        self.name = name
        self.path = bin_dir() / name

    def run(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        """Runs the tool; with `check`, any non-zero exit fails the test."""
        if not (self.path.is_file() and os.access(self.path, os.X_OK)):
            pytest.fail(
                f"{self.name} not found at {self.path}: build Braid (ninja -C build) "
                f"or set BRAID_BIN_DIR to the directory that holds it",
                pytrace=False,
            )
        command = [str(self.path), *map(str, args)]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if check and proc.returncode != 0:
            pytest.fail(
                f"{' '.join(command)} exited with status {proc.returncode}:\n{proc.stderr}",
                pytrace=False,
            )
        return proc


@pytest.fixture(scope="session")
def braid_eval() -> Tool:
    return Tool("braid-eval")


@pytest.fixture(scope="session")
def braid_opt() -> Tool:
    return Tool("braid-opt")
