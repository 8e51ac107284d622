//===- CommReport.cpp - Collectives, their causes and their cost -----------===//
//
// Collectives, their kind and their ring-model traffic come from
// CollectiveOpInterface.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::braid {
#define GEN_PASS_DEF_COMMREPORTPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

double bytesOf(Type type) {
  auto t = cast<ShapedType>(type);
  return double(t.getNumElements()) * ((t.getElementTypeBitWidth() + 7) / 8);
}

double elementsOf(Type type) {
  return double(cast<ShapedType>(type).getNumElements());
}

struct CommReportPass
    : public braid::impl::CommReportPassBase<CommReportPass> {
  using CommReportPassBase::CommReportPassBase;

  struct Totals {
    double sent = 0, sentElements = 0, seconds = 0;
  };

  /// Per function: the bytes compressed collectives (braid.compress) send,
  /// and what they would send uncompressed.
  double wireBytes = 0, fullBytes = 0;

  /// Reports the collectives of `block` (run `times` times, in `where`,
  /// phase `phase` for untagged ops), recursing into repeated layers; a
  /// layer body runs once per instance of `instances`.
  void report(Block &block, double times, StringRef where,
              std::optional<Phase> phase, llvm::raw_ostream &os,
              llvm::StringMap<Totals> &totals, int64_t instances = 0) {
    for (Operation &op : block) {
      std::optional<Phase> p = getPhase(&op);
      if (!p)
        p = phase;
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
            repeat, repeat.getLayerAttr());
        std::string inner = ("@" + layer.getSymName()).str();
        report(layer.getBody().front(), times * repeat.getCount(), inner, p,
               os, totals, repeat.getCount());
        continue;
      }
      auto coll = dyn_cast<CollectiveOpInterface>(op);
      if (!coll)
        continue;
      // A gather of the next instance's share (braid-zero3-prefetch), or of
      // a value computed from it through sharding-transparent ops (the
      // working copy under bf16-mixed): the last instance, which has none,
      // does not start it.
      double opTimes = times;
      if (instances > 0 && getNextInstanceShareRead(coll.getInput()))
        opTimes = times * (instances - 1) / instances;
      auto mesh =
          SymbolTable::lookupNearestSymbolFrom<MeshOp>(&op, coll.getMeshAttr());
      if (!mesh)
        continue;
      int64_t n = coll.getGroupSize(mesh);
      std::string axes;
      for (Attribute a : coll.getAxes())
        axes += (axes.empty() ? "" : ",") +
                cast<StringAttr>(a).getValue().str();
      StringRef kind = stringifyCollectiveKind(coll.getCollectiveKind());
      bool async = coll.isStarted();
      Type in = coll.getInput().getType(), out = coll.getResultTensorType();
      Type larger = bytesOf(in) >= bytesOf(out) ? in : out;
      double size = bytesOf(larger), elements = elementsOf(larger);
      double factor = coll.getRingTraffic(n);
      double steps = coll.getRingSteps(n);
      double sent = factor * size;
      // braid-compress-gradients: 16 bits per element on the wire.
      auto compress = op.getAttrOfType<StringAttr>("braid.compress");
      if (compress) {
        // PowerSGD: per matrix, two all_reduces of P ([rows, R]) and Q
        // ([cols, R]), f32.
        double wire = factor * elements * 2;
        if (auto psgd = op.getAttrOfType<DictionaryAttr>("braid.powersgd")) {
          auto shape = cast<ShapedType>(in).getShape();
          int64_t r = psgd.getAs<IntegerAttr>("rank").getInt();
          int64_t rows = shape[shape.size() - 2], cols = shape.back();
          double matrices = elements / double(rows * cols);
          // (A reduce_scatter too: it all_reduces P and Q, then slices.)
          wire = 2.0 * (n - 1) / n * 4.0 * matrices * (rows + cols) * r;
          steps *= 2 * matrices;
        }
        wireBytes += opTimes * wire;
        fullBytes += opTimes * sent;
        sent = wire;
      }
      double seconds = steps * alpha + sent / bandwidth;
      auto cause = op.getAttrOfType<StringAttr>("braid.cause");
      StringRef phaseName = p ? stringifyPhase(*p) : "-";
      os << llvm::format("%-24s %-5s %-15s %-8s %4lld %14.0f %14.0f %12.3e %6.0f  ",
                         where.str().c_str(), phaseName.str().c_str(),
                         kind.str().c_str(), axes.c_str(), (long long)n, size,
                         sent, seconds, opTimes)
         << (async ? "[async] " : "")
         << (compress ? "[" + compress.getValue().str() + "] " : "")
         << (cause ? cause.getValue() : StringRef("-")) << "\n";
      for (const std::string &key :
           {std::string("all"), "axis " + axes,
            "phase " + phaseName.str() + " axis " + axes,
            where.str() + " phase " + phaseName.str() + " axis " + axes}) {
        Totals &t = totals[key];
        t.sent += opTimes * sent;
        t.sentElements += opTimes * factor * elements;
        t.seconds += opTimes * seconds;
      }
    }
  }

  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      os << "braid-comm-report: @" << fn.getName() << " (alpha "
         << llvm::format("%g", alpha.getValue()) << " s, bandwidth "
         << llvm::format("%g", bandwidth.getValue()) << " B/s)\n";
      os << llvm::format("%-24s %-5s %-15s %-8s %4s %14s %14s %12s %6s  %s\n",
                         "where", "phase", "collective", "axes", "n",
                         "bytes/device", "sent/device", "time (s)", "times",
                         "cause");
      llvm::StringMap<Totals> totals;
      wireBytes = fullBytes = 0;
      report(fn.getBody().front(), 1.0, ("@" + fn.getName()).str(),
             std::nullopt, os, totals);
      SmallVector<StringRef> keys;
      for (auto &kv : totals)
        keys.push_back(kv.getKey());
      llvm::sort(keys);
      for (StringRef key : keys) {
        const Totals &t = totals[key];
        os << llvm::format("total %-40s sent %16.0f bytes %16.0f elements "
                           "%12.3e s\n",
                           key.str().c_str(), t.sent, t.sentElements,
                           t.seconds);
      }
      if (fullBytes > 0)
        os << llvm::format("compressed gradient reductions: sent %.0f bytes "
                           "instead of %.0f, saved %.0f bytes (%.1f%% of "
                           "all sent)\n",
                           wireBytes, fullBytes, fullBytes - wireBytes,
                           100.0 * (fullBytes - wireBytes) /
                               (totals["all"].sent + fullBytes - wireBytes));
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
