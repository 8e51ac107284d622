// RUN: braid-opt %s --braid-legalize-bf16 | FileCheck %s
// RUN: braid-opt %s --braid-legalize-bf16 | braid-opt | FileCheck %s
// RUN: braid-opt %s --braid-legalize-bf16 --braid-lower-to-emitc=entry=step | FileCheck %s --check-prefix=C

// Tests which tensors braid-legalize-bf16 keeps in bf16 storage: a layer's
// stacked bf16 result whose every use is a stacked operand of a repeat (the
// forward's saved %m, and %g32, an f32 tensor converted from bf16, which
// holds bf16 values too) is packed right after the op computing it
// (braid.convert to bf16; not before the yield, so that the f32 value dies
// at its last use in the layer) and unpacked by the layer reading it just
// before its first use; a
// stacked bf16 result that the caller also reads (%x, summed by the
// caller) and the carried value stay f32 holding bf16 values, as does the
// argument it feeds; an f32 result computed in f32 (%n) stays f32.

// The lowering: a bf16 tensor is a uint16_t buffer (2 bytes an element,
// in the arena), packed straight into the caller's stacked buffer (no
// copy) and unpacked where the backward layer first reads it. A
// braid.round writes over its operand where that dies (the matmul's f32
// result), and the pack follows it, so the gelu reuses the same buffer.
// The working copy's round does not write over the parameter slot.
// C-LABEL: emitc.func @braid_fwd(%arg0: !emitc.ptr<f32>, %arg1: !emitc.ptr<i64>, %arg2: !emitc.ptr<f32>, %arg3: !emitc.ptr<ui16>, %arg4: !emitc.ptr<f32>, %arg5: !emitc.ptr<f32>, %arg6: !emitc.ptr<ui16>)
// C: %[[WC:.*]] = literal "(braid_arena_0 + {{[0-9]+}})" : !emitc.ptr<f32>
// C: call_opaque "braid_rt_round_bf16_f32"(%{{.*}}, %{{[0-9]+}}, %{{.*}}, %[[WC]])
// C: %[[MM:.*]] = literal "(braid_arena_0 + {{[0-9]+}})" : !emitc.ptr<f32>
// C: call_opaque "braid_rt_matmul_bf16in_f32"({{.*}}, %[[MM]])
// C: call_opaque "braid_rt_round_bf16_f32"(%{{.*}}, %[[MM]], %{{.*}}, %[[MM]])
// C: call_opaque "braid_rt_pack_bf16_f32"(%{{.*}}, %[[MM]], %{{.*}}, %arg3) : (!emitc.ptr<!emitc.opaque<"braid_rt_stream_t">>, !emitc.ptr<f32>, i64, !emitc.ptr<ui16>) -> ()
// C: call_opaque "braid_rt_gelu_f32"(%{{.*}}, %[[MM]], %{{.*}}, %{{.*}}, %[[MM]])
// C-NOT: braid_rt_copy_bf16
// C-LABEL: emitc.func @braid_bwd(%arg0: !emitc.ptr<f32>, %arg1: !emitc.ptr<ui16>, %arg2: !emitc.ptr<f32>
// C: call_opaque "braid_rt_unpack_bf16_f32"(%{{.*}}, %arg1, %{{.*}}, %{{.*}}) : (!emitc.ptr<!emitc.opaque<"braid_rt_stream_t">>, !emitc.ptr<ui16>, i64, !emitc.ptr<f32>) -> ()
// C-LABEL: emitc.func @braid_step
// C: literal "((uint16_t *)(braid_arena_1 + {{[0-9]+}}))" : !emitc.ptr<ui16>
// C-NOT: braid_rt_copy_bf16

// CHECK-LABEL: braid.layer @fwd(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>)
// CHECK: %[[M:.*]] = braid.round %{{.*}} to bf16 : tensor<2x8xf32>
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[M]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NEXT: braid.gelu tanh %[[M]]
// CHECK-NEXT: %[[G:.*]] = braid.round %{{.*}} to bf16 : tensor<2x8xf32>
// CHECK-NEXT: %[[P2:.*]] = braid.convert %[[G]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NEXT: %[[N:.*]] = braid.exp %[[G]] : tensor<2x8xf32>
// CHECK-NEXT: braid.yield %[[G]], %[[P]], %arg0, %[[N]], %[[P2]] : tensor<2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>
braid.layer @fwd(%x: tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %w16 = braid.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %m = braid.matmul %x, %w16 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  %g = braid.gelu tanh %m : tensor<2x8xbf16>
  %g32 = braid.convert %g : tensor<2x8xbf16> to tensor<2x8xf32>
  %n = braid.exp %g32 : tensor<2x8xf32>
  braid.yield %g, %m, %x, %n, %g32 : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: braid.layer @bwd(%arg0: tensor<2x8xf32>, %arg1: tensor<2x8xbf16>, %arg2: tensor<2x8xf32>, %arg3: tensor<2x8xf32>, %arg4: tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[A:.*]] = braid.add %arg0, %arg2
// CHECK-NEXT: braid.round %[[A]] to bf16
// CHECK-NEXT: %[[U:.*]] = braid.convert %arg1 : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK-NEXT: braid.mul %{{.*}}, %[[U]]
// CHECK-NOT: braid.convert %arg1
// CHECK: %[[U4:.*]] = braid.convert %arg4 : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK-NEXT: braid.exp %[[U4]] : tensor<2x8xf32>
// CHECK-NOT: braid.convert
// CHECK: braid.yield
braid.layer @bwd(%dy: tensor<2x8xbf16>, %m: tensor<2x8xbf16>, %x: tensor<2x8xbf16>, %n: tensor<2x8xf32>, %g32: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  %a = braid.add %dy, %x : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %b = braid.mul %a, %m : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %c = braid.mul %b, %m : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %n16 = braid.convert %n : tensor<2x8xf32> to tensor<2x8xbf16>
  %d = braid.add %c, %n16 : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %e = braid.exp %g32 : tensor<2x8xf32>
  %e16 = braid.convert %e : tensor<2x8xf32> to tensor<2x8xbf16>
  %f = braid.add %d, %e16 : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  braid.yield %f : tensor<2x8xbf16>
}

// CHECK-LABEL: func.func @step
// CHECK: %[[H:.*]]:5 = braid.repeat @fwd(%{{.*}}) {{.*}} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xbf16>)
// CHECK: braid.repeat @bwd(%[[H]]#0, %[[H]]#1, %[[H]]#2, %[[H]]#3, %[[H]]#4) {{.*}} : (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xbf16>) -> tensor<2x8xf32>
func.func @step(%x: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>) {
  %x16 = braid.convert %x : tensor<2x8xf32> to tensor<2x8xbf16>
  %h:5 = braid.repeat @fwd(%x16) {prefix = "h", count = 2 : i64, carried = 1 : i64} : (tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x2x8xf32>)
  %d = braid.repeat @bwd(%h#0, %h#1, %h#2, %h#3, %h#4) {prefix = "h", count = 2 : i64, carried = 1 : i64, reverse} : (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x8xbf16>
  %d32 = braid.convert %d : tensor<2x8xbf16> to tensor<2x8xf32>
  %s = braid.reduce sum %d32 {axes = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
  %x32 = braid.convert %h#2 : tensor<2x2x8xbf16> to tensor<2x2x8xf32>
  %t = braid.reduce sum %x32 {axes = array<i64: 0, 1, 2>} : (tensor<2x2x8xf32>) -> tensor<f32>
  return %s, %t : tensor<f32>, tensor<f32>
}
