// Tests a compiled training step whose forward program carries a user's
// braid.shard (the model of test/Transforms/autodiff-shard.mlir: a matmul
// chain, the hidden activation's rows constrained over dp, on its own
// braid.mesh): braid-autodiff puts the same constraint on the activation's
// gradient, and the per-device program propagated from both and
// partitioned on dp=2 prints the losses of braidc's single-rank program of
// the same model without the sharding (its braid.mesh and braid.shard lines
// removed) within 1e-5 (3 steps, lr 0.01, seed 4).
//
// braidc --mesh dp=2 runs braid-shard, which makes its own mesh and so
// refuses a model that already has one: a user's sharding goes through
// braid-opt's passes and braidc --entry train_step.
//
// RUN: sed -e '/= braid.shard/d' -e '/^braid.mesh/d' -e 's/%hs\b/%h/g' %S/../Transforms/autodiff-shard.mlir > %t.plain.mlir
// RUN: braidc %t.plain.mlir --lr 0.01 -o %t.one
// RUN: %t.one --steps 3 --seed 4 > %t.one.out
// RUN: braid-opt %S/../Transforms/autodiff-shard.mlir --braid-autodiff --braid-train-step="lr=0.01" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: braidc %t.dp2.mlir --entry train_step -o %t.dp2
// RUN: braid-run -n 2 %t.dp2 --steps 3 --seed 4 > %t.dp2.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dp2.out %t.one.out --rtol 1e-5 | FileCheck %s
// RUN: not braidc %S/../Transforms/autodiff-shard.mlir --mesh dp=2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=MESH

// CHECK: ok: 3 losses within 1e-05
// MESH: error: braid-shard: the module already has a braid.mesh; annotate it by hand or remove the mesh
