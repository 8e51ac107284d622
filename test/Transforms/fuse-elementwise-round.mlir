// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | braid-opt --split-input-file | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | braid-opt --split-input-file --braid-lower-to-emitc="entry=chain" | FileCheck %s --check-prefix=CPP
// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | braid-opt --split-input-file --braid-lower-to-emitc="entry=chain target=cuda" | FileCheck %s --check-prefix=CUDA

// Tests that the roundings to bf16 braid-legalize-bf16 puts after each op
// of a bf16-mixed program join fused regions (FusedOp::isFusible), so the
// chain is one region as its f32 program's is: a bias add, its rounding,
// tanh GELU and its rounding, with both rounded values yielded. Code
// generation rounds inline with the rounding kernel's per-element function
// (braid_rt_round_bf16_of of elementwise_math.h, on CUDA kernel_math.h's
// roundBF16Of), so no braid_rt_round_bf16_f32 kernel call is left.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x8x16xf32>, %[[B:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[S:.*]] = braid.add %[[A]], %[[B]]
// CHECK-NEXT: %[[SR:.*]] = braid.round %[[S]] to bf16
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[SR]]
// CHECK-NEXT: %[[GR:.*]] = braid.round %[[G]] to bf16
// CHECK-NEXT: braid.yield %[[SR]], %[[GR]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
// (The region's C++ is one emitc.verbatim, on one line.)
// CPP: braid.fused: 4 ops over [2x8x16] in one loop nest
// CPP-SAME: const float v0 = a0 + a1;\0A const float v1 = braid_rt_round_bf16_of(v0);\0A const float v2 = braid_rt_gelu_tanh_of(v1);\0A const float v3 = braid_rt_round_bf16_of(v2);\0A q0[j] = v1;\0A q1[j] = v3;
// CPP-NOT: braid_rt_round_bf16_f32
// CUDA: const float v0 = __fadd_rn(a0, a1);\0A const float v1 = braid_rt_cuda::roundBF16Of(v0);\0A const float v2 = braid_rt_cuda::geluOf(v1, true);\0A const float v3 = braid_rt_cuda::roundBF16Of(v2);
// CUDA-NOT: braid_rt_round_bf16_f32
func.func @chain(%a: tensor<2x8x16xf32>, %b: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %0 = braid.add %a, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = braid.round %0 to bf16 : tensor<2x8x16xf32>
  %2 = braid.gelu tanh %1 : tensor<2x8x16xf32>
  %3 = braid.round %2 to bf16 : tensor<2x8x16xf32>
  return %1, %3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that a rounded residual add and the layer_norm reading it (f32:
// norms compute in f32) are one region computed row by row, with the
// norm's rounding after it, as braid-legalize-bf16 leaves a bf16-mixed
// transformer block.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x8x16xf32>, %[[H:.*]]: tensor<2x8x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[BETA:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[S:.*]] = braid.add %[[X]], %[[H]]
// CHECK-NEXT: %[[SR:.*]] = braid.round %[[S]] to bf16
// CHECK-NEXT: %[[N:.*]] = braid.layer_norm %[[SR]], %[[G]], %[[BETA]]
// CHECK-NEXT: %[[NR:.*]] = braid.round %[[N]] to bf16
// CHECK-NEXT: braid.yield %[[SR]], %[[NR]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
// CPP: row by row (1 row-wise)
// CPP-SAME: const float v1 = braid_rt_round_bf16_of(v0);
// CPP-SAME: { // braid.layer_norm
// CPP-SAME: const float v2 = braid_rt_round_bf16_of(t0[j]);\0A q1[j] = v2;
// CPP-NOT: braid_rt_round_bf16_f32
func.func @chain(%x: tensor<2x8x16xf32>, %h: tensor<2x8x16xf32>, %g: tensor<16xf32>, %beta: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %0 = braid.add %x, %h : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %1 = braid.round %0 to bf16 : tensor<2x8x16xf32>
  %2 = braid.layer_norm %1, %g, %beta : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %3 = braid.round %2 to bf16 : tensor<2x8x16xf32>
  return %1, %3 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that a bf16 pack of a rounded value (braid.convert to bf16
// storage, as braid-legalize-bf16 saves a value for the backward) stays
// out of the region, being no elementwise op of f32, but does not end it:
// its value only leaves the function, so it moves after the region, and
// the exp reading the rounded value and its rounding join the region.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused
// CHECK: braid.add
// CHECK-NEXT: braid.round %{{.*}} to bf16
// CHECK-NEXT: braid.exp
// CHECK-NEXT: braid.round %{{.*}} to bf16
// CHECK-NEXT: braid.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[R]]#0 : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: return %[[R]]#1, %[[P]]
// CPP: braid.fused: 4 ops over [4x8] in one loop nest
// CPP: "braid_rt_pack_bf16_f32"
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %0 = braid.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = braid.round %0 to bf16 : tensor<4x8xf32>
  %2 = braid.convert %1 : tensor<4x8xf32> to tensor<4x8xbf16>
  %3 = braid.exp %1 : tensor<4x8xf32>
  %4 = braid.round %3 to bf16 : tensor<4x8xf32>
  return %4, %2 : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// Tests that a use from outside whose value is read again in the function
// (here a matmul of the rounded sum) still ends the region: the exp after
// it starts another.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]] = braid.fused
// CHECK: braid.add
// CHECK-NEXT: braid.round %{{.*}} to bf16
// CHECK-NEXT: braid.yield
// CHECK-NEXT: }
// CHECK-NEXT: braid.matmul %[[R]], %[[R]]
// CHECK-NEXT: braid.fused
// CHECK: braid.exp
// CHECK-NEXT: braid.round %{{.*}} to bf16
// CHECK-NEXT: braid.yield
func.func @chain(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = braid.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = braid.round %0 to bf16 : tensor<8x8xf32>
  %2 = braid.matmul %1, %1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = braid.exp %1 : tensor<8x8xf32>
  %4 = braid.round %3 to bf16 : tensor<8x8xf32>
  return %4, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}
