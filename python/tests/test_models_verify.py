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


def _named_stack(instance_names):
    from braid.ir import Arg, Module, TensorType, normal
    m = Module()
    blk = m.layer("block", [("x", TensorType((2, 4), "f32"))])
    w = blk.param("fc.weight", TensorType((4, 4), "f32"), normal(0.1))
    blk.yield_(blk.relu(blk.matmul(blk.args[0], w)))
    f = m.func("forward", [Arg("x", TensorType((2, 4), "f32"))])
    f.return_(f.reduce("sum", f.repeat(blk, [f.args[0]], prefix="layers", count=2, instance_names=instance_names), [0, 1]))
    return str(m)


def test_repeat_instance_names(tmp_path, braid_opt, braid_eval):
    """ir.Body.repeat's instance_names name the instances' parameters (PREFIX.NAME.LOCAL), as braid-eval
    reads and writes them; names that the verifier would refuse are refused in Python."""
    model = tmp_path / "model.mlir"
    model.write_text(_named_stack(["encoder_layer_0", "encoder_layer_1"]))
    assert 'instance_names = ["encoder_layer_0", "encoder_layer_1"]' in braid_opt.run(model).stdout
    braid_eval.run(model, "--save-weights", tmp_path / "w.st")
    assert sorted(st.load(tmp_path / "w.st")) == ["layers.encoder_layer_0.fc.weight",
                                                  "layers.encoder_layer_1.fc.weight"]
    for bad in (["a"], ["a", "a"], ["a.b", "c"], ["a b", "c"], ["", "c"]):
        with pytest.raises(ValueError, match="instance_names"):
            _named_stack(bad)
