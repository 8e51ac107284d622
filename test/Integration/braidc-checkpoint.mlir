// Tests a training program's --save and --resume: GPT trained 2 steps as
// dp2 x tp2 x pp2 (8 ranks) and saved, then resumed for 2 more steps by the
// program compiled for dp4 x pp2 (another layout of the same global batch:
// inputs are generated whole, then each rank takes its block), gives the
// losses of the uninterrupted 4-step run; a truncated checkpoint, a missing
// tensor and another shape are refused on every rank, and a refused
// checkpoint is left byte-identical.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 16 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2,tp=2,pp=2 --microbatches 4 --lr 0.01 -o %t.3d
// RUN: braidc %t.mlir --mesh dp=4,pp=2 --microbatches 4 --lr 0.01 -o %t.dp4
//
// RUN: braid-run -n 8 %t.3d --steps 4 --seed 1 > %t.full
// RUN: braid-run -n 8 %t.3d --steps 2 --seed 1 --save %t.d/ck > %t.first
// RUN: braid-run -n 8 %t.dp4 --steps 2 --seed 1 --resume %t.d/ck > %t.second
// RUN: FileCheck %s --check-prefix=RESUMED < %t.second
// RESUMED: step 2 loss
// RESUMED-NEXT: step 3 loss
// RUN: grep -E '^step (2|3) ' %t.full > %t.full.tail
// RUN: %PYTHON %S/Inputs/compare-results.py %t.second %t.full.tail --rtol 1e-4 | FileCheck %s
// CHECK: ok: 2 losses within 0.0001
//
// A truncated checkpoint: every rank says so, nothing is written over it.
// RUN: mkdir -p %t.d/bad && head -c 200000 %t.d/ck/checkpoint.safetensors > %t.d/bad/checkpoint.safetensors
// RUN: cp %t.d/bad/checkpoint.safetensors %t.d/bad.orig
// RUN: not braid-run -n 8 %t.dp4 --steps 1 --resume %t.d/bad --save %t.d/bad 2> %t.bad.err
// RUN: FileCheck %s --check-prefix=TRUNC < %t.bad.err
// RUN: grep -c 'DATA_CORRUPT' %t.bad.err | FileCheck %s --check-prefix=EIGHT
// RUN: cmp %t.d/bad/checkpoint.safetensors %t.d/bad.orig
// TRUNC: error: rank {{[0-7]}}: --resume {{.*}}bad/checkpoint.safetensors: DATA_CORRUPT: {{.*}}truncated file?
// EIGHT: 8
//
// A missing tensor (an SGD program resuming AdamW's checkpoint) and another
// shape (vocabulary 32).
// RUN: braidc %t.mlir --mesh dp=2 --optimizer sgd --lr 0.01 -o %t.sgd
// RUN: not braid-run -n 2 %t.sgd --steps 1 --resume %t.d/ck 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: rank {{[01]}}: --resume {{.*}}: INVALID_ARGUMENT: checkpoint {{.*}} has no tensor '{{.*}}.sgd.momentum'
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 32 --batch 16 -o %t.v32.mlir
// RUN: braidc %t.v32.mlir --mesh dp=2 --lr 0.01 -o %t.v32
// RUN: not braid-run -n 2 %t.v32 --steps 1 --resume %t.d/ck 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: rank {{[01]}}: --resume {{.*}}: INVALID_ARGUMENT: {{.*}}wte.weight
//
// --log-every 3 prints steps 0, 3, 6 (and the last); --trace writes every
// rank's Chrome trace with a begin/end event per step and per pipeline
// action.
// RUN: braid-run -n 8 %t.3d --steps 7 --seed 1 --log-every 3 --trace %t.trace.json | FileCheck %s --check-prefix=LOG
// LOG: step 0 loss
// LOG-NEXT: step 3 loss
// LOG-NEXT: step 6 loss
// LOG-NEXT: summary: 7 steps
// RUN: %PYTHON -c "import json, sys; d = json.load(open(sys.argv[1])); ev = d['traceEvents'] if isinstance(d, dict) else d; b = [e for e in ev if e.get('cat') == 'step' and e['ph'] == 'B']; print('step events', len(b), 'ranks', len({e['pid'] for e in b}), sorted({e['name'] for e in b}))" %t.trace.json | FileCheck %s --check-prefix=TRACE
// TRACE: step events 56 ranks 8 ['step 0', 'step 1', 'step 2', 'step 3', 'step 4', 'step 5', 'step 6']
// Each pipeline action is an event too: per step, 1F1B over 4 micro-batches
// runs 4 F and 4 BW on each stage (no W deferred: the tied embedding's
// partial gradients are summed after the pipeline): 16 x 4 pipelines x 7
// steps; and each wait for a receive: stage 1's 4 activations and stage 0's
// 4 gradients, 8 x 4 x 7. Stage 1 waits for micro-batch 0's activation
// before running it.
// RUN: %PYTHON %S/Inputs/trace-summary.py %t.trace.json --rank 1 --first 4 | FileCheck %s --check-prefix=ACTIONS
// ACTIONS: pipeline: 448 events on 8 ranks
// ACTIONS: recv: 224 events on 8 ranks
// ACTIONS: step: 56 events on 8 ranks
// ACTIONS: rank 1: step 0, recv activation 0.0 from rank 0, F0.0, BW0.0
// RUN: braidc %t.mlir --lr 0.01 -o %t.one
// RUN: %t.one --steps 5 --log-every 2 | FileCheck %s --check-prefix=ONE
// ONE: step 0 loss
// ONE-NEXT: step 2 loss
// ONE-NEXT: step 4 loss
// ONE-NEXT: summary: 5 steps
//
// --data: each step's batch from the runtime's data source (labels = the
// next tokens); a token file and the synthetic source give the same losses
// under dp2 x tp2 x pp2 and dp4 x pp2; a file of the wrong token width is
// refused on every rank; the single-device program reads the same batches.
// RUN: %PYTHON -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<5000H', *[(i * 7) % 64 for i in range(5000)]))" %t.tok
// RUN: braid-run -n 8 %t.3d --steps 3 --data %t.tok --token-bytes 2 > %t.data.3d
// RUN: braid-run -n 8 %t.dp4 --steps 3 --data %t.tok > %t.data.dp4
// RUN: %PYTHON %S/Inputs/compare-results.py %t.data.dp4 %t.data.3d --rtol 1e-4 | FileCheck %s --check-prefix=DATA
// RUN: braid-run -n 8 %t.3d --steps 2 --data synthetic > %t.syn.3d
// RUN: braid-run -n 8 %t.dp4 --steps 2 --data synthetic > %t.syn.dp4
// RUN: %PYTHON %S/Inputs/compare-results.py %t.syn.dp4 %t.syn.3d --rtol 1e-4 | FileCheck %s --check-prefix=SYN
// DATA: ok: 3 losses within 0.0001
// SYN: ok: 2 losses within 0.0001
// RUN: not braid-run -n 8 %t.dp4 --steps 1 --data %t.tok --token-bytes 4 2>&1 | FileCheck %s --check-prefix=WIDTH
// WIDTH: error: rank {{[0-7]}}: --data {{.*}}: DATA_CORRUPT: token file {{.*}} not below the vocabulary size 64
// RUN: not %t.one --steps 1 --data %t.d/no-such-file 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: rank 0: --data {{.*}}no-such-file: IO_ERROR: token file {{.*}}: cannot open
//
// The single-device program (global batch 16, a quarter of the pipelined
// programs' 4 x 16) reads, saves, resumes and traces like the others: with
// the token file its losses equal dp2's on the same batches; its checkpoint
// of step 2 resumed by dp2 continues its uninterrupted run; compiled for the
// pipelined programs' whole batch (64), it resumes the 8-rank checkpoint and
// continues the 8-rank run (steps 2 and 3 equal the uninterrupted run's).
// RUN: braidc %t.mlir --mesh dp=2 --lr 0.01 -o %t.dp2
// RUN: %t.one --steps 3 --data %t.tok > %t.data.one
// RUN: braid-run -n 2 %t.dp2 --steps 3 --data %t.tok > %t.data.dp2
// RUN: %PYTHON %S/Inputs/compare-results.py %t.data.one %t.data.dp2 --rtol 1e-4 | FileCheck %s --check-prefix=DATA
// RUN: %t.one --steps 4 --seed 1 > %t.one.full
// RUN: %t.one --steps 2 --seed 1 --save %t.d/one --trace %t.one.trace.json > /dev/null
// RUN: braid-run -n 2 %t.dp2 --steps 2 --seed 1 --resume %t.d/one > %t.one.second
// RUN: grep -E '^step (2|3) ' %t.one.full > %t.one.full.tail
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one.second %t.one.full.tail --rtol 1e-4 | FileCheck %s
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 64 -o %t.b64.mlir
// RUN: braidc %t.b64.mlir --lr 0.01 -o %t.one64
// RUN: %t.one64 --steps 2 --seed 1 --resume %t.d/ck > %t.one64.second
// RUN: %PYTHON %S/Inputs/compare-results.py %t.one64.second %t.full --steps 2:4 --rtol 1e-5 | FileCheck %s --check-prefix=RESUMED1
// RESUMED1: ok: 2 losses within 1e-05
// RUN: %PYTHON -c "import json, sys; d = json.load(open(sys.argv[1])); ev = d['traceEvents'] if isinstance(d, dict) else d; b = [e for e in ev if e.get('cat') == 'step' and e['ph'] == 'B']; print('step events', len(b), 'ranks', len({e['pid'] for e in b}), sorted({e['name'] for e in b}))" %t.one.trace.json | FileCheck %s --check-prefix=TRACE1
// TRACE1: step events 2 ranks 1 ['step 0', 'step 1']
