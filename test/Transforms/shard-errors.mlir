// Tests that braid-shard refuses options that would split over an axis of
// size one and so silently do nothing.
//
// RUN: %PYTHON -m braid.models mlp --layers 1 --hidden 8 --vocab 4 --batch 4 -o %t.mlir
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="tp=2 zero=2" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 sp=true" 2>&1 | FileCheck %s --check-prefix=SP
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 zero=4" 2>&1 | FileCheck %s --check-prefix=RANGE

// ZERO: error: braid-shard: zero=2 shards over the data-parallel axis, but dp=1
// SP: error: braid-shard: sp splits the sequence over the tensor-parallel axis, but tp=1
// RANGE: error: braid-shard: zero must be 0, 1, 2 or 3, got 4
