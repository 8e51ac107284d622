// Tests braid-run --restarts with a program's --save DIR --save-every N: a
// 4-rank dp2 x pp2 GPT run in which a random rank is SIGKILLed at a random
// step, 3 times, restarts from its latest complete checkpoint each time and
// ends with the weights of the uninterrupted run, bit for bit; a stopped
// rank (a collective timeout) is restarted too; a checkpoint without its
// COMPLETE mark (rank 0 killed between the file and the mark) and a complete
// one left by an earlier job are never resumed; usage errors and refused
// checkpoints (status 2 and 1) are not restarted; restarts run out.
// Inputs/fault-mpirun.py is the mpirun that injects the faults and counts
// the launches.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 8 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --microbatches 2 --lr 0.01 -o %t.prog
// RUN: braid-run -n 4 %t.prog --steps 30 --seed 1 --save %t.d/full > /dev/null
//
// Three kills in one run (60 steps: room for three late kills, see
// fault-mpirun.py).
// RUN: braid-run -n 4 %t.prog --steps 60 --seed 1 --save %t.d/full60 > /dev/null
// RUN: env FAULT_STATE=%t.d/kills.n FAULT_KILLS=3 FAULT_SEED=7 braid-run --restarts 3 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --steps 60 --seed 1 --save %t.d/kills --save-every 3 > %t.kills.out 2> %t.kills.err
// RUN: FileCheck %s --check-prefix=KILLS < %t.kills.err
// KILLS: fault-mpirun: launch 1: SIGKILL rank {{[0-3]}}
// KILLS: braid-run: the job failed (status 137: a rank died of SIGKILL); restart 1 of 3: resuming {{.*}}kills/step-{{[0-9]+}} at step {{[0-9]+}} ({{[0-9]+}} of 60 steps left)
// KILLS: fault-mpirun: launch 2: SIGKILL rank {{[0-3]}}
// KILLS: braid-run: {{.*}} restart 2 of 3: resuming {{.*}}kills/step-{{[0-9]+}} at step
// KILLS: fault-mpirun: launch 3: SIGKILL rank {{[0-3]}}
// KILLS: braid-run: {{.*}} restart 3 of 3: resuming {{.*}}kills/step-{{[0-9]+}} at step
// KILLS-NOT: braid-run:
// RUN: cat %t.d/kills.n | FileCheck %s --check-prefix=FOUR
// FOUR: {{^4$}}
// RUN: tail -n 2 %t.kills.out | FileCheck %s --check-prefix=END
// END: step 59 loss
// END-NEXT: summary:
// RUN: cmp %t.d/full60/checkpoint.safetensors %t.d/kills/checkpoint.safetensors
//
// A stopped rank: the others time out (status 75) and the job restarts.
// The timeout is well above a step's time under load: at 2 s a loaded CI
// machine once timed out at the first checkpoint before any rank stopped.
// RUN: env FAULT_STATE=%t.d/stop.n FAULT_KILLS=1 FAULT_SEED=3 FAULT_SIGNAL=STOP braid-run --restarts 1 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --steps 30 --seed 1 --save %t.d/stop --save-every 3 --timeout 15 > /dev/null 2> %t.stop.err
// RUN: FileCheck %s --check-prefix=STOP < %t.stop.err
// STOP: TIMEOUT
// STOP: braid-run: the job failed (status 75: a collective timed out or communication failed); restart 1 of 1: resuming {{.*}}stop/step-{{[0-9]+}} at step
// RUN: cmp %t.d/full/checkpoint.safetensors %t.d/stop/checkpoint.safetensors
//
// An incomplete checkpoint and an earlier job's: a 13-step run of another
// seed leaves complete step-3 .. step-12 in inc/; this job (12 steps)
// rewrites step-3 and step-6, and rank 0 dies after step-9's checkpoint
// file, before its mark. The restart resumes step 6: not the incomplete
// step-9, not the earlier job's step-12.
// RUN: braid-run -n 4 %t.prog --steps 13 --seed 2 --save %t.d/inc --save-every 3 > /dev/null
// RUN: test -f %t.d/inc/step-00000012/COMPLETE
// RUN: env FAULT_STATE=%t.d/inc.n FAULT_KILL_BEFORE_COMPLETE=9 braid-run --restarts 1 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --steps 12 --seed 1 --save %t.d/inc --save-every 3 > /dev/null 2> %t.inc.err
// RUN: FileCheck %s --check-prefix=INC < %t.inc.err
// INC: BRAID_TEST_KILL_BEFORE_COMPLETE: rank 0 dies before marking {{.*}}inc/step-00000009 complete
// INC: braid-run: the job failed (status 137: a rank died of SIGKILL); restart 1 of 1: resuming {{.*}}inc/step-00000006 at step 6 (6 of 12 steps left)
// RUN: braid-run -n 4 %t.prog --steps 12 --seed 1 --save %t.d/full12 > /dev/null
// RUN: cmp %t.d/full12/checkpoint.safetensors %t.d/inc/checkpoint.safetensors
// RUN: cat %t.d/inc/step-00000009/COMPLETE | FileCheck %s --check-prefix=MARK
// MARK: {{^step 9$}}
//
// Not restarted: a usage error (2) and a refused checkpoint (1).
// RUN: env FAULT_STATE=%t.d/usage.n not braid-run --restarts 2 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --save-every 3 2> %t.usage.err
// RUN: FileCheck %s --check-prefix=USAGE < %t.usage.err
// USAGE: error: --save-every needs --save DIR
// USAGE: braid-run: the job failed (status 2); not restartable
// RUN: cat %t.d/usage.n | FileCheck %s --check-prefix=ONE
// ONE: {{^1$}}
// RUN: mkdir -p %t.d/bad && head -c 1000 %t.d/full/checkpoint.safetensors > %t.d/bad/checkpoint.safetensors
// RUN: env FAULT_STATE=%t.d/bad.n not braid-run --restarts 2 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --steps 2 --resume %t.d/bad 2> %t.bad.err
// RUN: FileCheck %s --check-prefix=BAD < %t.bad.err
// BAD: DATA_CORRUPT
// BAD: braid-run: the job failed (status 1); not restartable
// RUN: cat %t.d/bad.n | FileCheck %s --check-prefix=ONE
//
// Restarts run out: 2 kills, 1 restart; the status is the last failure's.
// RUN: env FAULT_STATE=%t.d/out.n FAULT_KILLS=2 braid-run --restarts 1 --mpirun %S/Inputs/fault-mpirun.py -n 4 %t.prog --steps 30 --seed 1 --save %t.d/out --save-every 3 > /dev/null 2> %t.out.err || echo "status $?" >> %t.out.err
// RUN: FileCheck %s --check-prefix=OUT < %t.out.err
// OUT: restart 1 of 1: resuming
// OUT: braid-run: the job failed (status 137: a rank died of SIGKILL); 1 restart used, giving up
// OUT-NEXT: {{^status 137$}}
//
// The options are documented.
// RUN: braid-run --help | FileCheck %s --check-prefix=HELP
// HELP: --restarts K
// RUN: not braid-run -n 4 %t.prog --bogus 2>&1 | FileCheck %s --check-prefix=PROGHELP
// PROGHELP: [--save DIR] [--save-every N] [--resume DIR]
// RUN: not braid-run --restarts -1 -n 4 %t.prog 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: braid-run: error: --restarts must be at least 0, got -1
