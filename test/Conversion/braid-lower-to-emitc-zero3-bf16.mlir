// RUN: braid-opt %s --braid-lower-to-emitc=spmd -verify-diagnostics

// Tests that braid-lower-to-emitc refuses a layer that starts the gather of
// the next instance's bf16 working copy (a braid.round of the read marked
// braid.next_instance, as braid-legalize-bf16 leaves a braid.convert): the
// rounded copy is a buffer of this instance, which the next instance reuses
// while the gather may still read it (a share, a parameter slot, is
// started: braidc-zero3-prefetch.mlir). braid-zero3-prefetch
// makes no such layer: a working copy's gather stays in its instance.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>, %fw: !braid.future<tensor<8x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>) {
  %w = braid.wait %fw : !braid.future<tensor<8x8xf32>>
  %nw = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, braid.next_instance, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %nw16 = braid.round %nw to bf16 : tensor<4x8xf32>
  // expected-error@+1 {{starts a collective for the next layer instance on a value computed in this one}}
  %sw = braid.all_gather_start %nw16 on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<8x8xf32>>
  %h = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %h, %sw : tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %w = braid.param "h.0.w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %w16 = braid.round %w to bf16 : tensor<4x8xf32>
  %sw = braid.all_gather_start %w16 on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<8x8xf32>>
  %r:2 = braid.repeat @block(%x, %sw) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>)
  return %r#0 : tensor<2x8xf32>
}
