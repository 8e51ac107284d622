// Tests braidc --grad-compression: the data-parallel gradient reductions
// of the compiled step are marked braid.compress and call the runtime's
// 16-bit reductions (bf16 and fp16; dp2, and dp2 x tp2 with ZeRO-2, whose
// gradients are reduce_scattered), the compile replays in braid-opt, the
// losses of 5 steps stay within 1e-4 (relative) of the uncompressed run's
// but are not all equal to them, braid-comm-report shows the bytes saved,
// PowerSGD resumes exactly and runs with --async-collectives, and bad
// values are clear errors.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
//
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression bf16 --emit mlir -o %t.bf16.emitc.mlir
// RUN: FileCheck %s --check-prefix=EMIT < %t.bf16.emitc.mlir
// EMIT: braid_rt_program_collective_compressed_f32
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 lr=3e-3 grad-compression=bf16" -o %t.bf16.replay.mlir
// RUN: diff -B %t.bf16.emitc.mlir %t.bf16.replay.mlir
//
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 -o %t.none
// RUN: braid-run -n 2 %t.none --steps 5 --seed 1 > %t.none.out
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression bf16 -o %t.bf16
// RUN: braid-run -n 2 %t.bf16 --steps 5 --seed 1 > %t.bf16.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.bf16.out %t.none.out --rtol 1e-4 | FileCheck %s
// RUN: not %PYTHON %S/Inputs/compare-results.py %t.bf16.out %t.none.out --rtol 1e-9
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression fp16 -o %t.fp16
// RUN: braid-run -n 2 %t.fp16 --steps 5 --seed 1 > %t.fp16.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.fp16.out %t.none.out --rtol 1e-4 | FileCheck %s
// RUN: not %PYTHON %S/Inputs/compare-results.py %t.fp16.out %t.none.out --rtol 1e-9
//
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 2 --lr 3e-3 -o %t.z2
// RUN: braid-run -n 4 %t.z2 --steps 5 --seed 1 > %t.z2.out
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 2 --lr 3e-3 --grad-compression bf16 -o %t.z2.bf16
// RUN: braid-run -n 4 %t.z2.bf16 --steps 5 --seed 1 > %t.z2.bf16.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z2.bf16.out %t.z2.out --rtol 1e-4 | FileCheck %s
// RUN: not %PYTHON %S/Inputs/compare-results.py %t.z2.bf16.out %t.z2.out --rtol 1e-9
// CHECK: ok: 5 losses within 0.0001
//
// The comm report of the same step: the gradient bucket at 2 bytes per
// element, the loss exact.
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-compress-gradients --braid-bucket-collectives --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT-LABEL: braid-comm-report: @train_step
// REPORT: @block.W W all_reduce dp 2 50816 25408 {{.*}} 2 [bf16] bucket of 16 all_reduces
// REPORT: @train_step - all_reduce dp 2 4 4 {{.*}} 1 'braid.mul'
// REPORT: total all sent 55556 bytes 27777 elements
// REPORT: compressed gradient reductions: sent 55552 bytes instead of 111104, saved 55552 bytes (50.0% of all sent)
//
// PowerSGD (rank 2): the 2-D gradients' reductions call the runtime's
// PowerSGD, and a run resumed from a checkpoint after 2 steps prints the
// losses of 4 uninterrupted steps (the Q and error-feedback state is in
// the checkpoint; test_grad_compression.py checks that zeroing it changes
// them).
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --emit mlir -o %t.psgd.emitc.mlir
// RUN: FileCheck %s --check-prefix=PSGD-EMIT < %t.psgd.emitc.mlir
// PSGD-EMIT: braid_rt_program_powersgd_f32
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 -o %t.psgd
// RUN: braid-run -n 2 %t.psgd --steps 4 --seed 1 > %t.psgd.out
// RUN: rm -rf %t.psgd.ck && braid-run -n 2 %t.psgd --steps 2 --seed 1 --save %t.psgd.ck > %t.psgd.first
// RUN: braid-run -n 2 %t.psgd --steps 2 --seed 1 --resume %t.psgd.ck > %t.psgd.resumed
// RUN: %PYTHON %S/Inputs/compare-results.py %t.psgd.resumed %t.psgd.out --steps 2:4 --rtol 0 | FileCheck %s --check-prefix=RESUME
// RESUME: ok: 2 losses within 0
//
// RUN: not braidc %t.mlir --mesh dp=2 --grad-compression int8 -o %t.bad 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: unknown grad-compression 'int8'; expected none, bf16, fp16 or powersgd
// With ZeRO the gradients' reduce_scatters keep their share of the
// approximation (test_grad_compression.py compares the parameters with
// dp2's).
// RUN: braidc %t.mlir --mesh dp=2 --zero 2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --emit mlir -o %t.psgd.z2.emitc.mlir
// RUN: FileCheck %s --check-prefix=PSGD-ZERO < %t.psgd.z2.emitc.mlir
// PSGD-ZERO: braid_rt_program_powersgd_reduce_scatter_f32
//
// PowerSGD with --async-collectives: the reductions are started (their
// state read first in the block, before any start the scheduler moves
// early) and complete at their start, so the losses are the blocking
// program's. (Micro-batches, dp2 x tp2 and dp2 x pp2: their curves and
// checkpoints in test_grad_compression.py.)
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-compress-gradients="format=powersgd rank=2" --braid-async-collectives --braid-schedule-collectives | FileCheck %s --check-prefix=PSGD-START
// PSGD-START: braid.all_reduce_start sum {{.*}}braid.compress = "powersgd"
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --async-collectives -o %t.psgd.async
// RUN: braid-run -n 2 %t.psgd.async --steps 4 --seed 1 > %t.psgd.async.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.psgd.async.out %t.psgd.out --rtol 0 | FileCheck %s --check-prefix=PSGD-ASYNC
// PSGD-ASYNC: ok: 4 losses within 0
// The same on dp2 x pp2, whose starts are issued inside the pipeline
// (marked so for the lowering).
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 pp=2 microbatches=2 lr=3e-3 grad-compression=powersgd powersgd-rank=2 async-collectives=true" --mlir-print-ir-before=braid-lower-to-emitc -o /dev/null 2>&1 | FileCheck %s --check-prefix=PSGD-PP
// PSGD-PP: braid.all_reduce_start sum {{.*}}braid.compress = "powersgd"{{.*}}braid.start_in_pipeline
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --microbatches 2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 -o %t.psgd.pp
// RUN: braid-run -n 4 %t.psgd.pp --steps 4 --seed 1 > %t.psgd.pp.out
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --microbatches 2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --async-collectives -o %t.psgd.pp.async
// RUN: braid-run -n 4 %t.psgd.pp.async --steps 4 --seed 1 > %t.psgd.pp.async.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.psgd.pp.async.out %t.psgd.pp.out --rtol 0 | FileCheck %s --check-prefix=PSGD-ASYNC
//
// bf16 with --async-collectives: the started reductions complete at their
// start and train exactly as the blocking bf16 program.
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression bf16 --async-collectives -o %t.bf16.async
// RUN: braid-run -n 2 %t.bf16.async --steps 5 --seed 1 > %t.bf16.async.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.bf16.async.out %t.bf16.out --rtol 0 | FileCheck %s --check-prefix=ASYNC
// ASYNC: ok: 5 losses within 0
// RUN: not braidc %t.mlir --mesh dp=2 --grad-compression powersgd --powersgd-rank 0 -o %t.bad 2>&1 | FileCheck %s --check-prefix=PSGD-RANK
// PSGD-RANK: powersgd-rank must be positive, got 0
// RUN: not braidc %t.mlir --mesh tp=2 --grad-compression bf16 -o %t.bad 2>&1 | FileCheck %s --check-prefix=NODP
// NODP: grad-compression bf16 compresses data-parallel gradient reductions, but dp=1
