// Tests that braid-shard splits torchvision's nn.MultiheadAttention (as
// braid.torch imports the ViT of python/tests/vit_torch.py) by heads, as
// Megatron-LM does: the fused in_proj [3h, h] is split strided over its q,
// k and v blocks (`blocks = [3, 1]`) and out_proj row-parallel, although
// the heads reach out_proj merged with the batch ([T, B, H, D] ->
// [T, B*H, D] -> [T*B, H*D]): the reshape rule views the merged B*H as B
// blocks of heads. Each attention block then needs one tp all_reduce in
// the forward and one in the backward.
//
// RUN: braid-opt %S/Inputs/vit-mha.mlir --braid-shard="dp=2 tp=2" | FileCheck %s --check-prefix=PLAN
// RUN: braid-opt %S/Inputs/vit-mha.mlir --braid-shard="dp=2 tp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHY
// RUN: braid-opt %S/Inputs/vit-mha.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition | FileCheck %s --check-prefix=SPMD
//
// The training step under tp=2: per block one all_reduce after out_proj and
// one after the MLP in F, one per layer_norm_grad in B, none in W.
// RUN: braid-opt %S/Inputs/vit-mha.mlir --braid-autodiff --braid-train-step="lr=1e-2" -o %t.train.mlir
// RUN: braid-opt %t.train.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition --braid-comm-report -o %t.tp2.mlir > %t.report
// RUN: sed -n '/@train_step (alpha/,$p' %t.report | FileCheck %s --check-prefix=COMM
//
// Numerically (f64, 3 AdamW steps, seed 1): tp2, dp2 x tp2 and dp2 x tp2
// with ZeRO-3 give the serial losses within 1e-12 relative and its
// parameters within 1e-10 (plus 1e-10 absolute, as shard-fused-qkv.mlir:
// the key bias's exact gradient is zero).
// RUN: braid-eval %t.train.mlir --steps 3 --f64 --seed 1 --save-weights %t.w.safetensors > %t.serial
// RUN: braid-eval %t.tp2.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.tp2.w.safetensors > %t.tp2.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.tp2.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.tp2.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dt.mlir
// RUN: braid-eval %t.dt.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.dt.w.safetensors > %t.dt.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.dt.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.dt.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2 tp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-eval %t.z3.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.z3.w.safetensors > %t.z3.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.z3.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z3.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS

// PLAN-LABEL: braid.layer @encoder_layers
// PLAN: braid.param "self_attention.in_proj_weight"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<96x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []], blocks = [3, 1]> {priority = -1 : i64}
// PLAN: braid.param "self_attention.in_proj_bias"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<96xf32> to #braid.sharding<@mesh, {{\[}}["tp"]], blocks = [3]> {priority = -1 : i64}
// PLAN: braid.param "self_attention.out_proj.weight"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]> {priority = -1 : i64}
// PLAN: braid.param "self_attention.out_proj.bias"
// PLAN-NOT: braid.shard
// PLAN: braid.param "mlp.0.weight"

// WHY: remark: 'encoder.layers.*.self_attention.in_proj_weight': column-parallel (dimension 0 in 3 blocks, each over tp): the output of its braid.matmul reaches the matmul with 'self_attention.out_proj.weight' only through ops that keep dimension 0 parallel, cut by slices into 3 blocks, each split (a fused projection)
// WHY: remark: 'encoder.layers.*.self_attention.in_proj_bias': column-parallel bias (dimension 0 in 3 blocks, each over tp)
// WHY: remark: 'encoder.layers.*.self_attention.out_proj.weight': row-parallel (dimension 1 over tp): its matmul sums over the dimension that 'self_attention.in_proj_weight' split

// Each device computes 1 of the 2 heads of its half of the batch; the
// merged [T, B*H, D] holds its head of every image (B blocks of heads).
// The batch is gathered over dp for the [T*B, H*D] reshape, whose T-major
// rows the rule cannot split by B (the dp gather/slice pair per block).
// SPMD-LABEL: braid.layer @encoder_layers
// SPMD-NOT: braid.all_
// SPMD: braid.param "self_attention.in_proj_weight" {block_of = #braid.sharding<@mesh, {{\[}}["tp"], []], blocks = [3, 1]>{{.*}}} : tensor<48x32xf32>
// SPMD-NOT: braid.all_
// SPMD: braid.attention {{.*}} -> tensor<2x17x1x16xf32>
// SPMD-NEXT: braid.transpose
// SPMD-NEXT: braid.all_gather %{{.*}} on @mesh ["dp"] {{.*}} : (tensor<17x2x1x16xf32>) -> tensor<17x4x1x16xf32>
// SPMD-NEXT: braid.reshape %{{.*}} : (tensor<17x4x1x16xf32>) -> tensor<17x4x16xf32>
// SPMD-NEXT: braid.reshape %{{.*}} : (tensor<17x4x16xf32>) -> tensor<68x16xf32>
// SPMD-NEXT: braid.param "self_attention.out_proj.weight" {block_of = #braid.sharding<@mesh, {{\[}}[], ["tp"]]>{{.*}}} : tensor<32x16xf32>
// SPMD-NEXT: braid.matmul {{.*}} -> tensor<68x32xf32>
// SPMD-NOT: braid.all_
// SPMD: braid.all_reduce sum %{{.*}} on @mesh ["tp"]
// SPMD-NOT: braid.all_
// SPMD: braid.all_slice %{{.*}} on @mesh ["dp"]
// SPMD-NOT: braid.all_
// SPMD: braid.all_reduce sum %{{.*}} on @mesh ["tp"]
// SPMD-NOT: braid.all_
// SPMD: braid.yield

// COMM: @encoder_layers.F F all_reduce tp 2 8704 8704 {{.*}} 2 'braid.add'
// COMM-NEXT: @encoder_layers.F F all_reduce tp 2 8704 8704 {{.*}} 2 'braid.add'
// COMM-NEXT: @train_step B all_reduce tp 2 512
// COMM-NEXT: @encoder_layers.B B all_reduce tp 2 8704 8704 {{.*}} 2 'braid.layer_norm_grad'
// COMM-NEXT: @encoder_layers.B B all_reduce tp 2 8704 8704 {{.*}} 2 'braid.layer_norm_grad'
// COMM-NOT: {{^@.* W }}
// COMM-NOT: 8704 8704
// COMM: total all

// LOSS: ok: 3 losses within 1e-12
// WEIGHTS: ok: {{[0-9]+}} tensors
