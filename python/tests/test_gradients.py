"""Checks braid-autodiff's gradients numerically.

1. Every differentiable op and attribute variant (the cases of
   test_ops_vs_torch.py): loss = sum(op(inputs) * r) with a fixed random r;
   `braid-opt --braid-autodiff=wrt-arguments=true` gives the gradient of every
   float input, which must match central finite differences of the loss
   along random directions (f64, relative error <= 1e-6).
2. GPT, Llama and MLP from braid.models: every parameter gradient matches
   PyTorch autograd on the reference models: max |braid - torch| over a
   tensor, relative to its largest element, at most 1e-10 in f64 and 1e-5 in
   f32. Gradients that vanish analytically (the key bias: softmax ignores a
   shift shared by all keys) hold only rounding noise, so the scale is at
   least 1e-3 of the largest gradient element of the model.
"""

import numpy as np
import pytest
import torch

import torch_reference as ref
from braid import models
from braid import safetensors as st
from braid.ir import Arg, Module, TensorType
from test_ops_vs_torch import CASES, _ELEMENT

FD_TOLERANCE = 1e-6
FD_STEP = 1e-5


def _loss_module(case) -> str:
    """@forward(inputs) -> sum(op(inputs) * r) for the op of `case`."""
    module = Module()
    args = [Arg(name, TensorType(a.shape, _ELEMENT[a.dtype]), case.ranges.get(name))
            for name, a in case.inputs.items()]
    fn = module.func("forward", args)
    y = case.build(fn, *fn.args)
    r = np.random.default_rng(7).normal(size=y.type.shape)
    weighted = fn.mul(y, fn.constant(r.ravel().tolist(), y.type))
    rank = len(y.type.shape)
    loss = fn.reduce("sum", weighted, list(range(rank))) if rank else weighted
    fn.return_(loss)
    return str(module)


def _eval_loss(braid_eval, model, inputs, path):
    st.save(path, {n: st.from_numpy(a) for n, a in inputs.items()})
    out = braid_eval.run(model, "--entry", "forward", "--inputs", path).stdout
    return float(out.split("= ")[-1])


DIFFERENTIABLE = [name for name, case in CASES.items()
                  if any(a.dtype == np.float64 for a in case.inputs.values())]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_op_gradient_matches_finite_differences(tmp_path, braid_opt, braid_eval, name):
    case = CASES[name]
    model = tmp_path / "op.mlir"
    model.write_text(_loss_module(case))
    grad_model = tmp_path / "op_grad.mlir"
    grad_model.write_text(braid_opt.run(model, "--braid-autodiff=wrt-arguments=true").stdout)
    st.save(tmp_path / "in.st", {n: st.from_numpy(a) for n, a in case.inputs.items()})
    braid_eval.run(grad_model, "--entry", "forward_grad", "--inputs", tmp_path / "in.st",
                   "--save-outputs", tmp_path / "grads.st")
    grads = {k: st.to_numpy(t) for k, t in st.load(tmp_path / "grads.st").items()}

    rng = np.random.default_rng(99)
    for arg, value in case.inputs.items():
        if value.dtype != np.float64:
            continue
        analytic = grads[f"arg:{arg}"]
        assert analytic.shape == value.shape
        for _ in range(2):
            direction = rng.normal(size=value.shape)
            shifted = {}
            for sign in (+1, -1):
                inputs = dict(case.inputs)
                inputs[arg] = value + sign * FD_STEP * direction
                shifted[sign] = _eval_loss(braid_eval, model, inputs, tmp_path / "fd.st")
            numeric = (shifted[1] - shifted[-1]) / (2 * FD_STEP)
            exact = float((analytic * direction).sum())
            error = abs(numeric - exact) / max(abs(exact), 1e-3)
            assert error <= FD_TOLERANCE, (
                f"{name}: d/d{arg} along a random direction: autodiff {exact!r}, "
                f"finite differences {numeric!r} (relative error {error:.3g})")


B, S, V = ref.SMALL_BATCH, ref.SMALL_SEQ, ref.SMALL_VOCAB
MODELS = ref.SMALL_MODELS
GRAD_TOLERANCE = {"f32": 1e-5, "f64": 1e-10}
# The loss against PyTorch's (measured: 1.1e-7 in f32, 0 in f64).
LOSS_TOLERANCE = {"f32": 1e-6, "f64": 1e-12}


@pytest.mark.parametrize("precision", ["f32", "f64"])
@pytest.mark.parametrize("kind", MODELS)
def test_model_gradients_match_torch(tmp_path, braid_opt, braid_eval, kind, precision):
    config, logits_fn = MODELS[kind]
    model = tmp_path / "model.mlir"
    model.write_text(getattr(models, kind)(**config))
    grad_model = tmp_path / "model_grad.mlir"
    grad_model.write_text(braid_opt.run(model, "--braid-autodiff").stdout)
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, V, size=(B, S), dtype=np.int32)
    labels = rng.integers(0, V, size=(B, S), dtype=np.int32)
    st.save(tmp_path / "in.st", {"tokens": st.from_numpy(tokens), "labels": st.from_numpy(labels)})
    widen = ["--f64"] if precision == "f64" else []
    out = braid_eval.run(grad_model, "--entry", "forward_grad", "--seed", 1, *widen,
                         "--inputs", tmp_path / "in.st", "--save-weights", tmp_path / "w.st",
                         "--save-outputs", tmp_path / "g.st")
    torch_dtype = torch.float64 if precision == "f64" else torch.float32
    params = {n: torch.from_numpy(st.to_numpy(t)).to(torch_dtype).requires_grad_()
              for n, t in st.load(tmp_path / "w.st").items()}
    loss = ref.cross_entropy(logits_fn(ref.Weights(params), torch.from_numpy(tokens)),
                             torch.from_numpy(labels))
    loss.backward()

    grads = {k: st.to_numpy(t) for k, t in st.load(tmp_path / "g.st").items()}
    braid_loss = float(out.stdout.splitlines()[1].split("= ")[1])
    assert braid_loss == pytest.approx(loss.item(), rel=LOSS_TOLERANCE[precision])
    assert set(grads) == {"result0"} | set(params), "one gradient per parameter"
    floor = 1e-3 * max(p.grad.abs().max().item() for p in params.values())
    for name, p in params.items():
        expected = p.grad.double().numpy()
        error = np.abs(grads[name] - expected).max() / max(np.abs(expected).max(), floor)
        assert error <= GRAD_TOLERANCE[precision], f"{name}: relative error {error:.3g}"


def test_mlp_gradients_match_torch(tmp_path, braid_opt, braid_eval):
    model = tmp_path / "mlp.mlir"
    model.write_text(models.mlp(layers=3, hidden=16, vocab=10, batch=4, dtype="f64"))
    grad_model = tmp_path / "mlp_grad.mlir"
    grad_model.write_text(braid_opt.run(model, "--braid-autodiff").stdout)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 16))
    labels = rng.integers(0, 10, size=(4,), dtype=np.int32)
    st.save(tmp_path / "in.st", {"x": st.from_numpy(x), "labels": st.from_numpy(labels)})
    braid_eval.run(grad_model, "--entry", "forward_grad", "--inputs", tmp_path / "in.st",
                   "--save-weights", tmp_path / "w.st", "--save-outputs", tmp_path / "g.st")
    params = {n: torch.from_numpy(st.to_numpy(t)).requires_grad_()
              for n, t in st.load(tmp_path / "w.st").items()}
    loss = ref.cross_entropy(ref.mlp_logits(ref.Weights(params), torch.from_numpy(x), layers=3),
                             torch.from_numpy(labels))
    loss.backward()
    grads = {k: st.to_numpy(t) for k, t in st.load(tmp_path / "g.st").items()}
    for name, p in params.items():
        error = np.abs(grads[name] - p.grad.numpy()).max() / np.abs(p.grad.numpy()).max()
        assert error <= GRAD_TOLERANCE["f64"], f"{name}: relative error {error:.3g}"
