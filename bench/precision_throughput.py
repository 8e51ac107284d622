#!/usr/bin/python3
"""Step time of bf16-mixed against f32 training, Braid and PyTorch, in one run.

Workload: the larger GPT of bench/train_throughput.py by default (6 layers,
hidden 512, 8 heads, sequence 256, vocabulary 8192, batch 4), an AdamW step
on a fixed batch, one CPU rank at --threads threads. Braid: the step
compiled by braidc twice, `--precision f32` and `--precision bf16-mixed`,
run alternately (f32, bf16, f32, ...; --repeats pairs) so that each pair
sees the same load; each run reports its mean ms/step over steps 1 .. S.
PyTorch 1.13 eager: the same step in f32 and under
torch.autocast("cpu", bfloat16), alternately too. Printed: the best time of
each, and the median over pairs of bf16 / f32 (above 1: bf16 is slower).

Braid's bf16-mixed programs run their matmuls on oneDNN's bf16 GEMM (f32
sums) and every other op on the f32 kernels with an explicit rounding after
each bf16 op (braid-legalize-bf16, docs/training.md#precision): faster
GEMMs, one more pass over each other bf16 value; the ratio says which wins.

With --check (ctest's bench-precision-throughput, on a tiny model), the
script exits 1 unless every run of both sides measured a finite, positive
time, every ratio is finite and positive, and the bf16-mixed program's
losses (1 + S steps, finite, which every run checks) stay within 1e-2
relative of the f32 program's at every step but are not all equal to them
(the precision flag took effect); the two programs must print as many
losses (a different count fails, named). A run that fails ends the script
with its command and status.

PyTorch not importable by this Python: the script prints `SKIP:` and why,
and exits 77 (SKIP_EXIT), which ctest reports as skipped, before compiling
anything.

    bench/precision_throughput.py [--steps S] [--repeats R] [--threads T] [--small] [--check]
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
SKIP_EXIT = 77  # PyTorch is not importable: ctest's SKIP_RETURN_CODE
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True,
                          env=env).stdout


def thread_env(threads):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def braid_step(program, steps, threads):
    out = run(program, "--steps", 1 + steps, "--seed", 0, env=thread_env(threads))
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)", out, re.M)]
    if len(losses) != 1 + steps or not all(math.isfinite(v) for v in losses):
        raise SystemExit(f"{program}: expected {1 + steps} finite losses:\n{out}")
    m = re.search(r"^summary: \d+ steps, (\S+) ms/step", out, re.M)
    if not m:
        raise SystemExit(f"{program} printed no summary:\n{out}")
    return float(m.group(1)) / 1e3, losses


def torch_worker(args):
    import torch
    import torch_reference as ref
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    h, v, s, b, n = args.hidden, args.vocab, args.seq, args.batch, args.layers
    shapes = {"wte.weight": (v, h), "wpe.weight": (s, h), "ln_f.weight": (h,), "ln_f.bias": (h,)}
    for i in range(n):
        p = f"h.{i}."
        for name in ("ln_1", "ln_2"):
            shapes[p + name + ".weight"] = (h,)
            shapes[p + name + ".bias"] = (h,)
        for name in ("attn.q", "attn.k", "attn.v", "attn.proj"):
            shapes[p + name + ".weight"] = (h, h)
            shapes[p + name + ".bias"] = (h,)
        shapes[p + "mlp.fc.weight"] = (h, 4 * h)
        shapes[p + "mlp.fc.bias"] = (4 * h,)
        shapes[p + "mlp.proj.weight"] = (4 * h, h)
        shapes[p + "mlp.proj.bias"] = (h,)
    params = {k: (torch.randn(*shape) * 0.02).requires_grad_() for k, shape in shapes.items()}
    opt = torch.optim.AdamW(params.values(), lr=3e-4)
    tokens = torch.randint(0, v, (b, s))
    labels = torch.randint(0, v, (b, s))
    bf16 = args.torch_worker == "bf16"

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = ref.gpt_logits(ref.Weights(params), tokens, n, args.heads)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, v),
                                                     labels.reshape(-1))
        loss.backward()
        opt.step()

    step()  # warm-up
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print((time.perf_counter() - start) / args.steps)


def torch_step(args, precision):
    out = run(sys.executable, __file__, "--torch-worker", precision,
              *[f"--{k}={getattr(args, k)}"
                for k in ("layers", "hidden", "heads", "seq", "vocab", "batch", "steps", "threads")],
              env=thread_env(args.threads))
    return float(out.strip().splitlines()[-1])


def compare_losses(f32, bf16):
    """The largest relative difference of the bf16-mixed losses from the f32
    ones, step by step (None when their counts differ), and what --check
    fails on: a count that differs (named, rather than zip() comparing the
    shorter run's steps), a difference above 1e-2, or none at all."""
    if len(f32) != len(bf16):
        return None, [f"the f32 program printed {len(f32)} losses and the bf16-mixed one "
                      f"{len(bf16)}: they cannot be compared step by step "
                      f"(f32 {f32}, bf16-mixed {bf16})"]
    gap = max((abs(b - f) / abs(f) for f, b in zip(f32, bf16)), default=0.0)
    failures = []
    if gap > 1e-2:
        failures.append(f"the bf16-mixed losses {bf16} are more than 1e-2 (relative) from "
                        f"the f32 ones {f32}")
    if bf16 == f32:
        failures.append(f"the bf16-mixed losses equal the f32 ones {f32}: nothing was rounded")
    return gap, failures


def torch_missing():
    """Why PyTorch cannot be imported by this Python (the workers' too), or
    None when it can."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"torch is not importable by {sys.executable}: {e}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--small", action="store_true",
                        help="the main job's GPT (4 layers, hidden 128, seq 64, vocab 256)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every time and ratio is finite and the bf16 losses "
                             "are near the f32 ones but not equal")
    parser.add_argument("--bin-dir", default=os.environ.get("BRAID_BIN_DIR", ROOT / "build" / "bin"))
    parser.add_argument("--torch-worker", choices=["f32", "bf16"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.small:
        args.layers, args.hidden, args.heads, args.seq, args.vocab = 4, 128, 4, 64, 256
    if args.torch_worker:
        return torch_worker(args)
    missing = torch_missing()
    if missing:
        print(f"SKIP: {missing}")
        return SKIP_EXIT

    bin_dir = Path(args.bin_dir)
    print(f"GPT {args.layers} layers, hidden {args.hidden}, {args.heads} heads, seq {args.seq}, "
          f"vocab {args.vocab}, batch {args.batch}; {args.threads} thread(s), {args.steps} steps "
          f"per run, {args.repeats} pairs; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        run(sys.executable, "-m", "braid.models", "gpt", "--layers", args.layers, "--hidden",
            args.hidden, "--heads", args.heads, "--seq", args.seq, "--vocab", args.vocab,
            "--batch", args.batch, "-o", model,
            env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
        programs = {}
        for precision in ("f32", "bf16-mixed"):
            programs[precision] = tmp / precision
            run(bin_dir / "braidc", model, "--train", "--precision", precision, "-o",
                programs[precision])
        losses = {}

        def braid_measure(precision):
            seconds, losses[precision] = braid_step(programs[precision], args.steps,
                                                    args.threads)
            return seconds

        results, failures = {}, []
        for side, measure in (("braid", braid_measure),
                              ("pytorch", lambda p: torch_step(args, "f32" if p == "f32"
                                                               else "bf16"))):
            pairs = [(measure("f32"), measure("bf16-mixed")) for _ in range(args.repeats)]
            ratios = [b / f for f, b in pairs]
            results[side] = (min(p[0] for p in pairs), min(p[1] for p in pairs), median(ratios))
            failures += [f"{side}: a time of {t!r} s" for pair in pairs for t in pair
                         if not (math.isfinite(t) and t > 0)]
            failures += [f"{side}: a bf16/f32 ratio of {r!r}" for r in ratios
                         if not (math.isfinite(r) and r > 0)]
    print(f"{'':10} {'f32 ms/step':>12} {'bf16 ms/step':>13} {'bf16/f32 (median of pairs)':>27}")
    for side, (f, b, ratio) in results.items():
        print(f"{side:10} {f * 1e3:12.1f} {b * 1e3:13.1f} {ratio:27.2f}")
    f32, bf16 = losses["f32"], losses["bf16-mixed"]
    gap, loss_failures = compare_losses(f32, bf16)
    if gap is None:
        print(f"braid losses, bf16-mixed against f32: not compared, {len(bf16)} against "
              f"{len(f32)} steps")
    else:
        print(f"braid losses, bf16-mixed against f32: at most {gap:.2e} relative over "
              f"{len(f32)} steps")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if not args.check:
        return 0
    failures += loss_failures
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    if failures:
        return 1
    print("check: both sides measured every run; times and ratios finite; bf16 losses within "
          "1e-2 of f32 and not equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
