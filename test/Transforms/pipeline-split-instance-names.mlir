// Tests that a repeat's instance_names name its instances' parameters
// (prefix.<name>.<local>) through braid-pipeline-split, braid-autodiff,
// braid-train-step and braid-eval: the split pieces keep the names of their
// own instances, the gradients and the updates are those of the named
// parameters, braid-partition keeps the names, and braid-eval reads and
// writes them under these names, serially and on a simulated dp=2 mesh
// (gradients equal within 1e-6 relative to the largest element).
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2 layers=1,2 report" | FileCheck %s --check-prefix=SPLIT
// RUN: braid-opt %s --braid-pipeline-split="stages=2 layers=1,2" --braid-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: braid-opt %s --braid-pipeline-split="stages=2 layers=1,2" --braid-autodiff --braid-train-step | FileCheck %s --check-prefix=TRAIN
// RUN: braid-opt %s --braid-autodiff -o %t.grad.mlir
// RUN: braid-eval %t.grad.mlir --entry forward_grad --save-weights %t.w.st --save-outputs %t.g.st
// RUN: %PYTHON -c "from braid import safetensors as st; print(*sorted(st.load('%t.w.st')))" | FileCheck %s --check-prefix=WEIGHTS
// RUN: %PYTHON -c "from braid import safetensors as st; print(*sorted(st.load('%t.g.st')))" | FileCheck %s --check-prefix=GRADS
// RUN: braid-eval %t.grad.mlir --entry forward_grad --save-inputs %t.in.st
// RUN: braid-opt %s --braid-autodiff --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp.mlir
// RUN: FileCheck %s --check-prefix=SPMD < %t.dp.mlir
// RUN: braid-eval %t.dp.mlir --mesh mesh --entry forward_grad --weights %t.w.st --inputs %t.in.st --save-outputs %t.gdp.st
// RUN: %PYTHON -c "from braid import safetensors as st; print(*sorted(st.load('%t.gdp.st')))" | FileCheck %s --check-prefix=GRADS
// RUN: %PYTHON -c "from braid import safetensors as st; import numpy as np; a, b = st.load('%t.g.st'), st.load('%t.gdp.st'); d = [np.abs(st.to_numpy(a[k]) - st.to_numpy(b[k])).max() / np.abs(st.to_numpy(a[k])).max() for k in a]; assert max(d) < 1e-6, d"
// RUN: braid-opt %s --braid-autodiff --braid-train-step -o %t.train.mlir
// RUN: braid-eval %t.train.mlir --steps 2 --weights %t.w.st --save-weights %t.trained.st
// RUN: %PYTHON -c "from braid import safetensors as st; print(*sorted(st.load('%t.trained.st')))" | FileCheck %s --check-prefix=WEIGHTS

// SPLIT: 0 0 {{.*}} (1 ops outside layers), h.first
// SPLIT-NEXT: 1 1 {{.*}} h.second-third, (2 ops outside layers)
// SPLIT-NEXT: chunk 0 parameters: h.first.w w_in
// SPLIT-NEXT: chunk 1 parameters: h.second.w h.third.w w_out
// SPLIT-LABEL: func.func @forward
// SPLIT: braid.repeat @block(%{{.*}}) {braid.chunk = 0 : i64, count = 1 : i64, instance_names = ["first"], prefix = "h"}
// SPLIT: braid.repeat @block(%{{.*}}) {braid.chunk = 1 : i64, count = 2 : i64, first = 1 : i64, instance_names = ["second", "third"], prefix = "h"}

// The forward, B and W repeats of each piece keep its names, and the
// gradient results say which instances they stack.
// GRAD-LABEL: func.func @forward_grad
// GRAD-SAME: {braid.gradient_of = "h.{}.w", braid.instance_names = ["second", "third"], braid.instances = array<i64: 1, 2>}
// GRAD-SAME: {braid.gradient_of = "h.{}.w", braid.instance_names = ["first"], braid.instances = array<i64: 0, 1>}
// GRAD: braid.repeat @block.F({{.*}}instance_names = ["first"], prefix = "h"}
// GRAD: braid.repeat @block.F({{.*}}first = 1 : i64, instance_names = ["second", "third"], prefix = "h"}
// GRAD: braid.repeat @block.B({{.*}}first = 1 : i64, instance_names = ["second", "third"], prefix = "h", reverse}
// GRAD: braid.repeat @block.W({{.*}}first = 1 : i64, instance_names = ["second", "third"], prefix = "h"}
// GRAD: braid.repeat @block.B({{.*}}instance_names = ["first"], prefix = "h", reverse}
// GRAD: braid.repeat @block.W({{.*}}instance_names = ["first"], prefix = "h"}

// Each piece's update names its own instances.
// TRAIN-DAG: braid.repeat @train_step.h.1.update({{.*}}) {carried = 3 : i64, count = 2 : i64, first = 1 : i64, instance_names = ["second", "third"], prefix = "h"}
// TRAIN-DAG: braid.repeat @train_step.h.update({{.*}}) {carried = 3 : i64, count = 1 : i64, instance_names = ["first"], prefix = "h"}

// SPMD-LABEL: func.func @forward_grad
// SPMD: braid.repeat @block.F({{.*}}instance_names = ["first", "second", "third"], prefix = "h"}
// SPMD: braid.repeat @block.B({{.*}}instance_names = ["first", "second", "third"], prefix = "h", reverse}
// SPMD: braid.repeat @block.W({{.*}}instance_names = ["first", "second", "third"], prefix = "h"}

// WEIGHTS: h.first.w h.second.w h.third.w w_in w_out
// GRADS: h.first.w h.second.w h.third.w result0 w_in w_out

braid.layer @block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = braid.relu %y : tensor<4x8xf32>
  braid.yield %z : tensor<4x8xf32>
}

func.func @forward(%x: tensor<4x4xf32>, %labels: tensor<4xi32> {braid.range = 64 : i64}) -> tensor<f32> {
  %w_in = braid.param "w_in" {init = #braid.init<normal(0.1)>} : tensor<4x8xf32>
  %h0 = braid.matmul %x, %w_in : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = braid.repeat @block(%h0) {prefix = "h", count = 3 : i64, instance_names = ["first", "second", "third"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w_out = braid.param "w_out" {init = #braid.init<normal(0.1)>} : tensor<8x64xf32>
  %logits = braid.matmul %h, %w_out : (tensor<4x8xf32>, tensor<8x64xf32>) -> tensor<4x64xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<4x64xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
