// Tests each collective in generated code (all_reduce, all_gather blocking
// and started, all_slice over two axes, reduce_scatter, all_to_all,
// broadcast_from), a sharded parameter initialised block by block, and the
// vocabulary-parallel embedding and its gradient, on a 2 x 2 mesh: the
// results (made replicated by gathers) equal braid-eval --mesh's element by
// element. A failing vocabulary-parallel cross-entropy (i64 labels) ends
// every rank with a located message.
//
// RUN: braidc %s --entry f -o %t.prog
// RUN: braid-run -n 4 %t.prog --seed 5 --dump > %t.out
// RUN: braid-eval %s --entry f --seed 5 --mesh mesh --dump > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.out %t.eval --rtol 1e-6 --tensors | FileCheck %s
// RUN: braidc %s --entry ids -o %t.ids
// RUN: braid-run -n 4 %t.ids --seed 5 --dump > %t.ids.out
// RUN: braid-eval %s --entry ids --seed 5 --mesh mesh --dump > %t.ids.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.ids.out %t.ids.eval --rtol 1e-6 --tensors | FileCheck %s --check-prefix=IDS
// RUN: braidc %s --entry bad -o %t.bad
// RUN: not braid-run -n 4 %t.bad 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: ok: 6 tensors within 1e-06 element by element

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @f(%x: tensor<4x8xf32> {braid.name = "x"}, %ids: tensor<4xi32> {braid.name = "ids", braid.range = 32 : i64}) -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<32x8xf32>) {
  %w = braid.param "w" {block_of = #braid.sharding<@mesh, [["tp"], []]>, init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %e = braid.embedding %w, %ids {mesh = @mesh, vocab_axes = ["tp"]} : (tensor<16x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  %s = braid.all_reduce sum %e on @mesh ["tp"] : tensor<4x8xf32>
  %f = braid.all_gather_start %x on @mesh ["tp"] {dim = 1 : i64} : tensor<4x8xf32> -> !braid.future<tensor<4x16xf32>>
  %g = braid.wait %f : !braid.future<tensor<4x16xf32>>
  %h = braid.all_slice %x on @mesh ["dp", "tp"] {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x2xf32>
  %hg = braid.all_gather %h on @mesh ["dp", "tp"] {dim = 1 : i64} : (tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = braid.reduce_scatter %g on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x8xf32>
  %a = braid.all_to_all %x on @mesh ["tp"] {split_dim = 0 : i64, concat_dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<2x16xf32>
  %ag = braid.all_gather %a on @mesh ["tp"] {dim = 0 : i64} : (tensor<2x16xf32>) -> tensor<4x16xf32>
  %b = braid.broadcast_from %e on @mesh ["tp"] {root = 1 : i64} : tensor<4x8xf32>
  %ee = braid.embedding_grad %ids, %s {mesh = @mesh, vocab_axes = ["tp"]} : (tensor<4xi32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  %eg = braid.all_gather %ee on @mesh ["tp"] {dim = 0 : i64} : (tensor<16x8xf32>) -> tensor<32x8xf32>
  return %g, %r, %hg, %ag, %b, %eg : tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<32x8xf32>
}

// i32 ids are gathered (and sliced) bit for bit, as ZeRO-3 over dp gathers
// the token ids for its vocabulary-parallel embedding.
// IDS: ok: 2 tensors within 1e-06 element by element
func.func @ids(%ids: tensor<2xi32> {braid.name = "ids", braid.range = 4096 : i64}) -> (tensor<8x4xf32>, tensor<2x4xf32>) {
  %w = braid.param "table" {init = #braid.init<normal(1.0)>} : tensor<4096x4xf32>
  %all = braid.all_gather %ids on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<2xi32>) -> tensor<8xi32>
  %e = braid.embedding %w, %all : (tensor<4096x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
  %mine = braid.all_slice %all on @mesh ["tp"] {dim = 0 : i64} : (tensor<8xi32>) -> tensor<4xi32>
  %back = braid.all_slice %mine on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xi32>) -> tensor<2xi32>
  %m = braid.embedding %w, %back : (tensor<4096x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
  return %e, %m : tensor<8x4xf32>, tensor<2x4xf32>
}

// A label outside the vocabulary group's ids: every rank ends, with the
// op's location.
// BAD: error: rank {{[0-3]}}: {{.*}}spmd-collectives.mlir:[[@LINE+2]]:8: braid.cross_entropy: label {{[0-9]+}} is outside [0, 16)
func.func @bad(%logits: tensor<4x8xf32> {braid.name = "logits"}, %labels: tensor<4xi64> {braid.name = "labels", braid.range = 1000 : i64}) -> tensor<f32> {
  %l = braid.cross_entropy %logits, %labels {mesh = @mesh, vocab_axes = ["tp"]} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
