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
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::braid {

/// How braidc derives a parallel training step from a model's @forward.
struct TrainingOptions {
  /// Mesh degrees: data, tensor and pipeline parallelism.
  int64_t dp = 1, tp = 1, pp = 1;
  /// ZeRO stage (0-3) and sequence parallelism over tp.
  int64_t zero = 0;
  bool sp = false;
  /// Pipeline schedule (braid-pipeline-schedule) and micro-batches per step
  /// (0: the number of stages with pp > 1, else 1).
  std::string schedule = "1f1b";
  int64_t microbatches = 0;
  /// Model chunks per pipeline rank (0: what the schedule needs: 2 for
  /// interleaved-1f1b and zb-v, else 1). zb-v places them in a V.
  int64_t chunks = 0;
  /// braid-autodiff's recomputation: none, full or selective.
  std::string recompute = "none";
  /// braid-train-step: optimizer and learning-rate schedule.
  std::string optimizer = "adamw", decay = "constant";
  double lr = 3.0e-4, minLr = 0.0, clipNorm = 0.0;
  int64_t warmupSteps = 0, totalSteps = 1;
  /// Split collectives into start and wait (braid-async-collectives).
  bool asyncCollectives = false;
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
  TrainingOptions training;
};

/// Checks `options` before any pass runs: degrees, ZeRO stage,
/// micro-batches and chunks that the passes would refuse or silently ignore
/// (ZeRO without dp, sequence parallelism without tp). The message names the
/// option, as a command line spells it.
llvm::Error verifyTrainingOptions(const TrainingOptions &options);

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
