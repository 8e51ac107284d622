#!/usr/bin/python3
"""Training throughput of a braidc-compiled GPT against PyTorch eager.

Workload: one GPT (default 4 layers, hidden 128, 4 heads, sequence 64,
vocabulary 256, batch 4), an AdamW training step on a fixed batch, on one
CPU rank. Both sides run in this invocation (these machines are noisy),
each at every thread count asked for (default 1 and 2), and are compared
at their best: PyTorch 1.13 can be much slower with 2 threads than with 1
on a 2-core machine. Achieved GFLOP/s (the step's FLOPs from
braid-cost-report) are also given as a fraction of OpenBLAS SGEMM on the
same machine, measured here, which is the practical limit.

Timing: Braid's program runs 1 + S steps and reports its mean time per step
over the last S (`summary: ... ms/step`: the clock around each step call,
so start-up, initialisation and the first step are left out; the difference
of two runs' wall times, used before, was lost in the noise of starting the
program on small models). PyTorch runs one warm-up step, then S timed ones.
Each is the best of --repeats runs.

With --unfused, the same step compiled with `braidc --no-fuse` (every op
its own kernel, as before braid-fuse-elementwise) is timed too, in the same
run, with its own ratio and the fused program's speed-up over it: the two
programs run alternately (fused, unfused, fused, ...; --repeats pairs per
thread count), so that each pair sees the same load, and the median of the
pairs' ratios is printed beside the ratio of the bests. The machine's load
average (os.getloadavg) is printed at the start and the end. With
--portable, the step compiled with `braidc --portable` (the compiler's
default target and the portable kernels, instead of -march=native and the
kernels built for this CPU) likewise, with native / portable.

Memory: at each thread count, each side's peak resident set (ru_maxrss of
its process, from wait4) over 2 steps of the model, in runs of their own
(the least of --repeats), and the same on a tiny GPT (1 layer, hidden 8): that is the fixed part each
side pays whatever the model (Python, torch and its libraries; the
executable, MPI, OpenBLAS/OpenMP and the runtime), and the peak minus it
the step's growth. Printed: peak, fixed part and growth per side, Braid's
plan (braidc --memory-report), the model's parameters, gradients and AdamW
moments, and braid / pytorch of the peaks and of the growths (below 1:
Braid holds less).

With --check (ctest's bench-train-throughput), the script exits 1 unless
both sides ran at every thread count, Braid's program printed a finite loss
for each of its 1 + S steps and its summary, every time is finite and
positive and the ratio is finite, and every peak and fixed part of memory
and the ratio of the peaks are finite and positive; a side that fails ends
the script with its command and status.

    bench/train_throughput.py [--steps S] [--threads 1,2] [--unfused] [--portable] [--csv]
                              [--check]
"""

import math

import argparse
from statistics import median
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))

from benchlib import BenchError, guarded  # noqa: E402


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True,
                          env=env).stdout


def thread_env(threads):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def step_flops(bin_dir, model):
    """F + B + W FLOPs of one training step, from braid-cost-report."""
    out = run(bin_dir / "braid-opt", model, "--braid-autodiff", "--braid-cost-report", "-o", os.devnull)
    total = 0.0
    for line in out.splitlines():
        m = re.match(r"^(\S.*?)\s+(\d+)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+\S+\s*$", line)
        if m:
            total += int(m.group(2)) * int(m.group(3))
    if total == 0:
        raise SystemExit("could not read the FLOPs from braid-cost-report:\n" + out)
    return total


def time_braid(program, steps, threads, repeats):
    """Seconds per step: the program's own mean over steps 1 .. S."""
    return min(braid_step_time(program, steps, threads) for _ in range(repeats))


def time_braid_pairs(fused, unfused, steps, threads, repeats):
    """Fused and unfused programs run alternately: the best seconds per step
    of each, and each pair's unfused / fused ratio."""
    pairs = [(braid_step_time(fused, steps, threads), braid_step_time(unfused, steps, threads))
             for _ in range(repeats)]
    return (min(p[0] for p in pairs), min(p[1] for p in pairs),
            [u / f for f, u in pairs])


def braid_step_time(program, steps, threads):
    """One run's mean seconds per step over steps 1 .. S."""
    out = run(program, "--steps", 1 + steps, "--seed", 0, env=thread_env(threads))
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)", out, re.M)]
    if len(losses) != 1 + steps or not all(math.isfinite(v) for v in losses):
        raise BenchError(f"braid at {threads} thread(s): expected {1 + steps} finite losses, "
                         f"got {losses}:\n{out}")
    m = re.search(r"^summary: \d+ steps, (\S+) ms/step", out, re.M)
    if not m:
        raise BenchError(f"braid at {threads} thread(s) printed no summary:\n{out}")
    return float(m.group(1)) / 1e3


def torch_worker(args):
    """Runs in a child process so that the thread count is set before torch
    starts its pools; prints the best seconds per step."""
    import torch
    import torch_reference as ref
    torch.set_num_threads(args.threads_one)
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

    def step():
        opt.zero_grad()
        logits = ref.gpt_logits(ref.Weights(params), tokens, n, args.heads)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, v), labels.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    best = float("inf")
    for _ in range(args.repeats):
        step()  # warm-up
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        best = min(best, (time.perf_counter() - start) / args.steps)
    print(best)


def time_torch(args, threads):
    out = run(sys.executable, __file__, "--torch-worker", "--threads-one", threads,
              *[f"--{k.replace('_', '-')}={getattr(args, k)}"
                for k in ("layers", "hidden", "heads", "seq", "vocab", "batch", "steps", "repeats")],
              env=thread_env(threads))
    lines = out.strip().splitlines()
    try:
        return float(lines[-1])
    except (IndexError, ValueError):
        raise BenchError(f"pytorch at {threads} thread(s) printed no time:\n{out}")


def sgemm_gflops(threads, size=1024, repeats=5):
    code = ("import numpy as np, time\n"
            f"a = np.random.rand({size}, {size}).astype(np.float32); b = a.copy(); a @ b\n"
            "best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter())"
            f" for _ in range({repeats}))\n"
            f"print(2 * {size}**3 / best / 1e9)\n")
    return float(run(sys.executable, "-c", code, env=thread_env(threads)).strip())


# Peak memory. Each side's process runs MEMORY_STEPS steps of the model on
# its own (not the timed runs), and again on a tiny GPT: what that run holds
# is the fixed part a side pays whatever the model (Python, torch and its
# libraries; the executable, MPI, OpenBLAS/OpenMP and the runtime), so the
# peak minus it is what the step itself costs.
MEMORY_STEPS = 2
TINY_GPT = dict(layers=1, hidden=8, heads=2, seq=4, vocab=8, batch=1)
MIN_GROWTH_MIB = 1.0


def peak_rss_mib(command, env):
    """Runs `command`; its stdout and its peak resident set in MiB (ru_maxrss
    from wait4: the process's own, or a descendant's it waited for if larger)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(a) for a in command], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, stdout, stderr)
    return stdout, usage.ru_maxrss / 1024


def planned_mib(bin_dir, train):
    """The compiled step's own buffers (braidc --memory-report's total)."""
    out = run(bin_dir / "braidc", train, "--entry", "train_step", "--memory-report",
              "--emit", "mlir", "-o", os.devnull)
    m = re.search(r"^all(?:\s+\d+){7}\s+(\S+)\s*$", out, re.M)
    if not m:
        raise BenchError(f"braidc --memory-report printed no plan:\n{out}")
    return float(m.group(1))


def measure_memory(args, bin_dir, program, train, tmp, threads):
    """Rows (side, threads, peak MiB, fixed MiB, planned MiB or nan) for Braid's
    program and PyTorch at each thread count."""
    from braid import models
    tiny_model, tiny_train, tiny = tmp / "tiny.mlir", tmp / "tiny-train.mlir", tmp / "tiny"
    tiny_model.write_text(models.gpt(**TINY_GPT))
    tiny_train.write_text(run(bin_dir / "braid-opt", tiny_model, "--braid-autodiff",
                              "--braid-train-step=lr=3e-4"))
    run(bin_dir / "braidc", tiny_train, "--entry", "train_step", "-o", tiny)
    planned = planned_mib(bin_dir, train)

    def braid_peak(prog, t):
        out, mib = peak_rss_mib([prog, "--steps", MEMORY_STEPS, "--seed", 0], thread_env(t))
        if len(re.findall(r"^step \d+ loss \S+", out, re.M)) != MEMORY_STEPS:
            raise BenchError(f"{prog} at {t} thread(s): expected {MEMORY_STEPS} losses:\n{out}")
        return mib

    def torch_peak(t, sizes):
        # The worker runs a warm-up step and --steps timed ones.
        return peak_rss_mib([sys.executable, __file__, "--torch-worker", "--threads-one", t,
                             "--steps", MEMORY_STEPS - 1, "--repeats", 1,
                             *[f"--{k}={v}" for k, v in sizes.items()]], thread_env(t))[1]

    def least(peak, *a):
        # PyTorch's peak differs between identical runs (on the larger GPT
        # by up to a quarter), so each figure is the least of --repeats runs.
        return min(peak(*a) for _ in range(args.repeats))

    sizes = {k: getattr(args, k) for k in TINY_GPT}
    rows = []
    for t in threads:
        rows.append(("braid", t, least(braid_peak, program, t), least(braid_peak, tiny, t),
                     planned))
        rows.append(("pytorch", t, least(torch_peak, t, sizes), least(torch_peak, t, TINY_GPT),
                     float("nan")))
    return rows


def memory_report(args, memory, csv):
    """The memory rows as text or CSV, and the --check failures among them."""
    h, v, s, n = args.hidden, args.vocab, args.seq, args.layers
    # Parameters, their gradients and AdamW's two moments, 4 bytes each.
    state = 4 * 4 * (v * h + s * h + n * (12 * h * h + 13 * h) + 2 * h) / 2**20
    ratios = []
    for t in sorted({r[1] for r in memory}):
        b, p = (next(r for r in memory if r[:2] == (side, t)) for side in ("braid", "pytorch"))
        # Growths under MIN_GROWTH_MIB are within the fixed parts' noise.
        growth = min(b[2] - b[3], p[2] - p[3]) >= MIN_GROWTH_MIB
        ratios.append((t, b[2] / p[2] if p[2] > 0 else math.nan, (b[2] - b[3]) / (p[2] - p[3]) if growth else math.nan))
    failures = [f"{side} memory at {t} thread(s): peak {peak!r} MiB, fixed {fixed!r} MiB"
                for side, t, peak, fixed, _ in memory
                if not all(math.isfinite(x) and x > 0 for x in (peak, fixed))]
    failures += [f"braid / pytorch peak memory at {t} thread(s): {r!r}" for t, r, _ in ratios
                 if not (math.isfinite(r) and r > 0)]
    if csv:
        print("memory_side,threads,peak_mib,fixed_mib,growth_mib,planned_mib")
        for side, t, peak, fixed, plan in memory:
            print(f"{side},{t},{peak:.1f},{fixed:.1f},{peak - fixed:.1f},{plan:.1f}")
        for t, r, g in ratios:
            print(f"memory_ratio_braid_over_pytorch_peak_{t},{r:.3f}")
            print(f"memory_ratio_braid_over_pytorch_growth_{t},{g:.3f}")
        print(f"memory_parameters_gradients_adamw_mib,{state:.1f}")
        return failures
    tiny = ", ".join(f"{k} {v}" for k, v in TINY_GPT.items())
    print(f"peak resident set of one process over {MEMORY_STEPS} steps (getrusage; least of "
          f"{args.repeats}), MiB; fixed: "
          f"the same on a tiny GPT ({tiny}); planned: braidc --memory-report")
    print(f"{'side':8} {'threads':>7} {'peak':>9} {'fixed':>9} {'growth':>9} {'planned':>9}")
    for side, t, peak, fixed, plan in memory:
        planned = f"{plan:9.1f}" if math.isfinite(plan) else f"{'-':>9}"
        print(f"{side:8} {t:>7} {peak:>9.1f} {fixed:>9.1f} {peak - fixed:>9.1f} {planned}")
    print(f"parameters, gradients and AdamW moments of the model: {state:.1f} MiB")
    for t, r, g in ratios:
        growth = (f"{g:.2f}x" if math.isfinite(g) else
                  f"not compared (a growth under {MIN_GROWTH_MIB:g} MiB)")
        print(f"braid / pytorch memory at {t} thread(s) (below 1: Braid holds less): "
              f"peak {r:.2f}x, growth over the fixed part {growth}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best taken)")
    parser.add_argument("--threads", default="1,2", help="thread counts to try")
    parser.add_argument("--unfused", action="store_true",
                        help="also time the program compiled with braidc --no-fuse")
    parser.add_argument("--portable", action="store_true",
                        help="also time the program compiled with braidc --portable")
    parser.add_argument("--csv", action="store_true", help="print CSV")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless both sides ran and every time and the ratio are finite")
    parser.add_argument("--bin-dir", default=os.environ.get("BRAID_BIN_DIR", ROOT / "build" / "bin"))
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    return guarded(measure, args)


def measure(args):
    from braid import models
    bin_dir = Path(args.bin_dir)
    threads = [int(t) for t in args.threads.split(",")]
    tokens = args.batch * args.seq
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))
        train = tmp / "train.mlir"
        train.write_text(run(bin_dir / "braid-opt", model, "--braid-autodiff",
                             "--braid-train-step=lr=3e-4"))
        program = tmp / "train"
        run(bin_dir / "braidc", train, "--entry", "train_step", "-o", program)
        unfused = tmp / "train-unfused"
        if args.unfused:
            run(bin_dir / "braidc", train, "--entry", "train_step", "--no-fuse", "-o", unfused)
        portable = tmp / "train-portable"
        if args.portable:
            run(bin_dir / "braidc", train, "--entry", "train_step", "--portable", "-o", portable)
        flops = step_flops(bin_dir, model)
        load_start = os.getloadavg()
        rows = []
        pair_ratios = []
        for t in threads:
            if args.unfused:
                f, u, ratios = time_braid_pairs(program, unfused, args.steps, t, args.repeats)
                rows += [("braid", t, f), ("unfused", t, u)]
                pair_ratios += [(t, r) for r in ratios]
            else:
                rows.append(("braid", t, time_braid(program, args.steps, t, args.repeats)))
            if args.portable:
                rows.append(("portable", t, time_braid(portable, args.steps, t, args.repeats)))
            rows.append(("pytorch", t, time_torch(args, t)))
        sgemm = max(sgemm_gflops(t) for t in threads)
        memory = measure_memory(args, bin_dir, program, train, tmp, threads)
        load_end = os.getloadavg()

    best = {side: min((r[2] for r in rows if r[0] == side and math.isfinite(r[2])),
                      default=float("nan")) for side in ("braid", "unfused", "portable", "pytorch")}
    ratio = best["pytorch"] / best["braid"]
    failures = [f"{side} at {t} thread(s): {sec!r} s per step" for side, t, sec in rows
                if not (math.isfinite(sec) and sec > 0)]
    if not math.isfinite(ratio) or ratio <= 0:
        failures.append(f"braid / pytorch ratio {ratio!r}")
    if args.csv:
        print("side,threads,ms_per_step,tokens_per_s,gflops,fraction_of_sgemm")
        for side, t, sec in rows:
            print(f"{side},{t},{sec * 1e3:.3f},{tokens / sec:.1f},{flops / sec / 1e9:.3f},"
                  f"{flops / sec / 1e9 / sgemm:.4f}")
        print(f"ratio_braid_over_pytorch,{ratio:.3f}")
        if args.unfused:
            print(f"ratio_unfused_over_pytorch,{best['pytorch'] / best['unfused']:.3f}")
            print(f"ratio_braid_over_unfused,{best['unfused'] / best['braid']:.3f}")
            print(f"ratio_braid_over_unfused_pair_median,{median(r for _, r in pair_ratios):.3f}")
        print(f"load_average_start,{load_start[0]:.2f}")
        print(f"load_average_end,{load_end[0]:.2f}")
        if args.portable:
            print(f"ratio_native_over_portable,{best['portable'] / best['braid']:.3f}")
        failures += memory_report(args, memory, csv=True)
        return check(args, failures)
    print(f"GPT training step: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, "
          f"sequence {args.seq}, vocabulary {args.vocab}, batch {args.batch} ({tokens} tokens); "
          f"AdamW; {flops / 1e9:.3f} GFLOP per step (braid-cost-report)")
    print(f"OpenBLAS SGEMM 1024^3 on this machine: {sgemm:.1f} GFLOP/s (best over threads)")
    print(f"{'side':8} {'threads':>7} {'ms/step':>10} {'tokens/s':>10} {'GFLOP/s':>9} {'of SGEMM':>9}")
    for side, t, sec in rows:
        mark = " *" if sec == best[side] else ""
        print(f"{side:8} {t:>7} {sec * 1e3:>10.2f} {tokens / sec:>10.0f} {flops / sec / 1e9:>9.2f} "
              f"{flops / sec / 1e9 / sgemm:>9.3f}{mark}")
    print(f"braid / pytorch throughput at each side's best thread count (*): {ratio:.2f}x")
    if args.unfused:
        print(f"braid --no-fuse / pytorch: {best['pytorch'] / best['unfused']:.2f}x; "
              f"fused / unfused: {best['unfused'] / best['braid']:.2f}x")
        for t in threads:
            ratios = [r for u, r in pair_ratios if u == t]
            print(f"fused / unfused in alternating pairs at {t} thread(s): median "
                  f"{median(ratios):.2f}x ({', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"load average (1 min) at the start: {load_start[0]:.2f}, at the end: {load_end[0]:.2f} "
          f"({os.cpu_count()} CPUs)")
    if args.portable:
        print(f"native (default) / --portable throughput: "
              f"{best['portable'] / best['braid']:.2f}x")
    failures += memory_report(args, memory, csv=False)
    return check(args, failures)


def check(args, failures):
    """With --check: 1 (and why) if a measurement is missing or not finite."""
    if not args.check:
        return 0
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    if failures:
        return 1
    print("check: both sides measured at every thread count; ratio and memory figures finite")
    return 0


if __name__ == "__main__":
    sys.exit(main())
