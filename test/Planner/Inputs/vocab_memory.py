"""Sets braid-plan's memory per rank against braidc --memory-report's for a
model with a large vocabulary (test/Planner/large-vocab.test).

Arguments: plan.json report.txt TOLERANCE. For each rank (pipeline stage),
the planner's total against the report's total plus the planner's
workspace (the runtime's, MPI's and the executable's fixed part, which the
report leaves out): that sum is the peak resident set issue 13 compares
with (measured for the test's GPT: pp=2 1F1B with vocabulary 32768, stage
0 91.6 MiB against 72.67 + 18.88). Within TOLERANCE (relative) on every
rank.
"""

import json
import sys

from memory_report import reported_totals


def main(argv):
    plan, report, tolerance = argv[1], argv[2], float(argv[3])
    with open(plan) as f:
        memory = json.load(f)["memory"]
    rows = reported_totals(report)
    ok = len(rows) == len(memory)
    for rank, m in enumerate(memory):
        expected = rows[min(rank, len(rows) - 1)] + m["workspace"]
        ratio = m["total"] / expected
        print(f"rank {rank}: planned {m['total'] / 2**20:.2f} MiB, report "
              f"and workspace {expected / 2**20:.2f} MiB ({ratio:.2f})")
        ok &= abs(ratio - 1) <= tolerance
    print("ok" if ok else "FAIL: outside the tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
