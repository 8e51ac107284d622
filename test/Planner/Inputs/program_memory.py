"""Sets the program's part of braid-plan's memory per rank (its total less
the hardware file's workspace, what a rank holds beside the program)
against braidc --memory-report's total for the same plan
(test/Planner/pipeline-arenas.test).

Arguments: plan.json report.txt TOLERANCE. Within TOLERANCE (relative) on
every rank (pipeline stage).
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
        planned = m["total"] - m["workspace"]
        reported = rows[min(rank, len(rows) - 1)]
        ratio = planned / reported
        print(f"rank {rank}: planned {planned / 2**20:.2f} MiB, report "
              f"{reported / 2**20:.2f} MiB ({ratio:.2f})")
        ok &= abs(ratio - 1) <= tolerance
    print("ok" if ok else "FAIL: outside the tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
