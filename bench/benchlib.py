"""What the bench/*.py scripts that compile and run braidc programs share:
running a tool, thread settings, reading a program's losses and step time,
and turning a failure into a message and exit status 1."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class BenchError(Exception):
    pass


def run(*args, env=None):
    """The command's standard output; CalledProcessError when it fails."""
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True,
                          env=env).stdout


def thread_env(threads, **extra):
    """The environment with `threads` OpenMP and OpenBLAS threads."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), **extra)
    return env


def parse(out, steps, what):
    """A training program's losses as printed and its mean seconds per step
    (the program's own `summary:` over steps 1 .. steps)."""
    losses = re.findall(r"^step \d+ loss (\S+)", out, re.M)
    if len(losses) != 1 + steps or not all(math.isfinite(float(v)) for v in losses):
        raise BenchError(f"{what}: expected {1 + steps} finite losses, got {losses}:\n{out}")
    m = re.search(r"^summary: \d+ steps, (\S+) ms/step", out, re.M)
    if not m:
        raise BenchError(f"{what} printed no summary:\n{out}")
    return losses, float(m.group(1)) / 1e3


def guarded(measure, args):
    """measure(args)'s exit status, or 1 with a message on a BenchError, a
    failed command or an OS error."""
    try:
        return measure(args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        command = " ".join(str(a) for a in e.cmd)
        print(f"error: {command} exited with status {e.returncode}:\n{e.stderr}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
