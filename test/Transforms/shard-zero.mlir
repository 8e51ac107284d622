// Tests ZeRO through braid-shard: optimizer state split over dp, stored
// and updated in shares; at stage 3 the parameters too, gathered before
// their use in the forward (F) and the backward (B).
//
// RUN: %PYTHON -m braid.models mlp --layers 1 --hidden 8 --vocab 4 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 zero=1" --braid-propagate-sharding --braid-partition | FileCheck %s --check-prefix=ZERO1
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition | FileCheck %s --check-prefix=ZERO3

// ZERO1: braid.param "head.weight.adamw.m" {block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>, {{.*}}state} : tensor<4x4xf32>
// ZERO1: braid.store_param "head.weight.adamw.m", %{{.*}} : tensor<4x4xf32>

// ZERO3-LABEL: braid.layer @layer.F
// ZERO3: %[[W:.*]] = braid.param "fc.weight" {block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>
// ZERO3: braid.all_gather %[[W]] on @mesh ["dp"] {{{.*}}dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// ZERO3-LABEL: braid.layer @layer.B
// ZERO3: %[[WB:.*]] = braid.param "fc.weight" {block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>
// ZERO3: braid.all_gather %[[WB]] on @mesh ["dp"] {{{.*}}dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
