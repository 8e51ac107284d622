// RUN: braid-opt %s --split-input-file --verify-diagnostics

// Tests that braid.compress names a wire format and marks a sum, and
// that PowerSGD's mark comes with its state names and a positive rank.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @bad_format(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{braid.compress must be "bf16", "fp16" or "powersgd"}}
  %r = braid.all_reduce sum %a on @mesh ["dp"] {braid.compress = "int8"} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @not_a_sum(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{braid.compress marks an all_reduce or reduce_scatter that sums}}
  %r = braid.all_gather %a on @mesh ["dp"] {braid.compress = "bf16", dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @max(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{braid.compress marks an all_reduce or reduce_scatter that sums}}
  %r = braid.all_reduce max %a on @mesh ["dp"] {braid.compress = "bf16"} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @powersgd_without_state(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{braid.compress = "powersgd" goes with braid.powersgd, and only with it}}
  %r = braid.all_reduce sum %a on @mesh ["dp"] {braid.compress = "powersgd"} : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @powersgd_bad_rank(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{braid.powersgd must be {rank = R (positive), q = "name", error = "name"}}}
  %r = braid.all_reduce sum %a on @mesh ["dp"] {braid.compress = "powersgd", braid.powersgd = {rank = 0 : i64, q = "q", error = "e"}} : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
