"""Generates GPT, Llama and MLP models as braid-dialect MLIR.

    python3 -m braid.models gpt --layers 12 --hidden 768 --heads 12 --seq 1024 \\
        --vocab 50304 --batch 8 -o gpt2.mlir

Each module defines its layer once (``braid.layer``) and has two entry
functions that apply it with ``braid.repeat``, so the IR does not grow with
depth:

  @forward(inputs..., labels) -> tensor<DTYPE>   mean cross-entropy loss
  @logits(inputs...)          -> logits

Integer inputs carry ``braid.range = vocab`` so that ``braid-eval`` can
generate them. Linear weights are stored [in, out] and applied as
``x @ W + b``. Parameter names (the keys of weight files), with ``{i}`` the
layer index:

GPT (GPT-2, pre-LN; tokens, labels [B, S]; logits [B, S, V]):
  wte.weight [V, H] normal(0.02), tied to the LM head (logits = h @ wte^T)
  wpe.weight [S, H] normal(0.01), added to every sequence
  h.{i}.ln_1.weight [H] ones, h.{i}.ln_1.bias [H] zeros
  h.{i}.attn.{q,k,v}.weight [H, H] normal(0.02), h.{i}.attn.{q,k,v}.bias [H] zeros
  h.{i}.attn.proj.weight [H, H] normal(0.02/sqrt(2L)), h.{i}.attn.proj.bias [H] zeros
  h.{i}.ln_2.weight [H] ones, h.{i}.ln_2.bias [H] zeros
  h.{i}.mlp.fc.weight [H, F] normal(0.02), h.{i}.mlp.fc.bias [F] zeros
  h.{i}.mlp.proj.weight [F, H] normal(0.02/sqrt(2L)), h.{i}.mlp.proj.bias [H] zeros
  ln_f.weight [H] ones, ln_f.bias [H] zeros
  layer_norm epsilon 1e-5, gelu tanh, causal attention with scale 1/sqrt(D);
  F defaults to 4H.

Llama (tokens, labels [B, S]; logits [B, S, V]; no biases):
  embed_tokens.weight [V, H] normal(0.02)
  layers.{i}.input_layernorm.weight [H] ones
  layers.{i}.self_attn.q_proj.weight [H, A*D] normal(0.02)
  layers.{i}.self_attn.k_proj.weight, v_proj.weight [H, K*D] normal(0.02)
  layers.{i}.self_attn.o_proj.weight [A*D, H] normal(0.02)
  layers.{i}.post_attention_layernorm.weight [H] ones
  layers.{i}.mlp.gate_proj.weight, up_proj.weight [H, F] normal(0.02)
  layers.{i}.mlp.down_proj.weight [F, H] normal(0.02)
  norm.weight [H] ones
  lm_head.weight [H, V] normal(0.02), not tied
  rms_norm epsilon 1e-5 (Llama 2's value), rotary base 10000 on q and k,
  causal attention with K grouped KV heads (K defaults to A), SwiGLU MLP
  down(silu(gate(x)) * up(x)); F defaults to 8H/3 rounded up to a multiple
  of 16 (176 for H = 64).

MLP (input x [B, H] float, labels [B]; logits [B, V]):
  layers.{i}.fc.weight [H, H] normal(sqrt(2/H)) (He init, for ReLU),
  layers.{i}.fc.bias [H] zeros; each layer is relu(x @ W + b)
  head.weight [H, V] normal(sqrt(1/H)), head.bias [V] zeros
"""

import argparse
import math
import sys
from typing import Callable, List, Optional, Sequence

from braid.ir import FLOAT_TYPES, INT_TYPES, ONES, ZEROS, Arg, Body, Module, TensorType, Value, normal

LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-5
ROTARY_BASE = 10000.0


def _check_sizes(**sizes: Optional[int]) -> None:
    for name, size in sizes.items():
        if size is not None and (not isinstance(size, int) or size <= 0):
            raise ValueError(f"{name} must be a positive integer, got {size}")


def _check_types(dtype: str, id_type: str) -> None:
    if dtype not in FLOAT_TYPES:
        raise ValueError(f"dtype must be one of {', '.join(FLOAT_TYPES)}, got {dtype!r}")
    if id_type not in INT_TYPES:
        raise ValueError(f"id_type must be one of {', '.join(INT_TYPES)}, got {id_type!r}")


def _head_dim(hidden: int, heads: int) -> int:
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    return hidden // heads


def _linear(body: Body, x: Value, name: str, n_in: int, n_out: int, init: str, bias: bool) -> Value:
    """x @ W (+ b) with parameters NAME.weight [n_in, n_out] and NAME.bias [n_out]."""
    element = x.type.element
    w = body.param(f"{name}.weight", TensorType((n_in, n_out), element), init)
    y = body.matmul(x, w, hint=f"{name}.xw" if bias else name)
    if bias:
        b = body.param(f"{name}.bias", TensorType((n_out,), element), ZEROS)
        y = body.add(y, b, hint=name)
    return y


def _layer_norm(body: Body, x: Value, name: str) -> Value:
    scale = TensorType((x.type.shape[-1],), x.type.element)
    g = body.param(f"{name}.weight", scale, ONES)
    b = body.param(f"{name}.bias", scale, ZEROS)
    return body.layer_norm(x, g, b, LAYER_NORM_EPS, hint=name)


def _rms_norm(body: Body, x: Value, name: str) -> Value:
    g = body.param(f"{name}.weight", TensorType((x.type.shape[-1],), x.type.element), ONES)
    return body.rms_norm(x, g, RMS_NORM_EPS, hint=name)


def _heads(body: Body, x: Value, heads: int, hint: str) -> Value:
    """[B, S, heads*D] -> [B, S, heads, D]."""
    b, s, width = x.type.shape
    return body.reshape(x, (b, s, heads, width // heads), hint=hint)


def _merge_heads(body: Body, x: Value, hint: str) -> Value:
    """[B, S, A, D] -> [B, S, A*D]."""
    b, s, a, d = x.type.shape
    return body.reshape(x, (b, s, a * d), hint=hint)


def _entries(module: Module, inputs: Sequence[Arg], labels: Arg,
             logits_of: Callable[[Body, List[Value]], Value]) -> str:
    """Adds @forward(inputs, labels) -> loss and @logits(inputs) -> logits; returns the text."""
    forward = module.func("forward", list(inputs) + [labels])
    logits = logits_of(forward, forward.args[:-1])
    forward.return_(forward.cross_entropy(logits, forward.args[-1]))
    logits_fn = module.func("logits", inputs)
    logits_fn.return_(logits_of(logits_fn, logits_fn.args))
    return str(module)


def _token_args(batch: int, seq: int, vocab: int, id_type: str):
    ids = TensorType((batch, seq), id_type)
    return Arg("tokens", ids, vocab), Arg("labels", ids, vocab)


def gpt(layers: int, hidden: int, heads: int, seq: int, vocab: int, batch: int,
        ffn: Optional[int] = None, dtype: str = "f32", id_type: str = "i32") -> str:
    """Returns a GPT-2 style (pre-LN, tied embeddings) model as MLIR text."""
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab, batch=batch, ffn=ffn)
    _check_types(dtype, id_type)
    _head_dim(hidden, heads)
    ffn = ffn or 4 * hidden
    proj_init = normal(0.02 / math.sqrt(2 * layers))
    module = Module()

    block = module.layer("block", [("x", TensorType((batch, seq, hidden), dtype))])
    x = block.args[0]
    n = _layer_norm(block, x, "ln_1")
    q, k, v = (_heads(block, _linear(block, n, f"attn.{p}", hidden, hidden, normal(0.02), True), heads, p)
               for p in "qkv")
    a = _merge_heads(block, block.attention(q, k, v, causal=True), "attn.out")
    x = block.add(x, _linear(block, a, "attn.proj", hidden, hidden, proj_init, True), hint="x")
    n = _layer_norm(block, x, "ln_2")
    h = block.gelu(_linear(block, n, "mlp.fc", hidden, ffn, normal(0.02), True), "tanh")
    x = block.add(x, _linear(block, h, "mlp.proj", ffn, hidden, proj_init, True), hint="x")
    block.yield_(x)

    def logits_of(body: Body, args: List[Value]) -> Value:
        wte = body.param("wte.weight", TensorType((vocab, hidden), dtype), normal(0.02))
        wpe = body.param("wpe.weight", TensorType((seq, hidden), dtype), normal(0.01))
        x = body.add(body.embedding(wte, args[0]), wpe, hint="x")
        h = body.repeat(block, [x], prefix="h", count=layers)
        return body.matmul(_layer_norm(body, h, "ln_f"), wte, transpose_b=True, hint="logits")

    tokens, labels = _token_args(batch, seq, vocab, id_type)
    return _entries(module, [tokens], labels, logits_of)


def llama_ffn(hidden: int) -> int:
    """The default Llama MLP width: 8H/3 rounded up to a multiple of 16."""
    return 16 * math.ceil(8 * hidden / 3 / 16)


def llama(layers: int, hidden: int, heads: int, seq: int, vocab: int, batch: int,
          kv_heads: Optional[int] = None, ffn: Optional[int] = None,
          dtype: str = "f32", id_type: str = "i32") -> str:
    """Returns a Llama style (RMSNorm, rotary, GQA, SwiGLU) model as MLIR text."""
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab, batch=batch,
                 kv_heads=kv_heads, ffn=ffn)
    _check_types(dtype, id_type)
    head_dim = _head_dim(hidden, heads)
    if head_dim % 2:
        raise ValueError(f"head dimension hidden/heads = {head_dim} must be even for rotary embeddings")
    kv_heads = kv_heads or heads
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be divisible by kv_heads ({kv_heads})")
    ffn = ffn or llama_ffn(hidden)
    init = normal(0.02)
    module = Module()

    layer = module.layer("decoder_layer", [("x", TensorType((batch, seq, hidden), dtype))])
    x = layer.args[0]
    n = _rms_norm(layer, x, "input_layernorm")

    def projection(name: str, count: int) -> Value:
        y = _linear(layer, n, f"self_attn.{name}_proj", hidden, count * head_dim, init, False)
        return _heads(layer, y, count, name)

    q = layer.rotary(projection("q", heads), ROTARY_BASE, hint="q")
    k = layer.rotary(projection("k", kv_heads), ROTARY_BASE, hint="k")
    v = projection("v", kv_heads)
    a = _merge_heads(layer, layer.attention(q, k, v, causal=True), "attn.out")
    o = _linear(layer, a, "self_attn.o_proj", heads * head_dim, hidden, init, False)
    x = layer.add(x, o, hint="x")
    n = _rms_norm(layer, x, "post_attention_layernorm")
    gate = layer.silu(_linear(layer, n, "mlp.gate_proj", hidden, ffn, init, False))
    up = _linear(layer, n, "mlp.up_proj", hidden, ffn, init, False)
    down = _linear(layer, layer.mul(gate, up, hint="swiglu"), "mlp.down_proj", ffn, hidden, init, False)
    layer.yield_(layer.add(x, down, hint="x"))

    def logits_of(body: Body, args: List[Value]) -> Value:
        table = body.param("embed_tokens.weight", TensorType((vocab, hidden), dtype), init)
        h = body.repeat(layer, [body.embedding(table, args[0])], prefix="layers", count=layers)
        return _linear(body, _rms_norm(body, h, "norm"), "lm_head", hidden, vocab, init, False)

    tokens, labels = _token_args(batch, seq, vocab, id_type)
    return _entries(module, [tokens], labels, logits_of)


def mlp(layers: int, hidden: int, vocab: int, batch: int,
        dtype: str = "f32", id_type: str = "i32") -> str:
    """Returns a ReLU MLP classifier (L layers H -> H, head H -> V) as MLIR text."""
    _check_sizes(layers=layers, hidden=hidden, vocab=vocab, batch=batch)
    _check_types(dtype, id_type)
    module = Module()

    layer = module.layer("layer", [("x", TensorType((batch, hidden), dtype))])
    y = _linear(layer, layer.args[0], "fc", hidden, hidden, normal(math.sqrt(2 / hidden)), True)
    layer.yield_(layer.relu(y))

    def logits_of(body: Body, args: List[Value]) -> Value:
        h = body.repeat(layer, [args[0]], prefix="layers", count=layers)
        return _linear(body, h, "head", hidden, vocab, normal(math.sqrt(1 / hidden)), True)

    x = Arg("x", TensorType((batch, hidden), dtype))
    labels = Arg("labels", TensorType((batch,), id_type), vocab)
    return _entries(module, [x], labels, logits_of)


# Options that only some kinds take, for a clearer error than "unrecognized".
_KIND_OPTIONS = {"--heads": "gpt and llama", "--seq": "gpt and llama", "--ffn": "gpt and llama",
                 "--kv-heads": "llama"}


def _parser():
    """Returns the top-level parser and the parser of each kind."""
    parser = argparse.ArgumentParser(
        prog="python3 -m braid.models",
        description="Print a GPT, Llama or MLP model as braid-dialect MLIR, with entry "
                    "functions @forward (mean cross-entropy loss) and @logits.",
        epilog="Run 'python3 -m braid.models KIND --help' for the options of one kind. Example: "
               "python3 -m braid.models llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 "
               "--seq 16 --vocab 128 --batch 2",
    )
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")

    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("model size")
    group.add_argument("--layers", type=int, required=True, metavar="L", help="number of layers")
    group.add_argument("--hidden", type=int, required=True, metavar="H", help="hidden (model) width")
    group.add_argument("--vocab", type=int, required=True, metavar="V",
                       help="vocabulary size (number of classes for mlp)")
    group.add_argument("--batch", type=int, required=True, metavar="B", help="batch size")
    types = common.add_argument_group("types and output")
    types.add_argument("--dtype", choices=FLOAT_TYPES, default="f32",
                       help="element type of parameters and activations (default: f32)")
    types.add_argument("--id-type", choices=INT_TYPES, default="i32",
                       help="element type of token ids and labels (default: i32)")
    types.add_argument("-o", "--output", metavar="FILE", help="write the module to FILE instead of stdout")

    def transformer(name: str, help: str, description: str, kv_heads: bool) -> argparse.ArgumentParser:
        sub = kinds.add_parser(name, parents=[common], help=help, description=description)
        group = sub.add_argument_group("transformer")
        group.add_argument("--heads", type=int, required=True, metavar="A", help="number of attention heads")
        if kv_heads:
            group.add_argument("--kv-heads", type=int, metavar="K",
                               help="number of key/value heads; must divide --heads (default: --heads)")
        group.add_argument("--seq", type=int, required=True, metavar="S", help="sequence length")
        group.add_argument("--ffn", type=int, metavar="F", help="MLP width (default: 4H for gpt, "
                           "8H/3 rounded up to a multiple of 16 for llama)")
        return sub

    gpt_parser = transformer("gpt", "GPT-2 style transformer",
                             "GPT-2 style pre-LN transformer with tied embeddings.", kv_heads=False)
    llama_parser = transformer("llama", "Llama style transformer",
                               "Llama style transformer: RMSNorm, rotary embeddings, grouped KV heads, "
                               "SwiGLU MLP.", kv_heads=True)
    mlp_parser = kinds.add_parser("mlp", parents=[common], help="ReLU MLP classifier",
                                  description="ReLU MLP classifier over a float input x [B, H]; labels [B].")
    return parser, {"gpt": gpt_parser, "llama": llama_parser, "mlp": mlp_parser}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser, kind_parsers = _parser()
    args, extra = parser.parse_known_args(argv)
    sub = kind_parsers[args.kind]
    for option in extra:
        name = option.split("=", 1)[0]
        if name in _KIND_OPTIONS:
            sub.error(f"{name} applies only to {_KIND_OPTIONS[name]}, not to {args.kind}")
    if extra:
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    sizes = dict(layers=args.layers, hidden=args.hidden, vocab=args.vocab, batch=args.batch,
                 dtype=args.dtype, id_type=args.id_type)
    try:
        if args.kind == "mlp":
            text = mlp(**sizes)
        elif args.kind == "gpt":
            text = gpt(heads=args.heads, seq=args.seq, ffn=args.ffn, **sizes)
        else:
            text = llama(heads=args.heads, seq=args.seq, ffn=args.ffn, kv_heads=args.kv_heads, **sizes)
    except ValueError as e:
        sub.error(str(e))
    if args.output:
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:
            print(f"python3 -m braid.models: error: cannot write {args.output}: "
                  f"{e.strerror}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
