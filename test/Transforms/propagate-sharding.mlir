// RUN: braid-opt %s -split-input-file --braid-propagate-sharding | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-propagate-sharding=print-provenance -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHY

// Tests propagation through a Megatron MLP: the batch split from the
// argument and the column/row splits from the constraints meet in the
// matmuls; the contraction (a reduction factor) leaves the result split over
// dp only. Every value gets a sharding.

// CHECK-LABEL: func.func @mlp
// CHECK: braid.param "w1" {braid.shardings = [#braid.sharding<@mesh, {{\[}}[], ["tp"]]>]
// CHECK: braid.matmul {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}["dp"], ["tp"]]>]}
// CHECK: braid.gelu tanh {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}["dp"], ["tp"]]>]}
// CHECK: braid.matmul {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}["dp"], []]>]}
// CHECK: braid.constant {braid.shardings = [#braid.sharding<@mesh, {{\[}}[]]>]}

// WHY: remark: result #0 is #braid.sharding<@mesh, {{\[}}[], ["tp"]]>: the constraint 'braid.shard' at
// WHY: remark: result #0 is #braid.sharding<@mesh, {{\[}}["dp"], ["tp"]]>: propagated through 'braid.matmul' at {{.*}}:{{[0-9]+}}:8) from the annotation of argument #0
// WHY: remark: result #0 is #braid.sharding<@mesh, {{\[}}[]]>: propagated through 'braid.add' at
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @mlp(%x: tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"], []]>}) -> tensor<4x8xf32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf32>
  %w1s = braid.shard %w1 : tensor<8x16xf32> to #braid.sharding<@mesh, [[], ["tp"]]>
  %h = braid.matmul %x, %w1s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = braid.gelu tanh %h : tensor<4x16xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %w2s = braid.shard %w2 : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %y = braid.matmul %a, %w2s : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %c = braid.constant dense<1.0> : tensor<8xf32>
  %z = braid.add %y, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests conflict resolution: two constraints ask for the columns of %h to
// be split over different axes; the higher priority wins.

// CHECK-LABEL: func.func @conflict
// CHECK: braid.add {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}[], ["tp"]]>]}
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @conflict(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %as = braid.shard %a : tensor<4x8xf32> to #braid.sharding<@mesh, [[], ["dp"]]>
  %bs = braid.shard %b : tensor<4x8xf32> to #braid.sharding<@mesh, [[], ["tp"]]> {priority = 1 : i64}
  %h = braid.add %as, %bs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %h : tensor<4x8xf32>
}

// -----

// Tests that a normalised dimension is never sharded, even when asked for
// upstream: layer_norm keeps its last dimension whole.

// CHECK-LABEL: func.func @blocked
// CHECK: braid.layer_norm {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}[], []]>]}
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @blocked(%x: tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = braid.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}


// -----

// Tests that a stronger split reaching a value after a weaker one displaces
// it. ZeRO-3's split of the weight over dp (priority -1) reaches %h first,
// through the matmul's contraction, in the forward sweep; the batch split of
// the labels (priority 0) reaches it later, through the cross-entropy and the
// matmul, and takes dp: %h stays split along the batch, so no activation is
// gathered over dp (GPT's head under ZeRO-3 did, before).

// CHECK-LABEL: func.func @stronger_later
// CHECK: braid.gelu tanh {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}["dp"], []]>]}
// CHECK: braid.matmul {{.*}} {braid.shardings = [#braid.sharding<@mesh, {{\[}}["dp"], []]>]}

// WHY: remark: result #0 is #braid.sharding<@mesh, {{\[}}["dp"], []]>: propagated through 'braid.matmul' at {{.*}}:{{[0-9]+}}:8) from the annotation of argument #1
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @stronger_later(%x: tensor<4x8xf32>, %labels: tensor<4xi32> {braid.sharding = #braid.sharding<@mesh, [["dp"]]>}) -> tensor<f32> {
  %h = braid.gelu tanh %x : tensor<4x8xf32>
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<8x6xf32>
  %ws = braid.shard %w : tensor<8x6xf32> to #braid.sharding<@mesh, [["dp"], []]> {priority = -1 : i64}
  %l = braid.matmul %h, %ws : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %loss = braid.cross_entropy %l, %labels : (tensor<4x6xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
