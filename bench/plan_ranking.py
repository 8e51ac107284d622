#!/usr/bin/python3
"""The planner's ranking of plans against measured step times on this machine.

Workload: a small GPT (default 4 layers, hidden 128, 4 heads, sequence 64,
vocabulary 256, program batch 4, so one micro-batch of 4 samples over the dp
ranks) trained with a global batch of 16 (4 micro-batches) on --ranks MPI
ranks of this machine (braid-run, one thread per rank).

1. Enumerates every plan braidc can compile for the program on --ranks
   devices, as the planner's search does (docs/planner.md): dp x tp x pp, the
   schedules with pp > 1 (1F1B, interleaved 1F1B with 2.. chunks, ZB-H1,
   ZB-H2, ZB-V, auto), ZeRO 0-3 with dp > 1, sequence parallelism with tp >
   1, recomputation none / selective / full; even stage boundaries (the
   planner's own pick, with its balanced boundaries, is added). Each is
   predicted with `braid-plan --json --hardware H`; those the model rejects
   (divisibility) are left out.
2. Measures a representative set (--plans N, default 16; --all: every
   plan): the planner's pick (`braidc --mesh auto --devices N --plan-only`),
   the best predicted plan of every mesh, then plans at evenly spaced places
   of the predicted ranking. Each is compiled with braidc (the plan's
   flags) and run for 1 + --steps steps in --repeats interleaved rounds:
   each round runs every plan once, in an order drawn from a fixed seed
   (another each round), so that drift and busy spells of the machine
   spread over all plans. A run's time is the program's `summary: ...
   ms/step` (the mean over the steps after the first); a plan's time is the
   median of its runs (its best run is kept beside it, in the CSV's
   best_s). --max-minutes: the first round's pace says how many rounds fit.
3. Prints predicted against measured per plan, the Spearman rank
   correlation of the two (ties averaged; also against each plan's best
   run), and the planner's pick against the fastest measured plan, with
   the load average before and after. Beside it, the noise ceiling: the
   Spearman correlation between the medians of the odd and of the even
   rounds of the plans with 2 runs or more (split half), which says how
   much ranking the measurement itself supports, with its Spearman-Brown
   estimate for all rounds and the square root of that (about the most a
   perfect model's Spearman against these measurements could reach).
   A plan's best run over many is a lucky round more often the more plans
   there are (the winner's curse: on 8 ranks the fastest plan's best of
   372 first runs and its reruns was one round 15% below its reruns
   minutes later), so a final phase (--final K, --final-rounds R; default
   5 and 8, --final 0 leaves it out) then runs the planner's pick and the
   K fastest measured plans again in R rounds, each round every one of
   them once in an order drawn from a fixed seed (so that drift and busy
   spells hit all alike), and prints each one's median and best of those
   rounds and the pick's distance from the fastest by median and by best,
   beside the numbers above (which it leaves as they were).
4. Memory (issue 13: the predicted memory per rank within 15% of the
   measured peak resident set): every run of a plan records each rank's
   peak resident set (getrusage of the rank's process, as
   bench/pipeline_memory.py does); each rank's largest over the runs is
   compared with braid-plan's memory (--compiled-buffers: braidc's program
   buffers counted) of its pipeline rank (world rank r
   holds stage r mod pp, docs/codegen.md), and the plans whose every rank
   is within 15% are counted. --memory-only runs each plan once for this
   (no timing).

5. Two steps (--build-dir DIR): `--build-dir DIR --build-only` compiles the
   plans' executables into DIR (kept; a plan already built there by the same
   toolchain is skipped, so a build that stopped goes on) and times nothing,
   so it can run on a busy machine; `--build-dir DIR` alone then times the
   executables built there, predicting every plan with braid-plan when it
   runs (the cost model of that day). DIR/<key>/ holds a plan's `prog` and
   `plan.json` (its flags, model and toolchain); the key is a hash of the
   model and the plan's flags, the toolchain a hash of braidc and of the
   runtime's headers and libraries it compiles against. The build compiles
   with copies of both taken when it starts (DIR/braidc-<hash>, and
   DIR/runtime-<hash> through a --cxx wrapper), so that braidc or the
   runtime rebuilt meanwhile neither mixes into the set nor breaks it; it
   compiles the pick and the best plan of each mesh first, then the ranking
   bisected, so that a build stopped early leaves a set spanning it. The
   run step times only what is built (it says how many of how many),
   compiling nothing but the planner's pick if that is missing; it refuses
   plans built by another toolchain than the current build tree's unless
   --allow-stale (then it names their toolchain).

    bench/plan_ranking.py [--ranks 4] [--hardware cpu-local] [--plans 16 | --all]
        [--steps 5] [--repeats 3] [--final 5] [--final-rounds 8]
        [--csv FILE] [--reuse FILE ...] [--memory-only] [--check]
        [--build-dir DIR [--build-only [--braidc FILE] | --allow-stale]]

--check (ctest) exits non-zero unless every measured plan compiled, ran and
printed a finite time and a peak resident set per rank, and the correlation
is a number; it judges neither the correlation (a timing on a shared
machine) nor the memory.
"""

import argparse
import csv
import hashlib
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

SCHEDULES = ["1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "auto"]
RECOMPUTE = ["none", "selective", "full"]
# Runs one rank and prints its world rank (from the MPI launcher's
# environment) and peak resident set in KiB on stderr (as
# bench/pipeline_memory.py), in one write so that the ranks' lines do not
# interleave.
RSS_WRAPPER = ("import os, resource, subprocess, sys; "
               "rank = next((os.environ[k] for k in ('OMPI_COMM_WORLD_RANK', 'PMIX_RANK', "
               "'PMI_RANK') if k in os.environ), '?'); "
               "code = subprocess.run(sys.argv[1:]).returncode; "
               "os.write(2, ('maxrss_kib %s %d\\n' % (rank, resource.getrusage("
               "resource.RUSAGE_CHILDREN).ru_maxrss)).encode()); sys.exit(code)")
MEMORY_TOLERANCE = 0.15


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_plans(ranks, layers, batch, microbatches, heads):
    """Every plan of the search's space for the program (even boundaries)."""
    plans = []
    for pp in divisors(ranks):
        for tp in divisors(ranks // pp):
            dp = ranks // pp // tp
            if batch % dp or heads % tp or pp > layers:
                continue
            scheds = [(None, None)]
            if pp > 1:
                scheds = []
                for s in SCHEDULES:
                    if s == "interleaved-1f1b":
                        if microbatches % pp:
                            continue
                        scheds += [(s, v) for v in range(2, 5) if pp * v <= layers]
                    elif s == "zb-v":
                        if 2 * pp <= layers:
                            scheds.append((s, 2))
                    else:
                        scheds.append((s, 1))
            for sched, chunks in scheds:
                for rc in RECOMPUTE:
                    for sp in ([False, True] if tp > 1 else [False]):
                        for zero in (range(4) if dp > 1 else [0]):
                            plans.append({"dp": dp, "tp": tp, "pp": pp, "schedule": sched,
                                          "chunks": chunks, "zero": zero, "sp": sp,
                                          "recompute": rc, "stage_layers": None})
    return plans


def flags(plan, microbatches):
    f = ["--mesh", f"dp={plan['dp']},tp={plan['tp']},pp={plan['pp']}",
         "--microbatches", str(microbatches)]
    if plan["pp"] > 1:
        f += ["--schedule", plan["schedule"]]
        if plan["schedule"] == "interleaved-1f1b":
            f += ["--chunks", str(plan["chunks"])]
    if plan["zero"]:
        f += ["--zero", str(plan["zero"])]
    if plan["sp"]:
        f.append("--sp")
    if plan["recompute"] != "none":
        f += ["--recompute", plan["recompute"]]
    if plan["stage_layers"]:
        f += ["--stage-layers", plan["stage_layers"]]
    return f


def name(plan):
    s = f"dp{plan['dp']} tp{plan['tp']} pp{plan['pp']}"
    if plan["pp"] > 1:
        s += " " + plan["schedule"] + (f"/v{plan['chunks']}" if plan["chunks"] > 1 else "")
    if plan["zero"]:
        s += f" z{plan['zero']}"
    if plan["sp"]:
        s += " sp"
    if plan["recompute"] != "none":
        s += " rc=" + plan["recompute"]
    if plan["stage_layers"]:
        s += f" [{plan['stage_layers']}]"
    return s


def parse_flags(text):
    """A plan from braidc's `flags:` line."""
    words = text.split()
    get = lambda flag, default=None: words[words.index(flag) + 1] if flag in words else default
    mesh = dict(kv.split("=") for kv in get("--mesh").split(","))
    schedule = get("--schedule")
    chunks = int(get("--chunks", 0)) or (2 if schedule == "zb-v" else 1)
    return {"dp": int(mesh["dp"]), "tp": int(mesh["tp"]), "pp": int(mesh["pp"]),
            "schedule": schedule, "chunks": chunks if schedule else None,
            "zero": int(get("--zero", 0)), "sp": "--sp" in words,
            "recompute": get("--recompute", "none"), "stage_layers": get("--stage-layers")}


def predict(bin_dir, hardware, model, plan, batch, microbatches):
    # --compiled-buffers: the memory braidc's program holds, as measured.
    args = [str(bin_dir / "braid-plan"), str(model), "--hardware", hardware, "--json",
            "--compiled-buffers", "--mbs", str(batch // plan["dp"])] + flags(plan, microbatches)
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def file_sha256(path, h=None):
    h = h or hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h


# snapshot_runtime's copies: DIR/runtime-<hash> and, while copied, .tmp.
SNAPSHOT = re.compile(r"runtime-[0-9a-f]{16}(\.tmp)?")


def runtime_files(bin_dir):
    """What a CPU program compiles and links against besides braidc's output,
    as (name, path): the runtime's headers (braidc's -I, in the source tree)
    as include/..., and its static libraries (the CUDA ones left out) as
    build/... (the build tree). A --build-dir inside the build tree (ctest's)
    holds copies of them (runtime-<hash>/): those are left out."""
    inc, build = ROOT / "runtime" / "include", bin_dir.parent.resolve()
    return ([("include/" + str(f.relative_to(inc)), f) for f in sorted(inc.rglob("*"))
             if f.is_file()] +
            [("build/" + str(f.relative_to(build)), f)
             for f in sorted(build.rglob("libbraid_rt*.a")) if "cuda" not in f.name and
             not any(SNAPSHOT.fullmatch(part) for part in f.relative_to(build).parts)])


def runtime_hash(files):
    h = hashlib.sha256()
    for rel, f in files:
        h.update(rel.encode() + b"\0")
        file_sha256(f, h)
    return h.hexdigest()[:16]


def toolchain_id(braidc, runtime):
    """A hash of braidc and the runtime (runtime_hash) it compiles programs
    against: a plan built by another is stale."""
    h = file_sha256(braidc)
    h.update(runtime.encode())
    return h.hexdigest()[:16]


# braidc's --cxx for a build: the C++ compiler braidc runs, with the
# runtime's headers and libraries taken from a copy (DIR/runtime-<hash>), so
# that a runtime rebuilt during the build (other work in the tree) neither
# mixes into it nor breaks it. A runtime path it has no copy of is an error.
CXX_WRAPPER = """#!{python}
import os, sys
CXX, INCLUDE, BUILD, COPY = {cxx!r}, {include!r}, {build!r}, {copy!r}
args = []
for a in sys.argv[1:]:
    if a == "-I" + INCLUDE:
        a = "-I" + os.path.join(COPY, "include")
    elif a.startswith(BUILD + "/") and a.endswith(".a"):
        a = os.path.join(COPY, "build", a[len(BUILD) + 1:])
        if not os.path.isfile(a):
            sys.exit("no copy of the runtime's " + a)
    args.append(a)
os.execv(CXX, [CXX] + args)
"""


def snapshot_runtime(build_dir, braidc, model, bin_dir):
    """Copies the runtime into build_dir/runtime-<hash> (once) and writes its
    --cxx wrapper; returns (the wrapper, the runtime's hash)."""
    for attempt in range(10):
        files = runtime_files(bin_dir)
        try:
            rh = runtime_hash(files)
            snap = build_dir / f"runtime-{rh}"
            if not snap.is_dir():
                tmp = build_dir / f"runtime-{rh}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                for rel, f in files:
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, tmp / rel)
                copied = [(rel, tmp / rel) for rel, _ in files]
                if runtime_hash(copied) != rh or runtime_hash(runtime_files(bin_dir)) != rh:
                    raise OSError("the runtime changed while copied")
                os.replace(tmp, snap)
            break
        except OSError as e:  # a library being rebuilt (ninja in the tree)
            print(f"copying the runtime: {e}; again in 30 s", flush=True)
            time.sleep(30)
    else:
        raise SystemExit("the runtime kept changing: no copy of it")
    # The C++ compiler braidc runs (its first word of the command).
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(braidc), str(model), "-o", f"{tmp}/prog", "--dump-dir", tmp],
                       capture_output=True, text=True)
        command = Path(tmp, "compile.sh")
        if not command.is_file():
            raise SystemExit(f"{braidc} wrote no compile.sh (--dump-dir)")
        cxx = command.read_text().split()[0]
    wrapper = snap / "cxx"
    wrapper.write_text(CXX_WRAPPER.format(python=sys.executable, cxx=cxx,
                                          include=str(ROOT / "runtime" / "include"),
                                          build=str(bin_dir.parent.resolve()), copy=str(snap)))
    wrapper.chmod(0o755)
    return wrapper, rh


def plan_dir(build_dir, model_text, plan, microbatches):
    """A plan's folder under --build-dir: keyed by the model and its flags."""
    key = hashlib.sha256((model_text + "\0" + " ".join(flags(plan, microbatches))).encode())
    return build_dir / key.hexdigest()[:16]


def read_built(pdir):
    """A built plan's plan.json, or None when it is not built (its executable
    is renamed into place before plan.json is written)."""
    try:
        info = json.loads((pdir / "plan.json").read_text())
    except (OSError, ValueError):
        return None
    return info if (pdir / "prog").is_file() else None


def build_plan(braidc, model, model_text, pdir, row, microbatches, toolchain, cxx=None):
    """Compiles a plan into pdir (with the C++ compiler cxx, default braidc's);
    returns (ok, seconds, braidc's stderr)."""
    pdir.mkdir(parents=True, exist_ok=True)
    (pdir / "plan.json").unlink(missing_ok=True)
    plan_flags = flags(row["plan"], microbatches)
    start = time.time()
    proc = subprocess.run([str(braidc), str(model), "-o", str(pdir / "prog.tmp")] + plan_flags +
                          ([f"--cxx={cxx}"] if cxx else []), capture_output=True, text=True)
    seconds = time.time() - start
    if proc.returncode != 0:
        (pdir / "failed.txt").write_text(proc.stderr)
        return False, seconds, proc.stderr
    (pdir / "failed.txt").unlink(missing_ok=True)
    os.replace(pdir / "prog.tmp", pdir / "prog")
    (pdir / "plan.json").write_text(json.dumps({
        "name": row["name"], "flags": plan_flags, "toolchain": toolchain,
        "model_sha256": hashlib.sha256(model_text.encode()).hexdigest(),
        "braidc": str(braidc), "built_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "compile_s": round(seconds, 2), "load": load()}, indent=1) + "\n")
    return True, seconds, ""


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else float("nan")


def load():
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def build_order(rows, pick_name):
    """The order --build-only compiles rows (sorted by prediction) in, so
    that a build stopped early leaves a set spanning the ranking: the pick,
    the best plan of each mesh, then the ranking bisected (first, middle,
    quarters, ...)."""
    first = [i for i, r in enumerate(rows) if r["name"] == pick_name]
    meshes = {}
    for i, r in enumerate(rows):
        meshes.setdefault((r["plan"]["dp"], r["plan"]["tp"], r["plan"]["pp"]), i)
    first += [i for i in meshes.values() if i not in first]
    bits = max(1, (len(rows) - 1).bit_length())
    rest = [int(format(k, f"0{bits}b")[::-1], 2) for k in range(1 << bits)]
    return [rows[i] for i in first + [i for i in rest if i < len(rows) and i not in first]]


def build_all(args, bin_dir, model, model_text, rows, microbatches, pick_name):
    """--build-only: compiles every plan of rows into --build-dir with a copy
    of braidc, skipping those already built there by the same toolchain."""
    args.build_dir.mkdir(parents=True, exist_ok=True)
    source = args.braidc or bin_dir / "braidc"
    braidc_hash = file_sha256(source).hexdigest()[:16]
    braidc = args.build_dir / f"braidc-{braidc_hash}"
    if not braidc.exists():
        shutil.copy2(source, braidc.with_suffix(".tmp"))
        os.replace(braidc.with_suffix(".tmp"), braidc)
    rows = build_order(rows, pick_name)
    cxx, runtime = snapshot_runtime(args.build_dir, braidc, model, bin_dir)
    toolchain = toolchain_id(braidc, runtime)
    print(f"building {len(rows)} plans into {args.build_dir} with {braidc.name} and "
          f"{cxx.parent.name} (toolchain {toolchain}); load average {load()}", flush=True)
    built = skipped = 0
    failed = []
    start = time.time()
    for i, r in enumerate(rows):
        pdir = plan_dir(args.build_dir, model_text, r["plan"], microbatches)
        info = read_built(pdir)
        if info and info["toolchain"] == toolchain:
            skipped += 1
            continue
        ok, seconds, err = build_plan(braidc, model, model_text, pdir, r, microbatches,
                                      toolchain, cxx)
        built += ok
        if not ok:
            failed.append(r["name"])
        print(f"[{i + 1}/{len(rows)}] {r['name']}: {'built' if ok else 'FAILED'} in "
              f"{seconds:.1f} s ({pdir.name}); {time.time() - start:.0f} s so far, load "
              f"average {load()}" + ("" if ok else "\n" + err.strip()), flush=True)
    ready = sum(1 for r in rows if (info := read_built(
        plan_dir(args.build_dir, model_text, r["plan"], microbatches))) and
        info["toolchain"] == toolchain)
    print(f"{ready} of {len(rows)} plans built by toolchain {toolchain} in {args.build_dir} "
          f"({built} compiled now in {time.time() - start:.0f} s, {skipped} already built, "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''})", flush=True)
    if failed or ready < len(rows):
        raise SystemExit(1)


def find_built(args, bin_dir, model, model_text, rows, microbatches, pick_name):
    """The run step of --build-dir: the rows whose executables are built
    there (r["program"]); the planner's pick is compiled now if missing.
    Refuses stale plans unless --allow-stale."""
    current = toolchain_id(bin_dir / "braidc", runtime_hash(runtime_files(bin_dir)))
    ready, missing, stale = [], [], {}
    for r in rows:
        pdir = plan_dir(args.build_dir, model_text, r["plan"], microbatches)
        info = read_built(pdir)
        if info is None and r["name"] == pick_name:
            ok, seconds, err = build_plan(bin_dir / "braidc", model, model_text, pdir, r,
                                          microbatches, current)
            if not ok:
                raise SystemExit(f"braidc failed on the planner's pick {r['name']}:\n{err}")
            print(f"the planner's pick {r['name']} was not built: compiled now ({seconds:.1f} s)")
            info = read_built(pdir)
        if info is None:
            missing.append(r["name"])
            continue
        if info["toolchain"] != current:
            stale.setdefault(info["toolchain"], []).append(r["name"])
        r["program"] = pdir / "prog"
        ready.append(r)
    print(f"timing {len(ready)} of {len(rows)} plans: built in {args.build_dir}"
          + (f"; {len(missing)} not built, left out: {', '.join(missing)}" if missing else ""))
    if stale:
        what = "; ".join(f"{len(v)} by toolchain {k}" for k, v in stale.items())
        if not args.allow_stale:
            raise SystemExit(f"{sum(map(len, stale.values()))} of the built plans are stale "
                             f"({what}; the current braidc and runtime are {current}): rebuild "
                             f"them (--build-only) or time them anyway (--allow-stale)")
        print(f"--allow-stale: timing plans built by another braidc or runtime than the current "
              f"build's ({current}): {what}")
    if len(ready) < 2:
        raise SystemExit("fewer than 2 plans built: nothing to rank")
    return ready


# The final phase's orders are drawn from this seed: the same plans run in
# the same orders in every run of the script.
FINAL_SEED = 0
# The main rounds' orders, likewise.
ROUNDS_SEED = 1


def plan_time(runs):
    """A plan's measured time: the median of its runs (interleaved rounds;
    of an even count, the mean of the middle two). A best run over many is
    a lucky round more often the more plans there are."""
    return statistics.median(runs)


def noise_ceiling(rows):
    """How much ranking the measurement supports, from the plans (rows with
    r["runs"], in round order) with 2 runs or more: their medians of the odd
    runs (1st, 3rd, ...) against those of the even runs (its rounds': a plan
    that fails is left out whole; under --rerun-fastest a plan may skip
    rounds, and odd and even runs are then not odd and even rounds), as (plans,
    split-half Spearman, its Spearman-Brown estimate for all rounds
    2 rho / (1 + rho), the square root of that: about the most a perfect
    model's Spearman against these measurements could reach, by the
    attenuation of a correlation with a noisy measure). None with fewer
    than 3 such plans; the last two None when rho is not positive."""
    pairs = [(statistics.median(r["runs"][0::2]), statistics.median(r["runs"][1::2]))
             for r in rows if len(r["runs"]) >= 2]
    if len(pairs) < 3:
        return None
    rho = spearman([a for a, _ in pairs], [b for _, b in pairs])
    if not rho > 0:
        return len(pairs), rho, None, None
    full = 2 * rho / (1 + rho)
    return len(pairs), rho, full, math.sqrt(full)


def max_rounds(first_round_s, runs_in_round, minutes, repeats):
    """How many rounds (the first included) fit in --max-minutes at the
    first round's pace: per run first_round_s / runs_in_round; at least 1,
    at most repeats."""
    if not minutes or runs_in_round == 0 or first_round_s <= 0:
        return repeats
    return max(1, min(repeats, int(60 * minutes / first_round_s)))


def final_plans(measured, pick_name, k):
    """The plans of the final phase: the k fastest by their time in the main
    rounds (r["measured"], the median of its runs), then the planner's pick if it is
    not among them."""
    chosen = sorted(measured, key=lambda r: r["measured"])[:k]
    chosen += [r for r in measured if r["name"] == pick_name and r not in chosen]
    return chosen


def final_rounds(rows, rounds, run, seed=FINAL_SEED):
    """Runs every row once per round, for `rounds` rounds, each round in an
    order drawn from random.Random(seed), so that drift and busy spells hit
    all plans alike. run(row) returns a run's seconds, or None when it
    failed (then the row has no time of that round). Returns ({plan name:
    [seconds, in round order]}, [each round's order of plan names])."""
    rng = random.Random(seed)
    times = {r["name"]: [] for r in rows}
    orders = []
    for _ in range(rounds):
        order = list(rows)
        rng.shuffle(order)
        orders.append([r["name"] for r in order])
        for r in order:
            t = run(r)
            if t is not None:
                times[r["name"]].append(t)
    return times, orders


def final_summary(times, pick_name):
    """The final phase judged: per plan with a run, its runs, median and best;
    the fastest plan by median and by best, and the pick's distance from
    each (its median over the fastest median, its best over the fastest
    best, less 1); the pick's are None when it has no run."""
    plans = {n: {"runs": len(ts), "median": statistics.median(ts), "best": min(ts)}
             for n, ts in times.items() if ts}
    if not plans:
        return None
    by_median = min(plans, key=lambda n: plans[n]["median"])
    by_best = min(plans, key=lambda n: plans[n]["best"])
    pick = plans.get(pick_name)
    return {"plans": plans, "fastest_median": by_median, "fastest_best": by_best,
            "pick_gap_median": (pick["median"] / plans[by_median]["median"] - 1
                                if pick else None),
            "pick_gap_best": pick["best"] / plans[by_best]["best"] - 1 if pick else None}


def final_report(summary, pick_name, rounds):
    """The final phase's lines of the report."""
    plans = summary["plans"]
    lines = [f"final phase: the planner's pick and the fastest measured plans again, "
             f"{rounds} rounds, each in an order from seed {FINAL_SEED}: median and best ms"]
    for n in sorted(plans, key=lambda n: plans[n]["median"]):
        p = plans[n]
        mark = "  <- the planner's pick" if n == pick_name else ""
        lines.append(f"  {p['median'] * 1e3:>8.2f} {p['best'] * 1e3:>8.2f}  ({p['runs']} runs)  "
                     f"{n}{mark}")
    fm, fb = summary["fastest_median"], summary["fastest_best"]
    if summary["pick_gap_median"] is None:
        lines.append(f"final phase: the planner's pick {pick_name} has no run")
    else:
        lines.append(f"final phase: the planner's pick {pick_name} is "
                     f"{100 * summary['pick_gap_median']:.1f}% slower than the fastest by median "
                     f"({fm}, {plans[fm]['median'] * 1e3:.2f} ms) and "
                     f"{100 * summary['pick_gap_best']:.1f}% by best "
                     f"({fb}, {plans[fb]['best'] * 1e3:.2f} ms)")
    return lines


def ceiling_report(ceiling, rows):
    """The noise ceiling's line(s) of the report (noise_ceiling's tuple or
    None), with the predicted-against-measured Spearman over the same plans
    (those with 2 runs or more: the ceiling is theirs)."""
    if ceiling is None:
        return ["noise ceiling: needs 3 plans with 2 runs or more (--repeats 2 or more)"]
    n, rho, full, root = ceiling
    multi = [r for r in rows if len(r["runs"]) >= 2]
    same = spearman([r["predicted"] for r in multi], [plan_time(r["runs"]) for r in multi])
    line = (f"noise ceiling over the {n} plans with 2 runs or more: split-half Spearman (odd "
            f"against even rounds' medians) {rho:.3f}")
    if full is not None:
        line += (f", all rounds {full:.3f} (Spearman-Brown), so a perfect model's Spearman "
                 f"against these medians about {root:.3f} at most")
    return [line, f"  predicted against measured over the same {n} plans: {same:.3f}"]


def write_csv(path, rows):
    """Each plan's prediction and runs in round order (its time measured_s:
    their median; best_s: the best of them); the runs of the final phase in
    final_runs_s (empty for a plan not in it). Files written before had
    measured_s the best run and no best_s; --reuse reads runs_s alone."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["plan", "predicted_s", "measured_s", "runs_s", "predicted_mib", "rss_mib",
                    "final_runs_s", "best_s"])
        for r in rows:
            w.writerow([r["name"], f"{r['predicted']:.6g}", f"{plan_time(r['runs']):.6g}",
                        " ".join(f"{t:.6g}" for t in r["runs"]),
                        " ".join(f"{x:.1f}" for x in r["memory"]),
                        " ".join(f"{x:.1f}" for x in r["rss"]),
                        " ".join(f"{t:.6g}" for t in r.get("final_runs", [])),
                        f"{min(r['runs']):.6g}"])


def time_run(args, bin_dir, r):
    """One run of a measured plan: its seconds per step (each rank's peak
    resident set goes into r["rss"], the largest over the runs), or None
    when it failed: with --build-dir the plan is marked (r["failed"] says
    why) and a long run goes on without it; else the script stops."""
    code, out, err = run_plan(bin_dir, args.ranks, r["program"], args.steps,
                              args.run_timeout if args.build_dir else None)
    t = re.search(r"^summary: \d+ steps, (\S+) ms/step", out, re.M)
    rss = {int(k): int(v) / 1024 for k, v in re.findall(r"^maxrss_kib (\d+) (\d+)", err, re.M)}
    if code != 0 or not t or sorted(rss) != list(range(args.ranks)):
        why = (f"{r['name']} failed (a time and a peak resident set per rank expected; " +
               (f"exit status {code}" if code is not None else
                f"killed after {args.run_timeout} s") + f"):\n{out}\n{err}")
        if not args.build_dir:
            raise SystemExit(why)
        print(why, file=sys.stderr, flush=True)
        r["failed"] = why.splitlines()[0]
        return None
    # A rank's peak over the runs (the runs differ by a few pages).
    r["rss"] = [max(rss[k], r["rss"][k] if k < len(r["rss"]) else 0) for k in range(args.ranks)]
    return float(t.group(1)) / 1e3


def run_plan(bin_dir, ranks, program, steps, timeout):
    """braid-run of a program (the rank wrapper recording peak resident
    sets); (returncode, stdout, stderr), returncode None on the timeout (the
    launcher's whole process group is killed)."""
    proc = subprocess.Popen([str(bin_dir / "braid-run"), "-n", str(ranks), "--threads", "1",
                             sys.executable, "-c", RSS_WRAPPER, str(program), "--steps",
                             str(1 + steps), "--seed", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        # braid-run hands SIGTERM to mpirun, which ends the ranks (each in a
        # process group of its own); its group is killed if that hangs too.
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
        return None, out, err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4, help="the program's batch (one micro-batch over dp)")
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--hardware", default="cpu-local")
    parser.add_argument("--plans", type=int, default=16, help="plans measured (the representative set)")
    parser.add_argument("--all", action="store_true", help="measure every plan")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved rounds: each runs every plan once, in an order of its "
                             "own (a plan's time: the median of its runs; 2 or more give the "
                             "noise ceiling)")
    parser.add_argument("--run-timeout", type=float, default=120,
                        help="with --build-dir: a run of a plan taking longer (s) is killed and "
                             "the plan left out (reported; --check fails)")
    parser.add_argument("--max-minutes", type=float,
                        help="start no round (every plan once) that would end, at the rounds' "
                             "pace so far, after this many minutes of timing; at least one "
                             "round; after the first, says how many rounds fit at its pace "
                             "(a plan's time: the median of the rounds done)")
    parser.add_argument("--rerun-fastest", type=int,
                        help="after the first run of every plan, run only the N fastest so far "
                             "and the planner's pick again (a plan's time: its median run; "
                             "the noise ceiling then covers those plans alone)")
    parser.add_argument("--final", type=int, default=5, metavar="K",
                        help="after the main rounds, run the planner's pick and the K fastest "
                             "measured plans (by the median of their runs) again in --final-rounds rounds, "
                             "each round every one of them once in an order drawn from a fixed "
                             "seed, and report each one's median and best and the pick's "
                             "distance from the fastest by median and by best (beside the main "
                             "rounds' numbers; the runs in the CSV's final_runs_s); 0: no final "
                             "phase (default 5; not limited by --max-minutes: 6 plans x 8 "
                             "rounds on 8 ranks take about 2 minutes here)")
    parser.add_argument("--final-rounds", type=int, default=8, metavar="R",
                        help="rounds of the final phase (default 8)")
    parser.add_argument("--csv", type=Path, help="write each measured plan's prediction and runs")
    parser.add_argument("--reuse", type=Path, action="append",
                        help="a --csv file of an earlier run: its plans' runs are reused, not "
                             "measured again (to predict the same timings with other hardware); "
                             "given more than once (more rounds of the same executables), each "
                             "plan's runs are those of the files in order, its peak resident set "
                             "per rank the largest")
    parser.add_argument("--memory-only", action="store_true",
                        help="run each plan once (2 steps) for its peak resident set per rank; "
                             "no timing")
    parser.add_argument("--build-dir", type=Path,
                        help="keep the plans' executables in this folder: with --build-only, "
                             "compile them (skipping those built there by the same toolchain); "
                             "without, time those built there")
    parser.add_argument("--build-only", action="store_true",
                        help="with --build-dir: compile the plans and stop (no timing)")
    parser.add_argument("--braidc", type=Path,
                        help="with --build-only: build with this braidc (copied into --build-dir "
                             "as braidc-<hash>; e.g. the copy an earlier build left there, to go "
                             "on with it; the runtime is copied as it is now); default: --bin-dir's")
    parser.add_argument("--allow-stale", action="store_true",
                        help="with --build-dir: also time plans built by another braidc or "
                             "runtime than the current build's (named in the output)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--bin-dir", type=Path, default=ROOT / "build" / "bin")
    args = parser.parse_args()
    bin_dir = args.bin_dir
    if args.memory_only:
        if args.reuse:
            raise SystemExit("--memory-only measures; --reuse does not")
        args.repeats, args.steps = 1, 1
    if (args.build_only or args.allow_stale) and not args.build_dir:
        raise SystemExit("--build-only and --allow-stale need --build-dir")
    if args.braidc and not args.build_only:
        raise SystemExit("--braidc is for --build-only")
    if args.build_dir and args.reuse:
        raise SystemExit("--reuse times nothing; --build-dir is for timing")
    m = args.global_batch // args.batch
    if m * args.batch != args.global_batch:
        raise SystemExit("--global-batch must be a multiple of --batch")

    from braid import models
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / "gpt.mlir"
        model_text = models.gpt(layers=args.layers, hidden=args.hidden, heads=args.heads,
                                seq=args.seq, vocab=args.vocab, batch=args.batch)
        model.write_text(model_text)
        # The planner's pick.
        proc = subprocess.run([str(bin_dir / "braidc"), str(model), "--mesh", "auto", "--devices",
                               str(args.ranks), "--global-batch", str(args.global_batch),
                               "--hardware", args.hardware, "--plan-only"],
                              capture_output=True, text=True)
        found = re.search(r"^flags: (.*)$", proc.stdout, re.M)
        if proc.returncode != 0 or not found:
            raise SystemExit(f"braidc --mesh auto failed:\n{proc.stdout}\n{proc.stderr}")
        pick = parse_flags(found.group(1))
        if pick["stage_layers"]:
            stages = pick["pp"] * (pick["chunks"] or 1)
            even = [args.layers // stages + (i < args.layers % stages) for i in range(stages)]
            if pick["stage_layers"] == ",".join(map(str, even)):
                pick["stage_layers"] = None  # the even split, as enumerated

        plans = enumerate_plans(args.ranks, args.layers, args.batch, m, args.heads)
        if all(name(p) != name(pick) for p in plans):
            plans.append(pick)
        reused, reused_rss, reused_final = {}, {}, {}
        for path in args.reuse or []:
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    plan = row["plan"]
                    reused.setdefault(plan, []).extend(float(t) for t in row["runs_s"].split())
                    if row.get("final_runs_s"):  # files written before it have none
                        reused_final.setdefault(plan, []).extend(
                            float(t) for t in row["final_runs_s"].split())
                    if row.get("rss_mib"):  # files written before it have none
                        rss = [float(x) for x in row["rss_mib"].split()]
                        old = reused_rss.get(plan, rss)
                        reused_rss[plan] = [max(a, b) for a, b in zip(old, rss)]
        if args.reuse:
            # Only the plans measured then (and the pick) need a prediction.
            plans = [p for p in plans if name(p) in reused or name(p) == name(pick)]
        rows = []
        # One braid-plan per core at a time (372 plans on 8 ranks).
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            costs = list(pool.map(lambda p: predict(bin_dir, args.hardware, model, p,
                                                    args.batch, m), plans))
        for p, cost in zip(plans, costs):
            if cost is not None:
                rows.append({"plan": p, "name": name(p), "predicted": cost["step_time"],
                             "memory": [rank["total"] / 2**20 for rank in cost["memory"]]})
        if not any(r["name"] == name(pick) for r in rows):
            raise SystemExit(f"braid-plan cannot predict the planner's pick {name(pick)}")
        rows.sort(key=lambda r: r["predicted"])
        print(f"{len(rows)} plans {'of ' + ' + '.join(map(str, args.reuse)) + ' ' if args.reuse else ''}on "
              f"{args.ranks} ranks (predicted with --hardware {args.hardware}); "
              f"the planner's pick: {name(pick)}")

        # The representative set (with --reuse: the plans measured then).
        if args.reuse:
            chosen = [i for i, r in enumerate(rows) if r["name"] in reused]
        elif args.all or args.plans >= len(rows):
            chosen = list(range(len(rows)))
        else:
            chosen = [next(i for i, r in enumerate(rows) if r["name"] == name(pick))]
            meshes = {}
            for i, r in enumerate(rows):
                meshes.setdefault((r["plan"]["dp"], r["plan"]["tp"], r["plan"]["pp"]), i)
            chosen += [i for i in meshes.values() if i not in chosen]
            spread = max(args.plans - len(chosen), 0)
            for k in range(spread):
                i = round(k * (len(rows) - 1) / max(spread - 1, 1))
                while i in chosen and i + 1 < len(rows):
                    i += 1
                if i not in chosen:
                    chosen.append(i)
            chosen.sort()
        measured = [rows[i] for i in chosen]

        if args.build_dir and args.build_only:
            build_all(args, bin_dir, model, model_text, measured, m, name(pick))
            return
        if args.build_dir:
            measured = find_built(args, bin_dir, model, model_text, measured, m, name(pick))

        for i, r in enumerate(measured):
            r["runs"] = list(reused.get(r["name"], []))
            r["rss"] = list(reused_rss.get(r["name"], []))
            if r["runs"] or "program" in r:  # reused, or built in --build-dir
                continue
            prog = tmp / f"plan{i}"
            proc = subprocess.run([str(bin_dir / "braidc"), str(model), "-o", str(prog)] +
                                  flags(r["plan"], m), capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"braidc failed on {r['name']}:\n{proc.stderr}")
            r["program"] = prog
        start = time.time()
        rounds = runs_done = 0
        rng = random.Random(ROUNDS_SEED)
        for repeat in range(args.repeats):
            this_round = [r for r in measured if "program" in r and "failed" not in r]
            if repeat and args.rerun_fastest:
                # Only the fastest so far (and the pick) again: what decides
                # the pick against the fastest.
                fastest = sorted(this_round, key=lambda r: plan_time(r["runs"]))
                fastest = fastest[:args.rerun_fastest]
                this_round = [r for r in this_round if r in fastest or r["name"] == name(pick)]
            elapsed = time.time() - start
            if (repeat and args.max_minutes and runs_done and
                    elapsed * (1 + len(this_round) / runs_done) > 60 * args.max_minutes):
                print(f"--max-minutes {args.max_minutes:g}: {repeat} of {args.repeats} rounds "
                      f"done in {elapsed:.0f} s; the next ({len(this_round)} runs) would end "
                      f"after the limit: stopping", file=sys.stderr, flush=True)
                break
            rounds += 1
            # Interleaved: every plan once per round, each round in an order
            # of its own, so that the machine's drift spreads over all plans.
            rng.shuffle(this_round)
            for r in this_round:
                runs_done += 1
                t = time_run(args, bin_dir, r)
                if t is not None:
                    r["runs"].append(t)
            if repeat == 0 and this_round and not args.reuse:
                first = time.time() - start
                fit = max_rounds(first, len(this_round), args.max_minutes, args.repeats)
                print(f"round 1: {len(this_round)} runs in {first:.0f} s "
                      f"({first / len(this_round):.2f} s a run)" +
                      (f"; --max-minutes {args.max_minutes:g} fits {fit} of the "
                       f"{args.repeats} rounds at this pace" if args.max_minutes else ""),
                      file=sys.stderr, flush=True)
            if args.build_dir:  # a long run: its progress, and what it measured so far
                print(f"run {repeat + 1} of {args.repeats} of {len(this_round)} plans done, "
                      f"{time.time() - start:.0f} s, load average {load()}",
                      file=sys.stderr, flush=True)
                if args.csv:
                    write_csv(args.csv, [r for r in measured if r["runs"] and "failed" not in r])
        failed = [r for r in measured if "failed" in r]
        if failed:
            print(f"{len(failed)} of {len(measured)} plans failed to run, left out: " +
                  ", ".join(r["name"] for r in failed))
            measured = [r for r in measured if "failed" not in r]
        for r in measured:
            r["measured"] = plan_time(r["runs"])
            r["best"] = min(r["runs"])

        # The final phase: the pick and the fastest plans again, interleaved.
        final, final_failed, final_done = None, [], 0
        if args.reuse:
            for r in measured:
                r["final_runs"] = reused_final.get(r["name"], [])
            times = {r["name"]: r["final_runs"] for r in measured if r["final_runs"]}
            final = final_summary(times, name(pick)) if times else None
            final_done = max(map(len, times.values()), default=0)
        elif not args.memory_only and args.final > 0 and args.final_rounds > 0 and measured:
            final_rows = final_plans(measured, name(pick), args.final)
            final_start = time.time()
            times, _ = final_rounds(final_rows, args.final_rounds,
                                    lambda r: None if "failed" in r else time_run(args, bin_dir, r))
            for r in final_rows:
                r["final_runs"] = times[r["name"]]
            final_failed = [r for r in final_rows if "failed" in r]
            final = final_summary(times, name(pick))
            final_done = args.final_rounds
            print(f"final phase: {len(final_rows)} plans x {args.final_rounds} rounds done in "
                  f"{time.time() - final_start:.0f} s, load average {load()}",
                  file=sys.stderr, flush=True)
    load_after = load()

    rho = spearman([r["predicted"] for r in measured], [r["measured"] for r in measured])
    rho_best = spearman([r["predicted"] for r in measured], [r["best"] for r in measured])
    ceiling = noise_ceiling(measured)
    best = min(measured, key=lambda r: r["measured"])
    chosen_row = next((r for r in measured if r["name"] == name(pick)), None)
    print(f"GPT {args.layers} layers, hidden {args.hidden}, {args.heads} heads, sequence "
          f"{args.seq}, vocabulary {args.vocab}; program batch {args.batch}, global batch "
          f"{args.global_batch}; {args.ranks} ranks x 1 thread on {os.cpu_count()} cores; "
          f"{'a plan: the median of its runs in' if not args.reuse else 'runs of ' + ' + '.join(map(str, args.reuse)) + ':'} "
          f"{rounds if not args.reuse else max(len(r['runs']) for r in measured)} rounds"
          f"{'' if args.reuse else f' of {args.steps} steps'}"
          f"{f' (after the first, only the {args.rerun_fastest} fastest and the pick)' if args.rerun_fastest and rounds > 1 else ''}"
          f"; load average {load_before} before, "
          f"{load_after} after")
    if not args.memory_only:
        order = sorted(measured, key=lambda r: r["measured"])
        measured_rank = {id(r): i + 1 for i, r in enumerate(order)}
        print(f"{'#pred':>5} {'#meas':>5} {'predicted ms':>12} {'measured ms':>11} "
              f"{'meas/pred':>9}  plan")
        for i, r in enumerate(measured):
            mark = "  <- the planner's pick" if r is chosen_row else ""
            print(f"{i + 1:>5} {measured_rank[id(r)]:>5} {r['predicted'] * 1e3:>12.2f} "
                  f"{r['measured'] * 1e3:>11.2f} {r['measured'] / r['predicted']:>9.2f}  "
                  f"{r['name']}{mark}")
        print(f"Spearman rank correlation (predicted, measured) over {len(measured)} plans: "
              f"{rho:.3f} (against each plan's median run; against its best run {rho_best:.3f})")
        print("\n".join(ceiling_report(ceiling, measured)))
        if chosen_row is None:
            print(f"the planner's pick {name(pick)} is not among the plans of {args.reuse}")
        else:
            gap = chosen_row["measured"] / best["measured"] - 1
            print(f"the planner's pick {chosen_row['name']}: {chosen_row['measured'] * 1e3:.2f} ms "
                  f"measured, {100 * gap:.1f}% slower than the fastest measured ({best['name']}, "
                  f"{best['measured'] * 1e3:.2f} ms)")
        if final_failed:
            print(f"final phase: {len(final_failed)} plans failed, their runs left out: " +
                  ", ".join(r["name"] for r in final_failed))
        if final:
            print("\n".join(final_report(final, name(pick), final_done)))

    # Memory: each world rank's peak resident set against its pipeline
    # rank's predicted memory (world rank r runs stage r mod pp).
    with_rss = [r for r in measured if r["rss"]]
    if with_rss:
        print(f"memory per rank, MiB: predicted (braid-plan, pipeline rank r mod pp) / measured "
              f"peak resident set, and their ratio")
        within = 0
        ratios = []
        for r in with_rss:
            pp = r["plan"]["pp"]
            pairs = [(r["memory"][k % pp], rss) for k, rss in enumerate(r["rss"])]
            rr = [pred / rss for pred, rss in pairs]
            ratios += rr
            ok = all(abs(x - 1) <= MEMORY_TOLERANCE for x in rr)
            within += ok
            cells = " ".join(f"{pred:.0f}/{rss:.0f}" for pred, rss in pairs)
            print(f"  {min(rr):5.2f}-{max(rr):5.2f}{' ok' if ok else '   '}  {cells:<32}  {r['name']}")
        print(f"memory: {within} of {len(with_rss)} plans predicted within "
              f"{100 * MEMORY_TOLERANCE:.0f}% of the measured peak resident set on every rank; "
              f"predicted / measured over all ranks {min(ratios):.2f}-{max(ratios):.2f} "
              f"(median {sorted(ratios)[len(ratios) // 2]:.2f})")
    if args.csv:
        write_csv(args.csv, measured)
    if args.check:
        bad = [r["name"] for r in measured if not math.isfinite(r["measured"]) or r["measured"] <= 0
               or (not args.reuse and len(r["rss"]) != args.ranks)]
        bad += [r["name"] for r in failed + final_failed]
        # A rank correlation is undefined when every measured time is the
        # same (two plans of a tiny model can tie at 1 step); that is no
        # fault of the model or the script, unlike equal predictions.
        tied = len({r["measured"] for r in measured}) < 2
        if bad or len(measured) < 2 or (math.isnan(rho) and not args.memory_only and not tied):
            raise SystemExit(f"check failed: {bad or 'no correlation'}")

if __name__ == "__main__":
    main()
