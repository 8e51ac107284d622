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
