"""braid.torch imports torchvision's VisionTransformer (vit_torch.py: image 32,
patch 8, 2 blocks, hidden 32, 10 classes, cross-entropy): braid-eval's loss
equals PyTorch's, AdamW steps equal torch.optim.AdamW's (with
nn.MultiheadAttention as one braid.attention and op by op), the encoder's
nn.Sequential of blocks becomes one braid.layer + braid.repeat, weights
trained in Braid export back under torchvision's keys, nn.MultiheadAttention
with a causal attn_mask is a causal braid.attention, and a convolution that
is not a patch embedding is refused with its module and source line."""

import re
import shutil

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import vit_torch
from braid import safetensors as st
from braid.torch import UnsupportedError, export_state_dict, import_module
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
    """Braid's names for the folded encoder (encoder.layers.i.NAME) go back to torchvision's keys."""
    model, batch = vit_torch.make(seed=2), vit_torch.batch(3)
    _import(tmp_path, model, batch, loss=vit_torch.loss)
    _braid_adamw_losses(tmp_path, braid_opt, braid_eval)  # writes train.mlir
    braid_eval.run(tmp_path / "train.mlir", "--steps", STEPS, "--weights", tmp_path / "w.st",
                   "--inputs", tmp_path / "in.st", "--save-weights", tmp_path / "trained.st")
    trained = {n: st.to_numpy(t) for n, t in st.load(tmp_path / "trained.st").items()}
    assert "encoder.layers.1.mlp.3.weight" in trained
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
    repeats = re.findall(r'braid\.repeat @(\w+)\(.*prefix = "([\w.]+)", count = (\d+) : i64', text)
    assert repeats == [("encoder_layers", "encoder.layers", "2")]
    layer, forward = text.split("func.func")
    assert '"self_attention.in_proj_weight"' in layer and "encoder_layer_" not in text
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
    # braid.repeat names instance i encoder.layers.i.NAME; torchvision's keys say encoder_layer_i.
    names = imported.state_dict_names
    assert set(names.values()) == {n for n, _ in model.named_parameters()}
    assert set(names) == set(imported.weights)
    assert names["encoder.layers.1.mlp.3.weight"] == "encoder.layers.encoder_layer_1.mlp.3.weight"
    assert names["conv_proj.weight"] == "conv_proj.weight"
    state = model.state_dict()
    for braid_name, key in names.items():
        assert torch.equal(imported.weights[braid_name], state[key]), braid_name


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
