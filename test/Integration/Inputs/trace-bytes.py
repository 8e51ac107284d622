"""Compares the bytes a program's trace counted (what it issued: see
runtime.md's wire_bytes) with braid-comm-report's
prediction for the same step.

    trace-bytes.py REPORT KIND_CSV --ranks N [--uncompressed KIND_CSV]
                   [--factor F]

REPORT is braid-comm-report's output, KIND_CSV `braid-trace --by-kind --csv`
of the program's --trace on N ranks. Checks, for every traced step:

- the bytes the ranks sent (wire_bytes), averaged over the ranks, equal the
  report's 'total all sent' for @train_step (it prints whole bytes: within
  0.5 byte);
- with compression (the report ends with 'compressed gradient reductions:
  sent X bytes instead of Y'): the compressed operations (the 16-bit sums,
  PowerSGD) sent X, averaged over the ranks, within 0.5 byte;
- with --uncompressed (the same program compiled without compression): its
  every step sends Y - X more, and the compressed operations' bytes shrank
  by the factor F = Y / X (--factor: the one expected, e.g. 2 for bf16),
  within 1e-9.

Prints one 'ok:' line per check with the figures, or fails naming them.
"""
import argparse
import csv
import re
import sys

COMPRESSED = ("all_reduce (16-bit)", "reduce_scatter (16-bit)",
              "powersgd_all_reduce")


def fail(message):
    print(f"trace-bytes: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def report_figures(path):
    """(total sent, compressed sent or None, their uncompressed bytes or None)
    of @train_step in a comm report."""
    text = open(path).read()
    start = text.find("braid-comm-report: @train_step")
    if start < 0:
        fail(f"{path}: no report for @train_step")
    section = text[start:]
    following = section.find("braid-comm-report: @", 1)
    if following > 0:
        section = section[:following]
    total = re.search(r"^total all\s+sent\s+(\d+) bytes", section, re.M)
    if not total:
        fail(f"{path}: no 'total all' line")
    saved = re.search(r"^compressed gradient reductions: sent (\d+) bytes "
                      r"instead of (\d+)", section, re.M)
    return (float(total.group(1)),
            float(saved.group(1)) if saved else None,
            float(saved.group(2)) if saved else None)


def measured(path, ranks):
    """Per step: (all bytes sent, compressed operations' bytes sent), each
    averaged over the ranks."""
    per = {}
    for row in csv.DictReader(open(path)):
        if row["step"] == "all":
            continue
        key = row["step"]
        figures = per.setdefault(key, {})
        rank = figures.setdefault(row["rank"], [0, 0])
        wire = int(row["wire_bytes"])
        rank[0] += wire
        if row["op"] in COMPRESSED:
            rank[1] += wire
    if not per:
        fail(f"{path}: no steps with bytes")
    steps = {}
    for step, figures in per.items():
        if len(figures) != ranks:
            fail(f"{path}: step {step}: {len(figures)} ranks sent bytes, "
                 f"expected {ranks}")
        steps[step] = tuple(sum(f[i] for f in figures.values()) / ranks
                            for i in (0, 1))
    return steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("trace")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--uncompressed")
    parser.add_argument("--factor", type=float)
    args = parser.parse_args()
    total, sent, instead = report_figures(args.report)
    steps = measured(args.trace, args.ranks)
    for step, (wire, compressed) in sorted(steps.items()):
        if abs(wire - total) > 0.5:
            fail(f"step {step}: sent {wire} bytes per rank on average, the "
                 f"comm report predicts {total}")
        if sent is not None and abs(compressed - sent) > 0.5:
            fail(f"step {step}: the compressed sums sent {compressed} bytes "
                 f"per rank on average, the comm report predicts {sent}")
    print(f"ok: {len(steps)} steps sent {total:.0f} bytes per rank "
          f"(traced = predicted)")
    if sent is not None:
        print(f"ok: compressed sums sent {sent:.0f} bytes per rank, predicted "
              f"{sent:.0f} instead of {instead:.0f}")
    if args.uncompressed:
        if sent is None:
            fail("--uncompressed: the report has no compressed reductions")
        baseline = measured(args.uncompressed, args.ranks)
        if sorted(baseline) != sorted(steps):
            fail(f"steps {sorted(baseline)} uncompressed, {sorted(steps)} "
                 f"compressed")
        for step, (wire, compressed) in sorted(steps.items()):
            full = baseline[step][0] - (wire - compressed)
            if abs(full - instead) > 0.5:
                fail(f"step {step}: uncompressed, those reductions sent "
                     f"{full} bytes per rank, the report predicts {instead}")
            factor = full / compressed
            if args.factor is not None and abs(factor - args.factor) > 1e-9:
                fail(f"step {step}: compression shrank them by {factor}, "
                     f"expected {args.factor}")
        print(f"ok: uncompressed they sent {full:.0f} bytes per rank: "
              f"{factor:.4f}x fewer compressed")


if __name__ == "__main__":
    main()
