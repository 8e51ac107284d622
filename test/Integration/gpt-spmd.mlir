// Tests that braidc compiles partitioned GPT training steps (dp 2, tp 2 with
// a vocabulary-parallel embedding and cross-entropy, dp 2 x tp 2, and the
// last with started collectives) into one program run on every rank by
// braid-run, whose rank 0 prints the losses of braid-eval --mesh within 1e-5
// relative over 3 steps; and that a world without the mesh's number of
// ranks ends the program with the runtime's message and a non-zero status.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step -o %t.train.mlir
//
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: braidc %t.dp2.mlir --entry train_step -o %t.dp2
// RUN: braid-run -n 2 %t.dp2 --steps 3 --seed 1 > %t.dp2.out
// RUN: braid-eval %t.dp2.mlir --steps 3 --seed 1 --mesh mesh > %t.dp2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dp2.out %t.dp2.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braid-opt %t.train.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.tp2.mlir
// RUN: braidc %t.tp2.mlir --entry train_step -o %t.tp2
// RUN: braid-run -n 2 %t.tp2 --steps 3 --seed 1 > %t.tp2.out
// RUN: braid-eval %t.tp2.mlir --steps 3 --seed 1 --mesh mesh > %t.tp2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.tp2.out %t.tp2.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dptp.mlir
// RUN: braidc %t.dptp.mlir --entry train_step -o %t.dptp
// RUN: braid-run -n 4 %t.dptp --steps 3 --seed 1 > %t.dptp.out
// RUN: braid-eval %t.dptp.mlir --steps 3 --seed 1 --mesh mesh > %t.dptp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.out %t.dptp.eval --rtol 1e-5 | FileCheck %s
// RUN: FileCheck %s --check-prefix=OUT < %t.dptp.out
//
// RUN: braid-opt %t.dptp.mlir --braid-async-collectives -o %t.async.mlir
// RUN: braidc %t.async.mlir --entry train_step -o %t.async
// RUN: braid-run -n 4 %t.async --steps 3 --seed 1 > %t.async.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.async.out %t.dptp.eval --rtol 1e-5 | FileCheck %s
//
// RUN: not braid-run -n 3 %t.dptp --steps 1 2>&1 | FileCheck %s --check-prefix=RUNSIZE
// RUN: not %t.dptp --steps 1 2>&1 | FileCheck %s --check-prefix=SIZE

// CHECK: ok: 3 losses within 1e-05

// Only rank 0 prints.
// OUT: step 0 loss
// OUT-NOT: step 0
// OUT: step 2 loss
// OUT-NOT: step
// OUT: summary: 3 steps

// braid-run refuses the count before starting a rank; the runtime itself
// refuses a world of another size (here, the program run alone).
// RUNSIZE: braid-run: error: '{{.*}}dptp' runs on 4 ranks (the product of its mesh), not -n 3: give -n 4
// RUNSIZE-NOT: braid_rt_mesh_create
// SIZE: error: braid_rt_mesh_create: mesh {2,2} has 4 devices but the world has 1 ranks
