// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc -verify-diagnostics

// Tests that generated code holds bf16 only as storage, as
// braid-legalize-bf16 leaves it (training.md, "bf16 storage of saved
// values"): a bf16 value any op but a braid.convert or a braid.repeat
// reads or computes is a located error (a bf16 program lowered without
// braid-legalize-bf16), and so is a braid.convert other than the f32/bf16
// pack and unpack.

// The kernels compute in f32: a bf16 add is refused.
func.func @compute(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  // expected-error@+1 {{'braid.add' op has a value of type 'tensor<4xbf16>'; generated code holds bf16 only in storage (a braid.convert to or from f32, a fused region's conversions, a layer's stacked values)}}
  %z = braid.add %y, %y : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %w = braid.convert %z : tensor<4xbf16> to tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Moving data counts too: a bf16 reshape is refused.
func.func @move(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  %y = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  // expected-error@+1 {{'braid.reshape' op has a value of type 'tensor<4xbf16>'; generated code holds bf16 only in storage}}
  %z = braid.reshape %y : (tensor<4xbf16>) -> tensor<2x2xbf16>
  %w = braid.convert %z : tensor<2x2xbf16> to tensor<2x2xf32>
  return %w : tensor<2x2xf32>
}

// -----

// A conversion within bf16 is neither a pack nor an unpack.
func.func @bf16_to_bf16(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  // expected-error@+1 {{'braid.convert' op converts 'tensor<4xbf16>' to 'tensor<4xbf16>'; generated code converts between f32 and bf16 storage only}}
  %z = braid.convert %y : tensor<4xbf16> to tensor<4xbf16>
  %w = braid.convert %z : tensor<4xbf16> to tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Nor is one within f32 (braid-legalize-bf16 erases those).
func.func @f32_to_f32(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.convert' op converts 'tensor<4xf32>' to 'tensor<4xf32>'; generated code converts between f32 and bf16 storage only}}
  %y = braid.convert %x : tensor<4xf32> to tensor<4xf32>
  return %y : tensor<4xf32>
}
