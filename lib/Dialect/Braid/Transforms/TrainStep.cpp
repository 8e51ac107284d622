//===- TrainStep.cpp - Gradient accumulation and the optimizer update ------===//
//
// Wraps the gradient function of braid-autodiff into a training step:
// micro-batch accumulation (optionally with every W after all F and B),
// global-norm clipping, the learning-rate schedule and the parameter update.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>

namespace mlir::braid {
#define GEN_PASS_DEF_TRAINSTEPPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// defer-validation's step-level slots.
constexpr StringLiteral kPendingPrefix = "train_step.pending.";

/// One gradient result of the gradient function.
struct Gradient {
  /// Full name, or for a layer parameter a pattern with "{}".
  std::string name;
  /// For a layer parameter: the repeat's prefix, first instance, count and
  /// the parameter's local name.
  std::optional<std::pair<int64_t, int64_t>> instances;
  std::string prefix, local;
  /// The instances' names in parameter names, when not their indices.
  ArrayAttr instanceNames;
  /// Its result index in the gradient function and its declaration.
  unsigned index = 0;
  ParamOp decl;
  /// The value in the training step.
  Value value;
};

/// The gradients of layer parameters, by the repeat that updates them (one
/// per repeat, since a prefix's instances may be split over several, as
/// between pipeline chunks); `topLevel` runs on each of the others, in
/// order.
using RepeatKey = std::tuple<StringRef, int64_t, int64_t>;
using RepeatGroups = llvm::MapVector<RepeatKey, SmallVector<const Gradient *>>;
static RepeatGroups groupByRepeat(ArrayRef<Gradient> grads,
                                  function_ref<void(const Gradient &)> topLevel) {
  RepeatGroups byRepeat;
  for (const Gradient &g : grads) {
    if (g.instances)
      byRepeat[{g.prefix, g.instances->first, g.instances->second}].push_back(
          &g);
    else
      topLevel(g);
  }
  return byRepeat;
}

Value scalarConstant(OpBuilder &b, Location loc, Type elementType,
                     double value) {
  auto type = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, t,
      DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
}

struct TrainStepPass
    : public braid::impl::TrainStepPassBase<TrainStepPass> {
  using TrainStepPassBase::TrainStepPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(Operation *anchor);
  /// Clones `body` (minus its terminator) with `mapping` and returns the
  /// mapped terminator operands.
  SmallVector<Value> inlineBody(OpBuilder &b, Block &body, IRMapping &mapping);
  /// The micro-batch loops; returns (loss, gradients).
  FailureOr<SmallVector<Value>> accumulate(OpBuilder &b, func::FuncOp grad,
                                           ValueRange batch);
  /// Emits the update of one parameter at the builder's insertion point
  /// (inside a layer when `local` names a layer parameter).
  void update(OpBuilder &b, Location loc, ParamOp decl, StringRef name,
              Value grad, Value lr, Value step, Value scale);
  /// The parameter `name` and its optimizer state, read.
  SmallVector<Value> readState(OpBuilder &b, Location loc, ParamOp decl,
                               StringRef name);
  /// The optimizer update of `state` (as readState gives it).
  SmallVector<Value> applyUpdate(OpBuilder &b, Location loc,
                                 ArrayRef<Value> state, Value grad, Value lr,
                                 Value step, Value scale);
  /// Writes `state` back to the parameter `name` and its optimizer state.
  void storeState(OpBuilder &b, Location loc, StringRef name,
                  ArrayRef<Value> state);
  /// post-validate: the update without clipping, stored; returns the state
  /// it started from (for a rollback).
  SmallVector<Value> optimistic(OpBuilder &b, Location loc, ParamOp decl,
                                StringRef name, Value grad, Value lr,
                                Value step);
  /// post-validate: keeps the stored update where `unclipped` (1 - scale)
  /// is zero, else redoes it from `saved` with `redo` (the scale, or NaN,
  /// which skips: the saved state comes back).
  void validate(OpBuilder &b, Location loc, ParamOp decl, StringRef name,
                Value grad, Value lr, Value step, Value unclipped, Value redo,
                ArrayRef<Value> saved);
  /// post-validate: the learning rate, every optimistic update, then the
  /// gradient norm's scale, then every validation. Returns the rate.
  Value buildPostValidated(OpBuilder &b, Location loc,
                           ArrayRef<Gradient> grads,
                           function_ref<Value()> buildRate,
                           function_ref<Value()> buildScale, Value step,
                           RankedTensorType lossType,
                           RankedTensorType stepType);
  /// The clipping scale of a step whose gradients' sum of squares is
  /// `sumSquares` (its square root into `norm`), guarded by the norm and
  /// `loss`.
  Value buildClipScale(OpBuilder &b, Location loc, Value sumSquares,
                       Value loss, Value &norm);
  /// A braid.repeat @train_step.<prefix>[.<first>].update over the
  /// instances of a layer whose parameters are `group`: each instance runs
  /// `body` on the scalars `carried` (passed through unchanged) and its
  /// gradients, in `group`'s order.
  void buildUpdateRepeat(
      OpBuilder &b, Location loc, func::FuncOp fn, StringRef prefix,
      int64_t first, int64_t count, ArrayRef<const Gradient *> group,
      ValueRange carried,
      function_ref<void(ValueRange carried, ValueRange grads)> body);
  /// defer-validation, one parameter: validates the previous step's
  /// optimistic update from the pending slots (keeping it where
  /// `unclipped` is zero, else redoing it with `redo`), records the
  /// validated state and this step's gradient in the slots, then updates
  /// optimistically with `scale` (1, or NaN to skip).
  void deferredUpdate(OpBuilder &b, Location loc, ParamOp decl, StringRef name,
                      Value grad, ValueRange rates, ValueRange steps,
                      Value unclipped, Value redo, Value scale);
  /// defer-validation: what the previous call left to validate, read at
  /// the start of the step: the gradients' sum of squares (per device: a
  /// pending sum, reduced while this step's forward and backward pass
  /// run), the loss, and whether anything is pending (1 or 0).
  struct Pending {
    Value sumSquares, loss, active;
  };
  Pending readPending(OpBuilder &b, Location loc, RankedTensorType type);
  /// defer-validation: the previous step's validation and this step's
  /// optimistic updates, every parameter, then what the next call
  /// validates. Returns (previous grad norm, retry).
  std::pair<Value, Value> buildDeferred(OpBuilder &b, Location loc,
                                        ArrayRef<Gradient> grads,
                                        const Pending &pending, Value step,
                                        Value previousStep, Value final,
                                        Value loss, Value squares, Value rate,
                                        Value previousRate,
                                        RankedTensorType lossType,
                                        RankedTensorType stepType);
  /// The braid.param declaring `local` in a layer repeated with `prefix`
  /// by the gradient function, or the top-level declaration of `name`.
  ParamOp findDeclaration(func::FuncOp grad, const Gradient &g);

  /// The options as they apply to this module (a scheduled gradient
  /// function implies them).
  int64_t microbatches = 1;
  bool viaPipeline = false;
};

} // namespace

LogicalResult TrainStepPass::checkOptions(Operation *anchor) {
  auto fail = [&](const Twine &msg) {
    return anchor->emitError() << "braid-train-step: " << msg;
  };
  if (optimizer != "adamw" && optimizer != "sgd")
    return fail("optimizer must be adamw or sgd, got '" + optimizer + "'");
  if (decay != "constant" && decay != "linear" && decay != "cosine")
    return fail("decay must be constant, linear or cosine, got '" + decay +
                "'");
  // Written so that NaN fails each check. An infinite lr trains to NaN
  // losses; an infinite clip norm would mean no clipping (PyTorch's idiom
  // for taking the norm alone), which here is clip-norm 0, so the message
  // says that.
  if (!(lr > 0.0) || !std::isfinite(lr))
    return fail("lr must be positive and finite");
  if (!(minLr >= 0.0 && minLr <= lr))
    return fail("min-lr must be between 0 and lr");
  if (warmupSteps < 0 || totalSteps < 1)
    return fail("need warmup-steps >= 0 and total-steps >= 1");
  if (accumulation < 1)
    return fail("accumulation must be at least 1");
  if (!(clipNorm >= 0.0) || !std::isfinite(clipNorm))
    return fail("clip-norm must be non-negative and finite (0: off)");
  if (lrReferenceBatch < 0)
    return fail("lr-reference-batch must be non-negative");
  if (nesterov && !(momentum > 0.0))
    return fail("nesterov needs momentum > 0");
  return success();
}

SmallVector<Value> TrainStepPass::inlineBody(OpBuilder &b, Block &body,
                                             IRMapping &mapping) {
  for (Operation &op : body.without_terminator())
    b.clone(op, mapping);
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(mapping.lookup(v));
  return results;
}

/// Inserts leading arguments of `types` into `layer`, returning them.
static SmallVector<Value> prependArguments(LayerOp layer, TypeRange types) {
  Block &body = layer.getBody().front();
  Location loc = layer.getLoc();
  for (auto [i, t] : llvm::enumerate(types))
    (void)layer.insertArgument(i, t, DictionaryAttr(), loc);
  return SmallVector<Value>(body.getArguments().take_front(types.size()));
}

/// Makes `layer` add `sums` to the values it yields.
static void addToYields(LayerOp layer, ArrayRef<Value> sums) {
  auto yield = cast<YieldOp>(layer.getBody().front().getTerminator());
  OpBuilder b(yield);
  SmallVector<Value> next(yield.getOperands());
  for (auto [i, sum] : llvm::enumerate(sums))
    next[i] = AddOp::create(b, yield.getLoc(), next[i].getType(), sum, next[i]);
  yield->setOperands(next);
}

FailureOr<SmallVector<Value>>
TrainStepPass::accumulate(OpBuilder &b, func::FuncOp grad, ValueRange batch) {
  Block &body = grad.getBody().front();
  Location loc = grad.getLoc();
  if (viaPipeline) {
    auto call = PipelineOp::create(b, loc, grad.getResultTypes(),
                                   grad.getSymName(), batch);
    return SmallVector<Value>(call.getResults());
  }
  if (microbatches == 1) {
    IRMapping mapping;
    mapping.map(body.getArguments(), batch);
    return inlineBody(b, body, mapping);
  }

  SmallVector<Type> resultTypes(grad.getResultTypes());
  ArrayRef<Type> gradTypes = ArrayRef<Type>(resultTypes).drop_front();
  SmallVector<Value> returned(body.getTerminator()->getOperands());
  SmallVector<Value> bodyArgs(body.getArguments());
  SmallVector<Operation *> all, fb, w;
  for (Operation &op : body.without_terminator()) {
    if (isRecomputable(&op))
      continue;
    all.push_back(&op);
    (getPhase(&op) == Phase::W ? w : fb).push_back(&op);
  }
  auto zeros = [&](ArrayRef<Type> types) {
    SmallVector<Value> values;
    for (Type t : types)
      values.push_back(zerosLike(b, loc, t));
    return values;
  };
  SmallVector<Value> sums;

  if (!deferW) {
    // One loop: each micro-batch runs its F, B and W and adds its loss and
    // gradients to running sums (carried).
    LayerOp layer;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(grad);
      layer = buildLayer(b, loc, (grad.getSymName() + ".microbatch").str(),
                         std::nullopt, bodyArgs, all, returned);
    }
    addToYields(layer, prependArguments(layer, resultTypes));
    SmallVector<Value> operands = zeros(resultTypes);
    operands.append(batch.begin(), batch.end());
    auto loop = RepeatOp::create(b, loc, resultTypes, layer.getSymName(),
                                 operands, /*prefix=*/"", microbatches,
                                 /*first=*/0,
                                 b.getI64IntegerAttr(resultTypes.size()),
                                 /*reverse=*/false, /*instance_names=*/nullptr);
    sums.assign(loop.getResults().begin(), loop.getResults().end());
  } else {
    // Two loops: F and B of every micro-batch first, then each
    // micro-batch's W, adding its gradients to running sums.
    auto fromFB = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !def || (!isRecomputable(def) && getPhase(def) != Phase::W);
    };
    llvm::SetVector<Value> handed;
    for (Operation *op : w)
      for (Value v : op->getOperands())
        if (fromFB(v))
          handed.insert(v);
    for (Value v : ArrayRef<Value>(returned).drop_front())
      if (fromFB(v))
        handed.insert(v);
    LayerOp fbLayer, wLayer;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(grad);
      SmallVector<Value> fbYields{returned[0]};
      fbYields.append(handed.begin(), handed.end());
      fbLayer = buildLayer(b, loc, (grad.getSymName() + ".FB").str(),
                           std::nullopt, bodyArgs, fb, fbYields);
      wLayer = buildLayer(b, loc, (grad.getSymName() + ".W").str(),
                          std::nullopt, handed.getArrayRef(), w,
                          ArrayRef<Value>(returned).drop_front());
    }
    addToYields(wLayer, prependArguments(wLayer, gradTypes));

    SmallVector<Type> fbTypes;
    for (Type t : fbLayer.getResultTypes())
      fbTypes.push_back(stackedType(t, microbatches));
    auto first = RepeatOp::create(b, loc, fbTypes, fbLayer.getSymName(),
                                  SmallVector<Value>(batch), /*prefix=*/"",
                                  microbatches, /*first=*/0,
                                  b.getI64IntegerAttr(0), /*reverse=*/false,
                                  /*instance_names=*/nullptr);
    SmallVector<Value> operands = zeros(gradTypes);
    operands.append(first.getResults().begin() + 1, first.getResults().end());
    auto second = RepeatOp::create(b, loc, gradTypes, wLayer.getSymName(),
                                   operands, /*prefix=*/"", microbatches,
                                   /*first=*/0,
                                   b.getI64IntegerAttr(gradTypes.size()),
                                   /*reverse=*/false,
                                   /*instance_names=*/nullptr);
    // Losses summed in micro-batch order, as the single loop does.
    sums.push_back(ReduceOp::create(
        b, loc, cast<RankedTensorType>(resultTypes[0]), ReduceKind::sum,
        first.getResult(0), ArrayRef<int64_t>{0}, /*keep_dims=*/false));
    sums.append(second.getResults().begin(), second.getResults().end());
  }
  // Means over the micro-batches: divided by the count, which every float
  // type holds exactly, rather than multiplied by a rounded reciprocal.
  Value count = scalarConstant(b, loc, getElementTypeOrSelf(resultTypes[0]),
                               static_cast<double>(microbatches));
  for (Value &v : sums)
    v = DivOp::create(b, loc, v.getType(), v, count);
  return sums;
}

ParamOp TrainStepPass::findDeclaration(func::FuncOp grad, const Gradient &g) {
  // The gradient function, and the pieces it calls once outlined per
  // pipeline chunk.
  SmallVector<func::FuncOp> scopes{grad};
  grad.walk([&](func::CallOp call) {
    if (auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr()))
      scopes.push_back(callee);
  });
  ParamOp found;
  for (func::FuncOp scope : scopes) {
    if (!g.instances) {
      scope.walk([&](ParamOp p) {
        if (!found && p.getName() == g.name)
          found = p;
      });
      continue;
    }
    // The layer of a repeat with this prefix declares it under its local
    // name.
    scope.walk([&](RepeatOp r) {
      if (found || r.getPrefix() != g.prefix)
        return;
      auto layer =
          SymbolTable::lookupNearestSymbolFrom<LayerOp>(r, r.getLayerAttr());
      layer.walk([&](ParamOp p) {
        if (!found && p.getName() == g.local)
          found = p;
      });
    });
  }
  return found;
}

SmallVector<Value> TrainStepPass::readState(OpBuilder &b, Location loc,
                                            ParamOp decl, StringRef name) {
  auto type = cast<RankedTensorType>(decl.getType());
  auto zeros = InitAttr::get(b.getContext(), InitKind::zeros, APFloat(0.0),
                             APFloat(0.0));
  SmallVector<Value> state{ParamOp::create(b, loc, type, name, decl.getInit(),
                                           /*state=*/false,
                                           /*block_of=*/nullptr)};
  SmallVector<StringRef> suffixes;
  if (optimizer == "adamw")
    suffixes = {".adamw.m", ".adamw.v"};
  else
    suffixes = {".sgd.momentum"};
  for (StringRef suffix : suffixes)
    state.push_back(ParamOp::create(b, loc, type, (name + suffix).str(), zeros,
                                    /*state=*/true, /*block_of=*/nullptr));
  return state;
}

SmallVector<Value> TrainStepPass::applyUpdate(OpBuilder &b, Location loc,
                                              ArrayRef<Value> state,
                                              Value grad, Value lr, Value step,
                                              Value scale) {
  Type type = state[0].getType();
  if (optimizer == "adamw") {
    double wd = weightDecay < 0 ? 0.01 : weightDecay;
    auto op = AdamWUpdateOp::create(
        b, loc, TypeRange{type, type, type}, state[0], grad, state[1],
        state[2], lr, step, scale, APFloat(beta1.getValue()),
        APFloat(beta2.getValue()), APFloat(epsilon.getValue()), APFloat(wd));
    return SmallVector<Value>(op->getResults());
  }
  double wd = weightDecay < 0 ? 0.0 : weightDecay;
  auto op = SgdUpdateOp::create(b, loc, TypeRange{type, type}, state[0], grad,
                                state[1], lr, scale,
                                APFloat(momentum.getValue()),
                                nesterov.getValue(), APFloat(wd));
  return SmallVector<Value>(op->getResults());
}

void TrainStepPass::storeState(OpBuilder &b, Location loc, StringRef name,
                               ArrayRef<Value> state) {
  StoreParamOp::create(b, loc, name, state[0]);
  if (optimizer == "adamw") {
    StoreParamOp::create(b, loc, (name + ".adamw.m").str(), state[1]);
    StoreParamOp::create(b, loc, (name + ".adamw.v").str(), state[2]);
  } else {
    StoreParamOp::create(b, loc, (name + ".sgd.momentum").str(), state[1]);
  }
}

SmallVector<Value> TrainStepPass::optimistic(OpBuilder &b, Location loc,
                                             ParamOp decl, StringRef name,
                                             Value grad, Value lr,
                                             Value step) {
  SmallVector<Value> saved = readState(b, loc, decl, name);
  Type elementType = getElementTypeOrSelf(decl.getType());
  Value one = scalarConstant(b, loc, elementType, 1.0);
  storeState(b, loc, name, applyUpdate(b, loc, saved, grad, lr, step, one));
  return saved;
}

void TrainStepPass::validate(OpBuilder &b, Location loc, ParamOp decl,
                             StringRef name, Value grad, Value lr, Value step,
                             Value unclipped, Value redo,
                             ArrayRef<Value> saved) {
  SmallVector<Value> redone = applyUpdate(b, loc, saved, grad, lr, step, redo);
  SmallVector<Value> current = readState(b, loc, decl, name);
  SmallVector<Value> chosen;
  for (auto [r, c] : llvm::zip(redone, current))
    chosen.push_back(SelectOp::create(b, loc, c.getType(), unclipped, r, c));
  storeState(b, loc, name, chosen);
}

void TrainStepPass::update(OpBuilder &b, Location loc, ParamOp decl,
                           StringRef name, Value grad, Value lr, Value step,
                           Value scale) {
  SmallVector<Value> state = readState(b, loc, decl, name);
  storeState(b, loc, name, applyUpdate(b, loc, state, grad, lr, step, scale));
}

Value TrainStepPass::buildPostValidated(
    OpBuilder &b, Location loc, ArrayRef<Gradient> grads,
    function_ref<Value()> buildRate, function_ref<Value()> buildScale,
    Value step, RankedTensorType lossType, RankedTensorType stepType) {
  Value rate = buildRate();
  // The updates do not wait for the norm (its all_reduce, for sharded
  // gradients): each runs unclipped and keeps the state it started from.
  DenseMap<const Gradient *, SmallVector<Value>> saved;
  RepeatGroups byRepeat = groupByRepeat(grads, [&](const Gradient &g) {
    saved[&g] = optimistic(b, loc, g.decl, g.name, g.value, rate, step);
  });
  unsigned perParam = optimizer == "adamw" ? 3 : 2;
  auto layerName = [](StringRef prefix, int64_t first, StringRef what) {
    std::string name = ("train_step." + prefix).str();
    if (first != 0)
      name += "." + std::to_string(first);
    return name + "." + what.str();
  };
  // A layer at the function's start with `args` and `results`, its body
  // built by `body` from the block arguments.
  auto buildLayer = [&](StringRef name, ArrayRef<Type> args,
                        ArrayRef<Type> results,
                        function_ref<void(ValueRange)> body) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(b.getInsertionBlock()->getParentOp());
    auto layer = LayerOp::create(b, loc, name, b.getFunctionType(args, results),
                                 nullptr, nullptr);
    Block *lb = b.createBlock(&layer.getBody());
    for (Type t : args)
      lb->addArgument(t, loc);
    body(lb->getArguments());
    return layer;
  };
  for (auto &entry : byRepeat) {
    auto [prefix, first, count] = entry.first;
    // Named, not bound: a lambda below captures it (C++17).
    auto &group = entry.second;
    SmallVector<Type> carried{lossType, stepType};
    SmallVector<Type> args(carried), results(carried), stacked(carried);
    for (const Gradient *g : group) {
      Type t = ParamOp(g->decl).getType();
      args.push_back(t);
      results.append(perParam, t);
      stacked.append(perParam, stackedType(t, count));
    }
    LayerOp layer = buildLayer(
        layerName(prefix, first, "update"), args, results, [&](ValueRange a) {
          SmallVector<Value> yields(a.take_front(2));
          for (auto [i, g] : llvm::enumerate(group))
            llvm::append_range(yields, optimistic(b, loc, ParamOp(g->decl),
                                                  g->local, a[2 + i], a[0],
                                                  a[1]));
          YieldOp::create(b, loc, yields);
        });
    SmallVector<Value> operands{rate, step};
    for (const Gradient *g : group)
      operands.push_back(g->value);
    auto repeat = RepeatOp::create(b, loc, stacked, layer.getSymName(),
                                   operands, prefix, count, first,
                                   b.getI64IntegerAttr(2), /*reverse=*/false,
                                   group.front()->instanceNames);
    for (auto [i, g] : llvm::enumerate(group))
      saved[g] = SmallVector<Value>(
          repeat.getResults().slice(2 + i * perParam, perParam));
  }

  // The norm, then whether the optimistic step stands: the scale is 1
  // exactly when it does (finite, not clipped), so `unclipped` = 1 - scale
  // is 0 then, else not (NaN for a non-finite step). The redo's scale is
  // the scale, or NaN (0 * (1 / 0)) where the update stands, which skips.
  Value scale = buildScale();
  Type elementType = lossType.getElementType();
  Value one = scalarConstant(b, loc, elementType, 1.0);
  Value zero = scalarConstant(b, loc, elementType, 0.0);
  Value unclipped = SubOp::create(b, loc, lossType, one, scale);
  Value redo = AddOp::create(
      b, loc, lossType, scale,
      MulOp::create(b, loc, lossType, zero,
                    DivOp::create(b, loc, lossType, one, unclipped)));
  for (const Gradient &g : grads)
    if (!g.instances)
      validate(b, loc, g.decl, g.name, g.value, rate, step, unclipped, redo,
               saved[&g]);
  for (auto &entry : byRepeat) {
    auto [prefix, first, count] = entry.first;
    // Named, not bound: a lambda below captures it (C++17).
    auto &group = entry.second;
    SmallVector<Type> carried{lossType, stepType, lossType, lossType};
    SmallVector<Type> args(carried);
    for (const Gradient *g : group) {
      Type t = ParamOp(g->decl).getType();
      args.push_back(t);
      args.append(perParam, t);
    }
    LayerOp layer = buildLayer(
        layerName(prefix, first, "validate"), args, carried,
        [&](ValueRange a) {
          for (auto [i, g] : llvm::enumerate(group)) {
            ValueRange mine = a.drop_front(4 + i * (1 + perParam));
            validate(b, loc, ParamOp(g->decl), g->local, mine[0], a[0], a[1],
                     a[2], a[3], SmallVector<Value>(mine.slice(1, perParam)));
          }
          YieldOp::create(b, loc, a.take_front(4));
        });
    SmallVector<Value> operands{rate, step, unclipped, redo};
    for (const Gradient *g : group) {
      operands.push_back(g->value);
      llvm::append_range(operands, saved[g]);
    }
    RepeatOp::create(b, loc, carried, layer.getSymName(), operands, prefix,
                     count, first, b.getI64IntegerAttr(4), /*reverse=*/false,
                     group.front()->instanceNames);
  }
  return rate;
}

Value TrainStepPass::buildClipScale(OpBuilder &b, Location loc,
                                    Value sumSquares, Value loss,
                                    Value &norm) {
  auto type = cast<RankedTensorType>(loss.getType());
  Type elementType = type.getElementType();
  norm = SqrtOp::create(b, loc, sumSquares);
  Value scale =
      clipNorm > 0.0
          ? Value(ClipCoefficientOp::create(b, loc, norm,
                                            APFloat(clipNorm.getValue())))
          : scalarConstant(b, loc, elementType, 1.0);
  // A non-finite loss or gradient norm makes the scale non-finite, which
  // the optimizer updates take as "skip this step" (parameters and state
  // stay). 0 * x is zero for a finite x, so a finite step is unchanged bit
  // for bit.
  Value zero = scalarConstant(b, loc, elementType, 0.0);
  Value guard =
      AddOp::create(b, loc, type, MulOp::create(b, loc, type, zero, norm),
                    MulOp::create(b, loc, type, zero, loss));
  return AddOp::create(b, loc, type, scale, guard);
}

void TrainStepPass::buildUpdateRepeat(
    OpBuilder &b, Location loc, func::FuncOp fn, StringRef prefix,
    int64_t first, int64_t count, ArrayRef<const Gradient *> group,
    ValueRange carried,
    function_ref<void(ValueRange carried, ValueRange grads)> body) {
  std::string layerName = ("train_step." + prefix).str();
  if (first != 0)
    layerName += "." + std::to_string(first);
  layerName += ".update";
  SmallVector<Type> carriedTypes(carried.getTypes());
  SmallVector<Type> layerArgs(carriedTypes);
  for (const Gradient *g : group)
    layerArgs.push_back(ParamOp(g->decl).getType());
  LayerOp layer;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(fn);
    layer = LayerOp::create(b, loc, layerName,
                            b.getFunctionType(layerArgs, carriedTypes),
                            nullptr, nullptr);
    Block *lb = b.createBlock(&layer.getBody());
    for (Type t : layerArgs)
      lb->addArgument(t, loc);
    ValueRange args = lb->getArguments();
    body(args.take_front(carried.size()), args.drop_front(carried.size()));
    YieldOp::create(b, loc, args.take_front(carried.size()));
  }
  SmallVector<Value> operands(carried);
  for (const Gradient *g : group)
    operands.push_back(g->value);
  // The update names each instance's parameters as the forward pass did.
  RepeatOp::create(b, loc, carriedTypes, layer.getSymName(), operands, prefix,
                   count, first, b.getI64IntegerAttr(carried.size()),
                   /*reverse=*/false, group.front()->instanceNames);
}

/// The names of a parameter's pending slots (defer-validation): the state
/// before the last optimistic update, then that update's gradient.
static SmallVector<std::string> pendingNames(StringRef name,
                                            ArrayRef<StringRef> suffixes) {
  SmallVector<std::string> names{(name + ".pending").str()};
  for (StringRef suffix : suffixes)
    names.push_back((name + ".pending" + suffix).str());
  names.push_back((name + ".pending.grad").str());
  return names;
}

void TrainStepPass::deferredUpdate(OpBuilder &b, Location loc, ParamOp decl,
                                   StringRef name, Value grad,
                                   ValueRange rates, ValueRange steps,
                                   Value unclipped, Value redo, Value scale) {
  auto type = cast<RankedTensorType>(decl.getType());
  auto zeros = InitAttr::get(b.getContext(), InitKind::zeros, APFloat(0.0),
                             APFloat(0.0));
  SmallVector<StringRef> suffixes;
  if (optimizer == "adamw")
    suffixes = {".adamw.m", ".adamw.v"};
  else
    suffixes = {".sgd.momentum"};
  SmallVector<std::string> slots = pendingNames(name, suffixes);
  SmallVector<Value> saved;
  for (const std::string &slot : slots) {
    auto read = ParamOp::create(b, loc, type, slot, zeros, /*state=*/true,
                                /*block_of=*/nullptr);
    read->setAttr(kTransientAttrName, b.getUnitAttr());
    saved.push_back(read);
  }
  Value previousGrad = saved.pop_back_val();
  // The previous step, validated: its update stands, or is redone from the
  // state it started from (nothing pending: the slots hold zeros and
  // `unclipped` is 0, so the current state stands).
  SmallVector<Value> redone =
      applyUpdate(b, loc, saved, previousGrad, rates[1], steps[1], redo);
  SmallVector<Value> current = readState(b, loc, decl, name);
  SmallVector<Value> validated;
  for (auto [r, c] : llvm::zip(redone, current))
    validated.push_back(SelectOp::create(b, loc, c.getType(), unclipped, r, c));
  for (auto [slot, v] : llvm::zip(slots, validated))
    StoreParamOp::create(b, loc, slot, v);
  StoreParamOp::create(b, loc, slots.back(), grad);
  storeState(b, loc, name,
             applyUpdate(b, loc, validated, grad, rates[0], steps[0], scale));
}

TrainStepPass::Pending TrainStepPass::readPending(OpBuilder &b, Location loc,
                                                  RankedTensorType type) {
  auto zeros = InitAttr::get(b.getContext(), InitKind::zeros, APFloat(0.0),
                             APFloat(0.0));
  auto read = [&](StringRef what) {
    auto param =
        ParamOp::create(b, loc, type, (kPendingPrefix + what).str(), zeros,
                        /*state=*/true, /*block_of=*/nullptr);
    param->setAttr(kTransientAttrName, b.getUnitAttr());
    return param;
  };
  ParamOp sumSquares = read("sum_squares");
  sumSquares->setAttr(kPendingSumAttrName, b.getUnitAttr());
  // In a pipeline the loss is the last stage's: as a pending sum (the
  // other stages' shares zeros) it arrives with the sum of squares, and
  // every stage validates without waiting for the last.
  ParamOp pendingLoss = read("loss");
  if (viaPipeline)
    pendingLoss->setAttr(kPendingSumAttrName, b.getUnitAttr());
  return {sumSquares, pendingLoss, read("active")};
}

std::pair<Value, Value> TrainStepPass::buildDeferred(
    OpBuilder &b, Location loc, ArrayRef<Gradient> grads,
    const Pending &pending, Value step, Value previousStep, Value final,
    Value loss, Value squares, Value rate, Value previousRate,
    RankedTensorType lossType, RankedTensorType stepType) {
  Type elementType = lossType.getElementType();
  // The previous step's scale (1 when nothing is pending: the current
  // state stands).
  Value norm;
  Value guarded =
      buildClipScale(b, loc, pending.sumSquares, pending.loss, norm);
  Value one = scalarConstant(b, loc, elementType, 1.0);
  Value zero = scalarConstant(b, loc, elementType, 0.0);
  Value scale =
      SelectOp::create(b, loc, lossType, pending.active, guarded, one);
  // As post-validate: `unclipped` is 0 exactly when the optimistic update
  // stands; the redo's scale is NaN then (a skip).
  Value unclipped = SubOp::create(b, loc, lossType, one, scale);
  Value redo = AddOp::create(
      b, loc, lossType, scale,
      MulOp::create(b, loc, lossType, zero,
                    DivOp::create(b, loc, lossType, one, unclipped)));
  // A rolled-back step changed the parameters this step's forward and
  // backward pass read: this step's update is skipped and the caller runs
  // the step again. So is the last call's (`final`), which only validates.
  Value retry = SelectOp::create(b, loc, lossType, unclipped, one, zero);
  Value skip = SelectOp::create(b, loc, lossType, final, one, retry);
  Value nan = scalarConstant(b, loc, elementType,
                             std::numeric_limits<double>::quiet_NaN());
  Value updateScale = SelectOp::create(b, loc, lossType, skip, nan, one);

  SmallVector<Value> rates{rate, previousRate}, steps{step, previousStep};
  RepeatGroups byRepeat = groupByRepeat(grads, [&](const Gradient &g) {
    deferredUpdate(b, loc, g.decl, g.name, g.value, rates, steps, unclipped,
                   redo, updateScale);
  });
  func::FuncOp fn = cast<func::FuncOp>(b.getInsertionBlock()->getParentOp());
  for (auto &entry : byRepeat) {
    auto [prefix, first, count] = entry.first;
    // Named, not bound: the lambda below captures it (C++17).
    auto &group = entry.second;
    buildUpdateRepeat(
        b, loc, fn, prefix, first, count, group,
        {rate, previousRate, step, previousStep, unclipped, redo, updateScale},
        [&](ValueRange c, ValueRange grads) {
          for (auto [g, grad] : llvm::zip(group, grads))
            deferredUpdate(b, loc, ParamOp(g->decl), g->local, grad,
                           c.slice(0, 2), c.slice(2, 2), c[4], c[5], c[6]);
        });
  }
  // What the next call validates: nothing after a skipped update. The sum
  // of squares is stored as each device holds it (braid-partition leaves
  // a pending sum pending and reduces it where it is read).
  auto store = StoreParamOp::create(
      b, loc, (kPendingPrefix + "sum_squares").str(), squares);
  store->setAttr(kPendingSumAttrName, b.getUnitAttr());
  auto lossStore =
      StoreParamOp::create(b, loc, (kPendingPrefix + "loss").str(), loss);
  if (viaPipeline)
    lossStore->setAttr(kPendingSumAttrName, b.getUnitAttr());
  StoreParamOp::create(b, loc, (kPendingPrefix + "active").str(),
                       SelectOp::create(b, loc, lossType, skip, zero, one));
  return {norm, retry};
}

void TrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  std::string gradName = entry + "_grad";
  microbatches = accumulation;
  viaPipeline = pipeline;
  auto grad = module.lookupSymbol<func::FuncOp>(gradName);
  if (!grad) {
    module.emitError() << "braid-train-step: no function @" << gradName
                       << "; run braid-autodiff (entry=" << entry
                       << ") first";
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    module.emitError("braid-train-step: @train_step already exists");
    return signalPassFailure();
  }
  // A scheduled gradient function is only ever run as a pipeline.
  if (auto schedule = grad->getAttrOfType<DictionaryAttr>("braid.schedule")) {
    int64_t m = schedule.getAs<IntegerAttr>("microbatches").getInt();
    if (accumulation != 1 && accumulation != m) {
      grad.emitOpError() << "is scheduled for " << m
                         << " micro-batches, but braid-train-step was asked "
                            "for accumulation="
                         << int64_t(accumulation);
      return signalPassFailure();
    }
    microbatches = m;
    viaPipeline = true;
  }
  if (viaPipeline && deferW) {
    module.emitError("braid-train-step: defer-w does not apply to pipeline "
                     "(the schedule orders the W pieces)");
    return signalPassFailure();
  }
  if (deferValidation && postValidate) {
    module.emitError("braid-train-step: defer-validation and post-validate "
                     "exclude each other (the first validates in the next "
                     "call, the second within the step)");
    return signalPassFailure();
  }
  Location loc = grad.getLoc();
  auto lossType = cast<RankedTensorType>(grad.getResultTypes()[0]);

  // Gradients by parameter.
  SmallVector<Gradient> grads;
  for (unsigned i = 1; i < grad.getNumResults(); ++i) {
    auto of = grad.getResultAttrOfType<StringAttr>(i, "braid.gradient_of");
    if (!of || of.getValue().starts_with("arg:"))
      continue;
    Gradient g;
    g.name = of.str();
    g.index = i;
    if (auto inst = grad.getResultAttrOfType<DenseI64ArrayAttr>(
            i, "braid.instances")) {
      g.instances = std::make_pair(inst[0], inst[1]);
      auto [prefix, local] = of.getValue().split(".{}.");
      g.prefix = prefix.str();
      g.local = local.str();
      g.instanceNames =
          grad.getResultAttrOfType<ArrayAttr>(i, "braid.instance_names");
    }
    g.decl = findDeclaration(grad, g);
    if (!g.decl) {
      grad.emitOpError() << "returns a gradient of '" << g.name
                         << "' but declares no such parameter";
      return signalPassFailure();
    }
    grads.push_back(std::move(g));
  }
  if (grads.empty()) {
    grad.emitOpError("has no parameter gradients to train with");
    return signalPassFailure();
  }

  // @train_step(batch..., step) -> (loss, lr, grad_norm).
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(grad);
  SmallVector<Type> argTypes;
  // braid.pipeline stacks micro-batches even when there is one.
  for (Type t : grad.getArgumentTypes())
    argTypes.push_back(microbatches > 1 || viaPipeline
                           ? stackedType(t, microbatches)
                           : t);
  auto stepType = RankedTensorType::get({}, b.getI64Type());
  unsigned numBatch = argTypes.size();
  argTypes.push_back(stepType);
  // defer-validation: the step the pending update was, and whether this
  // call only validates it (the last of a run, or before a checkpoint).
  if (deferValidation) {
    argTypes.push_back(stepType);
    argTypes.push_back(lossType);
  }
  SmallVector<Type> resultTypes(deferValidation ? 4 : 3, lossType);
  auto fn = func::FuncOp::create(b, loc, "train_step",
                                 b.getFunctionType(argTypes, resultTypes));
  for (unsigned i = 0; i < grad.getNumArguments(); ++i)
    fn.setArgAttrs(i, grad.getArgAttrDict(i));
  fn.setArgAttr(numBatch, "braid.name", b.getStringAttr("step"));
  if (deferValidation) {
    fn.setArgAttr(numBatch + 1, "braid.name",
                  b.getStringAttr("previous_step"));
    fn.setArgAttr(numBatch + 2, "braid.name", b.getStringAttr("final"));
  }
  // Named arrays: the range-for would not keep an initializer list alive.
  static constexpr StringLiteral resultNames[] = {"loss", "lr", "grad_norm"};
  static constexpr StringLiteral deferredNames[] = {
      "loss", "lr", "previous_grad_norm", "retry"};
  ArrayRef<StringLiteral> names =
      deferValidation ? ArrayRef<StringLiteral>(deferredNames) : resultNames;
  for (auto [i, name] : llvm::enumerate(names))
    fn.setResultAttr(i, "braid.name", b.getStringAttr(name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  ValueRange batch = body->getArguments().take_front(numBatch);
  Value step = body->getArgument(numBatch);

  FailureOr<SmallVector<Value>> sums = accumulate(b, grad, batch);
  if (failed(sums))
    return signalPassFailure();
  Value loss = (*sums)[0];
  for (Gradient &g : grads)
    g.value = (*sums)[g.index];

  // Clipping and the learning rate.
  SmallVector<Value> gradValues;
  for (const Gradient &g : grads)
    gradValues.push_back(g.value);
  // The square root of the sum of each gradient's sum of squares: each
  // sum shards with its gradient, so the norm of distributed gradients
  // needs only scalar all_reduces.
  Value squares;
  for (Value g : gradValues) {
    Value s = SumSquaresOp::create(b, loc, lossType, ValueRange{g});
    squares = squares ? AddOp::create(b, loc, lossType, squares, s) : s;
  }
  Value norm;
  auto buildScale = [&]() -> Value {
    return buildClipScale(b, loc, squares, loss, norm);
  };
  auto buildRate = [&]() -> Value {
    double lrScale = 1.0;
    if (lrReferenceBatch > 0) {
      auto first = cast<RankedTensorType>(grad.getArgumentTypes()[0]);
      int64_t global =
          microbatches * (first.getRank() ? first.getDimSize(0) : 1);
      lrScale = double(global) / lrReferenceBatch;
    }
    return LrScheduleOp::create(b, loc, lossType, *symbolizeLrDecay(decay),
                                step, APFloat(lr * lrScale),
                                APFloat(minLr * lrScale), warmupSteps,
                                totalSteps);
  };
  if (deferValidation) {
    Value rate = buildRate();
    b.setInsertionPointToStart(body);
    Pending pending = readPending(b, loc, lossType);
    b.setInsertionPointToEnd(body);
    Value previousStep = body->getArgument(numBatch + 1);
    // The rate the pending update had: the same schedule at its step.
    Operation *previousRate = b.clone(*rate.getDefiningOp());
    previousRate->setOperand(0, previousStep);
    auto [previousNorm, retry] = buildDeferred(
        b, loc, grads, pending, step, previousStep,
        body->getArgument(numBatch + 2),
        loss, squares, rate, previousRate->getResult(0), lossType,
        stepType);
    func::ReturnOp::create(b, loc,
                           ValueRange{loss, rate, previousNorm, retry});
    return;
  }
  if (postValidate) {
    Value rate = buildPostValidated(b, loc, grads, buildRate, buildScale, step,
                                    lossType, stepType);
    func::ReturnOp::create(b, loc, ValueRange{loss, rate, norm});
    return;
  }
  Value scale = buildScale();
  Value rate = buildRate();

  // Updates: top-level parameters here, layer parameters in a repeat over
  // the instances of the forward pass.
  RepeatGroups byRepeat = groupByRepeat(grads, [&](const Gradient &g) {
    update(b, loc, g.decl, g.name, g.value, rate, step, scale);
  });
  for (auto &entry : byRepeat) {
    auto [prefix, first, count] = entry.first;
    // Named, not bound: the lambda below captures it (C++17).
    auto &group = entry.second;
    buildUpdateRepeat(b, loc, fn, prefix, first, count, group,
                      {rate, step, scale}, [&](ValueRange c, ValueRange grads) {
                        for (auto [g, grad] : llvm::zip(group, grads))
                          update(b, loc, ParamOp(g->decl), g->local, grad,
                                 c[0], c[1], c[2]);
                      });
  }
  func::ReturnOp::create(b, loc, ValueRange{loss, rate, norm});
}
