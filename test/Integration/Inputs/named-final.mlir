// A forward function whose arguments happen to be named like
// defer-validation's inputs (braidc-defer-validation.mlir).
func.func @forward(%final: tensor<4xf32> {braid.name = "final"}, %previous_step: tensor<i64> {braid.name = "previous_step", braid.range = 8 : i64}) -> tensor<f32> {
  %s = braid.sum_squares %final : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
