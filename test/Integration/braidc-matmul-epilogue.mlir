// Tests braid-fuse-matmul-epilogue in braidc's pipeline on the CPU target:
// a GPT (2 layers, hidden 32) trained 3 AdamW steps with clipping prints
// the same losses with and without --no-matmul-epilogue (tolerance 0: the
// CPU kernel adds the bias and applies the GELU of elementwise_math.h to
// each block of the product right after its GEMM, the same f32 operations
// as the separate kernels, so the checkpoints are byte-identical too), and
// within 1e-4 of braid-eval's (braidc-gpt.mlir's tolerance: braid-eval sums
// in double), on one rank and dp2 x tp2 on 4 ranks. Under --precision
// bf16-mixed a linear layer's product is not rounded before its bias add
// (isBF16BiasProduct; the add's f32 sum is rounded to bf16), so the same
// products fold, into braid_rt_matmul_bias_bf16in_f32 (BF16, BF16TP
// below), and the losses and
// checkpoints are again the same with --no-matmul-epilogue (tolerance 0:
// the bf16-input GEMM, then the bias added to the same f32 sums, then the
// add's round), and within 1e-5 of braid-eval's (measured identical; with
// braid-eval rounding the product before the add, as the program did before,
// 5.7e-5 at step 2 in braidc-precision.mlir's setting: braid-eval must round
// where the program does). The
// f32 C++ calls braid_rt_matmul_bias_f32 for q, k, v, the
// attention projection, fc and the MLP projection (6 a layer body; under
// tp2 the 4 column-parallel ones, since a row-parallel product is summed
// over ranks before its bias), and no braid_rt_matmul_bias with
// --no-matmul-epilogue or --no-fuse. (The forward-only fold of fc's GELU
// is in test/Transforms/fuse-matmul-epilogue-eval.mlir: a training step
// keeps the GELU's input for its gradient.)
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
//
// RUN: braidc %t.mlir --lr 3e-3 --clip-norm 1.0 -o %t.one
// RUN: braidc %t.mlir --lr 3e-3 --clip-norm 1.0 --no-matmul-epilogue -o %t.one.plain
// RUN: rm -rf %t.one.ck %t.one.plain.ck
// RUN: %t.one --steps 3 --seed 1 --save %t.one.ck > %t.one.out
// RUN: %t.one.plain --steps 3 --seed 1 --save %t.one.plain.ck > %t.one.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one.out %t.one.plain.out --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: diff -r %t.one.ck %t.one.plain.ck
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=3e-3 clip-norm=1.0" -o %t.one.mlir
// RUN: braid-eval %t.one.mlir --steps 3 --seed 1 > %t.one.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one.out %t.one.eval --rtol 1e-4 | FileCheck %s --check-prefix=EVAL
//
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --lr 3e-3 --clip-norm 1.0 -o %t.dptp
// RUN: braidc %t.mlir --mesh dp=2,tp=2 --lr 3e-3 --clip-norm 1.0 --no-matmul-epilogue -o %t.dptp.plain
// RUN: braid-run -n 4 %t.dptp --steps 3 --seed 1 > %t.dptp.out
// RUN: braid-run -n 4 %t.dptp.plain --steps 3 --seed 1 > %t.dptp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.out %t.dptp.plain.out --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=3e-3 clip-norm=1.0" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dptp.mlir
// RUN: braid-eval %t.dptp.mlir --steps 3 --seed 1 --mesh mesh > %t.dptp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.out %t.dptp.eval --rtol 1e-4 | FileCheck %s --check-prefix=EVAL
//
// RUN: braidc %t.mlir --lr 3e-3 --emit cpp -o - | FileCheck %s --check-prefix=CPP
// RUN: braidc %t.mlir --lr 3e-3 --mesh dp=2,tp=2 --emit cpp -o - | FileCheck %s --check-prefix=TP
// RUN: braidc %t.mlir --lr 3e-3 --no-matmul-epilogue --emit cpp -o - | FileCheck %s --check-prefix=PLAIN
// RUN: braidc %t.mlir --lr 3e-3 --no-fuse --emit cpp -o - | FileCheck %s --check-prefix=PLAIN
// RUN: braidc %t.mlir --lr 3e-3 --precision bf16-mixed --emit cpp -o - | FileCheck %s --check-prefix=BF16
// RUN: braidc %t.mlir --lr 3e-3 --precision bf16-mixed --no-matmul-epilogue --emit cpp -o - | FileCheck %s --check-prefix=PLAIN
//
// RUN: braidc %t.mlir --precision bf16-mixed --lr 3e-3 --clip-norm 1.0 -o %t.bf16
// RUN: braidc %t.mlir --precision bf16-mixed --lr 3e-3 --clip-norm 1.0 --no-matmul-epilogue -o %t.bf16.plain
// RUN: rm -rf %t.bf16.ck %t.bf16.plain.ck
// RUN: %t.bf16 --steps 3 --seed 1 --save %t.bf16.ck > %t.bf16.out
// RUN: %t.bf16.plain --steps 3 --seed 1 --save %t.bf16.plain.ck > %t.bf16.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.bf16.out %t.bf16.plain.out --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: diff -r %t.bf16.ck %t.bf16.plain.ck
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=3e-3 clip-norm=1.0" -o %t.bf16.mlir
// RUN: braid-eval %t.bf16.mlir --steps 3 --seed 1 > %t.bf16.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.bf16.out %t.bf16.eval --rtol 1e-5 | FileCheck %s --check-prefix=EVAL16

// SAME: ok: 3 losses within 0.0 (worst 0)
// EVAL: ok: 3 losses within 0.0001
// EVAL16: ok: 3 losses within 1e-05

// CPP-COUNT-6: braid_rt_matmul_bias_f32(braid_rt_program_stream(),
// CPP-NOT: braid_rt_matmul_bias
// TP-COUNT-4: braid_rt_matmul_bias_f32(braid_rt_program_stream(),
// TP-NOT: braid_rt_matmul_bias
// PLAIN-NOT: braid_rt_matmul_bias
// BF16-COUNT-6: braid_rt_matmul_bias_bf16in_f32(braid_rt_program_stream(),
// BF16-NOT: braid_rt_matmul_bias
