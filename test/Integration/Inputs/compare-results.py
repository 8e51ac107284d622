"""Compares the losses a braidc program printed with braid-eval's.

usage: compare-results.py PROGRAM_OUTPUT EVAL_OUTPUT --rtol R [--tensors]

The program prints `loss <value>` per run or step; braid-eval prints
`result 0: tensor<f32> = <value>` for a forward entry and a `loss` column per
step with --steps. Fails unless both give the same number of losses and each
pair agrees within the relative tolerance.

With --tensors, compares tensor results instead: the program's
`<name> sum S l2 L` lines with braid-eval's `result I: <type> sum = S l2 = L`,
in order; sums agree within R times the L2 norm (sums may cancel), norms
within R relative.
"""
import argparse
import re
import sys


def program_losses(text):
    return [float(m.group(1)) for m in re.finditer(r"\bloss (\S+)", text)]


def eval_losses(text):
    forward = re.findall(r"^result 0: tensor<f32> = (\S+)$", text, re.M)
    if forward:
        return [float(v) for v in forward]
    return [float(m.group(1)) for m in re.finditer(r"\bloss[ =:]+(\S+)", text)]


def compare_tensors(program, eval_text, rtol):
    got = re.findall(r"^\S+ sum (\S+) l2 (\S+)$", program, re.M)
    want = re.findall(r"^result \d+: \S+ sum = (\S+) l2 = (\S+)$", eval_text, re.M)
    if not got or len(got) != len(want):
        print(f"error: {len(got)} tensors from the program, {len(want)} from braid-eval")
        return 1
    for i, ((gs, gl), (ws, wl)) in enumerate(zip(got, want)):
        gs, gl, ws, wl = map(float, (gs, gl, ws, wl))
        scale = max(wl, 1e-30)
        ds, dl = abs(gs - ws) / scale, abs(gl - wl) / scale
        print(f"result {i}: sum {gs!r} vs {ws!r}, l2 {gl!r} vs {wl!r}")
        if ds > rtol or dl > rtol:
            print(f"error: result {i} differs by {max(ds, dl):.3g} > {rtol} (of its L2 norm)")
            return 1
    print(f"ok: {len(got)} tensors within {rtol}")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("eval")
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--tensors", action="store_true")
    args = parser.parse_args()
    if args.tensors:
        return compare_tensors(open(args.program).read(), open(args.eval).read(), args.rtol)
    got = program_losses(open(args.program).read())
    want = eval_losses(open(args.eval).read())
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
