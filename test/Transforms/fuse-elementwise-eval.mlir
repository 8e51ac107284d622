// Tests that braid-eval evaluates fused regions op by op, as the unfused
// program: the training steps of a GPT (bias add + tanh GELU, residual
// adds with the layer_norm after them, GELU gradient, norm gradients, the
// loss with its gradient) and of a Llama (SiLU x up, SiLU gradient,
// residual adds with RMS norms and their gradients) print the same losses and gradient norms to the last digit with
// and without braid-fuse-elementwise, rounding each op to f32 and (--f64)
// not at all, and leave byte-identical weights and optimizer state; the
// GPT's logits are the same, element by element. So does the GPT's
// bf16-mixed step (braid-legalize-bf16's roundings and its packs to and
// unpacks from bf16 storage in the regions), and @roundtrip, whose region
// packs a sum that no rounding precedes: a conversion in a region rounds
// to its result's type, bf16, as it does outside.
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
//
// RUN: braid-opt %t.gpt.mlir --braid-mixed-precision="precision=bf16-mixed" --braid-autodiff --braid-train-step --braid-legalize-bf16 -o %t.bf16.train.mlir
// RUN: braid-opt %t.bf16.train.mlir --braid-fuse-elementwise -o %t.bf16.fused.mlir
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.fused.mlir
// RUN: braid-eval %t.bf16.train.mlir --steps 3 --seed 2 --save-weights %t.bf16.plain.w > %t.bf16.plain
// RUN: braid-eval %t.bf16.fused.mlir --steps 3 --seed 2 --save-weights %t.bf16.fused.w > %t.bf16.fused
// RUN: diff %t.bf16.plain %t.bf16.fused
// RUN: cmp %t.bf16.plain.w %t.bf16.fused.w
// RUN: FileCheck %s --check-prefix=STEPS < %t.bf16.fused
//
// RUN: braid-opt %s --braid-fuse-elementwise -o %t.rt.mlir
// RUN: FileCheck %s --check-prefix=RT < %t.rt.mlir
// RUN: braid-eval %s --entry roundtrip --seed 3 --dump > %t.rt.plain
// RUN: braid-eval %t.rt.mlir --entry roundtrip --seed 3 --dump > %t.rt.fused
// RUN: diff %t.rt.plain %t.rt.fused

// GPT: {{^}}15{{$}}
// LLAMA: {{^}}14{{$}}
// STEPS: step 0 loss
// STEPS: step 2 loss

// Regions unpacking a saved value and packing one.
// BF16-DAG: braid.fused({{.*}}) : ({{.*}}xbf16>{{.*}}) -> {{.*}} {
// BF16-DAG: braid.fused({{.*}}) : ({{.*}}) -> ({{.*}}xbf16>{{.*}}) {

// RT: braid.fused
// RT: braid.convert %{{.*}} : tensor<4x96xf32> to tensor<4x96xbf16>
// RT-NEXT: braid.convert %{{.*}} : tensor<4x96xbf16> to tensor<4x96xf32>
// RT-NEXT: braid.mul
// RT-NEXT: braid.yield
func.func @roundtrip(%a: tensor<4x96xf32>, %b: tensor<4x96xf32>) -> tensor<4x96xf32> {
  %0 = braid.add %a, %b : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  %1 = braid.convert %0 : tensor<4x96xf32> to tensor<4x96xbf16>
  %2 = braid.convert %1 : tensor<4x96xbf16> to tensor<4x96xf32>
  %3 = braid.mul %2, %b : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  return %3 : tensor<4x96xf32>
}
