//===- BraidToEmitC.cpp - braid to EmitC calls of the runtime's kernels ---===//
//
// Lowers a braid program (single-device or per-device) to EmitC: tensors
// become buffers, compute ops become calls of the runtime's kernels
// (braid/rt/kernels.h), parameters become slots of a global table,
// braid.repeat becomes a loop calling the layer's function, braid.fused one
// loop nest. This file holds
// the pass; Lowering.h says where the rest is. See docs/codegen.md.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"
#include "braid/Conversion/Passes.h"

#define DEBUG_TYPE "braid-lower-to-emitc"

namespace mlir::braid {
#define GEN_PASS_DEF_CONVERTBRAIDTOEMITCPASS
#include "braid/Conversion/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

std::string mlir::braid::getEmittedFunctionName(StringRef symbol) {
  std::string name = "braid_";
  for (char c : symbol)
    name += llvm::isAlnum(c) || c == '_' ? c : '_';
  return name;
}

static void populateLowerings(LoweringTable &t) {
  populateParamLowerings(t);
  populateComputeLowerings(t);
  populateCollectiveLowerings(t);
  populatePipelineLowerings(t);
  populateFusedLowerings(t);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertBraidToEmitCPass
    : public braid::impl::ConvertBraidToEmitCPassBase<ConvertBraidToEmitCPass> {
  using ConvertBraidToEmitCPassBase::ConvertBraidToEmitCPassBase;

  void runOnOperation() override {
    LoweringTable table;
    populateLowerings(table);
    const TargetDescription *description = TargetDescription::get(target);
    if (!description) {
      getOperation().emitError()
          << "braid-lower-to-emitc: unknown target '" << target
          << "' (cpu or cuda)";
      return signalPassFailure();
    }
    ModuleLowering lowering(getOperation(), table, *description, spmd);
    lowering.reuseBuffers = reuseBuffers;
    if (failed(lowering.run(entry)))
      signalPassFailure();
  }
};
} // namespace
