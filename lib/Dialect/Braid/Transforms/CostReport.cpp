//===- CostReport.cpp - Per-layer FLOPs and activation memory --------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::braid {
#define GEN_PASS_DEF_COSTREPORTPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

struct Cost {
  double matmul[3] = {0, 0, 0};
  double flops = 0;
  double activationBytes = 0;
  int64_t instances = 1;
};

double bytesOf(Type type) {
  auto t = cast<ShapedType>(type);
  return double(t.getNumElements()) *
         ((t.getElementTypeBitWidth() + 7) / 8);
}

/// Adds the cost of `op` (in phase `phase`), times `times`, to `cost`;
/// repeats count their layer's body once per instance.
void accumulate(Operation *op, Phase phase, double times, Cost &cost) {
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
        repeat, repeat.getLayerAttr());
    for (Operation &inner : layer.getBody().front())
      accumulate(&inner, getPhase(&inner).value_or(phase),
                 times * repeat.getCount(), cost);
    return;
  }
  auto c = dyn_cast<CostOpInterface>(op);
  if (!c)
    return;
  cost.matmul[(int)phase] += times * c.getMatmulFlops();
  cost.flops += times * c.getFlops();
}

struct CostReportPass
    : public braid::impl::CostReportPassBase<CostReportPass> {
  using CostReportPassBase::CostReportPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string gradName = entry + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!grad) {
      module.emitError() << "braid-cost-report: no function @" << gradName
                         << "; run braid-autodiff (entry=" << entry
                         << ") first";
      return signalPassFailure();
    }
    // Rows: each repeated layer by prefix, then everything else.
    llvm::MapVector<std::string, Cost, llvm::StringMap<unsigned>> rows;
    Cost outside;
    for (Operation &op : grad.getBody().front().without_terminator()) {
      std::optional<Phase> phase = getPhase(&op);
      auto repeat = dyn_cast<RepeatOp>(op);
      if (!repeat || !phase) {
        accumulate(&op, phase.value_or(Phase::F), 1.0, outside);
        continue;
      }
      StringRef layer = repeat.getLayer();
      std::string key = (repeat.getPrefix() + " (@" +
                         layer.drop_back(layer.ends_with(".F") ||
                                                 layer.ends_with(".B") ||
                                                 layer.ends_with(".W")
                                             ? 2
                                             : 0) +
                         ")")
                            .str();
      Cost &row = rows[key];
      row.instances = repeat.getCount();
      // Per instance.
      accumulate(&op, *phase, 1.0 / repeat.getCount(), row);
      if (*phase == Phase::F)
        for (Value r : repeat.getResults().drop_front(repeat.getNumCarried()))
          row.activationBytes += bytesOf(r.getType()) / repeat.getCount();
    }

    llvm::raw_ostream &os = llvm::outs();
    os << "braid-cost-report: @" << gradName
       << " (FLOPs and bytes per instance)\n";
    os << llvm::format("%-24s %9s %16s %16s %16s %16s %16s\n", "layer",
                       "instances", "F matmul FLOPs", "B matmul FLOPs",
                       "W matmul FLOPs", "all FLOPs", "saved act. bytes");
    auto print = [&](StringRef name, const Cost &c, bool activations) {
      os << llvm::format("%-24s %9lld %16.0f %16.0f %16.0f %16.0f ",
                         name.str().c_str(), (long long)c.instances,
                         c.matmul[0], c.matmul[1], c.matmul[2], c.flops);
      if (activations)
        os << llvm::format("%16.0f\n", c.activationBytes);
      else
        os << llvm::format("%16s\n", "-");
    };
    for (auto &[name, cost] : rows)
      print(name, cost, true);
    print("(outside layers)", outside, false);
    markAllAnalysesPreserved();
  }
};

} // namespace
