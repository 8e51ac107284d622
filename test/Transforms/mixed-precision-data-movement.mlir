// RUN: braid-opt %s --braid-mixed-precision="precision=bf16-mixed" | FileCheck %s

// Ops that only move data (reshape, transpose, broadcast, slice, concat:
// the MovesDataOnly trait) and braid.shard follow their operand: a bf16
// matmul result stays bf16 through them, with no conversion, and so does
// what they give the next matmul; an f32 layer norm result stays f32
// through them and is converted once, where a matmul needs bf16.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @moves
// CHECK: %[[M:.*]] = braid.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = braid.reshape %[[M]] : (tensor<4x8xbf16>) -> tensor<2x16xbf16>
// CHECK-NEXT: %[[T:.*]] = braid.transpose %[[R]] {{.*}} : (tensor<2x16xbf16>) -> tensor<16x2xbf16>
// CHECK-NEXT: %[[S:.*]] = braid.slice %[[T]] {{.*}} : (tensor<16x2xbf16>) -> tensor<8x2xbf16>
// CHECK-NEXT: %[[C:.*]] = braid.concat %[[S]], %[[S]] {{.*}} : (tensor<8x2xbf16>, tensor<8x2xbf16>) -> tensor<8x4xbf16>
// CHECK-NEXT: %[[B:.*]] = braid.broadcast %[[C]] : (tensor<8x4xbf16>) -> tensor<2x8x4xbf16>
// CHECK-NEXT: %[[H:.*]] = braid.shard %[[B]] : tensor<2x8x4xbf16> to
// CHECK: braid.matmul %[[H]], {{.*}} -> tensor<2x8x8xbf16>
func.func @moves(%x: tensor<4x8xf32>) -> tensor<2x8x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<8x8xf32>
  %m = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = braid.reshape %m : (tensor<4x8xf32>) -> tensor<2x16xf32>
  %t = braid.transpose %r {permutation = array<i64: 1, 0>} : (tensor<2x16xf32>) -> tensor<16x2xf32>
  %s = braid.slice %t {start = array<i64: 0, 0>, limit = array<i64: 8, 2>} : (tensor<16x2xf32>) -> tensor<8x2xf32>
  %c = braid.concat %s, %s {axis = 1 : i64} : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x4xf32>
  %b = braid.broadcast %c : (tensor<8x4xf32>) -> tensor<2x8x4xf32>
  %h = braid.shard %b : tensor<2x8x4xf32> to #braid.sharding<@mesh, [["dp"], [], []]>
  %v = braid.param "v" {init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %o = braid.matmul %h, %v : (tensor<2x8x4xf32>, tensor<4x8xf32>) -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}

// CHECK-LABEL: func.func @stays_f32
// CHECK: %[[N:.*]] = braid.layer_norm {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = braid.reshape %[[N]] : (tensor<4x8xf32>) -> tensor<2x16xf32>
// CHECK-NEXT: %[[T:.*]] = braid.transpose %[[R]] {{.*}} : (tensor<2x16xf32>) -> tensor<16x2xf32>
// CHECK-NEXT: %[[S:.*]] = braid.slice %[[T]] {{.*}} : (tensor<16x2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = braid.concat %[[S]], %[[S]] {{.*}} : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = braid.broadcast %[[C]] : (tensor<8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[H:.*]] = braid.shard %[[B]] : tensor<2x8x4xf32> to
// CHECK-NEXT: %[[H16:.*]] = braid.convert %[[H]] : tensor<2x8x4xf32> to tensor<2x8x4xbf16>
// CHECK: braid.matmul %[[H16]], {{.*}} -> tensor<2x8x8xbf16>
func.func @stays_f32(%x: tensor<4x8xf32>) -> tensor<2x8x8xf32> {
  %g = braid.param "g" {init = #braid.init<ones>} : tensor<8xf32>
  %e = braid.param "e" {init = #braid.init<zeros>} : tensor<8xf32>
  %n = braid.layer_norm %x, %g, %e {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = braid.reshape %n : (tensor<4x8xf32>) -> tensor<2x16xf32>
  %t = braid.transpose %r {permutation = array<i64: 1, 0>} : (tensor<2x16xf32>) -> tensor<16x2xf32>
  %s = braid.slice %t {start = array<i64: 0, 0>, limit = array<i64: 8, 2>} : (tensor<16x2xf32>) -> tensor<8x2xf32>
  %c = braid.concat %s, %s {axis = 1 : i64} : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x4xf32>
  %b = braid.broadcast %c : (tensor<8x4xf32>) -> tensor<2x8x4xf32>
  %h = braid.shard %b : tensor<2x8x4xf32> to #braid.sharding<@mesh, [["dp"], [], []]>
  %v = braid.param "v" {init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %o = braid.matmul %h, %v : (tensor<2x8x4xf32>, tensor<4x8xf32>) -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}
