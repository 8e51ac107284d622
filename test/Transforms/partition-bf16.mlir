// Tests braid-partition under bf16-mixed precision: data parallelism
// reduces each parameter's f32 gradient (after the exact bf16 -> f32
// convert of its working copy's gradient), not the bf16 one, which would
// round the sum to bf16; the tied wte (embedding and LM head) gets one
// reduction of its summed f32 gradient, not one per use. ZeRO's
// reduce_scatter likewise; tensor parallelism's forward sums stay bf16.
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: FileCheck %s --check-prefix=DP < %t.dp2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.dp2.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.zero2.mlir
// RUN: FileCheck %s --check-prefix=ZERO < %t.zero2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.zero2.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dp2tp2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.dp2tp2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.dp2tp2.mlir

// wte's gradient: one f32 all_reduce in the step.
// DP-LABEL: func.func @train_step
// DP: braid.all_reduce sum {{.*}} on @mesh ["dp"] {{.*}}: tensor<64x32xf32>
// DP-NOT: braid.all_reduce {{.*}}: tensor<64x32xf32>
// DP-LABEL: func.func

// ZERO-LABEL: func.func @train_step
// ZERO: braid.reduce_scatter {{.*}} on @mesh ["dp"] {{.*}}: (tensor<64x32xf32>) -> tensor<32x32xf32>
// ZERO-NOT: braid.reduce_scatter {{.*}}: (tensor<64x32xf32>)
// ZERO-LABEL: func.func

// The attention and MLP blocks' forward sums over tp stay bf16.
// TP: braid.all_reduce sum {{.*}} on @mesh ["tp"] {{.*}}: tensor<{{.*}}xbf16>
