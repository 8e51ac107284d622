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

// A label outside the vocabulary names the rank, the label, its position
// and the range (it said only "braid.cross_entropy: INVALID_ARGUMENT"). The
// model declares its token range as 100 but has 64 logits; the data file's
// tokens are below 100 (the data source checks that much) and token 32, the
// label of the last position of step 0's batch of 4 x 8 (and in no token
// window of step 0), is 70.
//
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 16 --heads 2 --seq 8 --vocab 64 --batch 4 -o %t.vocab64.mlir
// RUN: sed 's/braid.range = 64/braid.range = 100/g' %t.vocab64.mlir > %t.range100.mlir
// RUN: %PYTHON -c "import numpy as np; t = np.arange(400) %% 64; t[32] = 70; t.astype('<u2').tofile('%t.tokens')"
// RUN: braidc %t.range100.mlir --train -o %t.one
// RUN: not %t.one --steps 1 --data %t.tokens --token-bytes 2 2>&1 | FileCheck %s --check-prefix=LABEL1
// RUN: braidc %t.range100.mlir --train --mesh dp=2 -o %t.dp
// RUN: not braid-run -n 2 %t.dp --steps 1 --data %t.tokens --token-bytes 2 2>&1 | FileCheck %s --check-prefix=LABELDP
// RUN: braidc %t.range100.mlir --train --mesh tp=2 -o %t.tp
// RUN: not braid-run -n 2 %t.tp --steps 1 --data %t.tokens --token-bytes 2 2>&1 | FileCheck %s --check-prefix=LABELTP
//
// A token id outside the embedding table (token 5 of step 0) is named too.
// RUN: %PYTHON -c "import numpy as np; t = np.arange(400) %% 64; t[5] = 70; t.astype('<u2').tofile('%t.ids')"
// RUN: not %t.one --steps 1 --data %t.ids --token-bytes 2 2>&1 | FileCheck %s --check-prefix=ID

// LABEL1: error: rank 0: {{.*}}: braid.cross_entropy: label 70 is outside [0, 64) at position 31 of 32 on this rank
// LABEL1-NOT: INVALID_ARGUMENT
// LABELDP: error: rank 1: {{.*}}: braid.cross_entropy: label 70 is outside [0, 64) at position 15 of 16 on this rank
// LABELDP-NOT: INVALID_ARGUMENT
// LABELTP: error: rank {{[01]}}: {{.*}}: braid.cross_entropy: label 70 is outside [0, 64) at position 31 of 32 on this rank
// ID: error: rank 0: {{.*}}: braid.embedding: id 70 is outside [0, 64) at position 5 of 32 on this rank
