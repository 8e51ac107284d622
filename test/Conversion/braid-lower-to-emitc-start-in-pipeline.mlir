// Tests that braid-lower-to-emitc issues a started reduction marked
// braid.start_in_pipeline (braid-schedule-collectives) inside the pipeline,
// in the code of the stage computing its operand, right after the action
// adding the last micro-batch to their means: under ZB-V over 2 ranks, rank
// 0 holds chunks 0 and 3, and the dp reduction of chunk 3's gradients (the
// stacked layer weight and the bias) starts after W1.1, its last W action,
// while the rank still runs chunk 0's B and W: one bucket with the local
// loss, whose dp sum braid-pipeline-outline takes out of the last chunk's F
// actions (the concat of 3 pieces before the start; chunk 0's reduction
// between them in the step fills a bucket of its own); chunk 0's after
// W1.0. With
// --schedule-into-pipelines=false they start after the pipeline.
// Under 1F1B the last stage's last action BW1.0 is followed by its send of
// the input gradient that stage 0 waits for: the starts go after that send
// (ONEF), not between the action and it, where their bucket's copy and
// MPI's start call would delay stage 0's BW1.0.
//
// RUN: braidc %s --mesh dp=2,pp=2 --schedule zb-v --microbatches 2 --async-collectives --emit cpp -o %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: braidc %s --mesh dp=2,pp=2 --schedule zb-v --microbatches 2 --async-collectives --schedule-into-pipelines=false --emit cpp -o %t.off.cpp
// RUN: FileCheck %s --check-prefix=OFF < %t.off.cpp
// RUN: braidc %s --mesh dp=2,pp=2 --schedule 1f1b --microbatches 2 --async-collectives --emit cpp -o %t.1f1b.cpp
// RUN: FileCheck %s --check-prefix=ONEF < %t.1f1b.cpp

// CHECK-LABEL: void braid_train_step(
// CHECK: braid_rt_program_trace_begin("W1.1", "pipeline");
// CHECK-NEXT: braid_forward_grad_c3_W(
// CHECK: braid_rt_program_accumulate_mean_f32(
// CHECK: braid_rt_program_trace_end();
// CHECK-NEXT: float* [[PIECES:v[0-9]+]][3];
// CHECK-NEXT: [[PIECES]][
// CHECK-NEXT: [[PIECES]][
// CHECK-NEXT: [[PIECES]][
// CHECK-NEXT: braid_rt_concat_f32(braid_rt_program_stream(), [[PIECES]],
// CHECK-NEXT: braid_rt_program_collective_t
// CHECK-NEXT: braid_rt_program_collective_start_f32({{.*}} braid.all_reduce_start");
// CHECK-NEXT: braid_rt_program_trace_begin("B0.0", "pipeline");
// CHECK: braid_rt_program_trace_begin("W1.0", "pipeline");
// CHECK-NEXT: braid_forward_grad_c0_W(
// CHECK: braid_rt_program_trace_end();
// CHECK-NEXT: braid_rt_program_collective_t
// CHECK-NEXT: braid_rt_program_collective_start_f32({{.*}} braid.all_reduce_start");
// CHECK-NEXT: }
// CHECK: braid_rt_program_pp_wait_all(
// CHECK-NOT: braid_rt_program_collective_start_f32(
// CHECK: braid_rt_program_wait(

// Stage 0: no send after its BW1.0; its start follows the action.
// ONEF-LABEL: void braid_train_step(
// ONEF: braid_rt_program_trace_begin("BW1.0", "pipeline");
// ONEF: braid_rt_program_trace_end();
// ONEF-NOT: braid_rt_program_pp_send_f32(
// ONEF: braid_rt_program_collective_start_f32(
// ONEF: }
// Stage 1: the send of BW1.0's gradient, then the start (its layers'
// gradients, the bias and the loss in one bucket).
// ONEF: braid_rt_program_trace_begin("BW1.0", "pipeline");
// ONEF: braid_rt_program_trace_end();
// ONEF-NOT: braid_rt_program_collective_start_f32(
// ONEF: braid_rt_program_pp_send_f32(
// ONEF-NOT: braid_rt_program_trace_begin(
// ONEF: braid_rt_program_collective_start_f32(
// ONEF-NEXT: }
// ONEF-NEXT: braid_rt_program_pp_wait_all(

// OFF-LABEL: void braid_train_step(
// OFF-NOT: braid_rt_program_collective_start_f32(
// OFF: braid_rt_program_pp_wait_all(
// OFF: braid_rt_program_collective_start_f32(

braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = braid.relu %y : tensor<2x4x8xf32>
  braid.yield %z : tensor<2x4x8xf32>
}

func.func @forward(%x: tensor<2x4x8xf32>,
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 8 : i64}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 4 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %b = braid.param "b" {init = #braid.init<normal(0.1)>} : tensor<8xf32>
  %logits = braid.add %h, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
