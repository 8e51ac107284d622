// RUN: braid-opt %s --braid-schedule-collectives | FileCheck %s
// RUN: braid-opt %s --braid-schedule-collectives=into-pipelines=false | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s --braid-schedule-collectives=max-in-flight=1 | FileCheck %s --check-prefix=ONE

// Tests that the starts of the reductions of a braid.pipeline's results
// that the schedule places right after the pipeline (a bucket: reshapes
// and a concat of two results, and a result alone) are marked
// braid.start_in_pipeline, so that the lowering issues them inside the
// pipeline; not a start that also reads a value computed after the
// pipeline, nor (max-in-flight=1) a start left where it was, nor anything
// with into-pipelines=false. Their waits stay where the store needs them.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @grad(%x: tensor<2x8xf32>) -> (tensor<f32>, tensor<8xf32>, tensor<2x8xf32>, tensor<8xf32>) {
  %l = braid.reduce sum %x {axes = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
  %a = braid.reduce sum %x {axes = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<8xf32>
  return %l, %a, %x, %a : tensor<f32>, tensor<8xf32>, tensor<2x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @step
// CHECK: %[[P:.*]]:4 = braid.pipeline @grad
// CHECK-NEXT: %[[A:.*]] = braid.reshape %[[P]]#1
// CHECK-NEXT: %[[B:.*]] = braid.reshape %[[P]]#2
// CHECK-NEXT: %[[C:.*]] = braid.concat %[[A]], %[[B]]
// CHECK-NEXT: %[[F:.*]] = braid.all_reduce_start sum %[[C]] on @mesh ["dp"] {braid.start_in_pipeline}
// CHECK-NEXT: %[[G:.*]] = braid.all_reduce_start sum %[[P]]#3 on @mesh ["dp"] {braid.start_in_pipeline}
// CHECK-NEXT: %[[M:.*]] = braid.mul
// CHECK-NEXT: %[[H:.*]] = braid.all_reduce_start sum %[[M]] on @mesh ["dp"] :
// CHECK: braid.wait %[[F]]
// CHECK: braid.wait %[[G]]
// CHECK: braid.wait %[[H]]

// OFF-LABEL: func.func @step
// OFF-NOT: braid.start_in_pipeline

// ONE-LABEL: func.func @step
// ONE: braid.all_reduce_start sum %{{.*}} on @mesh ["dp"] {braid.start_in_pipeline}
// ONE-NOT: braid.start_in_pipeline
func.func @step(%x: tensor<4x2x8xf32>, %s: tensor<8xf32>) {
  %p:4 = braid.pipeline @grad(%x) : (tensor<4x2x8xf32>) -> (tensor<f32>, tensor<8xf32>, tensor<2x8xf32>, tensor<8xf32>)
  %m = braid.mul %p#3, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %a = braid.reshape %p#1 : (tensor<8xf32>) -> tensor<8xf32>
  %b = braid.reshape %p#2 : (tensor<2x8xf32>) -> tensor<16xf32>
  %c = braid.concat %a, %b {axis = 0 : i64} : (tensor<8xf32>, tensor<16xf32>) -> tensor<24xf32>
  %f = braid.all_reduce_start sum %c on @mesh ["dp"] : tensor<24xf32> -> !braid.future<tensor<24xf32>>
  %g = braid.all_reduce_start sum %p#3 on @mesh ["dp"] : tensor<8xf32> -> !braid.future<tensor<8xf32>>
  %h = braid.all_reduce_start sum %m on @mesh ["dp"] : tensor<8xf32> -> !braid.future<tensor<8xf32>>
  %rf = braid.wait %f : !braid.future<tensor<24xf32>>
  %rg = braid.wait %g : !braid.future<tensor<8xf32>>
  %rh = braid.wait %h : !braid.future<tensor<8xf32>>
  braid.store_param "c", %rf : tensor<24xf32>
  braid.store_param "g", %rg : tensor<8xf32>
  braid.store_param "h", %rh : tensor<8xf32>
  return
}
