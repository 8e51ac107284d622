// RUN: braid-opt %s --braid-comm-report="alpha=1 bandwidth=1" -o /dev/null | FileCheck %s --check-prefix=KINDS
// RUN: braid-opt %s --braid-async-collectives --braid-comm-report="alpha=1 bandwidth=1" -o /dev/null | FileCheck %s --check-prefix=ASYNC

// Tests that every kind of collective, blocking and async, is costed by the
// ring model, with alpha = 1 s and bandwidth = 1 B/s so that time = steps +
// bytes sent. S is the larger of input and output. For %x (4 x 8 f32, 128 bytes):
// all_reduce over tp (n = 4) sends 2(n-1)/n S = 192 in 2(n-1) = 6 steps;
// all_gather to 16 x 8 (S = 512) sends 384 in 3; reduce_scatter and
// all_to_all send 96 in 3; broadcast_from over dp (n = 2) sends S = 128 in
// 1; all_slice moves nothing; all_reduce max over dp, tp (n = 8) sends
// 224 in 14; the bf16 all_reduce (S = 64) sends 96 in 6. Totals: 1216 bytes,
// 328 elements (bytes / element size), 1252 s.
// KINDS: braid-comm-report: @kinds (alpha 1 s, bandwidth 1 B/s)
// KINDS: @kinds - all_reduce tp 4 128 192 1.980e+02 1 -
// KINDS-NEXT: @kinds - all_gather tp 4 512 384 3.870e+02 1 -
// KINDS-NEXT: @kinds - reduce_scatter tp 4 128 96 9.900e+01 1 -
// KINDS-NEXT: @kinds - all_to_all tp 4 128 96 9.900e+01 1 -
// KINDS-NEXT: @kinds - broadcast_from dp 2 128 128 1.290e+02 1 -
// KINDS-NEXT: @kinds - all_slice dp,tp 8 128 0 0.000e+00 1 -
// KINDS-NEXT: @kinds - all_reduce dp,tp 8 128 224 2.380e+02 1 -
// KINDS-NEXT: @kinds - all_reduce tp 4 64 96 1.020e+02 1 -
// KINDS: total all sent 1216 bytes 328 elements 1.252e+03 s
// The same after braid-async-collectives: all but all_slice (which has no
// async form) are marked, the figures do not change.
// ASYNC: @kinds - all_reduce tp 4 128 192 1.980e+02 1 [async] -
// ASYNC-NEXT: @kinds - all_gather tp 4 512 384 3.870e+02 1 [async] -
// ASYNC-NEXT: @kinds - reduce_scatter tp 4 128 96 9.900e+01 1 [async] -
// ASYNC-NEXT: @kinds - all_to_all tp 4 128 96 9.900e+01 1 [async] -
// ASYNC-NEXT: @kinds - broadcast_from dp 2 128 128 1.290e+02 1 [async] -
// ASYNC-NEXT: @kinds - all_slice dp,tp 8 128 0 0.000e+00 1 -
// ASYNC-NEXT: @kinds - all_reduce dp,tp 8 128 224 2.380e+02 1 [async] -
// ASYNC-NEXT: @kinds - all_reduce tp 4 64 96 1.020e+02 1 [async] -
// ASYNC: total all sent 1216 bytes 328 elements 1.252e+03 s
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @kinds(%x: tensor<4x8xf32>, %h: tensor<4x8xbf16>) {
  %0 = braid.all_reduce sum %x on @mesh ["tp"] : tensor<4x8xf32>
  %1 = braid.all_gather %x on @mesh ["tp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<16x8xf32>
  %2 = braid.reduce_scatter %x on @mesh ["tp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %3 = braid.all_to_all %x on @mesh ["tp"] {split_dim = 0 : i64, concat_dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<1x32xf32>
  %4 = braid.broadcast_from %x on @mesh ["dp"] {root = 1 : i64} : tensor<4x8xf32>
  %5 = braid.all_slice %x on @mesh ["dp", "tp"] {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %6 = braid.all_reduce max %x on @mesh ["dp", "tp"] : tensor<4x8xf32>
  %7 = braid.all_reduce sum %h on @mesh ["tp"] : tensor<4x8xbf16>
  return
}
