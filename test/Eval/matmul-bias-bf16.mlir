// Tests that braid-eval computes a bf16 braid.matmul_bias as it computes the
// bf16 braid.matmul and bias add it replaces (isBF16BiasProduct): the
// product is held in f32, not rounded to bf16, until the bias is added, and
// the sum is rounded to f32, then to bf16, as the runtime's
// braid_rt_matmul_bias_bf16in_f32 (the bias added to the f32 sums) and the
// add's braid.round after it, and PyTorch's bf16 addmm (an f32 epilogue,
// then the conversion), compute it; with tanh GELU, the GELU reads the
// rounded sum. (Hand-written IR reaches it, or a model fused before
// braid-mixed-precision.)
//
// RUN: braid-eval %s --entry closed_form --dump | FileCheck %s
// RUN: braid-eval %s --entry closed_form_f32 --dump | FileCheck %s --check-prefix=F32
// RUN: braid-opt %s --braid-legalize-bf16 | braid-eval - --entry closed_form_f32 --dump | FileCheck %s --check-prefix=F32
// RUN: braid-eval %s --entry fused --seed 3 --dump | tail -n +2 > %t.fused
// RUN: braid-eval %s --entry unfused --seed 3 --dump | tail -n +2 > %t.unfused
// RUN: diff %t.fused %t.unfused
// RUN: braid-eval %s --entry fused --seed 3 --dump --f64 | tail -n +2 > %t.fused64
// RUN: braid-eval %s --entry unfused --seed 3 --dump --f64 | tail -n +2 > %t.unfused64
// RUN: diff %t.fused64 %t.unfused64

// 1 * 1 + 1 * 2^-8 is a tie between bf16 neighbours 1 and 1 + 2^-7 (which
// rounds to 1, the even one); adding 2^-9 first puts the sum above the tie.
// Rounded before the add, both results would be 1.
// CHECK: result 0: tensor<1x1xbf16>
// CHECK-NEXT: {{^ +}}1.0078125{{$}}
// CHECK: result 1: tensor<1x1xbf16>
// CHECK-NEXT: {{^ +}}1.0078125{{$}}
func.func @closed_form() -> (tensor<1x1xbf16>, tensor<1x1xbf16>) {
  %x = braid.constant dense<[[1.0, 1.0]]> : tensor<1x2xbf16>
  %w = braid.constant dense<[[1.0], [0.00390625]]> : tensor<2x1xbf16>
  %b = braid.constant dense<[0.001953125]> : tensor<1xbf16>
  %0 = braid.matmul_bias %x, %w, %b : (tensor<1x2xbf16>, tensor<2x1xbf16>, tensor<1xbf16>) -> tensor<1x1xbf16>
  %m = braid.matmul %x, %w : (tensor<1x2xbf16>, tensor<2x1xbf16>) -> tensor<1x1xbf16>
  %1 = braid.add %m, %b : (tensor<1x1xbf16>, tensor<1xbf16>) -> tensor<1x1xbf16>
  return %0, %1 : tensor<1x1xbf16>, tensor<1x1xbf16>
}

// 1 + 2^-8 + 2^-25 is above the same tie, but 2^-25 is a quarter of f32's
// spacing at 1: the f32 sum is 1 + 2^-8, the tie, which rounds to 1. Summed
// in double and rounded once to bf16, both would be 1 + 2^-7. The
// legalized program (each value f32, then braid.round to bf16: what the
// compiled code computes) gives the same 1.
// F32: result 0: tensor<1x1x{{bf16|f32}}>
// F32-NEXT: {{^ +}}1{{$}}
// F32: result 1: tensor<1x1x{{bf16|f32}}>
// F32-NEXT: {{^ +}}1{{$}}
func.func @closed_form_f32() -> (tensor<1x1xbf16>, tensor<1x1xbf16>) {
  %x = braid.constant dense<[[1.0, 1.0]]> : tensor<1x2xbf16>
  %w = braid.constant dense<[[1.0], [0.00390625]]> : tensor<2x1xbf16>
  %b = braid.constant dense<[2.98023223876953125e-08]> : tensor<1xbf16>
  %0 = braid.matmul_bias %x, %w, %b : (tensor<1x2xbf16>, tensor<2x1xbf16>, tensor<1xbf16>) -> tensor<1x1xbf16>
  %m = braid.matmul %x, %w : (tensor<1x2xbf16>, tensor<2x1xbf16>) -> tensor<1x1xbf16>
  %1 = braid.add %m, %b : (tensor<1x1xbf16>, tensor<1xbf16>) -> tensor<1x1xbf16>
  return %0, %1 : tensor<1x1xbf16>, tensor<1x1xbf16>
}

// Random inputs (the same for both entries: arguments are generated from
// the seed and their names): the fused ops give the unfused ones' values
// bit for bit, with and without GELU.
func.func @fused(%x: tensor<2x4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
  %0 = braid.matmul_bias %x, %w, %b {transpose_b} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
  %1 = braid.matmul_bias %x, %w, %b gelu tanh {transpose_b} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
  return %0, %1 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
}

func.func @unfused(%x: tensor<2x4x16xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
  %m0 = braid.matmul %x, %w {transpose_b} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  %0 = braid.add %m0, %b : (tensor<2x4x8xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
  %m1 = braid.matmul %x, %w {transpose_b} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  %a1 = braid.add %b, %m1 : (tensor<8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %1 = braid.gelu tanh %a1 : tensor<2x4x8xbf16>
  return %0, %1 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
}
