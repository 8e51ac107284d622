// Tests that braidc compiles Llama (rotary, RMSNorm, SiLU, grouped KV heads)
// forward and training step, and that the losses equal braid-eval's (1e-5
// forward, 1e-4 over 4 training steps).
//
// RUN: %PYTHON -m braid.models llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --seq 16 --vocab 128 --batch 2 -o %t.mlir
// RUN: braidc %t.mlir -o %t.fwd
// RUN: %t.fwd --seed 4 > %t.fwd.out
// RUN: braid-eval %t.mlir --seed 4 > %t.fwd.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.fwd.out %t.fwd.eval --rtol 1e-5 | FileCheck %s --check-prefix=FWD
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step -o %t.train.mlir
// RUN: braidc %t.train.mlir --entry train_step -o %t.train
// RUN: %t.train --steps 4 --seed 4 > %t.train.out
// RUN: braid-eval %t.train.mlir --steps 4 --seed 4 > %t.train.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.train.out %t.train.eval --rtol 1e-4 | FileCheck %s --check-prefix=TRAIN

// FWD: ok: 1 losses within 1e-05
// TRAIN: ok: 4 losses within 0.0001
