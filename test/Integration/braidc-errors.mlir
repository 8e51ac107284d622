// Tests braidc's and compiled programs' errors: located, short, non-zero.
//
// A compiler pass's error is the located message and the source line, not
// followed by the function it reports on in generic form: three lines
// (message, source line, caret).
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 64 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: not braidc %t.mlir --train --mesh pp=11 -o %t.never 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not braidc %t.mlir --train --mesh pp=11 -o %t.never 2>&1 | count 3
// RUN: not braidc %t.mlir --train --mesh dp=3 -o %t.never 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not braidc %t.mlir --train --mesh dp=3 -o %t.never 2>&1 | count 3
// RUN: not braidc %t.mlir --train --mesh tp=3 -o %t.never 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not braidc %t.mlir --train --mesh tp=3 -o %t.never 2>&1 | count 3

// SPLIT: error: braid-pipeline-split: @forward has {{[0-9]+}} units to place {{.*}} fewer than the 11 chunks
// SPLIT-NOT: see current operation
// DP: error: 'func.func' op argument #0 has batch dimension 4, not divisible by dp = 3
// DP-NOT: see current operation
// TP: error: 'braid.param' op parameter 'attn.q.weight' has dimension 1 of size 64, not divisible by tp = 3
// TP-NOT: see current operation
