"""An imported PyTorch model trains on a token file with --data.

braid.torch marks the int64 input that indexes the token embedding
(nanoGPT's idx) braid.data = "tokens" and the one that labels the
cross-entropy (targets) braid.data = "labels", so a braidc program fills
them from the runtime's data source each step: sample i of step s is the
file's window at w = ((s * G + i) * T) mod (n - T) (G samples of T tokens
per step, n tokens in the file; runtime/include/braid/rt/data.h), tokens
file[w : w + T], labels file[w + 1 : w + T + 1]. Checked:

- the 1-rank program's losses on a uint16 file (short enough that the
  windows wrap within the run), from the module's start checkpoint, equal
  torch.optim.AdamW's on those windows within 1e-5 relative; the same file
  as uint32 gives the same losses;
- dp2, dp2 x tp2 and dp2 x pp2 (1F1B) print the 1-rank losses within 1e-4;
- a missing file, a file whose size is not a multiple of the token width,
  and a token >= the vocabulary are refused with the runtime's message and
  exit status 1, on one rank and on every rank of dp2 x tp2;
- ids that pass the data source but not the model (braid.range widened to
  100 over a 64-token table) are stopped by the device-side id checks on the
  int64 ids, with the op, the id and its position;
- an entry whose ids carry no braid.data (and are not named tokens/labels)
  refuses --data with status 2.
"""

import re
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

import nanogpt
import vit_torch
from braid.torch import import_module, start_checkpoint
from conftest import bin_dir

CONFIG = dict(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)
VOCAB, SEQ = CONFIG["vocab_size"], CONFIG["block_size"]
B = 4  # samples per micro-batch (the import's batch)
M = 2  # micro-batches per step
STEPS = 4
TOKENS = 300  # in the file: step 2's windows wrap around (n - T = 284)
TRAIN = ["--lr", "3e-3", "--clip-norm", "1.0", "--microbatches", str(M)]
PLANS = {
    "dp2": (2, ["--mesh", "dp=2"]),
    "dp2xtp2": (4, ["--mesh", "dp=2,tp=2"]),
    "dp2xpp2-1f1b": (4, ["--mesh", "dp=2,pp=2", "--schedule", "1f1b"]),
}
PLAN_TOLERANCE = 1e-4  # relative, a plan's losses against the 1-rank program's
TORCH_TOLERANCE = 1e-5  # relative, the 1-rank program's losses against PyTorch's


def _run(*command, expect=0):
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300)
    if expect == 0 and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} exited with status {proc.returncode}:\n{proc.stderr}",
                    pytrace=False)
    assert proc.returncode == expect, f"status {proc.returncode}, expected {expect}:\n{proc.stderr}"
    return proc


def _losses(stdout):
    return [float(x) for x in re.findall(r"^step \d+ loss (\S+)", stdout, re.M)]


def _make(seed=0):
    return nanogpt.make(seed=seed, **CONFIG)


def _example():
    g = torch.Generator().manual_seed(1)
    return {"idx": torch.randint(0, VOCAB, (B, SEQ), generator=g),
            "targets": torch.randint(0, VOCAB, (B, SEQ), generator=g)}


class Setup(NamedTuple):
    work: Path
    tokens: np.ndarray  # the file's tokens
    file: Path  # uint16
    serial: list  # the 1-rank program's losses with --data file


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Setup:
    work = tmp_path_factory.mktemp("data")
    imported = import_module(_make(), _example())
    (work / "model.mlir").write_text(imported.mlir)
    start_checkpoint(imported.weights, work / "start")
    # Learnable (a stride-7 walk with noise), so the loss falls.
    rng = np.random.default_rng(0)
    tokens = (np.arange(TOKENS) * 7 + rng.integers(0, 3, TOKENS)) % VOCAB
    file = work / "tokens.u16"
    tokens.astype("<u2").tofile(file)
    _run(bin_dir() / "braidc", work / "model.mlir", *TRAIN, "-o", work / "serial")
    out = _run(work / "serial", "--resume", work / "start", "--steps", STEPS, "--data", file).stdout
    losses = _losses(out)
    assert len(losses) == STEPS, out
    return Setup(work, tokens, file, losses)


def test_import_marks_tokens_and_labels():
    signature = re.search(r"func\.func @forward\((.*)\) ->", import_module(_make(), _example()).mlir).group(1)
    assert re.search(r'%\w+: tensor<4x16xi64> \{braid.name = "idx", braid.range = 64 : i64, '
                     r'braid.data = "tokens"\}', signature), signature
    assert re.search(r'%\w+: tensor<4x16xi64> \{braid.name = "targets", braid.range = 64 : i64, '
                     r'braid.data = "labels"\}', signature), signature
    # A classifier's labels are not next tokens: the ViT's inputs get no braid.data.
    vit = import_module(vit_torch.make(seed=0), vit_torch.batch(size=2), loss=vit_torch.loss).mlir
    assert "braid.data" not in vit


def _windows(tokens, step):
    """Step `step`'s global batch as the data source reads it."""
    g, n = M * B, len(tokens)
    starts = [((step * g + i) * SEQ) % (n - SEQ) for i in range(g)]
    idx = np.stack([tokens[w:w + SEQ] for w in starts])
    targets = np.stack([tokens[w + 1:w + SEQ + 1] for w in starts])
    return {"idx": torch.from_numpy(idx.astype(np.int64)), "targets": torch.from_numpy(targets.astype(np.int64))}


def test_one_rank_equals_pytorch(setup):
    module = _make()
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3)
    expected = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = module(**_windows(setup.tokens, step))[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        expected.append(loss.item())
    worst = max(abs(a - e) / abs(e) for a, e in zip(setup.serial, expected))
    print(f"1 rank with --data vs torch.optim.AdamW on the file's windows: worst relative {worst:.2e}; "
          f"braid {setup.serial}, torch {expected}")
    for step, (a, e) in enumerate(zip(setup.serial, expected)):
        assert abs(a - e) <= TORCH_TOLERANCE * abs(e), f"step {step}: braid {a!r}, torch {e!r}"
    assert setup.serial[-1] < setup.serial[0], setup.serial
    # Not the program's own fixed batch: without --data the losses differ.
    fixed = _losses(_run(setup.work / "serial", "--resume", setup.work / "start", "--steps", 1).stdout)
    assert fixed[0] != setup.serial[0]
    # The same tokens as uint32.
    wide = setup.work / "tokens.u32"
    setup.tokens.astype("<u4").tofile(wide)
    out = _run(setup.work / "serial", "--resume", setup.work / "start", "--steps", STEPS, "--data", wide,
               "--token-bytes", 4).stdout
    assert _losses(out) == setup.serial


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_plan_equals_one_rank(setup, plan):
    ranks, options = PLANS[plan]
    program = setup.work / plan
    _run(bin_dir() / "braidc", setup.work / "model.mlir", *TRAIN, *options, "-o", program)
    out = _run(bin_dir() / "braid-run", "-n", ranks, program, "--resume", setup.work / "start",
               "--steps", STEPS, "--data", setup.file).stdout
    losses = _losses(out)
    assert len(losses) == STEPS, out
    worst = max(abs(a - e) / abs(e) for a, e in zip(losses, setup.serial))
    print(f"{plan} with --data: worst relative difference to 1 rank {worst:.2e}")
    for step, (a, e) in enumerate(zip(losses, setup.serial)):
        assert abs(a - e) <= PLAN_TOLERANCE * abs(e), f"{plan} step {step}: {a!r}, 1 rank {e!r}"


def test_bad_files_are_refused(setup, tmp_path):
    odd = tmp_path / "odd.u16"
    odd.write_bytes(setup.file.read_bytes()[:-1])
    high = tmp_path / "high.u16"
    bad = setup.tokens.copy()
    bad[200] = VOCAB
    bad.astype("<u2").tofile(high)
    cases = [
        (tmp_path / "missing.u16", r"IO_ERROR: token file '[^']*missing\.u16': cannot open"),
        (odd, r"DATA_CORRUPT: token file '[^']*odd\.u16': its size, 599 bytes, is not a multiple of "
              r"2-byte tokens"),
        (high, r"DATA_CORRUPT: token file '[^']*high\.u16': token 200 is 64, not below the vocabulary "
               r"size 64"),
    ]
    program = setup.work / "dp2xtp2"
    if not program.exists():
        _run(bin_dir() / "braidc", setup.work / "model.mlir", *TRAIN, *PLANS["dp2xtp2"][1], "-o", program)
    for file, message in cases:
        err = _run(setup.work / "serial", "--steps", 1, "--data", file, expect=1).stderr
        assert re.search(r"^error: rank 0: --data \S+: " + message, err, re.M), err
        err = _run(bin_dir() / "braid-run", "-n", 4, program, "--steps", 1, "--data", file, expect=1).stderr
        for rank in range(4):
            assert re.search(rf"^error: rank {rank}: --data \S+: " + message, err, re.M), err


def test_ids_outside_the_model_are_located(setup, tmp_path):
    """The data source checks the declared braid.range; ids that pass it but
    not the model's 64-row table and 64 classes stop at the device-side id
    checks, which read the int64 ids."""
    wide = tmp_path / "range100.mlir"
    text = (setup.work / "model.mlir").read_text()
    assert text.count("braid.range = 64 : i64") == 2
    wide.write_text(text.replace("braid.range = 64 : i64", "braid.range = 100 : i64"))
    _run(bin_dir() / "braidc", wide, *TRAIN, "-o", tmp_path / "one")
    _run(bin_dir() / "braidc", wide, *TRAIN, "--mesh", "dp=2,tp=2", "-o", tmp_path / "dptp")
    # Token 5 of step 0 is position 5 of micro-batch 0's ids.
    ids = setup.tokens.copy()
    ids[5] = 70
    ids.astype("<u2").tofile(tmp_path / "id.u16")
    err = _run(tmp_path / "one", "--steps", 1, "--data", tmp_path / "id.u16", expect=1).stderr
    assert re.search(r"^error: rank 0: .*braid\.embedding: id 70 is outside \[0, 64\) at position 5 of 64 on "
                     r"this rank", err, re.M), err
    # Token 128 is a label only (of sample 7, position 15: the last of micro-batch 1's 64).
    labels = setup.tokens.copy()
    labels[M * B * SEQ] = 70
    labels.astype("<u2").tofile(tmp_path / "label.u16")
    err = _run(tmp_path / "one", "--steps", 1, "--data", tmp_path / "label.u16", expect=1).stderr
    assert re.search(r"^error: rank 0: .*braid\.cross_entropy: label 70 is outside \[0, 64\) at position 63 of "
                     r"64 on this rank", err, re.M), err
    # Under dp2 x tp2 the vocabulary-parallel cross-entropy checks it on dp rank 1 (rows 2, 3).
    err = _run(bin_dir() / "braid-run", "-n", 4, tmp_path / "dptp", "--steps", 1, "--data",
               tmp_path / "label.u16", expect=1).stderr
    assert re.search(r"^error: rank \d: .*: label 70 is outside \[0, 64\) at position 31 of 32 on this rank",
                     err, re.M), err


def test_entry_without_roles_refuses_data(setup, tmp_path):
    text = (setup.work / "model.mlir").read_text()
    plain = re.sub(r', braid\.data = "\w+"', "", text)
    assert plain != text and "braid.data" not in plain
    (tmp_path / "plain.mlir").write_text(plain)
    _run(bin_dir() / "braidc", tmp_path / "plain.mlir", *TRAIN, "-o", tmp_path / "plain")
    err = _run(tmp_path / "plain", "--steps", 1, "--data", setup.file, expect=2).stderr
    assert "error: --data needs a training step that takes 'tokens' and 'labels' (braid.data, or by name) of " \
           "one type, i32 or i64, with braid.range" in err, err
