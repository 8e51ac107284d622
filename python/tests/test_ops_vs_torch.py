"""Evaluates every braid model op with braid-eval in f64 and compares with PyTorch.

Each case is a module whose ``func.func @main`` takes named f64 (or integer id)
inputs and returns one op's result. Inputs come from a seeded generator and
reach braid-eval through --inputs; the output (result0) must match PyTorch to
a relative error max|braid - torch| / max|torch| of 1e-12.
"""

import re
from typing import Callable, Dict, NamedTuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_reference as ref
from braid import safetensors as st
from braid.ir import Arg, Module, TensorType

TOLERANCE = 1e-12
RNG = np.random.default_rng(2024)


def normal(*shape):
    return RNG.normal(size=shape)


def positive(*shape):
    return np.abs(RNG.normal(size=shape)) + 0.5


def ids(n, *shape, dtype=np.int32):
    return RNG.integers(0, n, size=shape, dtype=dtype)


class Case(NamedTuple):
    inputs: Dict[str, np.ndarray]
    build: Callable  # (Func, *argument Values) -> result Value
    reference: Callable  # (*torch tensors) -> torch tensor
    ranges: Dict[str, int] = {}  # braid.range of integer inputs


def unary(op, reference, x=None):
    return Case({"x": normal(2, 3, 4) if x is None else x}, lambda f, x: getattr(f, op)(x), reference)


def reduce(kind, axes, keep_dims, reference):
    return Case({"x": normal(2, 3, 4)}, lambda f, x: f.reduce(kind, x, axes, keep_dims),
                lambda x: reference(x, dim=tuple(axes), keepdim=keep_dims))


CONSTANT = normal(2, 3)

CASES = {
    "matmul": Case({"a": normal(3, 4), "b": normal(4, 5)}, lambda f, a, b: f.matmul(a, b), torch.matmul),
    "matmul_transpose_a": Case({"a": normal(4, 3), "b": normal(4, 5)},
                               lambda f, a, b: f.matmul(a, b, transpose_a=True), lambda a, b: a.T @ b),
    "matmul_transpose_b": Case({"a": normal(3, 4), "b": normal(5, 4)},
                               lambda f, a, b: f.matmul(a, b, transpose_b=True), lambda a, b: a @ b.T),
    "matmul_transpose_both": Case({"a": normal(4, 3), "b": normal(5, 4)},
                                  lambda f, a, b: f.matmul(a, b, transpose_a=True, transpose_b=True),
                                  lambda a, b: a.T @ b.T),
    "matmul_batch_broadcast": Case({"a": normal(2, 1, 3, 4), "b": normal(5, 4, 6)},
                                   lambda f, a, b: f.matmul(a, b), torch.matmul),
    "matmul_batch_transpose_b": Case({"a": normal(2, 3, 4), "b": normal(5, 4)},
                                     lambda f, a, b: f.matmul(a, b, transpose_b=True),
                                     lambda a, b: a @ b.transpose(-1, -2)),
    "add": Case({"a": normal(2, 3, 4), "b": normal(2, 3, 4)}, lambda f, a, b: f.add(a, b), torch.add),
    "add_broadcast": Case({"a": normal(2, 3, 4), "b": normal(3, 1)}, lambda f, a, b: f.add(a, b), torch.add),
    "sub_broadcast": Case({"a": normal(3, 1), "b": normal(2, 1, 4)}, lambda f, a, b: f.sub(a, b), torch.sub),
    "mul_broadcast": Case({"a": normal(2, 3, 4), "b": normal(4)}, lambda f, a, b: f.mul(a, b), torch.mul),
    "div_broadcast": Case({"a": normal(2, 3, 4), "b": positive(1, 3, 1)}, lambda f, a, b: f.div(a, b), torch.div),
    "neg": unary("neg", torch.neg),
    "exp": unary("exp", torch.exp),
    "sqrt": unary("sqrt", torch.sqrt, positive(2, 3, 4)),
    "rsqrt": unary("rsqrt", torch.rsqrt, positive(2, 3, 4)),
    "relu": unary("relu", torch.relu),
    "silu": unary("silu", F.silu),
    "gelu_tanh": Case({"x": normal(2, 3, 4) * 3}, lambda f, x: f.gelu(x, "tanh"),
                      lambda x: F.gelu(x, approximate="tanh")),
    "gelu_exact": Case({"x": normal(2, 3, 4) * 3}, lambda f, x: f.gelu(x, "exact"), F.gelu),
    "softmax_axis1": Case({"x": normal(2, 3, 4)}, lambda f, x: f.softmax(x, 1), lambda x: x.softmax(1)),
    "softmax_last": Case({"x": normal(2, 3, 4) * 5}, lambda f, x: f.softmax(x, -1), lambda x: x.softmax(-1)),
    "layer_norm": Case({"x": normal(2, 3, 8) * 2 + 1, "g": normal(8), "b": normal(8)},
                       lambda f, x, g, b: f.layer_norm(x, g, b, 1e-5),
                       lambda x, g, b: F.layer_norm(x, (8,), g, b, eps=1e-5)),
    "rms_norm": Case({"x": normal(2, 3, 8) * 2, "g": normal(8)}, lambda f, x, g: f.rms_norm(x, g, 1e-6),
                     lambda x, g: ref.rms_norm(x, g, 1e-6)),
    "embedding": Case({"table": normal(10, 4), "ids": ids(10, 2, 3)},
                      lambda f, t, i: f.embedding(t, i), lambda t, i: t[i.long()], {"ids": 10}),
    "embedding_i64_ids": Case({"table": normal(10, 4), "ids": ids(10, 5, dtype=np.int64)},
                              lambda f, t, i: f.embedding(t, i), lambda t, i: t[i], {"ids": 10}),
    "rotary": Case({"x": normal(2, 5, 3, 8)}, lambda f, x: f.rotary(x, 10000.0), lambda x: ref.rotary(x, 10000.0)),
    "rotary_inverse": Case({"x": normal(2, 5, 3, 8)}, lambda f, x: f.rotary(x, 500.0, inverse=True),
                           lambda x: ref.rotary(x, 500.0, inverse=True)),
    "rotary_base_100": Case({"x": normal(1, 9, 2, 4)}, lambda f, x: f.rotary(x, 100.0),
                            lambda x: ref.rotary(x, 100.0)),
    "attention_causal_gqa": Case({"q": normal(2, 6, 4, 8), "k": normal(2, 6, 2, 8), "v": normal(2, 6, 2, 8)},
                                 lambda f, q, k, v: f.attention(q, k, v, causal=True),
                                 lambda q, k, v: ref.attention(q, k, v, causal=True)),
    "attention_gqa_scale": Case({"q": normal(2, 3, 4, 8), "k": normal(2, 5, 1, 8), "v": normal(2, 5, 1, 8)},
                                lambda f, q, k, v: f.attention(q, k, v, scale=0.3),
                                lambda q, k, v: ref.attention(q, k, v, causal=False, scale=0.3)),
    "attention": Case({"q": normal(1, 4, 2, 6), "k": normal(1, 7, 2, 6), "v": normal(1, 7, 2, 6)},
                      lambda f, q, k, v: f.attention(q, k, v),
                      lambda q, k, v: ref.attention(q, k, v, causal=False)),
    "cross_entropy": Case({"logits": normal(2, 3, 7) * 3, "labels": ids(7, 2, 3)},
                          lambda f, x, y: f.cross_entropy(x, y), ref.cross_entropy, {"labels": 7}),
    "reshape": Case({"x": normal(2, 3, 4)}, lambda f, x: f.reshape(x, (6, 4)), lambda x: x.reshape(6, 4)),
    "reshape_split": Case({"x": normal(2, 12)}, lambda f, x: f.reshape(x, (2, 3, 2, 2)),
                          lambda x: x.reshape(2, 3, 2, 2)),
    "transpose": Case({"x": normal(2, 3, 4)}, lambda f, x: f.transpose(x, (2, 0, 1)), lambda x: x.permute(2, 0, 1)),
    "reduce_sum": reduce("sum", [1], False, torch.sum),
    "reduce_sum_keep_dims": reduce("sum", [0, 2], True, torch.sum),
    "reduce_mean": reduce("mean", [0, 2], False, torch.mean),
    "reduce_mean_keep_dims": reduce("mean", [1], True, torch.mean),
    "reduce_max": reduce("max", [2], False, torch.amax),
    "reduce_max_keep_dims": reduce("max", [0, 1], True, torch.amax),
    "broadcast": Case({"x": normal(3, 1)}, lambda f, x: f.broadcast(x, (2, 3, 4)), lambda x: x.expand(2, 3, 4)),
    "slice": Case({"x": normal(4, 5, 6)}, lambda f, x: f.slice(x, [0, 1, 2], [4, 3, 6]),
                  lambda x: x[0:4, 1:3, 2:6]),
    "slice_stride": Case({"x": normal(5, 7)}, lambda f, x: f.slice(x, [1, 0], [5, 7], [2, 3]),
                         lambda x: x[1:5:2, 0:7:3]),
    "concat": Case({"a": normal(2, 3), "b": normal(2, 4), "c": normal(2, 1)},
                   lambda f, a, b, c: f.concat([a, b, c], 1), lambda a, b, c: torch.cat([a, b, c], 1)),
    "concat_axis0": Case({"a": normal(1, 3), "b": normal(2, 3)}, lambda f, a, b: f.concat([a, b], 0),
                         lambda a, b: torch.cat([a, b], 0)),
    "constant": Case({}, lambda f: f.constant(CONSTANT.ravel().tolist(), TensorType((2, 3), "f64")),
                     lambda: torch.from_numpy(CONSTANT)),
}

_ELEMENT = {np.dtype(np.float64): "f64", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


def _module(case: Case) -> str:
    module = Module()
    args = [Arg(name, TensorType(a.shape, _ELEMENT[a.dtype]), case.ranges.get(name))
            for name, a in case.inputs.items()]
    main = module.func("main", args)
    main.return_(case.build(main, *main.args))
    return str(module)


@pytest.mark.parametrize("name", CASES)
def test_op_matches_torch(tmp_path, braid_eval, name):
    case = CASES[name]
    text = _module(case)
    model = tmp_path / "op.mlir"
    model.write_text(text)
    inputs = []
    if case.inputs:
        st.save(tmp_path / "in.safetensors", {n: st.from_numpy(a) for n, a in case.inputs.items()})
        inputs = ["--inputs", tmp_path / "in.safetensors"]
    braid_eval.run(model, "--entry", "main", *inputs, "--save-outputs", tmp_path / "out.safetensors")

    outputs = st.load(tmp_path / "out.safetensors")
    assert set(outputs) == {"result0"}
    assert outputs["result0"].dtype == "F64"
    actual = st.to_numpy(outputs["result0"])
    expected = case.reference(*(torch.from_numpy(a) for a in case.inputs.values())).numpy()
    assert actual.shape == expected.shape, text
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    assert error <= TOLERANCE, f"relative error {error:.3g} > {TOLERANCE}\n{text}"


def test_cases_cover_every_op():
    """Every op of docs/model-representation.md has a case (structural ops are in the model tests)."""
    ops = {re.sub(r"[{ ].*", "", line.split("braid.", 1)[1])
           for name in CASES for line in _module(CASES[name]).splitlines() if " = braid." in line}
    assert ops == {"matmul", "add", "sub", "mul", "div", "neg", "exp", "sqrt", "rsqrt", "gelu", "relu", "silu",
                   "softmax", "layer_norm", "rms_norm", "embedding", "rotary", "attention", "cross_entropy",
                   "reshape", "transpose", "reduce", "broadcast", "slice", "concat", "constant"}
