// Tests bf16-mixed pipelines with two chunks per stage (interleaved 1F1B:
// chunks 0 and 2 on stage 0, 1 and 3 on stage 1; ZB-V: 0 and 3 on stage 0,
// 1 and 2 on stage 1). braid-legalize-bf16 keeps a piece result that only
// pieces on its own stage read in bf16 storage, whatever their chunk
// (training.md, "bf16 storage of saved values"): under ZB-V that is the
// activation chunk 1 hands chunk 2 and chunk 2's gradient for chunk 1 on
// stage 1; under interleaved 1F1B on two stages every hand-off between
// chunks crosses stages, so none. The tied embedding's working copy is
// handed nowhere: each chunk that reads it makes its own
// (braid-pipeline-outline).
// The values are the same: both schedules give the same losses and
// gradient norms to the last digit (the same chunks, the same arithmetic;
// measured identical over 5 steps, 3 checked), and they equal braid-eval's
// on the IR the same passes make within 1e-3 (braid-eval rounds to bf16
// from double: braidc-precision.mlir; measured 4e-5).
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
//
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule zb-v --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.zbv
// RUN: braid-run -n 2 %t.zbv --steps 3 --seed 1 > %t.zbv.out
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule interleaved-1f1b --microbatches 4 --lr 0.01 --clip-norm 1.0 -o %t.il
// RUN: braid-run -n 2 %t.il --steps 3 --seed 1 > %t.il.out
// RUN: sed -n 's/ ms .*//p' %t.zbv.out > %t.zbv.losses
// RUN: sed -n 's/ ms .*//p' %t.il.out > %t.il.losses
// RUN: FileCheck %s --check-prefix=STEPS < %t.zbv.losses
// RUN: diff %t.zbv.losses %t.il.losses
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-pipeline-split="stages=2 chunks=2 placement=v" --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0 accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-v microbatches=4" -o %t.zbv.mlir
// RUN: braid-eval %t.zbv.mlir --steps 3 --seed 1 --pipeline > %t.zbv.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbv.out %t.zbv.eval --rtol 1e-3 | FileCheck %s
//
// CHECK: ok: 3 losses within 0.001
// STEPS: step 0 loss {{.*}} grad_norm
// STEPS-NEXT: step 1 loss
// STEPS-NEXT: step 2 loss
//
// The pieces' buffers: under ZB-V, chunk 0's F piece sends its activation
// (f32) and hands chunk 3 nothing (chunk 3's F reads the activation it
// receives, f32, and the tokens, then its own bf16 values); chunk 1's F piece hands
// chunk 2's its activation in bf16; chunk 2's B piece hands chunk 1 its
// input gradient (its last result) in bf16. Under interleaved 1F1B these
// cross stages and stay f32. Chunk 3's W piece (18 bf16 inputs) hands
// chunk 0's nothing: its partial gradient of the tied wte is widened to
// f32 and summed with chunk 0's after the schedule, as under f32
// (braid-pipeline-outline), so chunk 0's W piece reads no bf16 after the
// tokens.
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule zb-v --microbatches 4 --lr 0.01 --emit cpp -o %t.zbv.cpp
// RUN: FileCheck %s --check-prefix=ZBV < %t.zbv.cpp
// ZBV: void braid_forward_grad_c0_F(int32_t* {{[^,]*}}, float* {{[^,]*}}, uint16_t*
// ZBV: void braid_forward_grad_c1_F(float* {{[^,]*}}, uint16_t*
// ZBV: void braid_forward_grad_c2_F(uint16_t*
// ZBV: void braid_forward_grad_c3_F(float* {{[^,]*}}, int32_t*
// ZBV: void braid_forward_grad_c3_W({{(uint16_t[*] v[0-9]+, ){18}float[*] v[0-9]+}}, float*
// ZBV: void braid_forward_grad_c2_B({{.*}}, uint16_t* {{[^,]*}}) {
// ZBV: void braid_forward_grad_c0_W({{.*}}, int32_t* {{[^,]*}}, float*
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule interleaved-1f1b --microbatches 4 --lr 0.01 --emit cpp -o %t.il.cpp
// RUN: FileCheck %s --check-prefix=IL < %t.il.cpp
// IL: void braid_forward_grad_c0_F(int32_t* {{[^,]*}}, float* {{[^,]*}}, uint16_t*
// IL: void braid_forward_grad_c1_F(float* {{[^,]*}}, float*
// IL: void braid_forward_grad_c2_F(float*
// IL: void braid_forward_grad_c3_W({{([^,]*, ){18}float[*] v[0-9]+}}, float*
// IL: void braid_forward_grad_c2_B({{.*}}, float* {{[^,]*}}) {
// IL: void braid_forward_grad_c0_W({{.*}}, int32_t* {{[^,]*}}, float*
