// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc=reuse-buffers=false | FileCheck %s

// Tests that parameters become slots of the global table, that matmul and add
// become kernel calls with their ranks and static shape arrays, each result
// in the buffer of its allocation site (a static pointer, allocated on first
// use and kept), and that the result is copied to the out argument.

// CHECK-DAG: emitc.include "braid/rt/kernels.h"
// CHECK-DAG: emitc.global @braid_params : !emitc.array<2x!emitc.ptr<f32>>
// CHECK-DAG: emitc.global static const @[[$X_SHAPE:braid_shape_[0-9]+]] : !emitc.array<2xi64> = dense<[2, 4]>
// CHECK-DAG: emitc.global static const @[[$W_SHAPE:braid_shape_[0-9]+]] : !emitc.array<2xi64> = dense<[4, 3]>
// CHECK-DAG: emitc.global static const @[[$B_SHAPE:braid_shape_[0-9]+]] : !emitc.array<1xi64> = dense<3>
// CHECK-DAG: emitc.global static @[[$BUF0:braid_buffer_[0-9]+]] : !emitc.ptr<f32>
// CHECK-LABEL: emitc.func @braid_linear(
// CHECK-SAME: %[[X:.*]]: !emitc.ptr<f32>, %[[OUT:.*]]: !emitc.ptr<f32>)
// CHECK: %[[SLOT0:.*]] = "emitc.constant"() <{value = 0 : index}>
// CHECK: %[[TABLE0:.*]] = get_global @braid_params
// CHECK: %[[REF0:.*]] = subscript %[[TABLE0]][%[[SLOT0]]]
// CHECK: %[[W:.*]] = load %[[REF0]]
// CHECK: %[[B:.*]] = load
// CHECK: %[[XS:.*]] = get_global @[[$X_SHAPE]]
// CHECK: %[[WS:.*]] = get_global @[[$W_SHAPE]]
// CHECK: %[[SITE:.*]] = get_global @[[$BUF0]] : !emitc.lvalue<!emitc.ptr<f32>>
// CHECK: %[[ADDR:.*]] = address_of %[[SITE]]
// CHECK: %[[Y:.*]] = call_opaque "braid_rt_program_buffer_f32"(%[[ADDR]], %{{.*}}) : (!emitc.ptr<!emitc.ptr<f32>>, i64) -> !emitc.ptr<f32>
// CHECK: %[[STREAM:.*]] = literal "braid_rt_program_stream()" : !emitc.ptr<!emitc.opaque<"braid_rt_stream_t">>
// CHECK-NEXT: call_opaque "braid_rt_matmul_f32"(%[[STREAM]], %[[X]], %[[W]], %{{.*}}, %[[XS]], %{{.*}}, %[[WS]], %{{.*}}, %{{.*}}, %[[Y]])
// CHECK: %[[BS:.*]] = get_global @[[$B_SHAPE]]
// CHECK: %[[Z:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: call_opaque "braid_rt_add_f32"(%{{[^,]+}}, %[[Y]], %[[B]], %{{.*}}, %{{.*}}, %{{.*}}, %[[BS]], %[[Z]])
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[Z]], %{{.*}}, %[[OUT]])
// CHECK-NOT: braid_rt_program_free
// CHECK: return
// CHECK-LABEL: emitc.func @braid_program_init(
// CHECK-SAME: %[[SEED:.*]]: i64)
// CHECK: %[[P:.*]] = call_opaque "braid_rt_program_alloc_f32"
// CHECK: %[[NAME:.*]] = literal "\22w\22"
// CHECK: call_opaque "braid_rt_program_init_f32"(%[[SEED]], %[[NAME]], {{.*}}, %[[P]])
// CHECK: assign %[[P]]
// CHECK: literal "\22b\22"
func.func @linear(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.02)>} : tensor<4x3xf32>
  %b = braid.param "b" {init = #braid.init<zeros>} : tensor<3xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %z = braid.add %y, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %z : tensor<2x3xf32>
}

// -----

// Tests that a repeat becomes a loop over the instances that calls the
// layer's function with the carried buffer and the instance's slot numbers
// (&slots[i * 1]), where instance i's parameter "fc.w" is "h.i.fc.w" (slots
// 0 and 1), and copies the instance's result back to the carried buffer.

// CHECK: emitc.global @braid_params : !emitc.array<2x!emitc.ptr<f32>>
// CHECK: emitc.global static @[[$SLOTS:braid_slots_[0-9]+]] : !emitc.array<2xi64> = dense<[0, 1]>
// CHECK-LABEL: emitc.func @braid_block(
// CHECK-SAME: %[[X:.*]]: !emitc.ptr<f32>, %[[IDS:.*]]: !emitc.ptr<i64>, %[[OUT:.*]]: !emitc.ptr<f32>)
// CHECK: %[[J:.*]] = "emitc.constant"() <{value = 0 : index}>
// CHECK: %[[REF:.*]] = subscript %[[IDS]][%[[J]]] : (!emitc.ptr<i64>, index)
// CHECK: %[[SLOT:.*]] = load %[[REF]]
// CHECK: %[[TABLE:.*]] = get_global @braid_params
// CHECK: subscript %[[TABLE]][%[[SLOT]]]
// CHECK: call_opaque "braid_rt_matmul_f32"
// CHECK: call_opaque "braid_rt_copy_f32"({{.*}}, %[[OUT]])
// CHECK-LABEL: emitc.func @braid_stack(
// CHECK-SAME: %[[IN:.*]]: !emitc.ptr<f32>, %[[RES:.*]]: !emitc.ptr<f32>)
// CHECK: %[[CUR:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[IN]], %{{.*}}, %[[CUR]])
// CHECK: %[[NEXT:.*]] = call_opaque "braid_rt_program_buffer_f32"
// The carried value's two buffers: instance i reads the one in i % 2 and
// writes the other, with no copy between instances; after an even count
// the result is in the first.
// CHECK: %[[PAIR:.*]] = "emitc.variable"() <{value = #emitc.opaque<"">}> : () -> !emitc.array<2x!emitc.ptr<f32>>
// CHECK: %[[E0:.*]] = subscript %[[PAIR]]
// CHECK-NEXT: assign %[[CUR]] : !emitc.ptr<f32> to %[[E0]]
// CHECK: %[[E1:.*]] = subscript %[[PAIR]]
// CHECK-NEXT: assign %[[NEXT]] : !emitc.ptr<f32> to %[[E1]]
// CHECK: %[[TAB:.*]] = get_global @[[$SLOTS]]
// CHECK: %[[LB:.*]] = "emitc.constant"() <{value = 0 : i64}>
// CHECK: %[[STEP:.*]] = "emitc.constant"() <{value = 1 : i64}>
// CHECK: %[[UB:.*]] = "emitc.constant"() <{value = 2 : i64}>
// CHECK: for %[[I:.*]] = %[[LB]] to %[[UB]] step %[[STEP]] : i64
// CHECK:   %[[OFF:.*]] = mul %[[I]], %{{.*}} : (i64, i64) -> i64
// CHECK:   %[[ENTRY:.*]] = subscript %[[TAB]][%[[OFF]]]
// CHECK:   %[[PTR:.*]] = address_of %[[ENTRY]]
// CHECK:   %[[MINE:.*]] = rem %[[I]], %{{.*}}
// CHECK:   %[[THEIRS:.*]] = rem
// CHECK:   %[[IN:.*]] = subscript %[[PAIR]][%[[MINE]]]
// CHECK:   %[[INPTR:.*]] = load %[[IN]]
// CHECK:   %[[OUTE:.*]] = subscript %[[PAIR]][%[[THEIRS]]]
// CHECK:   %[[OUTPTR:.*]] = load %[[OUTE]]
// CHECK:   call_opaque "braid_block"(%[[INPTR]], %[[PTR]], %[[OUTPTR]])
// CHECK-NOT: braid_rt_copy_f32
// CHECK: }
// CHECK-NOT: braid_rt_copy_f32
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[CUR]], %{{.*}}, %[[RES]])
braid.layer @block(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "fc.w" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
func.func @stack(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}

// -----

// After an odd count the last instance wrote the second buffer: one copy
// into the result's, after the loop.
// CHECK-LABEL: emitc.func @braid_stack3(
// CHECK-SAME: %[[IN:.*]]: !emitc.ptr<f32>, %[[RES:.*]]: !emitc.ptr<f32>)
// CHECK: %[[CUR:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: %[[NEXT:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: for
// CHECK:   call_opaque "braid_block3"
// CHECK-NOT: braid_rt_copy_f32
// CHECK: }
// CHECK-NEXT: "emitc.constant"
// CHECK-NEXT: literal
// CHECK-NEXT: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[NEXT]], %{{.*}}, %[[CUR]])
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[CUR]], %{{.*}}, %[[RES]])
braid.layer @block3(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "fc.w" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
func.func @stack3(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = braid.repeat @block3(%x) {prefix = "h", count = 3 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}

// -----

// Tests that kernels that can fail are followed by a check naming the op,
// that ids choose the i32 kernel, and that enum attributes are cast to the
// runtime's enum types.

// CHECK-LABEL: emitc.func @braid_embed(
// CHECK: %[[S:.*]] = call_opaque "braid_rt_embedding_f32"({{.*}}) : ({{.*}}) -> !emitc.opaque<"braid_rt_status_t">
// CHECK: %[[WHERE:.*]] = literal "\22{{.*}}braid-lower-to-emitc.mlir:{{[0-9]+}}:{{[0-9]+}}: braid.embedding\22"
// CHECK: call_opaque "braid_rt_program_check"(%[[S]], %[[WHERE]])
// CHECK: %[[A:.*]] = cast %{{.*}} : i32 to !emitc.opaque<"braid_rt_gelu_approximation_t">
// CHECK: call_opaque "braid_rt_gelu_f32"(%{{[^,]+}}, %{{.*}}, %{{.*}}, %[[A]], %{{.*}})
func.func @embed(%ids: tensor<2x8xi32>) -> tensor<2x8x16xf32> {
  %t = braid.param "wte" {init = #braid.init<normal(0.02)>} : tensor<64x16xf32>
  %e = braid.embedding %t, %ids : (tensor<64x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  %g = braid.gelu tanh %e : tensor<2x8x16xf32>
  return %g : tensor<2x8x16xf32>
}

// -----

// Tests the training ops: a list of tensors becomes a local array of buffers
// with a static array of counts, an i64 step chooses the _i64 kernel, and
// braid.store_param copies into the parameter's slot.

// CHECK-DAG: emitc.global static const @[[$COUNTS:braid_shape_[0-9]+]] : !emitc.array<2xi64> = dense<[4, 2]>
// CHECK-LABEL: emitc.func @braid_update(
// CHECK-SAME: %[[G:.*]]: !emitc.ptr<f32>, %[[H:.*]]: !emitc.ptr<f32>, %[[LR:.*]]: !emitc.ptr<f32>, %[[STEP:.*]]: !emitc.ptr<i64>
// CHECK: %[[LIST:.*]] = "emitc.variable"() <{value = #emitc.opaque<"">}> : () -> !emitc.array<2x!emitc.ptr<f32>>
// CHECK: %[[E0:.*]] = subscript %[[LIST]]
// CHECK: assign %[[G]] : !emitc.ptr<f32> to %[[E0]]
// CHECK: assign %[[H]] : !emitc.ptr<f32> to
// CHECK: %[[CS:.*]] = get_global @[[$COUNTS]]
// CHECK: call_opaque "braid_rt_sum_squares_f32"(%{{[^,]+}}, %[[LIST]], %[[CS]], %{{.*}}, %{{.*}})
// CHECK: %[[W:.*]] = load
// CHECK: %[[M:.*]] = load
// CHECK: %[[V:.*]] = load
// CHECK: %[[NW:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: %[[NM:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: %[[NV:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: call_opaque "braid_rt_adamw_update_f32_i64"(%{{[^,]+}}, %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]], {{.*}}, %[[NW]], %[[NM]], %[[NV]])
// CHECK: %[[SLOT:.*]] = load
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[NW]], %{{.*}}, %[[SLOT]])
func.func @update(%g: tensor<4xf32>, %h: tensor<2xf32>, %lr: tensor<f32>, %step: tensor<i64>, %scale: tensor<f32>) -> tensor<f32> {
  %n = braid.sum_squares %g, %h : (tensor<4xf32>, tensor<2xf32>) -> tensor<f32>
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<4xf32>
  %m = braid.param "w.adamw.m" {init = #braid.init<zeros>, state} : tensor<4xf32>
  %v = braid.param "w.adamw.v" {init = #braid.init<zeros>, state} : tensor<4xf32>
  %nw, %nm, %nv = braid.adamw_update %w, %g, %m, %v, %lr, %step, %scale : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  braid.store_param "w", %nw : tensor<4xf32>
  braid.store_param "w.adamw.m", %nm : tensor<4xf32>
  braid.store_param "w.adamw.v", %nv : tensor<4xf32>
  return %n : tensor<f32>
}

// -----

// Tests that a parameter read aliases the parameter's buffer unless a store
// of the same parameter comes before its last use; then it is a copy.

// CHECK-LABEL: emitc.func @braid_read_then_store(
// CHECK: %[[A:.*]] = load %{{.*}} : <!emitc.ptr<f32>>
// CHECK-NOT: braid_rt_copy_f32"(%{{[^,]+}}, %[[A]]
// CHECK: %[[B:.*]] = load %{{.*}} : <!emitc.ptr<f32>>
// CHECK: %[[COPY:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CHECK: call_opaque "braid_rt_copy_f32"(%{{[^,]+}}, %[[B]], %{{.*}}, %[[COPY]])
// CHECK: call_opaque "braid_rt_add_f32"(%{{[^,]+}}, %[[A]], %[[A]]
// CHECK: call_opaque "braid_rt_add_f32"(%{{[^,]+}}, %[[COPY]], %[[COPY]]
func.func @read_then_store(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = braid.param "a" {init = #braid.init<ones>} : tensor<4xf32>
  %b = braid.param "b" {init = #braid.init<ones>} : tensor<4xf32>
  %a2 = braid.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  braid.store_param "a", %a2 : tensor<4xf32>
  braid.store_param "b", %x : tensor<4xf32>
  %b2 = braid.add %b, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b2 : tensor<4xf32>
}

// -----

// Tests that a layer repeated without a prefix (a gradient-accumulation
// loop) may repeat layers itself: @outer's function loops over @inner's
// instances with the static slot table of "h.0.w" and "h.1.w", and comes
// after @inner's; the function loops over @outer's two instances.

// CHECK: emitc.global static @[[$INNER:braid_slots_[0-9]+]] : !emitc.array<2xi64> = dense<[0, 1]>
// CHECK-LABEL: emitc.func @braid_inner(
// CHECK-LABEL: emitc.func @braid_outer(
// CHECK: get_global @[[$INNER]]
// CHECK: for
// CHECK: call_opaque "braid_inner"
// CHECK-LABEL: emitc.func @braid_accumulate(
// CHECK: for
// CHECK: call_opaque "braid_outer"
// CHECK-LABEL: emitc.func @braid_program_init(
// CHECK: literal "\22h.0.w\22"
// CHECK: literal "\22h.1.w\22"
braid.layer @inner(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
braid.layer @outer(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = braid.repeat @inner(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  braid.yield %h : tensor<2x4xf32>
}
func.func @accumulate(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = braid.repeat @outer(%x) {count = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a repeat with instance_names gives its instances' parameters
// the slots of "h.<name>.<local>": the second repeat (first = 2) continues
// the slot table after the first one's, under its own names.

// CHECK: emitc.global static @[[$A:braid_slots_[0-9]+]] : !emitc.array<2xi64> = dense<[0, 1]>
// CHECK: emitc.global static @[[$B:braid_slots_[0-9]+]] : !emitc.array<1xi64> = dense<2>
// CHECK-LABEL: emitc.func @braid_named(
// CHECK: get_global @[[$A]]
// CHECK: get_global @[[$B]]
// CHECK-LABEL: emitc.func @braid_program_init(
// CHECK: literal "\22h.encoder_layer_0.w\22"
// CHECK: literal "\22h.encoder_layer_1.w\22"
// CHECK: literal "\22h.last.w\22"
braid.layer @block(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.02)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
func.func @named(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64, instance_names = ["encoder_layer_0", "encoder_layer_1"]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = braid.repeat @block(%h) {prefix = "h", count = 1 : i64, first = 2 : i64, instance_names = ["last"]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
