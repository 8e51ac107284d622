"""bf16 mixed precision (braid-mixed-precision, braidc --precision
bf16-mixed): a small GPT trained 50 AdamW steps in braid-eval, against the
same model in f32, against PyTorch 1.13 running the same precision policy
with explicit casts, and against torch.autocast(bfloat16) on the CPU.

bf16 keeps 8 significant bits: each rounding is off by up to 2^-9 = 0.2%
relative. One op's rounding is not an error that cancels: two programs that
round at the same places but compute a value before rounding differently
(double in braid-eval, f32 or oneDNN's accumulation order in PyTorch) put a
few elements on the other side of a rounding boundary, and from there the
trajectories part like two f32 runs would, only from a 2^-9 perturbation
instead of 2^-24. The bands below are therefore a few times what was
measured, not derived from the op count; each test also checks that the two
sides do differ where they should (bf16 against f32), so the band is not
passed by a program that ignores the precision.

Bands: 1e-2 relative at every step (the issue's figure), against f32, the
same policy in PyTorch and torch.autocast. Measured (seed 4, 50 steps, the
worst step): bf16-mixed against f32 1.8e-3; against the same policy in
PyTorch 2.8e-3; against torch.autocast 3.5e-3 (autocast keeps the residual
stream in f32 and runs layer_norm in bf16: another policy, as near); for
scale, torch.autocast against PyTorch f32 2.0e-3, and braid's f32 against
PyTorch f32 5.7e-7. The program legalized for the f32 kernels
(braid-legalize-bf16) evaluates to the bf16 program's losses exactly for 2
steps, within 3.5e-3 over 50.

A linear layer's bias is added to the f32 product before the one rounding
(as autocast's addmm; since 2026-12-02, which lets braidc fold the bias
into the GEMM). Before, the product was rounded first: 1.4e-3, 9.3e-4 and
8.0e-4 above at seed 4. That is the trajectories parting, not the rounding
moving away from PyTorch: over 8 seeds (1-8) the worst step against
autocast is 0.6e-3 to 5.8e-3 before and 0.7e-3 to 4.2e-3 after, its mean
over the steps 0.96e-3 before and 1.01e-3 after, the worst of the first 10
steps 2.7e-4 before and 2.4e-4 after.
"""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_reference as ref
from braid import models
from braid import safetensors as st

LAYERS, HIDDEN, HEADS, SEQ, VOCAB, BATCH = 2, 32, 4, 16, 64, 4
STEPS = 50
LR, WARMUP, BETAS, WD, CLIP = 3e-3, 5, (0.9, 0.95), 0.1, 1.0
TRAIN_STEP = (f"lr={LR} warmup-steps={WARMUP} total-steps={STEPS} decay=cosine "
              f"beta1={BETAS[0]} beta2={BETAS[1]} weight-decay={WD} clip-norm={CLIP}")
BF16 = torch.bfloat16
# Relative loss differences allowed at every step (see the module docstring).
BAND_F32 = 1e-2
BAND_SAME_POLICY = 1e-2
BAND_AUTOCAST = 1e-2
# bf16 must move the loss by more than f32 rounding would.
AT_LEAST = 1e-5


def _losses(stdout):
    return [float(line.split()[3]) for line in stdout.splitlines() if line.startswith("step ")]


def _relative(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def setup(tmp_path_factory, braid_opt, braid_eval):
    """The model, its f32 and bf16-mixed training steps, the inputs and the
    initial weights."""
    d = tmp_path_factory.mktemp("mixed")
    model = d / "gpt.mlir"
    model.write_text(models.gpt(layers=LAYERS, hidden=HIDDEN, heads=HEADS, seq=SEQ, vocab=VOCAB,
                                batch=BATCH))
    f32 = d / "f32.mlir"
    f32.write_text(braid_opt.run(model, "--braid-autodiff", f"--braid-train-step={TRAIN_STEP}").stdout)
    bf16 = d / "bf16.mlir"
    bf16.write_text(braid_opt.run(model, "--braid-mixed-precision=precision=bf16-mixed",
                                  "--braid-autodiff", f"--braid-train-step={TRAIN_STEP}").stdout)
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int32)
    labels = rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int32)
    st.save(d / "in.st", {"tokens": st.from_numpy(tokens), "labels": st.from_numpy(labels)})
    braid_eval.run(model, "--seed", 4, "--inputs", d / "in.st", "--save-weights", d / "w0.st")

    def train(program):
        out = braid_eval.run(program, "--steps", STEPS, "--seed", 4, "--inputs", d / "in.st")
        losses = _losses(out.stdout)
        assert len(losses) == STEPS
        return losses

    return dict(dir=d, tokens=tokens, labels=labels, f32=train(f32), bf16=train(bf16),
                bf16_program=bf16, train=train)


def _lr(t):
    if t < WARMUP:
        return (t + 1) / WARMUP
    p = min(1.0, (t - WARMUP) / max(1, STEPS - WARMUP))
    return 0.5 * (1 + math.cos(math.pi * p))


def _torch_train(setup, logits_fn, autocast=False):
    """50 steps of torch.optim.AdamW (as braid-train-step) from the same
    weights; the master weights and the optimizer are f32."""
    params = {n: torch.from_numpy(st.to_numpy(t)).float().requires_grad_()
              for n, t in st.load(setup["dir"] / "w0.st").items()}
    opt = torch.optim.AdamW(params.values(), lr=LR, betas=BETAS, eps=1e-8, weight_decay=WD)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr)
    tokens, labels = torch.from_numpy(setup["tokens"]), torch.from_numpy(setup["labels"])
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=BF16, enabled=autocast):
            logits = logits_fn(ref.Weights(params), tokens)
            loss = ref.cross_entropy(logits.float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), CLIP)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def _gpt_same_policy(w, tokens):
    """GPT with braid-mixed-precision's policy written as explicit casts:
    bf16 working copies of the f32 weights, bf16 matmuls, adds, GELU and
    residual stream, a linear layer's bias added to its f32 product in f32
    before the rounding to bf16 (as autocast's addmm); layer norms on f32 (bf16 result); attention computed in
    f32 from bf16 q, k, v and rounded once (braid.attention is one op)."""
    cache = {}

    def p16(name):  # one working copy per weight, as the pass makes
        if name not in cache:
            cache[name] = w[name].to(BF16)
        return cache[name]

    def linear(x, name):  # the bias added to the f32 product in f32, then bf16
        product = x.float() @ p16(f"{name}.weight").float()
        return (product + p16(f"{name}.bias").float()).to(BF16)

    def layer_norm(x, name):
        return F.layer_norm(x.float(), x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"],
                            eps=1e-5).to(BF16)

    x = p16("wte.weight")[tokens.long()] + p16("wpe.weight")
    for i in range(LAYERS):
        p = f"h.{i}"
        n = layer_norm(x, f"{p}.ln_1")
        q, k, v = (ref._split_heads(linear(n, f"{p}.attn.{c}"), HEADS).float() for c in "qkv")
        a = ref.attention(q, k, v, causal=True).to(BF16)
        x = x + linear(ref._merge_heads(a), f"{p}.attn.proj")
        n = layer_norm(x, f"{p}.ln_2")
        x = x + linear(F.gelu(linear(n, f"{p}.mlp.fc"), approximate="tanh"), f"{p}.mlp.proj")
    return layer_norm(x, "ln_f") @ p16("wte.weight").T


def test_bf16_mixed_tracks_f32(setup):
    f32, bf16 = setup["f32"], setup["bf16"]
    assert bf16[-1] < bf16[0] - 1.0, "the loss falls"
    worst = _relative(bf16, f32)
    assert worst <= BAND_F32, f"bf16-mixed differs from f32 by {worst:.3g} > {BAND_F32}"
    assert worst >= AT_LEAST, f"bf16-mixed equals f32 to {worst:.3g}: nothing was rounded"


def test_bf16_mixed_matches_torch_same_policy(setup):
    expected = _torch_train(setup, _gpt_same_policy)
    worst = _relative(setup["bf16"], expected)
    assert worst <= BAND_SAME_POLICY, f"braid-eval differs from PyTorch by {worst:.3g}"
    # The reference does round: it is no f32 run.
    assert _relative(expected, setup["f32"]) >= AT_LEAST


def test_bf16_mixed_near_torch_autocast(setup):
    autocast = _torch_train(setup, lambda w, t: ref.gpt_logits(w, t, layers=LAYERS, heads=HEADS),
                            autocast=True)
    worst = _relative(setup["bf16"], autocast)
    assert worst <= BAND_AUTOCAST, f"braid-eval differs from torch.autocast by {worst:.3g}"


def test_legalized_program_evaluates_alike(setup, braid_opt):
    # braid-legalize-bf16 (what braidc runs before lowering): f32 values
    # rounded to bf16 after each op evaluate to the bf16 program's losses
    # (each op rounds to f32 before bf16 there, which moves a value off a
    # bf16 tie now and then; measured: identical for 2 steps, 3.5e-3 by
    # step 50).
    legal = setup["dir"] / "legal.mlir"
    legal.write_text(braid_opt.run(setup["bf16_program"], "--braid-legalize-bf16").stdout)
    # bf16 survives only as storage: the values a layer saves for its
    # backward, packed and unpacked by braid.convert and carried by the
    # repeats (docs/training.md); no other op computes a bf16 value.
    computes = {m.group(1) for line in legal.read_text().splitlines() if "bf16>" in line
                for m in [re.search(r"= (braid\.\w+)", line)] if m}
    assert computes <= {"braid.convert", "braid.repeat"}, computes
    losses = setup["train"](legal)
    first = _relative(losses[:2], setup["bf16"][:2])
    assert first <= 1e-7, f"the legalized program differs by {first:.3g} in 2 steps"
    worst = _relative(losses, setup["bf16"])
    assert worst <= BAND_SAME_POLICY, f"the legalized program differs by {worst:.3g}"
