// Tests that braidc and the programs it compiles refuse malformed or
// meaningless options with a message and status 2 (programs) or 1
// (braidc), instead of running a job other than the one asked for.
//
// RUN: %PYTHON -m braid.models mlp --layers 1 --hidden 8 --vocab 4 --batch 4 -o %t.mlir
// RUN: not braidc %t.mlir --mesh dp=2,dp=3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not braidc %t.mlir --mesh pp=2, -o %t.bad 2>&1 | FileCheck %s --check-prefix=TRAIL
// RUN: not braidc %t.mlir --mesh dp=2,,tp=2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not braidc %t.mlir --microbatches 0 -o %t.bad 2>&1 | FileCheck %s --check-prefix=MB0
// RUN: not braidc %t.mlir --mesh tp=2 --zero 2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not braidc %t.mlir --mesh dp=2 --sp -o %t.bad 2>&1 | FileCheck %s --check-prefix=SP
//
// TWICE: braidc: --mesh: axis 'dp' is given twice in 'dp=2,dp=3'
// TRAIL: braidc: --mesh: expected dp=D,tp=T,pp=P with positive degrees, got '' in 'pp=2,'
// EMPTY: braidc: --mesh: expected dp=D,tp=T,pp=P with positive degrees, got '' in 'dp=2,,tp=2'
// MB0: braidc: --microbatches must be positive, got 0
// ZERO: braidc: zero 2 shards over data parallelism, but dp=1
// SP: braidc: sp splits the sequence over tensor parallelism, but tp=1
//
// NaN and infinity are refused too (NaN passed every check written as
// x < 0, and trained with clipping or buckets silently off; an infinite
// lr trained NaN losses), and an unknown schedule without a pp axis, where
// it was ignored.
// RUN: not braidc %t.mlir --lr inf -o %t.bad 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not braidc %t.mlir --lr nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not braidc %t.mlir --min-lr nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=MINLR
// RUN: not braidc %t.mlir --clip-norm nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not braidc %t.mlir --mesh dp=2 --bucket-mb nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not braidc %t.mlir --schedule zb-h3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not braidc %t.mlir --mesh auto --devices 2 --device-memory 1e400 --plan-only 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: rm -rf %t.outdir && mkdir %t.outdir
// RUN: not braidc %t.mlir -o %t.outdir 2>&1 | FileCheck %s --check-prefix=OUTDIR
// RUN: not ls %t.outdir.cpp
//
// LRINF: error: braid-train-step: lr must be positive and finite
// MINLR: error: braid-train-step: min-lr must be between 0 and lr
// CLIP: error: braid-train-step: clip-norm must be non-negative and finite (0: off)
// BUCKET: braidc: bucket-mb must be non-negative and finite (0: no buckets), got nan
// SCHED: braidc: unknown schedule 'zb-h3'
// OUTDIR: braidc: -o {{.*}}outdir is a directory; name the file to write
// MEMORY: braidc: --mesh auto: --device-memory: expected a size such as 80GiB, 512MiB, 2GB or a number of bytes, got '1e400'
//
// RUN: braidc %t.mlir --train -o %t.prog
// RUN: not %t.prog --steps abc 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not %t.prog --steps -1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not %t.prog --steps 2abc 2>&1 | FileCheck %s --check-prefix=TAIL
// RUN: not %t.prog --seed abc 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: not %t.prog --start-step -2 2>&1 | FileCheck %s --check-prefix=START
// RUN: not %t.prog --log-every 0 2>&1 | FileCheck %s --check-prefix=LOG
// RUN: not %t.prog --token-bytes 3 2>&1 | FileCheck %s --check-prefix=TOKEN
// RUN: %t.prog --steps abc; test $? -eq 2
//
// A --save or --trace path that cannot be written is refused before the
// first step (it was found after the last, and a bad --trace, written
// first, also lost the checkpoint of a good --save).
// RUN: rm -rf %t.out.d && mkdir %t.out.d && touch %t.out.d/file
// RUN: not %t.prog --steps 2 --save %t.out.d/missing/ck > %t.save.out 2> %t.save.err
// RUN: FileCheck %s --check-prefix=SAVEDIR < %t.save.err
// RUN: not grep loss %t.save.out
// RUN: not %t.prog --steps 2 --save %t.out.d/file 2>&1 | FileCheck %s --check-prefix=SAVEFILE
// RUN: not %t.prog --steps 2 --save %t.out.d/ck --trace %t.out.d/missing/t.json > %t.trace.out 2>&1
// RUN: FileCheck %s --check-prefix=TRACEDIR < %t.trace.out
// RUN: not grep loss %t.trace.out
// RUN: not %t.prog --steps 2 --trace %t.out.d 2>&1 | FileCheck %s --check-prefix=TRACEISDIR
// RUN: %t.prog --steps 2 --save %t.out.d/ck --trace %t.out.d/t.json > /dev/null
// RUN: test -f %t.out.d/ck/checkpoint.safetensors && test -f %t.out.d/t.json
//
// SAVEDIR: error: rank 0: --save {{.*}}missing/ck: cannot be written: '{{.*}}missing': No such file or directory (checked before the first step)
// SAVEFILE: error: rank 0: --save {{.*}}file: cannot be written: '{{.*}}file': not a directory (checked before the first step)
// TRACEDIR: error: rank 0: --trace {{.*}}missing/t.json: cannot be written: '{{.*}}missing': No such file or directory
// TRACEISDIR: error: rank 0: --trace {{.*}}: is a directory (checked before the first step)
// RUN: %t.prog --steps 2 | FileCheck %s --check-prefix=OK
//
// STEPS: error: --steps needs an integer >= 0, got 'abc'
// NEG: error: --steps needs an integer >= 0, got '-1'
// TAIL: error: --steps needs an integer >= 0, got '2abc'
// SEED: error: --seed needs an integer >= 0, got 'abc'
// START: error: --start-step needs an integer >= 0, got '-2'
// LOG: error: --log-every needs an integer >= 1, got '0'
// TOKEN: error: --token-bytes must be 2 or 4, got 3
// OK: step 0 loss
// OK: step 1 loss
