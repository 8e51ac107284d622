// Tests braidc --memory-report and the arena plan behind it, against sizes
// worked out by hand from the tensor shapes below.
//
// RUN: braidc %s --memory-report --emit cpp -o %t.cpp | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=CPP < %t.cpp
// RUN: braidc %s --memory-report --no-buffer-reuse --emit cpp -o %t.plain.cpp | FileCheck %s --check-prefix=PLAIN
// RUN: braidc %s -o %t.prog
// RUN: braidc %s --no-buffer-reuse -o %t.plain
// RUN: %t.prog > %t.out
// RUN: %t.plain > %t.plain.out
// RUN: diff %t.out %t.plain.out
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.gpt.mlir
// RUN: braidc %t.gpt.mlir --train --memory-report --emit mlir -o %t.gpt.emitc | FileCheck %s --check-prefix=GPT
// RUN: braidc %t.gpt.mlir --mesh dp=2 --memory-report --emit mlir -o %t.dp.emitc | FileCheck %s --check-prefix=DP
// RUN: braidc %t.gpt.mlir --mesh dp=2 --bucket-mb 0 --memory-report --emit mlir -o %t.dp0.emitc | FileCheck %s --check-prefix=GPT
// RUN: braidc %t.gpt.mlir --mesh pp=2 --memory-report --emit mlir -o %t.pp.emitc | FileCheck %s --check-prefix=PP

// The function's ops, numbered as the plan numbers them: 0 the parameter
// (its slot, no buffer), 1-3 three products of 4x16 f32 (256 bytes each),
// 4 a ReLU, 5 a sum (4 bytes, 64 aligned), 6 the return.
//   A = %a: live at ops 1-2; B = %b: 2-3; C = %c: 3-5, because the ReLU
//   writes over it in place (%c dies there) and %d is read at op 5;
//   S = %s: 5-6.
// Largest first, each in the lowest gap left by the buffers it overlaps:
// A at 0; B overlaps A (op 2): at 256; C overlaps B only (op 3): A's place,
// 0; S overlaps C only (op 5): 256. Arena: 512 bytes (128 floats). Live
// bytes peak at 512 (ops 2 and 3), all activations.
// Parameters: w, 16 x 16 f32 = 1024 bytes. Total 1536.
// Without reuse every site has its own buffer: A, B, C, the ReLU's and S,
// 4 x 256 + 64 = 1088 bytes, of which the same 512 are live at the peak
// (workspace 576); total 2112.
func.func @forward(%x: tensor<4x16xf32>) -> tensor<f32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<16x16xf32>
  %a = braid.matmul %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %b = braid.matmul %a, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %c = braid.matmul %b, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %d = braid.relu %c : tensor<4x16xf32>
  %s = braid.reduce sum %d {axes = array<i64: 0, 1>} : (tensor<4x16xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// REPORT: memory plan per rank (bytes; buffer reuse on;
// REPORT-NEXT: ranks parameters gradients optimizer_state activations workspace total arenas total MiB
// REPORT-NEXT: all 1024 0 0 512 0 1536 512 0.00

// CPP: static float* braid_arena_[[N:[0-9]+]];
// CPP: int64_t [[COUNT:v[0-9]+]] = 128;
// CPP-NEXT: float** [[SITE:v[0-9]+]] = &braid_arena_[[N]];
// CPP-NEXT: braid_rt_program_buffer_f32([[SITE]], [[COUNT]]);
// CPP: braid_rt_matmul_f32({{.*}}, (braid_arena_[[N]] + 0));
// CPP: braid_rt_matmul_f32(braid_rt_program_stream(), (braid_arena_[[N]] + 0), {{.*}}, (braid_arena_[[N]] + 64));
// CPP: braid_rt_matmul_f32(braid_rt_program_stream(), (braid_arena_[[N]] + 64), {{.*}}, (braid_arena_[[N]] + 0));
// CPP: braid_rt_relu_f32(braid_rt_program_stream(), (braid_arena_[[N]] + 0), {{v[0-9]+}}, (braid_arena_[[N]] + 0));
// CPP: braid_rt_reduce_f32(braid_rt_program_stream(), (braid_arena_[[N]] + 0), {{.*}}, (braid_arena_[[N]] + 64));
// CPP: braid_rt_copy_f32(braid_rt_program_stream(), (braid_arena_[[N]] + 64),

// PLAIN: memory plan per rank (bytes; buffer reuse off;
// PLAIN-NEXT: ranks
// PLAIN-NEXT: all 1024 0 0 512 576 2112 1088 0.00

// GPT (2 layers, hidden 64, sequence 16, vocabulary 128), every tensor a
// multiple of 64 bytes: wte 128 x 64 + wpe 16 x 64 + per layer 12 x 64^2
// + 13 x 64 (q, k, v, proj, fc, proj and their biases, two layer norms)
// = 49984 + the final layer norm 2 x 64 = 109312 floats = 437248 bytes;
// AdamW's two moments twice that. On pp=2 each stage holds the parameters
// its pieces read and those it updates: stage 0 wte, wpe and layer 0
// (59200 floats = 236800 bytes), stage 1 layer 1, ln_f and the tied head's
// wte (58304 floats = 233216 bytes).
// Each stage holds the gradient means of its own parameters only: stage 0
// 236800; stage 1 233216 (its own, with its partial of wte's): the first
// stage's partial of wte's (128 x 64 floats, 32768 bytes), sent to it to
// sum, lands after the pipeline, past the peak (until 2026-12-02
// broadcast, and held from the pipeline's start: 266048). (Every stage
// held every mean before: 470080.) The loss (64 bytes, broadcast to every
// stage as the step's result) is a mean the driver takes from an F piece,
// so it counts as activations (until 2026-12-03 as a gradient: 236864 and
// 233280).
// Gradients are the bytes of gradient buffers live at the step's peak,
// which on one device is the layers' W (braid.repeat @block.W, its saved
// values and its results live): the layers' gradients, 2 x 49984 floats =
// 399872 bytes; ln_f's two, 2 x 64 floats = 512 bytes; and the head's
// partial of the tied wte, 128 x 64 floats = 32768 bytes: 433152. Not yet
// computed there: wpe's (16 x 64 floats, 4096 bytes) and the embedding's
// partial of wte, both from the layers' input gradient after the W; so
// fewer than the parameters' 437248, and no gradient is missed.
// dp=2 peaks at the same op. Without buckets it holds the same 433152;
// with them (25 MB by default) the dp bucket of the gradients around the
// layers, ln_f 128 + wpe 1024 + wte 8192 + the loss 1 = 9345 floats =
// 37380 bytes (37440, 64-byte aligned), is one buffer, allocated with the
// first piece written into it in place (the loss, in the forward): it is
// live at the peak, with the ln_f gradients and the head's partial of wte
// already in their places (the head's partial is computed straight into
// wte's place, and the embedding's partial is added to it there after the
// peak) and room for wpe's gradient not yet computed. 399872 + 37440 =
// 437312: the layers' gradients and the bucket, none held twice; 4160
// above one device's: wpe's place 4096, the loss 4, alignment 60. (Until
// 2026-12-03 the head's partial had its own buffer beside the bucket's
// place for it: 470080, 32768 more; for GPT-2's 50304 x 768 wte, 154 MB.)
// GPT: ranks parameters gradients optimizer_state
// GPT-NEXT: all 437248 433152 874496
// DP: ranks parameters gradients optimizer_state
// DP-NEXT: all 437248 437312 874496
// PP: ranks parameters gradients
// PP-NEXT: stage 0 236800 236800
// PP-NEXT: stage 1 233216 233216
