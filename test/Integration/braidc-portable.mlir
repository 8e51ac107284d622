// Tests that braidc compiles a program for this machine's CPU by default
// (-march=native, linking the kernels built for it) and for any machine of
// the architecture with --portable (the compiler's default target, the
// portable kernels), both without FMA contraction; and that the two train
// alike: the same checkpoint bit for bit after 10 AdamW steps (neither
// contracts nor reassociates, so only the vector width differs), and
// losses equal to braid-eval's within 1e-5 relative.
//
// REQUIRES: braid-native
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --lr 0.01 -o %t.native --dump-dir %t.d/native
// RUN: braidc %t.mlir --lr 0.01 --portable -o %t.portable --dump-dir %t.d/portable
// RUN: FileCheck %s --check-prefix=NATIVE < %t.d/native/compile.sh
// RUN: FileCheck %s --check-prefix=PORTABLE < %t.d/portable/compile.sh
//
// NATIVE: -O2 -std=c++17 -w -ffp-contract=off -march=native -I
// NATIVE-SAME: libbraid_rt_kernels_native.a
// PORTABLE: -O2 -std=c++17 -w -ffp-contract=off -I
// PORTABLE-NOT: -march
// PORTABLE-NOT: kernels_native
// PORTABLE-SAME: libbraid_rt_kernels.a
//
// RUN: %t.native --steps 10 --seed 3 --save %t.d/native.ck > %t.native.out
// RUN: %t.portable --steps 10 --seed 3 --save %t.d/portable.ck > %t.portable.out
// RUN: cmp %t.d/native.ck/checkpoint.safetensors %t.d/portable.ck/checkpoint.safetensors
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01" -o %t.train.mlir
// RUN: braid-eval %t.train.mlir --steps 10 --seed 3 > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.native.out %t.eval --rtol 1e-5 | FileCheck %s --check-prefix=AGREE
// RUN: %PYTHON %S/Inputs/compare-results.py %t.portable.out %t.eval --rtol 1e-5 | FileCheck %s --check-prefix=AGREE
//
// AGREE: ok: 10 losses within 1e-05
//
// --portable is for the CPU target.
// RUN: not braidc %t.mlir --lr 0.01 --portable --target cuda --emit cu -o %t.cu 2>&1 | FileCheck %s --check-prefix=CUDA
// CUDA: braidc: --portable is a CPU target option
