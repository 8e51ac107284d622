// Tests that under bf16-mixed a tied wte in a 2-stage pipeline is placed
// and summed as under f32 (braidc-pipeline-tied.mlir): autodiff converts
// each chunk's bf16 partial gradient of wte's working copy to f32 on its
// own chunk and adds them in f32 (autodiff-tied-working-copy.mlir), and
// braid-pipeline-outline moves the f32 sum after the schedule, so stage 0
// sends its partial (wte: 256 x 32 = 8192 elements) to stage 1 alone at
// the step's end, where the head's is added to it and wte is updated.
// Left inside stage 0's W piece (before the fix), the sum had stage 1 send
// its partial to stage 0, which updated wte and broadcast it.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 256 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 0.01 --clip-norm 1.0 --emit cpp -o %t.cpp
// RUN: FileCheck %s --check-prefix=P2P < %t.cpp
// P2P: braid_rt_program_pp_wait_all(
// P2P: int64_t [[COUNT:v[0-9]+]] = 8192;
// P2P-NEXT: int64_t [[FROM:v[0-9]+]] = 0;
// P2P-NEXT: int64_t [[TO:v[0-9]+]] = 1;
// P2P-NEXT: braid_rt_program_pp_transfer_f32({{v[0-9]+}}, {{.*}}, [[COUNT]], [[FROM]], [[TO]], "{{.*}}: braid.add");
// P2P: int64_t [[STAGE:v[0-9]+]] = braid_rt_program_pp_stage(
// P2P-NEXT: int64_t [[ONE:v[0-9]+]] = 1;
// P2P-NEXT: bool [[ON1:v[0-9]+]] = [[STAGE]] == [[ONE]];
// P2P-NEXT: if ([[ON1]]) {
// P2P-NEXT: braid_rt_add_f32(
//
// The same placement as f32's: wte's slot is stage 1's (it updates it).
// RUN: braidc %t.mlir --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 0.01 --clip-norm 1.0 --emit cpp -o %t.f32.cpp
// RUN: grep -o '{"wte.weight", [^}]*}' %t.f32.cpp | FileCheck %s --check-prefix=SLOT
// RUN: grep -o '{"wte.weight", [^}]*}' %t.cpp | FileCheck %s --check-prefix=SLOT
// SLOT: {"wte.weight", 2, braid_slot_shape_{{[0-9]+}}, braid_slot_spec_{{[0-9]+}}, 1, 0}
//
// The losses equal braid-eval's on the IR the same passes make within 1e-3
// (braid-eval rounds to bf16 from double: braidc-precision-pipeline.mlir),
// under 1F1B and ZB-H1.
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 0.01 --clip-norm 1.0 -o %t.1f1b
// RUN: braid-run -n 2 %t.1f1b --steps 3 --seed 1 > %t.1f1b.out
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0 accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b microbatches=2" -o %t.1f1b.mlir
// RUN: braid-eval %t.1f1b.mlir --steps 3 --seed 1 --pipeline > %t.1f1b.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.1f1b.out %t.1f1b.eval --rtol 1e-3 | FileCheck %s
// RUN: braidc %t.mlir --precision bf16-mixed --mesh pp=2 --schedule zb-h1 --microbatches 2 --lr 0.01 --clip-norm 1.0 -o %t.zbh1
// RUN: braid-run -n 2 %t.zbh1 --steps 3 --seed 1 > %t.zbh1.out
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0 accumulation=2 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-h1 microbatches=2" -o %t.zbh1.mlir
// RUN: braid-eval %t.zbh1.mlir --steps 3 --seed 1 --pipeline > %t.zbh1.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.zbh1.out %t.zbh1.eval --rtol 1e-3 | FileCheck %s
// CHECK: ok: 3 losses within 0.001
