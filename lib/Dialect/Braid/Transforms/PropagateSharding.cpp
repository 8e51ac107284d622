//===- PropagateSharding.cpp - Sharding propagation ------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallSet.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace mlir::braid {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// The priority of a dimension nothing asks to split: it stays open to
/// any split that reaches it.
constexpr int64_t kOpen = std::numeric_limits<int64_t>::min();

/// What is known about a value's sharding and why.
struct Known {
  Sharding sharding;
  /// Per dimension, the priority of the annotation that decided it. Kept
  /// per dimension so that a strong split of one dimension (the batch)
  /// does not shield the others from weaker splits (tensor and sequence
  /// parallelism).
  SmallVector<int64_t> priority;
  /// The annotation it derives from.
  std::string why;
  /// The op that moved it here, if it was propagated.
  Operation *via = nullptr;
};

/// `rank` dimensions, each at `priority`.
SmallVector<int64_t> uniform(int64_t rank, int64_t priority) {
  return SmallVector<int64_t>(rank, priority);
}

/// Merges into `to` each dimension of `from` whose priority is higher,
/// taking its axes from any weaker dimension of `to` that holds them.
/// Returns whether `to` changed.
bool mergeDims(Known &to, const Known &from) {
  SmallVector<unsigned> order;
  for (unsigned d = 0; d < from.priority.size(); ++d)
    if (from.priority[d] > to.priority[d] &&
        (from.sharding.dims[d] != to.sharding.dims[d] ||
         from.sharding.getBlocks(d) != to.sharding.getBlocks(d)))
      order.push_back(d);
  // Ties in dimension order (llvm::sort with a total order: the stable
  // sort's, without libstdc++ 12's deprecated get_temporary_buffer).
  llvm::sort(order, [&](unsigned a, unsigned b) {
    if (from.priority[a] != from.priority[b])
      return from.priority[a] > from.priority[b];
    return a < b;
  });
  bool changed = false;
  for (unsigned d : order) {
    if (from.priority[d] <= to.priority[d])
      continue;
    // An axis splits one dimension only: the weaker holder gives it up.
    ArrayRef<StringRef> axes = from.sharding.dims[d];
    bool blocked = false;
    for (unsigned e = 0; e < to.priority.size(); ++e)
      if (e != d && to.priority[e] >= from.priority[d] &&
          llvm::any_of(to.sharding.dims[e], [&](StringRef a) {
            return llvm::is_contained(axes, a);
          }))
        blocked = true;
    if (blocked)
      continue;
    for (unsigned e = 0; e < to.priority.size(); ++e)
      if (e != d && llvm::any_of(to.sharding.dims[e], [&](StringRef a) {
            return llvm::is_contained(axes, a);
          })) {
        to.sharding.setDim(e, {});
        to.priority[e] = kOpen;
      }
    to.sharding.setDim(d, axes, from.sharding.getBlocks(d));
    to.priority[d] = from.priority[d];
    if (!axes.empty())
      to.why = from.why;
    changed = true;
  }
  return changed;
}

/// Whether priorities `now` outrank `was`: compared strongest first, the
/// first that differs is higher. A split that takes an axis from a weaker
/// one outranks it; one that moves an axis at the same priority does not.
bool isStronger(ArrayRef<int64_t> now, ArrayRef<int64_t> was) {
  SmallVector<int64_t> a(now), b(was);
  llvm::sort(a, std::greater<int64_t>());
  llvm::sort(b, std::greater<int64_t>());
  return std::lexicographical_compare(b.begin(), b.end(), a.begin(), a.end());
}

double bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return double(t.getNumElements()) *
         ((t.getElementTypeBitWidth() + 7) / 8);
}

std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return s;
}

class Propagator {
public:
  Propagator(MeshOp mesh) : mesh(mesh) {}

  /// Propagates through `block` until nothing changes.
  LogicalResult run(Block &block);
  /// Makes the braid.shard constraints in `region` known.
  LogicalResult seedConstraints(Region &region);
  /// Records every value's sharding (replicated where still unknown).
  void annotate(Block &block, bool provenance);

  DenseMap<Value, Known> known;

private:
  /// Applies `op`'s rule once; sets `changed` if something became known.
  void visit(Operation *op, bool &changed);
  LogicalResult visitRepeat(RepeatOp repeat, bool &changed);

  MeshOp mesh;
  DenseMap<Operation *, bool> layersDone;
  DenseSet<Operation *> layersSeeded;
};

} // namespace

void Propagator::visit(Operation *op, bool &changed) {
  // A stored value takes the sharding of the tensor it replaces: that of
  // the braid.param reading the same name in the same block.
  if (auto store = dyn_cast<StoreParamOp>(op)) {
    for (Operation &other : *op->getBlock()) {
      auto param = dyn_cast<ParamOp>(other);
      if (!param || param.getName() != store.getName())
        continue;
      auto it = known.find(param.getResult());
      if (it != known.end() && !known.count(store.getValue())) {
        Known k = it->second;
        k.via = op;
        known[store.getValue()] = std::move(k);
        changed = true;
      }
      break;
    }
    return;
  }
  auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruleOp)
    return;
  ShardingRule rule = ruleOp.getShardingRule();
  SmallVector<Value> tensors;
  SmallVector<ArrayRef<int64_t>> maps;
  for (auto [v, map] : llvm::zip(op->getOperands(), rule.operands)) {
    tensors.push_back(v);
    maps.push_back(map);
  }
  unsigned numOperands = tensors.size();
  for (auto [v, map] : llvm::zip(op->getResults(), rule.results)) {
    tensors.push_back(v);
    maps.push_back(map);
  }
  // The blocks the rule views dimension d of tensor `index` as.
  auto ruleBlocks = [&](unsigned index, unsigned d) {
    return index < numOperands ? rule.getOperandBlocks(index, d)
                               : rule.getResultBlocks(index - numOperands, d);
  };

  // The best candidate sharding of each factor.
  struct Candidate {
    SmallVector<StringRef> axes;
    /// The blocks the factor's split is strided over.
    int64_t blocks;
    int64_t priority;
    double bytes;
    unsigned index;
    std::string why;
  };
  SmallVector<std::optional<Candidate>> chosen(rule.factors.size());
  for (auto [index, v] : llvm::enumerate(tensors)) {
    auto it = known.find(v);
    if (it == known.end())
      continue;
    for (auto [d, f] : llvm::enumerate(maps[index])) {
      if (f < 0)
        continue;
      const Sharding &s = it->second.sharding;
      // A split strided otherwise than the rule views the dimension is no
      // split of the factor.
      int64_t rb = ruleBlocks(index, d), blocks = s.getBlocks(d);
      Candidate c{s.dims[d],
                  blocks % rb == 0 ? blocks / rb : 1,
                  it->second.priority[d],
                  bytesOf(v),
                  (unsigned)index,
                  it->second.why};
      if (blocks % rb != 0)
        c.axes.clear();
      // An unsplit dimension is open: it informs a factor only if no
      // tensor asks to split it (so a weak split still reaches values that
      // merely happen to be whole, like ZeRO's split of a gradient).
      std::optional<Candidate> &best = chosen[f];
      bool better =
          !best ||
          (best->axes.empty() != c.axes.empty() ? !c.axes.empty()
           : c.priority != best->priority      ? c.priority > best->priority
                                               : c.bytes > best->bytes);
      if (better)
        best = c;
    }
  }
  // Blocked factors stay whole; an axis goes to one factor only, the
  // strongest first.
  SmallVector<int64_t> order;
  for (int64_t f = 0, e = rule.factors.size(); f < e; ++f)
    if (chosen[f])
      order.push_back(f);
  // Ties in factor order (a total order, as above).
  llvm::sort(order, [&](int64_t a, int64_t b) {
    if (chosen[a]->priority != chosen[b]->priority)
      return chosen[a]->priority > chosen[b]->priority;
    if (chosen[a]->bytes != chosen[b]->bytes)
      return chosen[a]->bytes > chosen[b]->bytes;
    return a < b;
  });
  SmallVector<ArrayRef<int64_t>> operandShapes, resultShapes;
  for (Value v : op->getOperands())
    operandShapes.push_back(cast<RankedTensorType>(v.getType()).getShape());
  for (Value v : op->getResults())
    resultShapes.push_back(cast<RankedTensorType>(v.getType()).getShape());
  llvm::SmallSet<StringRef, 4> used;
  for (int64_t f : order) {
    Candidate &c = *chosen[f];
    if (rule.factors[f].kind == ShardingRule::Kind::Blocked ||
        !rule.isDivisible(f, axesSize(mesh, c.axes) * c.blocks, operandShapes,
                          resultShapes) ||
        llvm::any_of(c.axes, [&](StringRef a) { return used.contains(a); }))
      c.axes.clear();
    for (StringRef a : c.axes)
      used.insert(a);
  }

  for (auto [index, v] : llvm::enumerate(tensors)) {
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    Known k;
    k.sharding = Sharding::replicated(type.getRank());
    k.priority = uniform(type.getRank(), kOpen);
    int64_t strongest = kOpen;
    bool informed = false;
    llvm::SmallSet<StringRef, 4> taken;
    for (auto [d, f] : llvm::enumerate(maps[index])) {
      if (f < 0 || !chosen[f])
        continue;
      informed = true;
      Candidate &c = *chosen[f];
      int64_t blocks = c.blocks * ruleBlocks(index, d);
      if (c.axes.empty() ||
          type.getDimSize(d) % (axesSize(mesh, c.axes) * blocks) != 0 ||
          llvm::any_of(c.axes, [&](StringRef a) { return taken.contains(a); }))
        continue;
      for (StringRef a : c.axes)
        taken.insert(a);
      k.sharding.setDim(d, c.axes, blocks);
      // Only splits carry weight: a dimension that is merely whole stays
      // open to any split that reaches it later.
      k.priority[d] = c.priority;
      if (c.priority > strongest) {
        strongest = c.priority;
        k.why = c.why;
      }
    }
    if (informed && k.sharding.isReplicated())
      for (int64_t f : maps[index])
        if (f >= 0 && chosen[f] && k.why.empty())
          k.why = chosen[f]->why;
    if (!informed)
      continue;
    // A value learns a sharding once, unless a stronger annotation reaches
    // it later: one that a weaker split reached first gives way (ZeRO-3's
    // split of the head's weight over dp reaching the final norm before the
    // batch split does). Its priorities, strongest first, only grow, so
    // this ends.
    auto it = known.find(v);
    if (it != known.end()) {
      if (it->second.sharding == k.sharding ||
          !isStronger(k.priority, it->second.priority))
        continue;
    }
    k.via = op;
    known[v] = std::move(k);
    changed = true;
  }
}

/// `s` with a leading (stacked) dimension added or removed.
static Sharding stack(const Sharding &s) {
  Sharding out = s;
  out.insertDim(0);
  return out;
}
static Sharding unstack(const Sharding &s) {
  Sharding out = s;
  out.eraseDim(0);
  return out;
}

LogicalResult Propagator::visitRepeat(RepeatOp repeat, bool &changed) {
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  Block &body = layer.getBody().front();
  if (layersSeeded.insert(layer).second &&
      failed(seedConstraints(layer.getBody())))
    return failure();
  unsigned n = repeat.getNumCarried();
  Operation *yield = body.getTerminator();
  // Makes `to` known from `from` (a stacked value has one more leading,
  // unsplit dimension than its per-instance slice).
  auto link = [&](Value from, Value to, int shift) {
    auto a = known.find(from);
    if (a == known.end())
      return;
    Known k = a->second;
    if (shift > 0) {
      k.sharding = stack(k.sharding);
      k.priority.insert(k.priority.begin(), kOpen);
    } else if (shift < 0) {
      k.sharding = unstack(k.sharding);
      k.priority.erase(k.priority.begin());
    }
    k.via = repeat;
    auto b = known.find(to);
    if (b == known.end()) {
      known[to] = std::move(k);
      changed = true;
      return;
    }
    // Each dimension takes the stronger of the two.
    if (mergeDims(b->second, k)) {
      b->second.via = repeat;
      changed = true;
    }
  };
  auto both = [&](Value outer, Value inner, bool stacked) {
    link(outer, inner, stacked ? -1 : 0);
    link(inner, outer, stacked ? 1 : 0);
  };
  for (unsigned i = 0; i < repeat.getInputs().size(); ++i)
    both(repeat.getInputs()[i], body.getArgument(i), i >= n);
  for (unsigned i = 0; i < repeat.getNumResults(); ++i)
    both(repeat.getResult(i), yield->getOperand(i), i >= n);
  // Carried values keep their sharding through every instance.
  for (unsigned i = 0; i < n; ++i) {
    link(body.getArgument(i), yield->getOperand(i), 0);
    link(yield->getOperand(i), body.getArgument(i), 0);
  }
  return run(body);
}

LogicalResult Propagator::seedConstraints(Region &region) {
  WalkResult walk = region.walk([&](ShardOp op) {
    Sharding s = Sharding::fromAttr(op.getSharding());
    Known k{s, uniform(s.dims.size(), op.getPriority()),
            "the constraint " + describe(op)};
    if (!k.sharding.partial.empty()) {
      op.emitOpError("partial shardings are produced by the partitioner, "
                     "not requested");
      return WalkResult::interrupt();
    }
    if (op.getSharding().getMesh().getValue() != mesh.getSymName()) {
      op.emitOpError() << "uses a mesh other than @" << mesh.getSymName();
      return WalkResult::interrupt();
    }
    known[op.getResult()] = k;
    auto [it, inserted] = known.try_emplace(op.getInput(), k);
    if (!inserted)
      mergeDims(it->second, k);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult Propagator::run(Block &block) {
  // Each sweep makes at least one value known or stops, so this ends.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : block) {
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        if (failed(visitRepeat(repeat, changed)))
          return failure();
        continue;
      }
      visit(&op, changed);
    }
    for (Operation &op : llvm::reverse(block))
      if (!isa<RepeatOp>(op))
        visit(&op, changed);
  }
  return success();
}

void Propagator::annotate(Block &block, bool provenance) {
  auto shardingOf = [&](Value v) -> const Known & {
    auto [it, inserted] = known.try_emplace(v);
    if (inserted) {
      it->second.sharding = Sharding::replicated(
          cast<RankedTensorType>(v.getType()).getRank());
      it->second.why = "replicated: no annotation reaches it";
    }
    return it->second;
  };
  for (Operation &op : block) {
    if (op.getNumResults() == 0 || op.hasTrait<OpTrait::IsTerminator>())
      continue;
    SmallVector<Attribute> attrs;
    for (Value r : op.getResults()) {
      if (!isa<RankedTensorType>(r.getType()))
        continue;
      const Known &k = shardingOf(r);
      attrs.push_back(k.sharding.toAttr(mesh));
      if (provenance) {
        InFlightDiagnostic remark =
            op.emitRemark() << "result #"
                            << cast<OpResult>(r).getResultNumber() << " is "
                            << k.sharding.toAttr(mesh) << ": ";
        if (k.via)
          remark << "propagated through " << describe(k.via) << " from ";
        remark << k.why;
      }
    }
    op.setAttr(kShardingsAttrName, ArrayAttr::get(op.getContext(), attrs));
    if (auto repeat = dyn_cast<RepeatOp>(op)) {
      auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
          repeat, repeat.getLayerAttr());
      if (!layersDone[layer]) {
        layersDone[layer] = true;
        Block &body = layer.getBody().front();
        for (BlockArgument a : body.getArguments())
          layer.setArgAttr(a.getArgNumber(), "braid.sharding",
                           shardingOf(a).sharding.toAttr(mesh));
        for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
          layer.setResultAttr(i, "braid.sharding",
                              shardingOf(v).sharding.toAttr(mesh));
        annotate(body, provenance);
      }
    }
  }
}

/// The sharding `fn` records for its argument or result `i`, or replicated.
static Sharding recordedSharding(func::FuncOp fn, unsigned i, bool result) {
  auto attr = result
                  ? fn.getResultAttrOfType<ShardingAttr>(i, "braid.sharding")
                  : fn.getArgAttrOfType<ShardingAttr>(i, "braid.sharding");
  if (attr)
    return Sharding::fromAttr(attr);
  Type type = result ? fn.getResultTypes()[i] : fn.getArgumentTypes()[i];
  return Sharding::replicated(cast<RankedTensorType>(type).getRank());
}

/// Makes the operands and results of every braid.pipeline in `fn` known
/// with its callee's argument (stacked) and result shardings, above any
/// annotation: the callee is already decided.
static void seedPipelines(func::FuncOp fn, Propagator &propagator) {
  constexpr int64_t kCallee = std::numeric_limits<int64_t>::max() / 2;
  fn.walk([&](PipelineOp op) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, op.getCalleeAttr());
    if (!callee)
      return;
    std::string why = "the layout of @" + callee.getName().str();
    for (auto [i, v] : llvm::enumerate(op.getInputs())) {
      Sharding s = stack(recordedSharding(callee, i, false));
      propagator.known[v] = {s, uniform(s.dims.size(), kCallee), why, op};
    }
    for (auto [i, v] : llvm::enumerate(op.getResults())) {
      Sharding s = recordedSharding(callee, i, true);
      propagator.known[v] = {s, uniform(s.dims.size(), kCallee), why, op};
    }
  });
}

namespace {
struct PropagateShardingPass
    : public braid::impl::PropagateShardingPassBase<PropagateShardingPass> {
  using PropagateShardingPassBase::PropagateShardingPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError() << "braid-propagate-sharding: needs exactly one "
                            "braid.mesh, found "
                         << meshes.size();
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    // Functions that run others through braid.pipeline go last: they take
    // their callees' shardings as given.
    SmallVector<func::FuncOp> order, callers;
    DenseSet<Attribute> callees;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      bool calls = false;
      fn.walk([&](PipelineOp op) {
        calls = true;
        callees.insert(op.getCalleeAttr().getAttr());
      });
      (calls ? callers : order).push_back(fn);
    }
    order.append(callers.begin(), callers.end());
    for (func::FuncOp fn : order) {
      Propagator propagator(mesh);
      Block &body = fn.getBody().front();
      for (BlockArgument a : body.getArguments())
        if (auto s = fn.getArgAttrOfType<ShardingAttr>(a.getArgNumber(),
                                                       "braid.sharding"))
          propagator.known[a] = {
              Sharding::fromAttr(s),
              uniform(cast<RankedTensorType>(a.getType()).getRank(), 0),
              "the annotation of argument #" +
                  std::to_string(a.getArgNumber())};
      seedPipelines(fn, propagator);
      if (failed(propagator.seedConstraints(fn.getBody())) ||
          failed(propagator.run(body)))
        return signalPassFailure();
      propagator.annotate(body, printProvenance);
      auto shardingOf = [&](Value v) {
        auto it = propagator.known.find(v);
        return it != propagator.known.end()
                   ? it->second.sharding
                   : Sharding::replicated(
                         cast<RankedTensorType>(v.getType()).getRank());
      };
      for (BlockArgument a : body.getArguments())
        fn.setArgAttr(a.getArgNumber(), "braid.sharding",
                      shardingOf(a).toAttr(mesh));
      // A function run through braid.pipeline returns its results as it
      // computes them (sharded gradients stay sharded) unless annotated:
      // its caller adapts. Other functions return whole tensors.
      if (callees.contains(fn.getSymNameAttr()))
        for (auto [i, v] :
             llvm::enumerate(body.getTerminator()->getOperands()))
          if (!fn.getResultAttr(i, "braid.sharding"))
            fn.setResultAttr(i, "braid.sharding", shardingOf(v).toAttr(mesh));
    }
  }
};
} // namespace
