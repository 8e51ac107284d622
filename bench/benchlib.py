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


def add_run_arguments(parser, layers, hidden, batch, batch_help, steps, repeats):
    """The model, timing and output options the round-robin benchmarks
    (dp_scaling, comm_overlap, deferred_validation) share: a GPT or Llama
    of --layers, --hidden, --heads, --seq, --vocab and --batch; --steps timed
    steps, best of --repeats rounds; --csv, --check and --bin-dir."""
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--hidden", type=int, default=hidden)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=batch, help=batch_help)
    parser.add_argument("--steps", type=int, default=steps, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=repeats, help="rounds (best taken)")
    parser.add_argument("--csv", action="store_true", help="print CSV")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every program ran with finite, consistent results")
    parser.add_argument("--bin-dir", default=os.environ.get("BRAID_BIN_DIR", ROOT / "build" / "bin"))


def print_load(start, end, as_csv):
    """The 1-minute load average at the start and the end of the runs."""
    if as_csv:
        print(f"load_average_start,{start[0]:.2f}")
        print(f"load_average_end,{end[0]:.2f}")
    else:
        print(f"load average (1 min) at the start: {start[0]:.2f}, at the end: "
              f"{end[0]:.2f} ({os.cpu_count()} CPUs)")


def check_result(failures, check, passed):
    """The exit status: with --check, 1 after printing each failure, else
    `passed` printed and 0; without it, 0."""
    if not check:
        return 0
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    if failures:
        return 1
    print(passed)
    return 0


def check_configs(parser, known, chosen):
    """Refuses (parser.error) a --config that is not one of `known`."""
    for name in chosen:
        if name not in known:
            parser.error(f"--config {name}: expected one of {', '.join(known)}")
