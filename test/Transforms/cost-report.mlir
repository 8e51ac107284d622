// Tests that braid-cost-report counts a GPT layer's matrix-product FLOPs as
// the closed forms of Qi et al. 2023, Table 1, with s = 16, b = 2, h = 64:
//   F = sbh(24h + 4s) = 3276800, B = sbh(24h + 8s) = 3407872,
//   W = 24sbh^2 = 3145728,
// and that recomputation shrinks the activations saved per layer (while B
// grows by the recomputed forward). In units of one [b, s, h] f32 tensor
// (8192 bytes), a layer saves: its input, ln_1's output, q, k, v, the
// attention output, the residual after attention, ln_2's output, and the
// MLP activation before and after gelu (4 units each): 16 units. Selective
// recomputation drops the attention output (15); full keeps the input (1).
//
// RUN: %PYTHON -m braid.models gpt --layers 3 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 2 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-cost-report -o /dev/null | FileCheck %s --check-prefix=NONE
// RUN: braid-opt %t.mlir --braid-autodiff=recompute=selective --braid-cost-report -o /dev/null | FileCheck %s --check-prefix=SELECTIVE
// RUN: braid-opt %t.mlir --braid-autodiff=recompute=full --braid-cost-report -o /dev/null | FileCheck %s --check-prefix=FULL
// RUN: not braid-opt %t.mlir --braid-cost-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOGRAD

// NONE: layer instances F matmul FLOPs B matmul FLOPs W matmul FLOPs all FLOPs saved act. bytes
// NONE-NEXT: h (@block) 3 3276800 3407872 3145728 {{[0-9]+}} 131072
// SELECTIVE: h (@block) 3 3276800 {{[0-9]+}} 3145728 {{[0-9]+}} 122880
// FULL: h (@block) 3 3276800 {{[0-9]+}} 3145728 {{[0-9]+}} 8192
// NOGRAD: error: braid-cost-report: no function @forward_grad; run braid-autodiff (entry=forward) first
