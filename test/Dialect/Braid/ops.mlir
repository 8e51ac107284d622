// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// Tests that parameters, layers and repeat round-trip.

// CHECK-LABEL: braid.layer @block
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32>
braid.layer @block(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[W:.*]] = braid.param "fc.weight" {init = #braid.init<normal(2.000000e-02)>} : tensor<4x4xf32>
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  // CHECK: braid.param "fc.bias" {init = #braid.init<zeros>} : tensor<4xf32>
  %b = braid.param "fc.bias" {init = #braid.init<zeros>} : tensor<4xf32>
  // CHECK: braid.param "u" {init = #braid.init<uniform(-1.000000e-01, 1.000000e-01)>} : tensor<4xf32>
  %u = braid.param "u" {init = #braid.init<uniform(-0.1, 0.1)>} : tensor<4xf32>
  // CHECK: braid.param "c" {init = #braid.init<constant(5.000000e-01)>} : tensor<4xf32>
  %c = braid.param "c" {init = #braid.init<constant(0.5)>} : tensor<4xf32>
  // CHECK: braid.param "o" {init = #braid.init<ones>} : tensor<4xf32>
  %o = braid.param "o" {init = #braid.init<ones>} : tensor<4xf32>
  // CHECK: %[[M:.*]] = braid.matmul %[[X]], %[[W]] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %m = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y = braid.add %m, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: braid.yield %{{.*}} : tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @layers
func.func @layers(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: braid.repeat @block(%{{.*}}) {count = 3 : i64, first = 2 : i64, prefix = "h"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = braid.repeat @block(%x) {prefix = "h", count = 3 : i64, first = 2 : i64}
      : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// Tests that a repeat's instance names round-trip.

// CHECK-LABEL: func.func @named_instances
func.func @named_instances(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: braid.repeat @block(%{{.*}}) {count = 2 : i64, instance_names = ["encoder_layer_0", "encoder_layer_1"], prefix = "encoder.layers"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = braid.repeat @block(%x) {prefix = "encoder.layers", count = 2 : i64,
                                instance_names = ["encoder_layer_0", "encoder_layer_1"]}
      : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// Tests that the linear-algebra and elementwise ops round-trip.

// CHECK-LABEL: func.func @arith
func.func @arith(%a: tensor<3x2x4xf32>, %b: tensor<5x4xf32>, %c: tensor<3x4x5xf32>,
                 %v: tensor<4xf32>, %m5: tensor<5xf32>) {
  // CHECK: braid.matmul %{{.*}}, %{{.*}} {transpose_b} : (tensor<3x2x4xf32>, tensor<5x4xf32>) -> tensor<3x2x5xf32>
  %0 = braid.matmul %a, %b {transpose_b} : (tensor<3x2x4xf32>, tensor<5x4xf32>) -> tensor<3x2x5xf32>
  // CHECK: braid.matmul %{{.*}}, %{{.*}} : (tensor<3x2x4xf32>, tensor<3x4x5xf32>) -> tensor<3x2x5xf32>
  %1 = braid.matmul %a, %c : (tensor<3x2x4xf32>, tensor<3x4x5xf32>) -> tensor<3x2x5xf32>
  // CHECK: braid.matmul %{{.*}}, %{{.*}} {transpose_a} : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %2 = braid.matmul %c, %c {transpose_a} : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  // CHECK: braid.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : (tensor<3x2x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x2x5xf32>
  %mb = braid.matmul_bias %a, %b, %m5 {transpose_b} : (tensor<3x2x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x2x5xf32>
  // CHECK: braid.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} gelu tanh : (tensor<3x2x4xf32>, tensor<3x4x5xf32>, tensor<5xf32>) -> tensor<3x2x5xf32>
  %mg = braid.matmul_bias %a, %c, %m5 gelu tanh : (tensor<3x2x4xf32>, tensor<3x4x5xf32>, tensor<5xf32>) -> tensor<3x2x5xf32>
  // CHECK: braid.add {{.*}} : (tensor<3x2x4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
  %3 = braid.add %a, %v : (tensor<3x2x4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
  // CHECK: braid.sub
  %4 = braid.sub %v, %a : (tensor<4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  // CHECK: braid.mul
  %5 = braid.mul %a, %a : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  // CHECK: braid.div
  %6 = braid.div %a, %v : (tensor<3x2x4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
  // CHECK: braid.neg %{{.*}} : tensor<4xf32>
  %7 = braid.neg %v : tensor<4xf32>
  // CHECK: braid.exp
  %8 = braid.exp %v : tensor<4xf32>
  // CHECK: braid.sqrt
  %9 = braid.sqrt %v : tensor<4xf32>
  // CHECK: braid.rsqrt
  %10 = braid.rsqrt %v : tensor<4xf32>
  // CHECK: braid.relu
  %11 = braid.relu %v : tensor<4xf32>
  // CHECK: braid.silu
  %12 = braid.silu %v : tensor<4xf32>
  // CHECK: braid.gelu tanh %{{.*}} : tensor<4xf32>
  %13 = braid.gelu tanh %v : tensor<4xf32>
  // CHECK: braid.gelu exact %{{.*}} : tensor<4xf32>
  %14 = braid.gelu exact %v : tensor<4xf32>
  return
}

// Tests that the model ops round-trip, in every element type.

// CHECK-LABEL: func.func @model
func.func @model(%x: tensor<2x8x4x16xbf16>, %kv: tensor<2x8x2x16xbf16>,
                 %h: tensor<2x8x64xf16>, %g: tensor<64xf16>,
                 %table: tensor<100x64xf16>, %ids: tensor<2x8xi64>,
                 %labels: tensor<2x8xi32>) {
  // CHECK: braid.softmax %{{.*}} {axis = 2 : i64} : tensor<2x8x64xf16>
  %0 = braid.softmax %h {axis = 2 : i64} : tensor<2x8x64xf16>
  // CHECK: braid.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x8x64xf16>, tensor<64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  %1 = braid.layer_norm %h, %g, %g {epsilon = 1.0e-06 : f64}
      : (tensor<2x8x64xf16>, tensor<64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  // CHECK: braid.rms_norm %{{.*}}, %{{.*}} : (tensor<2x8x64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  %2 = braid.rms_norm %h, %g : (tensor<2x8x64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  // CHECK: braid.embedding %{{.*}}, %{{.*}} : (tensor<100x64xf16>, tensor<2x8xi64>) -> tensor<2x8x64xf16>
  %3 = braid.embedding %table, %ids : (tensor<100x64xf16>, tensor<2x8xi64>) -> tensor<2x8x64xf16>
  // CHECK: braid.rotary %{{.*}} {base = 5.000000e+05 : f64} : tensor<2x8x4x16xbf16>
  %4 = braid.rotary %x {base = 500000.0 : f64} : tensor<2x8x4x16xbf16>
  // CHECK: braid.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> tensor<2x8x4x16xbf16>
  %5 = braid.attention %x, %kv, %kv {causal}
      : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> tensor<2x8x4x16xbf16>
  // CHECK: braid.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64}
  %6 = braid.attention %x, %kv, %kv {scale = 0.125 : f64}
      : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> tensor<2x8x4x16xbf16>
  // CHECK: braid.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x64xf16>, tensor<2x8xi32>) -> tensor<f16>
  %7 = braid.cross_entropy %h, %labels : (tensor<2x8x64xf16>, tensor<2x8xi32>) -> tensor<f16>
  return
}

// Tests that the shape ops and constants round-trip.

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>) {
  // CHECK: braid.reshape %{{.*}} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %0 = braid.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: braid.reshape %{{.*}} : (tensor<2x3xi32>) -> tensor<6xi32>
  %1 = braid.reshape %ids : (tensor<2x3xi32>) -> tensor<6xi32>
  // CHECK: braid.transpose %{{.*}} {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %2 = braid.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: braid.reduce sum %{{.*}} {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %3 = braid.reduce sum %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  // CHECK: braid.reduce mean %{{.*}} {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  %4 = braid.reduce mean %x {axes = array<i64: 0, 2>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  // CHECK: braid.reduce max
  %5 = braid.reduce max %x {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK: braid.broadcast %{{.*}} : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  %6 = braid.broadcast %x : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  // CHECK: braid.slice %{{.*}} {limit = array<i64: 2, 3, 4>, start = array<i64: 1, 0, 1>, stride = array<i64: 1, 2, 2>} : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  %7 = braid.slice %x {start = array<i64: 1, 0, 1>, limit = array<i64: 2, 3, 4>, stride = array<i64: 1, 2, 2>}
      : (tensor<2x3x4xf32>) -> tensor<1x2x2xf32>
  // CHECK: braid.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  %8 = braid.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: braid.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %9 = braid.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: braid.constant dense<3> : tensor<2x2xi32>
  %10 = braid.constant dense<3> : tensor<2x2xi32>
  return
}

// Tests that the gradient ops round-trip.

// CHECK-LABEL: func.func @gradients
func.func @gradients(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %ids: tensor<2x3xi32>,
                     %q: tensor<2x3x4x8xf32>, %kv: tensor<2x3x2x8xf32>, %s: tensor<f32>) {
  // CHECK: braid.relu_grad %{{.*}}, %{{.*}} : tensor<2x3x8xf32>
  %0 = braid.relu_grad %x, %x : tensor<2x3x8xf32>
  // CHECK: braid.silu_grad
  %1 = braid.silu_grad %x, %x : tensor<2x3x8xf32>
  // CHECK: braid.gelu_grad tanh %{{.*}}, %{{.*}} : tensor<2x3x8xf32>
  %2 = braid.gelu_grad tanh %x, %x : tensor<2x3x8xf32>
  // CHECK: braid.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %3 = braid.layer_norm_grad %x, %g, %x : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // CHECK: braid.rms_norm_grad
  %4 = braid.rms_norm_grad %x, %g, %x : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // CHECK: braid.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x3xi32>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
  %5 = braid.embedding_grad %ids, %x : (tensor<2x3xi32>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
  // CHECK: braid.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, operand = 1 : i64} : (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x2x8xf32>
  %6 = braid.attention_grad %q, %kv, %kv, %q {causal, operand = 1 : i64}
      : (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x2x8xf32>
  // CHECK: braid.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x8xf32>
  %7 = braid.cross_entropy_grad %x, %ids, %s : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x8xf32>
  // CHECK: braid.reduce_max_grad %{{.*}}, %{{.*}} {axes = array<i64: 2>} : (tensor<2x3x8xf32>, tensor<2x3xf32>) -> tensor<2x3x8xf32>
  %m = braid.reduce max %x {axes = array<i64: 2>} : (tensor<2x3x8xf32>) -> tensor<2x3xf32>
  %8 = braid.reduce_max_grad %x, %m {axes = array<i64: 2>} : (tensor<2x3x8xf32>, tensor<2x3xf32>) -> tensor<2x3x8xf32>
  // CHECK: braid.slice_grad %{{.*}} {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 1, 0>, stride = array<i64: 1, 1, 2>} : (tensor<2x2x4xf32>) -> tensor<2x3x8xf32>
  %sl = braid.slice %x {start = array<i64: 0, 1, 0>, limit = array<i64: 2, 3, 8>, stride = array<i64: 1, 1, 2>} : (tensor<2x3x8xf32>) -> tensor<2x2x4xf32>
  %9 = braid.slice_grad %sl {start = array<i64: 0, 1, 0>, limit = array<i64: 2, 3, 8>, stride = array<i64: 1, 1, 2>} : (tensor<2x2x4xf32>) -> tensor<2x3x8xf32>
  // CHECK: braid.rotary %{{.*}} {inverse} : tensor<2x3x4x8xf32>
  %10 = braid.rotary %q {inverse} : tensor<2x3x4x8xf32>
  return
}

// Tests that the training ops, parameter stores and stacked repeats
// round-trip.

// CHECK-LABEL: braid.layer @scan
braid.layer @scan(%acc: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = braid.add %acc, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  braid.yield %s, %s : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @training
func.func @training(%step: tensor<i64>, %g: tensor<4xf32>, %xs: tensor<3x4xf32>) {
  // CHECK: braid.repeat @scan(%{{.*}}, %{{.*}}) {carried = 1 : i64, count = 3 : i64, reverse} : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  %sum, %partial = braid.repeat @scan(%g, %xs) {count = 3 : i64, carried = 1 : i64, reverse}
      : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  // CHECK: braid.lr_schedule cosine %{{.*}} {lr = 1.000000e-03 : f64, min_lr = 1.000000e-04 : f64, total_steps = 100 : i64, warmup_steps = 10 : i64} : (tensor<i64>) -> tensor<f32>
  %lr = braid.lr_schedule cosine %step {lr = 1.0e-3 : f64, min_lr = 1.0e-4 : f64, warmup_steps = 10 : i64, total_steps = 100 : i64}
      : (tensor<i64>) -> tensor<f32>
  // CHECK: braid.global_norm %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<f32>
  %n = braid.global_norm %g, %xs : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<f32>
  // CHECK: braid.clip_coefficient %{{.*}} {max_norm = 1.000000e+00 : f64} : tensor<f32>
  %c = braid.clip_coefficient %n {max_norm = 1.0 : f64} : tensor<f32>
  // CHECK: braid.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<4xf32>
  %sel = braid.select %c, %g, %sum : tensor<f32>, tensor<4xf32>
  %p = braid.param "p" {init = #braid.init<zeros>} : tensor<4xf32>
  // CHECK: braid.param "p.adamw.m" {init = #braid.init<zeros>, state} : tensor<4xf32>
  %m = braid.param "p.adamw.m" {init = #braid.init<zeros>, state} : tensor<4xf32>
  // CHECK: braid.adamw_update {{.*}} {beta2 = 0.94999999999999996 : f64}
  %p2, %m2, %v2 = braid.adamw_update %p, %g, %m, %m, %lr, %step, %c {beta2 = 0.95 : f64}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: braid.sgd_update {{.*}} {momentum = 9.000000e-01 : f64, nesterov}
  %p3, %b3 = braid.sgd_update %p, %g, %m, %lr, %c {momentum = 0.9 : f64, nesterov}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  // CHECK: braid.store_param "p", %{{.*}} : tensor<4xf32>
  braid.store_param "p", %p2 : tensor<4xf32>
  return
}

// Tests that sum_squares round-trips.
// CHECK-LABEL: func.func @squares
func.func @squares(%a: tensor<4xf32>, %b: tensor<2x2xf32>) -> tensor<f32> {
  // CHECK: braid.sum_squares %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<2x2xf32>) -> tensor<f32>
  %0 = braid.sum_squares %a, %b : (tensor<4xf32>, tensor<2x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Tests that a fused region prints and parses with its body.
// CHECK-LABEL: func.func @fused
// CHECK: %{{.*}}:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<8xf32>):
// CHECK: braid.yield %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>
func.func @fused(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %0:2 = braid.fused (%x, %b) : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<2x8xf32>, %c: tensor<8xf32>):
    %s = braid.add %a, %c : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %g = braid.gelu tanh %s : tensor<2x8xf32>
    braid.yield %s, %g : tensor<2x8xf32>, tensor<2x8xf32>
  }
  return %0#0, %0#1 : tensor<2x8xf32>, tensor<2x8xf32>
}

// Tests that a fused region may read and write bf16 storage through
// conversions between f32 and bf16.
// CHECK-LABEL: func.func @fused_bf16
// CHECK: braid.fused(%{{.*}}, %{{.*}}) : (tensor<2x8xbf16>, tensor<2x8xf32>) -> tensor<2x8xbf16> {
// CHECK: braid.convert %{{.*}} : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: braid.convert %{{.*}} : tensor<2x8xf32> to tensor<2x8xbf16>
func.func @fused_bf16(%x: tensor<2x8xbf16>, %y: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  %0 = braid.fused (%x, %y) : (tensor<2x8xbf16>, tensor<2x8xf32>) -> tensor<2x8xbf16> {
  ^bb0(%a: tensor<2x8xbf16>, %b: tensor<2x8xf32>):
    %u = braid.convert %a : tensor<2x8xbf16> to tensor<2x8xf32>
    %s = braid.add %u, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %p = braid.convert %s : tensor<2x8xf32> to tensor<2x8xbf16>
    braid.yield %p : tensor<2x8xbf16>
  }
  return %0 : tensor<2x8xbf16>
}
