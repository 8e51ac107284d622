// RUN: braid-opt %s --braid-bucket-gathers | FileCheck %s
// RUN: braid-opt %s --braid-bucket-gathers=bucket-mb=0.0001 | FileCheck %s --check-prefix=SMALL
// RUN: braid-opt %s --braid-bucket-gathers=bucket-mb=0 | FileCheck %s --check-prefix=OFF
// RUN: not braid-opt %s --braid-bucket-gathers=bucket-mb=-1 2>&1 | FileCheck %s --check-prefix=BAD
//
// braid-comm-report lists a bucket as one all_gather of the members'
// gathered bytes, its cause naming theirs; each function's total bytes
// are the unbucketed program's (@f: 296), its time one latency less per
// member fused.
// RUN: braid-opt %s --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT0
// RUN: braid-opt %s --braid-bucket-gathers --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT0-LABEL: braid-comm-report: @f
// REPORT0: total all sent 296 bytes 74 elements 2.000e-05 s
// REPORT-LABEL: braid-comm-report: @f
// REPORT-NEXT: where
// REPORT-NEXT: @f - all_gather dp 2 464 232 5.002e-06 1 bucket of 3 all_gathers: a; w; c
// REPORT-NEXT: @f - all_gather dp 2 128 64 5.001e-06 1 -
// REPORT: total all sent 296 bytes 74 elements 1.000e-05 s
//
// The fused program computes exactly what the members did, element by
// element: braid-eval on 2 devices holding different shares (seeded),
// every result dumped; likewise after braid-zero3-prefetch.
// RUN: braid-opt %s --braid-bucket-gathers -o %t.bucketed.mlir
// RUN: braid-opt %s --braid-bucket-gathers=leave-first=1 --braid-zero3-prefetch="depth=1 across-repeats=1" -o %t.prefetched.mlir
// RUN: braid-eval %s --entry f --mesh mesh --seed 3 --dump > %t.f.plain
// RUN: braid-eval %t.bucketed.mlir --entry f --mesh mesh --seed 3 --dump > %t.f.bucketed
// RUN: braid-eval %t.prefetched.mlir --entry f --mesh mesh --seed 3 --dump > %t.f.prefetched
// RUN: diff %t.f.plain %t.f.bucketed
// RUN: diff %t.f.plain %t.f.prefetched
// RUN: braid-eval %s --entry g --mesh mesh --seed 3 --dump > %t.g.plain
// RUN: braid-eval %t.bucketed.mlir --entry g --mesh mesh --seed 3 --dump > %t.g.bucketed
// RUN: braid-eval %t.prefetched.mlir --entry g --mesh mesh --seed 3 --dump > %t.g.prefetched
// RUN: diff %t.g.plain %t.g.bucketed
// RUN: diff %t.g.plain %t.g.prefetched
// RUN: FileCheck %s --check-prefix=EVAL < %t.f.bucketed

// Tests braid-bucket-gathers: the parameter all_gathers of a block that
// follow one another become one all_gather along dimension 0 of the
// concatenation of the members' flattened shares, at the first member; the
// later members' reads move up to it; each member's full tensor is sliced
// from the fused rows ([n, total]) where the member was: a reshape when
// the gathered dimension is the outermost (%a) or follows size-1 ones
// only (%c, [1, 2] gathered along 1), else (%w, [3, 2, 4] gathered along
// dimension 1) a reshape to [n, 3, 8], a transpose to [3, n, 8] and a
// reshape to [3, 4, 4]. The gather of an activation between them (%gx)
// stays, and so does the bucket around it.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @f
// CHECK-NEXT: %[[A:.*]] = braid.param "a"
// CHECK-NEXT: %[[W:.*]] = braid.param "w"
// CHECK-NEXT: %[[C:.*]] = braid.param "c"
// CHECK-NEXT: %[[FA:.*]] = braid.reshape %[[A]] : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[FW:.*]] = braid.reshape %[[W]] : (tensor<3x2x4xf32>) -> tensor<24xf32>
// CHECK-NEXT: %[[FC:.*]] = braid.reshape %[[C]] : (tensor<1x2xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[CAT:.*]] = braid.concat %[[FA]], %[[FW]], %[[FC]] {axis = 0 : i64} : (tensor<32xf32>, tensor<24xf32>, tensor<2xf32>) -> tensor<58xf32>
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %[[CAT]] on @mesh ["dp"] {braid.bucket = 3 : i64, braid.cause = "bucket of 3 all_gathers: a; w; c", dim = 0 : i64} : (tensor<58xf32>) -> tensor<116xf32>
// CHECK-NEXT: %[[ROWS:.*]] = braid.reshape %[[G]] : (tensor<116xf32>) -> tensor<2x58xf32>
// CHECK-NEXT: %[[SA:.*]] = braid.slice %[[ROWS]] {limit = array<i64: 2, 32>, start = array<i64: 0, 0>} : (tensor<2x58xf32>) -> tensor<2x32xf32>
// CHECK-NEXT: %[[GA:.*]] = braid.reshape %[[SA]] : (tensor<2x32xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[H:.*]] = braid.matmul %{{.*}}, %[[GA]]
// CHECK-NEXT: %[[GX:.*]] = braid.all_gather %[[H]] on @mesh ["dp"] {dim = 0 : i64}
// CHECK-NEXT: %[[SW:.*]] = braid.slice %[[ROWS]] {limit = array<i64: 2, 56>, start = array<i64: 0, 32>} : (tensor<2x58xf32>) -> tensor<2x24xf32>
// CHECK-NEXT: %[[VW:.*]] = braid.reshape %[[SW]] : (tensor<2x24xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[TW:.*]] = braid.transpose %[[VW]] {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x8xf32>) -> tensor<3x2x8xf32>
// CHECK-NEXT: %[[GW:.*]] = braid.reshape %[[TW]] : (tensor<3x2x8xf32>) -> tensor<3x4x4xf32>
// CHECK-NEXT: braid.silu %[[GW]]
// CHECK-NEXT: %[[SC:.*]] = braid.slice %[[ROWS]] {limit = array<i64: 2, 58>, start = array<i64: 0, 56>} : (tensor<2x58xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: %[[GC:.*]] = braid.reshape %[[SC]] : (tensor<2x2xf32>) -> tensor<1x4xf32>
// CHECK-NOT: braid.all_gather
// CHECK: return

// A bucket over the cap closes before the member that would take it over:
// at 0.0001 MB (104 bytes of gathered parameters) a (256 bytes) and w
// (192) are each over it alone, and c (16) does not fit beside w.
// The layer norm's two (32 bytes each) fill one.
// SMALL-LABEL: func.func @f
// SMALL-NOT: braid.bucket
// SMALL-LABEL: braid.layer @block
// SMALL: braid.concat %{{[^,]*}}, %{{[^,]*}} {axis = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// SMALL-NEXT: braid.all_gather {{.*}}braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_gathers", dim = 0 : i64} : (tensor<8xf32>) -> tensor<16xf32>
// SMALL-NOT: braid.bucket
// SMALL-LABEL: func.func @g
// SMALL-NOT: braid.bucket
// SMALL-LABEL: func.func @mixed

// OFF-NOT: braid.bucket
// BAD: braid-bucket-gathers: bucket-mb must be non-negative and finite, got -1

// EVAL: result 0: tensor<4x8xf32>
// EVAL: result 1: tensor<3x4x4xf32>
// EVAL: result 2: tensor<1x4xf32>

func.func @f(%x: tensor<2x8xf32> {braid.name = "x"}) -> (tensor<4x8xf32>, tensor<3x4x4xf32>, tensor<1x4xf32>) {
  %a = braid.param "a" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %ga = braid.all_gather %a on @mesh ["dp"] {braid.cause = "a", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = braid.matmul %x, %ga : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %gx = braid.all_gather %h on @mesh ["dp"] {dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %w = braid.param "w" {block_of = #braid.sharding<@mesh, [[], ["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<3x2x4xf32>
  %gw = braid.all_gather %w on @mesh ["dp"] {braid.cause = "w", dim = 1 : i64} : (tensor<3x2x4xf32>) -> tensor<3x4x4xf32>
  %s = braid.silu %gw : tensor<3x4x4xf32>
  %c = braid.param "c" {block_of = #braid.sharding<@mesh, [[], ["dp"]]>, init = #braid.init<normal(0.5)>} : tensor<1x2xf32>
  %gc = braid.all_gather %c on @mesh ["dp"] {braid.cause = "c", dim = 1 : i64} : (tensor<1x2xf32>) -> tensor<1x4xf32>
  %sc = braid.silu %gc : tensor<1x4xf32>
  return %gx, %s, %sc : tensor<4x8xf32>, tensor<3x4x4xf32>, tensor<1x4xf32>
}

// A repeat ends a bucket (its instances would run holding it): the
// gathers before it (e) and after it (f1, f2) are separate; in the layer,
// all four gather at once, or with leave-first=1 the layer norm's two
// stay single and braid-zero3-prefetch across-repeats starts them in the
// instance before, as without buckets, the bucket of w1 and w2 at the top
// of the instance, during the layer norm. Without leave-first it says why
// the layer's first gathers stay in it.
// RUN: braid-opt %s --braid-bucket-gathers=leave-first=1 | FileCheck %s --check-prefix=LEAVE
// RUN: FileCheck %s --check-prefix=PREFETCH < %t.prefetched.mlir
// RUN: braid-opt %s --braid-bucket-gathers --braid-zero3-prefetch="depth=1 across-repeats=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN

// CHECK-LABEL: braid.layer @block(
// CHECK: braid.concat {{.*}} -> tensor<72xf32>
// CHECK-NEXT: braid.all_gather {{.*}}braid.bucket = 4 : i64
// CHECK-NOT: braid.all_gather
// CHECK: braid.yield
// CHECK-LABEL: func.func @g
// CHECK: braid.all_gather %{{.*}} {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: braid.repeat
// CHECK: braid.all_gather {{.*}}braid.bucket = 2 : i64

// LEAVE-LABEL: braid.layer @block(
// LEAVE: braid.all_gather %{{.*}} {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
// LEAVE: braid.all_gather %{{.*}} {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
// LEAVE-NEXT: braid.layer_norm
// LEAVE: braid.all_gather {{.*}}braid.bucket = 2 : i64{{.*}} : (tensor<64xf32>) -> tensor<128xf32>
// LEAVE-NOT: braid.all_gather
// LEAVE: braid.yield

// PREFETCH-LABEL: braid.layer @block(
// PREFETCH-SAME: %[[F0:[^:]*]]: !braid.future<tensor<8xf32>>, %[[F1:[^:]*]]: !braid.future<tensor<8xf32>>)
// PREFETCH-NEXT: %[[LW:.*]] = braid.wait %[[F0]]
// PREFETCH-NEXT: %[[LB:.*]] = braid.wait %[[F1]]
// PREFETCH: %[[CAT:.*]] = braid.concat
// PREFETCH-NEXT: %[[S:.*]] = braid.all_gather_start %[[CAT]] {{.*}}braid.bucket = 2
// PREFETCH-NEXT: braid.layer_norm %{{.*}}, %[[LW]], %[[LB]]
// PREFETCH-NEXT: braid.wait %[[S]]
// PREFETCH-NEXT: braid.param "ln.weight" {{{.*}}braid.next_instance
// PREFETCH-NEXT: braid.all_gather_start
// PREFETCH-NEXT: braid.param "ln.bias" {{{.*}}braid.next_instance
// PREFETCH-NEXT: braid.all_gather_start
// PREFETCH-NEXT: braid.reshape
// PREFETCH-NEXT: braid.slice
// PREFETCH-LABEL: func.func @g

// WARN: warning: braid-zero3-prefetch: a bucket of 4 parameter gathers is among @block's first 1 group(s), which across-repeats would start in the instance before; a bucket gathers a concatenation, a temporary of the instance, so the layer's gathers stay in it (run braid-bucket-gathers with leave-first=1)

braid.layer @block(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %lw = braid.param "ln.weight" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %lb = braid.param "ln.bias" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %glw = braid.all_gather %lw on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %glb = braid.all_gather %lb on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %n = braid.layer_norm %x, %glw, %glb : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %w1 = braid.param "w1" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %g1 = braid.all_gather %w1 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = braid.matmul %n, %g1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %w2 = braid.param "w2" {block_of = #braid.sharding<@mesh, [[], ["dp"]]>, init = #braid.init<normal(0.5)>} : tensor<8x4xf32>
  %g2 = braid.all_gather %w2 on @mesh ["dp"] {dim = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x8xf32>
  %h2 = braid.matmul %h, %g2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %y = braid.silu %h2 : tensor<2x8xf32>
  braid.yield %y : tensor<2x8xf32>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %pe = braid.param "e" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %ge = braid.all_gather %pe on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %x1 = braid.matmul %x, %ge : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %h = braid.repeat @block(%x1) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %f1 = braid.param "f1" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %gf1 = braid.all_gather %f1 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y1 = braid.matmul %h, %gf1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %f2 = braid.param "f2" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %gf2 = braid.all_gather %f2 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y2 = braid.matmul %y1, %gf2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y2 : tensor<2x8xf32>
}

// bf16-mixed: the gathered value of a product's weight is its working
// copy, a braid.convert of the read, which moves up with the read; each
// element type fills its own bucket, so the norm scales (f32) between the
// working copies (bf16) end neither.
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT: %[[S:.*]] = braid.param "s"
// CHECK-NEXT: %[[T:.*]] = braid.param "t"
// CHECK-NEXT: %[[CAT:.*]] = braid.concat %[[S]], %[[T]] {axis = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT: braid.all_gather %[[CAT]] {{.*}}braid.bucket = 2 : i64{{.*}} : (tensor<8xf32>) -> tensor<16xf32>
// CHECK: %[[W:.*]] = braid.param "w"
// CHECK-NEXT: %[[CW:.*]] = braid.convert %[[W]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[V:.*]] = braid.param "v"
// CHECK-NEXT: %[[CV:.*]] = braid.convert %[[V]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[FW:.*]] = braid.reshape %[[CW]] : (tensor<4x8xbf16>) -> tensor<32xbf16>
// CHECK-NEXT: %[[FV:.*]] = braid.reshape %[[CV]] : (tensor<4x8xbf16>) -> tensor<32xbf16>
// CHECK-NEXT: %[[CAT2:.*]] = braid.concat %[[FW]], %[[FV]] {axis = 0 : i64} : (tensor<32xbf16>, tensor<32xbf16>) -> tensor<64xbf16>
// CHECK-NEXT: braid.all_gather %[[CAT2]] {{.*}}braid.bucket = 2 : i64{{.*}} : (tensor<64xbf16>) -> tensor<128xbf16>
// CHECK-NOT: braid.all_gather
// CHECK: return
func.func @mixed(%x: tensor<2x8xf32> {braid.name = "x"}) -> (tensor<8xf32>, tensor<8x8xbf16>, tensor<8xf32>, tensor<8x8xbf16>) {
  %s = braid.param "s" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<ones>} : tensor<4xf32>
  %gs = braid.all_gather %s on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %w = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %cw = braid.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
  %gw = braid.all_gather %cw on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %t = braid.param "t" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<zeros>} : tensor<4xf32>
  %gt = braid.all_gather %t on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %v = braid.param "v" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %cv = braid.convert %v : tensor<4x8xf32> to tensor<4x8xbf16>
  %gv = braid.all_gather %cv on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  return %gs, %gw, %gt, %gv : tensor<8xf32>, tensor<8x8xbf16>, tensor<8xf32>, tensor<8x8xbf16>
}

// An empty share joins no bucket (it adds nothing, and its group size
// cannot be read off its shapes): the gathers around it still fuse.
// CHECK-LABEL: func.func @empty
// CHECK: braid.all_gather {{.*}}braid.bucket = 2 : i64{{.*}} : (tensor<64xf32>) -> tensor<128xf32>
// CHECK: %[[A:.*]] = braid.param "ea"
// CHECK-NEXT: braid.all_gather %[[A]] on @mesh ["dp"] {dim = 1 : i64} : (tensor<4x0xf32>) -> tensor<4x0xf32>
// CHECK-NOT: braid.all_gather
// CHECK: return
func.func @empty() -> (tensor<8x8xf32>, tensor<4x0xf32>, tensor<8x8xf32>) {
  %b = braid.param "eb" {block_of = #braid.sharding<@mesh, [[], ["dp"]]>, init = #braid.init<normal(0.5)>} : tensor<8x4xf32>
  %gb = braid.all_gather %b on @mesh ["dp"] {dim = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x8xf32>
  %a = braid.param "ea" {block_of = #braid.sharding<@mesh, [[], ["dp"]]>, init = #braid.init<normal(0.5)>} : tensor<4x0xf32>
  %ga = braid.all_gather %a on @mesh ["dp"] {dim = 1 : i64} : (tensor<4x0xf32>) -> tensor<4x0xf32>
  %c = braid.param "ec" {block_of = #braid.sharding<@mesh, [[], ["dp"]]>, init = #braid.init<normal(0.5)>} : tensor<8x4xf32>
  %gc = braid.all_gather %c on @mesh ["dp"] {dim = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x8xf32>
  return %gb, %ga, %gc : tensor<8x8xf32>, tensor<4x0xf32>, tensor<8x8xf32>
}
