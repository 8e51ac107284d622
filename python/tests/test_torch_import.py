"""braid.torch imports a nanoGPT-style nn.Module (nanogpt.py, plain PyTorch):
braid-eval's loss equals PyTorch's, AdamW steps equal torch.optim.AdamW's,
the ModuleList of blocks becomes one braid.layer + braid.repeat, and an op
braid cannot represent is refused with its module and source line."""

import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import nanogpt
from braid import safetensors as st
from braid.torch import UnsupportedError, import_module
from conftest import PYTHON_DIR
from test_training import ADAMW, _losses, _train_step_options, schedule

B, S, V, LAYERS = 2, 16, 128, 3
CONFIG = dict(vocab_size=V, block_size=S, n_layer=LAYERS, n_head=4, n_embd=32)
STEPS = 5
TOLERANCE = 1e-5  # relative, f32


def _batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    return {"idx": torch.randint(0, V, (B, S), generator=g), "targets": torch.randint(0, V, (B, S), generator=g)}


def _import(tmp_path, model, batch, fuse_attention=True, loss=None, **options):
    """Imports model and writes model.mlir, w.st (its weights) and in.st (batch) into tmp_path."""
    imported = import_module(model, batch, fuse_attention=fuse_attention, loss=loss, **options)
    (tmp_path / "model.mlir").write_text(imported.mlir)
    imported.save_weights(tmp_path / "w.st")
    st.save(tmp_path / "in.st", {n: st.from_numpy(t.numpy()) for n, t in batch.items()})
    return imported


def _eval_loss(tmp_path, braid_eval) -> float:
    """braid-eval's loss of the model _import wrote to tmp_path, on its weights and batch."""
    braid_eval.run(tmp_path / "model.mlir", "--weights", tmp_path / "w.st", "--inputs", tmp_path / "in.st",
                   "--save-outputs", tmp_path / "out.st")
    return float(st.to_numpy(st.load(tmp_path / "out.st")["result0"]))


def _braid_adamw_losses(tmp_path, braid_opt, braid_eval, steps=STEPS) -> list:
    """The losses of `steps` braid AdamW steps (ADAMW, cosine schedule) on what _import wrote."""
    options = _train_step_options(dict(ADAMW, total=steps))
    train = tmp_path / "train.mlir"
    train.write_text(braid_opt.run(tmp_path / "model.mlir", "--braid-autodiff",
                                   f"--braid-train-step={options}").stdout)
    return _losses(braid_eval.run(train, "--steps", steps, "--weights", tmp_path / "w.st",
                                  "--inputs", tmp_path / "in.st").stdout)


def _torch_adamw_losses(model, batch, loss_of=lambda out: out, steps=STEPS) -> list:
    """The same steps with torch.optim.AdamW (clipping, LambdaLR schedule); loss_of picks the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: schedule(t, 1.0, ADAMW["min_lr"] / ADAMW["lr"], ADAMW["warmup"], steps, "cosine"))
    expected = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(model(**batch))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), ADAMW["clip"])
        opt.step()
        sched.step()
        expected.append(loss.item())
    return expected


@pytest.mark.parametrize("fuse", [True, False], ids=["attention", "op-by-op"])
def test_loss_matches_torch(tmp_path, braid_eval, fuse):
    model, batch = nanogpt.make(seed=0, **CONFIG), _batch()
    text = _import(tmp_path, model, batch, fuse).mlir
    assert ("braid.attention" in text) == fuse
    expected = model(**batch)[1].item()
    loss = _eval_loss(tmp_path, braid_eval)
    assert abs(loss - expected) <= TOLERANCE * abs(expected), f"braid {loss!r}, torch {expected!r}"


@pytest.mark.parametrize("fuse", [True, False], ids=["attention", "op-by-op"])
def test_adamw_steps_match_torch(tmp_path, braid_opt, braid_eval, fuse):
    model, batch = nanogpt.make(seed=2, **CONFIG), _batch(3)
    _import(tmp_path, model, batch, fuse)
    losses = _braid_adamw_losses(tmp_path, braid_opt, braid_eval)
    expected = _torch_adamw_losses(model, batch, lambda out: out[1])
    assert len(losses) == STEPS
    for step, (a, e) in enumerate(zip(losses, expected)):
        assert abs(a - e) <= TOLERANCE * abs(e), f"step {step}: braid {a!r}, torch {e!r}"
    assert losses[-1] < losses[0] - 0.1, "the loss falls"


def test_blocks_become_one_repeated_layer(tmp_path):
    model = nanogpt.make(seed=0, **CONFIG)
    imported = import_module(model, _batch())
    text = imported.mlir
    assert len(re.findall(r"^braid\.layer @", text, re.M)) == 1
    repeats = re.findall(r'braid\.repeat @(\w+)\(.*prefix = "([\w.]+)", count = (\d+) : i64', text)
    assert repeats == [("transformer_h", "transformer.h", str(LAYERS))]
    assert imported.layers == ["transformer.h"]
    # Layer-local names: instance i of the repeat is transformer.h.i.NAME, the state-dict key.
    layer = text.split("func.func")[0]
    assert '"ln_1.weight"' in layer and "transformer.h" not in layer.split("braid.yield")[0]
    # Tied embedding and head: one parameter, read by the embedding and the logits matmul.
    assert set(imported.weights) == {n for n, _ in model.named_parameters()}
    assert "lm_head.weight" not in text
    assert text.count('braid.param "transformer.wte.weight"') == 1
    assert re.search(r"braid\.matmul %\w+, %transformer\.wte\.weight \{transpose_b\}", text)
    # Explicit causal attention is one braid.attention with nanoGPT's 1/sqrt(8), in [B, T, H, D].
    assert re.search(r"braid\.attention %\w+, %\w+, %\w+ \{causal, scale = 0\.35355339059327373 : f64\}"
                     r" : \(tensor<2x16x4x8xf32>", text)
    assert "braid.softmax" not in text and '"attn.bias"' not in text
    # Op by op, the causal-mask buffer is a constant (-inf above the diagonal), not an input or parameter.
    plain = import_module(model, _batch(), fuse_attention=False).mlir
    assert '"attn.bias"' not in plain and "braid.attention" not in plain
    assert re.search(r"braid\.constant dense<\"0x00000000000080FF[0-9A-F]*\"> : tensor<1x1x16x16xf32>", plain)


class Cumulative(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, labels):
        h = self.proj(x)
        return nn.functional.cross_entropy(torch.cumsum(h, dim=1), labels)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Cumulative()

    def forward(self, x, labels):
        return self.inner(x, labels)


def test_unsupported_op_is_located():
    inputs = {"x": torch.randn(4, 8), "labels": torch.randint(0, 8, (4,))}
    with pytest.raises(UnsupportedError) as info:
        import_module(Outer(), inputs)
    message = str(info.value)
    assert "aten.cumsum" in message and "module 'inner'" in message
    assert re.search(r"test_torch_import\.py:\d+ \(return nn\.functional\.cross_entropy\(torch\.cumsum", message), message


def test_cli_end_to_end(tmp_path, braid_eval):
    batch = '{"idx": {"shape": [2, 16], "high": 128}, "targets": {"shape": [2, 16], "high": 128}}'
    env = {"PYTHONPATH": f"{PYTHON_DIR}:{PYTHON_DIR / 'tests'}"}
    proc = subprocess.run([sys.executable, "-m", "braid.torch", "nanogpt:make", "--args", '{"n_layer": 2}',
                           "--batch", batch, "-o", tmp_path / "m.mlir", "--weights", tmp_path / "w.st"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert 'prefix = "transformer.h", count = 2' in (tmp_path / "m.mlir").read_text()
    assert "transformer.h.1.mlp.c_fc.weight" in st.load(tmp_path / "w.st")
    out = braid_eval.run(tmp_path / "m.mlir", "--weights", tmp_path / "w.st").stdout
    assert "result 0: tensor<f32>" in out

    bad = subprocess.run([sys.executable, "-m", "braid.torch", "nanogpt:nonexistent", "--batch", batch],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "cannot load nanogpt:nonexistent" in bad.stderr


_SMALL = '{"vocab_size": 32, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16}'
_BATCH = '{"idx": {"shape": [2, 8], "high": 32}, "targets": {"shape": [2, 8], "high": 32}}'


@pytest.mark.parametrize("args, status, message", [
    (["--args", "[1]"], 2, "bad --args: expected a JSON object of keyword arguments, got [1]"),
    (["--batch", '{"idx": {"shape": [2, 8], "high": 32}}'], 2,
     "bad --batch: its inputs (idx) do not fit GPT.forward(idx, targets): missing a required argument: 'targets'"),
    (["--batch", '{"idx": {"shape": [2, -8], "high": 32}, "targets": {"shape": [2, 8], "high": 32}}'], 2,
     "bad --batch: input 'idx': 'shape' must be a list of positive integers, got [2, -8]"),
    (["--batch", '{"idx": {"shape": [2, 8]}, "targets": {"shape": [2, 8], "high": 32}}'], 2,
     "bad --batch: input 'idx': an integer input needs 'high'"),
    (["--batch", '{"idx": {"shape": [2, 8], "dtype": "int7", "high": 32}}'], 2,
     "bad --batch: input 'idx': unknown dtype \"int7\""),
    (["-o", "{tmp}/missing/m.mlir"], 1, "braid.torch: error: cannot write -o {tmp}/missing/m.mlir: No such file"),
    (["-o", "{tmp}/m.mlir", "--weights", "{tmp}"], 1, "braid.torch: error: cannot write --weights {tmp}: Is a directory"),
], ids=["args-list", "batch-missing-input", "batch-negative-dim", "batch-no-high", "batch-dtype", "output-dir",
        "weights-is-dir"])
def test_cli_errors(tmp_path, args, status, message):
    """Bad --args, --batch and output paths are one located line and status 2
    (usage) or 1 (writing), not a traceback from torch or the module."""
    env = {"PYTHONPATH": f"{PYTHON_DIR}:{PYTHON_DIR / 'tests'}"}
    cli = ["nanogpt:make", "--args", _SMALL, "--batch", _BATCH]
    given = {args[i]: args[i + 1].replace("{tmp}", str(tmp_path)) for i in range(0, len(args), 2)}
    for flag, value in given.items():
        if flag in cli:
            cli[cli.index(flag) + 1] = value
        else:
            cli += [flag, value]
    proc = subprocess.run([sys.executable, "-m", "braid.torch", *cli], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == status, proc.stderr
    assert message.replace("{tmp}", str(tmp_path)) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


class Mixed(nn.Module):
    """A ModuleList whose children differ (ReLU vs GELU): must be emitted inline, same loss."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), act) for act in (nn.ReLU(), nn.GELU())])
        self.head = nn.Linear(8, 5)

    def forward(self, x, labels):
        for layer in self.layers:
            x = layer(x)
        return nn.functional.cross_entropy(self.head(x), labels)


def test_differing_children_are_inlined(tmp_path, braid_eval):
    torch.manual_seed(4)
    model, batch = Mixed(), {"x": torch.randn(4, 8), "labels": torch.randint(0, 5, (4,))}
    imported = _import(tmp_path, model, batch)
    assert imported.layers == [] and "braid.repeat" not in imported.mlir
    assert 'braid.param "layers.1.0.weight"' in imported.mlir
    braid_eval.run(tmp_path / "model.mlir", "--weights", tmp_path / "w.st", "--inputs", tmp_path / "in.st",
                         "--save-outputs", tmp_path / "out.st")
    loss = float(st.to_numpy(st.load(tmp_path / "out.st")["result0"]))
    expected = model(**batch).item()
    assert abs(loss - expected) <= TOLERANCE * abs(expected), f"braid {loss!r}, torch {expected!r}"
