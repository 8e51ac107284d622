// Tests that a GPT whose embedding and head share wte, compiled for a
// 4-stage pipeline (ZB-H1, 4 micro-batches, clipping), trains exactly like
// braid-eval on the program braid-opt's passes make (the same 3 losses,
// then the same parameters and SGD momentum, element by element), and
// that the first stage's partial gradient of wte goes to the last stage
// alone, point to point (braid_rt_program_pp_transfer_f32), where the
// head's partial is added to it and wte is updated: no broadcast of it
// over the pipeline, so the middle stages neither take part nor hold a
// buffer for it. The wte parameter itself lives on stages 0 and 3 only:
// stage 3 updates it and sends the new value to stage 0 alone; its
// checkpoint, saved once (by stage 3), moves to pp=2, dp=2 and one device
// and back.
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
//
// wte's slot is stage 3's (it updates it), allocated and initialised on
// stages 0 and 3 (mask 9) alone; after the update its new value goes from
// stage 3's slot into stage 0's, point to point, and no stored parameter is
// broadcast over the pipeline.
// RUN: FileCheck %s --check-prefix=SLOT < %t.d/program.cpp
// SLOT-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.store_param");
// SLOT: braid_rt_program_pp_transfer_f32({{.*}}: braid.store_param");
// SLOT-NOT: braid_rt_program_pp_broadcast_f32({{.*}}: braid.store_param");
// SLOT: void braid_program_init(
// SLOT: int64_t [[HOLDERS:v[0-9]+]] = 9;
// SLOT-NEXT: bool [[HOLDS:v[0-9]+]] = braid_rt_program_pp_holds({{v[0-9]+}}, [[HOLDERS]]);
// SLOT-NEXT: if ([[HOLDS]]) {
// SLOT-NEXT: int64_t {{v[0-9]+}} = 32768;
// SLOT: braid_rt_program_init_f32({{v[0-9]+}}, "wte.weight",
// SLOT: {"wte.weight", 2, braid_slot_shape_0, braid_slot_spec_0, 3, 0},
// Each stored parameter's transfer, its operands resolved (the slot's
// buffer both sent and received into): wte's 32768 elements from 3 to 0.
// RUN: %PYTHON -c "import re, sys; env = {}; [print('store', *(env.get(a.strip(), a.strip()) for a in l.split('(', 1)[1].split(',')[1:6])) if 'pp_transfer_f32' in l and 'store_param' in l else env.update(re.findall(r'(v[0-9]+) = ([0-9]+|braid_params\[v[0-9]+\]);', l)) for l in open(sys.argv[1])]" %t.d/program.cpp | FileCheck %s --check-prefix=STORE
// STORE: store braid_params[{{v[0-9]+}}] braid_params[{{v[0-9]+}}] 32768 3 0
// STORE-NOT: store
//
// The parameters per stage, in bytes: stage 0 wte (131072), wpe and layer
// 0; stages 1 and 2 their layers alone (50816 each), no wte; stage 3 wte
// and ln_f. (With wte on every stage, stages 1 and 2 had 232704 and
// 181888.)
// RUN: %PYTHON -c "import sys; print('parameters', *(l.split()[2] for l in open(sys.argv[1]) if l.startswith('stage ')))" %t.mem | FileCheck %s --check-prefix=PARAMS
// PARAMS: parameters 182912 101632 50816 131328
//
// The checkpoint moves between meshes: pp=4's after 3 steps, resumed for 2
// on pp=2, dp=2 and one device (the model with the global batch, 16), gives
// the uninterrupted pp=4 run's steps 3 and 4, and so does pp=4 resuming
// one device's; pp=4's checkpoint (wte saved once, by its owner) equals one
// device's, tensor by tensor.
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 8 --vocab 1024 --batch 16 -o %t.16.mlir
// RUN: braidc %t.16.mlir --optimizer sgd --lr 0.1 --clip-norm 1.0 -o %t.one
// RUN: braidc %t.16.mlir --mesh dp=2 --optimizer sgd --lr 0.1 --clip-norm 1.0 -o %t.dp2
// RUN: braidc %t.mlir --mesh pp=2 --schedule 1f1b --microbatches 4 --optimizer sgd --lr 0.1 --clip-norm 1.0 -o %t.pp2
// RUN: braid-run -n 4 %t.pp4 --steps 5 --seed 1 > %t.full
// RUN: %t.one --steps 2 --seed 1 --resume %t.ck/pp4 > %t.resumed.one
// RUN: braid-run -n 2 %t.dp2 --steps 2 --seed 1 --resume %t.ck/pp4 > %t.resumed.dp2
// RUN: braid-run -n 2 %t.pp2 --steps 2 --seed 1 --resume %t.ck/pp4 > %t.resumed.pp2
// RUN: %t.one --steps 3 --seed 1 --save %t.ck/one > %t.one.out
// RUN: braid-run -n 4 %t.pp4 --steps 2 --seed 1 --resume %t.ck/one > %t.resumed.pp4
// RUN: %PYTHON %S/Inputs/compare-results.py %t.resumed.one %t.full --rtol 1e-5 --steps 3:5 | FileCheck %s --check-prefix=MOVE
// RUN: %PYTHON %S/Inputs/compare-results.py %t.resumed.dp2 %t.full --rtol 1e-5 --steps 3:5 | FileCheck %s --check-prefix=MOVE
// RUN: %PYTHON %S/Inputs/compare-results.py %t.resumed.pp2 %t.full --rtol 1e-5 --steps 3:5 | FileCheck %s --check-prefix=MOVE
// RUN: %PYTHON %S/Inputs/compare-results.py %t.resumed.pp4 %t.full --rtol 1e-5 --steps 3:5 | FileCheck %s --check-prefix=MOVE
// MOVE: ok: 2 losses within 1e-05
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/pp4/checkpoint.safetensors %t.ck/one/checkpoint.safetensors --rtol 1e-5 --atol 1e-9 | FileCheck %s --check-prefix=STATE
