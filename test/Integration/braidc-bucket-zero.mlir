// Tests that ZeRO programs reduce_scatter their layer gradients in buckets
// (braid-bucket-collectives) and that this changes no result: for ZeRO-1,
// 2 and 3 over dp=2, the compiled program with braidc's default buckets
// runs the 16 reduce_scatters of a layer's weight gradients as one, and
// the 4 of the parameters outside the layers (wte, wpe, ln_f's weight and
// bias; the gradient norm's sum_squares of each waits below the bucket)
// as one too; plain dp (ZeRO-0) reduces those 4 gradients and the loss in
// one all_reduce instead of 5. Each trains exactly like the same program
// with --bucket-mb 0 (the same 3 losses, printed to 17 digits, and the
// same checkpoint bytes) and like braid-eval on the unbucketed program
// braid-opt's passes make (as braidc-plans.mlir: SGD, 3 losses within
// 1e-5, parameters and optimizer state within 1e-5, 1e-9 absolute);
// braid-eval of the bucketed program prints what it prints on the
// unbucketed one, character for character. dp2 x tp2 ZeRO-3 (where some
// members are scattered along an inner dimension, so transposed) is
// braidc-plans.mlir's.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck && mkdir -p %t.ck
//
// The generated code: one reduce_scatter in the W layer instead of 16.
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --optimizer sgd --lr 0.1 --emit cpp -o %t.z3.cpp
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --optimizer sgd --lr 0.1 --bucket-mb 0 --emit cpp -o %t.z3nb.cpp
// RUN: grep -c ':1:1: braid.reduce_scatter"' %t.z3.cpp | FileCheck %s --check-prefix=ONE
// RUN: grep -c ':1:1: braid.reduce_scatter"' %t.z3nb.cpp | FileCheck %s --check-prefix=SIXTEEN
// RUN: grep -c ':43:1: braid.reduce_scatter"' %t.z3.cpp | FileCheck %s --check-prefix=ONE
// RUN: grep -c ':43:1: braid.reduce_scatter"' %t.z3nb.cpp | FileCheck %s --check-prefix=FOUR
// ONE: {{^1$}}
// FOUR: {{^4$}}
// FIVE: {{^5$}}
// SIXTEEN: {{^16$}}
//
// What braid-comm-report shows of the bucket.
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT-LABEL: braid-comm-report: @train_step
// REPORT: @block.W W reduce_scatter dp 2 50816 25408 {{.*}} 2 bucket of 16 reduce_scatters: 'braid.yield'
// REPORT-NEXT: @train_step - reduce_scatter dp 2 9472 4736 {{.*}} 1 bucket of 4 reduce_scatters: 'braid.sum_squares'
// REPORT-NEXT: @train_step - all_reduce dp 2 8 8 {{.*}} 1 bucket of 2 all_reduces: 'braid.sqrt'
// REPORT-NOT: {{reduce_scatter|all_reduce}}
// REPORT: total all
//
// Plain dp (ZeRO-0) over dp=2: one all_reduce in the step for the 4
// gradients outside the layers and the loss instead of 5.
// RUN: braidc %t.mlir --mesh dp=2 --optimizer sgd --lr 0.1 --emit cpp -o %t.z0.cpp
// RUN: braidc %t.mlir --mesh dp=2 --optimizer sgd --lr 0.1 --bucket-mb 0 --emit cpp -o %t.z0nb.cpp
// RUN: grep -c ':43:1: braid.all_reduce"' %t.z0.cpp | FileCheck %s --check-prefix=ONE
// RUN: grep -c ':43:1: braid.all_reduce"' %t.z0nb.cpp | FileCheck %s --check-prefix=FIVE
// RUN: braidc %t.mlir --mesh dp=2 --optimizer sgd --lr 0.1 -o %t.z0
// RUN: braidc %t.mlir --mesh dp=2 --optimizer sgd --lr 0.1 --bucket-mb 0 -o %t.z0nb
// RUN: braid-run -n 2 %t.z0 --steps 3 --seed 1 --save %t.ck/z0 > %t.z0.out
// RUN: braid-run -n 2 %t.z0nb --steps 3 --seed 1 --save %t.ck/z0nb > %t.z0nb.out
// RUN: sed -n 's/ ms .*//p' %t.z0.out > %t.z0.losses
// RUN: sed -n 's/ ms .*//p' %t.z0nb.out > %t.z0nb.losses
// RUN: diff %t.z0.losses %t.z0nb.losses
// RUN: cmp %t.ck/z0/checkpoint.safetensors %t.ck/z0nb/checkpoint.safetensors
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.z0.mlir
// RUN: braid-opt %t.z0.mlir --braid-bucket-collectives -o %t.z0.bucketed.mlir
// RUN: braid-eval %t.z0.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z0.w --save-optimizer-state %t.z0.s > %t.z0.eval
// RUN: braid-eval %t.z0.bucketed.mlir --steps 3 --seed 1 --mesh mesh > %t.z0.bucketed.eval
// RUN: diff %t.z0.eval %t.z0.bucketed.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z0.out %t.z0.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z0/checkpoint.safetensors %t.z0.w %t.z0.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZeRO-1 over dp=2.
// RUN: braidc %t.mlir --mesh dp=2 --zero 1 --optimizer sgd --lr 0.1 -o %t.z1
// RUN: braidc %t.mlir --mesh dp=2 --zero 1 --optimizer sgd --lr 0.1 --bucket-mb 0 -o %t.z1nb
// RUN: braid-run -n 2 %t.z1 --steps 3 --seed 1 --save %t.ck/z1 > %t.z1.out
// RUN: braid-run -n 2 %t.z1nb --steps 3 --seed 1 --save %t.ck/z1nb > %t.z1nb.out
// RUN: sed -n 's/ ms .*//p' %t.z1.out > %t.z1.losses
// RUN: sed -n 's/ ms .*//p' %t.z1nb.out > %t.z1nb.losses
// RUN: diff %t.z1.losses %t.z1nb.losses
// RUN: cmp %t.ck/z1/checkpoint.safetensors %t.ck/z1nb/checkpoint.safetensors
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=1" --braid-propagate-sharding --braid-partition -o %t.z1.mlir
// RUN: braid-opt %t.z1.mlir --braid-bucket-collectives -o %t.z1.bucketed.mlir
// RUN: braid-eval %t.z1.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z1.w --save-optimizer-state %t.z1.s > %t.z1.eval
// RUN: braid-eval %t.z1.bucketed.mlir --steps 3 --seed 1 --mesh mesh > %t.z1.bucketed.eval
// RUN: diff %t.z1.eval %t.z1.bucketed.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z1.out %t.z1.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z1/checkpoint.safetensors %t.z1.w %t.z1.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZeRO-2 over dp=2.
// RUN: braidc %t.mlir --mesh dp=2 --zero 2 --optimizer sgd --lr 0.1 -o %t.z2
// RUN: braidc %t.mlir --mesh dp=2 --zero 2 --optimizer sgd --lr 0.1 --bucket-mb 0 -o %t.z2nb
// RUN: braid-run -n 2 %t.z2 --steps 3 --seed 1 --save %t.ck/z2 > %t.z2.out
// RUN: braid-run -n 2 %t.z2nb --steps 3 --seed 1 --save %t.ck/z2nb > %t.z2nb.out
// RUN: sed -n 's/ ms .*//p' %t.z2.out > %t.z2.losses
// RUN: sed -n 's/ ms .*//p' %t.z2nb.out > %t.z2nb.losses
// RUN: diff %t.z2.losses %t.z2nb.losses
// RUN: cmp %t.ck/z2/checkpoint.safetensors %t.ck/z2nb/checkpoint.safetensors
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.z2.mlir
// RUN: braid-opt %t.z2.mlir --braid-bucket-collectives -o %t.z2.bucketed.mlir
// RUN: braid-eval %t.z2.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z2.w --save-optimizer-state %t.z2.s > %t.z2.eval
// RUN: braid-eval %t.z2.bucketed.mlir --steps 3 --seed 1 --mesh mesh > %t.z2.bucketed.eval
// RUN: diff %t.z2.eval %t.z2.bucketed.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z2.out %t.z2.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z2/checkpoint.safetensors %t.z2.w %t.z2.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// ZeRO-3 over dp=2.
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --optimizer sgd --lr 0.1 -o %t.z3
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --optimizer sgd --lr 0.1 --bucket-mb 0 -o %t.z3nb
// RUN: braid-run -n 2 %t.z3 --steps 3 --seed 1 --save %t.ck/z3 > %t.z3.out
// RUN: braid-run -n 2 %t.z3nb --steps 3 --seed 1 --save %t.ck/z3nb > %t.z3nb.out
// RUN: sed -n 's/ ms .*//p' %t.z3.out > %t.z3.losses
// RUN: sed -n 's/ ms .*//p' %t.z3nb.out > %t.z3nb.losses
// RUN: diff %t.z3.losses %t.z3nb.losses
// RUN: cmp %t.ck/z3/checkpoint.safetensors %t.ck/z3nb/checkpoint.safetensors
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-opt %t.z3.mlir --braid-bucket-collectives -o %t.z3.bucketed.mlir
// RUN: braid-eval %t.z3.mlir --steps 3 --seed 1 --mesh mesh --save-weights %t.z3.w --save-optimizer-state %t.z3.s > %t.z3.eval
// RUN: braid-eval %t.z3.bucketed.mlir --steps 3 --seed 1 --mesh mesh > %t.z3.bucketed.eval
// RUN: diff %t.z3.eval %t.z3.bucketed.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.z3.out %t.z3.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z3/checkpoint.safetensors %t.z3.w %t.z3.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
//
// CHECK: ok: 3 losses within 1e-05
// STATE: ok: {{[0-9]+}} tensors ({{[0-9]+}} values) within 1e-05
