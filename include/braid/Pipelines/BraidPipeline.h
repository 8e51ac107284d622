//===- BraidPipeline.h - The pass pipeline of braidc ------------*- C++ -*-===//
//
// The one pass pipeline from a braid model to EmitC, as a function of an
// options struct: braidc runs it, and braid-opt registers it as
// `--braid-codegen-pipeline` so that any compile can be replayed and cut
// pass by pass.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PIPELINES_BRAIDPIPELINE_H
#define BRAID_PIPELINES_BRAIDPIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::braid {

/// How braidc derives a parallel training step from a model's @forward:
/// mesh degrees, ZeRO and sequence parallelism, the pipeline schedule,
/// micro-batches and chunks (0: the default), recomputation, the optimizer
/// and its learning-rate schedule, async collectives. Declared in
/// TrainingOptions.def with their flags, defaults and help.
struct TrainingOptions {
#define BRAID_MESH_OPTION(NAME, FLAG, DESC) int64_t NAME = 1;
#define BRAID_TRAINING_OPTION(TYPE, NAME, FLAG, DEFAULT, DESC)                 \
  TYPE NAME = DEFAULT;
#include "braid/Pipelines/TrainingOptions.def"
};

/// What braidc compiles: `entry` as written, or with `train`, the training
/// step derived from @forward under `training` (the entry is then
/// train_step, and `spmd` is implied).
struct CodegenOptions {
  /// The function the program runs.
  std::string entry = "forward";
  bool train = false;
  /// Run on the runtime's context even without a mesh (one rank), as
  /// training programs do (checkpoints, data files and traces need it).
  bool spmd = false;
  /// The target: "cpu" or "cuda" (braid-lower-to-emitc's `target`).
  std::string target = "cpu";
  /// Group elementwise chains into braid.fused regions before lowering
  /// (braid-fuse-elementwise; braidc --no-fuse clears it).
  bool fuse = true;
  /// Fold bias adds (and tanh GELUs) into their matmuls before lowering
  /// (braid-fuse-matmul-epilogue; braidc --no-matmul-epilogue or --no-fuse
  /// clears it).
  bool fuseMatmulEpilogue = true;
  /// Plan each function's buffers so that values whose lifetimes do not
  /// overlap share memory, with in-place updates (braid-lower-to-emitc's
  /// reuse-buffers; braidc --no-buffer-reuse clears it).
  bool bufferReuse = true;
  TrainingOptions training;
};

/// Checks `options` before any pass runs: degrees, ZeRO stage,
/// micro-batches and chunks that the passes would refuse or silently ignore
/// (ZeRO without dp, sequence parallelism without tp). The message names the
/// option, as a command line spells it.
llvm::Error verifyTrainingOptions(const TrainingOptions &options);

/// The layer counts of a stage-layers option ("2,3,3,2"; empty: none), or
/// an error naming the malformed part.
llvm::Expected<llvm::SmallVector<int64_t>>
parseStageLayers(llvm::StringRef text);

/// The chunks per rank that `options` runs: `chunks`, or the schedule's
/// default when 0 (as given when the schedule is unknown or refuses it:
/// the passes then say why).
int64_t getPipelineChunks(const TrainingOptions &options);

/// Adds the passes that derive the parallel training step: pipeline split,
/// autodiff, the training step (through braid.pipeline when pp > 1),
/// sharding and partitioning over dp x tp, outlining and scheduling.
void buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// Adds the passes that take a braid module to EmitC for `options` (the
/// training passes first when `options.train`).
void buildCodegenPipeline(OpPassManager &pm, const CodegenOptions &options);

/// Registers `--braid-codegen-pipeline` (with option `entry`).
void registerCodegenPipeline();

} // namespace mlir::braid

#endif // BRAID_PIPELINES_BRAIDPIPELINE_H
