// Tests the collectives of a partitioned GPT training step, counted per
// layer: Megatron's tensor parallelism (tp = 2 and 4) gives exactly one
// all_reduce per block (attention, MLP) in the forward layer and one per
// block in the input-gradient (B) layer, none in W; data parallelism gives
// none in F and B, and one gradient reduction per parameter (16) in W.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.tp2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.tp2.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="tp=4" --braid-propagate-sharding --braid-partition -o %t.tp4.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.tp4.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: FileCheck %s --check-prefix=DP < %t.dp2.mlir

// TP-LABEL: braid.layer @block.F
// TP-COUNT-2: braid.all_reduce sum {{.*}} on @mesh ["tp"]
// TP-NOT: braid.all_
// TP-LABEL: braid.layer @block.B
// TP-COUNT-2: braid.all_reduce sum {{.*}} on @mesh ["tp"]
// TP-NOT: braid.all_
// TP-LABEL: braid.layer @block.W
// TP-NOT: braid.all_
// TP: braid.yield

// DP-LABEL: braid.layer @block.F
// DP-NOT: braid.all_
// DP-LABEL: braid.layer @block.B
// DP-NOT: braid.all_
// DP-LABEL: braid.layer @block.W
// DP-COUNT-16: braid.all_reduce sum {{.*}} on @mesh ["dp"]
// DP-NOT: braid.all_
// DP: braid.yield
