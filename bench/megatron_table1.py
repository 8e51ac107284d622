#!/usr/bin/python3
"""The planner's cost model against Megatron-LM's published throughput.

Workload: every row of Narayanan et al., "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM" (SC21), Table 1
(bench/data/megatron_table1.csv): a GPT with the row's layers, hidden size
and heads, vocabulary 51200, sequence 2048, bf16, written by the generator
(python3 -m braid.models gpt) with batch 1 (one micro-batch), and
Megatron's own plan for the row: t, p, d from the table, micro-batch size 1,
m = batch / d micro-batches, the interleaved 1F1B schedule with the
smallest chunk count >= 2 that divides the layers per pipeline rank (the
paper does not give it per row; p = 1 rows have no pipeline), full
activation recomputation, gradients all-reduced in 16 bits after the
pipeline, the tied embedding's gradient summed by one all_reduce at the end
of the step as Megatron does (--tied-grad-at-step-end, braid-plan's default:
the first stage's W in the schedule, as Braid's own pipelines also run it
since 36f73d1), the p = 1 rows' gradients
reduced once per step after the accumulation as Megatron does
(--grad-reduce-per-microbatch=false; braidc reduces them in every
micro-batch), mixed-precision AdamW (12 bytes of optimizer state per
parameter). `braid-plan --hardware a100-80g --json` predicts the step
time; throughput per GPU counts FLOPs as the paper's Eq. 3,
96 B s l h^2 (1 + s/(6h) + V/(16 l h)), so the comparison is like for like.
The hardware file's efficiencies are the only tuned figures, one set for
every row.

    bench/megatron_table1.py [--bin-dir build/bin] [--csv] [--check]
        [--hardware a100-80g] [--tolerance 0.15]

--check exits non-zero unless every row's prediction is within the
tolerance of the published TFLOP/s per GPU.
"""

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
TABLE = ROOT / "bench" / "data" / "megatron_table1.csv"
VOCAB, SEQ = 51200, 2048


def read_table(path):
    lines = [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    return list(csv.DictReader(lines))


def eq3_flops(batch, layers, hidden):
    """FLOPs per iteration, Eq. 3 of the paper (with recomputation)."""
    s, l, h, v = SEQ, layers, hidden, VOCAB
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def chunks_for(layers, p):
    if p == 1:
        return 0
    per_rank = layers // p
    for v in range(2, per_rank + 1):
        if per_rank % v == 0:
            return v
    return 1


def predict(bin_dir, hardware, row, workdir):
    l, h, a = int(row["layers"]), int(row["hidden"]), int(row["heads"])
    t, p, d = int(row["t"]), int(row["p"]), int(row["d"])
    batch = int(row["batch"])
    model = Path(workdir) / f"gpt-{l}-{h}.mlir"
    subprocess.run([sys.executable, "-m", "braid.models", "gpt", "--layers", str(l), "--hidden",
                    str(h), "--heads", str(a), "--seq", str(SEQ), "--vocab", str(VOCAB),
                    "--batch", "1", "--dtype", "bf16", "-o", str(model)],
                   check=True, env={"PYTHONPATH": str(ROOT / "python")})
    m = batch // d
    v = chunks_for(l, p)
    args = [str(bin_dir / "braid-plan"), str(model), "--hardware", hardware,
            "--mesh", f"dp={d},tp={t},pp={p}", "--microbatches", str(m), "--mbs", "1",
            "--recompute", "full", "--optimizer-bytes", "12", "--json",
            "--tied-grad-at-step-end", "--grad-reduce-per-microbatch=false"]
    if p > 1:
        args += ["--schedule", "interleaved-1f1b", "--chunks", str(v)]
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"braid-plan failed on {row['params_b']}B:\n{proc.stderr}")
    cost = json.loads(proc.stdout)
    tflops = eq3_flops(batch, l, h) / cost["step_time"] / int(row["gpus"]) / 1e12
    return {"v": v, "m": m, "cost": cost, "tflops": tflops, "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    parser.add_argument("--hardware", default="a100-80g")
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--tolerance", type=float, default=0.15)
    parser.add_argument("--csv", action="store_true")
    parser.add_argument("--check", action="store_true")
    opts = parser.parse_args()

    rows = read_table(opts.table)
    # With --csv the lines around the table are '#' comments, as in
    # bench/data/*.csv, so that the output can be stored as one.
    note = "# " if opts.csv else ""
    print(f"{note}Megatron-LM SC21 Table 1 against braid-plan --hardware {opts.hardware} "
          f"(Megatron's plans; TFLOP/s per GPU by Eq. 3)")
    header = ("params_b", "t", "p", "d", "v", "m", "step_s", "bubble", "tp_comm", "dp_comm",
              "peak_mem_gib", "published", "predicted", "ratio", "plan_s")
    if opts.csv:
        print(",".join(header))
    else:
        print(f"{'params':>7} {'t':>2} {'p':>3} {'d':>3} {'v':>2} {'m':>4} {'step s':>8} "
              f"{'bubble':>7} {'tp comm':>8} {'dp comm':>8} {'mem GiB':>8} {'published':>9} "
              f"{'predicted':>9} {'ratio':>6} {'plan s':>6}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as workdir:
        for row in rows:
            r = predict(opts.bin_dir, opts.hardware, row, workdir)
            c = r["cost"]
            published = float(row["tflops_per_gpu"])
            ratio = r["tflops"] / published
            worst = max(worst, abs(ratio - 1))
            step = c["step_time"]
            values = (row["params_b"], row["t"], row["p"], row["d"], r["v"], r["m"],
                      f"{step:.3f}", f"{c['bubble_time'] / step:.3f}",
                      f"{c['tp_comm_time'] / step:.3f}", f"{c['dp_comm_time'] / step:.3f}",
                      f"{c['peak_memory'] / 2**30:.1f}", f"{published:.0f}",
                      f"{r['tflops']:.1f}", f"{ratio:.3f}", f"{r['seconds']:.2f}")
            if opts.csv:
                print(",".join(str(x) for x in values))
            else:
                print(f"{values[0]:>7} {values[1]:>2} {values[2]:>3} {values[3]:>3} "
                      f"{values[4]:>2} {values[5]:>4} {values[6]:>8} {values[7]:>7} "
                      f"{values[8]:>8} {values[9]:>8} {values[10]:>8} {values[11]:>9} "
                      f"{values[12]:>9} {values[13]:>6} {values[14]:>6}")
            sys.stdout.flush()
    print(f"{note}largest deviation from the published TFLOP/s: {100 * worst:.1f}% "
          f"(tolerance {100 * opts.tolerance:.0f}%)")
    if opts.check and worst > opts.tolerance:
        print("FAIL: a row is outside the tolerance", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
