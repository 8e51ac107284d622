// RUN: braid-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// Found by unittests/Fuzz/fuzz_braid_opt.cpp: a function declaration (no
// body, so no block arguments) with braid attributes on its arguments
// crashed the verifier, which read the type from the missing block. The
// type now comes from the function type, and the attributes are checked.

// CHECK: func.func private @decl(tensor<4xi32> {braid.range = 8 : i64}, tensor<2xf32> {braid.name = "x"})
func.func private @decl(tensor<4xi32> {braid.range = 8 : i64}, tensor<2xf32> {braid.name = "x"})

// -----

// expected-error@+1 {{argument #0: braid.range applies to integer tensors, not 'tensor<4xf32>'}}
func.func private @bad(tensor<4xf32> {braid.range = 8 : i64})
