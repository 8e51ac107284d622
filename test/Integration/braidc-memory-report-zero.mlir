// Tests braidc --memory-report's categories (parameters, gradients,
// optimizer state) under dp=2 x tp=2 with ZeRO, against bytes worked out
// by hand from the GPT's shapes below.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --memory-report --emit mlir -o %t.0 | FileCheck %s --check-prefix=Z0
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 1 --memory-report --emit mlir -o %t.1 | FileCheck %s --check-prefix=Z1
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 2 --memory-report --emit mlir -o %t.2 | FileCheck %s --check-prefix=Z1
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --zero 3 --memory-report --emit mlir -o %t.3 | FileCheck %s --check-prefix=Z3
//
// A rank's parameters under tp=2 (f32, every tensor a multiple of 64
// bytes): a layer's q, k, v and fc weights and biases are split
// (column-parallel), attn.proj's and mlp.proj's weights split and biases
// whole (row-parallel), its two layer norms whole: (3 x 64 x 64 + 64 x 256
// + 64 x 64 + 256 x 64) / 2 + (3 x 64 + 256) / 2 + 2 x 64 + 4 x 64
// = 24576 + 224 + 128 + 256 = 25184 floats; 2 layers 50368; wte's vocabulary
// split, 64 x 64 = 4096; wpe 16 x 64 = 1024 and ln_f 2 x 64 whole: 55616
// floats = 222464 bytes. AdamW's two moments: 444928 bytes without ZeRO.
// ZeRO over dp=2 halves every tensor but the split biases (their one
// dimension is tp's: q, k, v 32 and fc 128 floats a layer, 2 x 224 in
// all, stay whole): 55168 / 2 + 448 = 28032 floats; AdamW's moments under
// ZeRO-1 2 x 28032 x 4 = 224256 bytes, and under ZeRO-3 the parameters
// too, 28032 x 4 = 112128 bytes.
//
// Gradients (live in the step's arena at its peak): without ZeRO every
// parameter's gradient (222464 bytes), the head's partial of wte (64 x 64
// floats, 16384 bytes) computed straight into wte's place in the dp bucket
// of the gradients around the layers, where the embedding's is added to it
// (until 2026-12-03 it had a buffer of its own beside that place: 238848).
// With ZeRO-3 the peak is in the layers' B (the gathered weights and the
// saved values), before any layer's W: the gradients then are those of the
// ops after the layers, the head's partial of wte (16384 bytes) and ln_f's
// weight and bias (2 x 64 floats, 512 bytes), 16896, computed into the
// bucket their reduce_scatter reads (until 2026-12-02 that bucket counted
// as activations and the report's gradients were 0 here).
// With ZeRO-1 (and ZeRO-2: braidc's ZeRO-1 already reduce_scatters the
// gradients, so ZeRO-2 compiles to the same program, its C++ byte for byte,
// and is checked with the same lines) the peak is at the layers' W (their
// saved values still live). Each instance's W reduce_scatters its
// gradients into the share the device keeps, the W's stacked results: the
// halves of the dp-divided tensors and the split biases whole, (25184 -
// 224) / 2 + 224 = 12704 floats, 2 instances 25408 floats = 101632 bytes.
// Of the ops around the layers only what B and W computed before the
// layers' W is live: the head's partial of wte (64 x 64 floats, 16384
// bytes) and ln_f's weight and bias gradients (2 x 64 floats, 512 bytes);
// the embedding's gradients and their bucket come after. 101632 + 16384 +
// 512 = 118528 (a layer more adds its 12704 floats, 50816 bytes: 169344
// with --layers 3).
// Z0: ranks parameters gradients optimizer_state
// Z0-NEXT: all 222464 222464 444928
// Z1: ranks parameters gradients optimizer_state
// Z1-NEXT: all 222464 118528 224256
// Z3: ranks parameters gradients optimizer_state
// Z3-NEXT: all 112128 16896 224256
