"""Checks that every generated model variant parses, verifies and evaluates.

braid-opt parses and verifies each kind in every dtype and id type; braid-eval
runs its @forward, whose loss at initialisation is close to ln(vocab) because
the initial logits are small.
"""

import math

import pytest

from braid import models
from braid import safetensors as st
from braid.ir import FLOAT_TYPES, INT_TYPES

VOCAB = 50
SIZES = {
    "gpt": dict(layers=2, hidden=32, heads=4, seq=8, vocab=VOCAB, batch=2),
    "llama": dict(layers=2, hidden=32, heads=4, kv_heads=2, seq=8, vocab=VOCAB, batch=2),
    "mlp": dict(layers=2, hidden=32, vocab=VOCAB, batch=4),
}
SAFETENSORS_DTYPE = {"f32": "F32", "f64": "F64", "bf16": "BF16", "f16": "F16"}


@pytest.mark.parametrize("id_type", INT_TYPES)
@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("kind", SIZES)
def test_model_verifies_and_evaluates(tmp_path, braid_opt, braid_eval, kind, dtype, id_type):
    model = tmp_path / "model.mlir"
    model.write_text(getattr(models, kind)(**SIZES[kind], dtype=dtype, id_type=id_type))
    assert "braid.repeat" in braid_opt.run(model).stdout

    braid_eval.run(model, "--seed", 1, "--save-outputs", tmp_path / "out.safetensors")
    loss = st.load(tmp_path / "out.safetensors")["result0"]
    assert loss.dtype == SAFETENSORS_DTYPE[dtype] and tuple(loss.shape) == ()
    # The MLP's He-initialised layers give larger logits, hence the wider margin.
    assert abs(loss.values[0] - math.log(VOCAB)) < (0.05 if kind != "mlp" else 0.25) * math.log(VOCAB)
