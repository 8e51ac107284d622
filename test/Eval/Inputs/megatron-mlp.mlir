// A two-layer MLP, serial (@mlp) and hand-partitioned for a dp = 2 x tp = 2
// mesh in the Megatron way (@mlp_spmd): rows of the batch over dp, the
// first weight's columns and the second weight's rows over tp, one
// all_reduce over tp. The two must agree.
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

func.func @mlp(%x: tensor<4x8xf64> {braid.name = "x"}) -> tensor<4x8xf64> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf64>
  %h = braid.matmul %x, %w1 : (tensor<4x8xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>
  %a = braid.gelu tanh %h : tensor<4x16xf64>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x8xf64>
  %y = braid.matmul %a, %w2 : (tensor<4x16xf64>, tensor<16x8xf64>) -> tensor<4x8xf64>
  return %y : tensor<4x8xf64>
}

func.func @mlp_spmd(%x: tensor<2x8xf64> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>})
    -> (tensor<2x8xf64> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>, block_of = #braid.sharding<@mesh, [[], ["tp"]]>} : tensor<8x8xf64>
  %h = braid.matmul %x, %w1 : (tensor<2x8xf64>, tensor<8x8xf64>) -> tensor<2x8xf64>
  %a = braid.gelu tanh %h : tensor<2x8xf64>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>, block_of = #braid.sharding<@mesh, [["tp"], []]>} : tensor<8x8xf64>
  %p = braid.matmul %a, %w2 : (tensor<2x8xf64>, tensor<8x8xf64>) -> tensor<2x8xf64>
  %y = braid.all_reduce sum %p on @mesh ["tp"] : tensor<2x8xf64>
  return %y : tensor<2x8xf64>
}

// The partial sums themselves, returned without the all_reduce: assembling
// a result marked as a partial sum over tp adds the devices' blocks.
func.func @mlp_partial(%x: tensor<2x8xf64> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>})
    -> (tensor<2x8xf64> {braid.block_of = #braid.sharding<@mesh, [["dp"], []], partial = ["tp"]>}) {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>, block_of = #braid.sharding<@mesh, [[], ["tp"]]>} : tensor<8x8xf64>
  %h = braid.matmul %x, %w1 : (tensor<2x8xf64>, tensor<8x8xf64>) -> tensor<2x8xf64>
  %a = braid.gelu tanh %h : tensor<2x8xf64>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>, block_of = #braid.sharding<@mesh, [["tp"], []]>} : tensor<8x8xf64>
  %p = braid.matmul %a, %w2 : (tensor<2x8xf64>, tensor<8x8xf64>) -> tensor<2x8xf64>
  return %p : tensor<2x8xf64>
}

// Every collective, each undoing or redoing a distribution of %x (4 x 8,
// rows over tp): all_gather restores it; reduce_scatter of the replicated
// whole gives tp copies summed (2x); all_to_all moves the split from rows
// to columns; broadcast_from gives every device tp-block 1.
func.func @collectives(%x: tensor<2x8xf64> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["tp"], []]>})
    -> (tensor<4x8xf64>, tensor<2x8xf64> {braid.block_of = #braid.sharding<@mesh, [["tp"], []]>},
        tensor<4x4xf64> {braid.block_of = #braid.sharding<@mesh, [[], ["tp"]]>}, tensor<2x8xf64>,
        tensor<2x8xf64> {braid.block_of = #braid.sharding<@mesh, [["tp"], []]>}) {
  %whole = braid.all_gather %x on @mesh ["tp"] {dim = 0 : i64} : (tensor<2x8xf64>) -> tensor<4x8xf64>
  %twice = braid.reduce_scatter %whole on @mesh ["tp"] {dim = 0 : i64} : (tensor<4x8xf64>) -> tensor<2x8xf64>
  %cols = braid.all_to_all %x on @mesh ["tp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<2x8xf64>) -> tensor<4x4xf64>
  %one = braid.broadcast_from %x on @mesh ["tp"] {root = 1 : i64} : tensor<2x8xf64>
  %max = braid.all_reduce max %x on @mesh ["dp"] : tensor<2x8xf64>
  return %whole, %twice, %cols, %one, %max : tensor<4x8xf64>, tensor<2x8xf64>, tensor<4x4xf64>, tensor<2x8xf64>, tensor<2x8xf64>
}

// Replicas that disagree: each tp device returns its own block as if it
// were the whole (replicated) tensor.
func.func @disagree(%x: tensor<2x8xf64> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["tp"], []]>})
    -> tensor<2x8xf64> {
  return %x : tensor<2x8xf64>
}
