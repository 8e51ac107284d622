"""braid-schedule-collectives only reorders: training is bit-identical.

The scheduling pass moves collective starts up and waits down; every op
computes what it did, so the training trajectory must not change at all.
Checked in braid-eval on simulated devices, and in executables compiled by
braidc and run by braid-run on 2 (dp=2) and 4 (dp=2 x pp=2) ranks: the
losses of 3 AdamW steps print the same digits, and the trained parameters
and optimizer state are equal bit for bit, with the pass and without it
(async collectives left where they were, and blocking collectives).
The scheduled programs split the layer @block.W at its gradient
reductions' waits, so each instance's reduction is waited for after the
repeat (a stacked future, one pending site per instance in the generated
code). On dp=2 x pp=2, braidc's default starts the reductions of the
gradients the pipeline returns inside it (braid.start_in_pipeline), after
each stage's last W action: the same bytes as with
--schedule-into-pipelines=false, which starts them after the pipeline, and
the losses of the 1-rank program within 1e-5 relative (reduction order).
"""

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from braid import models
from braid import safetensors as st
from conftest import bin_dir

GPT = dict(layers=2, hidden=32, heads=4, seq=8, vocab=64, batch=4)


def _steps(stdout):
    """The 'step N loss X ...' lines, as printed."""
    return [line.split(" ms ")[0] for line in stdout.splitlines() if line.startswith("step ")]


def test_eval_training_is_unchanged(tmp_path, braid_opt, braid_eval):
    """dp2 x tp2 on simulated devices, 3 AdamW steps with clipping."""
    model = tmp_path / "model.mlir"
    model.write_text(models.gpt(**GPT))
    parted = braid_opt.run(model, "--braid-autodiff", "--braid-train-step=lr=0.01 clip-norm=1.0",
                           "--braid-shard=dp=2 tp=2", "--braid-propagate-sharding",
                           "--braid-partition", "--braid-async-collectives").stdout
    runs = []
    for name, passes in [("async", []), ("scheduled", ["--braid-schedule-collectives"])]:
        program = tmp_path / f"{name}.mlir"
        program.write_text(parted)
        if passes:
            program.write_text(braid_opt.run(program, *passes).stdout)
        out = braid_eval.run(program, "--steps", 3, "--seed", 2, "--mesh", "mesh",
                             "--save-weights", tmp_path / f"{name}.st").stdout
        runs.append((_steps(out), {k: st.to_numpy(t) for k, t in st.load(tmp_path / f"{name}.st").items()},
                     program.read_text()))
    (a_loss, a, a_text), (b_loss, b, b_text) = runs
    assert a_text != b_text, "the pass moved nothing"
    assert "@block.W.waited" in b_text, "@block.W was not split at its waits"
    assert len(a_loss) == 3 and a_loss == b_loss
    assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


def _starts_in_pipeline(cpp):
    """The collectives train_step starts inside its pipeline's stage code."""
    step = cpp[cpp.index("void braid_train_step("):]
    inside = step[step.index('braid_rt_program_trace_begin("F0'):step.index("braid_rt_program_pp_wait_all(")]
    return inside.count("braid_rt_program_collective_start_f32(")


def _compile(tmp_path, name, mesh, *flags):
    model = tmp_path / "gpt.mlir"
    if not model.exists():
        model.write_text(models.gpt(**GPT))
    program = tmp_path / name
    mesh_flags = ["--mesh", mesh] if mesh else []
    subprocess.run([str(bin_dir() / "braidc"), str(model), *mesh_flags, "--lr", "3e-3",
                    "--clip-norm", "1.0", *flags, "-o", str(program), "--dump-dir",
                    str(tmp_path / f"{name}.d")],
                   check=True, capture_output=True, timeout=600)
    return program


def _train(tmp_path, program, ranks):
    save = tmp_path / f"{program.name}.ckpt"
    proc = subprocess.run([str(bin_dir() / "braid-run"), "-n", str(ranks), str(program),
                           "--steps", "3", "--seed", "1", "--save", str(save)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    files = {p.relative_to(save): p.read_bytes() for p in sorted(save.rglob("*")) if p.is_file()}
    return _steps(proc.stdout), files


@pytest.mark.parametrize("mesh,ranks,extra", [
    ("dp=2", 2, []),
    ("dp=2,pp=2", 4, ["--microbatches", "2"]),
])
def test_executables_train_identically(tmp_path, mesh, ranks, extra):
    variants = {
        "blocking": [],
        "async": ["--async-collectives", "--schedule-collectives=false"],
        "scheduled": ["--async-collectives", "--schedule-across-repeats"],
        # braidc's default: each layer's bucket is waited for in its body.
        "layer-waits": ["--async-collectives"],
    }
    pipelined = "pp=" in mesh
    if pipelined:
        variants["after-pipeline"] = ["--async-collectives", "--schedule-into-pipelines=false"]
    results = {}
    for name, flags in variants.items():
        program = _compile(tmp_path, name, mesh, *extra, *flags)
        results[name] = _train(tmp_path, program, ranks)
    cpp = {name: (tmp_path / f"{name}.d" / "program.cpp").read_text() for name in variants}
    assert "braid_rt_program_collective_start_f32" in cpp["scheduled"]
    assert "braid_rt_program_progress" in cpp["scheduled"]
    assert cpp["scheduled"] != cpp["async"], "the pass moved nothing"
    # One pending site per instance of the repeat of @block.W (in a
    # pipeline the layer's reductions leave the layer: none is split).
    if not pipelined:
        assert re.search(r"braid_rt_program_pending_t braid_pending_\d+\[\d+\]", cpp["scheduled"])
    for name in ("async", "layer-waits"):
        assert not re.search(r"braid_rt_program_pending_t braid_pending_\d+\[", cpp[name]), name
    if pipelined:
        # Started inside the pipeline: between a stage's first action and
        # the end of the pipeline's transfers; after it with the flag off.
        assert _starts_in_pipeline(cpp["layer-waits"]) > 0
        assert _starts_in_pipeline(cpp["after-pipeline"]) == 0
    losses, files = results["blocking"]
    assert len(losses) == 3, losses
    assert files, "nothing saved"
    if pipelined:
        serial, _ = _train(tmp_path, _compile(tmp_path, "serial", None, *extra), 1)
        assert len(serial) == 3
        for a, b in zip(serial, losses):
            x, y = float(a.split()[3]), float(b.split()[3])
            assert abs(x - y) <= 1e-5 * abs(x), (a, b)
    for name in (n for n in variants if n != "blocking"):
        assert results[name][0] == losses, name
        assert results[name][1].keys() == files.keys(), name
        for path, data in files.items():
            assert results[name][1][path] == data, f"{name}: {path} differs"
