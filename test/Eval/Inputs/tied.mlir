// Two declarations of one parameter that disagree on its type.
func.func @forward() -> (tensor<4xf32>, tensor<2xf32>) {
  %a = braid.param "w" {init = #braid.init<zeros>} : tensor<4xf32>
  %b = braid.param "w" {init = #braid.init<zeros>} : tensor<2xf32>
  return %a, %b : tensor<4xf32>, tensor<2xf32>
}
func.func @tied() -> (tensor<4xf32>, tensor<4xf32>) {
  %a = braid.param "w" {init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %b = braid.param "w" {init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %c = braid.sub %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a, %c : tensor<4xf32>, tensor<4xf32>
}
