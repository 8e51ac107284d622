"""bench/plan_ranking.py in two steps (--build-dir): --build-only compiles the
plans into a folder (with copies of braidc and the runtime) and skips those
built there by the same toolchain; the
run step times only what is built there (saying how many of how many),
compiles nothing but a missing planner's pick, and refuses plans built by
another toolchain unless --allow-stale; a plan that fails or hangs there is
left out and reported.

A tiny GPT on 2 ranks, 3 plans (the pick and the best of each other mesh).
"""

import csv
import json
import re
import subprocess
import sys
import traceback
import warnings

import pytest

from conftest import REPO_ROOT, bin_dir

SCRIPT = REPO_ROOT / "bench" / "plan_ranking.py"
TINY = ["--ranks", "2", "--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "8",
        "--vocab", "64", "--batch", "2", "--global-batch", "4", "--plans", "3"]


# A toolchain id that no braidc and runtime have: the stale plan's below.
FAKE_TOOLCHAIN = "0123456789abcdef"
# Where plan_ranking.py prints a toolchain id: building with it, the plans
# built by it, stale plans' and the current one.
PRINTED_TOOLCHAIN = re.compile(r"toolchain ([0-9a-f]{16})|braidc and runtime are ([0-9a-f]{16})"
                               r"|the current build's \(([0-9a-f]{16})\)")


def ranking(build_dir, *extra, ok=True, toolchains=None):
    """plan_ranking.py's output; adds to `toolchains` the toolchain ids seen
    around the run and in what it printed (less FAKE_TOOLCHAIN)."""
    before = toolchain()
    proc = subprocess.run([sys.executable, str(SCRIPT), *TINY, "--build-dir", str(build_dir),
                           "--bin-dir", str(bin_dir()), "--final", "0", *extra],
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if toolchains is not None:
        toolchains |= {before, toolchain()} | {
            i for m in PRINTED_TOOLCHAIN.findall(out) for i in m if i} - {FAKE_TOOLCHAIN}
    assert (proc.returncode == 0) == ok, out
    return out


def built(build_dir):
    """Plan name -> its folder, for the plans built there."""
    return {json.loads((d / "plan.json").read_text())["name"]: d
            for d in build_dir.iterdir() if (d / "plan.json").is_file()}


def toolchain():
    """The current toolchain id, as bench/plan_ranking.py computes it."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    import plan_ranking
    return plan_ranking.toolchain_id(bin_dir() / "braidc", plan_ranking.runtime_hash(
        plan_ranking.runtime_files(bin_dir())))


def test_build_then_run(tmp_path):
    # The steps assume one braidc and runtime throughout. In a tree where
    # other work rebuilds braidc or the runtime (or edits its headers) that
    # can fail a step for no fault of plan_ranking.py: an attempt that fails
    # after more than one toolchain was seen (before and after each step, and
    # in what the script printed) is void, said so in a warning, and run
    # again; a failure with one toolchain fails, and so does every attempt
    # void (a clean checkout never sees a second toolchain).
    void = []
    for attempt in range(3):
        toolchains = set()
        try:
            build_then_run(tmp_path / f"plans{attempt}", toolchains)
            break
        except AssertionError as e:
            if len(toolchains) < 2:
                raise
            failed = traceback.extract_tb(e.__traceback__)[-1]
            void.append(f"attempt {attempt + 1}: toolchains {sorted(toolchains)}; failed at "
                        f"line {failed.lineno}: {failed.line}")
            warnings.warn(f"test_build_then_run: braidc or the runtime changed during "
                          f"{void[-1]}; again")
    else:
        pytest.fail("braidc or the runtime changed during every attempt, nothing was "
                    "checked:\n" + "\n".join(void), pytrace=False)


def build_then_run(bd, toolchains):
    out = ranking(bd, "--build-only", toolchains=toolchains)
    assert "3 of 3 plans built by toolchain" in out
    assert "(3 compiled now" in out
    plans = built(bd)
    assert len(plans) == 3 and all((d / "prog").is_file() for d in plans.values())
    pick = out.split("the planner's pick: ")[1].splitlines()[0]
    assert pick in plans
    # Built with copies of braidc and the runtime (a --cxx that links the copy).
    assert len(list(bd.glob("braidc-*"))) == 1
    copies = list(bd.glob("runtime-*/cxx"))
    assert len(copies) == 1 and (copies[0].parent / "include" / "braid" / "rt").is_dir()

    # Built again by the same toolchain: nothing compiled.
    out = ranking(bd, "--build-only", toolchains=toolchains)
    assert "(0 compiled now" in out and "3 already built" in out

    # A plan not built is left out and said so; the run step compiles
    # nothing (the plan stays unbuilt).
    other = next(n for n in plans if n != pick)
    for f in plans[other].iterdir():
        f.unlink()
    out = ranking(bd, "--steps", "1", "--repeats", "1", "--check", toolchains=toolchains)
    assert f"timing 2 of 3 plans: built in {bd}; 1 not built, left out: {other}" in out
    assert "over 2 plans" in out
    assert not (plans[other] / "prog").exists()

    # The planner's pick, when missing, is compiled by the run step.
    for f in plans[pick].iterdir():
        f.unlink()
    out = ranking(bd, "--steps", "1", "--repeats", "1", "--check", toolchains=toolchains)
    assert f"the planner's pick {pick} was not built: compiled now" in out
    assert "timing 2 of 3 plans" in out

    # A plan built by another braidc or runtime is stale: refused before
    # any timing, timed with --allow-stale (which names its toolchain).
    meta = plans[pick] / "plan.json"
    info = json.loads(meta.read_text())
    info["toolchain"] = FAKE_TOOLCHAIN
    meta.write_text(json.dumps(info))
    out = ranking(bd, "--steps", "1", "--repeats", "1", ok=False, toolchains=toolchains)
    assert f"1 of the built plans are stale (1 by toolchain {FAKE_TOOLCHAIN}" in out
    assert "Spearman" not in out
    out = ranking(bd, "--steps", "1", "--repeats", "1", "--check", "--allow-stale",
                  toolchains=toolchains)
    assert "--allow-stale: timing plans built by another braidc or runtime" in out
    assert f"1 by toolchain {FAKE_TOOLCHAIN}" in out

    # --build-only rebuilds the stale plan and the missing one.
    out = ranking(bd, "--build-only", toolchains=toolchains)
    assert "3 of 3 plans built by toolchain" in out and "(2 compiled now" in out

    # --rerun-fastest 1: after the first round, only the fastest plan so
    # far and the planner's pick run again.
    table = bd.parent / f"{bd.name}.csv"
    out = ranking(bd, "--steps", "1", "--repeats", "2", "--rerun-fastest", "1", "--csv", str(table),
                  toolchains=toolchains)
    assert ("the median of its runs in 2 rounds of 1 steps (after the first, only the 1 fastest "
            "and the pick)") in out
    assert "round 1: 3 runs in" in out
    with open(table) as f:
        runs = {row["plan"]: len(row["runs_s"].split()) for row in csv.DictReader(f)}
    assert runs.pop(pick) == 2 and sorted(runs.values()) in ([1, 1], [1, 2]), runs

    # A plan that hangs is killed after --run-timeout (its launcher's whole
    # process group) and left out, reported; --check fails. --max-minutes
    # stops before a round that would end after it.
    hang = plans[other] / "prog"
    hang.write_text("#!/bin/sh\nexec sleep 300\n")
    out = ranking(bd, "--steps", "1", "--repeats", "2", "--check", "--run-timeout", "5",
                  "--max-minutes", "0.001", ok=False, toolchains=toolchains)
    assert f"{other} failed (" in out and "killed after 5.0 s" in out
    assert f"1 of 3 plans failed to run, left out: {other}" in out
    assert "--max-minutes 0.001: 1 of 2 rounds done in" in out
    assert "in 1 rounds of 1 steps" in out and "over 2 plans" in out
    assert "--max-minutes 0.001 fits 1 of the 2 rounds at this pace" in out
    assert subprocess.run(["pgrep", "-f", str(hang)]).returncode == 1
