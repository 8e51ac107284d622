//===- ProgramDriver.h - The main() of a generated program ------*- C++ -*-===//
//
// A compiled program is the EmitC module translated to C++ plus a main()
// that makes the entry's inputs as braid-eval does, runs the entry (a
// training step: --steps times) and prints its results. The main() is the
// same on every target: it calls the runtime's program API and the emitted
// entry, never a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_TARGET_PROGRAMDRIVER_H
#define BRAID_TARGET_PROGRAMDRIVER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::braid {

/// One argument or result of the program's entry.
struct ProgramTensor {
  std::string name;
  RankedTensorType type;
  /// Integer inputs: their braid.range (ids drawn from [0, range)).
  int64_t range = 0;
  /// Integer inputs: "tokens" or "labels" when --data fills them (the
  /// argument's braid.data, or its name for models that carry none).
  std::string data;
  /// The step number of a training step (an argument named 'step').
  bool isStep = false;
  /// defer-validation's inputs (braid-train-step): the step whose update
  /// the call validates, and 1 for a call that only validates.
  bool isPreviousStep = false, isFinal = false;
  /// An argument with braid.block_of: each rank holds a block of it.
  bool sharded = false;
  /// With `sharded`: the whole shape and the block spec of
  /// braid_rt_program_block (per dimension: the number of axes, their
  /// indices).
  std::vector<int64_t> global, spec;
};

/// The ranks a per-device program runs on: the module's braid.mesh, with an
/// innermost axis "pp" for a scheduled pipeline.
struct ProgramMesh {
  /// Whether the program runs on the runtime's context (MPI).
  bool present = false;
  std::vector<int64_t> dims;
  std::vector<std::string> names;
};

/// What main() needs to know about the program.
struct ProgramSignature {
  /// The entry function's symbol.
  std::string entry;
  std::vector<ProgramTensor> args, results;
  ProgramMesh mesh;

  /// Whether the entry is a training step (it takes the step number).
  bool isTrainingStep() const;
};

/// Reads the signature of `entry` in `module` before lowering. A training
/// step runs on the runtime's context even without a mesh (a one-rank mesh
/// "dp"): checkpoints, data files and traces come with it. Emits an error on
/// the module, the mesh or the function when braidc cannot generate the
/// entry's inputs.
FailureOr<ProgramSignature> getProgramSignature(ModuleOp module,
                                                StringRef entry);

/// Prints the program's main() (and the headers it needs) to `os`, to follow
/// the translated EmitC module. `seed` is the program's default --seed.
void printProgramMain(llvm::raw_ostream &os, const ProgramSignature &signature,
                      uint64_t seed);

} // namespace mlir::braid

#endif // BRAID_TARGET_PROGRAMDRIVER_H
