// Tests that braid-eval evaluates fused regions op by op, as the unfused
// program: the training steps of a GPT (bias add + tanh GELU, residual
// adds with the layer_norm after them, GELU gradient, norm gradients, the
// loss with its gradient) and of a Llama (SiLU x up, SiLU gradient,
// residual adds with RMS norms and their gradients) print the same losses and gradient norms to the last digit with
// and without braid-fuse-elementwise, rounding each op to f32 and (--f64)
// not at all, and leave byte-identical weights and optimizer state; the
// GPT's logits are the same, element by element.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-autodiff --braid-train-step -o %t.gpt.train.mlir
// RUN: braid-opt %t.gpt.train.mlir --braid-fuse-elementwise -o %t.gpt.fused.mlir
// RUN: grep -c "braid.fused" %t.gpt.fused.mlir | FileCheck %s --check-prefix=GPT
// RUN: braid-eval %t.gpt.train.mlir --steps 3 --seed 2 --save-weights %t.gpt.plain.w --save-optimizer-state %t.gpt.plain.s > %t.gpt.plain
// RUN: braid-eval %t.gpt.fused.mlir --steps 3 --seed 2 --save-weights %t.gpt.fused.w --save-optimizer-state %t.gpt.fused.s > %t.gpt.fused
// RUN: diff %t.gpt.plain %t.gpt.fused
// RUN: cmp %t.gpt.plain.w %t.gpt.fused.w
// RUN: cmp %t.gpt.plain.s %t.gpt.fused.s
// RUN: braid-opt %t.gpt.mlir --braid-fuse-elementwise -o %t.gpt.fwd.mlir
// RUN: braid-eval %t.gpt.mlir --entry logits --seed 2 --dump > %t.gpt.logits.plain
// RUN: braid-eval %t.gpt.fwd.mlir --entry logits --seed 2 --dump > %t.gpt.logits.fused
// RUN: diff %t.gpt.logits.plain %t.gpt.logits.fused
// RUN: braid-eval %t.gpt.train.mlir --steps 2 --seed 2 --f64 > %t.gpt.plain64
// RUN: braid-eval %t.gpt.fused.mlir --steps 2 --seed 2 --f64 > %t.gpt.fused64
// RUN: diff %t.gpt.plain64 %t.gpt.fused64
// RUN: FileCheck %s --check-prefix=STEPS < %t.gpt.fused
//
// RUN: %PYTHON -m braid.models llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --seq 16 --vocab 128 --batch 2 -o %t.llama.mlir
// RUN: braid-opt %t.llama.mlir --braid-autodiff --braid-train-step -o %t.llama.train.mlir
// RUN: braid-opt %t.llama.train.mlir --braid-fuse-elementwise -o %t.llama.fused.mlir
// RUN: grep -c "braid.fused" %t.llama.fused.mlir | FileCheck %s --check-prefix=LLAMA
// RUN: braid-eval %t.llama.train.mlir --steps 3 --seed 2 --save-weights %t.llama.plain.w > %t.llama.plain
// RUN: braid-eval %t.llama.fused.mlir --steps 3 --seed 2 --save-weights %t.llama.fused.w > %t.llama.fused
// RUN: diff %t.llama.plain %t.llama.fused
// RUN: cmp %t.llama.plain.w %t.llama.fused.w
// RUN: FileCheck %s --check-prefix=STEPS < %t.llama.fused

// GPT: {{^}}15{{$}}
// LLAMA: {{^}}14{{$}}
// STEPS: step 0 loss
// STEPS: step 2 loss
