#!/usr/bin/python3
"""Step time and exposed communication with validation deferred to the next
step (braidc --defer-validation) against the plain step, in one run.

Workload: one Llama (untied head; default 4 layers, hidden 128, 4 heads,
sequence 64, vocabulary 256, global batch 8), an AdamW step clipped at
--clip-norm (default 100, so that no step is clipped: a clipped step is run
again under deferral, which the table counts), each configuration run by
`braid-run --threads 1`:

  pp2-1f1b   --mesh pp=2, 1F1B over 4 micro-batches, on 2 ranks
  pp2-zbv    --mesh pp=2, ZB-V over 4 micro-batches, on 2 ranks
  dp2-zero3  --mesh dp=2 --zero 3 --async-collectives, on 2 ranks

each compiled twice: "plain" (the gradient norm is reduced and the updates
clipped within the step; in a pipeline the norm's running sum crosses from
stage to stage at the end of the step) and "deferred" (--defer-validation:
each step's update is validated during the next step; the sums are
reduced by an all_reduce started at the next step's start). Programs run
round-robin --repeats times; the run with the best step time of each is
kept, with its trace (`braid-trace --csv`). The benchmark reports, per
program:

  ms/step     the program's own mean step time (rank 0's clock; the
              deferred program's steps run again included)
  again       steps run again after a rolled-back step
  exposed_%   time waiting on communication / step time, over every rank's
              timed steps

and per configuration, plain over deferred step time. The load average (1
min) at the start and the end is printed: the machine is shared, so times
are noisy.

With --check (ctest's bench-deferred-validation, on a tiny model), the
script exits 1 unless every program ran and printed finite losses, each
configuration's deferred losses agree with the plain ones within 1e-5
(a pipeline sums the stages' shares in another order) and no step was
run again, and every trace has a row per rank and timed step with
consistent figures.

    bench/deferred_validation.py [--steps S] [--repeats R] [--csv] [--check]
                                 [--config NAME]
"""

import argparse
import csv
import io
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from benchlib import (ROOT, BenchError, add_run_arguments, check_configs, check_result,
                      guarded, parse, print_load, run, thread_env)

sys.path.insert(0, str(ROOT / "python"))

MODES = ("plain", "deferred")


def configurations(microbatches):
    """(name, ranks, braidc flags, micro-batches)."""
    pipeline = ["--microbatches", str(microbatches)]
    return [
        ("pp2-1f1b", 2, ["--mesh", "pp=2", "--schedule", "1f1b", *pipeline], microbatches),
        ("pp2-zbv", 2, ["--mesh", "pp=2", "--schedule", "zb-v", *pipeline], microbatches),
        ("dp2-zero3", 2, ["--mesh", "dp=2", "--zero", "3", "--async-collectives"], 1),
    ]


def exposed(text, ranks, steps, what):
    """Waiting time over step time, summed over every rank's timed steps of
    a braid-trace --csv (steps 1 .. S; a deferred program's repeated steps
    and its last validating call are rows of their own, left out)."""
    rows = [r for r in csv.DictReader(io.StringIO(text))
            if re.fullmatch(r"[1-9][0-9]*", r["step"])]
    per_rank = {}
    for r in rows:
        per_rank.setdefault(r["rank"], []).append(r)
    if sorted(per_rank) != sorted(str(i) for i in range(ranks)) or \
            any(len(v) != steps for v in per_rank.values()):
        raise BenchError(f"{what}: expected {steps} timed steps on each of {ranks} ranks:\n{text}")
    ms = wait = 0.0
    for r in rows:
        step_ms, wait_ms = float(r["ms"]), float(r["wait_ms"])
        if not (math.isfinite(step_ms) and math.isfinite(wait_ms) and
                0 <= wait_ms <= step_ms + 1e-3):
            raise BenchError(f"{what}: inconsistent row {r}")
        ms += step_ms
        wait += wait_ms
    return wait / ms if ms > 0 else math.nan


def again(out):
    m = re.search(r"^summary: .*; (\d+) steps? run again", out, re.M)
    return int(m.group(1)) if m else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, layers=4, hidden=128, batch=8,
                      batch_help="global batch (split over dp or the micro-batches)", steps=20,
                      repeats=3)
    parser.add_argument("--microbatches", type=int, default=4,
                        help="micro-batches of the pipelines")
    parser.add_argument("--clip-norm", type=float, default=100.0)
    parser.add_argument("--config", action="append", default=[],
                        help="run only this configuration (repeatable)")
    args = parser.parse_args()
    check_configs(parser, [c[0] for c in configurations(args.microbatches)], args.config)
    if args.batch % (2 * args.microbatches):
        parser.error(f"--batch {args.batch} must split over dp=2 and over "
                     f"{args.microbatches} micro-batches")
    return guarded(measure, args)


def measure(args):
    from braid import models
    bin_dir = Path(args.bin_dir)
    common = ["--lr", "3e-4", "--clip-norm", str(args.clip_norm)]
    configs = [c for c in configurations(args.microbatches)
               if not args.config or c[0] in args.config]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        programs = {}
        for config, ranks, flags, micro in configs:
            model = tmp / f"llama{micro}.mlir"
            if not model.exists():
                model.write_text(models.llama(layers=args.layers, hidden=args.hidden,
                                              heads=args.heads, seq=args.seq,
                                              vocab=args.vocab,
                                              batch=args.batch // micro))
            for mode in MODES:
                extra = ["--defer-validation"] if mode == "deferred" else []
                programs[config, mode] = tmp / f"{config}-{mode}"
                run(bin_dir / "braidc", model, *common, *flags, *extra,
                    "-o", programs[config, mode])
        load_start = os.getloadavg()
        best, losses, repeated = {}, {}, {}
        for _ in range(args.repeats):
            for config, ranks, _, _ in configs:
                for mode in MODES:
                    key = (config, mode)
                    trace = tmp / f"{config}-{mode}.json"
                    out = run(bin_dir / "braid-run", "-n", ranks, "--threads", 1, programs[key],
                              "--steps", 1 + args.steps, "--seed", 0, "--trace", trace,
                              env=thread_env(1))
                    loss, sec = parse(out, args.steps, f"{config} {mode}")
                    losses.setdefault(key, loss)
                    repeated[key] = again(out)
                    if key not in best or sec < best[key][0]:
                        fraction = exposed(run(bin_dir / "braid-trace", trace, "--csv"),
                                           ranks, args.steps, f"{config} {mode}")
                        best[key] = (sec, fraction)
        load_end = os.getloadavg()

    failures = []
    results = []
    for config, ranks, _, _ in configs:
        plain = [float(v) for v in losses[config, "plain"]]
        deferred = [float(v) for v in losses[config, "deferred"]]
        worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(deferred, plain))
        if worst > 1e-5:
            failures.append(f"{config}: deferred losses differ from plain by {worst:.3g} "
                            f"> 1e-5: {deferred} vs {plain}")
        for mode in MODES:
            sec, fraction = best[config, mode]
            results.append((config, ranks, mode, sec * 1e3, repeated[config, mode], fraction))
            if not (math.isfinite(sec) and sec > 0 and math.isfinite(fraction)):
                failures.append(f"{config} {mode}: {sec!r} s per step, exposed {fraction!r}")
            if repeated[config, mode]:
                failures.append(f"{config} {mode}: {repeated[config, mode]} steps run again")
    by_key = {(r[0], r[2]): r for r in results}
    ratios = [(config, by_key[config, "plain"][3] / by_key[config, "deferred"][3],
               by_key[config, "plain"][5], by_key[config, "deferred"][5])
              for config, _, _, _ in configs]

    if args.csv:
        print("config,ranks,validation,ms_per_step,steps_again,exposed_fraction")
        for config, ranks, mode, ms, rerun, fraction in results:
            print(f"{config},{ranks},{mode},{ms:.3f},{rerun},{fraction:.4f}")
        print("config,plain_over_deferred_step,exposed_plain,exposed_deferred")
        for config, ratio, before, after in ratios:
            print(f"{config},{ratio:.3f},{before:.4f},{after:.4f}")
    else:
        print(f"Llama training step: {args.layers} layers, hidden {args.hidden}, {args.heads} "
              f"heads, sequence {args.seq}, vocabulary {args.vocab}, global batch {args.batch}; "
              f"AdamW, clip-norm {args.clip_norm:g}; 1 thread per rank; best of {args.repeats} "
              f"rounds of {args.steps} timed steps; exposed communication over every rank's "
              f"timed steps")
        print(f"{'config':10} {'ranks':>5} {'validation':>10} {'ms/step':>9} {'again':>5} "
              f"{'exposed_%':>9}")
        for config, ranks, mode, ms, rerun, fraction in results:
            print(f"{config:10} {ranks:>5} {mode:>10} {ms:>9.1f} {rerun:>5} "
                  f"{100 * fraction:>9.1f}")
        for config, ratio, before, after in ratios:
            print(f"{config}: plain / deferred step time {ratio:.2f}x; exposed communication "
                  f"{100 * before:.1f}% -> {100 * after:.1f}%")
    print_load(load_start, load_end, args.csv)
    return check_result(failures, args.check,
                        "check: every program ran; deferred losses within 1e-5 of plain, no "
                        "step run again; trace figures consistent")


if __name__ == "__main__":
    sys.exit(main())
