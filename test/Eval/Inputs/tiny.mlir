// A two-parameter model used by the braid-eval error tests.
braid.layer @block(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.1)>} : tensor<4x4xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  braid.yield %y : tensor<2x4xf32>
}
func.func @forward(%ids: tensor<2xi32> {braid.name = "ids", braid.range = 8 : i64},
                   %labels: tensor<2xi32> {braid.name = "labels", braid.range = 4 : i64}) -> tensor<f32> {
  %t = braid.param "table" {init = #braid.init<normal(1.0)>} : tensor<8x4xf32>
  %x = braid.embedding %t, %ids : (tensor<8x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
  %h = braid.repeat @block(%x) {prefix = "h", count = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = braid.cross_entropy %h, %labels : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
func.func @unranged(%ids: tensor<2xi32>) -> tensor<2xi32> {
  return %ids : tensor<2xi32>
}
