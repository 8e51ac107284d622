#!/usr/bin/python3
"""Pipeline stage balance: predicted per-stage busy time against measured.

Workload (issue 13's): a GPT of 4 layers, hidden 256, 4 heads, sequence
128, vocabulary 4096, program batch 1 (one micro-batch), pp=2 with 1F1B over
8 micro-batches, on 2 ranks x 1 thread (braid-run). For every way to split
the 4 layers over the 2 stages (--stage-layers 1,3 / 2,2 / 3,1):

- predicted: `braid-plan --hardware H --json` per-stage F, B and W per
  micro-batch; a stage's busy time per step is m (F + B + W);
- measured: the program's --trace; a rank's busy time is the sum of its
  `pipeline` events (F, B, W, BW actions, deferred W included) within the
  last step (best of --repeats runs of --steps steps, per rank).

Prints both per stage, their ratio, each split's imbalance (largest busy
time over smallest) and the measured step; the planner's split is the one
with the smallest predicted largest stage (as balanceStageLayers chooses).

    bench/stage_balance.py [--hardware cpu-local] [--steps 3] [--repeats 3] [--csv FILE]
        [--reuse FILE] [--check]

--csv writes each split's per-stage prediction and measurement; --reuse
takes the measurements of such a file instead of running the programs (to
predict an earlier, quieter measurement with another hardware file).

--check (ctest) exits non-zero unless every split compiled, ran and traced
a busy time for both ranks; it does not judge the times (a shared machine).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--hardware", default="cpu-local")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", type=Path, help="write each split's predicted and measured times")
    parser.add_argument("--reuse", type=Path,
                        help="a --csv file of an earlier run: its measurements are reused, the "
                             "programs neither compiled nor run")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    args = parser.parse_args()
    bin_dir = args.bin_dir
    m = args.microbatches
    splits = [(k, args.layers - k) for k in range(1, args.layers)]

    from braid import models
    load_before = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    reused = {}
    if args.reuse:
        for line in args.reuse.read_text().splitlines()[1:]:
            split, stage, _, measured, step = line.split(",")
            entry = reused.setdefault(split.replace(":", ","), {"busy": [0.0, 0.0], "step": 0.0})
            entry["busy"][int(stage)] = float(measured)
            entry["step"] = float(step)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))
        for split in splits:
            layers = ",".join(map(str, split))
            flags = ["--mesh", "pp=2", "--schedule", args.schedule, "--microbatches", str(m),
                     "--stage-layers", layers]
            proc = subprocess.run([str(bin_dir / "braid-plan"), str(model), "--hardware",
                                   args.hardware, "--json", "--mbs", str(args.batch)] + flags,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"braid-plan failed on {layers}:\n{proc.stderr}")
            cost = json.loads(proc.stdout)
            predicted = [m * (s["forward"] + s["backward"] + s["weight"]) for s in cost["stages"]]
            if args.reuse:
                if layers not in reused:
                    raise SystemExit(f"{args.reuse} has no measurement of split {layers}")
                rows.append({"split": layers, "predicted": predicted,
                             "predicted_step": cost["step_time"],
                             "busy": [reused[layers]["busy"]], "step": [reused[layers]["step"]]})
                continue
            prog = tmp / f"split{split[0]}"
            proc = subprocess.run([str(bin_dir / "braidc"), str(model), "-o", str(prog)] + flags,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"braidc failed on {layers}:\n{proc.stderr}")
            rows.append({"split": layers, "predicted": predicted, "program": prog,
                         "predicted_step": cost["step_time"], "busy": [], "step": []})
        for _ in range(0 if args.reuse else args.repeats):
            for r in rows:
                trace = tmp / "trace.json"
                proc = subprocess.run([str(bin_dir / "braid-run"), "-n", "2", "--threads", "1",
                                       str(r["program"]), "--steps", str(args.steps), "--seed", "0",
                                       "--trace", str(trace)], capture_output=True, text=True)
                t = re.search(r"^summary: \d+ steps, (\S+) ms/step", proc.stdout, re.M)
                if proc.returncode != 0 or not t:
                    raise SystemExit(f"split {r['split']} failed:\n{proc.stdout}\n{proc.stderr}")
                busy = busy_of_last_step(trace)
                if sorted(busy) != [0, 1]:
                    raise SystemExit(f"split {r['split']}: no pipeline events for both ranks")
                r["busy"].append([busy[0], busy[1]])
                r["step"].append(float(t.group(1)) / 1e3)
    load_after = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())

    measured_how = (f"measured: {args.reuse} (reused)" if args.reuse else
                    f"measured: best of {args.repeats} runs (busy time of the last of "
                    f"{args.steps} steps); load average {load_before} before, {load_after} after")
    print(f"GPT {args.layers} layers, hidden {args.hidden}, {args.heads} heads, sequence "
          f"{args.seq}, vocabulary {args.vocab}, micro-batch {args.batch}; pp=2 {args.schedule} "
          f"over {m} micro-batches; 2 ranks x 1 thread; predicted with --hardware "
          f"{args.hardware}; {measured_how}")
    print(f"{'split':>6} {'stage':>5} {'predicted ms':>12} {'measured ms':>11} {'meas/pred':>9}")
    pick = min(rows, key=lambda r: max(r["predicted"]))
    for r in rows:
        measured = [min(b[i] for b in r["busy"]) for i in range(2)]
        r["measured"] = measured
        for i in range(2):
            print(f"{r['split']:>6} {i:>5} {r['predicted'][i] * 1e3:>12.1f} "
                  f"{measured[i] * 1e3:>11.1f} {measured[i] / r['predicted'][i]:>9.2f}")
        print(f"{'':>6} imbalance (largest / smallest busy time): predicted "
              f"{max(r['predicted']) / min(r['predicted']):.3f}, measured "
              f"{max(measured) / min(measured):.3f}; step {min(r['step']) * 1e3:.1f} ms measured, "
              f"{r['predicted_step'] * 1e3:.1f} ms predicted"
              f"{'  <- the planner' + chr(39) + 's split' if r is pick else ''}")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("split,stage,predicted_s,measured_s,step_s\n")
            for r in rows:
                for i in range(2):
                    f.write(f"{r['split'].replace(',', ':')},{i},{r['predicted'][i]:.6g},"
                            f"{r['measured'][i]:.6g},{min(r['step']):.6g}\n")
    if args.check:
        bad = [r["split"] for r in rows if not all(x > 0 for x in r["measured"])]
        if bad:
            raise SystemExit(f"check failed: no busy time for {bad}")


if __name__ == "__main__":
    main()
