//===- BraidPipeline.cpp - The pass pipeline of braidc --------------------===//

#include "braid/Pipelines/BraidPipeline.h"
#include "braid/Conversion/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::braid;

void mlir::braid::buildCodegenPipeline(OpPassManager &pm,
                                       const CodegenOptions &options) {
  ConvertBraidToEmitCPassOptions lowerOptions;
  lowerOptions.entry = options.entry;
  pm.addPass(createConvertBraidToEmitCPass(lowerOptions));
}

namespace {
struct CodegenPipelineOptions
    : public PassPipelineOptions<CodegenPipelineOptions> {
  Option<std::string> entry{*this, "entry",
                            llvm::cl::desc("The function the program runs."),
                            llvm::cl::init("forward")};
};
} // namespace

void mlir::braid::registerCodegenPipeline() {
  PassPipelineRegistration<CodegenPipelineOptions>(
      "braid-codegen-pipeline",
      "The pipeline of braidc: a braid model to EmitC calls of the runtime.",
      [](OpPassManager &pm, const CodegenPipelineOptions &opts) {
        CodegenOptions options;
        options.entry = opts.entry;
        buildCodegenPipeline(pm, options);
      });
}
