// Tests braidc --mesh auto --devices N: the planner's search chooses the
// training options, braidc prints them as flags and compiles exactly what
// those flags compile; a GPT whose parameters are renamed to names the
// generator never writes gets the same plan and trains to the same losses;
// impossible requests are clear errors. The hardware is a made-up file
// (Inputs/planner-toy.json), so the plans do not move when this machine is
// recalibrated; that the search finds the predicted optimum is checked
// against an exhaustive evaluation in unittests/Planner/SearchTest.cpp.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 16 --vocab 64 --batch 4 -o %t.mlir
//
// The plan for 8 devices and a global batch of 16 (4 micro-batches of the
// model's batch 4), with --explain: a dp2 x tp2 x pp2 ZB-H2 pipeline with
// ZeRO-1 and sp, a hair ahead of dp4 x tp2 ZeRO-1 sp (the two swap places
// with small changes to the model), its flags, the ranked plans and every
// mesh not chosen with its reason.
// RUN: braidc %t.mlir --mesh auto --devices 8 --global-batch 16 --hardware %S/Inputs/planner-toy.json --plan-only --explain > %t.plan
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan
// PLAN: braidc: plan for 8 devices (planner-toy, global batch 16): {{[0-9.]+}} ms per step predicted, {{[0-9.]+}} MiB per device
// PLAN-NEXT: flags: --mesh dp=2,tp=2,pp=2 --schedule zb-h2 --microbatches 4 --zero 1 --sp --stage-layers 2,2
// PLAN-NEXT: searched {{[0-9]+}} candidates in {{.*}} s: 0 over the memory budget (1.00 GiB)
// PLAN: # plan step tokens/s MFU memory bubble tp comm pp comm dp comm
// Plans alike but for the ZeRO stage (ZeRO-2 costs ZeRO-1's time) are one
// row: five kinds are ranked.
// PLAN-NEXT: 1   dp2 tp2 pp2 zb-h2 mbs2 m4 z1 sp [2,2]
// PLAN-NEXT: same time: z2
// PLAN-NEXT: {{^}}2 dp
// PLAN-NOT: z2 sp [2,2]
// PLAN: {{^}}3 dp
// PLAN-NOT: z2 sp [2,2]
// PLAN: {{^}}4 dp
// PLAN-NOT: z2 sp [2,2]
// PLAN: {{^}}5 dp
// PLAN: why #1: {{[0-9.]+}}% faster than #{{[2-5]}}:
// PLAN: meshes (dp x tp x pp) and why each was or was not chosen:
// PLAN-NEXT: dp=8    tp=1   pp=1    divisibility: dp=8 does not divide the program's batch 4
// PLAN-NEXT: dp=4    tp=2   pp=1    time:
// PLAN-NEXT: dp=2    tp=4   pp=1    time:
// PLAN-NEXT: dp=1    tp=8   pp=1    divisibility: tp=8 does not divide attention heads (4)
// PLAN-NEXT: dp=4    tp=1   pp=2    ranked, best
// PLAN-NEXT: dp=2    tp=2   pp=2    chosen
// PLAN: dp=1    tp=1   pp=8    divisibility: pp=8: the model has 4 layers
// PLAN-NEXT: the chosen plan:
// PLAN-NEXT: plan: dp=2,tp=2,pp=2 schedule=zb-h2 mbs=2 microbatches=4 zero=1 sp recompute=none stages=2:2
// PLAN: fits in device memory
//
// Replay: the printed flags compile to the same program as --mesh auto.
// RUN: braidc %t.mlir --mesh auto --devices 8 --global-batch 16 --hardware %S/Inputs/planner-toy.json --emit mlir -o %t.auto.mlir > %t.auto.log
// RUN: sed -n 's/^flags: //p' %t.auto.log > %t.flags
// RUN: sh -c 'braidc %t.mlir $(cat %t.flags) --emit mlir -o %t.replay.mlir'
// RUN: diff %t.auto.mlir %t.replay.mlir
// --stage-layers reaches the pipeline split: two splits, two programs.
// RUN: braidc %t.mlir --mesh pp=2 --stage-layers 1,3 --emit mlir -o %t.s13.mlir
// RUN: braidc %t.mlir --mesh pp=2 --stage-layers 3,1 --emit mlir -o %t.s31.mlir
// RUN: not diff -q %t.s13.mlir %t.s31.mlir
//
// Given training options stay fixed: --recompute full, and --schedule
// 1f1b for the pipelines (1F1B leaves bubbles that ZB-V filled, and a
// pipeline's step ends with transfers of one float each, the gradient
// norm's pieces and the broadcasts; dp4 tp2 sp pays the vocabulary-parallel
// cross-entropy's 5 tp all_gathers per micro-batch, which its program runs;
// under ZeRO-1 the gradient accumulation loop carries each device's share
// of the sums, a quarter, where without ZeRO it adds and copies them whole
// in every micro-batch, but each micro-batch packs its gradient buckets and
// stages them for the reduce_scatters, 4 passes over the whole gradients
// (and the loss's dp sums go in the bucket of the gradients around the
// layers, its gradient norm's 12 tp sums one all_reduce): dp4 tp2 sp wins,
// 2% ahead of the same with ZeRO-1 and 5% ahead of the 1F1B pipelines).
// RUN: braidc %t.mlir --mesh auto --devices 8 --global-batch 16 --hardware %S/Inputs/planner-toy.json --schedule 1f1b --recompute full --plan-only --explain --top 10 | FileCheck %s --check-prefix=FIXED
// FIXED: flags: --mesh dp=4,tp=2,pp=1 --microbatches 4 --sp --recompute full
// FIXED: dp4 tp2 pp1 - mbs1 m4 sp rc=full
// FIXED: dp4 tp2 pp1 - mbs1 m4 z1 sp rc=full
// FIXED: dp2 tp2 pp2 1f1b mbs2 m4 z1 sp rc=full [2,2]
// FIXED-NOT: zb-
//
// The planner prices the buckets braidc will build: with --bucket-mb 0 the
// gathers are per tensor again, and ZeRO-3 falls out of the top plans.
// RUN: braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --plan-only --bucket-mb 0 --explain | FileCheck %s --check-prefix=NOBUCKETS
// NOBUCKETS: flags: --mesh dp=4,tp=2,pp=1 --microbatches 1 --sp{{$}}
// NOBUCKETS: {{^}}2   dp4 tp2 pp1 - mbs1 m1 sp rc=selective
// NOBUCKETS-NOT: z3
// NOBUCKETS: why #1
//
// A global batch of 4 (one micro-batch): tensor parallelism with sp, and
// ZeRO-3 in the top five since its gathers are bucketed
// (braid-bucket-gathers: 3 gathers a layer instance in F and 2 in B
// instead of 16 and 8; predicted on planner-toy 529 us against 500 without
// ZeRO: the copies into and out of each bucket, and those that pack and
// stage the gradients for their reduce_scatters). The
// renamed GPT (every parameter t<i>, the repeat prefix p0) gets the same
// plan and the same ranking, and, resumed from the same checkpoint renamed,
// trains to the same losses.
// RUN: %PYTHON %S/Inputs/rename-params.py %t.mlir -o %t.renamed.mlir
// RUN: not grep -E 'braid.param "[^t]|prefix = "h"' %t.renamed.mlir
// RUN: braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --explain -o %t.tp > %t.tp.plan
// RUN: braidc %t.renamed.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --explain -o %t.tp.renamed > %t.tp.renamed.plan
// RUN: FileCheck %s --check-prefix=TP < %t.tp.plan
// TP: flags: --mesh dp=4,tp=2,pp=1 --microbatches 1 --sp{{$}}
// TP: {{^}}5   dp4 tp2 pp1 - mbs1 m1 z3 sp{{ }}
// RUN: braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --emit mlir -o %t.tp.auto.mlir > %t.tp.log
// RUN: sed -n 's/^flags: //p' %t.tp.log > %t.tp.flags
// RUN: sh -c 'braidc %t.mlir $(cat %t.tp.flags) --emit mlir -o %t.tp.replay.mlir'
// RUN: diff %t.tp.auto.mlir %t.tp.replay.mlir
// RUN: sed 's/in [0-9.]* s:/in S:/' %t.tp.plan > %t.tp.a
// RUN: sed 's/in [0-9.]* s:/in S:/' %t.tp.renamed.plan > %t.tp.b
// RUN: diff %t.tp.a %t.tp.b
// RUN: rm -rf %t.ck0 %t.ck0r
// RUN: braid-run -n 8 %t.tp --steps 1 --seed 1 --save %t.ck0 > /dev/null
// RUN: %PYTHON %S/Inputs/rename-params.py %t.mlir --checkpoint %t.ck0 %t.ck0r
// RUN: braid-run -n 8 %t.tp --steps 3 --resume %t.ck0 > %t.tp.out
// RUN: braid-run -n 8 %t.tp.renamed --steps 3 --resume %t.ck0r > %t.tp.renamed.out
// RUN: sed -n 's/^step \([0-9]*\) loss \([^ ]*\) .*/\1 \2/p' %t.tp.out > %t.tp.losses
// RUN: sed -n 's/^step \([0-9]*\) loss \([^ ]*\) .*/\1 \2/p' %t.tp.renamed.out > %t.tp.renamed.losses
// RUN: diff %t.tp.losses %t.tp.renamed.losses
// RUN: FileCheck %s --check-prefix=SAME < %t.tp.renamed.losses
// SAME: 1 {{[0-9.]+}}
// SAME-NEXT: 2 {{[0-9.]+}}
// SAME-NEXT: 3 {{[0-9.]+}}
//
// Errors.
// RUN: not braidc %t.mlir --mesh auto -o %t.bad 2>&1 | FileCheck %s --check-prefix=NODEV
// NODEV: braidc: --mesh auto needs --devices N (the ranks the plan uses)
// RUN: not braidc %t.mlir --devices 8 -o %t.bad 2>&1 | FileCheck %s --check-prefix=NOAUTO
// NOAUTO: braidc: --devices is a planning option: it needs --mesh auto
// RUN: not braidc %t.mlir --mesh auto --devices 7 --hardware %S/Inputs/planner-toy.json --plan-only 2>&1 | FileCheck %s --check-prefix=SEVEN
// SEVEN: braidc: --mesh auto: no plan can split the model (4 layers, batch 4) over 7 devices:
// SEVEN-NEXT: dp=7,tp=1,pp=1: dp=7 does not divide the global batch 4
// SEVEN-NEXT: dp=1,tp=7,pp=1: tp=7 does not divide parameter 'h.*.attn.q.weight' dimension 1 (32)
// SEVEN-NEXT: dp=1,tp=1,pp=7: pp=7: the model has 4 layers
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --device-memory 64KiB --plan-only 2>&1 | FileCheck %s --check-prefix=NOFIT
// NOFIT: braidc: --mesh auto: no plan fits in 64.00 KiB per device on 8 devices; the smallest requirement found is {{[0-9.]+}} MiB (--mesh dp={{.*}}): give more --devices or a larger --device-memory
// A plan's memory counts braidc's own buffers by default (the
// sequence-parallel staging of dp2 x tp4 here, and MPI's reduce_scatter
// temporaries of the largest gradient bucket, a device's tp piece of it,
// on the dp group's first device, and what the layers hold between their
// B and their W beyond the saved activations; not the ops after the
// layers', whose saved values are dead by the layers' B in braidc's memory
// report: from 3af1bb8 to 2026-12-03 the planner counted them, 1.39 MiB
// here, 1.38 again since; 1.40 with a layer's ZeRO-3 parameters gathered
// at once, braid-bucket-gathers; 1.38 at dp2 x tp2 x pp2 ZB-V since a
// pipeline's arenas are derived from its layer functions, 2026-12-03:
// braidc's memory report of that plan 0.41 and 0.37 MiB, the planner's
// 0.41 and 0.37 beside the workspace, 0.49 and 0.45 with the fitted
// arenas; that 1.38 was the cached schedule peak's figure, without what
// ZB-V's layers hold between B and W: simulated it is 1.43 MiB, and since
// the search reports each plan's need as it accepts plans, the smallest is
// dp2 x tp4's 1.40 MiB); --compiled-buffers=false leaves the model state and the
// activations only (1.13 MiB at dp4 x tp2 before bucketed gathers, 1.14
// at dp2 x tp4 with them).
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --device-memory 64KiB --plan-only 2>&1 | FileCheck %s --check-prefix=BUFFERS
// BUFFERS: the smallest requirement found is 1.40 MiB (--mesh dp=2,tp=4,pp=1 --microbatches 1 --zero 3 --sp): give
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --device-memory 64KiB --plan-only --compiled-buffers=false 2>&1 | FileCheck %s --check-prefix=NOBUFFERS
// NOBUFFERS: the smallest requirement found is 1.14 MiB (--mesh dp=2,tp=4,pp=1 --microbatches 1 --zero 3 --sp --recompute full)
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware nosuch-machine --plan-only 2>&1 | FileCheck %s --check-prefix=NOHW
// NOHW: braidc: --mesh auto: --hardware: {{.*}}nosuch-machine
// RUN: echo '{"name": "x", "peak_flops": {"f32": -1}}' > %t.bad.json
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %t.bad.json --plan-only 2>&1 | FileCheck %s --check-prefix=BADHW
// BADHW: braidc: --mesh auto: --hardware: {{.*}}bad.json
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --device-memory 12XB --plan-only 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: braidc: --mesh auto: --device-memory: expected a size such as 80GiB, 512MiB, 2GB or a number of bytes, got '12XB'
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --global-batch 6 --plan-only 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: braidc: --mesh auto: the global batch 6 is not a multiple of the program's batch 4
// RUN: not braidc %t.mlir --mesh auto --devices 8 --hardware %S/Inputs/planner-toy.json --free-micro-batch -o %t.bad 2>&1 | FileCheck %s --check-prefix=FREE
// FREE: braidc: --free-micro-batch plans micro-batches the program cannot run: it needs --plan-only
// RUN: not braidc %t.mlir --mesh dp=2 --stage-layers 1,3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=LAYERS
// LAYERS: braidc: stage-layers places layers on pipeline stages, but pp=1
// RUN: not braidc %t.mlir --mesh pp=2 --stage-layers 1,x -o %t.bad 2>&1 | FileCheck %s --check-prefix=LAYERSBAD
// LAYERSBAD: braidc: stage-layers: expected layer counts (0 or more) separated by commas, got 'x' in '1,x'
// RUN: not braidc %t.mlir --mesh pp=2 --stage-layers 1,1,2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=LAYERSN
// LAYERSN: braidc: stage-layers gives 3 numbers, but pp x chunks = 2 chunks need one each
