// Tests that the memory plan (braidc's default: each function's buffers in
// one arena, values whose lifetimes do not overlap sharing memory, in-place
// elementwise ops and optimizer updates) changes no bit of training: GPT
// training steps compiled with and without --no-buffer-reuse print the
// same losses (relative tolerance 0) and save byte-identical checkpoints:
// fused (braidc's default) and --no-fuse (more elementwise ops written in
// place) on one device, 5 AdamW steps with clipping; a 2-stage 1F1B
// pipeline (pp=2, stages' buffers sharing the arena) on 2 ranks and a
// dp2 x tp2 ZeRO-1 program with asynchronous collectives (an operand read
// until its wait) on 4 ranks, and dp=2 with blocking collectives (its
// gradient buckets written, summed and read in place) on 2 ranks, 3 steps
// each. A buffer reused one op too early changes the losses.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.gpt.mlir
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 -o %t.reuse
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 --no-buffer-reuse -o %t.plain
// RUN: rm -rf %t.reuse.ck %t.plain.ck
// RUN: %t.reuse --steps 5 --seed 1 --save %t.reuse.ck > %t.reuse.out
// RUN: %t.plain --steps 5 --seed 1 --save %t.plain.ck > %t.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.reuse.out %t.plain.out --rtol 0 | FileCheck %s --check-prefix=FIVE
// RUN: diff -r %t.reuse.ck %t.plain.ck
//
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 --no-fuse -o %t.nf.reuse
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 --no-fuse --no-buffer-reuse -o %t.nf.plain
// RUN: rm -rf %t.nf.reuse.ck %t.nf.plain.ck
// RUN: %t.nf.reuse --steps 5 --seed 1 --save %t.nf.reuse.ck > %t.nf.reuse.out
// RUN: %t.nf.plain --steps 5 --seed 1 --save %t.nf.plain.ck > %t.nf.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.nf.reuse.out %t.nf.plain.out --rtol 0 | FileCheck %s --check-prefix=FIVE
// RUN: diff -r %t.nf.reuse.ck %t.nf.plain.ck
//
// RUN: braidc %t.gpt.mlir --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 -o %t.pp.reuse
// RUN: braidc %t.gpt.mlir --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 --no-buffer-reuse -o %t.pp.plain
// RUN: rm -rf %t.pp.reuse.ck %t.pp.plain.ck
// RUN: braid-run -n 2 %t.pp.reuse --steps 3 --seed 1 --save %t.pp.reuse.ck > %t.pp.reuse.out
// RUN: braid-run -n 2 %t.pp.plain --steps 3 --seed 1 --save %t.pp.plain.ck > %t.pp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.pp.reuse.out %t.pp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
// RUN: diff -r %t.pp.reuse.ck %t.pp.plain.ck
//
// RUN: braidc %t.gpt.mlir --mesh dp=2,tp=2 --zero 1 --async-collectives --lr 3e-3 -o %t.dptp.reuse
// RUN: braidc %t.gpt.mlir --mesh dp=2,tp=2 --zero 1 --async-collectives --lr 3e-3 --no-buffer-reuse -o %t.dptp.plain
// RUN: braid-run -n 4 %t.dptp.reuse --steps 3 --seed 1 > %t.dptp.reuse.out
// RUN: braid-run -n 4 %t.dptp.plain --steps 3 --seed 1 > %t.dptp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.reuse.out %t.dptp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
//
// RUN: braidc %t.gpt.mlir --mesh dp=2 --lr 3e-3 --clip-norm 1.0 -o %t.dp.reuse
// RUN: braidc %t.gpt.mlir --mesh dp=2 --lr 3e-3 --clip-norm 1.0 --no-buffer-reuse -o %t.dp.plain
// RUN: rm -rf %t.dp.reuse.ck %t.dp.plain.ck
// RUN: braid-run -n 2 %t.dp.reuse --steps 3 --seed 1 --save %t.dp.reuse.ck > %t.dp.reuse.out
// RUN: braid-run -n 2 %t.dp.plain --steps 3 --seed 1 --save %t.dp.plain.ck > %t.dp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dp.reuse.out %t.dp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
// RUN: diff -r %t.dp.reuse.ck %t.dp.plain.ck
// RUN: braidc %t.gpt.mlir --mesh dp=2 --lr 3e-3 --emit cpp -o %t.dp.cpp
// RUN: FileCheck %s --check-prefix=DP < %t.dp.cpp
//
// RUN: braidc %t.gpt.mlir --lr 3e-3 --no-fuse --emit cpp -o %t.reuse.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.reuse.cpp
// RUN: braidc %t.gpt.mlir --lr 3e-3 --no-fuse --no-buffer-reuse --emit cpp -o %t.plain.cpp
// RUN: FileCheck %s --check-prefix=PLAIN < %t.plain.cpp

// FIVE: ok: 5 losses within 0.0 (worst 0)
// THREE: ok: 3 losses within 0.0 (worst 0)

// One arena per function, allocated once; buffers are offsets into it; an
// elementwise op whose operand dies there writes over it (the bias add
// after a product); AdamW updates the parameter slots themselves.
// CPP-NOT: braid_buffer_
// CPP: static float* braid_arena_{{[0-9]+}};
// CPP: float** [[ARENA:v[0-9]+]] = &braid_arena_
// CPP: braid_rt_program_buffer_f32([[ARENA]],
// CPP: braid_rt_matmul_f32({{.*}}, [[BUF:\(braid_arena_[0-9]+ \+ [0-9]+\)]]);
// CPP-NOT: braid_rt_
// CPP: braid_rt_add_f32(braid_rt_program_stream(), [[BUF]], {{.*}}, [[BUF]]);
// CPP: braid_rt_adamw_update_f32_i64(braid_rt_program_stream(), [[P:v[0-9]+]], {{v[0-9]+}}, [[M:v[0-9]+]], [[V:v[0-9]+]], {{.*}}, [[P]], [[M]], [[V]]);
// PLAIN-NOT: braid_arena_
// PLAIN: static float* braid_buffer_{{[0-9]+}};

// dp=2 (blocking collectives, braidc's default): a layer's gradients are
// computed straight into their places in one bucket (views of it: no
// concatenation copies them there), summed over dp in place (the bucket is
// both the all_reduce's input and its result: no copy) and read back as
// views (pointer offsets, not slice copies).
// DP-LABEL: void braid_block_W(
// DP-NOT: braid_rt_concat_f32
// DP: int64_t [[ZERO:v[0-9]+]] = 0;
// DP-NEXT: float* [[PIECE:v[0-9]+]] = [[BUCKET:\(braid_arena_[0-9]+ \+ [0-9]+\)]] + [[ZERO]];
// DP-NEXT: braid_rt_reduce_f32({{.*}}, [[PIECE]]);
// DP-NOT: braid_rt_concat_f32
// DP: braid_rt_program_collective_f32(v{{[0-9]+}}, v{{[0-9]+}}, [[BUCKET]], {{(v[0-9]+, v[0-9]+, v[0-9]+, v[0-9]+, v[0-9]+, v[0-9]+)}}, [[BUCKET]], v{{[0-9]+}}, "{{.*}}braid.all_reduce");
// DP-NEXT: int64_t [[FIRST:v[0-9]+]] = 0;
// DP-NEXT: float* {{v[0-9]+}} = [[BUCKET]] + [[FIRST]];
// DP-NEXT: int64_t [[SECOND:v[0-9]+]] = 64;
// DP-NEXT: float* {{v[0-9]+}} = [[BUCKET]] + [[SECOND]];
// DP-NOT: braid_rt_slice_f32
// The step's bucket of the gradients around the layers (ln_f 64 + 64,
// wpe 1024, wte 8192, the loss 1): the head's partial of the tied wte is
// computed straight into wte's place (element 1152), and the embedding's
// partial is added to it there, in place (before 2026-12-03 the head's
// partial had its own buffer, held across the layers' backward).
// DP-LABEL: void braid_train_step(
// DP: int64_t [[WTE:v[0-9]+]] = 1152;
// DP-NEXT: float* [[HEAD:v[0-9]+]] = {{\(braid_arena_[0-9]+ \+ [0-9]+\)}} + [[WTE]];
// DP-NEXT: braid_rt_reduce_f32({{.*}}, [[HEAD]]);
// DP: braid_rt_embedding_grad_f32({{.*}}, [[EMB:\(braid_arena_[0-9]+ \+ [0-9]+\)]]);
// DP-NOT: braid_rt_{{[a-z_]+}}_f32
// DP: braid_rt_add_f32(braid_rt_program_stream(), [[HEAD]], [[EMB]], {{.*}}, [[HEAD]]);
