// Tests that braidc compiles the GPT forward loss to an executable whose
// loss equals braid-eval's within 1e-5 relative, for the default seed baked
// in by braidc --seed and for one given to the program.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.mlir
// RUN: braidc %t.mlir -o %t.prog --seed 5 --dump-dir %t.dump
// RUN: %t.prog > %t.out5
// RUN: braid-eval --entry forward --seed 5 %t.mlir > %t.eval5
// RUN: %PYTHON %S/Inputs/compare-results.py %t.out5 %t.eval5 --rtol 1e-5 | FileCheck %s
// RUN: %t.prog --seed 11 > %t.out11
// RUN: braid-eval --entry forward --seed 11 %t.mlir > %t.eval11
// RUN: %PYTHON %S/Inputs/compare-results.py %t.out11 %t.eval11 --rtol 1e-5 | FileCheck %s
// RUN: FileCheck %s --check-prefix=CPP < %t.dump/program.cpp

// CHECK: ok: 1 losses within 1e-05

// CPP: void braid_block(float* [[X:v[0-9]+]], int64_t* [[SLOTS:v[0-9]+]], float* [[OUT:v[0-9]+]]) {
// CPP: braid_rt_attention_f32(
// CPP: void braid_forward(int32_t* {{v[0-9]+}}, int32_t* {{v[0-9]+}}, float* {{v[0-9]+}}) {
// CPP: for (int64_t
// CPP: braid_block(
// CPP: braid_rt_cross_entropy_f32(
// CPP: int main(
