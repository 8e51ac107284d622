"""Mean factors stay exact: an f32 model evaluated with braid-eval --f64
under dp = 3, dp = 6 or accumulation = 5 equals the serial step within
1e-10 relative (losses at every step and final parameters, leaving out
GPT's key biases: their gradient is zero analytically, so they hold only
rounding noise that AdamW normalises to steps of size lr).

The partitioner's 1/dp and braid-train-step's 1/m are written as divisions
by an integer count, which every float type holds exactly; multiplying by
a reciprocal rounded to f32 (0.333333343) missed 1e-10 by ~3e-8.
"""

import numpy as np
import pytest

from braid import models
from braid import safetensors as st

GPT = dict(layers=2, hidden=32, heads=4, seq=8, vocab=64)
STEP = "optimizer=adamw lr=0.01"
STEPS = 3
RTOL = 1e-10
NOISE_ONLY = "attn.k.bias"


def _losses(stdout):
    return [float(line.split()[3]) for line in stdout.splitlines() if line.startswith("step ")]


def _train(braid_opt, braid_eval, tmp, name, batch, passes, inputs, *extra):
    """Compiles the f32 GPT with `passes` and trains STEPS steps in f64."""
    model = tmp / f"{name}.model.mlir"
    model.write_text(models.gpt(batch=batch, dtype="f32", **GPT))
    program = tmp / f"{name}.mlir"
    program.write_text(braid_opt.run(model, "--braid-autodiff", *passes).stdout)
    weights = tmp / f"{name}.st"
    out = braid_eval.run(program, "--steps", STEPS, "--seed", 2, "--f64", "--inputs", inputs,
                         "--save-weights", weights, *extra).stdout
    losses = _losses(out)
    assert len(losses) == STEPS, out
    return losses, {k: st.to_numpy(t) for k, t in st.load(weights).items()}


def _assert_equal(reference, run, what):
    (ref_losses, ref_weights), (losses, weights) = reference, run
    assert len(losses) == len(ref_losses) == STEPS
    for step, (a, b) in enumerate(zip(losses, ref_losses)):
        assert abs(a - b) <= RTOL * abs(b), f"{what}: step {step} loss {a!r} vs serial {b!r}"
    assert sorted(weights) == sorted(ref_weights)
    for name, ref in ref_weights.items():
        if name.endswith(NOISE_ONLY):
            continue
        error = np.abs(weights[name] - ref).max() / np.abs(ref).max()
        assert error <= RTOL, f"{what}: {name} differs from serial by {error:.3g} relative"


@pytest.fixture
def batches(tmp_path):
    """One batch of 30 sequences, saved whole and as 5 micro-batches of 6."""
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, GPT["vocab"], size=(30, GPT["seq"]), dtype=np.int32)
    labels = rng.integers(0, GPT["vocab"], size=(30, GPT["seq"]), dtype=np.int32)
    whole, micro = tmp_path / "whole.st", tmp_path / "micro.st"
    st.save(whole, {"tokens": st.from_numpy(tokens), "labels": st.from_numpy(labels)})
    st.save(micro, {"tokens": st.from_numpy(tokens.reshape(5, 6, -1)),
                    "labels": st.from_numpy(labels.reshape(5, 6, -1))})
    return whole, micro


@pytest.mark.parametrize("mesh", ["dp=3", "dp=6"])
def test_data_parallel_mean_is_exact(tmp_path, braid_opt, braid_eval, batches, mesh):
    whole, _ = batches
    serial = _train(braid_opt, braid_eval, tmp_path, "serial", 30, [f"--braid-train-step={STEP}"], whole)
    spmd = [f"--braid-train-step={STEP}", f"--braid-shard={mesh}", "--braid-propagate-sharding",
            "--braid-partition"]
    parted = _train(braid_opt, braid_eval, tmp_path, "parted", 30, spmd, whole, "--mesh", "mesh")
    _assert_equal(serial, parted, mesh)


def test_accumulation_mean_is_exact(tmp_path, braid_opt, braid_eval, batches):
    whole, micro = batches
    serial = _train(braid_opt, braid_eval, tmp_path, "serial", 30, [f"--braid-train-step={STEP}"], whole)
    accumulated = _train(braid_opt, braid_eval, tmp_path, "micro", 6,
                         [f"--braid-train-step={STEP} accumulation=5"], micro)
    _assert_equal(serial, accumulated, "accumulation=5")


def test_factors_are_integer_divisions(tmp_path, braid_opt):
    """No rounded reciprocal is left in the partitioned accumulating step."""
    model = tmp_path / "model.mlir"
    model.write_text(models.gpt(batch=6, dtype="f32", **GPT))
    text = braid_opt.run(model, "--braid-autodiff", f"--braid-train-step={STEP} accumulation=5",
                         "--braid-shard=dp=3", "--braid-propagate-sharding", "--braid-partition").stdout
    assert "braid.constant dense<3.000000e+00> : tensor<f32>" in text
    assert "braid.constant dense<5.000000e+00> : tensor<f32>" in text
    for reciprocal in ("0.333333343", "3.33333343e-01", "2.000000e-01", "0.200000003"):
        assert reciprocal not in text
