#!/usr/bin/python3
"""Data-parallel scaling of a braidc-compiled GPT, with and without the
collective scheduling pass.

Workload: one GPT (default 4 layers, hidden 256, 4 heads, sequence 64,
vocabulary 256, global batch 8), an AdamW training step (clipping at 1.0).
In one invocation, every program below runs --repeats times, in turn
(round-robin, so that each sees the same load), and the best time per step
of each is kept:

  single      the step on one rank, at 1 and at 2 threads (the best is the
              baseline: the best single-rank configuration)
  blocking    dp=2 on 2 ranks x 1 thread, blocking collectives (braidc's
              default)
  async       dp=2, --async-collectives --schedule-collectives=false: started
              collectives, each where the collective was
  scheduled   dp=2, --async-collectives --schedule-across-repeats:
              braid-schedule-collectives moves the starts up and the waits
              down, a layer's gradient bucket waited for after its
              braid.repeat
  layer-waits the same with --schedule-across-repeats=false (braidc's
              default): each layer's bucket waited for in its layer body
  no-progress the scheduled program with BRAID_PROGRESS=0 (no progress calls
              between ops: a started collective moves only in MPI calls)

It prints each program's ms/step, its speed-up over the best single-rank
configuration (same global batch, so tokens/s scale alike), scheduled /
async, scheduled / blocking and scheduled / layer-waits, and the load average (1 min) at the start
and the end (the machine is shared). Times are the programs' own
`summary: ... ms/step` (mean over steps 1 .. S, rank 0's clock).

With --check (ctest's bench-dp-scaling, on a tiny model), the script exits 1
unless every program ran, printed a finite loss for every step, the dp
programs' losses are identical to one another (the pass only reorders), and
every time and ratio is finite.

    bench/dp_scaling.py [--steps S] [--repeats R] [--csv] [--check]
"""

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

from benchlib import (ROOT, BenchError, add_run_arguments, check_result, guarded, parse,
                      print_load, run, thread_env)

sys.path.insert(0, str(ROOT / "python"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, layers=4, hidden=256, batch=8, batch_help="global batch (split over dp)", steps=10, repeats=3)
    args = parser.parse_args()
    return guarded(measure, args)


def measure(args):
    from braid import models
    bin_dir = Path(args.bin_dir)
    common = ["--lr", "3e-4", "--clip-norm", "1.0"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))
        programs = {}
        for name, flags in [("single", ["--train"]),
                            ("blocking", ["--mesh", "dp=2"]),
                            ("async", ["--mesh", "dp=2", "--async-collectives",
                                       "--schedule-collectives=false"]),
                            ("scheduled", ["--mesh", "dp=2", "--async-collectives",
                                           "--schedule-across-repeats"]),
                            ("layer-waits", ["--mesh", "dp=2", "--async-collectives",
                                             "--schedule-across-repeats=false"])]:
            programs[name] = tmp / name
            run(bin_dir / "braidc", model, *common, *flags, "-o", programs[name])
        braid_run = bin_dir / "braid-run"
        steps = ["--steps", 1 + args.steps, "--seed", 0]
        runs = [
            ("single", 1, [programs["single"], *steps], thread_env(1)),
            ("single", 2, [programs["single"], *steps], thread_env(2)),
        ]
        for name in ("blocking", "async", "scheduled", "layer-waits"):
            runs.append((name, 1, [braid_run, "-n", 2, "--threads", 1, programs[name], *steps],
                         thread_env(1)))
        runs.append(("no-progress", 1,
                     [braid_run, "-n", 2, "--threads", 1, programs["scheduled"], *steps],
                     thread_env(1, BRAID_PROGRESS="0")))
        load_start = os.getloadavg()
        best, losses = {}, {}
        for _ in range(args.repeats):
            for name, threads, command, env in runs:
                loss, sec = parse(run(*command, env=env), args.steps, f"{name} ({threads} threads)")
                key = (name, threads)
                best[key] = min(best.get(key, math.inf), sec)
                # Threads may sum in another order: compare like with like.
                losses.setdefault(key, loss)
                if losses[key] != loss:
                    raise BenchError(f"{name} at {threads} thread(s): losses changed between runs: "
                                     f"{losses[key]} vs {loss}")
        load_end = os.getloadavg()

    single = min(best[("single", 1)], best[("single", 2)])
    rows = [(name, threads, sec, single / sec) for (name, threads), sec in best.items()]
    ratios = {
        "scheduled_over_async": best[("async", 1)] / best[("scheduled", 1)],
        "scheduled_over_blocking": best[("blocking", 1)] / best[("scheduled", 1)],
        "progress_over_no_progress": best[("no-progress", 1)] / best[("scheduled", 1)],
        "scheduled_over_layer_waits": best[("layer-waits", 1)] / best[("scheduled", 1)],
    }
    failures = [f"{name} at {t} thread(s): {sec!r} s per step" for name, t, sec, _ in rows
                if not (math.isfinite(sec) and sec > 0)]
    failures += [f"{k} {v!r}" for k, v in ratios.items() if not math.isfinite(v)]
    dp_losses = {name: losses[(name, 1)]
                 for name in ("blocking", "async", "scheduled", "layer-waits", "no-progress")}
    if len({tuple(v) for v in dp_losses.values()}) != 1:
        failures.append(f"dp programs' losses differ: {dp_losses}")
    tokens = args.batch * args.seq
    if args.csv:
        print("program,ranks,threads,ms_per_step,tokens_per_s,speedup_over_best_single")
        for name, t, sec, speedup in rows:
            ranks = 1 if name == "single" else 2
            print(f"{name},{ranks},{t},{sec * 1e3:.3f},{tokens / sec:.1f},{speedup:.3f}")
        for k, v in ratios.items():
            print(f"{k},{v:.3f}")
    else:
        print(f"GPT training step: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, "
              f"sequence {args.seq}, vocabulary {args.vocab}, global batch {args.batch} "
              f"({tokens} tokens); AdamW, clip-norm 1.0; best of {args.repeats} rounds of "
              f"{args.steps} timed steps")
        print(f"{'program':12} {'ranks':>5} {'threads':>7} {'ms/step':>10} {'tokens/s':>10} "
              f"{'vs single':>10}")
        for name, t, sec, speedup in rows:
            ranks = 1 if name == "single" else 2
            print(f"{name:12} {ranks:>5} {t:>7} {sec * 1e3:>10.2f} {tokens / sec:>10.0f} "
                  f"{speedup:>9.2f}x")
        print(f"dp=2 over the best single-rank configuration: blocking "
              f"{single / best[('blocking', 1)]:.2f}x, async {single / best[('async', 1)]:.2f}x, "
              f"scheduled {single / best[('scheduled', 1)]:.2f}x")
        print(f"scheduled / async: {ratios['scheduled_over_async']:.2f}x; scheduled / blocking: "
              f"{ratios['scheduled_over_blocking']:.2f}x; progress calls on / off: "
              f"{ratios['progress_over_no_progress']:.2f}x; scheduled / layer-waits: "
              f"{ratios['scheduled_over_layer_waits']:.2f}x")
    print_load(load_start, load_end, args.csv)
    return check_result(failures, args.check,
                        "check: every program ran; dp losses identical; times and ratios finite")


if __name__ == "__main__":
    sys.exit(main())
