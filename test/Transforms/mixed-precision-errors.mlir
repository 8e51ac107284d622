// RUN: braid-opt %s --split-input-file --verify-diagnostics --braid-mixed-precision="precision=bf16-mixed"

// A training step already has its optimizer: the pass runs before it.
func.func @step(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>,
                %lr: tensor<f32>, %t: tensor<i64>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @below {{braid-mixed-precision runs on a forward program, before braid-autodiff and braid-train-step}}
  %np, %nm, %nv = braid.adamw_update %p, %g, %m, %v, %lr, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %np : tensor<4xf32>
}

// -----

// Other float types are not silently mixed with bf16.
func.func @f64(%x: tensor<4xf64>) -> tensor<4xf64> {
  // expected-error @below {{has a 'f64' result; braid-mixed-precision takes an f32 program}}
  %y = braid.add %x, %x : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %y : tensor<4xf64>
}
