//===- braid-opt.cpp - The braid optimizer driver --------------------------===//
//
// mlir-opt for braid IR: the braid dialect, the upstream dialects braid IR
// uses, and the generic upstream passes (canonicalize, cse, ...).
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Pipelines/BraidPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::braid::registerBraidPasses();
  mlir::braid::registerBraidConversionPasses();
  mlir::braid::registerCodegenPipeline();
  mlir::DialectRegistry registry;
  registry.insert<mlir::braid::BraidDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect, mlir::emitc::EmitCDialect>();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Braid optimizer driver\n", registry);
  // A diagnostic names its op and location and shows the source line; the
  // op printed in generic form after it (a whole function or module when a
  // pass reports on one) is kilobytes of noise. Unless asked for, leave it
  // out.
  auto &options = llvm::cl::getRegisteredOptions();
  auto printOp = options.find("mlir-print-op-on-diagnostic");
  if (printOp != options.end() && printOp->second->getNumOccurrences() == 0)
    static_cast<llvm::cl::opt<bool> *>(printOp->second)->setValue(false);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
}
