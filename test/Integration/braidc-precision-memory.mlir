// Tests the memory plan of bf16-mixed pipelines (--memory-report, bytes
// per stage; training.md, "bf16 storage of saved values"). A layer saves
// its values for the backward in bf16: braid-legalize-bf16 packs each
// right after the op computing it (braid.convert to bf16, written straight
// into the caller's stacked buffer), so the f32 value dies at its last use
// in the layer, not at the layer's yield (a parameter's working copy: at
// its matmul); and braid.round writes over the f32 result it rounds where
// that dies, so a rounding takes no buffer of its own. Under ZB-V on two
// stages (4 micro-batches) the workspace, the layers' and pieces' arenas
// with the step's above its live peak, was 232320 / 243584 bytes with the
// packs before the yield and the rounds in buffers of their own, and is
// 187264 / 198528 now (2026-12-02; f32's is 180928 / 180928): checked
// below 200000 on both stages, so that other changes to the pieces (the
// tied gradient's sum) may move it a little.
//
// The activations: a layer's F saved for B a bf16 working copy of each of
// its weights, per micro-batch in flight, where f32 reads the parameter
// itself; braid-autodiff now has B re-round the parameter instead (a value
// computed from parameters alone is the same for every micro-batch). ZB-V's
// went from 336512 / 294528 to 262784 / 220800 bytes (f32: 403328 /
// 362112; workspace 187264 / 198528 to 171264 / 178048), checked in
// 200000..299999 on both stages; interleaved 1F1B's from 515712 / 350080
// to 417408 / 276352 (f32: 502400 / 378752), checked in 300000..499999 and
// 200000..299999; 1F1B's stage 1 from 333312 to 284160 (stage 0: 534528 to
// 528640; f32: 491776 / 376320), checked in 200000..299999. With the tied
// wte's gradient summed in f32 after the schedule (stage 0's W no longer
// waits for it) stage 0's went on to 262016 (ZB-V), 346752 (interleaved)
// and 346368 (1F1B).
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule zb-v --microbatches 4 --lr 0.01 --memory-report --emit mlir -o %t.zbv.emitc | FileCheck %s --check-prefix=ZBV
// ZBV: ranks parameters gradients optimizer_state activations workspace
// ZBV-NEXT: stage 0 {{[0-9]+ +[0-9]+ +[0-9]+}} {{2[0-9][0-9][0-9][0-9][0-9]}} {{1[0-9][0-9][0-9][0-9][0-9]}} {{[0-9]+}}
// ZBV-NEXT: stage 1 {{[0-9]+ +[0-9]+ +[0-9]+}} {{2[0-9][0-9][0-9][0-9][0-9]}} {{1[0-9][0-9][0-9][0-9][0-9]}} {{[0-9]+}}
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule interleaved-1f1b --microbatches 4 --lr 0.01 --memory-report --emit mlir -o %t.il.emitc | FileCheck %s --check-prefix=IL
// IL: ranks
// IL-NEXT: stage 0 {{[0-9]+ +[0-9]+ +[0-9]+}} {{[34][0-9][0-9][0-9][0-9][0-9]}} {{[0-9]+}}
// IL-NEXT: stage 1 {{[0-9]+ +[0-9]+ +[0-9]+}} {{2[0-9][0-9][0-9][0-9][0-9]}} {{[0-9]+}}
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule 1f1b --microbatches 4 --lr 0.01 --memory-report --emit mlir -o %t.1f1b.emitc | FileCheck %s --check-prefix=P1F1B
// P1F1B: ranks
// P1F1B: stage 1 {{[0-9]+ +[0-9]+ +[0-9]+}} {{2[0-9][0-9][0-9][0-9][0-9]}} {{[0-9]+}}
//
// Without a pipeline (the same GPT, one step): workspace 103040 bytes,
// checked below 110000 (before: 148096; f32: 98944); activations 168000
// (before: 176192; f32: 331840).
// RUN: braidc %t.mlir --train --precision bf16-mixed --memory-report --emit mlir -o %t.one.emitc | FileCheck %s --check-prefix=ONE
// ONE: ranks
// ONE-NEXT: all {{[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+}} {{10[0-9][0-9][0-9][0-9]}} {{[0-9]+}}
