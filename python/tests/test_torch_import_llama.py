"""braid.torch imports a Llama-style nn.Module (llama_torch.py, plain PyTorch:
RMSNorm written out, rotary tables, grouped-query attention, SwiGLU):
braid-eval's loss equals PyTorch's and AdamW steps equal torch.optim.AdamW's,
with the composites recognised as braid.rms_norm / braid.rotary /
braid.attention (as the generator's Llama writes them) and op by op; the
blocks become one braid.layer + braid.repeat; an op braid cannot represent is
refused with its module and source line."""

import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import llama_torch
from braid.torch import UnsupportedError, import_module
from conftest import PYTHON_DIR
from test_torch_import import STEPS, TOLERANCE, _braid_adamw_losses, _eval_loss, _import, _torch_adamw_losses

B = 2
CONFIG = llama_torch.CONFIG
V, S = CONFIG["vocab_size"], CONFIG["block_size"]

# import_module options: everything fused; attention op by op; everything op by op.
MODES = {"fused": {}, "no-fuse-attention": dict(fuse_attention=False), "op-by-op": dict(fuse=False)}
# What each mode writes for one block: the counts of these braid ops in the layer.
LAYER_OPS = {"fused": dict(rms_norm=2, rotary=2, attention=1, softmax=0, concat=0, broadcast=0),
             "no-fuse-attention": dict(rms_norm=2, rotary=2, attention=0, softmax=1, concat=0, broadcast=2),
             "op-by-op": dict(rms_norm=0, rotary=0, attention=0, softmax=1, concat=2, broadcast=2)}


def _batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    return {"idx": torch.randint(0, V, (B, S), generator=g), "targets": torch.randint(0, V, (B, S), generator=g)}


def _layer(text: str) -> str:
    return text.split("func.func")[0]


def _count(text: str, op: str) -> int:
    return len(re.findall(rf"= braid\.{op} ", text))


@pytest.mark.parametrize("mode", MODES)
def test_loss_matches_torch(tmp_path, braid_eval, mode):
    model, batch = llama_torch.make(seed=0), _batch()
    text = _import(tmp_path, model, batch, **MODES[mode]).mlir
    layer = _layer(text)
    assert {op: _count(layer, op) for op in LAYER_OPS[mode]} == LAYER_OPS[mode], layer
    expected = model(**batch).item()
    loss = _eval_loss(tmp_path, braid_eval)
    assert abs(loss - expected) <= TOLERANCE * abs(expected), f"braid {loss!r}, torch {expected!r}"


@pytest.mark.parametrize("mode", MODES)
def test_adamw_steps_match_torch(tmp_path, braid_opt, braid_eval, mode):
    model, batch = llama_torch.make(seed=2), _batch(3)
    _import(tmp_path, model, batch, **MODES[mode])
    losses = _braid_adamw_losses(tmp_path, braid_opt, braid_eval)
    expected = _torch_adamw_losses(model, batch)
    assert len(losses) == STEPS
    for step, (a, e) in enumerate(zip(losses, expected)):
        assert abs(a - e) <= TOLERANCE * abs(e), f"step {step}: braid {a!r}, torch {e!r}"
    assert losses[-1] < losses[0] - 0.1, "the loss falls"


def test_blocks_become_the_generators_layer():
    model = llama_torch.make(seed=0, n_layer=3)
    imported = import_module(model, _batch())
    text = imported.mlir
    assert len(re.findall(r"^braid\.layer @", text, re.M)) == 1
    repeats = re.findall(r'braid\.repeat @(\w+)\(.*prefix = "([\w.]+)", count = (\d+) : i64', text)
    assert repeats == [("layers", "layers", "3")]
    assert imported.layers == ["layers"]
    layer = _layer(text)
    # RMSNorm with the module's eps, over the layer-local weight names (instance i: layers.i.NAME).
    assert re.search(r'braid\.rms_norm %x, %attention_norm\.weight \{epsilon = 1\.0e-05 : f64\}', layer)
    assert "layers." not in layer.split("braid.yield")[0]
    # Rotary on q and k in [B, T, H, D] straight from the projections (no transposes), base 10000;
    # grouped-query attention reads the 2 KV heads unrepeated, with 1/sqrt(8).
    assert re.findall(r"braid\.rotary %\w+ \{base = 10000\.0 : f64\} : tensor<(\w+)>", layer) == \
        ["2x16x4x8xf32", "2x16x2x8xf32"]
    assert re.search(r"braid\.attention %rope, %rope_1, %\w+ \{causal, scale = 0\.35355339059327373 : f64\} : "
                     r"\(tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>\)", layer)
    assert "braid.transpose" not in layer and "braid.constant" not in layer
    # SwiGLU: silu(w1 x) * w3 x.
    assert re.search(r"%(\w+) = braid\.silu %(\w+) .*\n.*\n.*\n  %\w+ = braid\.mul %\1, %\w+", layer)
    # Untied head, final RMSNorm; the cos/sin/mask buffers are not parameters.
    assert set(imported.weights) == {n for n, _ in model.named_parameters()}
    assert 'braid.param "output.weight"' in text and 'braid.rms_norm' in text.split("func.func")[1]
    assert not re.search(r'braid\.param "[\w.]*(cos|sin|mask)"', text)


@pytest.mark.parametrize("config, options, rotary, base, kv_heads", [
    (dict(repeat="interleave"), {}, 2, "10000.0", 2),  # repeat_interleave: index_select, constant index
    (dict(repeat="interleave"), dict(fuse=False), 0, None, None),  # ... as reshape, broadcast, reshape
    (dict(repeat="tile"), {}, 2, "10000.0", 4),  # KV head h % 2 is not braid's grouping: k/v stay repeated
    (dict(layout="meta"), {}, 2, "10000.0", 2),  # rotary and repeat before the transpose
    (dict(layout="meta"), dict(fuse=False), 0, None, None),
    (dict(mask_value="min"), {}, 2, "10000.0", 2),  # HF's finfo.min mask: also braid.attention's causal
    (dict(mask_value="min"), dict(fuse=False), 0, None, None),
    (dict(window=4), {}, 2, "10000.0", None),  # not causal attention: softmax op by op, same loss
    (dict(rope_base=500000.0), {}, 2, "500000.0", 2),  # the base is read off the tables
    (dict(rope_scale=2.0), {}, 0, None, 2),  # positions / 2: not braid.rotary's tables, so op by op
    (dict(n_kv_head=1), {}, 2, "10000.0", 1),  # multi-query
], ids=["repeat-interleave", "repeat-interleave-op-by-op", "repeat-tile", "meta-layout", "meta-layout-op-by-op", "finfo-min-mask",
        "finfo-min-mask-op-by-op", "sliding-window",
        "base-500000", "position-scaling", "one-kv-head"])
def test_variants(tmp_path, braid_eval, config, options, rotary, base, kv_heads):
    model, batch = llama_torch.make(seed=5, **config), _batch(6)
    text = _import(tmp_path, model, batch, **options).mlir
    layer = _layer(text)
    assert _count(layer, "rotary") == rotary
    if base:
        assert f"base = {base} : f64" in layer
    assert (_count(layer, "attention") == 1) == bool(kv_heads)
    if kv_heads:  # attention fused, reading grouped KV heads unrepeated
        assert _count(layer, "attention") == 1 and _count(layer, "broadcast") == (kv_heads == 4) * 2
        assert re.search(rf"braid\.attention .*tensor<2x16x4x8xf32>, tensor<2x16x{kv_heads}x8xf32>", layer)
        if rotary and kv_heads != 4:  # the generator's layer: no transposes either
            assert "braid.transpose" not in layer
    expected = model(**batch).item()
    loss = _eval_loss(tmp_path, braid_eval)
    assert abs(loss - expected) <= TOLERANCE * abs(expected), f"braid {loss!r}, torch {expected!r}"


class Cubed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, labels):
        return nn.functional.cross_entropy(self.proj(x).pow(3), labels)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Cubed()

    def forward(self, x, labels):
        return self.inner(x, labels)


def test_unsupported_pow_is_located():
    inputs = {"x": torch.randn(4, 8), "labels": torch.randint(0, 8, (4,))}
    with pytest.raises(UnsupportedError) as info:
        import_module(Outer(), inputs)
    message = str(info.value)
    assert "aten.pow.Tensor_Scalar in module 'inner'" in message and "exponent 3" in message, message
    assert re.search(r"test_torch_import_llama\.py:\d+ \(return nn\.functional\.cross_entropy\(self\.proj\(x\)\.pow\(3\)",
                     message), message


def test_cli_no_fuse(tmp_path):
    batch = f'{{"idx": {{"shape": [2, {S}], "high": {V}}}, "targets": {{"shape": [2, {S}], "high": {V}}}}}'
    env = {"PYTHONPATH": f"{PYTHON_DIR}:{PYTHON_DIR / 'tests'}"}
    texts = {}
    for flags in ([], ["--no-fuse"]):
        out = tmp_path / f"m{len(flags)}.mlir"
        proc = subprocess.run([sys.executable, "-m", "braid.torch", "llama_torch:make", "--batch", batch,
                               "-o", out, *flags], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        texts[tuple(flags)] = _layer(out.read_text())
    assert _count(texts[()], "rms_norm") == 2 and _count(texts[()], "rotary") == 2
    assert _count(texts[("--no-fuse",)], "rms_norm") == 0 and _count(texts[("--no-fuse",)], "rotary") == 0
    assert _count(texts[("--no-fuse",)], "attention") == 0 and _count(texts[("--no-fuse",)], "concat") == 2


def _steps(stdout: str) -> list:
    return [float(line.split()[3]) for line in stdout.splitlines() if line.startswith("step ")]


@pytest.mark.parametrize("mode", ["fused", "op-by-op"])
def test_tensor_parallel_training_equals_serial(tmp_path, braid_opt, braid_eval, mode):
    """braid-shard plans the imported Llama by structure, PyTorch's names and all (attention
    heads and the SwiGLU pairs split, embedding and head vocabulary-parallel), and 3 AdamW steps of
    the dp2 x tp2 partitioned training step on simulated devices (braid-eval --mesh) equal the serial
    ones within 1e-5 relative per step. Multi-rank braidc runs are test_torch_parallel.py's."""
    _import(tmp_path, llama_torch.make(seed=7), _batch(8), **MODES[mode])
    explain = braid_opt.run(tmp_path / "model.mlir", "--braid-shard=dp=1 tp=2 explain=true").stderr
    decided = dict(re.findall(r"remark: '([\w.*]+)': ([\w-]+)", explain))
    assert decided == {
        **{f"layers.*.attention.{p}_proj.weight": "column-parallel" for p in "qkv"},
        "layers.*.attention.o_proj.weight": "row-parallel",
        "layers.*.feed_forward.w1.weight": "column-parallel", "layers.*.feed_forward.w3.weight": "column-parallel",
        "layers.*.feed_forward.w2.weight": "row-parallel",
        "tok_embeddings.weight": "vocabulary-parallel", "output.weight": "vocabulary-parallel",
        **{n: "whole" for n in ("layers.*.attention_norm.weight", "layers.*.ffn_norm.weight", "norm.weight")},
    }, explain
    train, parted = tmp_path / "train.mlir", tmp_path / "parted.mlir"
    train.write_text(braid_opt.run(tmp_path / "model.mlir", "--braid-autodiff",
                                   "--braid-train-step=lr=0.01 clip-norm=1.0 warmup-steps=1 total-steps=3 "
                                   "decay=cosine").stdout)
    parted.write_text(braid_opt.run(train, "--braid-shard=dp=2 tp=2", "--braid-propagate-sharding",
                                    "--braid-partition").stdout)
    assert "braid.all_reduce" in parted.read_text()
    serial = _steps(braid_eval.run(train, "--steps", 3, "--weights", tmp_path / "w.st").stdout)
    spmd = _steps(braid_eval.run(parted, "--steps", 3, "--weights", tmp_path / "w.st", "--mesh", "mesh").stdout)
    assert len(serial) == len(spmd) == 3
    for step, (a, b) in enumerate(zip(serial, spmd)):
        assert abs(a - b) <= TOLERANCE * abs(a), f"step {step}: serial {a!r}, dp2 x tp2 {b!r}"
