// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc=spmd -verify-diagnostics

// Tests that braid-lower-to-emitc refuses a layer that yields, as the
// future it carries to its next instance, a collective it cannot start
// there. The repeat gives the last instance no site for a carried future
// (there is no next instance to wait for it), and only the start of the
// next instance's parameter share (braid-zero3-prefetch across-repeats,
// braidc-zero3-prefetch.mlir) checks for that. Before, every other such
// start was lowered unguarded on that null site, and the program crashed
// in the last instance (the first case, compiled with braidc --entry g and
// run on 2 ranks, ended with a segmentation fault). braid-zero3-prefetch
// makes none of these layers.

// The instance's own share, not the next instance's (no
// braid.next_instance).
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>, %fw: !braid.future<tensor<8x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>) {
  %w = braid.wait %fw : !braid.future<tensor<8x8xf32>>
  %own = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  // expected-error@+1 {{starts a future the layer carries to its next instance, but not on the next instance's parameter share}}
  %sw = braid.all_gather_start %own on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<8x8xf32>>
  %h = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %h, %sw : tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %w = braid.param "h.0.w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %sw = braid.all_gather_start %w on @mesh ["dp"] {dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<8x8xf32>>
  %r:2 = braid.repeat @block(%x, %sw) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<8x8xf32>>)
  return %r#0 : tensor<2x8xf32>
}

// -----

// A value computed in the instance: a sum of its activation.
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>, %fh: !braid.future<tensor<2x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<2x8xf32>>) {
  %s = braid.wait %fh : !braid.future<tensor<2x8xf32>>
  %h = braid.add %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // expected-error@+1 {{starts a future the layer carries to its next instance, but not on the next instance's parameter share}}
  %sh = braid.all_reduce_start sum %h on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  braid.yield %h, %sh : tensor<2x8xf32>, !braid.future<tensor<2x8xf32>>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %sx = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %r:2 = braid.repeat @block(%x, %sx) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>, !braid.future<tensor<2x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<2x8xf32>>)
  return %r#0 : tensor<2x8xf32>
}

// -----

// The next instance's share, but compressed (braid-compress-gradients):
// its call has no guard for the last instance either.
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>, %fw: !braid.future<tensor<4x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<4x8xf32>>) {
  %w = braid.wait %fw : !braid.future<tensor<4x8xf32>>
  %nw = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, braid.next_instance, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  // expected-error@+1 {{is compressed and started for the next layer instance}}
  %sw = braid.all_reduce_start sum %nw on @mesh ["dp"] {braid.compress = "bf16"} : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  %h = braid.matmul %x, %w {transpose_b} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %z = braid.concat %h, %h {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  braid.yield %z, %sw : tensor<2x8xf32>, !braid.future<tensor<4x8xf32>>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %w = braid.param "h.0.w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %sw = braid.all_reduce_start sum %w on @mesh ["dp"] : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  %r:2 = braid.repeat @block(%x, %sw) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>, !braid.future<tensor<4x8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<4x8xf32>>)
  return %r#0 : tensor<2x8xf32>
}
