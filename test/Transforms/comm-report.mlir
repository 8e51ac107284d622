// RUN: braid-opt %s --braid-propagate-sharding --braid-partition --braid-comm-report -o /dev/null | FileCheck %s
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 12288 --heads 96 --seq 2048 --vocab 512 --batch 1 -o %t.gpt3.mlir
// RUN: braid-opt %t.gpt3.mlir --braid-autodiff --braid-shard="tp=8" --braid-propagate-sharding --braid-partition --braid-comm-report="alpha=0 bandwidth=1" -o /dev/null | FileCheck %s --check-prefix=GPT3

// Tests the report of Megatron's MLP on tp = 2: one all_reduce of the
// 4 x 8 f32 output (128 bytes), ring time 2(n-1)a + 2(n-1)/n S/B =
// 2 * 5e-6 + 128 / 1e11 s, caused by the return needing the row-parallel
// matmul's pending sum.
// CHECK: braid-comm-report: @mlp (alpha 5e-06 s, bandwidth 1e+11 B/s)
// CHECK: @mlp - all_reduce tp 2 128 128 1.000e-05 1 'func.return' at {{.*}} needs the value of 'braid.matmul' at loc({{.*}}:[[@LINE+10]]:8)
// CHECK: total all sent 128 bytes 32 elements 1.000e-05 s
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf32>
  %w1s = braid.shard %w1 : tensor<8x16xf32> to #braid.sharding<@mesh, [[], ["tp"]]>
  %h = braid.matmul %x, %w1s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = braid.gelu tanh %h : tensor<4x16xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %w2s = braid.shard %w2 : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %y = braid.matmul %a, %w2s : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Tests the tensor-parallel volume of a GPT-3 175B layer (h = 12288,
// s = 2048, b = 1) on tp = 8 against Megatron's closed form: forward and
// backward move 8bsh(t-1)/t = 176160768 elements per device, half in F (two
// all_reduces of bsh elements, each 2(t-1)/t bsh) and half in B. With
// alpha = 0 and a bandwidth of 1 B/s the time equals the bytes sent.
// GPT3: total @block.B phase B axis tp sent 352321536 bytes 88080384 elements 3.523e+08 s
// GPT3: total @block.F phase F axis tp sent 352321536 bytes 88080384 elements 3.523e+08 s
