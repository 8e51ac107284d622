// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | braid-opt --split-input-file | FileCheck %s

// Edge cases of braid-legalize-bf16's pipeline piece storage
// (legalize-bf16-pipeline.mlir has the common case).

// A piece called more than once keeps its f32 signature: its type serves
// every call, and the rule looks at one call's uses. @d.c0.B reads
// @d.c0.F's %e but is called twice, so %e stays f32 (while %n, read by
// @d.c0.W called once, is kept: the control); @d.c1.F is called twice and
// only its first call's result is read by a piece of its chunk alone (the
// second's is the driver's), so it stays f32 too (keeping it would give the
// two calls different result types).

// CHECK-LABEL: func.func @d.c0.F(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>)
// CHECK-LABEL: func.func @d.c0.B(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @d.c0.W(%arg0: tensor<4xbf16>) -> tensor<4xf32>
// CHECK-LABEL: func.func @d.c1.F(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @d.c1.B(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @d(
// CHECK: %[[F:.*]]:2 = call @d.c0.F(%arg0) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>)
// CHECK-NEXT: call @d.c0.B(%[[F]]#0) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: call @d.c0.B(%[[F]]#0) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: call @d.c0.W(%[[F]]#1) : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT: %[[G:.*]] = call @d.c1.F(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: call @d.c1.F(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: call @d.c1.B(%[[G]]) : (tensor<4xf32>) -> tensor<4xf32>

func.func @d.c0.F(%x: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  %e = braid.exp %x16 : tensor<4xbf16>
  %n = braid.neg %x16 : tensor<4xbf16>
  return %e, %n : tensor<4xbf16>, tensor<4xbf16>
}
func.func @d.c0.B(%e: tensor<4xbf16>) -> tensor<4xf32> attributes {braid.chunk = 0 : i64, braid.phase = "B"} {
  %e32 = braid.convert %e : tensor<4xbf16> to tensor<4xf32>
  return %e32 : tensor<4xf32>
}
func.func @d.c0.W(%n: tensor<4xbf16>) -> tensor<4xf32> attributes {braid.chunk = 0 : i64, braid.phase = "W"} {
  %n32 = braid.convert %n : tensor<4xbf16> to tensor<4xf32>
  return %n32 : tensor<4xf32>
}
func.func @d.c1.F(%x: tensor<4xf32>) -> tensor<4xbf16> attributes {braid.chunk = 1 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  %e = braid.exp %x16 : tensor<4xbf16>
  return %e : tensor<4xbf16>
}
func.func @d.c1.B(%e: tensor<4xbf16>) -> tensor<4xf32> attributes {braid.chunk = 1 : i64, braid.phase = "B"} {
  %e32 = braid.convert %e : tensor<4xbf16> to tensor<4xf32>
  return %e32 : tensor<4xf32>
}
func.func @d(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>) attributes {braid.schedule = {name = "1f1b", microbatches = 1 : i64, ranks = [["F0.0", "B0.0", "W0.0"], ["F0.0", "B0.0"]]}} {
  %f:2 = call @d.c0.F(%x) : (tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>)
  %b1 = call @d.c0.B(%f#0) : (tensor<4xbf16>) -> tensor<4xf32>
  %b2 = call @d.c0.B(%f#0) : (tensor<4xbf16>) -> tensor<4xf32>
  %w = call @d.c0.W(%f#1) : (tensor<4xbf16>) -> tensor<4xf32>
  %g1 = call @d.c1.F(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  %g2 = call @d.c1.F(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  %c = call @d.c1.B(%g1) : (tensor<4xbf16>) -> tensor<4xf32>
  return %b1, %b2, %w, %c, %g2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>
}

// -----

// A kept argument a piece returns unchanged (B handing F's saved values on
// to W) is returned as it came, packed: no unpack and pack again. %arg1,
// which B also reads, is unpacked for that use only; %arg2, which it only
// passes on, is not unpacked at all. W unpacks both.

// CHECK-LABEL: func.func @p.c0.F(%arg0: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>)
// CHECK-LABEL: func.func @p.c0.B(%arg0: tensor<4xf32>, %arg1: tensor<4xbf16>, %arg2: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK-NEXT: %[[U:.*]] = braid.convert %arg1 : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[G:.*]] = braid.mul %arg0, %[[U]]
// CHECK-NOT: braid.convert
// CHECK-NEXT: return %[[G]], %arg1, %arg2 : tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>
// CHECK-LABEL: func.func @p.c0.W(%arg0: tensor<4xbf16>, %arg1: tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT: braid.convert %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: braid.convert %arg1 : tensor<4xbf16> to tensor<4xf32>
// CHECK-LABEL: func.func @p(
// CHECK: call @p.c0.W(%{{.*}}#1, %{{.*}}#2) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xf32>

func.func @p.c0.F(%x: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  %e = braid.exp %x16 : tensor<4xbf16>
  %n = braid.neg %x16 : tensor<4xbf16>
  return %e, %n : tensor<4xbf16>, tensor<4xbf16>
}
func.func @p.c0.B(%dy: tensor<4xf32>, %e: tensor<4xbf16>, %n: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "B"} {
  %e32 = braid.convert %e : tensor<4xbf16> to tensor<4xf32>
  %g = braid.mul %dy, %e32 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g, %e, %n : tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>
}
func.func @p.c0.W(%e: tensor<4xbf16>, %n: tensor<4xbf16>) -> tensor<4xbf16> attributes {braid.chunk = 0 : i64, braid.phase = "W"} {
  %s = braid.add %e, %n : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %s : tensor<4xbf16>
}
func.func @p(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>) attributes {braid.schedule = {name = "zb-h1", microbatches = 1 : i64, ranks = [["F0.0", "B0.0", "W0.0"]]}} {
  %f:2 = call @p.c0.F(%x) : (tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>)
  %b:3 = call @p.c0.B(%x, %f#0, %f#1) : (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>)
  %w = call @p.c0.W(%b#1, %b#2) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %b#0, %w : tensor<4xf32>, tensor<4xbf16>
}

// -----

// Hand-offs between chunks of one stage (interleaved and V placements):
// braid.chunk_stages on @f, the forward function of the driver @f_grad,
// puts chunks 0 and 3 on stage 0 and chunks 1 and 2 on stage 1 (ZB-V). What
// a piece hands only to pieces on its own stage is kept in bf16, whatever
// their chunk: c1.F's activation for c2.F (%a, packed where computed,
// unpacked by c2.F) and c0.F's working copy for c3.F (%w, packed right
// after it is computed, before the ops after it). c0.F's
// activation for c1.F, on the other stage, is sent and stays f32, and so
// does %v, which c3.F (stage 0) and c2.F (stage 1) both read. The same
// pieces under @g_grad, whose forward function @g has no
// braid.chunk_stages, keep only same-chunk hand-offs (none here).

// CHECK-LABEL: func.func @f_grad.c0.F(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>)
// CHECK: braid.neg
// CHECK-NEXT: %[[R:.*]] = braid.round
// CHECK-NEXT: %[[W:.*]] = braid.convert %[[R]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NOT: braid.convert
// CHECK: return %{{.*}}, %[[W]], %{{.*}} : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>
// CHECK-LABEL: func.func @f_grad.c1.F(%arg0: tensor<4xf32>) -> tensor<4xbf16>
// CHECK: %[[A:.*]] = braid.convert %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: return %[[A]] : tensor<4xbf16>
// CHECK-LABEL: func.func @f_grad.c2.F(%arg0: tensor<4xbf16>, %arg1: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = braid.convert %arg0 : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: braid.exp %[[U]]
// CHECK-LABEL: func.func @f_grad.c3.F(%arg0: tensor<4xf32>, %arg1: tensor<4xbf16>, %arg2: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = braid.convert %arg1 : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: braid.mul %arg0, %[[U]]
// CHECK-LABEL: func.func @f_grad(
// CHECK: call @f_grad.c0.F(%arg0) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>)
// CHECK-NEXT: call @f_grad.c1.F(%{{.*}}#0) : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: call @f_grad.c2.F(%{{.*}}, %{{.*}}#2) : (tensor<4xbf16>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: call @f_grad.c3.F(%{{.*}}, %{{.*}}#1, %{{.*}}#2) : (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @g_grad.c0.F(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: bf16>
// CHECK-LABEL: func.func @g_grad(

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {braid.chunk_stages = array<i64: 0, 1, 1, 0>} {
  return %x : tensor<4xf32>
}
func.func @f_grad.c0.F(%x: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  %h = braid.exp %x16 : tensor<4xbf16>
  %w = braid.neg %x16 : tensor<4xbf16>
  %v = braid.sqrt %x16 : tensor<4xbf16>
  return %h, %w, %v : tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>
}
func.func @f_grad.c1.F(%h: tensor<4xbf16>) -> tensor<4xbf16> attributes {braid.chunk = 1 : i64, braid.phase = "F"} {
  %a = braid.exp %h : tensor<4xbf16>
  return %a : tensor<4xbf16>
}
func.func @f_grad.c2.F(%a: tensor<4xbf16>, %v: tensor<4xbf16>) -> tensor<4xbf16> attributes {braid.chunk = 2 : i64, braid.phase = "F"} {
  %e = braid.exp %a : tensor<4xbf16>
  %s = braid.add %e, %v : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %s : tensor<4xbf16>
}
func.func @f_grad.c3.F(%s: tensor<4xbf16>, %w: tensor<4xbf16>, %v: tensor<4xbf16>) -> tensor<4xf32> attributes {braid.chunk = 3 : i64, braid.phase = "F"} {
  %m = braid.mul %s, %w : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %n = braid.add %m, %v : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %y = braid.convert %n : tensor<4xbf16> to tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @f_grad(%x: tensor<4xf32>) -> tensor<4xf32> attributes {braid.schedule = {name = "zb-v", microbatches = 1 : i64, ranks = [["F0.0", "send activation 0.0 to rank 1", "recv activation 1.0 from rank 1", "F1.0"], ["recv activation 0.0 from rank 0", "F0.0", "F1.0", "send activation 1.0 to rank 0"]]}} {
  %f:3 = call @f_grad.c0.F(%x) : (tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  %a = call @f_grad.c1.F(%f#0) : (tensor<4xbf16>) -> tensor<4xbf16>
  %s = call @f_grad.c2.F(%a, %f#2) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %y = call @f_grad.c3.F(%s, %f#1, %f#2) : (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @g_grad.c0.F(%x: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<4xf32> to tensor<4xbf16>
  %h = braid.exp %x16 : tensor<4xbf16>
  %w = braid.neg %x16 : tensor<4xbf16>
  %v = braid.sqrt %x16 : tensor<4xbf16>
  return %h, %w, %v : tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>
}
func.func @g_grad.c1.F(%h: tensor<4xbf16>) -> tensor<4xbf16> attributes {braid.chunk = 1 : i64, braid.phase = "F"} {
  %a = braid.exp %h : tensor<4xbf16>
  return %a : tensor<4xbf16>
}
func.func @g_grad.c2.F(%a: tensor<4xbf16>, %v: tensor<4xbf16>) -> tensor<4xbf16> attributes {braid.chunk = 2 : i64, braid.phase = "F"} {
  %e = braid.exp %a : tensor<4xbf16>
  %s = braid.add %e, %v : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %s : tensor<4xbf16>
}
func.func @g_grad.c3.F(%s: tensor<4xbf16>, %w: tensor<4xbf16>, %v: tensor<4xbf16>) -> tensor<4xf32> attributes {braid.chunk = 3 : i64, braid.phase = "F"} {
  %m = braid.mul %s, %w : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %n = braid.add %m, %v : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %y = braid.convert %n : tensor<4xbf16> to tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @g_grad(%x: tensor<4xf32>) -> tensor<4xf32> attributes {braid.schedule = {name = "zb-v", microbatches = 1 : i64, ranks = [["F0.0", "send activation 0.0 to rank 1", "recv activation 1.0 from rank 1", "F1.0"], ["recv activation 0.0 from rank 0", "F0.0", "F1.0", "send activation 1.0 to rank 0"]]}} {
  %f:3 = call @g_grad.c0.F(%x) : (tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
  %a = call @g_grad.c1.F(%f#0) : (tensor<4xbf16>) -> tensor<4xbf16>
  %s = call @g_grad.c2.F(%a, %f#2) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  %y = call @g_grad.c3.F(%s, %f#1, %f#2) : (tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
