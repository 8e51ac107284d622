// Tests that tensor parallelism splits under --precision bf16-mixed as it
// does in f32 (sharding.md, "Mixed precision"): the matmuls read bf16
// working copies (braid.convert) of the parameters, which the plan looks
// through. Before, nothing was split and tp silently gave dp alone.
//
// Parameters per rank, GPT (2 layers, hidden 64, vocabulary 128): dp2 x tp2
// 222464 bytes in both precisions (bf16-mixed was 437248, dp2's), tp2 with
// sp 220416 (was 435200), stage 0 of dp2 x tp2 x pp2 121216 (was 236800).
//
// Gradients per rank (f32 in both precisions), live at
// the step's peak:
// - dp2 x tp2: the layers' W (saved values still live) is the peak. Every
//   layer instance's gradient (25184 floats a rank, 201472 bytes for 2),
//   the dp bucket of the ops around the layers (ln_f 128 + wpe 1024 + wte's
//   tp half 4096 floats = 20992 bytes): every parameter's, 222464, in f32
//   with the head's partial of wte (64 x 64 floats, 16384 bytes) computed
//   straight into wte's place in that bucket and the embedding's added to
//   it there (until 2026-12-03 in a buffer of its own: 238848). Under
//   bf16-mixed that sum is a braid.fused region (each partial rounded,
//   then added), whose loops take __restrict pointers and so may not
//   write over an operand: the head's partial keeps its own buffer,
//   238848. The report's walk follows the region back to both partials
//   (until 2026-12-03 it did not, and counted the head's partial as
//   activations: 222464).
// - tp2 sp, bf16-mixed: the layers' 201472, the tp bucket of ln_f's two
//   gradients (summed over the sequence halves) with the gradient norm's 12
//   pieces, 140 floats in a 576-byte buffer (64-byte aligned), and the
//   head's partial of wte (16384, as above; was activations until
//   2026-12-03): 218432; the embedding's gradients come after the layers'
//   W.
// - dp2 x tp2 x pp2: after the schedule a stage holds the means of all its
//   gradients, its parameters' bytes: stage 0 (layer 0, wte's partial, wpe)
//   121216; stage 1 (layer 1, ln_f, the tied wte it updates) 117632. The
//   loss, also a result of the pipeline (one float in a 64-byte buffer), is
//   one the driver takes from an F piece and counts as activations (until
//   2026-12-03 as a gradient: 117696).
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 2 -o %t.gpt.mlir
// RUN: braidc %t.gpt.mlir --train --mesh dp=2,tp=2 --memory-report --emit mlir -o %t.e1 > %t.mem
// RUN: braidc %t.gpt.mlir --train --precision bf16-mixed --mesh dp=2,tp=2 --memory-report --emit mlir -o %t.e2 >> %t.mem
// RUN: braidc %t.gpt.mlir --train --precision bf16-mixed --mesh tp=2 --sp --memory-report --emit mlir -o %t.e3 >> %t.mem
// RUN: braidc %t.gpt.mlir --train --precision bf16-mixed --mesh dp=2,tp=2,pp=2 --schedule 1f1b --microbatches 4 --memory-report --emit mlir -o %t.e4 >> %t.mem
// RUN: FileCheck %s --check-prefix=MEM < %t.mem
// MEM: ranks parameters
// MEM-NEXT: all 222464 222464 444928
// MEM: ranks parameters
// MEM-NEXT: all 222464 238848 444928
// MEM: ranks parameters
// MEM-NEXT: all 220416 218432
// MEM: ranks parameters
// MEM-NEXT: stage 0 121216 121216
// MEM-NEXT: stage 1 117632 117632
//
// Llama (rms_norm, rotary, SwiGLU, grouped KV heads, an untied head) on
// tp2, dp2 x tp2, tp2 with sp and dp2 x tp2 x pp2 (1F1B): the program's
// losses against braid-eval's on the IR the same passes make within 1e-3
// (measured identical on the first three, 1.1e-5 on the pipeline) and
// against the serial bf16 program within 1e-2 (measured 2.7e-3, 2.6e-3,
// 2.7e-3, and 1.2e-3 against the serial program with 4 micro-batches):
// a tensor-parallel partial sum is rounded to bf16 per rank before the
// ranks' sum, where the serial program rounds the whole sum once, and the
// difference grows over the steps (2.7e-3 at step 2, 4.2e-3 at worst over
// 8; f32 tp2 equals f32 serial exactly, and bf16 serial differs from it by
// 1.2e-3).
// RUN: %PYTHON -m braid.models llama --layers 2 --hidden 32 --heads 4 --kv-heads 2 --seq 8 --vocab 64 --batch 4 -o %t.llama.mlir
// RUN: braidc %t.llama.mlir --precision bf16-mixed --lr 0.01 --clip-norm 1.0 -o %t.one
// RUN: %t.one --steps 3 --seed 1 > %t.one.out
// RUN: braidc %t.llama.mlir --precision bf16-mixed --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.one4
// RUN: %t.one4 --steps 3 --seed 1 > %t.one4.out
//
// RUN: braidc %t.llama.mlir --precision bf16-mixed --mesh tp=2 --lr 0.01 --clip-norm 1.0 -o %t.tp
// RUN: braid-run -n 2 %t.tp --steps 3 --seed 1 > %t.tp.out
// RUN: braid-opt %t.llama.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.tp.mlir
// RUN: braid-eval %t.tp.mlir --steps 3 --seed 1 --mesh mesh > %t.tp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.tp.out %t.tp.eval --rtol 1e-3 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.tp.out %t.one.out --rtol 1e-2 | FileCheck %s --check-prefix=BAND
//
// RUN: braidc %t.llama.mlir --precision bf16-mixed --mesh dp=2,tp=2 --lr 0.01 --clip-norm 1.0 -o %t.dptp
// RUN: braid-run -n 4 %t.dptp --steps 3 --seed 1 > %t.dptp.out
// RUN: braid-opt %t.llama.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dptp.mlir
// RUN: braid-eval %t.dptp.mlir --steps 3 --seed 1 --mesh mesh > %t.dptp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.out %t.dptp.eval --rtol 1e-3 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.out %t.one.out --rtol 1e-2 | FileCheck %s --check-prefix=BAND
//
// RUN: braidc %t.llama.mlir --precision bf16-mixed --mesh tp=2 --sp --lr 0.01 --clip-norm 1.0 -o %t.sp
// RUN: braid-run -n 2 %t.sp --steps 3 --seed 1 > %t.sp.out
// RUN: braid-opt %t.llama.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" --braid-shard="tp=2 sp" --braid-propagate-sharding --braid-partition -o %t.sp.mlir
// RUN: braid-eval %t.sp.mlir --steps 3 --seed 1 --mesh mesh > %t.sp.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.sp.out %t.sp.eval --rtol 1e-3 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.sp.out %t.one.out --rtol 1e-2 | FileCheck %s --check-prefix=BAND
//
// RUN: braidc %t.llama.mlir --precision bf16-mixed --mesh dp=2,tp=2,pp=2 --schedule 1f1b --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.3d
// RUN: braid-run -n 8 %t.3d --steps 3 --seed 1 > %t.3d.out
// RUN: braid-opt %t.llama.mlir --braid-mixed-precision=precision=bf16-mixed --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0 accumulation=4 pipeline" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule=schedule=1f1b -o %t.3d.mlir
// RUN: braid-eval %t.3d.mlir --steps 3 --seed 1 --pipeline --mesh mesh > %t.3d.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.3d.out %t.3d.eval --rtol 1e-3 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.3d.out %t.one4.out --rtol 1e-2 | FileCheck %s --check-prefix=BAND
//
// CHECK: ok: 3 losses within 0.001
// BAND: ok: 3 losses within 0.01
