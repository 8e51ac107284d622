// Tests braid-train-step's post-validate: every update runs unclipped
// before the gradient norm is known, and a validation after it keeps it
// (finite and not clipped), or rolls it back and redoes it with the
// clipping scale, or rolls it back (non-finite). Training is bit-identical
// to the plain step: 6 AdamW steps of which step 3 is clipped (its norm
// 3.33 > 3), serially and under dp2 ZeRO-3 and dp2 x tp2 (sharded norms);
// an injected overflow (lr 1e30) leaves parameters and optimizer state
// after 4 steps equal to those after 2, for AdamW and SGD.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 post-validate" -o %t.pv.mlir
// RUN: FileCheck %s < %t.pv.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0" -o %t.plain.mlir
// RUN: braid-eval %t.plain.mlir --steps 6 --seed 1 --save-weights %t.plain.w --save-optimizer-state %t.plain.s > %t.plain.out
// RUN: braid-eval %t.pv.mlir --steps 6 --seed 1 --save-weights %t.pv.w --save-optimizer-state %t.pv.s > %t.pv.out
// RUN: diff %t.plain.out %t.pv.out
// RUN: cmp %t.plain.w %t.pv.w
// RUN: cmp %t.plain.s %t.pv.s
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.pv.out
// CLIPPED: step 2 {{.*}} grad_norm 2.6
// CLIPPED: step 3 {{.*}} grad_norm 3.3
//
// RUN: braid-opt %t.plain.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3pv.mlir
// RUN: braid-eval %t.z3.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.z3.w > %t.z3.out
// RUN: braid-eval %t.z3pv.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.z3pv.w > %t.z3pv.out
// RUN: diff %t.z3.out %t.z3pv.out
// RUN: cmp %t.z3.w %t.z3pv.w
// RUN: braid-opt %t.plain.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.tp.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.tppv.mlir
// RUN: braid-eval %t.tp.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.tp.w > %t.tp.out
// RUN: braid-eval %t.tppv.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.tppv.w > %t.tppv.out
// RUN: diff %t.tp.out %t.tppv.out
// RUN: cmp %t.tp.w %t.tppv.w
//
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 post-validate" -o %t.inf.mlir
// RUN: braid-eval %t.inf.mlir --steps 4 --seed 1 --save-weights %t.inf4.w --save-optimizer-state %t.inf4.s > /dev/null 2> %t.inf.err
// RUN: braid-eval %t.inf.mlir --steps 2 --seed 1 --save-weights %t.inf2.w --save-optimizer-state %t.inf2.s > /dev/null 2>&1
// RUN: cmp %t.inf4.w %t.inf2.w
// RUN: cmp %t.inf4.s %t.inf2.s
// Rolled back, not merely equally broken: equal to the plain step's skips.
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30" -o %t.infplain.mlir
// RUN: braid-eval %t.infplain.mlir --steps 4 --seed 1 --save-weights %t.infplain.w --save-optimizer-state %t.infplain.s > /dev/null 2>&1
// RUN: cmp %t.inf4.w %t.infplain.w
// RUN: cmp %t.inf4.s %t.infplain.s
// RUN: FileCheck %s --check-prefix=WARN < %t.inf.err
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 optimizer=sgd post-validate" -o %t.sgd.mlir
// RUN: braid-eval %t.sgd.mlir --steps 4 --seed 1 --save-weights %t.sgd4.w --save-optimizer-state %t.sgd4.s > /dev/null 2>&1
// RUN: braid-eval %t.sgd.mlir --steps 2 --seed 1 --save-weights %t.sgd2.w --save-optimizer-state %t.sgd2.s > /dev/null 2>&1
// RUN: cmp %t.sgd4.w %t.sgd2.w
// RUN: cmp %t.sgd4.s %t.sgd2.s
// RUN: %PYTHON -c "import sys; from braid import safetensors as st; import numpy as np; bad = [k for k, t in st.load(sys.argv[1]).items() if not np.isfinite(st.to_numpy(t)).all()]; print('finite' if not bad else bad)" %t.sgd4.w | FileCheck %s --check-prefix=FINITE
// FINITE: finite
// WARN-NOT: warning: step 0
// WARN: warning: step 1: the loss ({{-?nan|-?inf}}) or the gradient norm ({{-?nan|-?inf}}) is not finite: the update was skipped
// WARN-NEXT: warning: step 2:
// WARN-NEXT: warning: step 3:

// The optimistic updates come first, with a scale of 1, and save the state
// they start from; the norm after them; then the validation, which redoes
// each update from the saved state and selects.
// CHECK-LABEL: braid.layer @train_step.h.update
// CHECK: %[[ONE:.*]] = braid.constant dense<1.000000e+00>
// CHECK: braid.adamw_update {{.*}}, %[[ONE]]
// CHECK-LABEL: braid.layer @train_step.h.validate
// CHECK-SAME: (%[[LR:[^:]*]]: tensor<f32>, %[[STEP:[^:]*]]: tensor<i64>, %[[D:[^:]*]]: tensor<f32>, %[[REDO:[^:]*]]: tensor<f32>
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = braid.adamw_update {{.*}}, %[[LR]], %[[STEP]], %[[REDO]]
// CHECK: %[[CUR:.*]] = braid.param "mlp.proj.bias"
// CHECK: braid.select %[[D]], %[[NEW]], %[[CUR]]
// CHECK: braid.store_param "mlp.proj.bias"
// CHECK-LABEL: func.func @train_step
// CHECK: braid.repeat @train_step.h.update
// CHECK: braid.sqrt
// CHECK: braid.clip_coefficient
// CHECK: braid.repeat @train_step.h.validate
