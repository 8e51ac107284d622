// Two arguments of one braid.name: they would be made, read and fed as one.
func.func @forward(%a: tensor<2xf32> {braid.name = "x"}, %b: tensor<2xf32> {braid.name = "x"}) -> tensor<f32> {
  %d = braid.sub %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s = braid.reduce sum %d {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
