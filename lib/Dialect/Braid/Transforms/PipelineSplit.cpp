//===- PipelineSplit.cpp - Assign layers to pipeline stages ----------------===//
//
// Places the layer instances of a forward function, and the runs of ops
// between them, into p*v consecutive chunks, balanced by forward FLOPs or as
// the user gives, and splits repeats at chunk boundaries.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/CostUtils.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

namespace mlir::braid {
#define GEN_PASS_DEF_PIPELINESPLITPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// What the split places: one instance of a repeated layer, or a run of ops
/// outside layers (parameters excepted: they follow their users).
struct Unit {
  RepeatOp repeat;
  int64_t instance = 0;
  SmallVector<Operation *> ops;
  double flops = 0;
};

/// Splits `costs` into `k` non-empty consecutive groups minimising the
/// largest group's sum; returns the group of each element.
SmallVector<int64_t> balance(ArrayRef<double> costs, int64_t k) {
  int64_t n = costs.size();
  SmallVector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[g][j]: the smallest largest sum of the first j units in g groups.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(k + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t g = 1; g <= k; ++g)
    for (int64_t j = g; j <= n; ++j)
      for (int64_t i = g - 1; i < j; ++i) {
        double value = std::max(best[g - 1][i], prefix[j] - prefix[i]);
        // Ties go to the later cut, so earlier chunks take fewer units.
        if (value <= best[g][j]) {
          best[g][j] = value;
          cut[g][j] = i;
        }
      }
  SmallVector<int64_t> group(n, 0);
  for (int64_t g = k, j = n; g >= 1; --g) {
    int64_t i = cut[g][j];
    for (int64_t u = i; u < j; ++u)
      group[u] = g - 1;
    j = i;
  }
  return group;
}

struct PipelineSplitPass
    : public braid::impl::PipelineSplitPassBase<PipelineSplitPass> {
  using PipelineSplitPassBase::PipelineSplitPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(entry);
    if (!func) {
      module.emitError() << "braid-pipeline-split: no function @" << entry;
      return signalPassFailure();
    }
    if (stages < 1 || chunks < 1) {
      func.emitError() << "braid-pipeline-split: stages and chunks must be "
                          "at least 1 (got stages="
                       << int64_t(stages) << ", chunks=" << int64_t(chunks) << ")";
      return signalPassFailure();
    }
    if (placement != "loop" && placement != "v") {
      func.emitError() << "braid-pipeline-split: unknown placement '"
                       << placement << "'; expected loop or v";
      return signalPassFailure();
    }
    if (placement == "v" && chunks != 2) {
      func.emitError() << "braid-pipeline-split: placement=v needs chunks=2 "
                          "(got "
                       << int64_t(chunks) << ")";
      return signalPassFailure();
    }
    int64_t k = stages * chunks;

    SmallVector<Unit> units;
    SmallVector<ParamOp> params;
    int64_t instances = 0;
    for (Operation &op : func.getBody().front().without_terminator()) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        params.push_back(param);
        continue;
      }
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        if (repeat.getReverse() ||
            repeat.getNumCarried() != repeat.getInputs().size()) {
          repeat.emitError() << "braid-pipeline-split: only plain repeats "
                                "(every operand carried, forward order) can "
                                "be split; run it before braid-autodiff";
          return signalPassFailure();
        }
        int64_t count = repeat.getCount();
        int64_t first = repeat.getFirst();
        double each = getTotalFlops(repeat) / std::max<int64_t>(count, 1);
        for (int64_t i = 0; i < count; ++i)
          units.push_back({repeat, first + i, {}, each});
        instances += count;
        continue;
      }
      if (units.empty() || units.back().repeat)
        units.push_back({});
      units.back().ops.push_back(&op);
      units.back().flops += getTotalFlops(&op);
    }
    int64_t n = units.size();

    SmallVector<int64_t> chunkOf;
    bool userGiven = !layers.empty();
    if (userGiven) {
      if ((int64_t)layers.size() != k) {
        func.emitError() << "braid-pipeline-split: layers= gives "
                         << layers.size() << " chunks, but stages*chunks = "
                         << k;
        return signalPassFailure();
      }
      int64_t sum = 0;
      for (int64_t count : layers) {
        if (count < 0) {
          func.emitError() << "braid-pipeline-split: layers= has a negative "
                              "count "
                           << count;
          return signalPassFailure();
        }
        sum += count;
      }
      if (sum != instances) {
        func.emitError() << "braid-pipeline-split: layers= places " << sum
                         << " layer instances, but @" << entry << " has "
                         << instances
                         << "; every layer must be placed exactly once";
        return signalPassFailure();
      }
      // Instances in order; ops before the first instance go to chunk 0,
      // ops after the last to the last chunk, ops between two instances
      // with the earlier one.
      int64_t chunk = 0, used = 0, seen = 0;
      for (Unit &unit : units) {
        if (!unit.repeat) {
          chunkOf.push_back(seen == 0 ? 0 : seen == instances ? k - 1 : chunk);
          continue;
        }
        while (used == layers[chunk]) {
          ++chunk;
          used = 0;
        }
        chunkOf.push_back(chunk);
        ++used;
        ++seen;
      }
    } else {
      if (n < k) {
        func.emitError() << "braid-pipeline-split: @" << entry << " has "
                         << n
                         << " units to place (layer instances and runs of "
                            "ops outside layers), fewer than the "
                         << k << " chunks";
        return signalPassFailure();
      }
      SmallVector<double> costs;
      for (Unit &unit : units)
        costs.push_back(unit.flops);
      chunkOf = balance(costs, k);
    }
    SmallVector<bool> hasWork(k, false);
    for (int64_t c : chunkOf)
      hasWork[c] = true;
    for (int64_t c = 0; c < k; ++c)
      if (!hasWork[c]) {
        // A chunk may hold no layer when it holds ops outside layers: the
        // first takes those before the first layer (an embedding), the last
        // those after the last (a head).
        func.emitError() << "braid-pipeline-split: chunk " << c
                         << " would run nothing (no layer, and no ops outside "
                            "layers fall in it); give it at least one layer";
        return signalPassFailure();
      }

    // Rewrite: mark ops, split repeats at chunk boundaries.
    MLIRContext *ctx = &getContext();
    auto chunkAttr = [&](int64_t c) {
      return IntegerAttr::get(IntegerType::get(ctx, 64), c);
    };
    DenseMap<Operation *, int64_t> opChunk;
    for (auto [unit, c] : llvm::zip(units, chunkOf))
      for (Operation *op : unit.ops) {
        op->setAttr("braid.chunk", chunkAttr(c));
        opChunk[op] = c;
      }
    // Runs of instances per repeat: (repeat, first instance, count, chunk).
    struct Piece {
      int64_t first, count, chunk;
    };
    llvm::MapVector<Operation *, SmallVector<Piece>> pieces;
    for (auto [unit, c] : llvm::zip(units, chunkOf)) {
      if (!unit.repeat)
        continue;
      SmallVector<Piece> &list = pieces[unit.repeat];
      if (!list.empty() && list.back().chunk == c)
        ++list.back().count;
      else
        list.push_back({unit.instance, 1, c});
    }
    // Report rows, gathered before the repeats are replaced.
    SmallVector<double> flops(k, 0);
    SmallVector<SmallVector<std::string>> what(k);
    SmallVector<SmallVector<std::string>> names(k);
    for (auto [unit, c] : llvm::zip(units, chunkOf))
      flops[c] += unit.flops;
    // Labels in program order.
    for (auto [index, unit] : llvm::enumerate(units)) {
      int64_t c = chunkOf[index];
      if (!unit.repeat) {
        what[c].push_back("(" + std::to_string(unit.ops.size()) +
                          " ops outside layers)");
        continue;
      }
      for (const Piece &piece : pieces[unit.repeat])
        if (piece.first == unit.instance) {
          StringRef prefix = unit.repeat.getPrefix();
          std::string label =
              (prefix.empty() ? "@" + unit.repeat.getLayer() : prefix).str() +
              "." + unit.repeat.getInstanceName(piece.first);
          if (piece.count > 1)
            label += "-" + unit.repeat.getInstanceName(piece.first +
                                                       piece.count - 1);
          what[c].push_back(label);
        }
    }
    for (auto &[op, list] : pieces) {
      auto repeat = cast<RepeatOp>(op);
      auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
          repeat, repeat.getLayerAttr());
      for (const Piece &piece : list) {
        for (int64_t i = piece.first; i < piece.first + piece.count; ++i)
          layer.walk([&](ParamOp param) {
            names[piece.chunk].push_back(repeat.getParamPrefix(i) +
                                         param.getName().str());
          });
      }
    }
    bool anyShared = false;
    for (ParamOp param : params) {
      llvm::SetVector<int64_t> users;
      for (Operation *user : param->getUsers()) {
        Operation *top = func.getBody().front().findAncestorOpInBlock(*user);
        if (auto it = opChunk.find(top); it != opChunk.end())
          users.insert(it->second);
        else if (auto repeat = dyn_cast_or_null<RepeatOp>(top))
          users.insert(pieces[repeat].front().chunk);
      }
      SmallVector<int64_t> list(users.begin(), users.end());
      llvm::sort(list);
      if (list.empty())
        list.push_back(0);
      param->setAttr("braid.chunk", chunkAttr(list.front()));
      anyShared |= list.size() > 1;
      for (int64_t c : list)
        names[c].push_back(param.getName().str() +
                           (list.size() > 1 ? "*" : ""));
    }

    for (auto &[op, list] : pieces) {
      auto repeat = cast<RepeatOp>(op);
      if (list.size() == 1) {
        repeat->setAttr("braid.chunk", chunkAttr(list.front().chunk));
        continue;
      }
      OpBuilder builder(repeat);
      ValueRange inputs = repeat.getInputs();
      Operation *last = nullptr;
      for (const Piece &piece : list) {
        Operation *clone = builder.clone(*repeat);
        clone->setOperands(inputs);
        clone->setAttr("first", builder.getI64IntegerAttr(piece.first));
        clone->setAttr("count", builder.getI64IntegerAttr(piece.count));
        // Each piece keeps the names of its own instances.
        if (std::optional<ArrayAttr> all = repeat.getInstanceNames())
          clone->setAttr("instance_names",
                         builder.getArrayAttr(all->getValue().slice(
                             piece.first - repeat.getFirst(), piece.count)));
        clone->setAttr("braid.chunk", chunkAttr(piece.chunk));
        inputs = clone->getResults();
        last = clone;
      }
      repeat->replaceAllUsesWith(last->getResults());
      repeat->erase();
    }

    SmallVector<int64_t> stageOf;
    for (int64_t c = 0; c < k; ++c)
      stageOf.push_back(placement == "v" && c >= stages ? 2 * stages - 1 - c
                                                        : c % stages);
    func->setAttr("braid.chunk_stages",
                  DenseI64ArrayAttr::get(ctx, stageOf));

    if (!report)
      return;
    llvm::raw_ostream &os = llvm::outs();
    os << "braid-pipeline-split: @" << entry << ", " << k << " chunks on "
       << int64_t(stages) << " stages (" << (userGiven ? "as given" : "balanced")
       << ", placement " << placement << ")\n";
    os << llvm::format("%5s %5s %16s %s\n", "chunk", "stage", "F FLOPs",
                       "layers");
    for (int64_t c = 0; c < k; ++c) {
      os << llvm::format("%5lld %5lld %16.0f ", (long long)c,
                         (long long)stageOf[c], flops[c]);
      llvm::interleaveComma(what[c], os);
      os << "\n";
    }
    for (int64_t c = 0; c < k; ++c) {
      os << "chunk " << c << " parameters:";
      for (const std::string &name : names[c])
        os << " " << name;
      os << "\n";
    }
    if (anyShared)
      os << "(* used by several chunks)\n";
  }
};

} // namespace
