// Tests that braidc compiles a pipelined GPT training step (2 stages, 4
// micro-batches) into one program run on every pipeline rank by braid-run,
// whose rank 0 prints the losses of braid-eval --pipeline within 1e-5
// relative over 3 steps: 1F1B and ZB-H1 on 2 ranks, tp2 x pp2 (1F1B) and
// dp2 x pp2 (ZB-H1) on 4. GPT ties its embedding: the first and the last
// stage both use wte, and the first stage's weight-gradient pieces wait for
// the last stage's partial gradient after the schedule. A pipeline without a
// schedule, one that misses a transfer and a malformed action are located
// compile errors.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.mlir
//
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=1f1b -o %t.1f1b.mlir
// RUN: braidc %t.1f1b.mlir --entry train_step -o %t.1f1b --dump-dir %t.1f1b.d
// RUN: braid-run -n 2 %t.1f1b --steps 3 --seed 1 > %t.1f1b.out
// RUN: braid-eval %t.1f1b.mlir --steps 3 --seed 1 --pipeline > %t.1f1b.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.1f1b.out %t.1f1b.eval --rtol 1e-5 | FileCheck %s
// RUN: FileCheck %s --check-prefix=CPP < %t.1f1b.d/program.cpp
//
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-h1 -o %t.zbh1.mlir
// RUN: braidc %t.zbh1.mlir --entry train_step -o %t.zbh1
// RUN: braid-run -n 2 %t.zbh1 --steps 3 --seed 1 > %t.zbh1.out
// RUN: braid-eval %t.zbh1.mlir --steps 3 --seed 1 --pipeline > %t.zbh1.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbh1.out %t.zbh1.eval --rtol 1e-5 | FileCheck %s
// RUN: FileCheck %s --check-prefix=OUT < %t.zbh1.out
//
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-shard="tp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule=schedule=1f1b -o %t.tp2pp2.mlir
// RUN: braidc %t.tp2pp2.mlir --entry train_step -o %t.tp2pp2
// RUN: braid-run -n 4 %t.tp2pp2 --steps 3 --seed 1 > %t.tp2pp2.out
// RUN: braid-eval %t.tp2pp2.mlir --steps 3 --seed 1 --pipeline --mesh mesh > %t.tp2pp2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.tp2pp2.out %t.tp2pp2.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-h1 -o %t.dp2pp2.mlir
// RUN: braidc %t.dp2pp2.mlir --entry train_step -o %t.dp2pp2
// RUN: braid-run -n 4 %t.dp2pp2 --steps 3 --seed 1 > %t.dp2pp2.out
// RUN: braid-eval %t.dp2pp2.mlir --steps 3 --seed 1 --pipeline --mesh mesh > %t.dp2pp2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dp2pp2.out %t.dp2pp2.eval --rtol 1e-5 | FileCheck %s
//
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-pipeline-outline -o %t.unscheduled.mlir
// RUN: not braidc %t.unscheduled.mlir --entry train_step -o %t.unscheduled 2>&1 | FileCheck %s --check-prefix=NOSCHED
//
// A schedule that misses a transfer, one that receives too late, and a
// malformed action:
// RUN: sed -e 's/"send activation 1.0 to rank 1", //' -e 's/"recv activation 1.0 from rank 0", //' %t.1f1b.mlir > %t.missing.mlir
// RUN: not braidc %t.missing.mlir --entry train_step -o %t.missing 2>&1 | FileCheck %s --check-prefix=MISSING
// A receive scheduled after the action that needs it (the data would not
// be there yet) is refused as well:
// RUN: sed -e 's/"recv activation 0.0 from rank 0", "F0.0"/"F0.0", "recv activation 0.0 from rank 0"/' %t.1f1b.mlir > %t.late.mlir
// RUN: not braidc %t.late.mlir --entry train_step -o %t.late 2>&1 | FileCheck %s --check-prefix=LATE
// RUN: sed -e 's/"F2.0", /"F2.7", /' %t.1f1b.mlir > %t.badaction.mlir
// RUN: not braidc %t.badaction.mlir --entry train_step -o %t.badaction 2>&1 | FileCheck %s --check-prefix=BADACTION

// CHECK: ok: 3 losses within 1e-05

// Each stage starts its receives, then runs its own actions (each a trace
// event), waiting for a receive where the schedule receives; each mean
// stays on the stage that computed it.
// CPP: braid_rt_program_pp_stage(
// CPP: if (
// CPP: braid_rt_program_pp_recv_start_f32(
// CPP: braid_rt_program_trace_begin(
// CPP: braid_forward_grad_c0_F(
// CPP: braid_rt_program_trace_end(
// CPP: braid_rt_program_pp_send_f32(
// CPP: braid_rt_program_pp_recv_wait(
// CPP: braid_rt_program_accumulate_mean_f32(
// CPP: braid_rt_program_pp_wait_all(
//
// After the pipeline a stage runs what uses its gradients (their square
// sums, their parameters' updates, under `if (stage == s)`), sends stage
// 0's partial gradient of the tied wte to stage 1 alone (point to point,
// as the gradient norm's running sum), sends the wte's new value, which
// both stages read, from stage 1's slot to stage 0's (point to point), and
// broadcasts only scalars (the clipping coefficient, the loss); the
// checkpoint takes each slot from the stage that updates it (wte and its
// optimizer state: stage 1, which adds the partial gradients of the
// embedding and the head after the pipeline, braid-pipeline-outline).
// No W piece waits for another stage's W (the tied sum is not in one):
// RUN: FileCheck %s --check-prefix=TIED < %t.1f1b.d/program.cpp
// TIED-NOT: tied weight gradients
// RUN: FileCheck %s --strict-whitespace --check-prefix=GUARD < %t.1f1b.d/program.cpp
// GUARD: {{^}}  braid_rt_program_pp_wait_all(
// GUARD-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// GUARD: {{^}}    braid_rt_sum_squares_f32(
// GUARD-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// GUARD: {{^}}  braid_rt_program_pp_transfer_f32({{.*}}, {{v[0-9]+}}, {{v[0-9]+}}, {{.*}}: braid.{{add|fused}}");
// GUARD-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.{{add|fused}}");
// GUARD-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// GUARD: {{^}}    braid_rt_adamw_update_f32_i64(
// GUARD-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// GUARD-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.store_param");
// GUARD: {{^}}  braid_rt_program_pp_transfer_f32({{.*}}, [[WTE:v[0-9]+]], [[WTE]], {{.*}}: braid.store_param");
// GUARD-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.store_param");
// GUARD-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// GUARD: {{^}}  braid_rt_program_pp_broadcast_f32({{.*}}: func.return");
// GUARD: {"wte.weight", 2, braid_slot_shape_0, braid_slot_spec_0, 1, 0},
// GUARD: {"wpe.weight", 2, braid_slot_shape_1, braid_slot_spec_1, 0, 0},
// GUARD: {"ln_f.weight", 1, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, 1, 0},
// GUARD: {"wte.weight.adamw.m", 2, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, 1, 0},
// GUARD: static const int64_t braid_pipeline_mask = 1;

// OUT: step 0 loss
// OUT-NOT: step 0 loss

// NOSCHED: error: 'braid.pipeline' op calls @forward_grad, which has no braid.schedule

// MISSING: {{.*}}missing.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'func.call' op rank 1 runs F1 of chunk 1 without an input it neither computed nor received (the schedule misses a transfer)

// BADACTION: error: bad action 'F2.7' in braid.schedule
// LATE: error: 'func.call' op rank 1 runs F0 of chunk 1 without an input it neither computed nor received (the schedule misses a transfer)
