// RUN: braid-opt %s --braid-legalize-bf16 | FileCheck %s
// RUN: braid-opt %s --braid-legalize-bf16 | braid-opt | FileCheck %s
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --lr 0.01 --emit cpp -o %t.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.cpp
// RUN: FileCheck %s --check-prefix=NOCOPY < %t.cpp

// Tests which pipeline piece results braid-legalize-bf16 keeps in bf16
// storage: in a scheduled driver (braid.schedule), a piece's result that
// holds bf16 values and that only pieces of its own chunk read (so the
// same stage, which holds it for each micro-batch in flight) is a bf16
// tensor: the F piece's layers' saved values (%h#1; %h#2, an f32 tensor
// converted from bf16 in the layer) are packed by the layer and returned
// as they are, and handed to the B piece's layers packed (no unpack in
// the piece); a bf16 value the piece computed (%e) is packed right after
// the op computing it (not before the return: its f32 value dies at its
// last use in the piece, here %r) and unpacked before its first use. What is sent to another chunk
// (%h#0), computed in f32 (%n) or also returned by the driver (%r, a mean)
// stays f32 holding bf16 values.

// CHECK-LABEL: braid.layer @fwd(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xbf16>, tensor<2x8xbf16>)
// CHECK: braid.matmul
// CHECK-NEXT: %[[M:.*]] = braid.round
// CHECK-NEXT: braid.convert %[[M]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NEXT: braid.gelu
// CHECK-NEXT: %[[G:.*]] = braid.round
// CHECK-NEXT: braid.convert %[[G]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NEXT: braid.yield

// CHECK-LABEL: braid.layer @bwd(%arg0: tensor<2x8xf32>, %arg1: tensor<2x8xbf16>, %arg2: tensor<2x8xbf16>) -> tensor<2x8xf32>

// CHECK-LABEL: func.func @drv.c0.F(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: %[[H:.*]]:3 = braid.repeat @fwd({{.*}}) -> (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>)
// CHECK: %[[E:.*]] = braid.round %{{.*}} to bf16
// CHECK-NEXT: %[[P:.*]] = braid.convert %[[E]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK-NOT: braid.convert %[[H]]
// CHECK: braid.neg %[[E]]
// CHECK-NOT: braid.convert
// CHECK: return %[[H]]#0, %[[H]]#1, %[[H]]#2, %[[P]], %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>

// CHECK-LABEL: func.func @drv.c1.F(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32>

// CHECK-LABEL: func.func @drv.c0.B(%arg0: tensor<2x8xf32>, %arg1: tensor<2x2x8xbf16>, %arg2: tensor<2x2x8xbf16>, %arg3: tensor<2x8xbf16>, %arg4: tensor<2x8xf32>, %arg5: tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: braid.convert %arg1
// CHECK-NOT: braid.convert %arg2
// CHECK: %[[U:.*]] = braid.convert %arg3 : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK-NEXT: braid.mul %{{.*}}, %[[U]]
// CHECK-NOT: braid.convert
// CHECK: braid.repeat @bwd(%{{.*}}, %arg1, %arg2) {{.*}} : (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>) -> tensor<2x8xf32>
// CHECK-NOT: braid.convert
// CHECK: return

// CHECK-LABEL: func.func @drv(
// CHECK: %[[F:.*]]:6 = call @drv.c0.F(%arg0) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: call @drv.c0.B(%{{.*}}, %[[F]]#1, %[[F]]#2, %[[F]]#3, %[[F]]#4, %[[F]]#5) : (tensor<2x8xf32>, tensor<2x2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>

// The generated GPT (1F1B, 2 micro-batches): each chunk's F piece hands
// its B and W pieces uint16_t buffers (the activation it sends, f32,
// excepted; each chunk makes its own working copy of the tied embedding),
// the per-micro-batch buffers are 2-byte arena slices, and a layer's
// packed results are written straight into the piece's out pointers (no
// bf16 copies).
// NOCOPY-NOT: braid_rt_copy_bf16
// CPP: void braid_forward_grad_c0_F(int32_t* {{[^,]*}}, float* {{[^,]*}}, uint16_t*
// CPP-NOT: float*
// CPP-SAME: {
// CPP: void braid_forward_grad_c0_B(float* {{[^,]*}}, uint16_t*
// CPP: braid_forward_grad_c0_F({{.*}}((uint16_t *)(braid_arena_

braid.layer @fwd(%x: tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>) {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %w16 = braid.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %m = braid.matmul %x, %w16 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  %g = braid.gelu tanh %m : tensor<2x8xbf16>
  %g32 = braid.convert %g : tensor<2x8xbf16> to tensor<2x8xf32>
  braid.yield %g, %m, %g32 : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf32>
}

braid.layer @bwd(%dy: tensor<2x8xbf16>, %m: tensor<2x8xbf16>, %g32: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  %a = braid.mul %dy, %m : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %e = braid.exp %g32 : tensor<2x8xf32>
  %e16 = braid.convert %e : tensor<2x8xf32> to tensor<2x8xbf16>
  %b = braid.add %a, %e16 : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  braid.yield %b : tensor<2x8xbf16>
}

func.func @drv.c0.F(%x: tensor<2x8xf32>) -> (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xbf16>) attributes {braid.chunk = 0 : i64, braid.phase = "F"} {
  %x16 = braid.convert %x : tensor<2x8xf32> to tensor<2x8xbf16>
  %h:3 = braid.repeat @fwd(%x16) {prefix = "h", count = 2 : i64, carried = 1 : i64} : (tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>)
  %e = braid.exp %h#0 : tensor<2x8xbf16>
  %h32 = braid.convert %h#0 : tensor<2x8xbf16> to tensor<2x8xf32>
  %n = braid.exp %h32 : tensor<2x8xf32>
  %r = braid.neg %e : tensor<2x8xbf16>
  return %h#0, %h#1, %h#2, %e, %n, %r : tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xbf16>
}

func.func @drv.c1.F(%a: tensor<2x8xbf16>) -> tensor<2x8xbf16> attributes {braid.chunk = 1 : i64, braid.phase = "F"} {
  %s = braid.exp %a : tensor<2x8xbf16>
  return %s : tensor<2x8xbf16>
}

func.func @drv.c0.B(%dy: tensor<2x8xbf16>, %m: tensor<2x2x8xbf16>, %g32: tensor<2x2x8xf32>, %e: tensor<2x8xbf16>, %n: tensor<2x8xf32>, %r: tensor<2x8xbf16>) -> tensor<2x8xf32> attributes {braid.chunk = 0 : i64, braid.phase = "B"} {
  %a = braid.mul %dy, %r : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %b = braid.mul %a, %e : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %d = braid.repeat @bwd(%b, %m, %g32) {prefix = "h", count = 2 : i64, carried = 1 : i64, reverse} : (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>) -> tensor<2x8xbf16>
  %d32 = braid.convert %d : tensor<2x8xbf16> to tensor<2x8xf32>
  %o = braid.add %d32, %n : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %o : tensor<2x8xf32>
}

func.func @drv(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xbf16>) attributes {braid.schedule = {name = "1f1b", microbatches = 1 : i64, ranks = [["F0.0", "send activation 0.0 to rank 1", "BW0.0"], ["recv activation 0.0 from rank 0", "F0.0"]]}} {
  %f:6 = call @drv.c0.F(%x) : (tensor<2x8xf32>) -> (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xbf16>)
  %y = call @drv.c1.F(%f#0) : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %d = call @drv.c0.B(%y, %f#1, %f#2, %f#3, %f#4, %f#5) : (tensor<2x8xbf16>, tensor<2x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return %d, %f#5 : tensor<2x8xf32>, tensor<2x8xbf16>
}
