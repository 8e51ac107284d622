// Tests that a GPT whose embedding and head share wte, compiled for a
// 4-stage pipeline (ZB-H1, 4 micro-batches, clipping), trains exactly like
// braid-eval on the program braid-opt's passes make (the same 3 losses,
// then the same parameters and SGD momentum, element by element), and
// that the first stage's partial gradient of wte goes to the last stage
// alone, point to point (braid_rt_program_pp_transfer_f32), where the
// head's partial is added to it and wte is updated: no broadcast of it
// over the pipeline, so the middle stages neither take part nor hold a
// buffer for it.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 8 --vocab 1024 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck %t.d && mkdir -p %t.ck
// RUN: braidc %t.mlir --mesh pp=4 --schedule zb-h1 --microbatches 4 --optimizer sgd --lr 0.1 --clip-norm 1.0 -o %t.pp4 --dump-dir %t.d
// RUN: braid-run -n 4 %t.pp4 --steps 3 --seed 1 --save %t.ck/pp4 > %t.pp4.out
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=4 --braid-autodiff --braid-train-step="lr=0.1 optimizer=sgd accumulation=4 pipeline clip-norm=1.0" --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-h1 microbatches=4" -o %t.pp4.mlir
// RUN: braid-eval %t.pp4.mlir --steps 3 --seed 1 --pipeline --save-weights %t.pp4.w --save-optimizer-state %t.pp4.s > %t.pp4.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.pp4.out %t.pp4.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/pp4/checkpoint.safetensors %t.pp4.w %t.pp4.s --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
// CHECK: ok: 3 losses within 1e-05
// STATE: ok: {{[0-9]+}} tensors ({{[0-9]+}} values) within 1e-05
//
// The sum of the two partials (wte: 1024 x 32 = 32768 elements) runs on stage
// 3, after stage 0's partial comes from stage 0 to stage 3.
// RUN: FileCheck %s --check-prefix=P2P < %t.d/program.cpp
// P2P-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.add");
// P2P: braid_rt_program_pp_wait_all(
// P2P: int64_t [[COUNT:v[0-9]+]] = 32768;
// P2P-NEXT: int64_t [[FROM:v[0-9]+]] = 0;
// P2P-NEXT: int64_t [[TO:v[0-9]+]] = 3;
// P2P-NEXT: braid_rt_program_pp_transfer_f32({{v[0-9]+}}, {{.*}}, [[COUNT]], [[FROM]], [[TO]], "{{.*}}: braid.add");
// P2P-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.add");
// P2P: int64_t [[THREE:v[0-9]+]] = 3;
// P2P-NEXT: bool [[ON3:v[0-9]+]] = {{v[0-9]+}} == [[THREE]];
// P2P-NEXT: if ([[ON3]]) {
// P2P-NEXT: braid_rt_add_f32(
//
// Each middle stage's gradients at its peak are its own layer's, fewer
// bytes than wte's 131072 alone (with the partial broadcast they held it
// too).
// RUN: braidc %t.mlir --mesh pp=4 --schedule zb-h1 --microbatches 4 --optimizer sgd --lr 0.1 --clip-norm 1.0 --memory-report --emit mlir -o %t.emitc > %t.mem
// RUN: %PYTHON -c "import sys; rows = {l.split()[1]: int(l.split()[3]) for l in open(sys.argv[1]) if l.startswith('stage ')}; print('middle gradients', *('small' if rows[s] < 131072 else rows[s] for s in '12'))" %t.mem | FileCheck %s --check-prefix=MEM
// MEM: middle gradients small small
