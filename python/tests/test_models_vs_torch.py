"""Runs braid.models models in braid-eval and compares loss and logits with PyTorch.

braid-eval initialises the weights from a seed and saves them; the PyTorch
reference (torch_reference.py) loads them by name. The f32 model is evaluated
in f32 on both sides, and with --f64 (torch float64) in f64.
"""

import numpy as np
import pytest
import torch

import torch_reference as ref
from braid import models
from braid import safetensors as st

B, S, V = 2, 16, 128
CONFIGS = {
    "gpt": dict(layers=2, hidden=64, heads=4, seq=S, vocab=V, batch=B),
    "llama": dict(layers=2, hidden=64, heads=4, kv_heads=2, seq=S, vocab=V, batch=B),
}
# Maximum relative error max|braid - torch| / max|torch|.
TOLERANCE = {"f32": 1e-5, "f64": 1e-10}


def _torch_logits(kind, weights, tokens):
    c = CONFIGS[kind]
    if kind == "gpt":
        return ref.gpt_logits(weights, tokens, layers=c["layers"], heads=c["heads"])
    return ref.llama_logits(weights, tokens, layers=c["layers"], heads=c["heads"], kv_heads=c["kv_heads"])


def _save(path, **arrays):
    st.save(path, {name: st.from_numpy(a) for name, a in arrays.items()})
    return path


TORCH_DTYPE = {"F32": torch.float32, "F64": torch.float64}


def _load(path, dtype):
    tensors = st.load(path)
    for name, t in tensors.items():
        assert t.dtype == dtype, f"{path.name}: {name} is {t.dtype}, expected {dtype}"
    return {name: torch.from_numpy(st.to_numpy(t)).to(TORCH_DTYPE[dtype]) for name, t in tensors.items()}


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    assert actual.shape == expected.shape
    actual, expected = actual.double(), expected.double()
    return ((actual - expected).abs().max() / expected.abs().max()).item()


@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("kind", CONFIGS)
def test_model_matches_torch(tmp_path, braid_eval, kind, precision):
    model = tmp_path / "model.mlir"
    model.write_text(getattr(models, kind)(**CONFIGS[kind]))
    rng = np.random.default_rng(11)
    tokens = rng.integers(0, V, size=(B, S), dtype=np.int32)
    labels = rng.integers(0, V, size=(B, S), dtype=np.int32)
    widen = ["--f64"] if precision == "f64" else []
    weights_file = tmp_path / "weights.safetensors"

    braid_eval.run(model, "--entry", "forward", "--seed", 3, *widen,
                   "--inputs", _save(tmp_path / "forward_in.safetensors", tokens=tokens, labels=labels),
                   "--save-weights", weights_file, "--save-outputs", tmp_path / "forward_out.safetensors")
    braid_eval.run(model, "--entry", "logits", *widen, "--weights", weights_file,
                   "--inputs", _save(tmp_path / "logits_in.safetensors", tokens=tokens),
                   "--save-outputs", tmp_path / "logits_out.safetensors")

    dtype = precision.upper()
    saved = _load(weights_file, dtype)
    weights = ref.Weights(saved)
    expected_logits = _torch_logits(kind, weights, torch.from_numpy(tokens))
    assert weights.used == set(saved), "the saved weights are exactly the model's parameters"
    expected_loss = ref.cross_entropy(expected_logits, torch.from_numpy(labels))

    loss = _load(tmp_path / "forward_out.safetensors", dtype)
    logits = _load(tmp_path / "logits_out.safetensors", dtype)
    assert set(loss) == {"result0"} and set(logits) == {"result0"}
    assert loss["result0"].shape == ()
    assert _relative_error(loss["result0"], expected_loss) <= TOLERANCE[precision]
    assert _relative_error(logits["result0"], expected_logits) <= TOLERANCE[precision]


def test_mlp_matches_torch(tmp_path, braid_eval):
    model = tmp_path / "model.mlir"
    model.write_text(models.mlp(layers=3, hidden=32, vocab=10, batch=4))
    rng = np.random.default_rng(12)
    x = rng.normal(size=(4, 32)).astype(np.float32)
    labels = rng.integers(0, 10, size=(4,), dtype=np.int32)
    weights_file = tmp_path / "weights.safetensors"
    braid_eval.run(model, "--entry", "forward", "--seed", 5,
                   "--inputs", _save(tmp_path / "in.safetensors", x=x, labels=labels),
                   "--save-weights", weights_file, "--save-outputs", tmp_path / "out.safetensors")

    saved = _load(weights_file, "F32")
    weights = ref.Weights(saved)
    expected_logits = ref.mlp_logits(weights, torch.from_numpy(x), layers=3)
    assert weights.used == set(saved)
    expected_loss = ref.cross_entropy(expected_logits, torch.from_numpy(labels))
    loss = _load(tmp_path / "out.safetensors", "F32")["result0"]
    assert _relative_error(loss, expected_loss) <= TOLERANCE["f32"]
