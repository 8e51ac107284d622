func.func private @external(%x: tensor<2xf32>) -> tensor<2xf32>

func.func @twice(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = braid.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

func.func @forward(%x: tensor<2xf32> {braid.name = "x"}) -> tensor<2xf32> {
  %y = call @twice(%x) : (tensor<2xf32>) -> tensor<2xf32>
  %z = call @twice(%y) : (tensor<2xf32>) -> tensor<2xf32>
  return %z : tensor<2xf32>
}

func.func @bad(%x: tensor<2xf32> {braid.name = "x"}) -> tensor<2xf32> {
  %y = call @external(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
