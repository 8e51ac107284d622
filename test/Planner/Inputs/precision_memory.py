"""Sets braid-plan's memory per rank against braidc --memory-report's, for
one plan under --precision f32 and bf16-mixed (test/Planner/precision.test).

Arguments: plan-f32.json plan-bf16.json report-f32.txt report-bf16.txt
RANK TOLERANCE [--total TOLERANCE]. The model state is the same under both
precisions, so what bf16-mixed saves is activation and buffer bytes: the
planner's saving (its total change) must be within TOLERANCE (relative) of
the report's. With --total, also the planner's bf16-mixed total less its
workspace (the runtime's fixed part, which the report leaves out) against
the report's total.
"""

import json
import sys

from memory_report import reported_totals


def planned(path, rank):
    with open(path) as f:
        m = json.load(f)["memory"][rank]
    return m["total"] - m["workspace"]


def reported(path, rank):
    return reported_totals(path)[rank]


def main(argv):
    plan32, plan16, report32, report16 = argv[1:5]
    rank, tolerance = int(argv[5]), float(argv[6])
    ok = True
    saved = planned(plan32, rank) - planned(plan16, rank)
    expected = reported(report32, rank) - reported(report16, rank)
    diff = saved / expected - 1
    print(f"rank {rank}: bf16-mixed saves {saved / 2**20:.2f} MiB, the "
          f"report {expected / 2**20:.2f} MiB ({diff:+.1%})")
    ok &= abs(diff) <= tolerance
    if len(argv) > 8 and argv[7] == "--total":
        total = planned(plan16, rank)
        expected = reported(report16, rank)
        diff = total / expected - 1
        print(f"rank {rank}: bf16-mixed total less workspace "
              f"{total / 2**20:.2f} MiB, the report {expected / 2**20:.2f} "
              f"MiB ({diff:+.1%})")
        ok &= abs(diff) <= float(argv[8])
    print("ok" if ok else "FAIL: outside the tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
