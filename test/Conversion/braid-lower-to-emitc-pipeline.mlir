// Tests how braid-lower-to-emitc lowers a scheduled braid.pipeline (2 stages,
// 1F1B over 2 micro-batches) and places what follows it, through braidc's
// C++: each stage starts all its receives first (tags name the piece:
// (micro-batch x 2 chunks + chunk) x 3 + phase F/B/W), runs its actions as
// trace events and waits for a receive where the schedule receives; after
// the pipeline a stage squares and updates only its own gradients under
// `if (stage == s)`, sending the norm's running sum on to the next stage
// alone (point to point), broadcasting only the clipping coefficient and
// the results; each slot records the stage updating it,
// and only the stages that update or read a slot allocate it.
//
// RUN: braid-opt %s --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="accumulation=2 pipeline clip-norm=1.0" --braid-pipeline-outline --braid-pipeline-schedule=schedule=1f1b -o %t.mlir
// RUN: braidc %t.mlir --entry train_step --emit cpp -o %t.cpp
// RUN: FileCheck %s --strict-whitespace < %t.cpp
// RUN: braidc %t.mlir --entry train_step --memory-report --emit mlir -o %t.emitc | FileCheck %s --check-prefix=MEM

// Each stage allocates the gradient means of its own parameters only, and
// the loss (64 bytes, broadcast to every stage as the step's result),
// which the report counts as activations (the driver takes it from an F
// piece; until 2026-12-03 it counted as a gradient, 64 bytes more on each
// stage): stage 0 w_in (4 x 8 f32, 128 bytes) and the 6 blocks' w (8 x 8,
// 256 bytes each) = 1664; stage 1 w_out (8 x 64, 2048 bytes) = 2048.
// (Before, both held every mean: 3776.)
// MEM: ranks parameters gradients
// MEM-NEXT: stage 0 1664 1664
// MEM-NEXT: stage 1 2048 2048

// CHECK-LABEL: void braid_train_step(
// Stage 0 (w_in and the blocks): the gradients of micro-batches 0 and 1
// from stage 1 (chunk 1, phase B: tags 4 and 10), started first.
// CHECK: {{^}}  if (
// CHECK: int64_t [[TAG0:v[0-9]+]] = 4;
// CHECK-NEXT: braid_rt_program_pp_recv_start_f32({{.*}}, [[TAG0]], "
// CHECK: int64_t [[TAG1:v[0-9]+]] = 10;
// CHECK-NEXT: braid_rt_program_pp_recv_start_f32({{.*}}, [[TAG1]], "
// CHECK: braid_rt_program_trace_begin("F0.0", "pipeline");
// CHECK-NEXT: int64_t
// CHECK: braid_forward_grad_c0_F(
// CHECK-NEXT: braid_rt_program_trace_end();
// The activation of micro-batch 0 (chunk 0, phase F: tag 0).
// CHECK: int64_t [[TAG2:v[0-9]+]] = 0;
// CHECK-NEXT: braid_rt_program_pp_send_f32({{.*}}, [[TAG2]], "
// CHECK: braid_rt_program_trace_begin("recv gradient 0.0 from rank 1", "recv");
// CHECK-NEXT: int64_t [[K:v[0-9]+]] = 0;
// CHECK-NEXT: braid_rt_program_pp_recv_wait([[K]], "
// CHECK: braid_rt_program_trace_begin("BW0.0", "pipeline");
// CHECK: {{^}}  braid_rt_program_pp_wait_all(
//
// After it: nothing squared or updated outside a stage's branch.
// CHECK-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// CHECK: {{^}}    braid_rt_sum_squares_f32(
// CHECK-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// CHECK: {{^}}  braid_rt_program_pp_transfer_f32({{.*}}: braid.{{add|fused}}");
// CHECK-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// CHECK: {{^}}    braid_rt_adamw_update_f32_i64(
// CHECK-NOT: {{^}}  braid_rt_{{adamw_update|sum_squares}}
// CHECK: {{^}}  braid_rt_program_pp_broadcast_f32({{.*}}: func.return");
//
// Each stage allocates and initialises only the slots it holds: w_in on
// stage 0 (stage bits 1), w_out on stage 1 (bits 2).
// CHECK-LABEL: void braid_program_init(
// CHECK: braid_rt_program_comm(
// CHECK-NEXT: int64_t {{v[0-9]+}} = 1;
// CHECK-NEXT: int64_t [[BITS0:v[0-9]+]] = 1;
// CHECK-NEXT: bool [[HOLDS0:v[0-9]+]] = braid_rt_program_pp_holds({{v[0-9]+}}, [[BITS0]]);
// CHECK-NEXT: if ([[HOLDS0]]) {
// CHECK: braid_rt_program_init_f32({{v[0-9]+}}, "w_in",
// CHECK: "h.5.w"
// CHECK: int64_t [[BITS1:v[0-9]+]] = 2;
// CHECK-NEXT: bool [[HOLDS1:v[0-9]+]] = braid_rt_program_pp_holds({{v[0-9]+}}, [[BITS1]]);
// CHECK-NEXT: if ([[HOLDS1]]) {
// CHECK: braid_rt_program_init_f32({{v[0-9]+}}, "w_out",
//
// CHECK: {"w_in", 2, braid_slot_shape_0, braid_slot_spec_0, 0, 0},
// CHECK: {"w_out", 2, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, 1, 0},
// CHECK: {"w_out.adamw.m", 2, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, 1, 0},
// CHECK: static const int64_t braid_pipeline_mask = 1;

braid.layer @block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = braid.relu %y : tensor<4x8xf32>
  braid.yield %z : tensor<4x8xf32>
}

func.func @forward(%x: tensor<4x4xf32>, %labels: tensor<4xi32> {braid.range = 64 : i64}) -> tensor<f32> {
  %w_in = braid.param "w_in" {init = #braid.init<normal(0.1)>} : tensor<4x8xf32>
  %h0 = braid.matmul %x, %w_in : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = braid.repeat @block(%h0) {prefix = "h", count = 6 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w_out = braid.param "w_out" {init = #braid.init<normal(0.1)>} : tensor<8x64xf32>
  %logits = braid.matmul %h, %w_out : (tensor<4x8xf32>, tensor<8x64xf32>) -> tensor<4x64xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<4x64xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
