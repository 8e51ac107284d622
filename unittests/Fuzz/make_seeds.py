"""Writes the braid-opt fuzzer's seeds into unittests/Fuzz/corpus/opt/.

    PYTHONPATH=python /usr/bin/python3 unittests/Fuzz/make_seeds.py

A seed is one byte choosing pipelines (bit i runs pipeline i of
fuzz_braid_opt.cpp) and then MLIR text: tiny models from braid.models, and
the chunks of a few small lit tests. Deterministic.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(HERE, "corpus", "opt")
MODELS = {
    "mlp": (0xFF, "mlp --layers 1 --hidden 8 --vocab 4 --batch 4"),
    "gpt": (0x1F, "gpt --layers 1 --hidden 8 --heads 2 --seq 4 --vocab 8 "
                  "--batch 2"),
    "llama": (0x2B, "llama --layers 1 --hidden 8 --heads 2 --kv-heads 1 "
                    "--seq 4 --vocab 8 --batch 2"),
}
# (lit test, pipelines): each "// -----" chunk becomes a seed.
TESTS = [
    ("test/Eval/Inputs/tiny.mlir", 0x83),
    ("test/Eval/Inputs/call.mlir", 0x81),
    ("test/Eval/Inputs/tied.mlir", 0x83),
    ("test/Transforms/partition.mlir", 0xC0),
    ("test/Transforms/propagate-sharding.mlir", 0xC0),
    ("test/Transforms/pipeline-outline.mlir", 0x88),
    ("test/Transforms/async-collectives.mlir", 0x85),
]


def write(name, pipelines, text):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([pipelines]) + text.encode())


os.makedirs(OUT, exist_ok=True)
for name, (pipelines, args) in MODELS.items():
    text = subprocess.run([sys.executable, "-m", "braid.models"] +
                          args.split(), check=True, capture_output=True,
                          text=True).stdout
    write(name, pipelines, text)
for path, pipelines in TESTS:
    with open(os.path.join(ROOT, path)) as f:
        chunks = f.read().split("// -----")
    base = os.path.splitext(os.path.basename(path))[0]
    for i, chunk in enumerate(chunks):
        # Only the IR: lit and FileCheck lines are noise to the fuzzer.
        lines = [l for l in chunk.splitlines() if not l.lstrip().startswith("//")]
        text = "\n".join(l for l in lines if l.strip()) + "\n"
        if len(text) <= 4096 and "func.func" in text:
            write("%s-%d" % (base, i), pipelines, text)
