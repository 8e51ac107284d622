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

#include <string>

namespace mlir::braid {

/// What braidc compiles. Single device so far: no mesh, no pipeline.
struct CodegenOptions {
  /// The function the program runs.
  std::string entry = "forward";
};

/// Adds the passes that take a braid model to EmitC for `options`.
void buildCodegenPipeline(OpPassManager &pm, const CodegenOptions &options);

/// Registers `--braid-codegen-pipeline` (with option `entry`).
void registerCodegenPipeline();

} // namespace mlir::braid

#endif // BRAID_PIPELINES_BRAIDPIPELINE_H
