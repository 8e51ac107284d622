// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc | FileCheck %s

// Tests that the attention_grad ops of one attention (same operands and
// attributes, adjacent) become one braid_rt_attention_grad_all_f32 call
// computing dq, dk and dv in one pass, with nullptr for a gradient that is
// not asked for, and that grads of different attentions, or with another op
// between them, keep their own braid_rt_attention_grad_f32 calls.

// CHECK-LABEL: emitc.func @braid_all_three(
// CHECK-SAME: %[[Q:[^:]+]]: !emitc.ptr<f32>, %[[K:[^:]+]]: !emitc.ptr<f32>, %[[V:[^:]+]]: !emitc.ptr<f32>, %[[DY:[^:]+]]: !emitc.ptr<f32>,
// CHECK-SAME: %[[OUT_DK:[^:]+]]: !emitc.ptr<f32>, %[[OUT_DQ:[^:]+]]: !emitc.ptr<f32>, %[[OUT_DV:[^:]+]]: !emitc.ptr<f32>)
// CHECK-NOT: braid_rt_attention_grad_f32
// CHECK: call_opaque "braid_rt_attention_grad_all_f32"(%{{[^,]+}}, %[[Q]], %[[K]], %[[V]], %[[DY]], {{([^,]+, )+}}%[[DQ:[^,]+]], %[[DK:[^,]+]], %[[DV:[^,)]+]])
// CHECK-NOT: braid_rt_attention_grad
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[DK]], %{{[^,]+}}, %[[OUT_DK]])
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[DQ]], %{{[^,]+}}, %[[OUT_DQ]])
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[DV]], %{{[^,]+}}, %[[OUT_DV]])
// CHECK: return
func.func @all_three(%q: tensor<2x70x4x8xf32>, %k: tensor<2x70x2x8xf32>,
                     %v: tensor<2x70x2x8xf32>, %dy: tensor<2x70x4x8xf32>)
    -> (tensor<2x70x2x8xf32>, tensor<2x70x4x8xf32>, tensor<2x70x2x8xf32>) {
  %dv = braid.attention_grad %q, %k, %v, %dy {operand = 2 : i64, causal} : (tensor<2x70x4x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x4x8xf32>) -> tensor<2x70x2x8xf32>
  %dq = braid.attention_grad %q, %k, %v, %dy {operand = 0 : i64, causal} : (tensor<2x70x4x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x4x8xf32>) -> tensor<2x70x4x8xf32>
  %dk = braid.attention_grad %q, %k, %v, %dy {operand = 1 : i64, causal} : (tensor<2x70x4x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x2x8xf32>, tensor<2x70x4x8xf32>) -> tensor<2x70x2x8xf32>
  return %dk, %dq, %dv : tensor<2x70x2x8xf32>, tensor<2x70x4x8xf32>, tensor<2x70x2x8xf32>
}

// -----

// Two of the three: the missing dk is nullptr.
// CHECK-LABEL: emitc.func @braid_dq_dv(
// CHECK: %[[NULL:.*]] = literal "nullptr" : !emitc.ptr<f32>
// CHECK: call_opaque "braid_rt_attention_grad_all_f32"({{([^,]+, )+}}%[[NULL]], %{{[^,)]+}})
// CHECK-NOT: braid_rt_attention_grad
// CHECK: return
func.func @dq_dv(%q: tensor<1x9x2x4xf32>, %dy: tensor<1x9x2x4xf32>)
    -> (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) {
  %dq = braid.attention_grad %q, %q, %q, %dy {operand = 0 : i64, scale = 5.000000e-01 : f64} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  %dv = braid.attention_grad %q, %q, %q, %dy {operand = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  return %dq, %dv : tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>
}

// -----

// Not the grads of one attention: another scale, another causal, another
// op between them, the same operand twice. Each op keeps its own call.
// CHECK-LABEL: emitc.func @braid_separate(
// CHECK-NOT: braid_rt_attention_grad_all_f32
// CHECK-COUNT-5: call_opaque "braid_rt_attention_grad_f32"
// CHECK-NOT: braid_rt_attention_grad
// CHECK: return
func.func @separate(%q: tensor<1x9x2x4xf32>, %dy: tensor<1x9x2x4xf32>)
    -> (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) {
  %a = braid.attention_grad %q, %q, %q, %dy {operand = 0 : i64} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  %b = braid.attention_grad %q, %q, %q, %dy {operand = 1 : i64, scale = 5.000000e-01 : f64} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  %c = braid.attention_grad %q, %q, %q, %dy {operand = 1 : i64, scale = 5.000000e-01 : f64, causal} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  %n = braid.neg %c : tensor<1x9x2x4xf32>
  %d = braid.attention_grad %q, %q, %q, %dy {operand = 2 : i64, scale = 5.000000e-01 : f64, causal} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  %e = braid.attention_grad %q, %q, %q, %dy {operand = 2 : i64, scale = 5.000000e-01 : f64, causal} : (tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>) -> tensor<1x9x2x4xf32>
  return %a, %b, %c, %n, %d, %e : tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>, tensor<1x9x2x4xf32>
}
