// RUN: braid-opt %s --split-input-file --verify-diagnostics

// Tests that braid.compress names a wire format and marks a sum.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @bad_format(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{braid.compress must be "bf16" or "fp16"}}
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
