#!/usr/bin/python3
"""Pipeline balance: predicted per-rank busy time against measured, per
schedule and split, and the planner's pick.

Workload (issue 13's): a GPT of 4 layers, hidden 256, 4 heads, sequence
128, vocabulary 4096, program batch 1 (one micro-batch), pp=2 over 8
micro-batches, on 2 ranks x 1 thread (braid-run). For each schedule of
--schedules (default 1f1b and zb-v) and every split of the layers over its
pp x chunks model stages (`--stage-layers`; the first and the last stage
may have 0 layers, the embedding or the head alone; a middle one may not):

- predicted: `braid-plan --hardware H --json` per-stage F, B and W per
  micro-batch; a rank's busy time per step is m (F + B + W) summed over
  its stages (ZB-V: rank 0 runs stages 0 and 3, rank 1 stages 1 and 2;
  interleaved 1F1B: stages 0, 2 and 1, 3);
- measured: the program's --trace; a rank's busy time is the sum of its
  `pipeline` events (F, B, W, BW actions, deferred W included) within the
  last step (best of --repeats runs of --steps steps, per rank).

Prints both per rank, each split's imbalance (largest busy time over
smallest) and its measured and predicted step; then the planner's pick:
`braidc --mesh auto --devices 2 --global-batch m x batch --hardware H`,
its flags, its busy times per rank, imbalance and step (a pick that is not
a 2-stage pipeline, tp=2 say, is compiled from its flags and only its step
is measured), and the fastest measured split.

    bench/stage_balance.py [--hardware cpu-local] [--schedules 1f1b,zb-v] [--steps 3]
        [--repeats 3] [--max-splits K] [--csv FILE] [--reuse FILE] [--check]

--max-splits K measures only the K best predicted splits of each schedule
(besides 1F1B's, always all, and the pick). --csv writes each split's
per-rank prediction and measurement; --reuse takes the measurements of
such a file instead of running the programs (to predict an earlier,
quieter measurement with another hardware file; files written before the
schedule column are 1F1B's).

--check (ctest) exits non-zero unless every split compiled, ran and traced
a busy time for both ranks; it does not judge the times (a shared machine).
"""

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

PP = 2


def busy_of_last_step(trace_path):
    """Per rank: summed duration (s) of its pipeline events in its last step."""
    data = json.loads(Path(trace_path).read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    per_rank = {}
    for e in events:
        per_rank.setdefault(e.get("pid", 0), []).append(e)
    busy = {}
    for pid, evs in per_rank.items():
        evs.sort(key=lambda e: e.get("ts", 0))
        stack, steps, actions = [], [], []
        for e in evs:
            if e.get("ph") == "B":
                stack.append(e)
            elif e.get("ph") == "E" and stack:
                b = stack.pop()
                if b.get("cat") == "step":
                    steps.append((b["ts"], e["ts"]))
                elif b.get("cat") == "pipeline":
                    actions.append((b["ts"], e["ts"]))
            elif e.get("ph") == "X":
                if e.get("cat") == "step":
                    steps.append((e["ts"], e["ts"] + e["dur"]))
                elif e.get("cat") == "pipeline":
                    actions.append((e["ts"], e["ts"] + e["dur"]))
        if not steps:
            continue
        a, b = max(steps)
        busy[pid] = sum(y - x for x, y in actions if x >= a and y <= b) / 1e6
    return busy


def chunks_of(schedule):
    return 2 if schedule in ("zb-v", "interleaved-1f1b") else 1


def rank_of(schedule, stage):
    if schedule == "zb-v":
        return stage if stage < PP else 2 * PP - 1 - stage
    return stage % PP


def splits_of(layers, stages):
    """Every split of `layers` over `stages` stages, the middle ones non-empty."""
    out = []
    for split in itertools.product(range(layers + 1), repeat=stages):
        if sum(split) == layers and all(n > 0 for n in split[1:-1]):
            out.append(",".join(map(str, split)))
    return out


def run(args, what):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--schedules", default="1f1b,zb-v",
                        help="comma-separated: 1f1b, zb-h1, zb-h2, zb-v, interleaved-1f1b, ...")
    parser.add_argument("--hardware", default="cpu-local")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-splits", type=int, default=0,
                        help="measure the K best predicted splits of each schedule but 1F1B "
                             "(0: all)")
    parser.add_argument("--csv", type=Path, help="write each split's predicted and measured times")
    parser.add_argument("--reuse", type=Path,
                        help="a --csv file of an earlier run: its measurements are reused, the "
                             "programs neither compiled nor run")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    args = parser.parse_args()
    bin_dir = args.bin_dir
    m = args.microbatches
    schedules = [s for s in args.schedules.split(",") if s]

    from braid import models
    load_before = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    reused = {}
    if args.reuse:
        lines = args.reuse.read_text().splitlines()
        header = lines[0].split(",")
        for line in lines[1:]:
            f = dict(zip(header, line.split(",")))
            key = (f.get("schedule", "1f1b"), f["split"].replace(":", ","))
            rank = int(f["rank"] if "rank" in f else f["stage"])
            entry = reused.setdefault(key, {"busy": [0.0] * PP, "step": 0.0})
            entry["busy"][rank] = float(f["measured_s"])
            entry["step"] = float(f["step_s"])

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))

        def predict(schedule, split):
            """Per-rank busy time and step predicted, or None where the planner refuses."""
            proc = subprocess.run(
                [str(bin_dir / "braid-plan"), str(model), "--hardware", args.hardware, "--json",
                 "--mbs", str(args.batch), "--mesh", f"pp={PP}", "--schedule", schedule,
                 "--microbatches", str(m), "--stage-layers", split],
                capture_output=True, text=True)
            if proc.returncode != 0:
                return None
            cost = json.loads(proc.stdout)
            busy = [0.0] * PP
            for s, st in enumerate(cost["stages"]):
                busy[rank_of(schedule, s)] += m * (st["forward"] + st["backward"] + st["weight"])
            return busy, cost["step_time"]

        # The planner's pick for the same program and global batch.
        plan_out = run([bin_dir / "braidc", model, "--mesh", "auto", "--devices", str(PP),
                        "--global-batch", str(m * args.batch), "--hardware", args.hardware,
                        "--plan-only", "--top", "50"], "braidc --mesh auto")
        # Its best pipeline: the first pp=2 row of the ranking without
        # recomputation ("dp1 tp1 pp2 zb-v/v2 mbs1 m8 [0,2,1,1]").
        best_pipeline = None
        for row in re.finditer(r"^\d+\s+dp1 tp1 pp%d (\S+?)(?:/v\d+)? mbs\d+ m\d+ \[([\d,]+)\]\s+"
                               r"(\S+) ms" % PP, plan_out, re.M):
            best_pipeline = (row.group(1), row.group(2), float(row.group(3)))
            break
        flags_line = re.search(r"^flags: (.*)$", plan_out, re.M)
        if not flags_line:
            raise SystemExit(f"braidc --mesh auto printed no flags:\n{plan_out}")
        pick_flags = flags_line.group(1).split()
        predicted_pick = re.search(r"^braidc: plan for .*: (\S+) ms per step predicted", plan_out,
                                   re.M)

        def flag(name):
            return pick_flags[pick_flags.index(name) + 1] if name in pick_flags else None

        mesh = dict(kv.split("=") for kv in flag("--mesh").split(","))
        pick_key = None
        pick_pipeline = (int(mesh.get("pp", 1)) == PP
                         and int(mesh.get("dp", 1)) * int(mesh.get("tp", 1)) == 1)
        plain = {"--mesh", "--schedule", "--microbatches", "--stage-layers", "--chunks"}
        if pick_pipeline and all(f in plain for f in pick_flags if f.startswith("--")):
            pick_schedule = flag("--schedule")
            pick_split = flag("--stage-layers")
            if pick_split is None:
                raise SystemExit(f"the pick has no --stage-layers: {' '.join(pick_flags)}")
            pick_key = (pick_schedule, pick_split)
        for key in (pick_key, best_pipeline):
            if key and key[0] not in schedules:
                schedules.append(key[0])

        rows = []
        for schedule in schedules:
            candidates = []
            for split in splits_of(args.layers, PP * chunks_of(schedule)):
                p = predict(schedule, split)
                if p:
                    candidates.append({"schedule": schedule, "split": split, "predicted": p[0],
                                       "predicted_step": p[1], "busy": [], "step": []})
            if args.max_splits and schedule != "1f1b":
                candidates.sort(key=lambda r: r["predicted_step"])
                keep = {pick_key, best_pipeline[:2] if best_pipeline else None}
                candidates = [r for i, r in enumerate(candidates)
                              if i < args.max_splits or (schedule, r["split"]) in keep]
            rows += candidates
        pick_row = next((r for r in rows if (r["schedule"], r["split"]) == pick_key), None)
        pipeline_row = next((r for r in rows if best_pipeline and
                             (r["schedule"], r["split"]) == best_pipeline[:2]), None)
        if pick_key and not pick_row:
            raise SystemExit(f"the pick {pick_key} is not a split the planner costs")
        other = None
        if not pick_key:
            # Not a plain 2-stage pipeline (tp=2, or recomputation, say): compiled from its
            # own flags, its step measured (and its busy times, if a pipeline).
            other = {"schedule": "pick", "split": " ".join(pick_flags), "busy": [], "step": [],
                     "flags": pick_flags}

        if args.reuse:
            for r in rows:
                key = (r["schedule"], r["split"])
                if key in reused:
                    r["busy"].append(reused[key]["busy"])
                    r["step"].append(reused[key]["step"])
            rows = [r for r in rows if r["busy"] or r is pick_row]
        else:
            for r in rows:
                r["program"] = tmp / f"{r['schedule']}-{r['split'].replace(',', '_')}"
                run([bin_dir / "braidc", model, "-o", r["program"], "--mesh", f"pp={PP}",
                     "--schedule", r["schedule"], "--microbatches", m, "--stage-layers",
                     r["split"]], f"braidc on {r['schedule']} {r['split']}")
            if other:
                other["program"] = tmp / "pick"
                run([bin_dir / "braidc", model, "-o", other["program"]] + pick_flags,
                    "braidc on the pick")
            for _ in range(args.repeats):
                for r in rows + ([other] if other else []):
                    trace = tmp / "trace.json"
                    out = run([bin_dir / "braid-run", "-n", PP, "--threads", "1", r["program"],
                               "--steps", args.steps, "--seed", "0", "--trace", trace],
                              f"{r['schedule']} {r['split']}")
                    t = re.search(r"^summary: \d+ steps, (\S+) ms/step", out, re.M)
                    if not t:
                        raise SystemExit(f"{r['schedule']} {r['split']}: no summary:\n{out}")
                    r["step"].append(float(t.group(1)) / 1e3)
                    if r is other and not pick_pipeline:
                        continue
                    busy = busy_of_last_step(trace)
                    if sorted(busy) != list(range(PP)):
                        raise SystemExit(f"{r['schedule']} {r['split']}: no pipeline events for "
                                         f"every rank")
                    r["busy"].append([busy[i] for i in range(PP)])
    load_after = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())

    measured_how = (f"measured: {args.reuse} (reused)" if args.reuse else
                    f"measured: best of {args.repeats} runs (busy time of the last of "
                    f"{args.steps} steps); load average {load_before} before, {load_after} after")
    print(f"GPT {args.layers} layers, hidden {args.hidden}, {args.heads} heads, sequence "
          f"{args.seq}, vocabulary {args.vocab}, micro-batch {args.batch}; pp={PP} over {m} "
          f"micro-batches; {PP} ranks x 1 thread; predicted with --hardware {args.hardware}; "
          f"{measured_how}")
    print(f"{'schedule':>16} {'split':>8} {'rank':>4} {'predicted ms':>12} {'measured ms':>11} "
          f"{'meas/pred':>9}")
    for r in rows:
        if not r["busy"]:
            continue
        r["measured"] = [min(b[i] for b in r["busy"]) for i in range(PP)]
        for i in range(PP):
            print(f"{r['schedule']:>16} {r['split']:>8} {i:>4} {r['predicted'][i] * 1e3:>12.1f} "
                  f"{r['measured'][i] * 1e3:>11.1f} {r['measured'][i] / r['predicted'][i]:>9.2f}")
        print(f"{'':>16} imbalance (largest / smallest busy time): predicted "
              f"{max(r['predicted']) / min(r['predicted']):.3f}, measured "
              f"{max(r['measured']) / min(r['measured']):.3f}; step {min(r['step']) * 1e3:.1f} ms "
              f"measured, {r['predicted_step'] * 1e3:.1f} ms predicted"
              f"{'  <- the planner' + chr(39) + 's pick' if r is pick_row else ''}"
              f"{'  <- the planner' + chr(39) + 's best pipeline' if r is pipeline_row else ''}")

    def summary(row):
        b = row["measured"]
        spread = max(b) / min(b)
        print(f"  busy per rank: " + ", ".join(f"{i}: {x * 1e3:.1f} ms" for i, x in enumerate(b))
              + f"; imbalance {spread:.3f} ({(spread - 1) * 100:.1f}% apart: "
              f"{'within' if spread <= 1.10 else 'NOT within'} 10%); step "
              f"{min(row['step']) * 1e3:.1f} ms measured, {row['predicted_step'] * 1e3:.1f} ms "
              f"predicted")

    print(f"planner's pick (braidc --mesh auto --devices {PP} --global-batch {m * args.batch} "
          f"--hardware {args.hardware}): {' '.join(pick_flags)}"
          + (f"; {predicted_pick.group(1)} ms per step predicted" if predicted_pick else ""))
    if pick_row and pick_row["busy"]:
        summary(pick_row)
    elif other and other["busy"]:
        b = [min(x[i] for x in other["busy"]) for i in range(PP)]
        spread = max(b) / min(b)
        print(f"  busy per rank: " + ", ".join(f"{i}: {x * 1e3:.1f} ms" for i, x in enumerate(b))
              + f"; imbalance {spread:.3f} ({(spread - 1) * 100:.1f}% apart: "
              f"{'within' if spread <= 1.10 else 'NOT within'} 10%); step "
              f"{min(other['step']) * 1e3:.1f} ms measured")
    elif other and other["step"]:
        print(f"  not a {PP}-stage pipeline: no per-rank busy time; step "
              f"{min(other['step']) * 1e3:.1f} ms measured")
    else:
        print("  not measured")
    if best_pipeline:
        print(f"planner's best pipeline (its first pp={PP} plan): --schedule {best_pipeline[0]} "
              f"--stage-layers {best_pipeline[1]}; {best_pipeline[2]:.2f} ms per step predicted")
        if pipeline_row and pipeline_row["busy"]:
            summary(pipeline_row)
        else:
            print("  not measured")
    measured = [r for r in rows if r["busy"]]
    if measured:
        best = min(measured, key=lambda r: min(r["step"]))
        print(f"fastest measured split: {best['schedule']} {best['split']}, step "
              f"{min(best['step']) * 1e3:.1f} ms")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("schedule,split,rank,predicted_s,measured_s,step_s\n")
            for r in measured:
                for i in range(PP):
                    f.write(f"{r['schedule']},{r['split'].replace(',', ':')},{i},"
                            f"{r['predicted'][i]:.6g},{r['measured'][i]:.6g},"
                            f"{min(r['step']):.6g}\n")
    if args.check:
        bad = [f"{r['schedule']} {r['split']}" for r in rows
               if not r["busy"] or not all(x > 0 for x in r["measured"])]
        if other and not other["step"]:
            bad.append("the pick")
        if bad:
            raise SystemExit(f"check failed: no busy time for {bad}")


if __name__ == "__main__":
    main()
