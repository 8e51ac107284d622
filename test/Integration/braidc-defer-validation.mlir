// Tests braidc --defer-validation: each step's optimistic update is
// validated during the next step, whose forward and backward pass overlap
// the gradient norm's all_reduce. The executables train exactly as without
// it: losses and gradient norms of 6 AdamW steps (step 3 clipped, so step 4
// runs twice, which the summary says) on one device and on 2 ranks under
// dp=2 with ZeRO-3 and started collectives, and the checkpoints are equal
// (the pending update is not saved) and resume in the other program both
// ways; --save-every's checkpoints too (each preceded by a validating
// call). In the trace every step (and the repeated one, and the last
// call that only validates) starts the previous norm's all_reduce before
// its forward pass's all_gathers and waits for it after its gradients'
// reduce_scatters. An injected overflow (lr 1e30) gives the plain
// program's warnings and stops it at the same step with
// --stop-on-nonfinite. Pipelines validate the same way (below). The
// compile replays in braid-opt; post-validate with it is refused.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck && mkdir -p %t.ck
// RUN: braidc %t.mlir --lr 0.01 --clip-norm 3.0 -o %t.plain
// RUN: braidc %t.mlir --lr 0.01 --clip-norm 3.0 --defer-validation -o %t.dv
// RUN: %t.plain --steps 6 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.plain.out
// RUN: %t.dv --steps 6 --seed 1 > %t.dv.full
// RUN: grep '^step' %t.dv.full | cut -d' ' -f1-8 > %t.dv.out
// RUN: diff %t.plain.out %t.dv.out
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.dv.full
// CLIPPED: step 3 {{.*}} grad_norm 3.3
// CLIPPED: summary: 6 steps, {{.*}}; 1 step run again after the previous step's rollback
//
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 3.0 -o %t.z3
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 3.0 --defer-validation --async-collectives -o %t.z3dv
// RUN: braid-run -n 2 %t.z3 --steps 6 --seed 1 --save %t.ck/z3 | grep '^step' | cut -d' ' -f1-8 > %t.z3.out
// RUN: braid-run -n 2 %t.z3dv --steps 6 --seed 1 --save %t.ck/z3dv --trace %t.z3dv.json | grep '^step' | cut -d' ' -f1-8 > %t.z3dv.out
// RUN: diff %t.z3.out %t.z3dv.out
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z3/checkpoint.safetensors %t.ck/z3dv/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// SAME: ok: 108 tensors ({{[0-9]+}} values) within 0
// RUN: braid-run -n 2 %t.z3 --steps 2 --resume %t.ck/z3dv | grep '^step' | cut -d' ' -f1-8 > %t.resume.plain
// RUN: braid-run -n 2 %t.z3dv --steps 2 --resume %t.ck/z3 | grep '^step' | cut -d' ' -f1-8 > %t.resume.dv
// RUN: diff %t.resume.plain %t.resume.dv
// RUN: FileCheck %s --check-prefix=RESUMED < %t.resume.dv
// RESUMED: step 6 loss
// RESUMED-NEXT: step 7 loss
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.z3dv.json --rank 0 | FileCheck %s --check-prefix=ORDER
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.z3dv.json --rank 1 | FileCheck %s --check-prefix=ORDER
// ORDER-COUNT-8: step {{[0-7]}}: all_gather start x2, all_reduce start x1, reduce_scatter start x1, all_gather start x8, all_reduce start x1, all_gather start x3, reduce_scatter start x3, all_reduce wait x2{{$}}
// ORDER-NOT: step
// braid-trace names the repeated step and the validating call.
// RUN: braid-trace %t.z3dv.json --csv | FileCheck %s --check-prefix=TRACE
// TRACE: {{^}}0,3,
// TRACE-NEXT: {{^}}0,4,
// TRACE-NEXT: {{^}}0,4 (again),
// TRACE-NEXT: {{^}}0,5,
// TRACE-NEXT: {{^}}0,validate 5,
// TRACE-NEXT: {{^}}0,all,
//
// RUN: braid-run -n 2 %t.z3 --steps 5 --seed 1 --save %t.ck/every --save-every 2 --log-every 3 > /dev/null
// RUN: braid-run -n 2 %t.z3dv --steps 5 --seed 1 --save %t.ck/everydv --save-every 2 --log-every 3 > %t.every.out
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/every/step-00000002/checkpoint.safetensors %t.ck/everydv/step-00000002/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/every/step-00000004/checkpoint.safetensors %t.ck/everydv/step-00000004/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/every/checkpoint.safetensors %t.ck/everydv/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: FileCheck %s --check-prefix=EVERY < %t.every.out
// EVERY: step 0 loss
// EVERY-NEXT: step 3 loss
// EVERY-NEXT: step 4 loss
// EVERY-NEXT: summary: 5 steps
//
// RUN: braidc %t.mlir --mesh dp=2 --lr 1e30 -o %t.inf
// RUN: braidc %t.mlir --mesh dp=2 --lr 1e30 --defer-validation -o %t.infdv
// RUN: braid-run -n 2 %t.inf --steps 4 --seed 1 --save %t.ck/inf 2> %t.inf.err | grep '^step' | cut -d' ' -f1-8 > %t.inf.out
// RUN: braid-run -n 2 %t.infdv --steps 4 --seed 1 --save %t.ck/infdv 2> %t.infdv.err | grep '^step' | cut -d' ' -f1-8 > %t.infdv.out
// RUN: diff %t.inf.out %t.infdv.out
// RUN: grep '^warning' %t.inf.err > %t.inf.warn
// RUN: grep '^warning' %t.infdv.err > %t.infdv.warn
// RUN: diff %t.inf.warn %t.infdv.warn
// RUN: FileCheck %s --check-prefix=WARN < %t.infdv.warn
// WARN: warning: step 1: the loss ({{-?nan|-?inf}}) or the gradient norm ({{-?nan|-?inf}}) is not finite: the update was skipped
// WARN-NEXT: warning: step 2:
// WARN-NEXT: warning: step 3:
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/inf/checkpoint.safetensors %t.ck/infdv/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: not braid-run -n 2 %t.infdv --steps 4 --seed 1 --stop-on-nonfinite > %t.stop.out 2> %t.stop.err
// RUN: FileCheck %s --check-prefix=STOP < %t.stop.err
// RUN: FileCheck %s --check-prefix=STOPPED < %t.stop.out
// STOP: error: step 1: stopping on a non-finite loss or gradient norm (--stop-on-nonfinite)
// STOPPED: step 0 loss
// STOPPED-NOT: step 1
//
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --clip-norm 1.0 --defer-validation --emit mlir -o %t.emitc.mlir
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 zero=3 clip-norm=1.0 defer-validation=true" -o %t.replay.mlir
// RUN: diff -B %t.emitc.mlir %t.replay.mlir
// RUN: FileCheck %s --check-prefix=SLOTS < %t.emitc.mlir
// SLOTS: train_step.pending.sum_squares\22, 0, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, BRAID_RT_PROGRAM_SLOT_TRANSIENT, 0}
//
//
// Pipelines: each stage stores its share of the sum of squares and of the
// loss (the last stage's; zeros elsewhere), and the next step sums them
// over the pipeline (with dp under ZeRO-3: one all_reduce over dp and pp),
// started before its first action and waited for after its last: nothing
// moves between the stages at the end of a step to validate it. pp2 1F1B
// and dp2 x pp2 ZeRO-3 ZB-V train as their plain programs, within 1e-5 (the
// shares are summed in another order than the plain program's running
// sum; the attention's key bias, whose gradient is rounding noise, within
// 1e-4 absolute), step 3 clipped and step 4 run again.
// RUN: braidc %t.mlir --mesh pp=2 --microbatches 4 --lr 0.01 --clip-norm 3.0 -o %t.pp
// RUN: braidc %t.mlir --mesh pp=2 --microbatches 4 --lr 0.01 --clip-norm 3.0 --defer-validation --emit cpp -o %t.ppdv.cpp
// RUN: FileCheck %s --check-prefix=SHARES < %t.ppdv.cpp
// RUN: braidc %t.mlir --mesh pp=2 --microbatches 4 --lr 0.01 --clip-norm 3.0 --defer-validation -o %t.ppdv
// RUN: braid-run -n 2 %t.pp --steps 6 --seed 1 --save %t.ck/pp > %t.pp.out
// RUN: braid-run -n 2 %t.ppdv --steps 6 --seed 1 --save %t.ck/ppdv --trace %t.ppdv.json > %t.ppdv.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.ppdv.out %t.pp.out --rtol 1e-5 | FileCheck %s --check-prefix=LOSSES
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/ppdv/checkpoint.safetensors %t.ck/pp/checkpoint.safetensors --rtol 1e-5 --atol 1e-4 | FileCheck %s --check-prefix=CLOSE
// RUN: FileCheck %s --check-prefix=PPCLIPPED < %t.ppdv.out
// Each checkpoint resumes in the other program.
// RUN: braid-run -n 2 %t.pp --steps 2 --resume %t.ck/ppdv > %t.ppresume.plain
// RUN: braid-run -n 2 %t.ppdv --steps 2 --resume %t.ck/pp > %t.ppresume.dv
// RUN: %PYTHON %S/Inputs/compare-results.py %t.ppresume.dv %t.ppresume.plain --rtol 1e-5 | FileCheck %s --check-prefix=RESUMEDPP
// RESUMEDPP: ok: 2 losses within 1e-05
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.ppdv.json --rank 0 --actions | FileCheck %s --check-prefix=PPORDER
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.ppdv.json --rank 1 --actions | FileCheck %s --check-prefix=PPORDER
// LOSSES: ok: 6 losses within 1e-05
// PPCLIPPED: step 2 {{.*}} grad_norm 3.05
// PPCLIPPED: summary: 6 steps, {{.*}}; 1 step run again after the previous step's rollback
// CLOSE: ok: 108 tensors ({{[0-9]+}} values) within 1e-05
// Every stage takes its share of the 36 gradients' sums of squares (no
// point-to-point transfer of them), and of the loss.
// SHARES-COUNT-37: braid_rt_program_pp_local_f32(
// SHARES-NOT: braid_rt_program_pp_local_f32(
// PPORDER-COUNT-8: step {{[0-7]}}: all_reduce start x2, recv start x4, actions x{{[^w]*}}, all_reduce wait x2{{(, (recv|send) start x1)?$}}
// PPORDER-NOT: step
//
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --schedule zb-v --microbatches 4 --zero 3 --async-collectives --lr 0.01 --clip-norm 3.0 -o %t.dppp
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --schedule zb-v --microbatches 4 --zero 3 --async-collectives --lr 0.01 --clip-norm 3.0 --defer-validation -o %t.dpppdv
// RUN: braid-run -n 4 %t.dppp --steps 6 --seed 1 --save %t.ck/dppp > %t.dppp.out
// RUN: braid-run -n 4 %t.dpppdv --steps 6 --seed 1 --save %t.ck/dpppdv > %t.dpppdv.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dpppdv.out %t.dppp.out --rtol 1e-5 | FileCheck %s --check-prefix=LOSSES
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/dpppdv/checkpoint.safetensors %t.ck/dppp/checkpoint.safetensors --rtol 1e-5 --atol 1e-4 | FileCheck %s --check-prefix=CLOSE
// RUN: FileCheck %s --check-prefix=PPCLIPPED < %t.dpppdv.out
// RUN: not braidc %t.mlir --post-validate --defer-validation -o %t.both 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: braidc: defer-validation and post-validate exclude each other
//
// Outside such a training step, arguments named final and previous_step
// are ordinary inputs, generated from --seed as braid-eval makes them.
// RUN: braidc %S/Inputs/named-final.mlir -o %t.named
// RUN: %t.named --seed 3 | cut -d' ' -f2 > %t.named.out
// RUN: braid-eval %S/Inputs/named-final.mlir --seed 3 | grep '^result 0' | cut -d' ' -f5 > %t.named.ref
// RUN: diff %t.named.out %t.named.ref
