// A fused q/k/v projection in the [h, 3h] layout (x . W, as a hand-written
// model or a JAX/Flax one stores it): the strided dimension is 1, not the
// leading one, so each device's share of a block is not contiguous in
// memory. Two layers of it, an output projection, and a mean-square loss.
// Used by Transforms/shard-fused-qkv.mlir and
// Integration/braidc-fused-qkv.mlir.

braid.layer @block(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %w = braid.param "in_proj" {init = #braid.init<normal(0.3)>} : tensor<16x48xf32>
  %h = braid.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
  %q = braid.slice %h {start = array<i64: 0, 0, 0>, limit = array<i64: 2, 8, 16>} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %k = braid.slice %h {start = array<i64: 0, 0, 16>, limit = array<i64: 2, 8, 32>} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %v = braid.slice %h {start = array<i64: 0, 0, 32>, limit = array<i64: 2, 8, 48>} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  %qh = braid.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %kh = braid.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %vh = braid.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %a = braid.attention %qh, %kh, %vh {causal, scale = 0.5 : f64} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %o = braid.reshape %a : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
  %wo = braid.param "out_proj" {init = #braid.init<normal(0.2)>} : tensor<16x16xf32>
  %y = braid.matmul %o, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %r = braid.add %x, %y : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  braid.yield %r : tensor<2x8x16xf32>
}

func.func @forward(%x: tensor<2x8x16xf32> {braid.name = "x"}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "layers", count = 2 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %sq = braid.mul %h, %h : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %l = braid.reduce mean %sq {axes = array<i64: 0, 1, 2>} : (tensor<2x8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
