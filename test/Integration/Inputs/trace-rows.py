"""Checks braid-trace --csv rows of a dp=2 program's 3-step trace: 3 steps
and a total per rank; per row compute + wait = ms, wait <= ms, something
in flight, overlap within [0, 100]; the totals the sums of the steps; and
with 'blocking' the waits equal the flights (overlap 0), with 'started'
some overlap in every row. Prints 'consistent' or fails with the rows."""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
mode = sys.argv[2]
steps = [r for r in rows if r["step"] != "all"]
totals = [r for r in rows if r["step"] == "all"]
f = lambda r, k: float(r[k])
assert len(steps) == 6 and len(totals) == 2, rows
for r in rows:
    assert 0 < f(r, "wait_ms") <= f(r, "ms"), r
    assert abs(f(r, "compute_ms") + f(r, "wait_ms") - f(r, "ms")) < 2e-3, r
    assert f(r, "in_flight_ms") > 0 and 0 <= f(r, "overlap_%") <= 100, r
    if mode == "blocking":
        assert abs(f(r, "wait_ms") - f(r, "in_flight_ms")) < 2e-3 and f(r, "overlap_%") == 0, r
    else:
        assert f(r, "overlap_%") > 0, r
for t in totals:
    mine = [s for s in steps if s["rank"] == t["rank"]]
    for k in ("ms", "compute_ms", "wait_ms", "in_flight_ms"):
        assert abs(sum(f(s, k) for s in mine) - f(t, k)) < 5e-3, (k, t, mine)
print("consistent")
