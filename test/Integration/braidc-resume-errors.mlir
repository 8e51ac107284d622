// Tests that --resume refuses a checkpoint with tensors the program does not
// have (it trained on silently; braid-eval --weights refuses the same file):
// a 3-layer GPT's checkpoint resumed by the 2-layer program, on one device
// and on dp = 2, where every rank reports it and names the extra tensors;
// the exit status is non-zero and no step runs.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %PYTHON -m braid.models gpt --layers 3 --hidden 16 --heads 2 --seq 8 --vocab 32 --batch 4 -o %t.l3.mlir
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 16 --heads 2 --seq 8 --vocab 32 --batch 4 -o %t.l2.mlir
// RUN: braidc %t.l3.mlir --train -o %t.l3
// RUN: %t.l3 --steps 1 --save %t.d/l3 > /dev/null
// RUN: braidc %t.l2.mlir --train -o %t.l2
// RUN: braidc %t.l2.mlir --train --mesh dp=2 -o %t.l2dp
//
// The 2-layer program resumes its own kind of checkpoint.
// RUN: %t.l2 --steps 1 --save %t.d/l2 > /dev/null
// RUN: %t.l2 --steps 1 --resume %t.d/l2 | FileCheck %s --check-prefix=OWN
// OWN: step 1 loss
//
// RUN: not %t.l2 --steps 1 --resume %t.d/l3 > %t.one.out 2> %t.one.err
// RUN: FileCheck %s --check-prefix=EXTRA < %t.one.err
// RUN: not grep step %t.one.out
// RUN: not braid-run -n 2 %t.l2dp --steps 1 --resume %t.d/l3 > %t.dp.out 2> %t.dp.err
// RUN: FileCheck %s --check-prefix=EXTRA < %t.dp.err
// RUN: grep -c 'does not have' %t.dp.err | FileCheck %s --check-prefix=TWO
// RUN: not grep step %t.dp.out

// EXTRA: error: rank {{[01]}}: --resume {{.*}}l3/checkpoint.safetensors: the checkpoint has {{[0-9]+}} tensors that this program does not have: 'h.2.{{.*}}', 'h.2.{{.*}}', 'h.2.{{.*}}', 'h.2.{{.*}}', ... (a checkpoint of another model or optimizer?)
// TWO: 2
