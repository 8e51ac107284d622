#!/usr/bin/python3
"""Per-rank memory of a braidc-compiled pipeline: stage-local parameter
slots against every stage holding every slot, and braidc's memory plan
against the measured peak resident set, with and without buffer reuse.

Workload: one GPT (default 8 layers, hidden 256, 4 heads, sequence 64,
vocabulary 256, batch 2) compiled for --mesh pp=P (--pp, default 2) with
1F1B (--schedule) over 2 micro-batches (--microbatches), trained --steps
steps on P ranks by braid-run. Braid's
program allocates on each stage only the parameter and optimizer-state
slots that stage updates or reads. The baseline, built in the same
invocation, is the same generated C++ with that test
(`braid_rt_program_pp_holds`) forced true, so every stage holds every slot
as before; both must print the same losses. Memory: each rank's peak
resident set (getrusage of the rank's process), and the model's parameter
and AdamW-state bytes (3 floats per parameter) for reference.

The memory plan: braidc --memory-report gives each stage's planned bytes
(the program's own buffers: parameter and optimizer slots and the arenas).
A rank also holds what does not depend on the model (the executable, MPI,
OpenBLAS and OpenMP, the runtime's staging buffers); that fixed part is
measured on a tiny GPT compiled and run the same way (its resident set
minus its own small plan), and the prediction is plan + fixed part. The
same program compiled with --no-buffer-reuse (every allocation site its
own buffer, as before the plan) is planned and measured in the same
invocation, and must print the same losses.

    bench/pipeline_memory.py [--layers L --hidden H ...] [--pp P] [--check]

--braidc PATH compiles with another braidc (an older build, to compare
against: the report gives its plan and resident sets alike).

--check (ctest) exits non-zero unless every rank of Braid's program uses
less memory than the same rank (the same stage) of the baseline, less than
the no-reuse program's, and the losses agree.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

# Runs one rank and prints its rank (from the MPI launcher's environment)
# and peak resident set in KiB on stderr, in one write(2) so that the
# launcher cannot interleave two ranks' lines (print() wrote it in pieces).
RSS_WRAPPER = ("import os, resource, subprocess, sys; "
               "rank = next((os.environ[k] for k in ('OMPI_COMM_WORLD_RANK', 'PMIX_RANK', "
               "'PMI_RANK') if k in os.environ), '?'); "
               "code = subprocess.run(sys.argv[1:]).returncode; "
               "os.write(2, ('maxrss_kib %s %d\\n' % (rank, resource.getrusage("
               "resource.RUSAGE_CHILDREN).ru_maxrss)).encode()); sys.exit(code)")


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


def measure(bin_dir, program, steps, pp):
    """(losses, [peak RSS in MiB of each rank 0 .. pp-1])."""
    proc = run(bin_dir / "braid-run", "-n", pp, sys.executable, "-c", RSS_WRAPPER, program,
               "--steps", steps, "--seed", 1)
    losses = re.findall(r"^step \d+ loss (\S+)", proc.stdout, re.M)
    rss = {int(r): int(k) / 1024 for r, k in re.findall(r"^maxrss_kib (\d+) (\d+)", proc.stderr, re.M)}
    if sorted(rss) != list(range(pp)) or len(losses) != steps:
        raise SystemExit(f"unexpected output of {program} (a peak RSS per rank 0 .. {pp - 1}, "
                         f"{steps} losses):\n{proc.stdout}\n{proc.stderr}")
    return losses, [rss[r] for r in range(pp)]


def compile_planned(braidc, model, out, args, *flags):
    """Compiles for pp=P under the schedule; per stage, the planned total
    and gradient bytes (MiB) from --memory-report."""
    proc = run(braidc, model, "--mesh", f"pp={args.pp}", "--schedule", args.schedule,
               "--microbatches", args.microbatches, "--memory-report", *flags, "-o", out)
    header = next(line.split() for line in proc.stdout.splitlines() if line.startswith("ranks"))
    # "ranks" is one word, "stage N" two
    total, grads = header.index("total") - 1, header.index("gradients") - 1
    rows = {int(m.group(1)): m.group(2).split()
            for m in re.finditer(r"^stage (\d+) (.*)$", proc.stdout, re.M)}
    if sorted(rows) != list(range(args.pp)):
        raise SystemExit(f"no memory report for stages 0 .. {args.pp - 1}:\n{proc.stdout}")
    return ([int(rows[s][total]) / 2**20 for s in range(args.pp)],
            [int(rows[s][grads]) / 2**20 for s in range(args.pp)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--pp", type=int, default=2)
    parser.add_argument("--schedule", default="1f1b")
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--braidc", help="the compiler (default: --bin-dir's braidc)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    args = parser.parse_args()
    bin_dir = Path(args.bin_dir)
    braidc = Path(args.braidc) if args.braidc else bin_dir / "braidc"
    pp = args.pp

    from braid import models
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model.write_text(models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                    seq=args.seq, vocab=args.vocab, batch=args.batch))
        local, dump = tmp / "local", tmp / "local.d"
        local_plan, local_grads = compile_planned(braidc, model, local, args, "--dump-dir", dump)
        plain = tmp / "plain"
        plain_plan, _ = compile_planned(braidc, model, plain, args, "--no-buffer-reuse")
        # The fixed part of a rank: a GPT with almost no parameters or
        # activations, compiled and run the same way.
        tiny_model, tiny = tmp / "tiny.mlir", tmp / "tiny"
        tiny_model.write_text(models.gpt(layers=max(2, pp), hidden=16, heads=2, seq=8,
                                         vocab=16, batch=args.batch))
        tiny_plan, _ = compile_planned(braidc, tiny_model, tiny, args)
        # The baseline: the same C++, every stage holding every slot.
        cpp = (dump / "program.cpp").read_text()
        if "braid_rt_program_pp_holds(" not in cpp:
            raise SystemExit("the program holds every slot on every stage already")
        every_cpp, every = tmp / "every.cpp", tmp / "every"
        every_cpp.write_text(cpp.replace("braid_rt_program_pp_holds(", "1 || braid_rt_program_pp_holds("))
        command = (dump / "compile.sh").read_text().split()
        command = [str(every_cpp) if c == str(dump / "program.cpp") else
                   str(every) if c == str(local) else c for c in command]
        if str(every_cpp) not in command or str(every) not in command:
            raise SystemExit("cannot read the compile command in " + str(dump / "compile.sh"))
        subprocess.run(command, check=True)

        local_losses, local_rss = measure(bin_dir, local, args.steps, pp)
        every_losses, every_rss = measure(bin_dir, every, args.steps, pp)
        plain_losses, plain_rss = measure(bin_dir, plain, args.steps, pp)
        _, tiny_rss = measure(bin_dir, tiny, args.steps, pp)

    # GPT's parameters: wte (tied with the head), wpe, per block two layer
    # norms, q/k/v/proj and the MLP (12 h^2 + 13 h), the final layer norm.
    h, v, s, layers = args.hidden, args.vocab, args.seq, args.layers
    params = v * h + s * h + layers * (12 * h * h + 13 * h) + 2 * h
    print(f"GPT: {layers} layers, hidden {h}, {args.heads} heads, sequence {s}, vocabulary {v}, "
          f"batch {args.batch}; pp={pp}, {args.schedule} over {args.microbatches} micro-batches, "
          f"{args.steps} AdamW steps; compiled by {braidc}")
    print(f"parameters + AdamW state: {3 * 4 * params / 2**20:.1f} MiB for the whole model")
    print("rank (= stage)   stage-local MiB   every slot MiB   ratio")
    for i, (a, b) in enumerate(zip(local_rss, every_rss)):
        print(f"{i:14d}   {a:15.1f}   {b:14.1f}   {a / b:5.3f}")
    same = local_losses == every_losses
    print(f"losses {'identical' if same else 'DIFFER'}: {' '.join(local_losses)}")
    print()
    print("memory plan (braidc --memory-report) against the peak resident set, MiB:")
    print("rank   fixed part   planned (gradients)   predicted   measured   error  |  "
          "no reuse: planned   measured")
    for i in range(pp):
        fixed = tiny_rss[i] - tiny_plan[i]
        predicted = local_plan[i] + fixed
        print(f"{i:4d}   {fixed:10.1f}   {local_plan[i]:7.1f} {f'({local_grads[i]:.1f})':>11}   "
              f"{predicted:9.1f}   {local_rss[i]:8.1f}   {100 * (predicted / local_rss[i] - 1):+5.1f}%  |  "
              f"{plain_plan[i]:17.1f}   {plain_rss[i]:8.1f}")
    print(f"(fixed part: the resident set of a {max(2, pp)}-layer, hidden-16 GPT run the same "
          f"way, {' / '.join(f'{r:.1f}' for r in tiny_rss)} MiB, minus its plan, "
          f"{' / '.join(f'{p:.2f}' for p in tiny_plan)} MiB)")
    same_plain = local_losses == plain_losses
    print(f"losses with and without buffer reuse {'identical' if same_plain else 'DIFFER'}")
    if args.check and (not same or any(a >= b for a, b in zip(local_rss, every_rss))):
        raise SystemExit("check failed: stage-local slots must use less memory on every rank "
                         "and train identically")
    if args.check and (not same_plain or any(a >= b for a, b in zip(local_rss, plain_rss))):
        raise SystemExit("check failed: buffer reuse must use less memory on every rank "
                         "and train identically")


if __name__ == "__main__":
    main()
