"""Tests `python3 -m braid.models` and the braid.models API (no Braid build needed)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from braid import models
from model_ir import param_shapes

PYTHON_DIR = Path(__file__).resolve().parents[1]

GPT = ["gpt", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "16", "--vocab", "128", "--batch", "2"]
LLAMA = ["llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "16",
         "--vocab", "128", "--batch", "2"]
MLP = ["mlp", "--layers", "2", "--hidden", "32", "--vocab", "10", "--batch", "4"]
COMMANDS = {"gpt": GPT, "llama": LLAMA, "mlp": MLP}


def _expand(globals_, layer, prefix, layers):
    return {**globals_, **{f"{prefix}.{i}.{n}": s for i in range(layers) for n, s in layer.items()}}


# Full parameter name -> shape, for the GPT, LLAMA and MLP commands above.
GPT_BLOCK = {
    "ln_1.weight": (64,), "ln_1.bias": (64,), "ln_2.weight": (64,), "ln_2.bias": (64,),
    **{f"attn.{p}.weight": (64, 64) for p in ("q", "k", "v", "proj")},
    **{f"attn.{p}.bias": (64,) for p in ("q", "k", "v", "proj")},
    "mlp.fc.weight": (64, 256), "mlp.fc.bias": (256,), "mlp.proj.weight": (256, 64), "mlp.proj.bias": (64,),
}
LLAMA_LAYER = {
    "input_layernorm.weight": (64,), "post_attention_layernorm.weight": (64,),
    "self_attn.q_proj.weight": (64, 64), "self_attn.k_proj.weight": (64, 32),
    "self_attn.v_proj.weight": (64, 32), "self_attn.o_proj.weight": (64, 64),
    "mlp.gate_proj.weight": (64, 176), "mlp.up_proj.weight": (64, 176), "mlp.down_proj.weight": (176, 64),
}
EXPECTED_PARAMS = {
    "gpt": _expand({"wte.weight": (128, 64), "wpe.weight": (16, 64), "ln_f.weight": (64,), "ln_f.bias": (64,)},
                   GPT_BLOCK, "h", 2),
    "llama": _expand({"embed_tokens.weight": (128, 64), "norm.weight": (64,), "lm_head.weight": (64, 128)},
                     LLAMA_LAYER, "layers", 2),
    "mlp": _expand({"head.weight": (32, 10), "head.bias": (10,)},
                   {"fc.weight": (32, 32), "fc.bias": (32,)}, "layers", 2),
}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "braid.models", *args], cwd=PYTHON_DIR,
                          capture_output=True, text=True, timeout=60)


def generate(*args) -> str:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _replace(args, option, value):
    args = list(args)
    args[args.index(option) + 1] = value
    return args


def _without(args, option):
    i = args.index(option)
    return args[:i] + args[i + 2 :]


@pytest.mark.parametrize("kind", COMMANDS)
def test_generates_each_kind(kind):
    text = generate(*COMMANDS[kind])
    assert len(re.findall(r"^braid\.layer @", text, re.M)) == 1
    assert re.search(r"^func\.func @forward\(", text, re.M)
    assert re.search(r"^func\.func @logits\(", text, re.M)
    assert text.count("braid.repeat @") == 2
    params = param_shapes(text)
    assert params["forward"] == EXPECTED_PARAMS[kind]
    assert params["logits"] == params["forward"]


def test_signatures():
    assert re.search(
        r'func\.func @forward\(%tokens: tensor<2x16xi32> \{braid\.name = "tokens", braid\.range = 128 : i64\}, '
        r'%labels: tensor<2x16xi32> \{braid\.name = "labels", braid\.range = 128 : i64\}\) -> tensor<f32> \{',
        generate(*GPT))
    assert re.search(r"func\.func @logits\(%tokens: tensor<2x16xi32> .*\) -> tensor<2x16x128xf32> \{",
                     generate(*LLAMA))
    mlp = generate(*MLP)
    assert re.search(r'func\.func @forward\(%x: tensor<4x32xf32> \{braid\.name = "x"\}, '
                     r'%labels: tensor<4xi32> \{braid\.name = "labels", braid\.range = 10 : i64\}\)', mlp)
    assert re.search(r"func\.func @logits\(%x: .*\) -> tensor<4x10xf32> \{", mlp)


def _types(text):
    return re.findall(r"tensor<[^>]*>", text)


@pytest.mark.parametrize("kind", COMMANDS)
def test_every_op_has_full_types(kind):
    """Each op states a type per operand and result (or one type when they are all equal)."""
    for line in generate(*COMMANDS[kind]).splitlines():
        m = re.match(r"\s+(?:%\S+ = )?(braid\.\w+|return)(.*) : (.*)$", line)
        if not m:
            assert not re.match(r"\s+(%|braid\.|return)", line), f"op without types: {line}"
            continue
        op, operands, types = m[1], re.findall(r"%[\w.$#-]+", m[2]), m[3]
        if types.startswith("("):
            ins, outs = types.split(") -> ")
            assert len(_types(ins)) == len(operands), line
            assert len(_types(outs)) == 1, line
        elif op in ("braid.yield", "return"):
            assert len(_types(types)) == len(operands), line
        else:
            assert len(_types(types)) == 1 and len(operands) <= 1, line


@pytest.mark.parametrize("kind", COMMANDS)
def test_ir_size_does_not_grow_with_depth(kind):
    def at_depth(layers):
        return generate(*_replace(COMMANDS[kind], "--layers", str(layers))).splitlines()

    shallow, deep = at_depth(4), at_depth(48)
    assert len(shallow) == len(deep)
    changed = [(a, b) for a, b in zip(shallow, deep) if a != b]
    for a, b in changed:
        assert "count = 4 : i64" in a or "init = #braid.init<normal(" in a, (a, b)


def test_dtype_and_id_type():
    text = generate(*LLAMA, "--dtype", "bf16", "--id-type", "i64")
    assert "f32" not in text and "i32" not in text
    assert "tensor<2x16x64xbf16>" in text and "tensor<2x16xi64>" in text
    assert re.search(r"braid\.cross_entropy .* -> tensor<bf16>", text)
    assert "tensor<4x32xf64>" in generate(*MLP, "--dtype", "f64")


def test_defaults_and_ffn():
    assert "tensor<64x256xf32>" in generate(*GPT)  # 4H
    assert "tensor<64x176xf32>" in generate(*LLAMA)  # 8H/3 = 170.7 -> 176
    assert "tensor<64x100xf32>" in generate(*GPT, "--ffn", "100")
    # Without --kv-heads every head has its own K and V.
    text = generate(*_without(LLAMA, "--kv-heads"))
    assert "self_attn.k_proj.weight\" {init = #braid.init<normal(0.02)>} : tensor<64x64xf32>" in text


def test_gpt_structure():
    text = generate(*GPT)
    assert re.search(r"braid\.matmul %\S+, %wte\.weight \{transpose_b\} : \(tensor<2x16x64xf32>, "
                     r"tensor<128x64xf32>\) -> tensor<2x16x128xf32>", text)
    assert re.search(r"braid\.add %\S+, %wpe\.weight : \(tensor<2x16x64xf32>, tensor<16x64xf32>\)", text)
    assert "braid.attention" in text and "{causal}" in text and "braid.gelu tanh %" in text
    # Residual projections are scaled by 1/sqrt(2L): 0.02 / sqrt(4).
    assert text.count('"attn.proj.weight" {init = #braid.init<normal(0.01)>}') == 1
    assert text.count('"mlp.proj.weight" {init = #braid.init<normal(0.01)>}') == 1


def test_llama_structure():
    text = generate(*LLAMA)
    assert text.count("braid.rotary") == 2 and "{base = 10000.0 : f64}" in text
    assert re.search(r"braid\.attention .*\{causal\} : \(tensor<2x16x4x16xf32>, tensor<2x16x2x16xf32>, "
                     r"tensor<2x16x2x16xf32>\) -> tensor<2x16x4x16xf32>", text)
    assert "braid.silu" in text and "braid.rms_norm" in text and "bias" not in text


def test_output_file(tmp_path):
    out = tmp_path / "model.mlir"
    proc = run_cli(*MLP, "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert out.read_text() == generate(*MLP)


@pytest.mark.parametrize("where", ["missing-dir", "a-directory"])
def test_unwritable_output_file(tmp_path, where):
    """An output path that cannot be written is an error naming it, status
    1 (it ended in a traceback)."""
    out = tmp_path / "missing" / "model.mlir" if where == "missing-dir" else tmp_path
    proc = run_cli(*MLP, "-o", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"python3 -m braid.models: error: cannot write {out}: "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_api_matches_cli():
    assert models.gpt(layers=2, hidden=64, heads=4, seq=16, vocab=128, batch=2) == generate(*GPT)
    assert models.llama(layers=2, hidden=64, heads=4, kv_heads=2, seq=16, vocab=128, batch=2) == generate(*LLAMA)
    assert models.mlp(layers=2, hidden=32, vocab=10, batch=4) == generate(*MLP)


def test_help():
    proc = run_cli("--help")
    assert proc.returncode == 0 and all(k in proc.stdout for k in ("gpt", "llama", "mlp"))
    proc = run_cli("llama", "--help")
    assert proc.returncode == 0 and "--kv-heads" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (_replace(GPT, "--hidden", "65"), "hidden (65) must be divisible by heads (4)"),
        (_replace(LLAMA, "--kv-heads", "3"), "heads (4) must be divisible by kv_heads (3)"),
        (_replace(_replace(LLAMA, "--hidden", "36"), "--kv-heads", "4"), "must be even for rotary"),
        (_replace(GPT, "--layers", "0"), "layers must be a positive integer"),
        (_replace(LLAMA, "--seq", "-3"), "seq must be a positive integer"),
        (_replace(MLP, "--vocab", "0"), "vocab must be a positive integer"),
        (GPT + ["--ffn", "0"], "ffn must be a positive integer"),
        (GPT + ["--kv-heads", "2"], "--kv-heads applies only to llama"),
        (MLP + ["--heads", "4"], "--heads applies only to gpt and llama"),
        (MLP + ["--seq=8"], "--seq applies only to gpt and llama"),
        (GPT + ["--bogus"], "unrecognized arguments: --bogus"),
        (_without(GPT, "--seq"), "required: --seq"),
        (GPT + ["--dtype", "f8"], "invalid choice: 'f8'"),
        (GPT + ["--id-type", "i16"], "invalid choice: 'i16'"),
        (_replace(GPT, "--hidden", "sixty"), "invalid int value"),
        (["transformer"], "invalid choice: 'transformer'"),
        ([], "required: KIND"),
    ],
    ids=["hidden-heads", "heads-kv-heads", "odd-head-dim", "zero-layers", "negative-seq", "zero-vocab",
         "zero-ffn", "kv-heads-for-gpt", "heads-for-mlp", "seq-for-mlp", "unknown-option", "missing-seq",
         "bad-dtype", "bad-id-type", "non-integer", "bad-kind", "no-kind"],
)
def test_bad_configs(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert message in proc.stderr


def test_api_rejects_bad_configs():
    with pytest.raises(ValueError, match="divisible"):
        models.gpt(layers=2, hidden=64, heads=5, seq=16, vocab=128, batch=2)
    with pytest.raises(ValueError, match="dtype"):
        models.mlp(layers=2, hidden=32, vocab=10, batch=4, dtype="f8")
