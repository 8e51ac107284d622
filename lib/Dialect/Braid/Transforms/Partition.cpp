//===- Partition.cpp - SPMD partitioning -----------------------------------===//
//
// Rewrites functions annotated by braid-propagate-sharding into per-device
// programs: local shapes, parameter blocks, and the collectives implied by
// the ops' sharding rules.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallSet.h"

namespace mlir::braid {
#define GEN_PASS_DEF_PARTITIONPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Whether a pending sum may pass through `op` (sum after it, not before):
/// a linear op, or an exact widening convert (bf16 -> f32: every operand
/// value is representable in the result type, so summing the widened
/// partials is the sum in f32: closer to exact than the widened bf16 sum,
/// not bit-equal to it). Under bf16-mixed precision this makes data parallelism reduce
/// the f32 gradient of a parameter, not its bf16 working copy's (which
/// would round the sum to bf16), and a tied parameter's two uses one sum.
/// A narrowing convert rounds, so a sum stops before it.
bool passesPendingSum(Operation *op) {
  if (op->hasTrait<OpTrait::braid::Linear>())
    return true;
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert)
    return false;
  auto from = dyn_cast<FloatType>(
      cast<RankedTensorType>(convert.getInput().getType()).getElementType());
  auto to = dyn_cast<FloatType>(
      cast<RankedTensorType>(convert.getType()).getElementType());
  return from && to &&
         llvm::APFloatBase::isRepresentableBy(from.getFloatSemantics(),
                                              to.getFloatSemantics());
}

/// A value of the per-device program and how it is distributed.
struct Local {
  Value value;
  Sharding sharding;
  /// The op that produced it (for reports: a pending sum's origin).
  StringAttr origin = {};
};

class Partitioner {
public:
  /// `layers` records the layers already rewritten (with their carried
  /// shardings): a layer is shared by every repeat of it.
  /// `layouts` holds how each parameter is stored (its first read decides),
  /// keyed by the repeat prefix of the layer it is read in (`prefix`) and
  /// its name.
  Partitioner(MeshOp mesh,
              DenseMap<Operation *, SmallVector<Sharding>> &layers,
              llvm::StringMap<Sharding> &layouts, StringRef prefix = "")
      : mesh(mesh), layersDone(layers), layouts(layouts), prefix(prefix) {}

  /// Rewrites `block` in place: its arguments have `argShardings`; the
  /// terminator's operands are resharded to `resultShardings`.
  LogicalResult run(Block &block, ArrayRef<Sharding> argShardings,
                    ArrayRef<Sharding> resultShardings);

private:
  /// Reshards `v` (on this device) to `to`, emitting collectives.
  Value reshard(OpBuilder &b, Location loc, Local v, const Sharding &to);
  Value reshardUncached(OpBuilder &b, Location loc, Local v,
                        const Sharding &to);
  LogicalResult partitionOp(Operation *op, OpBuilder &b);
  LogicalResult partitionRepeat(RepeatOp repeat, OpBuilder &b);
  LogicalResult partitionPipeline(PipelineOp op, OpBuilder &b);

  ArrayAttr axesAttr(ArrayRef<StringRef> axes) {
    SmallVector<Attribute> names;
    for (StringRef a : axes)
      names.push_back(StringAttr::get(mesh.getContext(), a));
    return ArrayAttr::get(mesh.getContext(), names);
  }

  MeshOp mesh;
  /// The global (original) value -> its per-device replacement.
  DenseMap<Value, Local> locals;
  DenseMap<Operation *, SmallVector<Sharding>> &layersDone;
  /// Rules and operand/result shapes of the original ops, taken while all
  /// their types are still global (block arguments change in place).
  struct OpInfo {
    ShardingRule rule;
    SmallVector<SmallVector<int64_t>> operandShapes, resultShapes;
  };
  DenseMap<Operation *, OpInfo> infos;
  DenseMap<std::pair<Value, Attribute>, Value> reshards;
  /// How each parameter is stored on the devices. Every read reads this
  /// layout and reshards from it, and every store writes it, so that one
  /// parameter has one storage whatever its uses need (ZeRO reads a
  /// replicated parameter's share for the update, then gathers it back).
  llvm::StringMap<Sharding> &layouts;
  std::string prefix;
  std::string layoutKey(StringRef name) { return prefix + "/" + name.str(); }
  /// The reads of each pending-sum state tensor (kPendingSumAttrName), the
  /// global value and its per-device read, resolved once its store shows
  /// over which axes.
  llvm::StringMap<SmallVector<std::pair<Value, ParamOp>>> pendingSumReads;
  /// The op being partitioned, which any collective emitted now serves,
  /// and its phase and pipeline chunk.
  StringAttr cause;
  Attribute phase, chunk;
};

} // namespace

Value Partitioner::reshard(OpBuilder &b, Location loc, Local v,
                           const Sharding &to) {
  if (v.sharding == to)
    return v.value;
  // Collectives carry the op whose operand needed them.
  struct CauseTagger : public OpBuilder::Listener {
    StringAttr cause;
    Attribute phase, chunk;
    void notifyOperationInserted(Operation *op,
                                 OpBuilder::InsertPoint) override {
      if (cause)
        op->setAttr("braid.cause", cause);
      if (phase)
        op->setAttr(kPhaseAttrName, phase);
      if (chunk)
        op->setAttr(kChunkAttrName, chunk);
    }
  } tagger;
  tagger.cause = cause;
  tagger.phase = phase;
  tagger.chunk = chunk;
  if (v.origin && cause)
    tagger.cause = StringAttr::get(
        cause.getContext(), cause.getValue() + " needs the value of " +
                                v.origin.getValue());
  OpBuilder::Listener *previous = b.getListener();
  b.setListener(&tagger);
  llvm::scope_exit restore([&] { b.setListener(previous); });
  // Every consumer wanting the same layout shares one resharding (the
  // first dominates the others: ops are visited in order in one block).
  auto key = std::make_pair(v.value, to.toAttr(mesh));
  if (Value done = reshards.lookup(key))
    return done;
  Value result = reshardUncached(b, loc, v, to);
  reshards[key] = result;
  return result;
}

Value Partitioner::reshardUncached(OpBuilder &b, Location loc, Local v,
                                   const Sharding &to) {
  Sharding from = v.sharding;
  Value value = v.value;
  auto type = [&](Value x) { return cast<RankedTensorType>(x.getType()); };
  auto withDim = [&](Value x, int64_t d, int64_t size) {
    SmallVector<int64_t> shape(type(x).getShape());
    shape[d] = size;
    return RankedTensorType::get(shape, type(x).getElementType());
  };
  // A split strided over b blocks is a plain split of the dimension's
  // minor part in the view [b, n / b]: `collective` is applied to
  // dimension d + 1 of that view (local reshapes around it).
  auto viaBlocks = [&](Value x, int64_t d, int64_t blocks,
                       function_ref<Value(Value, int64_t)> collective) {
    if (blocks == 1)
      return collective(x, d);
    SmallVector<int64_t> shape(type(x).getShape());
    shape[d] /= blocks;
    shape.insert(shape.begin() + d, blocks);
    Value view = ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, type(x).getElementType()), x);
    Value y = collective(view, d + 1);
    SmallVector<int64_t> back(type(y).getShape());
    back[d] *= back[d + 1];
    back.erase(back.begin() + d + 1);
    return (Value)ReshapeOp::create(
        b, loc, RankedTensorType::get(back, type(y).getElementType()), y);
  };
  // 1. Pending sums: a reduce_scatter if the target splits one dimension
  //    over exactly the summed axes, an all_reduce otherwise.
  if (!from.partial.empty() && from.partial != to.partial) {
    std::optional<unsigned> scatterDim;
    for (unsigned d = 0; d < to.dims.size(); ++d)
      if (to.dims[d] == from.partial && from.dims[d].empty() &&
          to.getBlocks(d) == 1)
        scatterDim = d;
    if (scatterDim) {
      int64_t n = axesSize(mesh, from.partial);
      value = ReduceScatterOp::create(
          b, loc,
          withDim(value, *scatterDim, type(value).getDimSize(*scatterDim) / n),
          value, mesh.getSymName(), axesAttr(from.partial), *scatterDim);
      from.dims[*scatterDim] = from.partial;
    } else {
      // A sum does not depend on the order of its axes: list them in mesh
      // order, the one canonical group order (generated code needs it).
      SmallVector<StringRef> axes(from.partial);
      llvm::sort(axes, [&](StringRef a, StringRef b) {
        return *mesh.getAxisIndex(a) < *mesh.getAxisIndex(b);
      });
      value = AllReduceOp::create(b, loc, value.getType(), ReduceKind::sum,
                                  value, mesh.getSymName(), axesAttr(axes));
    }
    from.partial.clear();
  }
  // 2. Dimensions split differently: gather them whole.
  auto same = [&](unsigned d) {
    return from.dims[d] == to.dims[d] && from.getBlocks(d) == to.getBlocks(d);
  };
  for (unsigned d = 0; d < from.dims.size(); ++d) {
    if (same(d) || from.dims[d].empty())
      continue;
    int64_t n = axesSize(mesh, from.dims[d]);
    value = viaBlocks(value, d, from.getBlocks(d), [&](Value x, int64_t vd) {
      return AllGatherOp::create(b, loc,
                                 withDim(x, vd, type(x).getDimSize(vd) * n), x,
                                 mesh.getSymName(), axesAttr(from.dims[d]), vd);
    });
    from.setDim(d, {});
  }
  // 3. Dimensions the target splits: keep this device's block.
  for (unsigned d = 0; d < to.dims.size(); ++d) {
    if (same(d) || to.dims[d].empty())
      continue;
    int64_t n = axesSize(mesh, to.dims[d]);
    value = viaBlocks(value, d, to.getBlocks(d), [&](Value x, int64_t vd) {
      return AllSliceOp::create(b, loc,
                                withDim(x, vd, type(x).getDimSize(vd) / n), x,
                                mesh.getSymName(), axesAttr(to.dims[d]), vd);
    });
    from.setDim(d, to.dims[d], to.getBlocks(d));
  }
  return value;
}

/// The factor shardings of `op` implied by its results' shardings (parallel
/// factors) and its operands' propagated shardings (reduction factors), and
/// the blocks each factor's split is strided over (`blocks`).
static SmallVector<SmallVector<StringRef>>
factorShardings(const ShardingRule &rule, ArrayRef<Sharding> operands,
                ArrayRef<Sharding> results, MeshOp mesh,
                ArrayRef<ArrayRef<int64_t>> operandShapes,
                ArrayRef<ArrayRef<int64_t>> resultShapes,
                SmallVectorImpl<int64_t> &blocks) {
  SmallVector<SmallVector<StringRef>> factors(rule.factors.size());
  blocks.assign(rule.factors.size(), 1);
  SmallVector<bool> set(rule.factors.size(), false);
  llvm::SmallSet<StringRef, 4> used;
  // Dimension d of a tensor sharded `s` that the rule views as `rb` blocks
  // gives its factor s's split with s.blocks / rb blocks, if that divides.
  auto take = [&](int64_t f, const Sharding &s, unsigned d, int64_t rb) {
    ArrayRef<StringRef> axes = s.dims[d];
    if (f < 0 || set[f] || axes.empty() || s.getBlocks(d) % rb != 0)
      return;
    set[f] = true;
    int64_t count = s.getBlocks(d) / rb;
    if (rule.factors[f].kind == ShardingRule::Kind::Blocked ||
        !rule.isDivisible(f, axesSize(mesh, axes) * count, operandShapes,
                          resultShapes) ||
        llvm::any_of(axes, [&](StringRef a) { return used.contains(a); }))
      return;
    factors[f].assign(axes.begin(), axes.end());
    blocks[f] = count;
    for (StringRef a : axes)
      used.insert(a);
  };
  // (A cooperative factor, in no result, is taken from operands too.)
  auto isReduction = [&](int64_t f) {
    return rule.factors[f].kind == ShardingRule::Kind::Sum ||
           rule.factors[f].kind == ShardingRule::Kind::Mean ||
           rule.factors[f].kind == ShardingRule::Kind::Cooperative;
  };
  // A reduction whose operands are all split alike comes first: the op
  // computes where its data already is and leaves a pending sum, which the
  // consumer resolves (by reduce_scatter where it wants the result split on
  // the same axes, as sequence parallelism does) rather than gathering
  // every operand to honour the result's split.
  for (int64_t f = 0, e = rule.factors.size(); f < e; ++f) {
    if (!isReduction(f))
      continue;
    std::optional<std::pair<SmallVector<StringRef>, int64_t>> agreed;
    std::optional<std::tuple<const Sharding *, unsigned, int64_t>> first;
    bool alike = true;
    for (auto [i, map, s] : llvm::enumerate(rule.operands, operands))
      for (auto [d, g] : llvm::enumerate(map)) {
        if (g != f)
          continue;
        int64_t rb = rule.getOperandBlocks(i, d);
        std::pair<SmallVector<StringRef>, int64_t> split{
            s.dims[d], s.getBlocks(d) % rb ? -1 : s.getBlocks(d) / rb};
        if (!agreed) {
          agreed = split;
          first = {&s, (unsigned)d, rb};
        } else if (*agreed != split) {
          alike = false;
        }
      }
    if (alike && first)
      take(f, *std::get<0>(*first), std::get<1>(*first), std::get<2>(*first));
  }
  for (auto [i, map, s] : llvm::enumerate(rule.results, results))
    for (auto [d, f] : llvm::enumerate(map))
      take(f, s, d, rule.getResultBlocks(i, d));
  for (auto [i, map, s] : llvm::enumerate(rule.operands, operands))
    for (auto [d, f] : llvm::enumerate(map))
      if (f >= 0 && (rule.results.empty() || isReduction(f)))
        take(f, s, d, rule.getOperandBlocks(i, d));
  return factors;
}

/// The sharding of a tensor whose dimensions map to `map` and are viewed as
/// `ruleBlocks(d)` blocks by the rule.
static Sharding shardingFromFactors(
    ArrayRef<int64_t> map, ArrayRef<SmallVector<StringRef>> factors,
    ArrayRef<int64_t> blocks, function_ref<int64_t(unsigned)> ruleBlocks) {
  Sharding s = Sharding::replicated(map.size());
  for (auto [d, f] : llvm::enumerate(map))
    if (f >= 0)
      s.setDim(d, factors[f], blocks[f] * ruleBlocks(d));
  return s;
}

/// The propagated sharding of a global value.
static Sharding propagatedSharding(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (auto s = getResultShardings(def))
      return (*s)[cast<OpResult>(v).getResultNumber()];
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *parent = arg.getOwner()->getParentOp();
    if (auto fn = dyn_cast<FunctionOpInterface>(parent))
      if (auto s = fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                     "braid.sharding"))
        return Sharding::fromAttr(s);
  }
  return Sharding::replicated(cast<RankedTensorType>(v.getType()).getRank());
}

/// "'braid.matmul' at loc(...)": how a report names `op`.
static StringAttr describeCause(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return StringAttr::get(op->getContext(), s);
}

LogicalResult Partitioner::partitionOp(Operation *op, OpBuilder &b) {
  Location loc = op->getLoc();
  cause = describeCause(op);
  phase = op->getAttr(kPhaseAttrName);
  chunk = op->getAttr(kChunkAttrName);
  if (auto shard = dyn_cast<ShardOp>(op)) {
    Sharding to = Sharding::fromAttr(shard.getSharding());
    Local in = locals.lookup(shard.getInput());
    locals[shard.getResult()] = {reshard(b, loc, in, to), to};
    return success();
  }
  if (auto store = dyn_cast<StoreParamOp>(op)) {
    Local stored = locals.lookup(store.getValue());
    if (store->hasAttr(kPendingSumAttrName) && !stored.sharding.partial.empty()) {
      // Each device keeps its share of the sum; the reads of it (before,
      // in this step: the next step's value) reduce it, so that the
      // reduction can overlap the work between the read and its use.
      auto reads = pendingSumReads.find(layoutKey(store.getName()));
      if (reads == pendingSumReads.end())
        return store.emitOpError()
               << "stores the pending sum '" << store.getName()
               << "', which no braid.param {" << kPendingSumAttrName
               << "} reads before it in this block";
      Sharding replicated = Sharding::replicated(
          cast<RankedTensorType>(store.getValue().getType()).getRank());
      if (llvm::any_of(stored.sharding.dims,
                       [](const auto &axes) { return !axes.empty(); }))
        return store.emitOpError()
               << "stores a pending sum that is also split; only a sum "
                  "each device holds whole can be kept pending";
      for (auto [global, read] : reads->second) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointAfter(read);
        // The reduction serves the read (the previous call's value).
        cause = describeCause(global.getDefiningOp());
        Sharding share = replicated;
        share.partial = stored.sharding.partial;
        Value reduced = reshard(b, loc, {read.getResult(), share}, replicated);
        // Uses partitioned so far, and those to come.
        read.getResult().replaceAllUsesExcept(reduced,
                                              reduced.getDefiningOp());
        locals[global].value = reduced;
      }
      cause = describeCause(op);
      auto local = StoreParamOp::create(b, loc, store.getName(), stored.value);
      local->setAttr(kPendingSumAttrName, b.getUnitAttr());
      return success();
    }
    // The value is written in the parameter's storage layout.
    Sharding to = Sharding::replicated(
        cast<RankedTensorType>(store.getValue().getType()).getRank());
    auto it = layouts.find(layoutKey(store.getName()));
    if (it != layouts.end())
      to = it->second;
    Value local = reshard(b, loc, locals.lookup(store.getValue()), to);
    StoreParamOp::create(b, loc, store.getName(), local);
    return success();
  }
  auto infoIt = infos.find(op);
  if (infoIt == infos.end())
    return op->emitOpError("has no sharding rule, so it cannot be "
                           "partitioned");
  const ShardingRule &rule = infoIt->second.rule;
  std::optional<SmallVector<Sharding>> targets = getResultShardings(op);
  if (!targets && op->getNumResults() == 0)
    targets.emplace();
  if (!targets)
    return op->emitOpError("has no braid.shardings; run "
                           "braid-propagate-sharding first");
  SmallVector<Sharding> operandShardings;
  for (Value v : op->getOperands())
    operandShardings.push_back(propagatedSharding(v));
  SmallVector<ArrayRef<int64_t>> operandShapes, resultShapes;
  for (const auto &s : infoIt->second.operandShapes)
    operandShapes.push_back(s);
  for (const auto &s : infoIt->second.resultShapes)
    resultShapes.push_back(s);
  SmallVector<int64_t> factorBlocks;
  auto factors = factorShardings(rule, operandShardings, *targets, mesh,
                                 operandShapes, resultShapes, factorBlocks);

  // Constants cannot be cut by device at compile time: keep them whole.
  if (isa<ConstantOp>(op))
    for (auto &axes : factors)
      axes.clear();

  // A linear op (or exact widening convert) whose operands are all pending
  // sums over the same axes passes the sum on (dq + dk + dv needs one
  // all_reduce, not three).
  SmallVector<StringRef> passed;
  if (passesPendingSum(op) && op->getNumOperands() > 0) {
    passed = locals.lookup(op->getOperand(0)).sharding.partial;
    for (Value v : op->getOperands())
      if (locals.lookup(v).sharding.partial != passed)
        passed.clear();
    // A value cannot be both split and summed over one axis. Where the
    // result is wanted split over a summed axis (sequence parallelism's
    // dq + dk + dv), the op runs unsplit along it and leaves the sum
    // pending, so that its consumer resolves it once (one reduce_scatter,
    // not one per operand) - unless that would move more data than
    // resolving the operands: a result larger than its operands together
    // (a broadcast) resolves its operand first, and so does an operand
    // another op reads too (it is resolved once for all of them).
    auto elements = [](ArrayRef<SmallVector<int64_t>> shapes) {
      int64_t n = 0;
      for (const auto &shape : shapes) {
        int64_t m = 1;
        for (int64_t size : shape)
          m *= size;
        n += m;
      }
      return n;
    };
    auto splitsPassed = [&](ArrayRef<StringRef> axes) {
      return llvm::any_of(
          axes, [&](StringRef a) { return llvm::is_contained(passed, a); });
    };
    if (!passed.empty() && llvm::any_of(factors, splitsPassed)) {
      if (elements(infoIt->second.resultShapes) >
              elements(infoIt->second.operandShapes) ||
          llvm::any_of(op->getOperands(), [&](Value v) {
            return llvm::any_of(v.getUsers(),
                                [&](Operation *user) { return user != op; });
          })) {
        passed.clear();
      } else {
        for (auto [f, axes] : llvm::enumerate(factors)) {
          if (!splitsPassed(axes))
            continue;
          llvm::erase_if(
              axes, [&](StringRef a) { return llvm::is_contained(passed, a); });
          if (axes.empty())
            factorBlocks[f] = 1;
        }
      }
    }
  }
  IRMapping mapping;
  for (auto [i, v, map] : llvm::enumerate(op->getOperands(), rule.operands)) {
    Local in = locals.lookup(v);
    Sharding want =
        shardingFromFactors(map, factors, factorBlocks, [&, i = i](unsigned d) {
          return rule.getOperandBlocks(i, d);
        });
    want.partial = passed;
    mapping.map(v, reshard(b, loc, in, want));
  }
  Operation *local = b.clone(*op, mapping);
  local->removeAttr(kShardingsAttrName);
  if (llvm::any_of(factors, [](const auto &axes) { return !axes.empty(); }))
    cast<ShardingRuleOpInterface>(op).localize(
        local, factors, FlatSymbolRefAttr::get(mesh.getSymNameAttr()));

  // Results: local types, and pending sums over sharded reduction factors.
  SmallVector<StringRef> partial(passed);
  // Devices whose shares are averaged; an integer, so that dividing by it
  // stays exact in any precision (a rounded f32 reciprocal would not).
  int64_t meanCount = 1;
  for (auto [f, factor] : llvm::enumerate(rule.factors)) {
    if (factor.kind == ShardingRule::Kind::Sum ||
        factor.kind == ShardingRule::Kind::Mean)
      partial.append(factors[f].begin(), factors[f].end());
    if ((factor.kind == ShardingRule::Kind::Mean ||
         factor.kind == ShardingRule::Kind::ParallelMean) &&
        !factors[f].empty())
      meanCount *= axesSize(mesh, factors[f]);
  }
  for (auto [i, r, map] : llvm::enumerate(local->getResults(), rule.results)) {
    Sharding s =
        shardingFromFactors(map, factors, factorBlocks, [&, i = i](unsigned d) {
          return rule.getResultBlocks(i, d);
        });
    s.partial = partial;
    r.setType(s.localType(mesh, cast<RankedTensorType>(r.getType())));
    Value value = r;
    if (meanCount != 1) {
      // Each device averaged its share: divide it by the number of shares
      // so that the pending sum is the global mean.
      auto t = cast<RankedTensorType>(r.getType());
      auto scalarType = RankedTensorType::get({}, t.getElementType());
      Value count = ConstantOp::create(
          b, loc, scalarType,
          DenseElementsAttr::get(
              scalarType, b.getFloatAttr(t.getElementType(),
                                         static_cast<double>(meanCount))));
      value = DivOp::create(b, loc, t, r, count);
    }
    locals[op->getResult(r.getResultNumber())] = {value, s, cause};
  }
  if (auto param = dyn_cast<ParamOp>(local)) {
    if (param->hasAttr(kPendingSumAttrName))
      pendingSumReads[layoutKey(param.getName())].push_back(
          {op->getResult(0), param});
    Local &result = locals[op->getResult(0)];
    auto [layout, first] =
        layouts.try_emplace(layoutKey(param.getName()), result.sharding);
    if (!first && layout->second != result.sharding) {
      // Read the stored layout, then reshard to what this use needs.
      param.getResult().setType(layout->second.localType(
          mesh, cast<RankedTensorType>(op->getResult(0).getType())));
      b.setInsertionPointAfter(param);
      result.value = reshard(b, loc, {param.getResult(), layout->second},
                             result.sharding);
    }
    if (!layout->second.isReplicated())
      param.setBlockOfAttr(layout->second.toAttr(mesh));
  }
  return success();
}

LogicalResult Partitioner::partitionRepeat(RepeatOp repeat, OpBuilder &b) {
  cause = describeCause(repeat);
  phase = repeat->getAttr(kPhaseAttrName);
  chunk = repeat->getAttr(kChunkAttrName);
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  Block &body = layer.getBody().front();
  unsigned n = repeat.getNumCarried();
  auto recorded = [&](DictionaryAttr attrs, Type type) {
    auto s = attrs ? attrs.getAs<ShardingAttr>("braid.sharding")
                   : ShardingAttr();
    return s ? Sharding::fromAttr(s)
             : Sharding::replicated(cast<RankedTensorType>(type).getRank());
  };
  // The shardings of the layer's arguments and results (per instance).
  SmallVector<Sharding> args, results;
  auto done = layersDone.find(layer);
  if (done != layersDone.end()) {
    args.assign(done->second.begin(),
                done->second.begin() + body.getNumArguments());
    results.assign(done->second.begin() + body.getNumArguments(),
                   done->second.end());
  } else {
    for (unsigned i = 0; i < body.getNumArguments(); ++i)
      args.push_back(
          recorded(layer.getArgAttrDict(i), body.getArgument(i).getType()));
    for (unsigned i = 0; i < layer.getNumResults(); ++i)
      results.push_back(
          recorded(layer.getResultAttrDict(i), layer.getResultTypes()[i]));
    // Carried values leave as they came in.
    for (unsigned i = 0; i < n; ++i)
      results[i] = args[i];
    SmallVector<Sharding> all(args);
    all.append(results.begin(), results.end());
    layersDone[layer] = all;
    Partitioner inner(mesh, layersDone, layouts, repeat.getPrefix());
    if (failed(inner.run(body, args, results)))
      return failure();
    SmallVector<Type> argTypes(body.getArgumentTypes());
    SmallVector<Type> resultTypes(body.getTerminator()->getOperandTypes());
    layer.setType(FunctionType::get(layer.getContext(), argTypes, resultTypes));
    StringAttr name = StringAttr::get(layer.getContext(), "braid.sharding");
    for (unsigned i = 0; i < args.size(); ++i) {
      layer.removeArgAttr(i, name);
      if (!args[i].isReplicated())
        layer.setArgAttr(i, "braid.block_of", args[i].toAttr(mesh));
    }
    for (unsigned i = 0; i < results.size(); ++i) {
      layer.removeResultAttr(i, name);
      if (!results[i].isReplicated())
        layer.setResultAttr(i, "braid.block_of", results[i].toAttr(mesh));
    }
  }
  auto stacked = [](Sharding s) {
    s.insertDim(0);
    return s;
  };
  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(repeat.getInputs()))
    operands.push_back(reshard(b, repeat.getLoc(), locals.lookup(v),
                               i < n ? args[i] : stacked(args[i])));
  SmallVector<Type> types;
  SmallVector<Sharding> resultShardings;
  for (auto [i, r] : llvm::enumerate(repeat.getResults())) {
    Sharding s = i < n ? results[i] : stacked(results[i]);
    types.push_back(s.localType(mesh, cast<RankedTensorType>(r.getType())));
    resultShardings.push_back(s);
  }
  auto local = RepeatOp::create(
      b, repeat.getLoc(), types, repeat.getLayer(), operands,
      repeat.getPrefix(), repeat.getCount(), repeat.getFirst(),
      repeat.getCarriedAttr(), repeat.getReverse(),
      repeat.getInstanceNamesAttr());
  // Phase, chunk and the like stay; the global shardings do not.
  local->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
  local->removeAttr(kShardingsAttrName);
  for (auto [r, s] : llvm::zip(repeat.getResults(), resultShardings))
    locals[r] = {local.getResult(r.getResultNumber()), s};
  return success();
}

/// How `fn` lays out its argument or result `i`: what propagation recorded
/// (braid.sharding), or once partitioned, its braid.block_of.
static Sharding interfaceSharding(func::FuncOp fn, unsigned i, bool result) {
  for (StringRef name : {"braid.sharding", "braid.block_of"}) {
    auto attr = result ? fn.getResultAttrOfType<ShardingAttr>(i, name)
                       : fn.getArgAttrOfType<ShardingAttr>(i, name);
    if (attr)
      return Sharding::fromAttr(attr);
  }
  Type type = result ? fn.getResultTypes()[i] : fn.getArgumentTypes()[i];
  return Sharding::replicated(cast<RankedTensorType>(type).getRank());
}

LogicalResult Partitioner::partitionPipeline(PipelineOp op, OpBuilder &b) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      op, op.getCalleeAttr());
  if (!callee)
    return op.emitOpError() << "'" << op.getCallee()
                            << "' does not name a function";
  // Micro-batches enter in the callee's layout, stacked.
  SmallVector<Value> operands;
  for (auto [i, v] : llvm::enumerate(op.getInputs())) {
    Sharding s = interfaceSharding(callee, i, /*result=*/false);
    s.insertDim(0);
    operands.push_back(reshard(b, op.getLoc(), locals.lookup(v), s));
  }
  SmallVector<Type> types;
  SmallVector<Sharding> shardings;
  for (auto [i, r] : llvm::enumerate(op.getResults())) {
    shardings.push_back(interfaceSharding(callee, i, /*result=*/true));
    types.push_back(shardings.back().localType(
        mesh, cast<RankedTensorType>(r.getType())));
  }
  auto local = PipelineOp::create(b, op.getLoc(), types, op.getCallee(),
                                  operands);
  for (auto [r, s] : llvm::zip(op.getResults(), shardings))
    locals[r] = {local.getResult(r.getResultNumber()), s, cause};
  return success();
}

LogicalResult Partitioner::run(Block &block, ArrayRef<Sharding> argShardings,
                               ArrayRef<Sharding> resultShardings) {
  for (Operation &op : block) {
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruleOp)
      continue;
    OpInfo &info = infos[&op];
    info.rule = ruleOp.getShardingRule();
    for (Value v : op.getOperands())
      info.operandShapes.emplace_back(
          cast<RankedTensorType>(v.getType()).getShape());
    for (Value v : op.getResults())
      info.resultShapes.emplace_back(
          cast<RankedTensorType>(v.getType()).getShape());
  }
  for (auto [arg, s] : llvm::zip(block.getArguments(), argShardings)) {
    arg.setType(s.localType(mesh, cast<RankedTensorType>(arg.getType())));
    locals[arg] = {arg, s};
  }
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  OpBuilder b(block.getParent()->getContext());
  for (Operation *op : ops) {
    b.setInsertionPoint(op);
    cause = describeCause(op);
    phase = op->getAttr(kPhaseAttrName);
  chunk = op->getAttr(kChunkAttrName);
    if (op->hasTrait<OpTrait::IsTerminator>()) {
      SmallVector<Value> operands;
      for (auto [v, s] : llvm::zip(op->getOperands(), resultShardings))
        operands.push_back(reshard(b, op->getLoc(), locals.lookup(v), s));
      op->setOperands(operands);
      continue;
    }
    LogicalResult result =
        isa<RepeatOp>(op)     ? partitionRepeat(cast<RepeatOp>(op), b)
        : isa<PipelineOp>(op) ? partitionPipeline(cast<PipelineOp>(op), b)
                              : partitionOp(op, b);
    if (failed(result))
      return failure();
  }
  // The original ops are dead now (their uses were remapped).
  for (Operation *op : llvm::reverse(ops))
    if (!op->hasTrait<OpTrait::IsTerminator>()) {
      op->dropAllUses();
      op->erase();
    }
  return success();
}

namespace {
struct PartitionPass : public braid::impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError() << "braid-partition: needs exactly one braid.mesh, "
                            "found "
                         << meshes.size();
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    MLIRContext *ctx = module.getContext();
    DenseMap<Operation *, SmallVector<Sharding>> layers;
    llvm::StringMap<Sharding> layouts;
    // Callers through braid.pipeline go after their callees.
    SmallVector<func::FuncOp> order, callers;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      bool calls = fn.walk([](PipelineOp) {
                       return WalkResult::interrupt();
                     }).wasInterrupted();
      (calls ? callers : order).push_back(fn);
    }
    order.append(callers.begin(), callers.end());
    for (func::FuncOp fn : order) {
      Block &body = fn.getBody().front();
      SmallVector<Sharding> args, results;
      for (BlockArgument a : body.getArguments())
        args.push_back(propagatedSharding(a));
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        auto s = fn.getResultAttrOfType<ShardingAttr>(i, "braid.sharding");
        results.push_back(
            s ? Sharding::fromAttr(s)
              : Sharding::replicated(
                    cast<RankedTensorType>(fn.getResultTypes()[i]).getRank()));
      }
      Partitioner partitioner(mesh, layers, layouts);
      if (failed(partitioner.run(body, args, results)))
        return signalPassFailure();
      SmallVector<Type> argTypes(body.getArgumentTypes());
      SmallVector<Type> resultTypes(
          body.getTerminator()->getOperandTypes());
      fn.setType(FunctionType::get(ctx, argTypes, resultTypes));
      for (auto [i, s] : llvm::enumerate(args)) {
        fn.removeArgAttr(i, StringAttr::get(ctx, "braid.sharding"));
        if (!s.isReplicated())
          fn.setArgAttr(i, "braid.block_of", s.toAttr(mesh));
      }
      for (auto [i, s] : llvm::enumerate(results)) {
        fn.removeResultAttr(i, StringAttr::get(ctx, "braid.sharding"));
        if (!s.isReplicated())
          fn.setResultAttr(i, "braid.block_of", s.toAttr(mesh));
      }
    }
  }
};
} // namespace
