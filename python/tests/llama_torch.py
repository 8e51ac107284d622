"""A Llama-style decoder written in plain PyTorch (own code, after Meta's
Llama and Hugging Face's LlamaForCausalLM): token nn.Embedding, an
nn.ModuleList of pre-norm decoder blocks, each with RMSNorm written out
(x * rsqrt(mean(x^2) + eps) * weight), grouped-query causal attention (k and
v repeated to the query heads by expand + reshape, HF's repeat_kv), rotary
position embeddings from precomputed cos/sin buffers applied rotate-half
style (slice, neg, cat) to q and k in [B, H, T, D], explicit attention with
an additive -inf causal mask (torch 1.13 has no scaled_dot_product_attention),
and a SwiGLU MLP; no biases, a final RMSNorm and an untied LM head. Used by
the braid.torch tests as a model braid's generator does not write."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# A small default: 2 blocks, 4 query heads sharing 2 KV heads of size 8. Also: eps, rope_base,
# rope_scale (linear position interpolation) and repeat ("expand" as HF's repeat_kv, "interleave",
# or "tile", see repeat_kv) and layout ("hf": rotary and repeat on [B, H, T, D]; "meta": on [B, T, H, D]
# before the transpose, Meta's order, repeat always expand), mask_value ("-inf", or "min": finfo.min),
# window (a sliding-window mask of that many keys).
CONFIG = dict(vocab_size=128, block_size=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, ffn=64)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n_rep, how="expand"):
    """[B, Hkv, T, D] -> [B, Hkv * n_rep, T, D]: query head h reads KV head h // n_rep (how="tile":
    KV head h % Hkv, not the usual grouping, for a test that the importer tells them apart)."""
    if n_rep == 1:
        return x
    if how == "interleave":
        return x.repeat_interleave(n_rep, dim=1)
    b, h, t, d = x.shape
    if how == "tile":
        return x[:, None].expand(b, n_rep, h, t, d).reshape(b, n_rep * h, t, d)
    return x[:, :, None, :, :].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


def repeat_kv_bthd(x, n_rep):
    """Meta's repeat_kv: [B, T, Hkv, D] -> [B, T, Hkv * n_rep, D], head h reads KV head h // n_rep."""
    b, t, h, d = x.shape
    return x[:, :, :, None, :].expand(b, t, h, n_rep, d).reshape(b, t, h * n_rep, d)


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, block_size, rope_base=10000.0, rope_scale=1.0, repeat="expand",
                 layout="hf", mask_value="-inf", window=None):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, n_embd // n_head
        self.repeat, self.layout = repeat, layout
        self.q_proj = nn.Linear(n_embd, n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(n_embd, n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(n_embd, n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_head * self.head_dim, n_embd, bias=False)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        # rope_scale != 1: linear position interpolation (positions / scale).
        freqs = torch.outer(torch.arange(block_size).float() / rope_scale, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        # mask_value="min": HF's torch.finfo(dtype).min instead of -inf.
        low = torch.finfo(torch.float32).min if mask_value == "min" else float("-inf")
        mask = torch.triu(torch.full((block_size, block_size), low), diagonal=1)
        if window:  # sliding window (Mistral): keys `window` or more positions back are masked too
            mask = mask + torch.tril(torch.full((block_size, block_size), low), diagonal=-window)
        self.register_buffer("mask", mask)

    def forward(self, x):
        B, T, _ = x.shape
        n_rep = self.n_head // self.n_kv_head
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        if self.layout == "meta":  # rotate and repeat in [B, T, H, D], then to [B, H, T, D]
            cos, sin = self.cos[:T, None], self.sin[:T, None]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k, v = repeat_kv_bthd(k, n_rep), repeat_kv_bthd(v, n_rep)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        else:  # HF: to [B, H, T, D], then rotate and repeat
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            cos, sin = self.cos[:T], self.sin[:T]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k, n_rep, self.repeat), repeat_kv(v, n_rep, self.repeat)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + self.mask[:T, :T]
        probs = F.softmax(scores, dim=-1)
        y = torch.matmul(probs, v).transpose(1, 2).contiguous().view(B, T, -1)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd, ffn):
        super().__init__()
        self.w1 = nn.Linear(n_embd, ffn, bias=False)
        self.w2 = nn.Linear(ffn, n_embd, bias=False)
        self.w3 = nn.Linear(n_embd, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, block_size, ffn, eps, **attention):
        super().__init__()
        self.attention_norm = RMSNorm(n_embd, eps)
        self.attention = Attention(n_embd, n_head, n_kv_head, block_size, **attention)
        self.ffn_norm = RMSNorm(n_embd, eps)
        self.feed_forward = MLP(n_embd, ffn)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab_size=128, block_size=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, ffn=64,
                 eps=1e-5, rope_base=10000.0, rope_scale=1.0, repeat="expand", layout="hf", mask_value="-inf",
                 window=None):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, n_embd)
        attention = dict(rope_base=rope_base, rope_scale=rope_scale, repeat=repeat, layout=layout,
                         mask_value=mask_value, window=window)
        self.layers = nn.ModuleList([Block(n_embd, n_head, n_kv_head, block_size, ffn, eps, **attention)
                                     for _ in range(n_layer)])
        self.norm = RMSNorm(n_embd, eps)
        self.output = nn.Linear(n_embd, vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.3)  # peaked attention, so a wrong scale or rotation shows
            elif name.endswith("norm.weight"):
                nn.init.normal_(p, mean=1.0, std=0.1)  # not ones, so a dropped scale shows
            elif name.endswith(("o_proj.weight", "w2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.1 / math.sqrt(2 * n_layer))
            elif name == "output.weight":
                nn.init.normal_(p, mean=0.0, std=0.3)  # logits far from uniform, so the loss is sensitive
            else:
                nn.init.normal_(p, mean=0.0, std=0.1)

    def forward(self, idx, targets):
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make(seed=0, **config):
    """The factory the CLI calls: a Llama with weights drawn from `seed`; config overrides CONFIG."""
    torch.manual_seed(seed)
    return Llama(**dict(CONFIG, **config))
