// RUN: braid-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{axis 'tp' appears twice}}
braid.mesh @mesh {axes = ["tp", "tp"], shape = array<i64: 2, 2>}

// -----

// expected-error@+1 {{has 2 axis names but 1 sizes}}
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2>}

// -----

// expected-error@+1 {{axis 'dp' has size 0; sizes must be at least 1}}
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 0>}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @not_divisible(%x: tensor<10x4xf32>) {
  // expected-error@+1 {{dimension 0 of size 10 of the value ('tensor<10x4xf32>') is not divisible by mesh axes 'tp' (size 4)}}
  %0 = braid.shard %x : tensor<10x4xf32> to #braid.sharding<@mesh, [["tp"], []]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @not_divisible_two_axes(%x: tensor<12x4xf32>) {
  // expected-error@+1 {{dimension 0 of size 12 of the value ('tensor<12x4xf32>') is not divisible by mesh axes 'dp' (size 2), 'tp' (size 4)}}
  %0 = braid.shard %x : tensor<12x4xf32> to #braid.sharding<@mesh, [["dp", "tp"], []]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @unknown_axis(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{unknown mesh axis 'pp'; @mesh has axes 'dp', 'tp'}}
  %0 = braid.shard %x : tensor<8x4xf32> to #braid.sharding<@mesh, [["pp"], []]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @axis_twice(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{mesh axis 'tp' is used twice in one sharding}}
  %0 = braid.shard %x : tensor<8x4xf32> to #braid.sharding<@mesh, [["tp"], ["tp"]]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @axis_split_and_partial(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{mesh axis 'tp' is used twice in one sharding}}
  %0 = braid.shard %x : tensor<8x4xf32> to #braid.sharding<@mesh, [["tp"], []], partial = ["tp"]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @rank(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{sharding of the value lists 1 dimensions but 'tensor<8x4xf32>' has rank 2}}
  %0 = braid.shard %x : tensor<8x4xf32> to #braid.sharding<@mesh, [["dp"]]>
  return
}

// -----

func.func @no_mesh(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{@nomesh does not name a braid.mesh}}
  %0 = braid.shard %x : tensor<8x4xf32> to #braid.sharding<@nomesh, [[], []]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
// expected-error@+1 {{dimension 1 of size 6 of argument #0 ('tensor<8x6xf32>') is not divisible by mesh axes 'tp' (size 4)}}
func.func @arg(%x: tensor<8x6xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}) {
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @gather_shape(%x: tensor<4x16xf32>) {
  // expected-error@+1 {{result type 'tensor<4x32xf32>' does not match the inferred type 'tensor<4x64xf32>'}}
  %0 = braid.all_gather %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x32xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @scatter_divisible(%x: tensor<4x6xf32>) {
  // expected-error@+1 {{dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = braid.reduce_scatter %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @collective_axis(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{unknown mesh axis 'sp'; @mesh has axes 'dp', 'tp'}}
  %0 = braid.all_reduce sum %x on @mesh ["sp"] : tensor<4x8xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @collective_axis_twice(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{mesh axis 'tp' is listed twice}}
  %0 = braid.all_reduce sum %x on @mesh ["tp", "tp"] : tensor<4x8xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @collective_mean(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{reduces with sum or max}}
  %0 = braid.all_reduce mean %x on @mesh ["tp"] : tensor<4x8xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @all_to_all_dim(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{split_dim 2 is out of range for rank 2; expected 0 <= split_dim < 2}}
  %0 = braid.all_to_all %x on @mesh ["tp"] {split_dim = 2 : i64, concat_dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @broadcast_root(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{root 2 is not a position in a group of 2}}
  %0 = braid.broadcast_from %x on @mesh ["dp"] {root = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @param_block(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{unknown mesh axis 'xp'; @mesh has axes 'dp', 'tp'}}
  %w = braid.param "w" {init = #braid.init<zeros>, block_of = #braid.sharding<@mesh, [["xp"], []]>} : tensor<4x8xf32>
  return
}

// -----

func.func @mesh_nested() {
  // expected-error@+1 {{expects parent op 'builtin.module'}}
  braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @start_gather_type(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{result type 'tensor<4x16xf32>' does not match the inferred type 'tensor<4x32xf32>'}}
  %0 = braid.all_gather_start %x on @mesh ["tp"] {dim = 1 : i64} : tensor<4x8xf32> -> !braid.future<tensor<4x16xf32>>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @start_scatter_divisible(%x: tensor<4x6xf32>) {
  // expected-error@+1 {{dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = braid.reduce_scatter_start %x on @mesh ["tp"] {dim = 1 : i64} : tensor<4x6xf32> -> !braid.future<tensor<4x1xf32>>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @start_reduce_type(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{result type 'tensor<4x4xf32>' must equal the input type 'tensor<4x8xf32>'}}
  %0 = braid.all_reduce_start sum %x on @mesh ["tp"] : tensor<4x8xf32> -> !braid.future<tensor<4x4xf32>>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @start_axis_twice(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{mesh axis 'tp' is listed twice}}
  %0 = braid.all_to_all_start %x on @mesh ["tp", "tp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x8xf32> -> !braid.future<tensor<16x2xf32>>
  return
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @start_root(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{root 3 is not a position in a group of 2}}
  %0 = braid.broadcast_from_start %x on @mesh ["dp"] {root = 3 : i64} : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  return
}

// -----

func.func @start_unknown_mesh(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{@nomesh does not name a braid.mesh}}
  %0 = braid.all_reduce_start sum %x on @nomesh ["tp"] : tensor<4x8xf32> -> !braid.future<tensor<4x8xf32>>
  return
}

// -----

func.func @wait_type(%f: !braid.future<tensor<4x8xf32>>) -> tensor<4x4xf32> {
  // expected-error@+1 {{'braid.wait' op failed to verify that result is the future's tensor}}
  %0 = "braid.wait"(%f) : (!braid.future<tensor<4x8xf32>>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @vocab_half(%t: tensor<8x4xf32>, %ids: tensor<3xi32>) -> tensor<3x4xf32> {
  // expected-error@+1 {{needs both mesh and vocab_axes (non-empty), or neither}}
  %0 = braid.embedding %t, %ids {mesh = @mesh} : (tensor<8x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @vocab_axis(%l: tensor<3x8xf32>, %labels: tensor<3xi32>) -> tensor<f32> {
  // expected-error@+1 {{unknown mesh axis 'xp'}}
  %0 = braid.cross_entropy %l, %labels {mesh = @mesh, vocab_axes = ["xp"]} : (tensor<3x8xf32>, tensor<3xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @vocab_mesh(%ids: tensor<3xi32>, %g: tensor<3x4xf32>) -> tensor<8x4xf32> {
  // expected-error@+1 {{@nomesh does not name a braid.mesh}}
  %0 = braid.embedding_grad %ids, %g {mesh = @nomesh, vocab_axes = ["tp"]} : (tensor<3xi32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @strided_not_divisible(%x: tensor<6x4xf32>) {
  // expected-error@+1 {{dimension 0 of size 6 of the value ('tensor<6x4xf32>') is not divisible by 3 blocks times mesh axes 'tp' (size 4)}}
  %0 = braid.shard %x : tensor<6x4xf32> to #braid.sharding<@mesh, [["tp"], []], blocks = [3, 1]>
  return
}

// -----

braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @blocks_unsplit(%x: tensor<6x4xf32>) {
  // expected-error@+1 {{dimension 1 has 2 blocks but is not split over any axis}}
  %0 = braid.shard %x : tensor<6x4xf32> to #braid.sharding<@mesh, [["tp"], []], blocks = [3, 2]>
  return
}

// -----

braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @blocks_count(%x: tensor<6x4xf32>) {
  // expected-error@+1 {{blocks lists 1 counts for 2 dimensions}}
  %0 = braid.shard %x : tensor<6x4xf32> to #braid.sharding<@mesh, [["tp"], []], blocks = [3]>
  return
}

// -----

braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @blocks_ones(%x: tensor<6x4xf32>) {
  // expected-error@+1 {{blocks of 1 everywhere: omit them}}
  %0 = braid.shard %x : tensor<6x4xf32> to #braid.sharding<@mesh, [["tp"], []], blocks = [1, 1]>
  return
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
braid.layer @carries(%f: !braid.future<tensor<4xf32>>) -> !braid.future<tensor<4xf32>> {
  %x = braid.wait %f : !braid.future<tensor<4xf32>>
  %g = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<4xf32> -> !braid.future<tensor<4xf32>>
  braid.yield %g : !braid.future<tensor<4xf32>>
}
func.func @repeat_carried_future(%x: tensor<4xf32>) {
  %f = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<4xf32> -> !braid.future<tensor<4xf32>>
  // expected-error@+1 {{result #0 is a carried future, which the last instance drops; it must have no uses}}
  %0 = braid.repeat @carries(%f) {count = 2 : i64} : (!braid.future<tensor<4xf32>>) -> !braid.future<tensor<4xf32>>
  %y = braid.wait %0 : !braid.future<tensor<4xf32>>
  return
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
braid.layer @takes(%f: !braid.future<tensor<4xf32>>) -> tensor<4xf32> {
  %x = braid.wait %f : !braid.future<tensor<4xf32>>
  braid.yield %x : tensor<4xf32>
}
func.func @repeat_stacked_future(%x: tensor<2x4xf32>) {
  %f = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<2x4xf32> -> !braid.future<tensor<2x4xf32>>
  // expected-error@+1 {{layer @takes takes a future as a stacked operand; only carried operands may be futures}}
  %0 = braid.repeat @takes(%f) {count = 2 : i64, carried = 0 : i64} : (!braid.future<tensor<2x4xf32>>) -> tensor<2x4xf32>
  return
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
braid.layer @reduced(%x: tensor<4xf32>) -> !braid.future<tensor<4xf32>> {
  %f = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<4xf32> -> !braid.future<tensor<4xf32>>
  braid.yield %f : !braid.future<tensor<4xf32>>
}
func.func @repeat_future_unstacked(%xs: tensor<2x4xf32>) {
  // expected-error@+1 {{result types do not match layer @reduced; expected ('!braid.future<tensor<2x4xf32>>')}}
  %0 = braid.repeat @reduced(%xs) {count = 2 : i64, carried = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}
