// What the importer emits for torchvision's VisionTransformer of
// python/tests/vit_torch.py (image 32, patch 8, 2 layers, 2 heads of 16,
// batch 4), from
//   PYTHONPATH=python:python/tests python3 -m braid.torch vit_torch:make \
//     --loss vit_torch:loss --batch '{"x": {"shape": [4, 3, 32, 32],
//     "dtype": "float32"}, "labels": {"shape": [4], "high": 10}}'
// nn.MultiheadAttention's fused in_proj [96, 32] is cut by braid.slice into
// q, k and v in [T, B, H, D]; after attention the heads are merged with the
// batch ([17, 4, 2, 16] -> [17, 8, 16] -> [68, 32]) before out_proj. Used by
// Transforms/shard-multihead-attention.mlir.
braid.layer @encoder_layers(%x: tensor<4x17x32xf32>) -> tensor<4x17x32xf32> {
  %ln_1.weight = braid.param "ln_1.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %ln_1.bias = braid.param "ln_1.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %ln = braid.layer_norm %x, %ln_1.weight, %ln_1.bias {epsilon = 1.0e-06 : f64} : (tensor<4x17x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x17x32xf32>
  %transpose = braid.transpose %ln {permutation = array<i64: 1, 0, 2>} : (tensor<4x17x32xf32>) -> tensor<17x4x32xf32>
  %self_attention.in_proj_weight = braid.param "self_attention.in_proj_weight" {init = #braid.init<normal(0.02)>} : tensor<96x32xf32>
  %mm = braid.matmul %transpose, %self_attention.in_proj_weight {transpose_b} : (tensor<17x4x32xf32>, tensor<96x32xf32>) -> tensor<17x4x96xf32>
  %self_attention.in_proj_bias = braid.param "self_attention.in_proj_bias" {init = #braid.init<zeros>} : tensor<96xf32>
  %add = braid.add %mm, %self_attention.in_proj_bias : (tensor<17x4x96xf32>, tensor<96xf32>) -> tensor<17x4x96xf32>
  %slice = braid.slice %add {start = array<i64: 0, 0, 0>, limit = array<i64: 17, 4, 32>} : (tensor<17x4x96xf32>) -> tensor<17x4x32xf32>
  %reshape = braid.reshape %slice : (tensor<17x4x32xf32>) -> tensor<17x4x2x16xf32>
  %transpose_1 = braid.transpose %reshape {permutation = array<i64: 1, 0, 2, 3>} : (tensor<17x4x2x16xf32>) -> tensor<4x17x2x16xf32>
  %slice_1 = braid.slice %add {start = array<i64: 0, 0, 32>, limit = array<i64: 17, 4, 64>} : (tensor<17x4x96xf32>) -> tensor<17x4x32xf32>
  %reshape_1 = braid.reshape %slice_1 : (tensor<17x4x32xf32>) -> tensor<17x4x2x16xf32>
  %transpose_2 = braid.transpose %reshape_1 {permutation = array<i64: 1, 0, 2, 3>} : (tensor<17x4x2x16xf32>) -> tensor<4x17x2x16xf32>
  %slice_2 = braid.slice %add {start = array<i64: 0, 0, 64>, limit = array<i64: 17, 4, 96>} : (tensor<17x4x96xf32>) -> tensor<17x4x32xf32>
  %reshape_2 = braid.reshape %slice_2 : (tensor<17x4x32xf32>) -> tensor<17x4x2x16xf32>
  %transpose_3 = braid.transpose %reshape_2 {permutation = array<i64: 1, 0, 2, 3>} : (tensor<17x4x2x16xf32>) -> tensor<4x17x2x16xf32>
  %attn = braid.attention %transpose_1, %transpose_2, %transpose_3 {scale = 0.25 : f64} : (tensor<4x17x2x16xf32>, tensor<4x17x2x16xf32>, tensor<4x17x2x16xf32>) -> tensor<4x17x2x16xf32>
  %transpose_4 = braid.transpose %attn {permutation = array<i64: 1, 0, 2, 3>} : (tensor<4x17x2x16xf32>) -> tensor<17x4x2x16xf32>
  %reshape_3 = braid.reshape %transpose_4 : (tensor<17x4x2x16xf32>) -> tensor<17x8x16xf32>
  %reshape_4 = braid.reshape %reshape_3 : (tensor<17x8x16xf32>) -> tensor<68x32xf32>
  %self_attention.out_proj.weight = braid.param "self_attention.out_proj.weight" {init = #braid.init<normal(0.02)>} : tensor<32x32xf32>
  %mm_1 = braid.matmul %reshape_4, %self_attention.out_proj.weight {transpose_b} : (tensor<68x32xf32>, tensor<32x32xf32>) -> tensor<68x32xf32>
  %self_attention.out_proj.bias = braid.param "self_attention.out_proj.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %add_1 = braid.add %mm_1, %self_attention.out_proj.bias : (tensor<68x32xf32>, tensor<32xf32>) -> tensor<68x32xf32>
  %reshape_5 = braid.reshape %add_1 : (tensor<68x32xf32>) -> tensor<17x4x32xf32>
  %transpose_5 = braid.transpose %reshape_5 {permutation = array<i64: 1, 0, 2>} : (tensor<17x4x32xf32>) -> tensor<4x17x32xf32>
  %add_2 = braid.add %transpose_5, %x : (tensor<4x17x32xf32>, tensor<4x17x32xf32>) -> tensor<4x17x32xf32>
  %ln_2.weight = braid.param "ln_2.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %ln_2.bias = braid.param "ln_2.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %ln_1 = braid.layer_norm %add_2, %ln_2.weight, %ln_2.bias {epsilon = 1.0e-06 : f64} : (tensor<4x17x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x17x32xf32>
  %mlp.0.weight = braid.param "mlp.0.weight" {init = #braid.init<normal(0.02)>} : tensor<64x32xf32>
  %mm_2 = braid.matmul %ln_1, %mlp.0.weight {transpose_b} : (tensor<4x17x32xf32>, tensor<64x32xf32>) -> tensor<4x17x64xf32>
  %mlp.0.bias = braid.param "mlp.0.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %add_3 = braid.add %mm_2, %mlp.0.bias : (tensor<4x17x64xf32>, tensor<64xf32>) -> tensor<4x17x64xf32>
  %gelu = braid.gelu exact %add_3 : tensor<4x17x64xf32>
  %mlp.3.weight = braid.param "mlp.3.weight" {init = #braid.init<normal(0.02)>} : tensor<32x64xf32>
  %mm_3 = braid.matmul %gelu, %mlp.3.weight {transpose_b} : (tensor<4x17x64xf32>, tensor<32x64xf32>) -> tensor<4x17x32xf32>
  %mlp.3.bias = braid.param "mlp.3.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %add_4 = braid.add %mm_3, %mlp.3.bias : (tensor<4x17x32xf32>, tensor<32xf32>) -> tensor<4x17x32xf32>
  %add_5 = braid.add %add_2, %add_4 : (tensor<4x17x32xf32>, tensor<4x17x32xf32>) -> tensor<4x17x32xf32>
  braid.yield %add_5 : tensor<4x17x32xf32>
}

func.func @forward(%x: tensor<4x3x32x32xf32> {braid.name = "x"}, %labels: tensor<4xi64> {braid.name = "labels", braid.range = 10 : i64}) -> tensor<f32> {
  %encoder.ln.weight = braid.param "encoder.ln.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %encoder.ln.bias = braid.param "encoder.ln.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %class_token = braid.param "class_token" {init = #braid.init<normal(0.02)>} : tensor<1x1x32xf32>
  %bcast = braid.broadcast %class_token : (tensor<1x1x32xf32>) -> tensor<4x1x32xf32>
  %reshape = braid.reshape %x : (tensor<4x3x32x32xf32>) -> tensor<4x3x4x8x4x8xf32>
  %transpose = braid.transpose %reshape {permutation = array<i64: 0, 2, 4, 1, 3, 5>} : (tensor<4x3x4x8x4x8xf32>) -> tensor<4x4x4x3x8x8xf32>
  %patches = braid.reshape %transpose : (tensor<4x4x4x3x8x8xf32>) -> tensor<4x16x192xf32>
  %conv_proj.weight = braid.param "conv_proj.weight" {init = #braid.init<normal(0.02)>} : tensor<32x3x8x8xf32>
  %reshape_1 = braid.reshape %conv_proj.weight : (tensor<32x3x8x8xf32>) -> tensor<32x192xf32>
  %mm = braid.matmul %patches, %reshape_1 {transpose_b} : (tensor<4x16x192xf32>, tensor<32x192xf32>) -> tensor<4x16x32xf32>
  %conv_proj.bias = braid.param "conv_proj.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %add = braid.add %mm, %conv_proj.bias : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  %concat = braid.concat %bcast, %add {axis = 1 : i64} : (tensor<4x1x32xf32>, tensor<4x16x32xf32>) -> tensor<4x17x32xf32>
  %encoder.pos_embedding = braid.param "encoder.pos_embedding" {init = #braid.init<normal(0.02)>} : tensor<1x17x32xf32>
  %add_1 = braid.add %concat, %encoder.pos_embedding : (tensor<4x17x32xf32>, tensor<1x17x32xf32>) -> tensor<4x17x32xf32>
  %h = braid.repeat @encoder_layers(%add_1) {prefix = "encoder.layers", count = 2 : i64, instance_names = ["encoder_layer_0", "encoder_layer_1"]} : (tensor<4x17x32xf32>) -> tensor<4x17x32xf32>
  %ln = braid.layer_norm %h, %encoder.ln.weight, %encoder.ln.bias {epsilon = 1.0e-06 : f64} : (tensor<4x17x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x17x32xf32>
  %slice = braid.slice %ln {start = array<i64: 0, 0, 0>, limit = array<i64: 4, 1, 32>} : (tensor<4x17x32xf32>) -> tensor<4x1x32xf32>
  %reshape_2 = braid.reshape %slice : (tensor<4x1x32xf32>) -> tensor<4x32xf32>
  %heads.head.weight = braid.param "heads.head.weight" {init = #braid.init<normal(0.02)>} : tensor<10x32xf32>
  %mm_1 = braid.matmul %reshape_2, %heads.head.weight {transpose_b} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
  %heads.head.bias = braid.param "heads.head.bias" {init = #braid.init<zeros>} : tensor<10xf32>
  %add_2 = braid.add %mm_1, %heads.head.bias : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %loss = braid.cross_entropy %add_2, %labels : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
