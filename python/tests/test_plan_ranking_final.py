"""bench/plan_ranking.py's final phase (--final K --final-rounds R): the
planner's pick and the K fastest measured plans run again in R rounds, each
round every plan once in an order drawn from a fixed seed, judged by median
and by best. Fake runners: no plan is compiled or run."""

import csv
import math
import random
import re
import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
import plan_ranking  # noqa: E402


def rows(times):
    return [{"name": n, "measured": t} for n, t in times.items()]


def test_final_plans_are_the_fastest_and_the_pick():
    measured = rows({"a": 0.07, "b": 0.05, "c": 0.06, "d": 0.09, "pick": 0.08})
    names = [r["name"] for r in plan_ranking.final_plans(measured, "pick", 2)]
    assert names == ["b", "c", "pick"]
    # The pick among the fastest: not twice.
    names = [r["name"] for r in plan_ranking.final_plans(measured, "c", 2)]
    assert names == ["b", "c"]
    assert len(plan_ranking.final_plans(measured, "pick", 10)) == 5


def test_rounds_interleave_every_plan_in_seeded_orders():
    plans = rows({n: 0.05 for n in "abcdef"})
    calls = []

    def run(r):
        calls.append(r["name"])
        return 0.01 * len(calls)

    times, orders = plan_ranking.final_rounds(plans, 8, run)
    # Round robin: each round runs every plan once, in that round's order.
    assert len(orders) == 8
    assert all(sorted(o) == list("abcdef") for o in orders)
    assert calls == [n for o in orders for n in o]
    assert all(len(ts) == 8 for ts in times.values())
    # A random order per round (not one order repeated), the same for the
    # same seed, another for another seed.
    assert len({tuple(o) for o in orders}) > 1
    again, orders_again = plan_ranking.final_rounds(plans, 8, lambda r: 1.0)
    assert orders_again == orders
    _, other = plan_ranking.final_rounds(plans, 8, lambda r: 1.0, seed=1)
    assert other != orders
    # A plan's times are its runs in round order: drift hits all plans
    # alike, none always first or last.
    assert all(times[n] == sorted(times[n]) for n in times)
    firsts = {o[0] for o in orders}
    assert len(firsts) > 1


def test_failed_runs_leave_no_time():
    plans = rows({"a": 0.05, "b": 0.06})
    times, _ = plan_ranking.final_rounds(plans, 3, lambda r: None if r["name"] == "b" else 0.05)
    assert times == {"a": [0.05] * 3, "b": []}
    summary = plan_ranking.final_summary(times, "b")
    assert list(summary["plans"]) == ["a"] and summary["pick_gap_median"] is None
    assert "the planner's pick b has no run" in "\n".join(
        plan_ranking.final_report(summary, "b", 3))
    assert plan_ranking.final_summary({"a": []}, "a") is None


def test_summary_judges_by_median_and_by_best():
    # The winner's curse: "lucky" has one round far below its others; by
    # best it is the fastest, by median the pick is.
    times = {"lucky": [0.0570, 0.0700, 0.0720, 0.0690, 0.0710],
             "pick": [0.0640, 0.0650, 0.0630, 0.0660, 0.0645],
             "slow": [0.0800, 0.0810, 0.0790, 0.0805, 0.0795]}
    s = plan_ranking.final_summary(times, "pick")
    assert s["plans"]["lucky"] == {"runs": 5, "median": 0.0700, "best": 0.0570}
    assert s["plans"]["pick"]["median"] == 0.0645
    assert s["fastest_median"] == "pick" and s["fastest_best"] == "lucky"
    assert s["pick_gap_median"] == 0
    assert abs(s["pick_gap_best"] - (0.0630 / 0.0570 - 1)) < 1e-12
    lines = plan_ranking.final_report(s, "pick", 5)
    assert "5 rounds, each in an order from seed 0: median and best ms" in lines[0]
    # Sorted by median, the pick marked.
    assert lines[1].split()[:2] == ["64.50", "63.00"]
    assert lines[1].endswith("pick  <- the planner's pick")
    assert "(5 runs)  lucky" in lines[2] and "slow" in lines[3]
    assert lines[-1] == ("final phase: the planner's pick pick is 0.0% slower than the fastest by "
                         "median (pick, 64.50 ms) and 10.5% by best (lucky, 57.00 ms)")

    # The pick behind by median too.
    s = plan_ranking.final_summary({"a": [0.050, 0.052, 0.054], "p": [0.055, 0.060, 0.057]}, "p")
    assert s["fastest_median"] == "a"
    assert abs(s["pick_gap_median"] - (0.057 / 0.052 - 1)) < 1e-12
    assert abs(s["pick_gap_best"] - (0.055 / 0.050 - 1)) < 1e-12


def test_csv_records_the_final_runs(tmp_path):
    base = {"predicted": 0.05, "runs": [0.06, 0.055], "memory": [10.0], "rss": [11.0]}
    table = tmp_path / "t.csv"
    plan_ranking.write_csv(table, [dict(base, name="a", final_runs=[0.057, 0.0561]),
                                   dict(base, name="b")])
    with open(table) as f:
        got = {row["plan"]: row for row in csv.DictReader(f)}
    assert got["a"]["final_runs_s"] == "0.057 0.0561"
    assert got["b"]["final_runs_s"] == ""
    # A plan's time: the median of its runs; its best run beside it.
    assert got["a"]["runs_s"] == "0.06 0.055" and got["a"]["measured_s"] == "0.0575"
    assert got["a"]["best_s"] == "0.055"


class FakeTools:
    """The script's tools faked: braidc (the pick, dp=2 on 2 ranks; a
    compile is an empty file), braid-plan (a prediction per plan) and
    braid-run (a time per run: each plan's own, except one lucky run of the
    first plan, and a peak resident set per rank)."""

    def __init__(self, monkeypatch):
        self.runs = []
        monkeypatch.setattr(plan_ranking.subprocess, "run", self.subprocess_run)
        monkeypatch.setattr(plan_ranking, "predict", self.predict)
        monkeypatch.setattr(plan_ranking, "run_plan", self.run_plan)

    def subprocess_run(self, args, **kwargs):
        import subprocess
        out = "flags: --mesh dp=2,tp=1,pp=1 --microbatches 2\n" if "auto" in args else ""
        if "-o" in args:
            open(args[args.index("-o") + 1], "w").close()
        return subprocess.CompletedProcess(args, 0, out, "")

    def predict(self, bin_dir, hardware, model, plan, batch, microbatches):
        t = 0.010 * plan["pp"] + 0.001 * plan["tp"] + 0.0001 * plan["zero"]
        return {"step_time": t, "memory": [{"total": 10 * 2**20}] * plan["pp"]}

    def run_plan(self, bin_dir, ranks, program, steps, timeout):
        self.runs.append(program.name)
        # plan0 is the fastest predicted, plan1 the next: plan1 has the
        # lucky first run (9 ms), then 14 ms; plan0 runs 12 ms.
        ms = {"plan0": 12.0, "plan1": 14.0}.get(program.name, 20.0)
        if program.name == "plan1" and self.runs.count("plan1") == 1:
            ms = 9.0
        err = "".join(f"maxrss_kib {k} 10240\n" for k in range(ranks))
        return 0, f"summary: {steps} steps, {ms} ms/step\n", err


def run_main(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["plan_ranking.py", "--ranks", "2", "--layers", "2",
                                      "--hidden", "32", "--heads", "2", "--seq", "8", "--vocab",
                                      "64", "--batch", "2", "--global-batch", "4", *args])
    plan_ranking.main()
    return capsys.readouterr().out


def test_main_runs_and_reports_the_final_phase(monkeypatch, capsys, tmp_path):
    tools = FakeTools(monkeypatch)
    table = tmp_path / "t.csv"
    out = run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "2", "--final", "1",
                   "--final-rounds", "4", "--csv", str(table), "--bin-dir", str(tmp_path))
    # 3 plans x 2 rounds, then the fastest (the lucky plan1) and the pick
    # (dp2, plan0: the fastest predicted) x 4 rounds.
    assert len(tools.runs) == 3 * 2 + 2 * 4
    assert sorted(tools.runs[6:]) == ["plan0"] * 4 + ["plan1"] * 4
    # The main rounds interleaved: each runs every plan once.
    assert sorted(tools.runs[:3]) == sorted(tools.runs[3:6]) == ["plan0", "plan1", "plan2"]
    # A plan's time is its median run: the lucky plan1 (9 and 14 ms: 11.5)
    # is still the fastest, by less than its best run (9 ms) would say.
    assert "the planner's pick dp2 tp1 pp1: 12.00 ms measured, 4.3% slower than the fastest " \
           "measured (dp2 tp1 pp1 zero" not in out
    assert "the planner's pick dp2 tp1 pp1: 12.00 ms measured, 4.3% slower than the fastest " \
           "measured" in out
    assert re.search(r"over 3 plans: \S+ \(against each plan's median run; against its best run "
                     r"\S+\)", out)
    # The noise ceiling: every plan's two rounds alike but plan1's, whose
    # rounds swap its place with plan0's.
    assert "noise ceiling over the 3 plans with 2 runs or more: split-half Spearman (odd " \
           "against even rounds' medians) 0.500, all rounds 0.667 (Spearman-Brown), so a " \
           "perfect model's Spearman against these medians about 0.816 at most" in out
    # The final phase: by median the pick is the fastest, by best 33.3% off
    # (the lucky run is not in it).
    assert "final phase: the planner's pick and the fastest measured plans again, 4 rounds" in out
    assert "final phase: the planner's pick dp2 tp1 pp1 is 0.0% slower than the fastest by " \
           "median (dp2 tp1 pp1, 12.00 ms) and 0.0% by best (dp2 tp1 pp1, 12.00 ms)" in out
    assert "     14.00    14.00  (4 runs)  " in out
    with open(table) as f:
        final = {row["plan"]: row["final_runs_s"] for row in csv.DictReader(f)}
    assert final["dp2 tp1 pp1"] == "0.012 0.012 0.012 0.012"
    assert sorted(final.values()).count("") == 1

    # --reuse: the final phase reported from the CSV, nothing run.
    tools.runs.clear()
    out = run_main(monkeypatch, capsys, "--reuse", str(table), "--bin-dir", str(tmp_path))
    assert tools.runs == []
    assert "final phase: the planner's pick dp2 tp1 pp1 is 0.0% slower" in out

    # --final 0: no final phase.
    out = run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "1", "--final", "0",
                   "--bin-dir", str(tmp_path))
    assert "final phase" not in out and len(tools.runs) == 3


def test_a_plans_time_is_its_median_run():
    assert plan_ranking.plan_time([0.07]) == 0.07
    assert plan_ranking.plan_time([0.09, 0.05, 0.06]) == 0.06
    assert abs(plan_ranking.plan_time([0.05, 0.08, 0.06, 0.07]) - 0.065) < 1e-12


def plans_with_runs(runs):
    return [{"name": str(i), "predicted": 0.01 * i, "runs": r} for i, r in enumerate(runs)]


def test_noise_ceiling_is_the_split_half_spearman():
    # Odd rounds (1st, 3rd) and even rounds (2nd) rank the plans alike.
    rows = plans_with_runs([[0.01, 0.011, 0.012], [0.02, 0.021, 0.019], [0.03, 0.031, 0.029]])
    assert plan_ranking.noise_ceiling(rows) == (3, 1.0, 1.0, 1.0)
    # One run: left out; fewer than 3 plans with two runs: no ceiling.
    assert plan_ranking.noise_ceiling(rows[:2] + plans_with_runs([[0.5]])) is None
    assert plan_ranking.noise_ceiling(rows + plans_with_runs([[0.5]]))[0] == 3
    # Halves that rank 4 plans 1234 and 2143: rho = 0.6, Spearman-Brown
    # 2 rho / (1 + rho) = 0.75, and its square root.
    rows = plans_with_runs([[1, 2], [2, 1], [3, 4], [4, 3]])
    n, rho, full, root = plan_ranking.noise_ceiling(rows)
    assert n == 4 and abs(rho - 0.6) < 1e-12 and abs(full - 0.75) < 1e-12
    assert abs(root - math.sqrt(0.75)) < 1e-12
    # Halves that disagree: no estimate for all rounds.
    rows = plans_with_runs([[1, 9, 1], [2, 8, 2], [3, 7, 3]])
    assert plan_ranking.noise_ceiling(rows) == (3, -1.0, None, None)
    lines = plan_ranking.ceiling_report(plan_ranking.noise_ceiling(rows), rows)
    assert "split-half Spearman (odd against even rounds' medians) -1.000" in lines[0]
    assert "Spearman-Brown" not in lines[0]
    assert lines[1] == "  predicted against measured over the same 3 plans: 1.000"
    assert "needs 3 plans" in plan_ranking.ceiling_report(None, rows)[0]


def test_max_rounds_from_the_first_rounds_pace():
    # 100 s a round: 10 minutes fit 6 rounds, capped by --repeats.
    assert plan_ranking.max_rounds(100, 50, 10, 8) == 6
    assert plan_ranking.max_rounds(100, 50, 10, 3) == 3
    # At least the round done; no limit: every round.
    assert plan_ranking.max_rounds(100, 50, 0.5, 3) == 1
    assert plan_ranking.max_rounds(100, 50, None, 3) == 3


def test_main_rounds_interleave_in_seeded_orders(monkeypatch, capsys, tmp_path):
    tools = FakeTools(monkeypatch)
    run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "6", "--final", "0",
             "--bin-dir", str(tmp_path))
    rounds = [tools.runs[3 * k:3 * k + 3] for k in range(6)]
    assert len(tools.runs) == 18 and all(sorted(r) == ["plan0", "plan1", "plan2"] for r in rounds)
    # Each round in an order of its own (not one order repeated), the same
    # in every run of the script.
    assert len({tuple(r) for r in rounds}) > 1
    first = list(tools.runs)
    tools.runs.clear()
    run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "6", "--final", "0",
             "--bin-dir", str(tmp_path))
    assert tools.runs == first


def test_reuse_reads_old_and_new_csvs(monkeypatch, capsys, tmp_path):
    FakeTools(monkeypatch)
    table = tmp_path / "t.csv"
    run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "3", "--final", "0", "--csv",
             str(table), "--bin-dir", str(tmp_path))
    with open(table) as f:
        rows = list(csv.DictReader(f))
    new = run_main(monkeypatch, capsys, "--reuse", str(table), "--bin-dir", str(tmp_path),
                   "--check")
    assert "noise ceiling over the 3 plans" in new
    # A file of before (measured_s the best run, no best_s), one run a plan.
    old = tmp_path / "old.csv"
    with open(old, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["plan", "predicted_s", "measured_s", "runs_s", "predicted_mib", "rss_mib",
                    "final_runs_s"])
        for r in rows:
            w.writerow([r["plan"], r["predicted_s"], r["best_s"], r["runs_s"].split()[0],
                        r["predicted_mib"], r["rss_mib"], ""])
    out = run_main(monkeypatch, capsys, "--reuse", str(old), "--bin-dir", str(tmp_path), "--check")
    assert "runs of " + str(old) + ": 1 rounds" in out
    assert "over 3 plans" in out and "noise ceiling: needs 3 plans with 2 runs or more" in out


def test_reuse_twice_concatenates_each_plans_runs(monkeypatch, capsys, tmp_path):
    FakeTools(monkeypatch)
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    run_main(monkeypatch, capsys, "--plans", "3", "--repeats", "2", "--final", "0", "--csv",
             str(first), "--bin-dir", str(tmp_path))
    # More rounds of the same plans: every run 1 ms slower, one rank's peak
    # resident set larger.
    with open(first) as f:
        rows = list(csv.DictReader(f))
    with open(second, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            runs = [float(t) + 0.001 for t in r["runs_s"].split()]
            rss = r["rss_mib"].split()
            rss[0] = f"{float(rss[0]) + 100:.1f}"
            w.writerow(dict(r, runs_s=" ".join(f"{t:.6g}" for t in runs), rss_mib=" ".join(rss)))
    table = tmp_path / "both.csv"
    out = run_main(monkeypatch, capsys, "--reuse", str(first), "--reuse", str(second),
                   "--bin-dir", str(tmp_path), "--csv", str(table))
    assert f"runs of {first} + {second}: 4 rounds" in out
    with open(table) as f:
        both = {r["plan"]: r for r in csv.DictReader(f)}
    for r in rows:
        runs = [float(t) for t in r["runs_s"].split()]
        expected = runs + [t + 0.001 for t in runs]
        assert [float(t) for t in both[r["plan"]]["runs_s"].split()] == \
            [float(f"{t:.6g}") for t in expected]
        assert float(both[r["plan"]]["rss_mib"].split()[0]) == \
            float(r["rss_mib"].split()[0]) + 100
