// Tests that braidc compiles the GPT training step (autodiff, AdamW) to an
// executable whose losses over 8 steps equal braid-eval --steps' within 1e-4
// relative, with the step number fed to the 'step' argument.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step -o %t.train.mlir
// RUN: braidc %t.train.mlir --entry train_step -o %t.prog
// RUN: %t.prog --steps 8 --seed 3 > %t.out
// RUN: braid-eval %t.train.mlir --steps 8 --seed 3 > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.out %t.eval --rtol 1e-4 | FileCheck %s
// RUN: FileCheck %s --check-prefix=OUT < %t.out

// CHECK: ok: 8 losses within 0.0001

// OUT: step 0 loss {{[0-9.]+}} lr 0.0003 grad_norm {{[0-9.]+}}
// OUT: step 7 loss
