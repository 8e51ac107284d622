#!/usr/bin/env python3
"""Plans timed with their ranks free and pinned, against the planner's ranking.

On a machine running more ranks than cores, braid-run leaves the ranks
unbound, and Linux's load balancer places them: a rank waiting in the
runtime (polling, yielding between polls) stays runnable and counts as load,
so two computing ranks can share one core while waiting ones hold the other
(bench/SharedCores.c measures that). This benchmark times every executable
of a `plan_ranking.py --build-only` directory both ways, in one run,
alternating which goes first: free (braid-run's default) and pinned, each
rank to core (stage + replica) % cores (stage: its pipeline stage, rank % pp;
replica: rank / pp), so that the ranks of a stage, and neighbouring stages,
sit on different cores. It reports, for each, the Spearman correlation of
the median step times with the predictions of a plan_ranking CSV (the
planner's), the round-to-round correlation (the noise), and pinned over free
by mesh.

  bench/pinned_ranks.py --build-dir DIR --predictions CSV --ranks 4 \\
      --rounds 2 --json OUT

--check (ctest) exits non-zero unless every plan ran every time both ways;
the correlations and ratios are measured, not checked.
"""

import argparse
import csv
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from plan_ranking import spearman  # average ranks for ties, as plan_ranking reports

# Pins the rank this shell becomes to core (stage + replica) % cores.
PIN = ('r=$OMPI_COMM_WORLD_RANK; c=$(nproc --all); '
       'exec taskset -c $(( (r % PP + r / PP) % c )) "$0" "$@"')


def step_ms(bin_dir, ranks, program, pp, pinned, steps, timeout):
    cmd = [str(bin_dir / "braid-run"), "-n", str(ranks), "--threads", "1"]
    if pinned:
        cmd += ["sh", "-c", PIN]
    cmd += [str(program), "--steps", str(steps), "--seed", "0"]
    env = dict(os.environ, PP=str(pp))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"summary: \d+ steps, ([0-9.]+) ms/step", p.stdout + p.stderr)
    return float(m.group(1)) if p.returncode == 0 and m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True, type=Path,
                        help="a plan_ranking.py --build-only directory")
    parser.add_argument("--predictions", required=True, type=Path,
                        help="a plan_ranking.py --csv file of the same plans")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--bin-dir", type=Path,
                        default=Path(__file__).resolve().parent.parent / "build" / "bin")
    parser.add_argument("--json", type=Path, help="write every run's step time here")
    parser.add_argument("--reuse", type=Path,
                        help="a --json file of an earlier run: report it, time nothing")
    parser.add_argument("--check", action="store_true",
                        help="exit non-zero unless every plan ran every time both ways")
    args = parser.parse_args()

    predicted = {r["plan"]: float(r["predicted_s"]) for r in csv.DictReader(open(args.predictions))}
    plans = []
    for plan_json in sorted(args.build_dir.glob("*/plan.json")):
        spec = json.loads(plan_json.read_text())
        flags = spec["flags"]
        mesh = dict(kv.split("=") for kv in flags[flags.index("--mesh") + 1].split(","))
        if spec["name"] in predicted:
            plans.append((spec["name"], plan_json.parent / "prog", int(mesh["pp"])))
    if not plans:
        sys.exit(f"pinned_ranks: no plan of {args.build_dir} is in {args.predictions}")
    runs = {name: {"free": [], "pinned": []} for name, _, _ in plans}
    if args.reuse:
        runs = json.loads(args.reuse.read_text())
        args.rounds = min(len(m) for r in runs.values() for m in r.values())
    rng = random.Random(7)
    start = time.time()
    for r in range(0 if args.reuse else args.rounds):
        order = plans[:]
        rng.shuffle(order)
        for i, (name, program, pp) in enumerate(order):
            for mode in (("free", "pinned") if (i + r) % 2 == 0 else ("pinned", "free")):
                runs[name][mode].append(step_ms(args.bin_dir, args.ranks, program, pp,
                                                mode == "pinned", args.steps, args.timeout))
        print(f"round {r + 1} of {args.rounds} done after {time.time() - start:.0f} s", flush=True)
        if args.json:
            args.json.write_text(json.dumps(runs, indent=0))

    names = [n for n in runs if n in predicted and all(t is not None for m in runs[n].values() for t in m)]
    print(f"{len(names)} of {len(plans)} plans ran every time")
    if not names:
        sys.exit("pinned_ranks: no plan ran every time both ways")
    for mode in ("free", "pinned"):
        medians = [statistics.median(runs[n][mode]) for n in names]
        s = spearman([predicted[n] for n in names], medians)
        pairs = [spearman([runs[n][mode][i] for n in names], [runs[n][mode][j] for n in names])
                 for i in range(args.rounds) for j in range(i + 1, args.rounds)]
        noise = f"{statistics.mean(pairs):.3f}" if pairs else "n/a"
        fastest = min(medians)
        pick = medians[min(range(len(names)), key=lambda i: predicted[names[i]])]
        print(f"{mode:6s}: Spearman with the predictions {s:.3f}; round to round {noise}; "
              f"fastest {fastest:.1f} ms; the planner's pick {pick:.1f} ms "
              f"({(pick / fastest - 1) * 100:.1f}% slower)")
    by_mesh = {}
    for n in names:
        ratio = statistics.median(runs[n]["pinned"]) / statistics.median(runs[n]["free"])
        by_mesh.setdefault(" ".join(n.split()[:3]), []).append(ratio)
    for mesh, ratios in sorted(by_mesh.items()):
        print(f"  {mesh}: pinned / free, median over {len(ratios)} plans: "
              f"{statistics.median(ratios):.3f}")
    if args.check and len(names) != len(plans):
        failed = sorted(n for n, _, _ in plans if n not in names)
        sys.exit("pinned_ranks: --check: these plans failed or timed out at least once: " +
                 "; ".join(failed))


if __name__ == "__main__":
    main()
