"""PyTorch references for the braid ops and the braid.models models.

Written plainly with torch ops, independently of braid-eval, to be the
outside reference. Model functions take the weights by their braid names
(linear weights are [in, out], applied as x @ W + b) and record which names
they read, so a test can check that the model has no parameter the reference
ignores.
"""

import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F


class Weights:
    """Weights by name, remembering which were read."""

    def __init__(self, tensors: Dict[str, torch.Tensor]):
        self._tensors = tensors
        self.used = set()

    def __getitem__(self, name: str) -> torch.Tensor:
        self.used.add(name)
        return self._tensors[name]


def rotary(x: torch.Tensor, base: float, inverse: bool = False) -> torch.Tensor:
    """Rotate-half rotary embedding of x [B, S, A, D]; position = index in dim 1.
    With `inverse`, the rotation by the negated angle."""
    d = x.shape[-1]
    half = d // 2
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    angle = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * freq[None, :]  # [S, D/2]
    cos = angle.cos()[None, :, None, :].to(x.dtype)
    sin = angle.sin()[None, :, None, :].to(x.dtype) * (-1 if inverse else 1)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              scale: Optional[float] = None) -> torch.Tensor:
    """q [B, S, Hq, D], k and v [B, T, Hkv, D] -> [B, S, Hq, D]; query head h uses KV head h // (Hq/Hkv)."""
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, S or T, D]
    scores = q @ k.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if causal:
        # Row s (query) may see columns t <= s (keys): mask the strict upper triangle.
        future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    return (scores.softmax(dim=-1) @ v).transpose(1, 2)


def rms_norm(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * g


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over all label positions of logsumexp(logits) - logits[label]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long())


def _linear(x: torch.Tensor, w: Weights, name: str, bias: bool = True) -> torch.Tensor:
    y = x @ w[f"{name}.weight"]
    return y + w[f"{name}.bias"] if bias else y


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x.reshape(x.shape[0], x.shape[1], heads, -1)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], x.shape[1], -1)


def _layer_norm(x: torch.Tensor, w: Weights, name: str) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"], eps=1e-5)


def gpt_logits(w: Weights, tokens: torch.Tensor, layers: int, heads: int) -> torch.Tensor:
    """GPT-2 (pre-LN, tied embeddings) logits [B, S, V] for tokens [B, S]."""
    wte = w["wte.weight"]
    x = wte[tokens.long()] + w["wpe.weight"]
    for i in range(layers):
        p = f"h.{i}"
        n = _layer_norm(x, w, f"{p}.ln_1")
        q, k, v = (_split_heads(_linear(n, w, f"{p}.attn.{c}"), heads) for c in "qkv")
        x = x + _linear(_merge_heads(attention(q, k, v, causal=True)), w, f"{p}.attn.proj")
        n = _layer_norm(x, w, f"{p}.ln_2")
        x = x + _linear(F.gelu(_linear(n, w, f"{p}.mlp.fc"), approximate="tanh"), w, f"{p}.mlp.proj")
    return _layer_norm(x, w, "ln_f") @ wte.T


def llama_logits(w: Weights, tokens: torch.Tensor, layers: int, heads: int, kv_heads: int) -> torch.Tensor:
    """Llama (RMSNorm eps 1e-5, rotary base 10000, GQA, SwiGLU) logits [B, S, V]."""
    x = w["embed_tokens.weight"][tokens.long()]
    for i in range(layers):
        p = f"layers.{i}"
        n = rms_norm(x, w[f"{p}.input_layernorm.weight"], 1e-5)
        q = rotary(_split_heads(_linear(n, w, f"{p}.self_attn.q_proj", bias=False), heads), 10000.0)
        k = rotary(_split_heads(_linear(n, w, f"{p}.self_attn.k_proj", bias=False), kv_heads), 10000.0)
        v = _split_heads(_linear(n, w, f"{p}.self_attn.v_proj", bias=False), kv_heads)
        x = x + _linear(_merge_heads(attention(q, k, v, causal=True)), w, f"{p}.self_attn.o_proj", bias=False)
        n = rms_norm(x, w[f"{p}.post_attention_layernorm.weight"], 1e-5)
        gate = F.silu(_linear(n, w, f"{p}.mlp.gate_proj", bias=False))
        x = x + _linear(gate * _linear(n, w, f"{p}.mlp.up_proj", bias=False), w, f"{p}.mlp.down_proj", bias=False)
    return _linear(rms_norm(x, w["norm.weight"], 1e-5), w, "lm_head", bias=False)


def mlp_logits(w: Weights, x: torch.Tensor, layers: int) -> torch.Tensor:
    """ReLU MLP logits [B, V] for x [B, H]."""
    for i in range(layers):
        x = torch.relu(_linear(x, w, f"layers.{i}.fc"))
    return _linear(x, w, "head")


# Small models shared by the gradient and training tests: the braid.models
# configuration and the matching reference logits.
SMALL_BATCH, SMALL_SEQ, SMALL_VOCAB = 2, 8, 64
SMALL_MODELS = {
    "gpt": (dict(layers=2, hidden=32, heads=4, seq=SMALL_SEQ, vocab=SMALL_VOCAB, batch=SMALL_BATCH),
            lambda w, t: gpt_logits(w, t, layers=2, heads=4)),
    "llama": (dict(layers=2, hidden=32, heads=4, kv_heads=2, seq=SMALL_SEQ, vocab=SMALL_VOCAB,
                   batch=SMALL_BATCH),
              lambda w, t: llama_logits(w, t, layers=2, heads=4, kv_heads=2)),
}
