// Tests that fusion under --precision bf16-mixed changes no bit of
// training: braid-legalize-bf16 follows each op computing a bf16 value by
// a braid.round, and the roundings join the fused regions
// (fuse-elementwise-round.mlir), computed inline by the rounding kernel's
// per-element function, braid_rt_round_bf16_of. Every value is computed by
// the same f32 operations in the same order as the unfused program's
// kernels and rounded by the same function, so the main job's GPT (4
// layers, hidden 128, 4 heads, sequence 64, vocabulary 256, batch 16)
// compiled with and without --no-fuse prints the same losses over 5 AdamW
// steps (relative tolerance 0) and saves byte-identical checkpoints, as
// does a 2-stage 1F1B pipeline on 2 ranks (3 steps; saved values packed to
// bf16 in the pieces). The packs of saved values to bf16 storage and their
// unpacks join the regions computing and reading them
// (fuse-elementwise-round.mlir): the GPT's loops write and read bf16
// storage with the packing kernels' functions, and its losses and
// checkpoints are still those of --no-fuse. (Checked: with the fused
// unpack reading the 16 bits as an integer, (float)bits, the losses differ
// from step 1 and this fails. A pack truncating instead of rounding would
// not show here: every pack braidc emits stores a value that a braid.round
// already made a bf16 one; braid-eval's handling of a region packing an
// unrounded value is checked in fuse-elementwise-eval.mlir.)
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 16 -o %t.gpt.mlir
// RUN: braidc %t.gpt.mlir --precision bf16-mixed --lr 3e-3 --clip-norm 1.0 -o %t.gpt.fused
// RUN: braidc %t.gpt.mlir --precision bf16-mixed --lr 3e-3 --clip-norm 1.0 --no-fuse -o %t.gpt.plain
// RUN: rm -rf %t.gpt.fused.ck %t.gpt.plain.ck
// RUN: %t.gpt.fused --steps 5 --seed 1 --save %t.gpt.fused.ck > %t.gpt.fused.out
// RUN: %t.gpt.plain --steps 5 --seed 1 --save %t.gpt.plain.ck > %t.gpt.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.gpt.fused.out %t.gpt.plain.out --rtol 0 | FileCheck %s --check-prefix=FIVE
// RUN: diff -r %t.gpt.fused.ck %t.gpt.plain.ck
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.small.mlir
// RUN: braidc %t.small.mlir --precision bf16-mixed --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 -o %t.pp.fused
// RUN: braidc %t.small.mlir --precision bf16-mixed --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 --no-fuse -o %t.pp.plain
// RUN: braid-run -n 2 %t.pp.fused --steps 3 --seed 1 > %t.pp.fused.out
// RUN: braid-run -n 2 %t.pp.plain --steps 3 --seed 1 > %t.pp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.pp.fused.out %t.pp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
//
// RUN: braidc %t.gpt.mlir --precision bf16-mixed --lr 3e-3 --clip-norm 1.0 --emit cpp -o %t.fused.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.fused.cpp
// RUN: grep -c "braid_rt_pack_bf16_f32(" %t.fused.cpp | FileCheck %s --check-prefix=PACKS
// RUN: grep -c "braid_rt_unpack_bf16_f32(" %t.fused.cpp | FileCheck %s --check-prefix=UNPACKS

// FIVE: ok: 5 losses within 0.0 (worst 0)
// THREE: ok: 3 losses within 0.0 (worst 0)

// A residual add, its rounding and the layer_norm after it in one row
// region, the rounding inline.
// CPP: #include "braid/rt/elementwise_math.h"
// CPP: braid.fused: {{[0-9]+}} ops over [16x64x128] row by row (1 row-wise)
// CPP: = braid_rt_round_bf16_of(v{{[0-9]+}});
// CPP: { // braid.layer_norm

// The saved values packed in the loops computing them (or, for a layer's
// input, reading them), and unpacked in those reading them: of the 18
// pack and 20 unpack kernel calls of the step without (call sites in the
// C++; a layer's run once per layer), 7 and 13 are left: packs of
// attention's q, k, v and output, unpacks into matmuls and attention.
// PACKS: {{^}}7{{$}}
// UNPACKS: {{^}}13{{$}}
// CPP: = braid_rt_bf16_bits_of(v{{[0-9]+}});
// CPP: = braid_rt_float_of_bf16(
