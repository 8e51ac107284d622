"""braid.torch imports torchvision's VisionTransformer (vit_torch.py: image 32,
patch 8, 2 blocks, hidden 32, 10 classes, cross-entropy): braid-eval's loss
equals PyTorch's, AdamW steps equal torch.optim.AdamW's (with
nn.MultiheadAttention as one braid.attention and op by op), the encoder's
nn.Sequential of blocks becomes one braid.layer + braid.repeat whose
instance_names keep torchvision's child names (the weights file is keyed by
state-dict keys), weights trained by braid-eval, and a checkpoint trained by
a braidc program on 2 ranks, load back under those keys, nn.MultiheadAttention
with a causal attn_mask is a causal braid.attention, and a convolution that
is not a patch embedding is refused with its module and source line."""

import re
import shutil
import subprocess

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import vit_torch
from braid import safetensors as st
from braid.torch import UnsupportedError, export_state_dict, import_module, read_checkpoint, start_checkpoint
from test_torch_import import STEPS, TOLERANCE, _braid_adamw_losses, _eval_loss, _import, _torch_adamw_losses

pytest.importorskip("torchvision")


def _close(a, e):
    return abs(a - e) <= TOLERANCE * abs(e)


@pytest.mark.parametrize("fuse", [True, False], ids=["attention", "op-by-op"])
def test_loss_matches_torch(tmp_path, braid_eval, fuse):
    model, batch = vit_torch.make(seed=0), vit_torch.batch()
    text = _import(tmp_path, model, batch, fuse, loss=vit_torch.loss).mlir
    assert ("braid.attention" in text) == fuse
    expected = vit_torch.loss(model(batch["x"]), batch).item()
    loss = _eval_loss(tmp_path, braid_eval)
    assert _close(loss, expected), f"braid {loss!r}, torch {expected!r}"


@pytest.mark.parametrize("fuse", [True, False], ids=["attention", "op-by-op"])
def test_adamw_steps_match_torch(tmp_path, braid_opt, braid_eval, fuse):
    model, batch = vit_torch.make(seed=2), vit_torch.batch(3)
    _import(tmp_path, model, batch, fuse, loss=vit_torch.loss)
    losses = _braid_adamw_losses(tmp_path, braid_opt, braid_eval)
    expected = _torch_adamw_losses(model, {"x": batch["x"]}, lambda out: vit_torch.loss(out, batch))
    assert len(losses) == STEPS
    for step, (a, e) in enumerate(zip(losses, expected)):
        assert _close(a, e), f"step {step}: braid {a!r}, torch {e!r}"
    assert losses[-1] < losses[0] - 0.1, "the loss falls"


def test_trained_weights_load_back(tmp_path, braid_opt, braid_eval):
    """Braid's names for the folded encoder are torchvision's keys (encoder.layers.encoder_layer_i.NAME)."""
    model, batch = vit_torch.make(seed=2), vit_torch.batch(3)
    _import(tmp_path, model, batch, loss=vit_torch.loss)
    _braid_adamw_losses(tmp_path, braid_opt, braid_eval)  # writes train.mlir
    braid_eval.run(tmp_path / "train.mlir", "--steps", STEPS, "--weights", tmp_path / "w.st",
                   "--inputs", tmp_path / "in.st", "--save-weights", tmp_path / "trained.st")
    trained = {n: st.to_numpy(t) for n, t in st.load(tmp_path / "trained.st").items()}
    assert set(trained) == {n for n, _ in model.named_parameters()}
    fresh = vit_torch.make(seed=7)
    fresh.load_state_dict(export_state_dict(trained, fresh))  # strict: every key, every shape
    shutil.copy(tmp_path / "trained.st", tmp_path / "w.st")
    loss = _eval_loss(tmp_path, braid_eval)
    expected = vit_torch.loss(fresh(batch["x"]), batch).item()
    assert _close(loss, expected), f"braid {loss!r}, torch {expected!r}"
    assert abs(expected - vit_torch.loss(model(batch["x"]), batch).item()) > 0.1, "the weights were trained"


def test_encoder_layers_become_one_repeated_layer():
    model = vit_torch.make(seed=0)
    imported = import_module(model, vit_torch.batch(size=2), loss=vit_torch.loss)
    text = imported.mlir
    assert imported.layers == ["encoder.layers"]
    assert len(re.findall(r"^braid\.layer @", text, re.M)) == 1
    repeats = re.findall(r'braid\.repeat @(\w+)\(.*prefix = "([\w.]+)", count = (\d+) : i64, '
                         r'instance_names = \[(.*)\]', text)
    assert repeats == [("encoder_layers", "encoder.layers", "2", '"encoder_layer_0", "encoder_layer_1"')]
    layer, forward = text.split("func.func")
    assert '"self_attention.in_proj_weight"' in layer and "encoder_layer_" not in layer
    # nn.MultiheadAttention: one non-causal braid.attention over [B, T, H, D] with 1/sqrt(16).
    assert re.search(r"braid\.attention %\w+, %\w+, %\w+ \{scale = 0\.25 : f64\} : "
                     r"\(tensor<2x17x2x16xf32>", layer), layer
    assert "braid.softmax" not in layer and "braid.attention" not in forward
    # The patch embedding: one matmul of the [B, 16 patches, 3*8*8] patches with the kernel, no transpose back.
    assert re.search(r"braid\.matmul %patches, %\w+ \{transpose_b\} : \(tensor<2x16x192xf32>, "
                     r"tensor<32x192xf32>\) -> tensor<2x16x32xf32>", forward), forward
    assert len(re.findall(r"braid\.transpose", forward)) == 1
    # The class token: broadcast over the batch and concatenated before the patches.
    assert re.search(r"braid\.concat %\w+, %\w+ \{axis = 1 : i64\} : \(tensor<2x1x32xf32>, tensor<2x16x32xf32>\)",
                     forward)



def test_weights_file_has_state_dict_keys(tmp_path, braid_eval):
    """The weights file is keyed by model.state_dict()'s keys (the ViT has no tied aliases or buffers),
    and braid-eval reads every one of them under that name: it writes back the same keys."""
    model, batch = vit_torch.make(seed=0), vit_torch.batch(size=2)
    _import(tmp_path, model, batch, loss=vit_torch.loss)
    state = model.state_dict()
    weights = {n: st.to_numpy(t) for n, t in st.load(tmp_path / "w.st").items()}
    assert set(weights) == set(state) and "encoder.layers.encoder_layer_1.mlp.3.weight" in weights
    for key, value in weights.items():
        assert torch.equal(torch.from_numpy(value), state[key]), key
    braid_eval.run(tmp_path / "model.mlir", "--weights", tmp_path / "w.st", "--inputs", tmp_path / "in.st",
                   "--save-weights", tmp_path / "used.st")
    assert set(st.load(tmp_path / "used.st")) == set(state)


def test_braidc_checkpoint_loads_by_state_dict_names(tmp_path, braid_eval):
    """A checkpoint that a braidc program writes after training the ViT on 2 ranks (dp=2) from the
    module's weights is keyed by state-dict names: its parameters load into a fresh module with
    load_state_dict (strict), no renaming, and give braid-eval's loss on those weights (1e-5); a
    1-rank program resumes from it."""
    model, batch = vit_torch.make(seed=2), vit_torch.batch(size=4)
    imported = _import(tmp_path, model, batch, loss=vit_torch.loss)
    start_checkpoint(imported.weights, tmp_path / "start")
    bin_dir = braid_eval.path.parent
    _run_tool(bin_dir / "braidc", tmp_path / "model.mlir", "--mesh", "dp=2", "--lr", "3e-3", "-o", tmp_path / "prog")
    _run_tool(bin_dir / "braid-run", "-n", 2, tmp_path / "prog", "--resume", tmp_path / "start", "--steps", 3,
              "--save", tmp_path / "ckpt")
    tensors, metadata = read_checkpoint(tmp_path / "ckpt")
    assert metadata["step"] == "3"
    params = {n: t for n, t in tensors.items() if not n.endswith((".adamw.m", ".adamw.v"))}
    assert set(params) == set(model.state_dict())
    fresh = vit_torch.make(seed=7)
    fresh.load_state_dict({n: torch.from_numpy(t) for n, t in params.items()})  # strict
    st.save(tmp_path / "w.st", {n: st.from_numpy(t) for n, t in params.items()})
    loss = _eval_loss(tmp_path, braid_eval)
    expected = vit_torch.loss(fresh(batch["x"]), batch).item()
    print(f"dp=2 checkpoint: torch {expected!r}, braid {loss!r}, relative {abs(loss - expected) / abs(expected):.2g}")
    assert _close(loss, expected), f"braid {loss!r}, torch {expected!r}"
    assert abs(expected - vit_torch.loss(model(batch["x"]), batch).item()) > 1e-3, "the weights were trained"
    # Another mesh resumes it: a 1-rank program finds every parameter under the same names.
    _run_tool(bin_dir / "braidc", tmp_path / "model.mlir", "--train", "--lr", "3e-3", "-o", tmp_path / "serial")
    _run_tool(tmp_path / "serial", "--resume", tmp_path / "ckpt", "--steps", 1, "--save", tmp_path / "ckpt1")
    resumed, metadata = read_checkpoint(tmp_path / "ckpt1")
    assert metadata["step"] == "4" and set(resumed) == set(tensors)


def _run_tool(*command):
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(map(str, command))}: status {proc.returncode}\n{proc.stderr}"
    return proc


class CausalMHA(nn.Module):
    """nn.MultiheadAttention with an additive causal mask (F.multi_head_attention_forward's baddbmm)."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 5)
        self.register_buffer("mask", torch.ones(6, 6, dtype=torch.bool).triu(1))

    def forward(self, x, labels):
        h, _ = self.attn(x, x, x, attn_mask=self.mask, need_weights=False)
        return F.cross_entropy(self.head(h).reshape(-1, 5), labels.reshape(-1))


def test_causal_mask_is_causal_attention(tmp_path, braid_eval):
    torch.manual_seed(6)
    model = CausalMHA()
    with torch.no_grad():
        model.attn.in_proj_weight.normal_(0.0, 0.5)
    batch = {"x": torch.randn(2, 6, 16), "labels": torch.randint(0, 5, (2, 6))}
    text = _import(tmp_path, model, batch).mlir
    assert re.search(r"braid\.attention %\w+, %\w+, %\w+ \{causal, scale = 0\.35355339059327\d* : f64\}", text), text
    expected = model(**batch).item()
    loss = _eval_loss(tmp_path, braid_eval)
    assert _close(loss, expected), f"braid {loss!r}, torch {expected!r}"


class Overlapping(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, kernel_size=4, stride=2))
        self.head = nn.Linear(8, 5)

    def forward(self, x, labels):
        return F.cross_entropy(self.head(self.stem(x).mean((2, 3))), labels)


def test_convolution_other_than_patches_is_refused():
    inputs = {"x": torch.randn(2, 3, 16, 16), "labels": torch.randint(0, 5, (2,))}
    with pytest.raises(UnsupportedError) as info:
        import_module(Overlapping(), inputs)
    message = str(info.value)
    assert "aten.convolution" in message and "stride [2, 2], kernel [4, 4]" in message, message
    assert "module 'stem.0'" in message and "patch embeddings (stride = kernel" in message, message
    assert re.search(r"test_torch_import_vit\.py:\d+ \(return F\.cross_entropy\(self\.head\(self\.stem\(x\)",
                     message), message
