"""Checks the PyTorch reference itself, so that it can be trusted as the oracle."""

import math

import pytest
import torch

import torch_reference as ref
from braid import models
from model_ir import param_shapes


def _random_weights(text: str, seed: int):
    """Random float64 weights for every parameter of a generated model."""
    gen = torch.Generator().manual_seed(seed)
    shapes = param_shapes(text)["forward"]
    return {name: torch.randn(shape, generator=gen, dtype=torch.float64) * 0.3 for name, shape in shapes.items()}


def _attention_loop(q, k, v, causal, scale):
    """Attention one (batch, head, query) at a time, straight from the definition."""
    b_, s_, hq, d = q.shape
    t_, hkv = k.shape[1], k.shape[2]
    out = torch.zeros_like(q)
    for b in range(b_):
        for h in range(hq):
            kv = h // (hq // hkv)
            for s in range(s_):
                keys = range(s + 1) if causal else range(t_)
                scores = torch.stack([q[b, s, h] @ k[b, t, kv] * scale for t in keys])
                p = torch.exp(scores - scores.max())
                p = p / p.sum()
                out[b, s, h] = sum(p[i] * v[b, t, kv] for i, t in enumerate(keys))
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_attention_matches_definition(causal):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 5, 4, 6, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 5, 2, 6, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 5, 2, 6, generator=gen, dtype=torch.float64)
    expected = _attention_loop(q, k, v, causal, 1 / math.sqrt(6))
    torch.testing.assert_close(ref.attention(q, k, v, causal), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ref.attention(q, k, v, causal, scale=0.3),
                               _attention_loop(q, k, v, causal, 0.3), rtol=1e-12, atol=1e-12)


def test_rotary_is_rotation_of_half_pairs():
    """Pair (x_i, x_{i+D/2}) at position p is the complex number rotated by p * base^(-2i/D)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 7, 3, 8, generator=gen, dtype=torch.float64)
    y = ref.rotary(x, 100.0)
    z = torch.complex(x[..., :4], x[..., 4:])
    angle = torch.arange(7, dtype=torch.float64)[:, None] * 100.0 ** (-2 * torch.arange(4, dtype=torch.float64) / 8)
    w = z * torch.polar(torch.ones_like(angle), angle)[None, :, None, :]
    torch.testing.assert_close(y, torch.cat([w.real, w.imag], dim=-1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(y[:, 0], x[:, 0])  # position 0 is not rotated


MODELS = {
    "gpt": (models.gpt(layers=2, hidden=16, heads=4, seq=6, vocab=11, batch=2),
            lambda w, t: ref.gpt_logits(w, t, layers=2, heads=4)),
    "llama": (models.llama(layers=2, hidden=16, heads=4, kv_heads=2, seq=6, vocab=11, batch=2),
              lambda w, t: ref.llama_logits(w, t, layers=2, heads=4, kv_heads=2)),
}


@pytest.mark.parametrize("kind", MODELS)
def test_reference_reads_every_parameter(kind):
    text, logits_of = MODELS[kind]
    weights = ref.Weights(_random_weights(text, 0))
    logits = logits_of(weights, torch.randint(0, 11, (2, 6)))
    assert logits.shape == (2, 6, 11)
    assert weights.used == set(param_shapes(text)["forward"])


@pytest.mark.parametrize("kind", MODELS)
def test_models_are_causal(kind):
    """Changing token j changes the logits at positions >= j only."""
    text, logits_of = MODELS[kind]
    weights = _random_weights(text, 1)
    tokens = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(2))
    changed = tokens.clone()
    changed[:, 3] = (changed[:, 3] + 1) % 11
    a, b = logits_of(ref.Weights(weights), tokens), logits_of(ref.Weights(weights), changed)
    torch.testing.assert_close(a[:, :3], b[:, :3], rtol=1e-13, atol=1e-13)
    assert (a[:, 3:] - b[:, 3:]).abs().amax(dim=-1).min() > 1e-6


def test_cross_entropy_definition():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, 5, (2, 3), generator=gen)
    expected = (logits.logsumexp(-1) - logits.gather(-1, labels[..., None])[..., 0]).mean()
    torch.testing.assert_close(ref.cross_entropy(logits, labels.int()), expected, rtol=1e-14, atol=0)
