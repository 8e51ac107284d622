// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc -verify-diagnostics

// Tests that an op without a lowering (here one of another dialect) is a
// located error, not a crash.
func.func @no_lowering(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'arith.addf' op has no lowering to EmitC yet}}
  %y = arith.addf %x, %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that collectives other than sums are refused.
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @max(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{reduces with 'max'; generated collectives sum only}}
  %y = braid.all_reduce max %x on @mesh ["dp"] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a group listing its axes out of the mesh's order is refused
// (the communicator orders its members row-major in mesh order).
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @order(%x: tensor<4x8xf32>) -> tensor<16x8xf32> {
  // expected-error@+1 {{lists its axes out of the mesh's order}}
  %y = braid.all_gather %x on @mesh ["tp", "dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// Tests that integer collectives that reduce, and i64 ones, are refused
// (gathering i32 ids is lowered: braid-lower-to-emitc-spmd.mlir).
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @ints(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+1 {{exchanges 'i32'; generated collectives take f32, and i32 where they only move data}}
  %y = braid.all_reduce sum %x on @mesh ["dp"] : tensor<4xi32>
  return %y : tensor<4xi32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @i64s(%x: tensor<4xi64>) -> tensor<8xi64> {
  // expected-error@+1 {{exchanges 'i64'; generated collectives take f32, and i32 where they only move data}}
  %y = braid.all_gather %x on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xi64>) -> tensor<8xi64>
  return %y : tensor<8xi64>
}

// -----

// Tests that element types the kernels do not take are refused.
// expected-error@+1 {{@f64 has a value of type 'tensor<4xf64>'; generated code handles statically shaped tensors of f32, i32 and i64 only}}
func.func @f64(%x: tensor<4xf64>, %y: tensor<4xf64>) -> tensor<4xf64> {
  %z = braid.add %x, %y : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %z : tensor<4xf64>
}

// -----

// Tests that a parameter declared twice with different types is refused.
func.func @tied(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = braid.param "w" {init = #braid.init<ones>} : tensor<4xf32>
  // expected-error@+1 {{declares parameter 'w' as 'tensor<2x2xf32>', but it was already declared as 'tensor<4xf32>'}}
  %b = braid.param "w" {init = #braid.init<ones>} : tensor<2x2xf32>
  %y = braid.add %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that two symbols that would be emitted under one C name are refused.
braid.layer @l.f(%x: tensor<4xf32>) -> tensor<4xf32> {
  braid.yield %x : tensor<4xf32>
}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = braid.repeat @l.f(%x) {count = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
// expected-error@+1 {{@l_f would be emitted as 'braid_l_f', the name of @l.f; rename one of them}}
func.func @l_f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that a layer repeating layers is lowered only when it is itself
// repeated without a prefix (its instances then name the same parameters):
// under prefix "x", @inner's "h.0.w" would be "x.0.h.0.w" in instance 0.
braid.layer @inner(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
braid.layer @outer(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = braid.repeat @inner(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  braid.yield %h : tensor<2x4xf32>
}
func.func @nested(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{repeats @outer under prefix 'x', but that layer repeats layers itself}}
  %y = braid.repeat @outer(%x) {prefix = "x", count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a layer repeating itself (through another layer) is refused,
// not followed forever.
braid.layer @ping(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = braid.repeat @pong(%x) {count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
braid.layer @pong(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{repeats @ping, which repeats itself through the layers it repeats}}
  %y = braid.repeat @ping(%x) {count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
func.func @cycle(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = braid.repeat @ping(%x) {count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
