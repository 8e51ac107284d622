"""Compares the losses a braidc program printed with braid-eval's.

usage: compare-results.py PROGRAM_OUTPUT EVAL_OUTPUT --rtol R [--tensors]
                          [--steps FIRST:END]

The program prints `loss <value>` per run or step; braid-eval prints
`result 0: tensor<f32> = <value>` for a forward entry and a `loss` column per
step with --steps. Fails unless both give the same number of losses and each
pair agrees within the relative tolerance.

With --steps FIRST:END, compares only the losses of steps FIRST to END - 1
of each output: a loss on a `step N loss` line is step N's, any other the
N-th loss printed. So a 20-step run compares with braid-eval's first 3 steps
(--steps 0:3), or a run resumed at step 10 with steps 10-19 of an
uninterrupted one (--steps 10:20).

With --tensors, compares tensor results instead, element by element: both
run with --dump, so the program's `<name> sum S l2 L` lines and braid-eval's
`result I: <type> sum = S l2 = L` lines are followed by every value (eight to
an indented line). Fails unless both give the same tensors, in order, each
with its type's number of elements, and every element agrees within R
relative to the larger of its braid-eval value's magnitude and the tensor's
root mean square (an element near zero after cancellation keeps the error of
the terms that cancelled).
"""
import argparse
import math
import re
import sys


def program_losses(text):
    return [float(m.group(1)) for m in re.finditer(r"\bloss (\S+)", text)]


def eval_losses(text):
    forward = re.findall(r"^result 0: tensor<f32> = (\S+)$", text, re.M)
    if forward:
        return [float(v) for v in forward]
    return [float(m.group(1)) for m in re.finditer(r"\bloss[ =:]+(\S+)", text)]


def numbered(text, losses):
    steps = [int(n) for n in re.findall(r"^step (\d+) loss ", text, re.M)]
    return list(zip(steps if len(steps) == len(losses) else range(len(losses)), losses))


def select_steps(text, losses, first, end):
    return [loss for step, loss in numbered(text, losses) if first <= step < end]


def dumped_tensors(text, header):
    """(name, values) per tensor whose header line matches `header`, with the
    values of the indented --dump lines that follow it."""
    tensors = []
    for line in text.splitlines():
        m = re.match(header, line)
        if m:
            tensors.append((m.group(1), []))
        elif line.startswith("  ") and tensors:
            tensors[-1][1].extend(float(v) for v in line.split())
    return tensors


def element_count(type_text):
    """The number of elements of `tensor<AxBxf32>` (1 for a rank-0 tensor)."""
    count = 1
    for d in re.findall(r"(\d+)x", type_text):
        count *= int(d)
    return count


def compare_tensors(program, eval_text, rtol):
    got = dumped_tensors(program, r"^(\S+) sum \S+ l2 \S+$")
    want = dumped_tensors(eval_text, r"^result \d+: (\S+) sum = \S+ l2 = \S+$")
    if not got or len(got) != len(want):
        print(f"error: {len(got)} tensors from the program, {len(want)} from braid-eval")
        return 1
    worst = 0.0
    for i, ((name, g), (type_text, w)) in enumerate(zip(got, want)):
        n = element_count(type_text)
        if len(g) != n or len(w) != n:
            print(f"error: result {i} ({name}, {type_text}): {len(g)} values from the "
                  f"program, {len(w)} from braid-eval (run both with --dump)")
            return 1
        # An element's error relative to its magnitude, but not below the
        # tensor's RMS: values near zero that come from cancellation (the
        # gradients' sums) carry the rounding of the terms that cancelled.
        rms = math.sqrt(sum(v * v for v in w) / n)
        for j, (a, b) in enumerate(zip(g, w)):
            rel = abs(a - b) / max(abs(b), rms, 1e-30)
            worst = max(worst, rel)
            if not rel <= rtol:
                print(f"error: result {i} ({name}) element {j}: program {a!r} "
                      f"braid-eval {b!r} differ by {rel:.3g} > {rtol}")
                return 1
        print(f"result {i} ({name}, {type_text}): {n} elements agree")
    print(f"ok: {len(got)} tensors within {rtol} element by element (worst {worst:.3g})")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("eval")
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--tensors", action="store_true")
    parser.add_argument("--steps", metavar="FIRST:END",
                        help="compare only the losses of steps FIRST to END - 1")
    args = parser.parse_args()
    if args.tensors:
        return compare_tensors(open(args.program).read(), open(args.eval).read(), args.rtol)
    program, eval_text = open(args.program).read(), open(args.eval).read()
    got = program_losses(program)
    want = eval_losses(eval_text)
    if args.steps is not None:
        m = re.fullmatch(r"(\d+):(\d+)", args.steps)
        if not m or int(m.group(1)) >= int(m.group(2)):
            print(f"error: --steps expects FIRST:END with FIRST < END, got '{args.steps}'")
            return 1
        first, end = int(m.group(1)), int(m.group(2))
        got = select_steps(program, got, first, end)
        want = select_steps(eval_text, want, first, end)
        if len(got) != end - first or len(want) != end - first:
            print(f"error: steps {first}-{end - 1}: {len(got)} losses from the program, "
                  f"{len(want)} from braid-eval (expected {end - first} each)")
            return 1
    if not got or len(got) != len(want):
        print(f"error: {len(got)} losses from the program, {len(want)} from braid-eval")
        return 1
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        rel = abs(g - w) / max(abs(w), 1e-30)
        worst = max(worst, rel)
        print(f"loss {i}: program {g!r} braid-eval {w!r} relative difference {rel:.3g}")
        if rel > args.rtol:
            print(f"error: loss {i} differs by {rel:.3g} > {args.rtol}")
            return 1
    print(f"ok: {len(got)} losses within {args.rtol} (worst {worst:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
