// The issue's GPT at full size (4 layers, hidden 128, 4 heads, sequence 64,
// vocabulary 256, global batch 16 = 4 micro-batches of 4): trained 10 AdamW
// steps (warm-up 2, cosine decay over 20, clipping) as dp2 x tp2 x pp2 on
// 8 ranks and saved, then resumed for 10 more by the program compiled
// separately for dp4 x pp2 (another layout of the same global batch), gives
// steps 10-19 (the 11th to the 20th) of the uninterrupted 20-step
// dp2 x tp2 x pp2 run within 1e-4 relative; the saving run's steps 0-9 are
// the uninterrupted run's too (measured: at most 6.6e-8 relative, mostly
// identical). braidc-checkpoint.mlir tests the same on a 2-layer GPT, and
// the refused checkpoints.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2,tp=2,pp=2 --microbatches 4 --lr 3e-3 --min-lr 3e-4 --warmup-steps 2 --total-steps 20 --decay cosine --clip-norm 1.0 -o %t.3d
// RUN: braidc %t.mlir --mesh dp=4,pp=2 --microbatches 4 --lr 3e-3 --min-lr 3e-4 --warmup-steps 2 --total-steps 20 --decay cosine --clip-norm 1.0 -o %t.dp4
//
// RUN: braid-run -n 8 %t.3d --steps 20 --seed 1 > %t.full
// RUN: braid-run -n 8 %t.3d --steps 10 --seed 1 --save %t.d/ck > %t.first
// RUN: braid-run -n 8 %t.dp4 --steps 10 --seed 1 --resume %t.d/ck > %t.second
// RUN: FileCheck %s --check-prefix=RESUMED < %t.second
// RESUMED: step 10 loss
// RESUMED: step 19 loss
// RESUMED-NEXT: summary: 10 steps
// RUN: %PYTHON %S/Inputs/compare-results.py %t.second %t.full --rtol 1e-4 --steps 10:20 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.first %t.full --rtol 1e-4 --steps 0:10 | FileCheck %s
// CHECK: ok: 10 losses within 0.0001
