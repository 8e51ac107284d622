"""Reads braidc --memory-report's text: the total bytes per rank (one row
`all ...` without a pipeline, one row `stage S ...` per pipeline stage)."""


def reported_totals(path):
    """Each rank's total bytes, in rank (stage) order."""
    rows = []
    with open(path) as f:
        for line in f:
            words = line.split()
            if words and words[0] == "all":
                rows.append(float(words[6]))
            elif len(words) > 2 and words[0] == "stage":
                rows.append(float(words[7]))
    return rows


def compare(argv, with_workspace):
    """braid-plan's memory per rank (plan.json) against the report
    (report.txt) within TOLERANCE (relative) on every rank: argv is
    [script, plan.json, report.txt, TOLERANCE]. With `with_workspace` the
    planner's total against the report plus the planner's workspace (what
    a rank holds beside its program, which the report leaves out), else
    the planner's total less its workspace against the report. Prints each
    rank and "ok"; returns the exit status."""
    import json
    plan, report, tolerance = argv[1], argv[2], float(argv[3])
    with open(plan) as f:
        memory = json.load(f)["memory"]
    rows = reported_totals(report)
    ok = len(rows) == len(memory)
    for rank, m in enumerate(memory):
        reported = rows[min(rank, len(rows) - 1)]
        if with_workspace:
            planned, expected = m["total"], reported + m["workspace"]
            what = "report and workspace"
        else:
            planned, expected = m["total"] - m["workspace"], reported
            what = "report"
        ratio = planned / expected
        print(f"rank {rank}: planned {planned / 2**20:.2f} MiB, {what} "
              f"{expected / 2**20:.2f} MiB ({ratio:.2f})")
        ok &= abs(ratio - 1) <= tolerance
    print("ok" if ok else "FAIL: outside the tolerance")
    return 0 if ok else 1
