// Tests that braidc compiles the schedules that need several chunks per
// rank (zb-v places 2 in a V, interleaved-1f1b 2 or --chunks) and that
// their programs train exactly like braid-eval on the program braid-opt's
// passes make with the same chunks, a chunk of no layer (the embedding
// alone) included; --chunks the schedule cannot run and a chunk with
// nothing in it are clear errors.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 2 --seq 8 --vocab 64 --batch 2 -o %t.mlir
//
// RUN: braidc %t.mlir --mesh pp=2 --schedule zb-v --lr 0.01 -o %t.zbv
// RUN: braid-run -n 2 %t.zbv --steps 3 --seed 1 > %t.zbv.out
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v" --braid-autodiff --braid-train-step="lr=0.01 accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-v -o %t.zbv.mlir
// RUN: braid-eval %t.zbv.mlir --steps 3 --seed 1 --pipeline > %t.zbv.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbv.out %t.zbv.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braidc %t.mlir --mesh pp=2 --schedule interleaved-1f1b --microbatches 4 --lr 0.01 -o %t.il
// RUN: braid-run -n 2 %t.il --steps 3 --seed 1 > %t.il.out
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2" --braid-autodiff --braid-train-step="lr=0.01 accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=interleaved-1f1b microbatches=4" -o %t.il.mlir
// RUN: braid-eval %t.il.mlir --steps 3 --seed 1 --pipeline > %t.il.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.il.out %t.il.eval --rtol 1e-5 | FileCheck %s
//
// A chunk of no layer (--stage-layers 0,2,1,1): rank 0 runs the embedding
// alone as chunk 0, then layer 3 and the head as chunk 3; the same losses
// as braid-eval. A middle chunk of no layer runs nothing: an error.
// RUN: braidc %t.mlir --mesh pp=2 --schedule zb-v --stage-layers 0,2,1,1 --lr 0.01 -o %t.zbv0
// RUN: braid-run -n 2 %t.zbv0 --steps 3 --seed 1 > %t.zbv0.out
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v layers=0,2,1,1" --braid-autodiff --braid-train-step="lr=0.01 accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-v -o %t.zbv0.mlir
// RUN: braid-eval %t.zbv0.mlir --steps 3 --seed 1 --pipeline > %t.zbv0.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbv0.out %t.zbv0.eval --rtol 1e-5 | FileCheck %s
// The last chunk of no layer (--stage-layers 1,1,2,0): rank 0 runs layer
// 0 as chunk 0 and the head alone as chunk 3.
// RUN: braidc %t.mlir --mesh pp=2 --schedule zb-v --stage-layers 1,1,2,0 --lr 0.01 -o %t.zbvh
// RUN: braid-run -n 2 %t.zbvh --steps 3 --seed 1 > %t.zbvh.out
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v layers=1,1,2,0" --braid-autodiff --braid-train-step="lr=0.01 accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-v -o %t.zbvh.mlir
// RUN: braid-eval %t.zbvh.mlir --steps 3 --seed 1 --pipeline > %t.zbvh.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbvh.out %t.zbvh.eval --rtol 1e-5 | FileCheck %s
// RUN: not braidc %t.mlir --mesh pp=2 --schedule zb-v --stage-layers 2,0,1,1 -o %t.bad 2>&1 | FileCheck %s --check-prefix=EMPTY
//
// RUN: not braidc %t.mlir --mesh pp=2 --schedule zb-v --chunks 3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=ZBV3
// RUN: not braidc %t.mlir --mesh pp=2 --schedule 1f1b --chunks 2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not braidc %t.mlir --schedule zb-v --chunks 2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=NOPP

// CHECK: ok: 3 losses within 1e-05
// EMPTY: error: braid-pipeline-split: chunk 1 would run nothing (no layer, and no ops outside layers fall in it); give it at least one layer
// ZBV3: braidc: zb-v places exactly 2 chunks per rank in a V (got 3)
// ONE: braidc: 1f1b runs one chunk per rank (got 2); use interleaved-1f1b or zb-v for more
// NOPP: braidc: --chunks splits pipeline stages, but the mesh has no pp axis
