"""braid-run: launches N ranks through mpirun, passes the program's exit
status on, and refuses bad invocations with a clear message."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import bin_dir

RUNTIME_TESTS = bin_dir().parent / "runtime" / "test"


def _braid_run(*args, timeout=120):
    tool = bin_dir() / "braid-run"
    if not tool.is_file():
        pytest.fail(f"braid-run not found at {tool}: build Braid first", pytrace=False)
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def _compile_gpt(tmp_path, name, *braidc_args):
    """A one-layer GPT compiled by braidc with `braidc_args`."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from braid import models
    model = tmp_path / "gpt.mlir"
    model.write_text(models.gpt(layers=1, hidden=32, heads=4, seq=8, vocab=64, batch=4))
    program = tmp_path / name
    subprocess.run([str(bin_dir() / "braidc"), str(model), *braidc_args, "-o", str(program)],
                   check=True, capture_output=True, timeout=300)
    return program


def _launch(program, *args):
    """braid-run -n 2 PROGRAM ARGS, once rank 0 has printed step 0; and the
    pids of the two ranks."""
    proc = subprocess.Popen([str(bin_dir() / "braid-run"), "-n", "2", str(program), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # rank 0 prints step 0 once both ranks run
        assert line.startswith("step 0"), line
        pids = subprocess.run(["pgrep", "-f", f"^{program}"], capture_output=True,
                              text=True).stdout.split()
        assert len(pids) == 2, pids
    except BaseException:
        proc.kill()
        raise
    return proc, [int(p) for p in pids]


def _rank_of(pid):
    """The MPI rank of process `pid`, from the launcher's environment."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    ranks = [e.split(b"=", 1)[1] for e in environ if e.startswith(b"OMPI_COMM_WORLD_RANK=")]
    assert len(ranks) == 1, f"no OMPI_COMM_WORLD_RANK in the environment of {pid}"
    return int(ranks[0])


def _program(name):
    path = RUNTIME_TESTS / name
    if not path.is_file():
        pytest.fail(f"{path} not built", pytrace=False)
    return path


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_runs_the_ranks(ranks):
    """The mesh test checks, on every rank, that the world has the ranks
    its mesh needs and that every axis group is right: it passes only when
    braid-run really started `ranks` ranks of one job."""
    proc = _braid_run("-n", ranks, _program("braid-rt-mesh_test"))
    assert proc.returncode == 0, proc.stderr


def test_more_ranks_than_cores_oversubscribe():
    proc = _braid_run("-n", (os.cpu_count() or 1) + 2, "--dry-run", _program("braid-rt-mesh_test"))
    assert proc.returncode == 0
    assert "--oversubscribe --mca mpi_yield_when_idle 1" in proc.stdout


def test_a_dead_rank_fails_the_run_quickly():
    """The last of 4 ranks SIGKILLs itself after step 3: braid-run exits
    within 60 s with the killed rank's status (128 + 9), and mpirun names
    that rank and the signal."""
    start = time.monotonic()
    proc = _braid_run("-n", 4, _program("braid-rt-dead_rank_test"), timeout=90)
    assert time.monotonic() - start < 60
    assert proc.returncode == 128 + signal.SIGKILL, (proc.returncode, proc.stderr)
    assert "step 3 done on all ranks" in proc.stdout, proc.stdout
    assert re.search(r"process rank 3 with PID \d+ on node \S+ exited on signal 9 \(Killed\)",
                     proc.stderr), proc.stderr


@pytest.mark.parametrize("args,message", [
    (["-n", "0", "x"], "-n must be at least 1, got 0"),
    (["-n", "2", "/nonexistent/prog"], "no program '/nonexistent/prog'"),
    (["-n", "2", "--hostfile", "/nonexistent/hosts", "/bin/true"], "no host file '/nonexistent/hosts'"),
    (["-n", "2", "--mpirun", "no-such-mpirun", "/bin/true"], "'no-such-mpirun' not found"),
])
def test_bad_invocations(args, message):
    proc = _braid_run(*args)
    assert proc.returncode == 2
    assert f"braid-run: error: {message}" in proc.stderr


def test_not_executable(tmp_path):
    prog = tmp_path / "prog"
    prog.write_text("data")
    proc = _braid_run("-n", "1", prog)
    assert proc.returncode == 2 and "is not executable" in proc.stderr


def test_another_rank_count_than_the_mesh_is_refused_before_launch(tmp_path):
    """A braidc program says how many ranks its mesh needs: -n with another
    count is refused at once, before mpirun starts any rank (each rank
    found the mismatch after MPI started, and -n 100000 did not return)."""
    program = _compile_gpt(tmp_path, "gpt-dp2", "--mesh", "dp=2")
    for ranks in (1, 4, 100000):
        proc = _braid_run("-n", ranks, program, "--steps", "1", timeout=30)
        assert proc.returncode == 2, proc.stderr
        assert (f"braid-run: error: '{program}' runs on 2 ranks (the product of its mesh), "
                f"not -n {ranks}: give -n 2") in proc.stderr
        assert "braid_rt_mesh_create" not in proc.stderr
    proc = _braid_run("-n", 2, program, "--steps", "1")
    assert proc.returncode == 0 and "step 0 loss" in proc.stdout, proc.stderr


def test_killing_a_rank_of_a_compiled_program_ends_the_run(tmp_path):
    """A braidc program training on 2 ranks: SIGKILL one rank mid-run and
    the whole run ends within 60 s with that rank's status (128 + 9),
    mpirun naming that rank and the signal."""
    program = _compile_gpt(tmp_path, "gpt-dp2", "--mesh", "dp=2")
    proc, pids = _launch(program, "--steps", "1000000")
    try:
        victim = _rank_of(pids[-1])
        start = time.monotonic()
        os.kill(pids[-1], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - start < 60
        assert proc.returncode == 128 + signal.SIGKILL, (proc.returncode, err)
        assert re.search(rf"process rank {victim} with PID \d+ on node \S+ exited on signal 9 "
                         r"\(Killed\)", err), err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_stalled_rank_times_out(tmp_path):
    """A braidc program on 2 ranks with --timeout 2: stop one rank (SIGSTOP,
    alive but silent) and the other's next collective times out; the run
    ends non-zero within 60 s with the runtime's error naming the rank and
    the operation."""
    program = _compile_gpt(tmp_path, "gpt-dp2", "--mesh", "dp=2")
    proc, pids = _launch(program, "--steps", "1000000", "--timeout", "2")
    try:
        start = time.monotonic()
        os.kill(pids[-1], signal.SIGSTOP)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
        assert time.monotonic() - start < 60
        assert "TIMEOUT" in err and "rank 0" in err, err
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()


def test_bad_timeout_is_refused(tmp_path):
    program = _compile_gpt(tmp_path, "gpt", "--lr", "0.01")
    proc = subprocess.run([str(program), "--timeout", "soon"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "error: --timeout needs a number of seconds >= 0 (0: none), got 'soon'" in proc.stderr


# Placement: a tiny "program" reports what each rank gets: the cores it may
# run on (the affinity mask mpirun set) and its thread counts.
AFFINITY_PROGRAM = """#!/bin/sh
echo "rank $OMPI_COMM_WORLD_RANK cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2) \
omp ${OMP_NUM_THREADS:-unset} openblas ${OPENBLAS_NUM_THREADS:-unset}"
"""
PLACEMENT = re.compile(r"^braid-run: (\d+) ranks? x (\d+) threads? on (\d+) cores?( \(oversubscribed\))?, "
                       r"(not bound|(?:each )?bound to (\d+) cores?)", re.M)


def _cpus(text):
    """'0-2,5' -> {0, 1, 2, 5}."""
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _placed(tmp_path, *args, env=None):
    """Runs the affinity program under braid-run ARGS: the placement braid-run
    printed (ranks, threads, cores, cores per rank or None when not bound)
    and what each rank saw (rank -> (cpus, OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS)), after checking that the two agree."""
    program = tmp_path / "affinity"
    program.write_text(AFFINITY_PROGRAM)
    program.chmod(0o755)
    tool = bin_dir() / "braid-run"
    proc = subprocess.run([str(tool), *map(str, args), str(program)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    printed = PLACEMENT.findall(proc.stderr)
    assert len(printed) == 1, proc.stderr
    ranks, threads, cores, over, _, per_rank = printed[0]
    ranks, threads, cores = int(ranks), int(threads), int(cores)
    per_rank = int(per_rank) if per_rank else None
    seen = {}
    for m in re.finditer(r"^rank (\d+) cpus (\S+) omp (\S+) openblas (\S+)$", proc.stdout, re.M):
        seen[int(m.group(1))] = (_cpus(m.group(2)), m.group(3), m.group(4))
    assert sorted(seen) == list(range(ranks)), proc.stdout
    mine = os.sched_getaffinity(0)
    assert cores == len(mine)
    assert bool(over) == (ranks * threads > cores), proc.stderr
    for cpus, omp, openblas in seen.values():
        assert (omp, openblas) == (str(threads), str(threads)), (proc.stderr, proc.stdout)
        if per_rank is None:
            assert cpus == mine, (proc.stderr, proc.stdout)
        else:
            assert len(cpus) == per_rank and cpus <= mine, (proc.stderr, proc.stdout)
    if per_rank is not None:  # bound ranks get cores of their own
        union = set().union(*(cpus for cpus, _, _ in seen.values()))
        assert len(union) == ranks * per_rank, proc.stdout
    return (ranks, threads, cores, per_rank), seen


def test_a_lone_rank_gets_every_core(tmp_path):
    """OpenMPI alone binds a one-rank job to one core, so its threads share
    it: braid-run gives the rank every core and that many threads."""
    cores = len(os.sched_getaffinity(0))
    (ranks, threads, _, per_rank), seen = _placed(tmp_path, "-n", 1)
    assert (ranks, threads, per_rank) == (1, cores, None)
    assert seen[0][0] == os.sched_getaffinity(0)


def test_ranks_that_fit_are_bound_to_their_own_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: two ranks oversubscribe it")
    (_, threads, _, per_rank), seen = _placed(tmp_path, "-n", 2)
    assert threads == cores // 2 and per_rank == threads
    assert not seen[0][0] & seen[1][0]


def test_more_ranks_than_cores_are_not_bound(tmp_path):
    cores = len(os.sched_getaffinity(0))
    (_, threads, _, per_rank), _ = _placed(tmp_path, "-n", cores + 2)
    assert (threads, per_rank) == (1, None)


@pytest.mark.parametrize("args,env,expected", [
    (["--threads", 1, "--bind", "core"], {}, (1, 1)),   # one thread on one core
    (["--threads", 1], {}, (1, None)),                  # a lone rank stays unbound
    ([], {"OMP_NUM_THREADS": "1"}, (1, None)),          # the user's thread count
    (["--threads", 3], {"OMP_NUM_THREADS": "1"}, (3, None)),  # --threads wins
])
def test_threads_and_binding_overrides(tmp_path, args, env, expected):
    full_env = dict(os.environ)
    full_env.pop("OMP_NUM_THREADS", None)
    full_env.pop("OPENBLAS_NUM_THREADS", None)
    full_env.update(env)
    (_, threads, _, per_rank), _ = _placed(tmp_path, "-n", 1, *args, env=full_env)
    assert (threads, per_rank) == expected


@pytest.mark.parametrize("args,env,message", [
    (["--threads", "0"], {}, "--threads must be a positive number of threads, got '0'"),
    ([], {"OMP_NUM_THREADS": "many"},
     "$OMP_NUM_THREADS must be a positive number of threads, got 'many'"),
    (["--bind", "core", "--threads", "1000"], {},
     "--bind core needs ranks x threads <= cores, but 1 x 1000 > "),
])
def test_bad_placements_are_refused(args, env, message):
    proc = subprocess.run([str(bin_dir() / "braid-run"), "-n", "1", *args, "/bin/true"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})
    assert proc.returncode == 2
    assert f"braid-run: error: {message}" in proc.stderr


def test_verbose_prints_the_command():
    proc = _braid_run("-n", 1, "--verbose", "/bin/true")
    assert proc.returncode == 0
    assert re.search(r"^braid-run: \S*mpirun -n 1 .*-x OMP_NUM_THREADS=\d+ .*--bind-to none "
                     r"/bin/true$", proc.stderr, re.M), proc.stderr
