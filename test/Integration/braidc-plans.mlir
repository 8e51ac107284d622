// Tests that the compiled programs of the plans the other braidc tests do
// not train -- ZeRO-1, ZeRO-3, sequence parallelism, GPipe, ZB-H2 and the
// automatic schedule -- and one device, 3D and ZB-V, train exactly like braid-eval on the program
// braid-opt's passes make: the same 3 losses, and after them the same
// parameters and optimizer state, element by element (the program's --save
// checkpoint against braid-eval's --save-weights and
// --save-optimizer-state).
//
// SGD with momentum, because its state is a linear function of the
// gradients: Adam's first steps move each element by about lr * sign(g), so
// an element whose gradient is rounding noise (the key bias, whose exact
// gradient is zero: a softmax ignores a constant added to every score)
// would differ by up to lr between any two correct summation orders. For
// the same reason differences below --atol 1e-9 pass; the parameters are of
// order 0.02 to 1.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck && mkdir -p %t.ck
//
// ZeRO-1 over dp=2.
// RUN: braidc %t.mlir --mesh dp=2 --zero 1 --optimizer sgd --lr 0.1 -o %t.z1
// RUN: braid-run -n 2 %t.z1 --steps 3 --seed 1 --save %t.ck/z1 > %t.z1.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=1" --braid-propagate-sharding --braid-partition -o %t.z1.mlir
// RUN: braid-eval %t.z1.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z1.w --save-optimizer-state %t.z1.s > %t.z1.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z1.out %t.z1.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z1/checkpoint.safetensors %t.z1.w %t.z1.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZeRO-3 over dp=2 with tp=2.
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 3 --optimizer sgd --lr 0.1 -o %t.z3
// RUN: braid-run -n 4 %t.z3 --steps 3 --seed 1 --save %t.ck/z3 > %t.z3.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 tp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-eval %t.z3.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z3.w --save-optimizer-state %t.z3.s > %t.z3.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z3.out %t.z3.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z3/checkpoint.safetensors %t.z3.w %t.z3.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZeRO-3 over dp=2 alone: the embedding table is split along the
// vocabulary over dp, so the program gathers the i32 token ids over dp.
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --optimizer sgd --lr 0.1 -o %t.z3dp
// RUN: braid-run -n 2 %t.z3dp --steps 3 --seed 1 --save %t.ck/z3dp > %t.z3dp.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3dp.mlir
// RUN: braid-eval %t.z3dp.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z3dp.w --save-optimizer-state %t.z3dp.s > %t.z3dp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z3dp.out %t.z3dp.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z3dp/checkpoint.safetensors %t.z3dp.w %t.z3dp.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// Sequence parallelism over tp=2, with dp=2.
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --sp --optimizer sgd --lr 0.1 -o %t.sp
// RUN: braid-run -n 4 %t.sp --steps 3 --seed 1 --save %t.ck/sp > %t.sp.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 tp=2 sp" --braid-propagate-sharding --braid-partition -o %t.sp.mlir
// RUN: braid-eval %t.sp.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.sp.w --save-optimizer-state %t.sp.s > %t.sp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.sp.out %t.sp.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/sp/checkpoint.safetensors %t.sp.w %t.sp.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// GPipe over pp=2, 4 micro-batches.
// RUN: braidc %t.mlir --mesh pp=2 --schedule gpipe --microbatches 4 --optimizer sgd --lr 0.1 -o %t.gpipe
// RUN: braid-run -n 2 %t.gpipe --steps 3 --seed 1 --save %t.ck/gpipe > %t.gpipe.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=gpipe microbatches=4" -o %t.gpipe.mlir
// RUN: braid-eval %t.gpipe.mlir --steps 3 --seed 1 --pipeline --save-weights %t.gpipe.w --save-optimizer-state %t.gpipe.s > %t.gpipe.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.gpipe.out %t.gpipe.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/gpipe/checkpoint.safetensors %t.gpipe.w %t.gpipe.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZB-H2 over pp=2 with dp=2, 4 micro-batches.
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --schedule zb-h2 --microbatches 4 --optimizer sgd --lr 0.1 -o %t.zbh2
// RUN: braid-run -n 4 %t.zbh2 --steps 3 --seed 1 --save %t.ck/zbh2 > %t.zbh2.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=4 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-h2 microbatches=4" -o %t.zbh2.mlir
// RUN: braid-eval %t.zbh2.mlir --steps 3 --seed 1 --pipeline --mesh mesh --save-weights %t.zbh2.w --save-optimizer-state %t.zbh2.s > %t.zbh2.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbh2.out %t.zbh2.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/zbh2/checkpoint.safetensors %t.zbh2.w %t.zbh2.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// One device, and dp=2 x tp=2 x pp=2 under ZB-H1 (whose losses
// braidc-training.mlir compares under AdamW).
// RUN: braidc %t.mlir --optimizer sgd --lr 0.1 -o %t.one
// RUN: %t.one --steps 3 --seed 1 --save %t.ck/one > %t.one.out
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" -o %t.one.mlir
// RUN: braid-eval %t.one.mlir --steps 3 --seed 1 --save-weights %t.one.w --save-optimizer-state %t.one.s > %t.one.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one.out %t.one.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/one/checkpoint.safetensors %t.one.w %t.one.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
// RUN: braidc %t.mlir --mesh dp=2,tp=2,pp=2 --schedule zb-h1 --microbatches 4 --optimizer sgd --lr 0.1 -o %t.3d
// RUN: braid-run -n 8 %t.3d --steps 3 --seed 1 --save %t.ck/3d > %t.3d.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=4 pipeline" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-h1 microbatches=4" -o %t.3d.mlir
// RUN: braid-eval %t.3d.mlir --steps 3 --seed 1 --pipeline --mesh mesh --save-weights %t.3d.w --save-optimizer-state %t.3d.s > %t.3d.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.3d.out %t.3d.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/3d/checkpoint.safetensors %t.3d.w %t.3d.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZB-V over pp=2 (2 chunks per rank in a V).
// RUN: braidc %t.mlir --mesh pp=2 --schedule zb-v --optimizer sgd --lr 0.1 -o %t.zbv
// RUN: braid-run -n 2 %t.zbv --steps 3 --seed 1 --save %t.ck/zbv > %t.zbv.out
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v" --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule=schedule=zb-v -o %t.zbv.mlir
// RUN: braid-eval %t.zbv.mlir --steps 3 --seed 1 --pipeline --save-weights %t.zbv.w --save-optimizer-state %t.zbv.s > %t.zbv.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbv.out %t.zbv.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/zbv/checkpoint.safetensors %t.zbv.w %t.zbv.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// The automatic schedule over pp=2, 4 micro-batches.
// RUN: braidc %t.mlir --mesh pp=2 --schedule auto --microbatches 4 --optimizer sgd --lr 0.1 -o %t.auto
// RUN: braid-run -n 2 %t.auto --steps 3 --seed 1 --save %t.ck/auto > %t.auto.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=auto microbatches=4" -o %t.auto.mlir
// RUN: braid-eval %t.auto.mlir --steps 3 --seed 1 --pipeline --save-weights %t.auto.w --save-optimizer-state %t.auto.s > %t.auto.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.auto.out %t.auto.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/auto/checkpoint.safetensors %t.auto.w %t.auto.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// The comparison fails on a checkpoint of other parameters (ZeRO-1's against
// ZeRO-3's reference after one more step) and on a missing tensor.
// RUN: braid-eval %t.z3.mlir --steps 4 --seed 1 --mesh mesh --save-weights %t.z3.w4 --save-optimizer-state %t.z3.s4 > /dev/null
// RUN: not %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z1/checkpoint.safetensors %t.z3.w4 %t.z3.s4 --rtol 1e-5 --atol 1e-9 2>&1 | FileCheck %s --check-prefix=DIFFER
// RUN: not %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z1/checkpoint.safetensors %t.z1.w --rtol 1e-5 --atol 1e-9 2>&1 | FileCheck %s --check-prefix=EXTRA

// CHECK: ok: 3 losses within 1e-05
// STATE: ok: 72 tensors ({{[0-9]+}} values) within 1e-05
// DIFFER: error: {{[0-9]+}} of 72 tensors differ beyond 1e-05
// EXTRA: error: {{.*}}checkpoint.safetensors: missing [] (0), unexpected ['h.0.attn.k.bias.sgd.momentum', {{.*}} (36)
