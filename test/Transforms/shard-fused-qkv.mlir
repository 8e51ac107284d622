// Tests that braid-shard splits a fused q/k/v projection as Megatron-LM
// does: the [3h, h] weight of nanoGPT's `c_attn = nn.Linear(h, 3h)`, whose
// output `.split(h, dim=2)` cuts into q, k and v, is split strided over the
// three blocks (`blocks = [3, 1]`), so each device holds its heads of q, of
// k and of v; the slices, the reshapes into heads, the attention and the
// row-parallel `c_proj` stay local, and each block's attention and MLP end
// in one all_reduce in the forward and one in the backward. The tensor
// keeps its layout: braid-eval's parameters and optimizer state gathered
// from the devices equal the serial run's.
//
// The model (Inputs/nanogpt-fused-qkv.mlir) is what the importer emits for
// the nanoGPT of python/tests/nanogpt.py with 2 layers.
//
// RUN: braid-opt %S/Inputs/nanogpt-fused-qkv.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=PLAN
// RUN: braid-opt %S/Inputs/nanogpt-fused-qkv.mlir --braid-shard="tp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHY
// RUN: braid-opt %S/Inputs/nanogpt-fused-qkv.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition | FileCheck %s --check-prefix=SPMD
// A tp that divides the fused dimension but not each block is refused:
// RUN: not braid-opt %S/Inputs/nanogpt-fused-qkv.mlir --braid-shard="tp=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TP3
// TP3: nanogpt-fused-qkv.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'braid.param' op parameter 'attn.c_attn.weight' has dimension 0 of size 96 in 3 blocks of 32, each not divisible by tp = 3
//
// The training step: one all_reduce per attention and per MLP block in F
// and in B (and one for the vocabulary-parallel embedding in each), none in
// W, only the clipping norm's scalars otherwise.
// RUN: braid-opt %S/Inputs/nanogpt-fused-qkv.mlir --braid-autodiff --braid-train-step="lr=1e-2 clip-norm=1.0" -o %t.train.mlir
// RUN: braid-opt %t.train.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition --braid-comm-report -o %t.tp2.mlir > %t.report
// RUN: sed -n '/@train_step (alpha/,$p' %t.report | FileCheck %s --check-prefix=COMM
//
// Numerically (f64, 3 AdamW steps with clipping, seed 1): the losses of
// tp2, tp4, dp2 x tp2 with ZeRO-1 and with ZeRO-3 equal the serial run's
// within 1e-12 relative, and the gathered parameters and optimizer state
// within 1e-10 (plus 1e-10 absolute: the key bias's exact gradient is zero,
// as softmax ignores a shift common to a query's scores, so AdamW moves it
// by the sign of rounding noise, which depends on the summation order).
// RUN: braid-eval %t.train.mlir --steps 3 --f64 --seed 1 --save-weights %t.w.safetensors --save-optimizer-state %t.s.safetensors > %t.serial
// RUN: braid-eval %t.tp2.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.tp2.w.safetensors --save-optimizer-state %t.tp2.s.safetensors > %t.tp2.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.tp2.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.tp2.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.tp2.s.safetensors %t.s.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=STATE
// RUN: braid-opt %t.train.mlir --braid-shard="tp=4" --braid-propagate-sharding --braid-partition -o %t.tp4.mlir
// RUN: braid-eval %t.tp4.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.tp4.w.safetensors > %t.tp4.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.tp4.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.tp4.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2 tp=2 zero=1" --braid-propagate-sharding --braid-partition -o %t.z1.mlir
// RUN: braid-eval %t.z1.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.z1.w.safetensors --save-optimizer-state %t.z1.s.safetensors > %t.z1.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.z1.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z1.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z1.s.safetensors %t.s.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=STATE
// RUN: braid-opt %t.train.mlir --braid-shard="dp=2 tp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-eval %t.z3.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.z3.w.safetensors > %t.z3.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.z3.out %t.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z3.w.safetensors %t.w.safetensors --rtol 1e-10 --atol 1e-10 | FileCheck %s --check-prefix=WEIGHTS
//
// The same for a fused weight in the [h, 3h] layout (strided dimension 1):
// the plan, and tp2 and dp2 x tp2 with ZeRO-3 equal to serial.
// RUN: braid-opt %S/Inputs/fused-in-proj.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=INPROJ
// RUN: braid-opt %S/Inputs/fused-in-proj.mlir --braid-autodiff --braid-train-step="lr=1e-2" -o %t.in.mlir
// RUN: braid-eval %t.in.mlir --steps 3 --f64 --seed 1 --save-weights %t.in.w.safetensors > %t.in.serial
// RUN: braid-opt %t.in.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.in.tp2.mlir
// RUN: braid-eval %t.in.tp2.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.in.tp2.w.safetensors > %t.in.tp2.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.in.tp2.out %t.in.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.in.tp2.w.safetensors %t.in.w.safetensors --rtol 1e-10 | FileCheck %s --check-prefix=INWEIGHTS
// RUN: braid-opt %t.in.mlir --braid-shard="dp=2 tp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.in.z3.mlir
// RUN: braid-eval %t.in.z3.mlir --mesh mesh --steps 3 --f64 --seed 1 --save-weights %t.in.z3.w.safetensors > %t.in.z3.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.in.z3.out %t.in.serial --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.in.z3.w.safetensors %t.in.w.safetensors --rtol 1e-10 | FileCheck %s --check-prefix=INWEIGHTS

// INPROJ: braid.param "in_proj"
// INPROJ-NEXT: braid.shard %{{.*}} : tensor<16x48xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]], blocks = [1, 3]> {priority = -1 : i64}
// INPROJ: braid.param "out_proj"
// INPROJ-NEXT: braid.shard %{{.*}} : tensor<16x16xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]> {priority = -1 : i64}
// INWEIGHTS: ok: 4 tensors

// The fused weight and its bias are strided over the three blocks; c_proj
// is row-parallel (PyTorch's [out, in] layout: dimension 1), the MLP a
// plain pair.
// PLAN-LABEL: braid.layer @transformer_h
// PLAN: braid.param "attn.c_attn.weight"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<96x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []], blocks = [3, 1]> {priority = -1 : i64}
// PLAN: braid.param "attn.c_attn.bias"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<96xf32> to #braid.sharding<@mesh, {{\[}}["tp"]], blocks = [3]> {priority = -1 : i64}
// PLAN: braid.param "attn.c_proj.weight"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]> {priority = -1 : i64}
// PLAN: braid.param "attn.c_proj.bias"
// PLAN-NOT: braid.shard
// PLAN: braid.param "mlp.c_fc.weight"
// PLAN-NEXT: braid.shard %{{.*}} : tensor<128x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]> {priority = -1 : i64}

// WHY: remark: 'transformer.h.*.attn.c_attn.weight': column-parallel (dimension 0 in 3 blocks, each over tp): the output of its braid.matmul reaches the matmul with 'attn.c_proj.weight' only through ops that keep dimension 0 parallel, cut by slices into 3 blocks, each split (a fused projection)
// WHY: remark: 'transformer.h.*.attn.c_attn.bias': column-parallel bias (dimension 0 in 3 blocks, each over tp)
// WHY: remark: 'transformer.h.*.attn.c_proj.weight': row-parallel (dimension 1 over tp): its matmul sums over the dimension that 'attn.c_attn.weight' split

// Each device reads rows [16i, 16i + 16) of q, of k and of v (48 rows),
// slices its q, k and v at 0, 16 and 32, and computes 2 of the 4 heads;
// the only collectives of the block are the two all_reduces of its
// row-parallel matmuls.
// SPMD-LABEL: braid.layer @transformer_h
// SPMD-NOT: braid.all_
// SPMD: braid.param "attn.c_attn.weight" {block_of = #braid.sharding<@mesh, {{\[}}["tp"], []], blocks = [3, 1]>{{.*}}} : tensor<48x32xf32>
// SPMD-NOT: braid.all_
// SPMD: braid.param "attn.c_attn.bias" {block_of = #braid.sharding<@mesh, {{\[}}["tp"]], blocks = [3]>{{.*}}} : tensor<48xf32>
// SPMD-NOT: braid.all_
// SPMD: braid.slice %{{.*}} {limit = array<i64: 2, 16, 16>, start = array<i64: 0, 0, 0>} : (tensor<2x16x48xf32>) -> tensor<2x16x16xf32>
// SPMD-NEXT: braid.reshape %{{.*}} : (tensor<2x16x16xf32>) -> tensor<2x16x2x8xf32>
// SPMD-NEXT: braid.slice %{{.*}} {limit = array<i64: 2, 16, 32>, start = array<i64: 0, 0, 16>}
// SPMD-NEXT: braid.reshape
// SPMD-NEXT: braid.slice %{{.*}} {limit = array<i64: 2, 16, 48>, start = array<i64: 0, 0, 32>}
// SPMD-NEXT: braid.reshape
// SPMD-NEXT: braid.attention {{.*}} -> tensor<2x16x2x8xf32>
// SPMD-NOT: braid.all_
// SPMD: braid.all_reduce sum
// SPMD-NOT: braid.all_
// SPMD: braid.all_reduce sum
// SPMD-NOT: braid.all_
// SPMD: braid.yield

// COMM: @train_step F all_reduce tp 2 4096
// COMM-NEXT: @transformer_h.F F all_reduce tp 2 4096 4096 {{.*}} 2 'braid.add'
// COMM-NEXT: @transformer_h.F F all_reduce tp 2 4096 4096 {{.*}} 2 'braid.add'
// COMM-NEXT: @train_step B all_reduce tp 2 4096
// COMM-NEXT: @transformer_h.B B all_reduce tp 2 4096 4096 {{.*}} 2 'braid.layer_norm_grad'
// COMM-NEXT: @transformer_h.B B all_reduce tp 2 4096 4096 {{.*}} 2 'braid.layer_norm_grad'
// COMM-NOT: {{^@.* W }}
// COMM-NOT: 4096 4096
// COMM: total all

// LOSS: ok: 3 losses within 1e-12
// WEIGHTS: ok: 28 tensors
// STATE: ok: 56 tensors
