#!/usr/bin/python3
"""The planner's search against Megatron-LM's published plans, and its speed.

For every row of Narayanan et al. (SC21) Table 1 (bench/data/
megatron_table1.csv: A100-80G, the paper's GPT models, GPU counts and
global batches), and for GPT-3 175B on 1,024 and 3,072 devices (global
batch 1,536, as GPT-3), runs

    braidc MODEL --mesh auto --devices N --global-batch B --hardware a100-80g
           --plan-only --free-micro-batch

on the GPT the generator writes for the row (vocabulary 51200, sequence
2048, bf16, batch 1), timing it, and, for the Table 1 rows, predicts
Megatron's own plan for the row under the same cost model with braid-plan
(as bench/megatron_table1.py does: t, p, d of the table, micro-batch 1,
interleaved 1F1B with the smallest chunk count >= 2 dividing the layers per
rank, full recomputation, mixed-precision AdamW's 12 bytes of state per
parameter, which braidc also assumes for 16-bit models, the gradients
reduced once a step as Megatron-LM does). Prints, per row,
the search's time, the plan it chose, both predicted step times and
whether the planner's plan is predicted no slower.

    bench/plan_search.py [--bin-dir build/bin] [--hardware a100-80g]
        [--check] [--limit-s 10] [--limit-175b-s 30]

--check exits non-zero unless every planner plan is predicted no slower
than Megatron's, every Table 1 row is planned within --limit-s and each
175B search within --limit-175b-s.
"""

import argparse
import csv
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "bench" / "data" / "megatron_table1.csv"
VOCAB, SEQ = 51200, 2048


def read_table(path):
    lines = [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    return list(csv.DictReader(lines))


def generate(layers, hidden, heads, workdir):
    model = Path(workdir) / f"gpt-{layers}-{hidden}.mlir"
    if not model.exists():
        subprocess.run([sys.executable, "-m", "braid.models", "gpt", "--layers", str(layers),
                        "--hidden", str(hidden), "--heads", str(heads), "--seq", str(SEQ),
                        "--vocab", str(VOCAB), "--batch", "1", "--dtype", "bf16", "-o", str(model)],
                       check=True, env={"PYTHONPATH": str(ROOT / "python")})
    return model


def plan(bin_dir, hardware, model, devices, batch):
    args = [str(bin_dir / "braidc"), str(model), "--mesh", "auto", "--devices", str(devices),
            "--global-batch", str(batch), "--hardware", hardware, "--plan-only",
            "--free-micro-batch"]
    start = time.monotonic()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(args, capture_output=True, text=True)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"braidc failed on {model.name} x {devices}:\n{proc.stderr}")
    step = re.search(r"([0-9.]+) ms per step predicted", proc.stdout)
    flags = re.search(r"^flags: (.*)$", proc.stdout, re.M)
    searched = re.search(r"searched (\d+) candidates", proc.stdout)
    return {"step": float(step.group(1)) / 1e3, "flags": flags.group(1),
            "candidates": int(searched.group(1)), "seconds": seconds, "cpu": cpu_seconds}


def chunks_for(layers, p):
    per_rank = layers // p
    for v in range(2, per_rank + 1):
        if per_rank % v == 0:
            return v
    return 1


def megatron(bin_dir, hardware, model, row):
    t, p, d, l = int(row["t"]), int(row["p"]), int(row["d"]), int(row["layers"])
    m = int(row["batch"]) // d
    args = [str(bin_dir / "braid-plan"), str(model), "--hardware", hardware,
            "--mesh", f"dp={d},tp={t},pp={p}", "--microbatches", str(m), "--mbs", "1",
            "--recompute", "full", "--optimizer-bytes", "12", "--json",
            # Megatron-LM reduces the gradients once a step, after the
            # accumulation (braid-plan's default is braidc's programs' way:
            # in every micro-batch without a pipeline).
            "--grad-reduce-per-microbatch=false"]
    if p > 1:
        args += ["--schedule", "interleaved-1f1b", "--chunks", str(chunks_for(l, p))]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"braid-plan failed on {row['params_b']}B:\n{proc.stderr}")
    cost = json.loads(proc.stdout)
    return cost["step_time"], cost["fits"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    parser.add_argument("--hardware", default="a100-80g")
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--limit-s", type=float, default=10.0)
    parser.add_argument("--limit-175b-s", type=float, default=30.0)
    parser.add_argument("--check", action="store_true")
    opts = parser.parse_args()

    failures = []
    print(f"braidc --mesh auto against Megatron-LM SC21 Table 1 (--hardware {opts.hardware}, "
          f"the same cost model for both)")
    print("(search s: wall-clock seconds of the braidc run, cpu s: its CPU time, user + system)")
    print(f"{'params':>7} {'gpus':>5} {'batch':>5} {'search s':>8} {'cpu s':>6} {'cands':>6} "
          f"{'planner s':>9} {'megatron s':>10} {'speedup':>7}  plan")
    with tempfile.TemporaryDirectory() as workdir:
        for row in read_table(opts.table):
            model = generate(int(row["layers"]), int(row["hidden"]), int(row["heads"]), workdir)
            gpus, batch = int(row["gpus"]), int(row["batch"])
            r = plan(opts.bin_dir, opts.hardware, model, gpus, batch)
            mega, fits = megatron(opts.bin_dir, opts.hardware, model, row)
            # The step is printed to 0.01 ms.
            ok = r["step"] <= mega + 1e-5
            print(f"{row['params_b']:>7} {gpus:>5} {batch:>5} {r['seconds']:>8.2f} "
                  f"{r['cpu']:>6.2f} {r['candidates']:>6} {r['step']:>9.3f} {mega:>10.3f} "
                  f"{mega / r['step']:>7.3f}  {r['flags']}"
                  f"{'' if fits else '  (Megatron plan over 80 GiB in this model)'}")
            sys.stdout.flush()
            if not ok:
                failures.append(f"{row['params_b']}B: planner {r['step']} s > Megatron {mega} s")
            if r["seconds"] > opts.limit_s:
                failures.append(f"{row['params_b']}B: planned in {r['seconds']:.1f} s")
        print("GPT-3 175B (96 layers, hidden 12288, 96 heads), global batch 1536:")
        model = generate(96, 12288, 96, workdir)
        for gpus in (1024, 3072):
            r = plan(opts.bin_dir, opts.hardware, model, gpus, 1536)
            print(f"{'175':>7} {gpus:>5} {1536:>5} {r['seconds']:>8.2f} {r['cpu']:>6.2f} "
                  f"{r['candidates']:>6} "
                  f"{r['step']:>9.3f} {'':>10} {'':>7}  {r['flags']}")
            sys.stdout.flush()
            if r["seconds"] > opts.limit_175b_s:
                failures.append(f"175B x {gpus}: planned in {r['seconds']:.1f} s")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if opts.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
