#!/usr/bin/python3
"""The planner's ranking of plans against measured step times on this machine.

Workload: a small GPT (default 4 layers, hidden 128, 4 heads, sequence 64,
vocabulary 256, program batch 4, so one micro-batch of 4 samples over the dp
ranks) trained with a global batch of 16 (4 micro-batches) on --ranks MPI
ranks of this machine (braid-run, one thread per rank).

1. Enumerates every plan braidc can compile for the program on --ranks
   devices, as the planner's search does (docs/planner.md): dp x tp x pp, the
   schedules with pp > 1 (1F1B, interleaved 1F1B with 2.. chunks, ZB-H1,
   ZB-H2, ZB-V, auto), ZeRO 0-3 with dp > 1, sequence parallelism with tp >
   1, recomputation none / selective / full; even stage boundaries (the
   planner's own pick, with its balanced boundaries, is added). Each is
   predicted with `braid-plan --json --hardware H`; those the model rejects
   (divisibility) are left out.
2. Measures a representative set (--plans N, default 16; --all: every
   plan): the planner's pick (`braidc --mesh auto --devices N --plan-only`),
   the best predicted plan of every mesh, then plans at evenly spaced places
   of the predicted ranking. Each is compiled with braidc (the plan's
   flags) and run --repeats times for 1 + --steps steps (round robin over
   the plans, so that a busy spell hits all of them alike); a run's time is
   the program's `summary: ... ms/step` (the mean over the steps after the
   first) and a plan's time is its best run.
3. Prints predicted against measured per plan, the Spearman rank
   correlation of the two (ties averaged), and the planner's pick against
   the fastest measured plan, with the load average before and after.
4. Memory (issue 13: the predicted memory per rank within 15% of the
   measured peak resident set): every run of a plan records each rank's
   peak resident set (getrusage of the rank's process, as
   bench/pipeline_memory.py does); each rank's largest over the runs is
   compared with braid-plan's memory (--compiled-buffers: braidc's program
   buffers counted) of its pipeline rank (world rank r
   holds stage r mod pp, docs/codegen.md), and the plans whose every rank
   is within 15% are counted. --memory-only runs each plan once for this
   (no timing).

    bench/plan_ranking.py [--ranks 4] [--hardware cpu-local] [--plans 16 | --all]
        [--steps 5] [--repeats 3] [--csv FILE] [--reuse FILE] [--memory-only] [--check]

--check (ctest) exits non-zero unless every measured plan compiled, ran and
printed a finite time and a peak resident set per rank, and the correlation
is a number; it judges neither the correlation (a timing on a shared
machine) nor the memory.
"""

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

SCHEDULES = ["1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "auto"]
RECOMPUTE = ["none", "selective", "full"]
# Runs one rank and prints its world rank (from the MPI launcher's
# environment) and peak resident set in KiB on stderr (as
# bench/pipeline_memory.py), in one write so that the ranks' lines do not
# interleave.
RSS_WRAPPER = ("import os, resource, subprocess, sys; "
               "rank = next((os.environ[k] for k in ('OMPI_COMM_WORLD_RANK', 'PMIX_RANK', "
               "'PMI_RANK') if k in os.environ), '?'); "
               "code = subprocess.run(sys.argv[1:]).returncode; "
               "os.write(2, ('maxrss_kib %s %d\\n' % (rank, resource.getrusage("
               "resource.RUSAGE_CHILDREN).ru_maxrss)).encode()); sys.exit(code)")
MEMORY_TOLERANCE = 0.15


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_plans(ranks, layers, batch, microbatches, heads):
    """Every plan of the search's space for the program (even boundaries)."""
    plans = []
    for pp in divisors(ranks):
        for tp in divisors(ranks // pp):
            dp = ranks // pp // tp
            if batch % dp or heads % tp or pp > layers:
                continue
            scheds = [(None, None)]
            if pp > 1:
                scheds = []
                for s in SCHEDULES:
                    if s == "interleaved-1f1b":
                        if microbatches % pp:
                            continue
                        scheds += [(s, v) for v in range(2, 5) if pp * v <= layers]
                    elif s == "zb-v":
                        if 2 * pp <= layers:
                            scheds.append((s, 2))
                    else:
                        scheds.append((s, 1))
            for sched, chunks in scheds:
                for rc in RECOMPUTE:
                    for sp in ([False, True] if tp > 1 else [False]):
                        for zero in (range(4) if dp > 1 else [0]):
                            plans.append({"dp": dp, "tp": tp, "pp": pp, "schedule": sched,
                                          "chunks": chunks, "zero": zero, "sp": sp,
                                          "recompute": rc, "stage_layers": None})
    return plans


def flags(plan, microbatches):
    f = ["--mesh", f"dp={plan['dp']},tp={plan['tp']},pp={plan['pp']}",
         "--microbatches", str(microbatches)]
    if plan["pp"] > 1:
        f += ["--schedule", plan["schedule"]]
        if plan["schedule"] == "interleaved-1f1b":
            f += ["--chunks", str(plan["chunks"])]
    if plan["zero"]:
        f += ["--zero", str(plan["zero"])]
    if plan["sp"]:
        f.append("--sp")
    if plan["recompute"] != "none":
        f += ["--recompute", plan["recompute"]]
    if plan["stage_layers"]:
        f += ["--stage-layers", plan["stage_layers"]]
    return f


def name(plan):
    s = f"dp{plan['dp']} tp{plan['tp']} pp{plan['pp']}"
    if plan["pp"] > 1:
        s += " " + plan["schedule"] + (f"/v{plan['chunks']}" if plan["chunks"] > 1 else "")
    if plan["zero"]:
        s += f" z{plan['zero']}"
    if plan["sp"]:
        s += " sp"
    if plan["recompute"] != "none":
        s += " rc=" + plan["recompute"]
    if plan["stage_layers"]:
        s += f" [{plan['stage_layers']}]"
    return s


def parse_flags(text):
    """A plan from braidc's `flags:` line."""
    words = text.split()
    get = lambda flag, default=None: words[words.index(flag) + 1] if flag in words else default
    mesh = dict(kv.split("=") for kv in get("--mesh").split(","))
    schedule = get("--schedule")
    chunks = int(get("--chunks", 0)) or (2 if schedule == "zb-v" else 1)
    return {"dp": int(mesh["dp"]), "tp": int(mesh["tp"]), "pp": int(mesh["pp"]),
            "schedule": schedule, "chunks": chunks if schedule else None,
            "zero": int(get("--zero", 0)), "sp": "--sp" in words,
            "recompute": get("--recompute", "none"), "stage_layers": get("--stage-layers")}


def predict(bin_dir, hardware, model, plan, batch, microbatches):
    # --compiled-buffers: the memory braidc's program holds, as measured.
    args = [str(bin_dir / "braid-plan"), str(model), "--hardware", hardware, "--json",
            "--compiled-buffers", "--mbs", str(batch // plan["dp"])] + flags(plan, microbatches)
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else float("nan")


def load():
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4, help="the program's batch (one micro-batch over dp)")
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--hardware", default="cpu-local")
    parser.add_argument("--plans", type=int, default=16, help="plans measured (the representative set)")
    parser.add_argument("--all", action="store_true", help="measure every plan")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", type=Path, help="write each measured plan's prediction and runs")
    parser.add_argument("--reuse", type=Path,
                        help="a --csv file of an earlier run: its plans' runs are reused, not "
                             "measured again (to predict the same timings with other hardware)")
    parser.add_argument("--memory-only", action="store_true",
                        help="run each plan once (2 steps) for its peak resident set per rank; "
                             "no timing")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    args = parser.parse_args()
    bin_dir = args.bin_dir
    if args.memory_only:
        if args.reuse:
            raise SystemExit("--memory-only measures; --reuse does not")
        args.repeats, args.steps = 1, 1
    m = args.global_batch // args.batch
    if m * args.batch != args.global_batch:
        raise SystemExit("--global-batch must be a multiple of --batch")

    from braid import models
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))
        # The planner's pick.
        proc = subprocess.run([str(bin_dir / "braidc"), str(model), "--mesh", "auto", "--devices",
                               str(args.ranks), "--global-batch", str(args.global_batch),
                               "--hardware", args.hardware, "--plan-only"],
                              capture_output=True, text=True)
        found = re.search(r"^flags: (.*)$", proc.stdout, re.M)
        if proc.returncode != 0 or not found:
            raise SystemExit(f"braidc --mesh auto failed:\n{proc.stdout}\n{proc.stderr}")
        pick = parse_flags(found.group(1))
        if pick["stage_layers"]:
            stages = pick["pp"] * (pick["chunks"] or 1)
            even = [args.layers // stages + (i < args.layers % stages) for i in range(stages)]
            if pick["stage_layers"] == ",".join(map(str, even)):
                pick["stage_layers"] = None  # the even split, as enumerated

        plans = enumerate_plans(args.ranks, args.layers, args.batch, m, args.heads)
        if all(name(p) != name(pick) for p in plans):
            plans.append(pick)
        reused, reused_rss = {}, {}
        if args.reuse:
            with open(args.reuse, newline="") as f:
                for row in csv.DictReader(f):
                    reused[row["plan"]] = [float(t) for t in row["runs_s"].split()]
                    if row.get("rss_mib"):  # files written before it have none
                        reused_rss[row["plan"]] = [float(x) for x in row["rss_mib"].split()]
            # Only the plans measured then (and the pick) need a prediction.
            plans = [p for p in plans if name(p) in reused or name(p) == name(pick)]
        rows = []
        for p in plans:
            cost = predict(bin_dir, args.hardware, model, p, args.batch, m)
            if cost is not None:
                rows.append({"plan": p, "name": name(p), "predicted": cost["step_time"],
                             "memory": [rank["total"] / 2**20 for rank in cost["memory"]]})
        if not any(r["name"] == name(pick) for r in rows):
            raise SystemExit(f"braid-plan cannot predict the planner's pick {name(pick)}")
        rows.sort(key=lambda r: r["predicted"])
        print(f"{len(rows)} plans {'of ' + str(args.reuse) + ' ' if args.reuse else ''}on "
              f"{args.ranks} ranks (predicted with --hardware {args.hardware}); "
              f"the planner's pick: {name(pick)}")

        # The representative set (with --reuse: the plans measured then).
        if args.reuse:
            chosen = [i for i, r in enumerate(rows) if r["name"] in reused]
        elif args.all or args.plans >= len(rows):
            chosen = list(range(len(rows)))
        else:
            chosen = [next(i for i, r in enumerate(rows) if r["name"] == name(pick))]
            meshes = {}
            for i, r in enumerate(rows):
                meshes.setdefault((r["plan"]["dp"], r["plan"]["tp"], r["plan"]["pp"]), i)
            chosen += [i for i in meshes.values() if i not in chosen]
            spread = max(args.plans - len(chosen), 0)
            for k in range(spread):
                i = round(k * (len(rows) - 1) / max(spread - 1, 1))
                while i in chosen and i + 1 < len(rows):
                    i += 1
                if i not in chosen:
                    chosen.append(i)
            chosen.sort()
        measured = [rows[i] for i in chosen]

        for i, r in enumerate(measured):
            r["runs"] = list(reused.get(r["name"], []))
            r["rss"] = list(reused_rss.get(r["name"], []))
            if r["runs"]:
                continue
            prog = tmp / f"plan{i}"
            proc = subprocess.run([str(bin_dir / "braidc"), str(model), "-o", str(prog)] +
                                  flags(r["plan"], m), capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"braidc failed on {r['name']}:\n{proc.stderr}")
            r["program"] = prog
        env = dict(os.environ)
        for _ in range(args.repeats):
            for r in measured:
                if "program" not in r:
                    continue
                proc = subprocess.run([str(bin_dir / "braid-run"), "-n", str(args.ranks),
                                       "--threads", "1", sys.executable, "-c", RSS_WRAPPER,
                                       str(r["program"]), "--steps", str(1 + args.steps),
                                       "--seed", "0"],
                                      capture_output=True, text=True, env=env)
                t = re.search(r"^summary: \d+ steps, (\S+) ms/step", proc.stdout, re.M)
                rss = {int(k): int(v) / 1024 for k, v in
                       re.findall(r"^maxrss_kib (\d+) (\d+)", proc.stderr, re.M)}
                if proc.returncode != 0 or not t or sorted(rss) != list(range(args.ranks)):
                    raise SystemExit(f"{r['name']} failed (a time and a peak resident set per "
                                     f"rank expected):\n{proc.stdout}\n{proc.stderr}")
                r["runs"].append(float(t.group(1)) / 1e3)
                # A rank's peak over the runs (the runs differ by a few pages).
                r["rss"] = [max(rss[k], r["rss"][k] if k < len(r["rss"]) else 0)
                            for k in range(args.ranks)]
        for r in measured:
            r["measured"] = min(r["runs"])
    load_after = load()

    rho = spearman([r["predicted"] for r in measured], [r["measured"] for r in measured])
    best = min(measured, key=lambda r: r["measured"])
    chosen_row = next((r for r in measured if r["name"] == name(pick)), None)
    print(f"GPT {args.layers} layers, hidden {args.hidden}, {args.heads} heads, sequence "
          f"{args.seq}, vocabulary {args.vocab}; program batch {args.batch}, global batch "
          f"{args.global_batch}; {args.ranks} ranks x 1 thread on {os.cpu_count()} cores; best of "
          f"{args.repeats} runs of {args.steps} steps; load average {load_before} before, "
          f"{load_after} after")
    if not args.memory_only:
        order = sorted(measured, key=lambda r: r["measured"])
        measured_rank = {id(r): i + 1 for i, r in enumerate(order)}
        print(f"{'#pred':>5} {'#meas':>5} {'predicted ms':>12} {'measured ms':>11} "
              f"{'meas/pred':>9}  plan")
        for i, r in enumerate(measured):
            mark = "  <- the planner's pick" if r is chosen_row else ""
            print(f"{i + 1:>5} {measured_rank[id(r)]:>5} {r['predicted'] * 1e3:>12.2f} "
                  f"{r['measured'] * 1e3:>11.2f} {r['measured'] / r['predicted']:>9.2f}  "
                  f"{r['name']}{mark}")
        print(f"Spearman rank correlation (predicted, measured) over {len(measured)} plans: "
              f"{rho:.3f}")
        if chosen_row is None:
            print(f"the planner's pick {name(pick)} is not among the plans of {args.reuse}")
        else:
            gap = chosen_row["measured"] / best["measured"] - 1
            print(f"the planner's pick {chosen_row['name']}: {chosen_row['measured'] * 1e3:.2f} ms "
                  f"measured, {100 * gap:.1f}% slower than the fastest measured ({best['name']}, "
                  f"{best['measured'] * 1e3:.2f} ms)")

    # Memory: each world rank's peak resident set against its pipeline
    # rank's predicted memory (world rank r runs stage r mod pp).
    with_rss = [r for r in measured if r["rss"]]
    if with_rss:
        print(f"memory per rank, MiB: predicted (braid-plan, pipeline rank r mod pp) / measured "
              f"peak resident set, and their ratio")
        within = 0
        ratios = []
        for r in with_rss:
            pp = r["plan"]["pp"]
            pairs = [(r["memory"][k % pp], rss) for k, rss in enumerate(r["rss"])]
            rr = [pred / rss for pred, rss in pairs]
            ratios += rr
            ok = all(abs(x - 1) <= MEMORY_TOLERANCE for x in rr)
            within += ok
            cells = " ".join(f"{pred:.0f}/{rss:.0f}" for pred, rss in pairs)
            print(f"  {min(rr):5.2f}-{max(rr):5.2f}{' ok' if ok else '   '}  {cells:<32}  {r['name']}")
        print(f"memory: {within} of {len(with_rss)} plans predicted within "
              f"{100 * MEMORY_TOLERANCE:.0f}% of the measured peak resident set on every rank; "
              f"predicted / measured over all ranks {min(ratios):.2f}-{max(ratios):.2f} "
              f"(median {sorted(ratios)[len(ratios) // 2]:.2f})")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["plan", "predicted_s", "measured_s", "runs_s", "predicted_mib", "rss_mib"])
            for r in measured:
                w.writerow([r["name"], f"{r['predicted']:.6g}", f"{r['measured']:.6g}",
                            " ".join(f"{t:.6g}" for t in r["runs"]),
                            " ".join(f"{x:.1f}" for x in r["memory"]),
                            " ".join(f"{x:.1f}" for x in r["rss"])])
    if args.check:
        bad = [r["name"] for r in measured if not math.isfinite(r["measured"]) or r["measured"] <= 0
               or (not args.reuse and len(r["rss"]) != args.ranks)]
        if bad or len(measured) < 2 or (math.isnan(rho) and not args.memory_only):
            raise SystemExit(f"check failed: {bad or 'no correlation'}")

if __name__ == "__main__":
    main()
