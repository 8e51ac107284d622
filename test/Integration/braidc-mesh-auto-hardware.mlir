// Tests braidc --mesh auto's default hardware description: without
// --hardware, a CPU program is planned on cpu-local-<N>ranks for --devices N
// where that file exists (ranks sharing cores wait on each other according
// to their number, so a description is calibrated for a rank count), and on
// cpu-local otherwise. BRAID_HARDWARE_DIR comes first in the search path, so
// copies of the toy file under those names stand in for the shipped ones.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 32 --heads 4 --seq 16 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.hw && mkdir -p %t.hw
// RUN: sed 's/"planner-toy"/"cpu-local-8ranks"/' %S/Inputs/planner-toy.json > %t.hw/cpu-local-8ranks.json
// RUN: sed 's/"planner-toy"/"cpu-local"/' %S/Inputs/planner-toy.json > %t.hw/cpu-local.json
//
// RUN: env BRAID_HARDWARE_DIR=%t.hw braidc %t.mlir --mesh auto --devices 8 --global-batch 16 --plan-only | FileCheck %s --check-prefix=EIGHT
// EIGHT: braidc: plan for 8 devices (cpu-local-8ranks, global batch 16)
//
// RUN: env BRAID_HARDWARE_DIR=%t.hw braidc %t.mlir --mesh auto --devices 4 --global-batch 16 --plan-only | FileCheck %s --check-prefix=FOUR
// FOUR: braidc: plan for 4 devices (cpu-local, global batch 16)
//
// An explicit --hardware wins over the per-rank default.
// RUN: env BRAID_HARDWARE_DIR=%t.hw braidc %t.mlir --mesh auto --devices 8 --global-batch 16 --hardware %S/Inputs/planner-toy.json --plan-only | FileCheck %s --check-prefix=GIVEN
// GIVEN: braidc: plan for 8 devices (planner-toy, global batch 16)
