//===- Autodiff.cpp - Reverse-mode differentiation with a B/W split --------===//
//
// Builds `<entry>_grad`: the forward pass (F), then the reverse sweep, in
// which the gradient of an activation is a B op and the gradient of a
// parameter-only value is a W op. Ops supply their vector-Jacobian products
// through GradientOpInterface; this pass only orders, accumulates and tags.
//
// Layers are differentiated once each, into three layers (F, B, W) applied
// by stacked braid.repeat ops, so the result does not grow with depth.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"

#include <functional>

namespace mlir::braid {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

constexpr StringLiteral kChunkAttrName = "braid.chunk";

/// Tags every op the builder creates with the current phase and, in a
/// function split by braid-pipeline-split, with the pipeline chunk of the
/// forward op it belongs to (so a stage's B and W stay on its stage).
struct PhaseTagger : public OpBuilder::Listener {
  Phase phase = Phase::F;
  IntegerAttr chunk;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (isa<FunctionOpInterface>(op))
      return;
    setPhase(op, phase);
    if (chunk)
      op->setAttr(kChunkAttrName, chunk);
  }
};

IntegerAttr chunkOf(Operation *op) {
  return op ? op->getAttrOfType<IntegerAttr>(kChunkAttrName) : IntegerAttr();
}

bool isFloatTensor(Type t) {
  return isa<FloatType>(getElementTypeOrSelf(t));
}

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, t,
      DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
}

/// What differentiating a layer produced: three layers and how their values
/// connect.
struct LayerGradient {
  LayerOp f, b, w;
  /// Indices into F's stacked results that B and W take, in their order.
  SmallVector<unsigned> savedForB, savedForW;
  /// Local names of the parameters whose gradients W yields, in order.
  SmallVector<StringAttr> params;
};

/// Gradient of a layer parameter, stacked over a repeat's instances.
struct StackedParamGrad {
  std::string pattern;
  int64_t first, count;
  Value grad;
  /// The repeat's instance_names, if it has them (null otherwise).
  ArrayAttr instanceNames;
};

enum class Recompute { None, Full, Selective };

class Differentiator {
public:
  Differentiator(ModuleOp module, OpBuilder &b, PhaseTagger &tagger,
                 llvm::StringMap<LayerGradient> &layers, Recompute recompute)
      : module(module), b(b), tagger(tagger), layers(layers),
        recompute(recompute) {}

  /// Clones `src`'s ops (all but its terminator) at the builder's insertion
  /// point, with `mapping` holding the block arguments. `wrt` marks the
  /// block arguments to differentiate.
  LogicalResult forward(Block &src, IRMapping &mapping, ArrayRef<bool> wrt);
  /// Then emits the reverse sweep seeded with `seeds` (one per terminator
  /// operand, null for none).
  LogicalResult backward(Block &src, IRMapping &mapping,
                         ArrayRef<Value> seeds);

  /// After run(): the gradient of block argument `i` (zeros if it received
  /// none).
  Value argGrad(Block &src, unsigned i);
  /// After run(): gradients of parameters by (local or full) name, in order
  /// of their first declaration.
  llvm::MapVector<StringRef, Value> paramGrads;
  SmallVector<StackedParamGrad> stackedParamGrads;

private:
  void analyse(Block &src, ArrayRef<bool> wrt);
  LogicalResult cloneForward(Block &src, IRMapping &mapping);
  LogicalResult sweep(Block &src, IRMapping &mapping);
  LogicalResult sweepRepeat(RepeatOp repeat, IRMapping &mapping);
  void accumulate(Value srcValue, Value grad, Phase phase);
  /// Accumulates one contribution `grad` to `srcValue`'s gradient; that of
  /// a shared working copy goes on to its parameter (sharedWorkingCopy).
  void contribute(Value srcValue, Value grad, Phase phase, IRMapping &mapping);
  /// The braid.convert of a parameter that `v` is, when several ops read it
  /// (bf16-mixed's bf16 working copy of a tied f32 master, GPT's wte in the
  /// embedding and the head); null otherwise. The parameter may be read
  /// through sharding-transparent ops (a sharding constraint, a rounding, a
  /// unary elementwise op: skipShardingTransparent), which compute the
  /// value the copy is made of from the parameter alone. Each contribution
  /// to the copy's gradient is converted back on its own and the convert's
  /// operand sums them, so a parameter's partial gradients are summed in its
  /// own type (f32), as Megatron-LM sums them in its f32 main gradients,
  /// rather than in the working copy's (bf16) with the sum converted after;
  /// the sum then goes back through those ops to the parameter.
  ConvertOp sharedWorkingCopy(Value v);
  Phase phaseOf(Value srcValue) {
    return varying.contains(srcValue) ? Phase::B : Phase::W;
  }
  FailureOr<LayerGradient *> differentiateLayer(LayerOp layer, Location loc);

  ModuleOp module;
  OpBuilder &b;
  PhaseTagger &tagger;
  llvm::StringMap<LayerGradient> &layers;
  Recompute recompute;
  /// Values that depend on a block argument (activations), and values
  /// whose gradient is wanted (they depend on a parameter or on a block
  /// argument in `wrt`).
  DenseSet<Value> varying, active;
  /// Accumulated gradients of source values, as target values.
  DenseMap<Value, Value> grads;
  /// The forward clone of each source repeat.
  DenseMap<Operation *, RepeatOp> forwardRepeats;
};

} // namespace

void Differentiator::analyse(Block &src, ArrayRef<bool> wrt) {
  for (auto [arg, differentiate] : llvm::zip_equal(src.getArguments(), wrt)) {
    varying.insert(arg);
    if (differentiate)
      active.insert(arg);
  }
  for (Operation &op : src.without_terminator()) {
    bool isVarying = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return varying.contains(v); });
    // Trainable parameters start gradients; optimizer state never does. A
    // repeated layer has parameters of its own.
    auto param = dyn_cast<ParamOp>(op);
    bool isActive = (param && !param.getState()) || isa<RepeatOp>(op) ||
                    llvm::any_of(op.getOperands(),
                                 [&](Value v) { return active.contains(v); });
    for (Value r : op.getResults()) {
      if (isVarying)
        varying.insert(r);
      if (isActive && isFloatTensor(r.getType()))
        active.insert(r);
    }
  }
}

LogicalResult Differentiator::cloneForward(Block &src, IRMapping &mapping) {
  tagger.phase = Phase::F;
  for (Operation &op : src.without_terminator()) {
    tagger.chunk = chunkOf(&op);
    auto repeat = dyn_cast<RepeatOp>(op);
    if (!repeat) {
      b.clone(op, mapping);
      continue;
    }
    if (repeat.getCarried())
      return repeat.emitOpError("with stacked operands cannot be "
                                "differentiated yet");
    auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
        repeat, repeat.getLayerAttr());
    FailureOr<LayerGradient *> lg = differentiateLayer(layer, repeat.getLoc());
    if (failed(lg))
      return failure();
    LayerOp f = (*lg)->f;
    tagger.phase = Phase::F;
    tagger.chunk = chunkOf(repeat);
    SmallVector<Value> operands;
    for (Value v : repeat.getInputs())
      operands.push_back(mapping.lookup(v));
    SmallVector<Type> resultTypes(repeat.getResultTypes());
    for (Type t : f.getResultTypes().drop_front(repeat.getNumResults()))
      resultTypes.push_back(stackedType(t, repeat.getCount()));
    auto clone = RepeatOp::create(
        b, repeat.getLoc(), resultTypes, f.getSymName(), operands,
        repeat.getPrefix(), repeat.getCount(), repeat.getFirst(),
        b.getI64IntegerAttr(operands.size()), /*reverse=*/false,
        repeat.getInstanceNamesAttr());
    for (auto [from, to] :
         llvm::zip(repeat.getResults(), clone.getResults()))
      mapping.map(from, to);
    forwardRepeats[repeat] = clone;
  }
  return success();
}

void Differentiator::accumulate(Value srcValue, Value grad, Phase phase) {
  Value &slot = grads[srcValue];
  if (!slot) {
    slot = grad;
    return;
  }
  tagger.phase = phase;
  slot = AddOp::create(b, grad.getLoc(), grad.getType(), slot, grad);
}

ConvertOp Differentiator::sharedWorkingCopy(Value v) {
  auto convert = v.getDefiningOp<ConvertOp>();
  if (!convert || v.hasOneUse() ||
      !skipShardingTransparent(convert.getInput()).getDefiningOp<ParamOp>() ||
      !active.contains(convert.getInput()))
    return {};
  return convert;
}

void Differentiator::contribute(Value srcValue, Value grad, Phase phase,
                                IRMapping &mapping) {
  ConvertOp copy = sharedWorkingCopy(srcValue);
  if (!copy) {
    accumulate(srcValue, grad, phase);
    return;
  }
  // Converted where the contribution is made: on its op's chunk and phase.
  tagger.phase = phase;
  auto clone = cast<GradientOpInterface>(
      mapping.lookup(copy.getResult()).getDefiningOp());
  accumulate(copy.getInput(), clone.buildGradient(b, 0, grad), phase);
}

LogicalResult Differentiator::forward(Block &src, IRMapping &mapping,
                                      ArrayRef<bool> wrt) {
  analyse(src, wrt);
  return cloneForward(src, mapping);
}

LogicalResult Differentiator::backward(Block &src, IRMapping &mapping,
                                       ArrayRef<Value> seeds) {
  for (auto [operand, seed] :
       llvm::zip_equal(src.getTerminator()->getOperands(), seeds))
    if (seed && active.contains(operand))
      accumulate(operand, seed, Phase::B);
  return sweep(src, mapping);
}

LogicalResult Differentiator::sweep(Block &src, IRMapping &mapping) {
  for (Operation &op : llvm::reverse(src.without_terminator())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value r) { return grads.count(r); }))
      continue;
    tagger.chunk = chunkOf(&op);
    if (auto param = dyn_cast<ParamOp>(op)) {
      Value g = grads.lookup(param.getResult());
      auto [it, inserted] = paramGrads.insert({param.getName(), g});
      // One name, one parameter: gradients of two shapes cannot be summed
      // (the sum's error named neither declaration).
      if (!inserted && it->second.getType() != g.getType())
        return param.emitOpError()
               << "declares parameter '" << param.getName() << "' as "
               << param.getType() << ", but it is also declared as "
               << it->second.getType();
      if (!inserted) {
        tagger.phase = Phase::W;
        it->second = AddOp::create(b, g.getLoc(), g.getType(), it->second, g);
      }
      continue;
    }
    if (auto repeat = dyn_cast<RepeatOp>(op)) {
      if (failed(sweepRepeat(repeat, mapping)))
        return failure();
      continue;
    }
    Operation *clone = mapping.lookup(op.getResult(0)).getDefiningOp();
    auto gradient = dyn_cast<GradientOpInterface>(clone);
    for (OpOperand &operand : op.getOpOperands()) {
      Value v = operand.get();
      unsigned index = operand.getOperandNumber();
      if (!active.contains(v))
        continue;
      if (!gradient)
        return op.emitOpError("is not differentiable (it does not implement "
                              "GradientOpInterface)");
      if (!gradient.isDifferentiableOperand(index))
        continue;
      Phase phase = phaseOf(v);
      tagger.phase = phase;
      SmallVector<Value> resultGrads;
      for (Value r : op.getResults()) {
        Value g = grads.lookup(r);
        resultGrads.push_back(g ? g : zerosLike(b, op.getLoc(), r.getType()));
      }
      Value g = gradient.buildGradient(b, index, resultGrads);
      if (!g || g.getType() != v.getType())
        return op.emitOpError() << "gradient rule for operand #" << index
                                << " built a value of the wrong type";
      contribute(v, g, phase, mapping);
    }
  }
  return success();
}

LogicalResult Differentiator::sweepRepeat(RepeatOp repeat, IRMapping &mapping) {
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  LayerGradient &lg = layers[layer.getSymName()];
  RepeatOp forward = forwardRepeats.lookup(repeat);
  unsigned numCarried = repeat.getNumResults();
  Location loc = repeat.getLoc();
  int64_t count = repeat.getCount();
  auto stacked = [&](Type t) { return stackedType(t, count); };

  // B, last instance first: result gradients in, input gradients out.
  tagger.phase = Phase::B;
  tagger.chunk = chunkOf(repeat);
  SmallVector<Value> operands;
  for (Value r : repeat.getResults()) {
    Value g = grads.lookup(r);
    operands.push_back(g ? g : zerosLike(b, loc, r.getType()));
  }
  for (unsigned i : lg.savedForB)
    operands.push_back(forward.getResult(numCarried + i));
  SmallVector<Type> types;
  for (Type t : lg.b.getResultTypes().take_front(numCarried))
    types.push_back(t);
  for (Type t : lg.b.getResultTypes().drop_front(numCarried))
    types.push_back(stacked(t));
  auto backward = RepeatOp::create(
      b, loc, types, lg.b.getSymName(), operands, repeat.getPrefix(), count,
      repeat.getFirst(), b.getI64IntegerAttr(numCarried), /*reverse=*/true,
      repeat.getInstanceNamesAttr());

  // W: parameter gradients, from saved activations and B's products.
  if (!lg.params.empty()) {
    tagger.phase = Phase::W;
    operands.clear();
    for (unsigned i : lg.savedForW)
      operands.push_back(forward.getResult(numCarried + i));
    for (Value v : backward.getResults().drop_front(numCarried))
      operands.push_back(v);
    types.clear();
    for (Type t : lg.w.getResultTypes())
      types.push_back(stacked(t));
    auto weights = RepeatOp::create(
        b, loc, types, lg.w.getSymName(), operands, repeat.getPrefix(), count,
        repeat.getFirst(), b.getI64IntegerAttr(0), /*reverse=*/false,
        repeat.getInstanceNamesAttr());
    for (auto [name, g] : llvm::zip_equal(lg.params, weights.getResults())) {
      if (!repeat.getPrefix().empty()) {
        stackedParamGrads.push_back(
            {(repeat.getPrefix() + ".{}." + name.getValue()).str(),
             (int64_t)repeat.getFirst(), count, g,
             repeat.getInstanceNamesAttr()});
        continue;
      }
      // Instances share the parameter: its gradient is their sum.
      auto type = cast<RankedTensorType>(g.getType());
      Value sum = ReduceOp::create(
          b, loc,
          RankedTensorType::get(type.getShape().drop_front(),
                                type.getElementType()),
          ReduceKind::sum, g, ArrayRef<int64_t>{0}, /*keep_dims=*/false);
      auto [it, inserted] = paramGrads.insert({name.getValue(), sum});
      if (!inserted)
        it->second = AddOp::create(b, loc, sum.getType(), it->second, sum);
    }
  }
  for (auto [input, g] :
       llvm::zip(repeat.getInputs(), backward.getResults()))
    if (active.contains(input))
      contribute(input, g, phaseOf(input), mapping);
  return success();
}

Value Differentiator::argGrad(Block &src, unsigned i) {
  Value arg = src.getArgument(i);
  if (Value g = grads.lookup(arg))
    return g;
  tagger.phase = Phase::B;
  return zerosLike(b, arg.getLoc(), arg.getType());
}

//===----------------------------------------------------------------------===//
// Layers: differentiate once into a combined block, then split by phase.
//===----------------------------------------------------------------------===//

FailureOr<LayerGradient *> Differentiator::differentiateLayer(LayerOp layer,
                                                              Location loc) {
  auto it = layers.find(layer.getSymName());
  if (it != layers.end())
    return &it->second;
  Block &src = layer.getBody().front();
  for (Type t : layer.getArgumentTypes())
    if (!isFloatTensor(t))
      return layer.emitOpError("can only be differentiated when every "
                               "value it carries is floating-point");

  // A scratch layer holds the combined F/B/W computation. Layers are
  // shared by every chunk, so their ops carry none.
  OpBuilder::InsertionGuard guard(b);
  IntegerAttr callerChunk = tagger.chunk;
  tagger.chunk = {};
  llvm::scope_exit restoreChunk([&] { tagger.chunk = callerChunk; });
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> scratchArgs(layer.getArgumentTypes());
  scratchArgs.append(layer.getResultTypes().begin(),
                     layer.getResultTypes().end());
  auto scratch = LayerOp::create(
      b, loc, (layer.getSymName() + ".scratch").str(),
      b.getFunctionType(scratchArgs, {}), nullptr, nullptr);
  Block *body = b.createBlock(&scratch.getBody());
  IRMapping mapping;
  SmallVector<Value> inputs, seeds;
  for (Type t : layer.getArgumentTypes())
    inputs.push_back(body->addArgument(t, loc));
  for (Type t : layer.getResultTypes())
    seeds.push_back(body->addArgument(t, loc));
  for (auto [from, to] : llvm::zip(src.getArguments(), inputs))
    mapping.map(from, to);

  Differentiator inner(module, b, tagger, layers, recompute);
  SmallVector<bool> wrt(src.getNumArguments(), true);
  if (failed(inner.forward(src, mapping, wrt)) ||
      failed(inner.backward(src, mapping, seeds))) {
    scratch.erase();
    return failure();
  }
  SmallVector<Value> argGrads;
  for (unsigned i = 0; i < src.getNumArguments(); ++i)
    argGrads.push_back(inner.argGrad(src, i));
  if (!inner.stackedParamGrads.empty()) {
    scratch.erase();
    return layer.emitOpError("repeats another layer; nested layers cannot be "
                             "differentiated yet");
  }
  SmallVector<Value> forwardResults;
  for (Value v : src.getTerminator()->getOperands())
    forwardResults.push_back(mapping.lookup(v));

  // Split the combined block by phase.
  auto phaseOfOp = [](Operation *op) { return *getPhase(op); };
  SmallVector<Operation *> ops[3];
  for (Operation &op : *body)
    if (!isRecomputable(&op))
      ops[(int)phaseOfOp(&op)].push_back(&op);
  // The phase that produces `v`: the layer's inputs count as F, the result
  // gradients as B; free values belong to none.
  auto producer = [&](Value v) -> std::optional<Phase> {
    if (Operation *def = v.getDefiningOp()) {
      if (isRecomputable(def))
        return std::nullopt;
      return phaseOfOp(def);
    }
    return llvm::is_contained(inputs, v) ? Phase::F : Phase::B;
  };
  // Values produced by phase `from` and used by phase `to`.
  auto crossing = [&](Phase from, Phase to) {
    llvm::SetVector<Value> used;
    for (Operation *op : ops[(int)to])
      for (Value v : op->getOperands())
        if (producer(v) == from)
          used.insert(v);
    return used;
  };
  llvm::SetVector<Value> savedB = crossing(Phase::F, Phase::B);
  llvm::SetVector<Value> savedW = crossing(Phase::F, Phase::W);
  for (auto &[pname, g] : inner.paramGrads)
    if (producer(g) == Phase::F)
      savedW.insert(g);
  llvm::SetVector<Value> bProducts = crossing(Phase::B, Phase::W);
  // A parameter gradient W merely passes on (say, a bias gradient that is
  // the layer's result gradient itself) comes from B too.
  for (auto &[pname, g] : inner.paramGrads)
    if (producer(g) == Phase::B)
      bProducts.insert(g);

  // Recomputation: B re-runs the chosen F ops from saved inputs instead of
  // receiving their results, and hands W the recomputed values it needs.
  // Selective recomputation takes the marked ops and the data movement
  // (reshapes, transposes) applied to their results.
  // Whatever the mode, B re-runs an F op that reads only values it has
  // without saving (parameters, constants, such ops' results) at the cost
  // of one pass over its operand: data movement, or an elementwise op of
  // one operand (a parameter's bf16 working copy). Its value is the same
  // for every micro-batch, so saving it would hold a copy per micro-batch
  // in flight.
  // Memoised: each op's answer is computed once, so the recursion over
  // operands stays linear in the layer's size.
  DenseMap<Operation *, bool> availableMemo;
  std::function<bool(Operation *)> availableToB = [&](Operation *op) {
    if (!op)
      return false;
    if (isRecomputable(op))
      return true;
    if (auto it = availableMemo.find(op); it != availableMemo.end())
      return it->second;
    bool available = [&] {
      if (op->getNumResults() != 1 || !isMemoryEffectFree(op))
        return false;
      auto in = op->getNumOperands() == 1
                    ? dyn_cast<ShapedType>(op->getOperand(0).getType())
                    : nullptr;
      auto out = dyn_cast<ShapedType>(op->getResult(0).getType());
      bool onePass = op->hasTrait<OpTrait::braid::MovesDataOnly>() ||
                     (in && out && in.getShape() == out.getShape());
      return onePass && llvm::all_of(op->getOperands(), [&](Value v) {
               return availableToB(v.getDefiningOp());
             });
    }();
    availableMemo[op] = available;
    return available;
  };
  std::function<bool(Operation *)> recomputed = [&](Operation *op) {
    if (!op || producer(op->getResult(0)) != Phase::F)
      return false;
    if (recompute == Recompute::Full || availableToB(op))
      return true;
    if (recompute == Recompute::None)
      return false;
    if (op->hasTrait<OpTrait::braid::SelectivelyRecomputed>())
      return true;
    return op->hasTrait<OpTrait::braid::MovesDataOnly>() &&
           llvm::all_of(op->getOperands(), [&](Value v) {
             return recomputed(v.getDefiningOp());
           });
  };
  llvm::SetVector<Operation *> replay;
  std::function<void(Operation *)> addReplay = [&](Operation *op) {
    if (!recomputed(op) || !replay.insert(op))
      return;
    for (Value v : op->getOperands())
      addReplay(v.getDefiningOp());
  };
  for (Value v : savedB)
    addReplay(v.getDefiningOp());
  for (Value v : savedW)
    addReplay(v.getDefiningOp());
  auto replayed = [&](Value v) {
    return v.getDefiningOp() && replay.contains(v.getDefiningOp());
  };
  if (!replay.empty()) {
    llvm::SetVector<Value> keepB, keepW;
    for (Value v : savedB)
      if (!replayed(v))
        keepB.insert(v);
    for (Operation *op : replay)
      for (Value v : op->getOperands())
        if (producer(v) == Phase::F && !replayed(v))
          keepB.insert(v);
    for (Value v : savedW) {
      if (replayed(v))
        bProducts.insert(v);
      else
        keepW.insert(v);
    }
    savedB = std::move(keepB);
    savedW = std::move(keepW);
    SmallVector<Operation *> bOps;
    for (Operation *op : ops[0])
      if (replay.contains(op))
        bOps.push_back(op);
    bOps.append(ops[1].begin(), ops[1].end());
    ops[1] = std::move(bOps);
  }

  llvm::SetVector<Value> saved;
  saved.insert(savedB.begin(), savedB.end());
  saved.insert(savedW.begin(), savedW.end());

  LayerGradient lg;
  for (Value v : savedB)
    lg.savedForB.push_back(llvm::find(saved, v) - saved.begin());
  for (Value v : savedW)
    lg.savedForW.push_back(llvm::find(saved, v) - saved.begin());
  for (auto &[pname, g] : inner.paramGrads)
    lg.params.push_back(b.getStringAttr(pname));

  b.setInsertionPoint(layer);
  StringRef name = layer.getSymName();
  // F: inputs -> (outputs, saved...).
  SmallVector<Value> fYields(forwardResults);
  fYields.append(saved.begin(), saved.end());
  lg.f = buildLayer(b, layer.getLoc(), (name + ".F").str(), Phase::F, inputs,
                    ops[0], fYields);
  // B: (result gradients, saved for B...) -> (input gradients, products...).
  SmallVector<Value> bArgs(seeds);
  bArgs.append(savedB.begin(), savedB.end());
  SmallVector<Value> bYields(argGrads);
  bYields.append(bProducts.begin(), bProducts.end());
  lg.b = buildLayer(b, layer.getLoc(), (name + ".B").str(), Phase::B, bArgs,
                    ops[1], bYields);
  // W: (saved for W..., products...) -> parameter gradients.
  SmallVector<Value> wArgs(savedW.begin(), savedW.end());
  wArgs.append(bProducts.begin(), bProducts.end());
  SmallVector<Value> wYields;
  for (auto &[pname, g] : inner.paramGrads)
    wYields.push_back(g);
  lg.w = buildLayer(b, layer.getLoc(), (name + ".W").str(), Phase::W, wArgs,
                    ops[2], wYields);
  scratch.erase();
  return &(layers[name] = std::move(lg));
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct AutodiffPass : public braid::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mode = llvm::StringSwitch<std::optional<Recompute>>(recompute)
                    .Case("none", Recompute::None)
                    .Case("full", Recompute::Full)
                    .Case("selective", Recompute::Selective)
                    .Default(std::nullopt);
    if (!mode) {
      module.emitError() << "braid-autodiff: recompute must be none, full or "
                            "selective, got '"
                         << recompute << "'";
      return signalPassFailure();
    }
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn) {
      module.emitError() << "braid-autodiff: no function @" << entry
                         << " to differentiate (set entry=...)";
      return signalPassFailure();
    }
    FunctionType type = fn.getFunctionType();
    auto lossType = type.getNumResults()
                        ? dyn_cast<RankedTensorType>(type.getResult(0))
                        : RankedTensorType();
    if (!lossType || lossType.getRank() != 0 ||
        !isFloatTensor(lossType)) {
      fn.emitOpError() << "must return a rank-0 floating-point loss as its "
                          "first result to be differentiated";
      return signalPassFailure();
    }
    std::string gradName = entry + "_grad";
    if (module.lookupSymbol(gradName)) {
      fn.emitOpError() << "cannot be differentiated: @" << gradName
                       << " already exists";
      return signalPassFailure();
    }

    OpBuilder b(module.getContext());
    PhaseTagger tagger;
    b.setListener(&tagger);
    b.setInsertionPointAfter(fn);
    auto grad = func::FuncOp::create(b, fn.getLoc(), gradName, type);
    if (ArrayAttr argAttrs = fn.getAllArgAttrs())
      grad.setAllArgAttrs(argAttrs);
    Block *body = grad.addEntryBlock();
    b.setInsertionPointToEnd(body);

    Block &src = fn.getBody().front();
    IRMapping mapping;
    for (auto [from, to] : llvm::zip(src.getArguments(), body->getArguments()))
      mapping.map(from, to);
    SmallVector<bool> wrt;
    for (Type t : type.getInputs())
      wrt.push_back(wrtArguments && isFloatTensor(t));
    llvm::StringMap<LayerGradient> layers;
    Differentiator diff(module, b, tagger, layers, *mode);
    if (failed(diff.forward(src, mapping, wrt))) {
      grad.erase();
      return signalPassFailure();
    }
    // d loss / d loss = 1 starts the backward pass.
    tagger.phase = Phase::B;
    tagger.chunk = chunkOf(src.getTerminator()->getOperand(0).getDefiningOp());
    SmallVector<Value> seeds(src.getTerminator()->getNumOperands());
    seeds[0] = ConstantOp::create(
        b, fn.getLoc(), lossType,
        DenseElementsAttr::get(lossType,
                               b.getFloatAttr(lossType.getElementType(), 1.0)));
    if (failed(diff.backward(src, mapping, seeds))) {
      grad.erase();
      return signalPassFailure();
    }

    SmallVector<Value> results{mapping.lookup(src.getTerminator()->getOperand(0))};
    SmallVector<DictionaryAttr> resultAttrs{b.getDictionaryAttr({})};
    auto named = [&](StringRef of) {
      return b.getDictionaryAttr(
          {b.getNamedAttr("braid.gradient_of", b.getStringAttr(of))});
    };
    for (auto &[name, g] : diff.paramGrads) {
      results.push_back(g);
      resultAttrs.push_back(named(name));
    }
    for (const StackedParamGrad &s : diff.stackedParamGrads) {
      results.push_back(s.grad);
      SmallVector<NamedAttribute> attrs{
          b.getNamedAttr("braid.gradient_of", b.getStringAttr(s.pattern)),
          b.getNamedAttr("braid.instances",
                         b.getDenseI64ArrayAttr({s.first, s.count}))};
      if (s.instanceNames)
        attrs.push_back(
            b.getNamedAttr("braid.instance_names", s.instanceNames));
      resultAttrs.push_back(b.getDictionaryAttr(attrs));
    }
    for (unsigned i = 0; i < src.getNumArguments(); ++i) {
      if (!wrt[i])
        continue;
      results.push_back(diff.argGrad(src, i));
      std::string argName = "arg" + std::to_string(i);
      if (auto n = fn.getArgAttrOfType<StringAttr>(i, "braid.name"))
        argName = n.str();
      resultAttrs.push_back(named("arg:" + argName));
    }
    tagger.phase = Phase::B;
    b.setListener(nullptr);
    func::ReturnOp::create(b, fn.getLoc(), results);
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    grad.setType(b.getFunctionType(type.getInputs(), resultTypes));
    grad.setAllResultAttrs(resultAttrs);
  }
};
} // namespace
