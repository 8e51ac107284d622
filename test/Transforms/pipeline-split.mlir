// Tests that braid-pipeline-split places layer instances and the ops outside
// layers into chunks, balanced by forward FLOPs or as given, splits repeats
// at chunk boundaries without renumbering instances, and assigns chunks to
// stages in a loop or a V; a chunk may hold no layer where it still runs
// ops outside layers.
//
// Forward FLOPs (CostOpInterface): the input projection 2*4*4*8 + 32 = 288,
// each layer 2*4*8*8 + 32 (matmul) + 32 (relu) = 576, the head
// 2*4*8*64 + 256 = 4352 plus 1 for the loss. Two stages: the head alone
// (4353) is the largest piece, so every layer goes to stage 0 (uneven
// balances better). Three stages: 288 + 3*576 = 2016, 1728, 4353.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2 report" -o /dev/null | FileCheck %s --check-prefix=TWO
// RUN: braid-opt %s --braid-pipeline-split="stages=3 report" | FileCheck %s --check-prefix=THREE
// RUN: braid-opt %s --braid-pipeline-split="stages=2 chunks=2 placement=v layers=1,2,2,1" | FileCheck %s --check-prefix=V
// RUN: braid-opt %s --braid-pipeline-split="stages=3" --braid-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: braid-opt %s --braid-pipeline-split="stages=3" --braid-autodiff --braid-train-step | FileCheck %s --check-prefix=TRAIN
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 chunks=2 layers=0,3,0,3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOOP
// RUN: braid-opt %s --braid-pipeline-split="stages=2 chunks=2 placement=v layers=0,3,3,0 report" | FileCheck %s --check-prefix=EDGES

// TWO: braid-pipeline-split: @forward, 2 chunks on 2 stages (balanced, placement loop)
// TWO-NEXT: chunk stage F FLOPs layers
// TWO-NEXT: 0 0 3744 (1 ops outside layers), h.0-5
// TWO-NEXT: 1 1 4353 (2 ops outside layers)
// TWO-NEXT: chunk 0 parameters: h.0.w h.1.w h.2.w h.3.w h.4.w h.5.w w_in
// TWO-NEXT: chunk 1 parameters: w_out

// THREE: 0 0 2016 (1 ops outside layers), h.0-2
// THREE-NEXT: 1 1 1728 h.3-5
// THREE-NEXT: 2 2 4353 (2 ops outside layers)
// THREE-LABEL: func.func @forward
// THREE-SAME: braid.chunk_stages = array<i64: 0, 1, 2>
// THREE: braid.param "w_in" {braid.chunk = 0 : i64
// THREE: braid.matmul {{.*}}braid.chunk = 0 : i64
// THREE: %[[A:.*]] = braid.repeat @block(%{{.*}}) {braid.chunk = 0 : i64, count = 3 : i64, prefix = "h"}
// THREE: %[[B:.*]] = braid.repeat @block(%[[A]]) {braid.chunk = 1 : i64, count = 3 : i64, first = 3 : i64, prefix = "h"}
// THREE: braid.param "w_out" {braid.chunk = 2 : i64
// THREE: braid.matmul %[[B]], {{.*}}braid.chunk = 2 : i64
// THREE: braid.cross_entropy {{.*}}braid.chunk = 2 : i64

// V-LABEL: func.func @forward
// V-SAME: braid.chunk_stages = array<i64: 0, 1, 1, 0>
// V: braid.repeat @block({{.*}}) {braid.chunk = 0 : i64, count = 1 : i64, prefix = "h"}
// V: braid.repeat @block({{.*}}) {braid.chunk = 1 : i64, count = 2 : i64, first = 1 : i64, prefix = "h"}
// V: braid.repeat @block({{.*}}) {braid.chunk = 2 : i64, count = 2 : i64, first = 3 : i64, prefix = "h"}
// V: braid.repeat @block({{.*}}) {braid.chunk = 3 : i64, count = 1 : i64, first = 5 : i64, prefix = "h"}

// braid-autodiff gives each op of the gradient function its forward op's
// chunk: B and W of the head on chunk 2, of h.3-5 on chunk 1, and so on.
// Layer bodies are shared by the chunks and carry none.
// GRAD: braid.layer @block.F
// GRAD-NOT: braid.chunk
// GRAD: func.func @forward(
// GRAD-LABEL: func.func @forward_grad
// GRAD: braid.cross_entropy_grad {{.*}}braid.chunk = 2 : i64, braid.phase = "B"
// GRAD: braid.matmul {{.*}}braid.chunk = 2 : i64, braid.phase = "W"
// GRAD: braid.repeat @block.B({{.*}}) {braid.chunk = 1 : i64, braid.phase = "B", {{.*}}first = 3 : i64
// GRAD: braid.repeat @block.W({{.*}}) {braid.chunk = 1 : i64, braid.phase = "W", {{.*}}first = 3 : i64
// GRAD: braid.repeat @block.B({{.*}}) {braid.chunk = 0 : i64, braid.phase = "B"
// GRAD: braid.repeat @block.W({{.*}}) {braid.chunk = 0 : i64, braid.phase = "W"
// GRAD: braid.matmul {{.*}}braid.chunk = 0 : i64, braid.phase = "W"

// The training step updates each chunk's instances with their own repeat.
// TRAIN-DAG: braid.layer @train_step.h.update(
// TRAIN-DAG: braid.layer @train_step.h.3.update(
// TRAIN-DAG: braid.repeat @train_step.h.3.update({{.*}}) {carried = 3 : i64, count = 3 : i64, first = 3 : i64, prefix = "h"}
// TRAIN-DAG: braid.repeat @train_step.h.update({{.*}}) {carried = 3 : i64, count = 3 : i64, prefix = "h"}

// A chunk of no layer that still runs ops outside layers: the first chunk
// holds only the input projection, the last only the head (in a V, both on
// stage 0). Chunk 2 of LOOP above would hold nothing.
// LOOP: error: braid-pipeline-split: chunk 2 would run nothing (no layer, and no ops outside layers fall in it); give it at least one layer
// EDGES: braid-pipeline-split: @forward, 4 chunks on 2 stages (as given, placement v)
// EDGES-NEXT: chunk stage F FLOPs layers
// EDGES-NEXT: 0 0 288 (1 ops outside layers)
// EDGES-NEXT: 1 1 1728 h.0-2
// EDGES-NEXT: 2 1 1728 h.3-5
// EDGES-NEXT: 3 0 4353 (2 ops outside layers)
// EDGES-NEXT: chunk 0 parameters: w_in
// EDGES-NEXT: chunk 1 parameters: h.0.w h.1.w h.2.w
// EDGES-NEXT: chunk 2 parameters: h.3.w h.4.w h.5.w
// EDGES-NEXT: chunk 3 parameters: w_out
// EDGES-LABEL: func.func @forward
// EDGES-SAME: braid.chunk_stages = array<i64: 0, 1, 1, 0>
// EDGES: braid.matmul {{.*}}braid.chunk = 0 : i64
// EDGES: braid.repeat @block({{.*}}) {braid.chunk = 1 : i64, count = 3 : i64, prefix = "h"}
// EDGES: braid.repeat @block({{.*}}) {braid.chunk = 2 : i64, count = 3 : i64, first = 3 : i64, prefix = "h"}
// EDGES: braid.matmul {{.*}}braid.chunk = 3 : i64
// EDGES: braid.cross_entropy {{.*}}braid.chunk = 3 : i64

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
