// Tests that braidc derives the parallel training step itself from a model
// (--mesh, --schedule, --microbatches and the optimizer options run the same
// passes as braid-opt's --braid-codegen-pipeline=train=true ...): the
// program's losses equal braid-eval's on the program those passes make,
// single device, dp2 x tp2 x pp2 (ZB-H1) on 8 ranks and dp2 x tp2 with
// ZeRO-2 on 4; micro-batches with and without a pipeline; and bad options
// are clear errors.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
//
// RUN: braidc %t.mlir --lr 0.01 --clip-norm 1.0 -o %t.one
// RUN: %t.one --steps 3 --seed 1 > %t.one.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" -o %t.one.mlir
// RUN: braid-eval %t.one.mlir --steps 3 --seed 1 > %t.one.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one.out %t.one.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braidc %t.mlir --mesh dp=2,tp=2,pp=2 --schedule zb-h1 --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.3d
// RUN: braid-run -n 8 %t.3d --steps 3 --seed 1 > %t.3d.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0 accumulation=4 pipeline" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-h1 -o %t.3d.mlir
// RUN: braid-eval %t.3d.mlir --steps 3 --seed 1 --pipeline --mesh mesh > %t.3d.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.3d.out %t.3d.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 2 --lr 0.01 --clip-norm 1.0 -o %t.zero2
// RUN: braid-run -n 4 %t.zero2 --steps 3 --seed 1 > %t.zero2.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" --braid-shard="dp=2 tp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.zero2.mlir
// RUN: braid-eval %t.zero2.mlir --steps 3 --seed 1 --mesh mesh > %t.zero2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zero2.out %t.zero2.eval --rtol 1e-5 | FileCheck %s
//
// The step's global batch is --microbatches times the model's batch: a
// batch-4 model on dp2 x tp2 x pp2 with 4 micro-batches trains exactly like
// the batch-16 model on one rank.
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 16 -o %t.b16.mlir
// RUN: braidc %t.b16.mlir --lr 0.01 --clip-norm 1.0 -o %t.b16
// RUN: %t.b16 --steps 3 --seed 1 > %t.b16.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.3d.out %t.b16.out --rtol 1e-5 | FileCheck %s
// Without a pipeline the micro-batches accumulate in a loop: one device and
// dp2 x tp2 with ZeRO-2 (4 ranks) train the batch-4 model on 4 micro-batches
// like the batch-16 model too.
// RUN: braidc %t.mlir --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.acc
// RUN: %t.acc --steps 3 --seed 1 > %t.acc.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.acc.out %t.b16.out --rtol 1e-5 | FileCheck %s
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 2 --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.acc.zero2
// RUN: braid-run -n 4 %t.acc.zero2 --steps 3 --seed 1 > %t.acc.zero2.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.acc.zero2.out %t.b16.out --rtol 1e-5 | FileCheck %s
//
// CHECK: ok: 3 losses within 1e-05
//
// Any compile replays in braid-opt: braidc's EmitC and that of
// --braid-codegen-pipeline with the same options are the same module.
// RUN: braidc %t.mlir --mesh dp=2,tp=2,pp=2 --schedule zb-h1 --microbatches 4 --lr 3e-3 --min-lr 3e-4 --warmup-steps 2 --total-steps 20 --decay cosine --clip-norm 1.0 --emit mlir -o %t.3d.emitc.mlir
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 tp=2 pp=2 schedule=zb-h1 microbatches=4 lr=3e-3 min-lr=3e-4 warmup-steps=2 total-steps=20 decay=cosine clip-norm=1.0" -o %t.3d.replay.mlir
// RUN: diff -B %t.3d.emitc.mlir %t.3d.replay.mlir
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 1 --sp --async-collectives --optimizer sgd --lr 0.1 --decay linear --total-steps 5 --emit mlir -o %t.async.emitc.mlir
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 tp=2 zero=1 sp=true async-collectives=true optimizer=sgd lr=0.1 decay=linear total-steps=5" -o %t.async.replay.mlir
// RUN: diff -B %t.async.emitc.mlir %t.async.replay.mlir
//
// RUN: not braidc %t.mlir --mesh dp=2,xp=2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: braidc: --mesh: expected dp=D,tp=T,pp=P with positive degrees, got 'xp=2'
// RUN: not braidc %t.mlir --mesh dp=2 --entry logits -o %t.bad 2>&1 | FileCheck %s --check-prefix=ENTRY
// ENTRY: braidc: --entry does not combine with training options
// RUN: not braidc %t.mlir --target tpu -o %t.bad 2>&1 | FileCheck %s --check-prefix=TPU
// TPU: braidc: --target tpu is not a target; the targets are cpu and cuda
// RUN: not braidc %t.mlir --emit cu -o %t.bad 2>&1 | FileCheck %s --check-prefix=CU
// CU: braidc: --emit cu writes the CUDA program: it needs --target cuda
// TPU-NOT: note
// RUN: not braidc %t.mlir --mesh tp=3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=TP
// TP: not divisible by tp = 3
