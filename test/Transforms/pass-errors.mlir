// Tests that a pass's error is the located message and the source line, not
// followed by the function or module it reports on printed in generic form
// (kilobytes for any real model): three lines for an error on a function
// (message, source line, caret), one for an error on the module.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 64 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: not braid-opt %t.mlir --braid-shard="dp=3" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not braid-opt %t.mlir --braid-shard="dp=3" 2>&1 | count 3
// RUN: not braid-opt %t.mlir --braid-pipeline-split="stages=11" 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not braid-opt %t.mlir --braid-pipeline-split="stages=11" 2>&1 | count 3
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step="accumulation=0" 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step="accumulation=0" 2>&1 | count 1
//
// Asked for, the op is still printed.
// RUN: not braid-opt %t.mlir --braid-shard="dp=3" --mlir-print-op-on-diagnostic 2>&1 | FileCheck %s --check-prefix=ASKED

// DP: error: 'func.func' op argument #0 has batch dimension 4, not divisible by dp = 3
// DP-NOT: see current operation
// DP-NOT: "func.func"

// SPLIT: error: braid-pipeline-split: @forward has {{[0-9]+}} units to place {{.*}} fewer than the 11 chunks
// SPLIT-NOT: see current operation

// ACC: error: braid-train-step: accumulation must be at least 1
// ACC-NOT: see current operation

// ASKED: note: see current operation:
// ASKED-NEXT: "func.func"
