#!/usr/bin/python3
"""A test-only mpirun for `braid-run --mpirun`: runs the real mpirun and
injects faults into the job, one launch (attempt) at a time.

Environment:
  FAULT_STATE   a file counting the launches so far (created if missing)
  FAULT_KILLS   launches 1 .. FAULT_KILLS SIGKILL one random rank at a
                random step (default 0)
  FAULT_SEED    the seed of those choices (default 0)
  FAULT_SIGNAL  KILL (default), or STOP: the rank stays alive but silent,
                so the others' next collective times out
  FAULT_KILL_BEFORE_COMPLETE
                launch 1 only: sets BRAID_TEST_KILL_BEFORE_COMPLETE to this
                step (rank 0 dies after that step's checkpoint file, before
                its COMPLETE mark; docs/checkpoints.md)

The victim's step is drawn from the steps this launch runs (its --resume
directory's step to the end), at least --save-every after the start, so a
checkpoint of this launch exists, and 6 before the end, so the job is still
running when the kill lands. Rank 0's "step S" lines pass through; the kill
happens when the chosen step's line arrives. Each kill is logged to stderr.
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys


def value(args, name, default=None):
    for i in range(len(args) - 1, 0, -1):
        if args[i - 1] == name:
            return args[i]
    return default


def rank_pid(program, rank):
    """The pid of the process running `program` as MPI rank `rank`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].decode() != program:
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(entry)
    return None


def main(argv):
    state = os.environ["FAULT_STATE"]
    launch = 1
    if os.path.exists(state):
        launch = int(open(state).read()) + 1
    with open(state, "w") as f:
        f.write(str(launch))
    env = dict(os.environ)
    env.pop("BRAID_TEST_KILL_BEFORE_COMPLETE", None)
    if launch == 1 and os.environ.get("FAULT_KILL_BEFORE_COMPLETE"):
        env["BRAID_TEST_KILL_BEFORE_COMPLETE"] = os.environ["FAULT_KILL_BEFORE_COMPLETE"]
    mpirun = shutil.which("mpirun")
    kill = launch <= int(os.environ.get("FAULT_KILLS", "0"))
    if not kill:
        os.execve(mpirun, [mpirun, *argv], env)

    program = next(a for a in argv if a.startswith("/") and os.access(a, os.X_OK))
    args = argv[argv.index(program) + 1:]
    ranks = int(value(argv, "-n"))
    resume = value(args, "--resume")
    start = int(re.search(r"step-(\d+)$", resume).group(1)) if resume else 0
    end = start + int(value(args, "--steps", "1"))
    rng = random.Random(int(os.environ.get("FAULT_SEED", "0")) * 1000 + launch)
    first = start + int(value(args, "--save-every", "1"))
    if first > end - 6:
        sys.exit(f"fault-mpirun: launch {launch}: steps {start}..{end} leave no room "
                 "for a kill")
    # Soon after the launch's first checkpoint: the kill lands a few steps
    # after the line that triggers it (mpirun forwards output late under
    # load), and a late kill must still leave room for the next launch's.
    step = rng.randint(first, min(end - 6, first + 3))
    victim = rng.randrange(ranks)

    proc = subprocess.Popen([mpirun, *argv], stdout=subprocess.PIPE, env=env, text=True)
    sig = signal.Signals["SIG" + os.environ.get("FAULT_SIGNAL", "KILL")]
    killed = False
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        match = re.match(r"step (\d+) ", line)
        if not killed and match and int(match.group(1)) >= step:
            pid = rank_pid(program, victim)
            if pid:
                print(f"fault-mpirun: launch {launch}: {sig.name} rank {victim} (pid {pid}) "
                      f"at step {match.group(1)}", file=sys.stderr, flush=True)
                os.kill(pid, sig)
                killed = True
    status = proc.wait()
    if not killed:
        print(f"fault-mpirun: launch {launch}: the job ended before step {step}",
              file=sys.stderr)
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main(sys.argv[1:])
