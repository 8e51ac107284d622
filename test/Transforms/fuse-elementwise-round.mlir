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
// storage, as braid-legalize-bf16 saves a value for the backward) joins
// the region computing the value, which yields the bf16 storage: the loop
// stores the value's 16 bits with the packing kernel's function
// (braid_rt_bf16_bits_of, on CUDA bf16Of), so no braid_rt_pack_bf16_f32
// pass over the value is left; the exp reading the rounded value joins
// the region after it.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
// CHECK: %[[S:.*]] = braid.add
// CHECK-NEXT: %[[SR:.*]] = braid.round %[[S]] to bf16
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[SR]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[E:.*]] = braid.exp %[[SR]]
// CHECK-NEXT: %[[ER:.*]] = braid.round %[[E]] to bf16
// CHECK-NEXT: braid.yield %[[P]], %[[ER]] : tensor<4x8xbf16>, tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#1, %[[R]]#0
// CPP: braid.fused: 5 ops over [4x8] in one loop nest
// CPP-SAME: uint16_t *out0;
// CPP-SAME: const float v1 = braid_rt_round_bf16_of(v0);\0A const uint16_t v2 = braid_rt_bf16_bits_of(v1);
// CPP-SAME: q0[j] = v2;\0A q1[j] = v4;
// CPP-NOT: braid_rt_pack_bf16_f32
// CUDA: uint16_t *out0
// CUDA-SAME: const uint16_t v2 = braid_rt_cuda::bf16Of(v1).bits;
// CUDA-SAME: out0[i] = v2;
// CUDA-NOT: braid_rt_pack_bf16_f32
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %0 = braid.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = braid.round %0 to bf16 : tensor<4x8xf32>
  %2 = braid.convert %1 : tensor<4x8xf32> to tensor<4x8xbf16>
  %3 = braid.exp %1 : tensor<4x8xf32>
  %4 = braid.round %3 to bf16 : tensor<4x8xf32>
  return %4, %2 : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// Tests that an unpack of bf16 storage (braid.convert to f32 of a saved
// value) starts a region that the ops reading its value join, so that the
// loop reads the 16 bits itself (braid_rt_float_of_bf16, on CUDA floatOf,
// the unpacking kernel's function) and no braid_rt_unpack_bf16_f32 pass is
// left.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]] = braid.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[U:.*]] = braid.convert %[[A]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[M:.*]] = braid.mul %[[U]], %[[B]]
// CHECK-NEXT: %[[MR:.*]] = braid.round %[[M]] to bf16
// CHECK-NEXT: braid.yield %[[MR]]
// CPP: braid.fused: 3 ops over [4x8] in one loop nest
// CPP-SAME: const uint16_t *in0;
// CPP-SAME: const uint16_t a0 = p0[j];\0A const float a1 = p1[j];\0A const float v0 = braid_rt_float_of_bf16(a0);\0A const float v1 = v0 * a1;
// CPP-NOT: braid_rt_unpack_bf16_f32
// CUDA: const uint16_t *in0
// CUDA-SAME: const float v0 = braid_rt_cuda::floatOf(braid_rt_cuda::BF16{a0});
// CUDA-NOT: braid_rt_unpack_bf16_f32
func.func @chain(%a: tensor<4x8xbf16>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = braid.convert %a : tensor<4x8xbf16> to tensor<4x8xf32>
  %1 = braid.mul %0, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = braid.round %1 to bf16 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests both around a row region, as in a bf16-mixed block's backward: a
// saved residual unpacked into the add before a layer_norm, the norm's
// rounded result packed for later, the region reading and writing the
// bf16 rows through typed row pointers.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>) {
// CHECK: braid.convert %{{.*}} : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.round
// CHECK-NEXT: braid.layer_norm
// CHECK-NEXT: braid.round
// CHECK-NEXT: braid.convert %{{.*}} : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
// CHECK-NEXT: braid.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#1, %[[R]]#0
// CPP: braid.fused: 6 ops over [2x8x16] row by row (1 row-wise)
// CPP-SAME: const uint16_t *p0 = c.in0 + r * 16;
// CPP-SAME: uint16_t *q1 = c.out1 + r * 16;
// CPP-SAME: const float v0 = braid_rt_float_of_bf16(p0[j]);
// CPP-SAME: { // braid.layer_norm
// CPP-SAME: const uint16_t v4 = braid_rt_bf16_bits_of(v3);\0A q1[j] = v4;
// CPP-NOT: braid_rt_{{(un)?}}pack_bf16_f32
// CUDA: const uint16_t *p0 = in0 + r * 16;
// CUDA-SAME: uint16_t *q1 = out1 + r * 16;
// CUDA-SAME: braid_rt_cuda::floatOf(braid_rt_cuda::BF16{p0[j]})
// CUDA-SAME: braid_rt_cuda::bf16Of(v3).bits
// CUDA-NOT: braid_rt_{{(un)?}}pack_bf16_f32
func.func @chain(%x16: tensor<2x8x16xbf16>, %h: tensor<2x8x16xf32>, %g: tensor<16xf32>, %beta: tensor<16xf32>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xf32>) {
  %x = braid.convert %x16 : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %0 = braid.add %x, %h : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %1 = braid.round %0 to bf16 : tensor<2x8x16xf32>
  %2 = braid.layer_norm %1, %g, %beta : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %3 = braid.round %2 to bf16 : tensor<2x8x16xf32>
  %4 = braid.convert %3 : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  return %4, %3 : tensor<2x8x16xbf16>, tensor<2x8x16xf32>
}

// -----

// Tests that conversions read by no region stay kernels of their own: an
// unpack into a matmul and a pack of its product (a region of one op is
// none: min-ops 2). An unpack whose value a matmul reads after an add has
// joined it is still fused: the region yields the f32 value too.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[U:.*]] = braid.convert %{{.*}} : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[U]], %[[U]]
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[M]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<8x8xbf16>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
// CHECK: braid.convert
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[N:.*]] = braid.matmul %[[R]]#0, %[[R]]#1
// CHECK-NEXT: return %[[P]], %[[N]]
// CPP: braid.fused: 2 ops over [8x8] in one loop nest
// CPP: call_opaque "braid_rt_unpack_bf16_f32"
// CPP: call_opaque "braid_rt_pack_bf16_f32"
// CUDA: braid.fused: 2 ops over [8x8] in one loop nest
// CUDA: call_opaque "braid_rt_unpack_bf16_f32"
// CUDA: call_opaque "braid_rt_pack_bf16_f32"
func.func @chain(%a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>, %c: tensor<8x8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xf32>) {
  %0 = braid.convert %a : tensor<8x8xbf16> to tensor<8x8xf32>
  %1 = braid.matmul %0, %0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = braid.convert %1 : tensor<8x8xf32> to tensor<8x8xbf16>
  %3 = braid.convert %b : tensor<8x8xbf16> to tensor<8x8xf32>
  %4 = braid.add %3, %c : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %5 = braid.matmul %3, %4 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %2, %5 : tensor<8x8xbf16>, tensor<8x8xf32>
}

// -----

// Tests that a pack of a value no region computes (a layer's input saved
// for the backward) joins the region reading that value whole, whose loop
// reads it anyway and now stores its 16 bits too; a pack of a value the
// region reads broadcast (%b) stays a kernel.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[PB:.*]] = braid.convert %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[PX:.*]] = braid.convert %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[S:.*]] = braid.add %[[X]], %[[B]]
// CHECK-NEXT: %[[SR:.*]] = braid.round %[[S]] to bf16
// CHECK-NEXT: braid.yield %[[PX]], %[[SR]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[PB]], %[[R]]#1
// CPP: braid.fused: 3 ops over [4x8] in one loop nest
// CPP-SAME: const uint16_t v0 = braid_rt_bf16_bits_of(a0);
// CPP: call_opaque "braid_rt_pack_bf16_f32"
// CUDA: braid.fused: 3 ops over [4x8] in one loop nest
// CUDA-SAME: const uint16_t v0 = braid_rt_cuda::bf16Of(a0).bits;
// CUDA: call_opaque "braid_rt_pack_bf16_f32"
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xf32>) {
  %0 = braid.convert %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %1 = braid.convert %b : tensor<8xf32> to tensor<8xbf16>
  %2 = braid.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = braid.round %2 to bf16 : tensor<4x8xf32>
  return %0, %1, %3 : tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xf32>
}

// -----

// Tests that a pack that cannot join the region it reads (of a loss,
// known only after every row) but whose value only leaves the function
// does not close that region: it moves after it, and the loss's gradient
// joins the loss's region.

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused
// CHECK: braid.cross_entropy
// CHECK-NEXT: braid.cross_entropy_grad
// CHECK-NEXT: braid.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[R]]#0 : tensor<f32> to tensor<bf16>
// CHECK-NEXT: return %[[P]], %[[R]]#1
func.func @chain(%x: tensor<4x8xf32>, %l: tensor<4xi32>, %g: tensor<f32>) -> (tensor<bf16>, tensor<4x8xf32>) {
  %0 = braid.cross_entropy %x, %l : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %1 = braid.convert %0 : tensor<f32> to tensor<bf16>
  %2 = braid.cross_entropy_grad %x, %l, %g : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  return %1, %2 : tensor<bf16>, tensor<4x8xf32>
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
