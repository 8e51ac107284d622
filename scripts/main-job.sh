#!/usr/bin/env bash
# Braid's main job at this stage: first, bring a PyTorch model: import a
# nanoGPT-style nn.Module (python/tests/nanogpt.py, plain PyTorch, standing
# in for the user's own) with braid.torch, check its loss with braid-eval,
# compile it with braidc for 4 CPU ranks as dp2 x tp2, train it from the
# module's weights on a token file (README.md's bytes) with braid-run; let
# the planner choose its plan for the same 4 ranks (braidc --mesh auto),
# train that and check that both plans give the same losses; export the
# trained weights back to a PyTorch state dict. Then generate a
# GPT model, evaluate its loss with the reference evaluator, derive its
# training step and train it on one batch,
# with the loss falling; split it into a 4-stage pipeline with a verified
# ZB-H1 schedule, and compile it with braidc for 8 CPU ranks as
# dp2 x tp2 x pp2 (ZB-H1) and train it with braid-run; last, let the planner
# choose the plan for 8 ranks (braidc --mesh auto --devices 8), print it and
# train it. Sets up everything it needs first.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/build.sh

out=${BRAID_OUT:-$root/build/main-job}
mkdir -p "$out"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

echo "== Importing a PyTorch nn.Module: nanoGPT-style (python/tests/nanogpt.py; 2 blocks, hidden 64, seq 32, vocab 128)"
gpt_args='{"vocab_size": 128, "block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64}'
PYTHONPATH="$PYTHONPATH:$root/python/tests" /usr/bin/python3 -m braid.torch nanogpt:make --args "$gpt_args" \
  --batch '{"idx": {"shape": [4, 32], "high": 128}, "targets": {"shape": [4, 32], "high": 128}}' \
  -o "$out/nanogpt.mlir" --weights "$out/nanogpt.safetensors" --checkpoint "$out/nanogpt.start"
echo "   $out/nanogpt.mlir: parameters under their state-dict names, the blocks one braid.repeat:"
grep -o 'braid.repeat @[a-z_]*(.*prefix = "[a-z.]*", count = [0-9]*' "$out/nanogpt.mlir" | sed 's/^/   /'
echo "== Its loss in braid-eval on the module's weights (PyTorch's within 1e-5, python/tests/test_torch_import.py)"
build/bin/braid-eval "$out/nanogpt.mlir" --weights "$out/nanogpt.safetensors"
echo "== Compiling it for 4 CPU ranks: dp2 x tp2 (attention heads, MLP and embeddings split over tp), 2 micro-batches"
build/bin/braidc "$out/nanogpt.mlir" --mesh dp=2,tp=2 --microbatches 2 --lr 3e-3 --clip-norm 1.0 \
  -o "$out/nanogpt-dptp"
echo "== A token file: README.md's ASCII bytes as uint16 tokens (vocabulary 128)"
/usr/bin/python3 -c "import sys, numpy as np; t = np.fromfile(sys.argv[1], np.uint8); \
t[t < 128].astype('<u2').tofile(sys.argv[2]); print('  ', (t < 128).sum(), 'tokens')" README.md "$out/nanogpt.tokens"
echo "== Training it 10 steps on 4 ranks from the module's weights (--resume the start checkpoint) on them (--data)"
build/bin/braid-run -n 4 "$out/nanogpt-dptp" --resume "$out/nanogpt.start" --steps 10 \
  --data "$out/nanogpt.tokens" --save "$out/nanogpt.trained" | tee "$out/nanogpt-dptp.log"
echo "== Letting the planner choose the plan for the same 4 ranks and global batch (braidc --mesh auto --devices 4)"
build/bin/braidc "$out/nanogpt.mlir" --mesh auto --devices 4 --global-batch 8 --lr 3e-3 --clip-norm 1.0 \
  -o "$out/nanogpt-auto"
echo "== Training the planner's plan 10 steps from the same weights on the same tokens"
build/bin/braid-run -n 4 "$out/nanogpt-auto" --resume "$out/nanogpt.start" --steps 10 \
  --data "$out/nanogpt.tokens" | tee "$out/nanogpt-auto.log"
echo "== Both plans compute the same training trajectory (losses within 1e-5 relative; reduction order differs)"
/usr/bin/python3 - "$out/nanogpt-dptp.log" "$out/nanogpt-auto.log" <<'PY'
import sys
def losses(path):
    return [float(line.split()[3]) for line in open(path) if line.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"   {len(a)} steps, largest relative difference {worst:.2e}")
sys.exit(0 if len(a) == len(b) == 10 and worst <= 1e-5 else 1)
PY
echo "== Exporting the trained weights back to a PyTorch state dict"
PYTHONPATH="$PYTHONPATH:$root/python/tests" /usr/bin/python3 -m braid.torch export "$out/nanogpt.trained" \
  nanogpt:make --args "$gpt_args" -o "$out/nanogpt.trained.pt"

echo "== Generating GPT (4 layers, hidden 128, 4 heads, seq 64, vocab 256, batch 4)"
/usr/bin/python3 -m braid.models gpt --layers 4 --hidden 128 --heads 4 \
  --seq 64 --vocab 256 --batch 4 -o "$out/gpt.mlir"
echo "   $out/gpt.mlir: $(wc -l < "$out/gpt.mlir") lines of braid IR"

echo "== Verifying with braid-opt"
build/bin/braid-opt "$out/gpt.mlir" > /dev/null

echo "== Evaluating the loss with braid-eval (seed 0; ln(256) = 5.545 is chance)"
build/bin/braid-eval "$out/gpt.mlir" --entry forward --seed 0 \
  --save-weights "$out/gpt.weights.safetensors" \
  --save-inputs "$out/gpt.inputs.safetensors"
echo "== Weights: $out/gpt.weights.safetensors, inputs: $out/gpt.inputs.safetensors"

echo "== Deriving the training step (autodiff with B/W split, AdamW, warm-up + cosine, clipping)"
build/bin/braid-opt "$out/gpt.mlir" --braid-autodiff \
  --braid-train-step="lr=3e-3 min-lr=3e-4 warmup-steps=5 total-steps=30 decay=cosine clip-norm=1.0" \
  --braid-cost-report -o "$out/gpt.train.mlir"

echo "== Training 30 steps on the saved batch with braid-eval"
build/bin/braid-eval "$out/gpt.train.mlir" --steps 30 --seed 0 \
  --inputs "$out/gpt.inputs.safetensors" \
  --save-weights "$out/gpt.trained.safetensors" \
  --save-optimizer-state "$out/gpt.optimizer.safetensors"
echo "== Trained weights: $out/gpt.trained.safetensors"

echo "== Pipelining: 4 stages, ZB-H1 over 8 micro-batches, verified and simulated"
build/bin/braid-opt "$out/gpt.mlir" --braid-pipeline-split="stages=4 report" \
  --braid-autodiff --braid-pipeline-outline \
  --braid-pipeline-schedule="schedule=zb-h1 microbatches=8 report" \
  -o "$out/gpt.pipelined.mlir" | grep -v "parameters:"

echo "== Compiling it for 8 CPU ranks: dp2 x tp2 x pp2, ZB-H1 over 4 micro-batches"
build/bin/braidc "$out/gpt.mlir" --mesh dp=2,tp=2,pp=2 --schedule zb-h1 \
  --microbatches 4 --lr 3e-3 --warmup-steps 2 --total-steps 20 --decay cosine \
  --clip-norm 1.0 --dump-dir "$out/gpt-3d.d" -o "$out/gpt-3d"
echo "   $out/gpt-3d (C++ in $out/gpt-3d.d/program.cpp)"
build/bin/braid-sched --schedule zb-h1 -p 2 -m 4 --svg "$out/gpt-3d.schedule.svg" > /dev/null
echo "   schedule picture: $out/gpt-3d.schedule.svg"
echo "== Training it 20 steps on 8 ranks (braid-run -n 8; rank 0 prints)"
build/bin/braid-run -n 8 "$out/gpt-3d" --steps 20 --seed 0

echo "== Planning it automatically for 8 ranks: braidc --mesh auto --devices 8 (global batch 16;"
echo "   the cost model on this machine's description for 8 ranks, share/braid/hardware/cpu-local-8ranks.json; docs/planner.md)"
build/bin/braidc "$out/gpt.mlir" --mesh auto --devices 8 --global-batch 16 --explain \
  --lr 3e-3 --warmup-steps 2 --total-steps 20 --decay cosine --clip-norm 1.0 -o "$out/gpt-auto"
echo "== Training the plan it chose 10 steps on 8 ranks"
build/bin/braid-run -n 8 "$out/gpt-auto" --steps 10 --seed 0
