"""braid-eval --mesh: per-device programs on simulated devices.

A hand-partitioned Megatron MLP (dp = 2 x tp = 2) must equal the serial
program (f64, 1e-12 relative), and every collective must move data as
documented, checked against numpy on the same input.
"""

from pathlib import Path

import numpy as np
import pytest

from braid import safetensors as st

MODEL = Path(__file__).resolve().parents[2] / "test" / "Eval" / "Inputs" / "megatron-mlp.mlir"


def _run(braid_eval, tmp_path, entry, *extra):
    out = tmp_path / f"{entry}.st"
    braid_eval.run(MODEL, "--entry", entry, "--seed", 3, "--inputs", tmp_path / "x.st",
                   "--save-outputs", out, *extra)
    return {k: st.to_numpy(t) for k, t in st.load(out).items()}


@pytest.fixture
def x(tmp_path):
    value = np.random.default_rng(4).normal(size=(4, 8))
    st.save(tmp_path / "x.st", {"x": st.from_numpy(value)})
    return value


def test_megatron_mlp_equals_serial(tmp_path, braid_eval, x):
    serial = _run(braid_eval, tmp_path, "mlp")["result0"]
    spmd = _run(braid_eval, tmp_path, "mlp_spmd", "--mesh", "mesh")["result0"]
    partial = _run(braid_eval, tmp_path, "mlp_partial", "--mesh", "mesh")["result0"]
    assert spmd.shape == serial.shape == (4, 8)
    scale = np.abs(serial).max()
    assert np.abs(spmd - serial).max() <= 1e-12 * scale
    assert np.abs(partial - serial).max() <= 1e-12 * scale


def test_collectives_move_data_as_documented(tmp_path, braid_eval, x):
    out = _run(braid_eval, tmp_path, "collectives", "--mesh", "mesh")
    np.testing.assert_array_equal(out["result0"], x)          # all_gather
    np.testing.assert_array_equal(out["result1"], 2 * x)      # reduce_scatter of 2 replicas
    np.testing.assert_array_equal(out["result2"], x)          # all_to_all: rows -> columns
    np.testing.assert_array_equal(out["result3"], x[2:4])     # broadcast_from tp root 1
    np.testing.assert_array_equal(out["result4"], x)          # max over dp replicas
