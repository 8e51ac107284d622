//===- ModelCost.cpp - Per-segment costs from braid IR --------------------===//
//
// Derives the gradient function on a copy of the module (once per
// recomputation mode) and sums CostOpInterface's counts per segment, pass
// and op class. Which work tensor parallelism divides is found by
// propagating "divided" through the forward ops (ModelCost.h).
//
//===----------------------------------------------------------------------===//

#include "braid/Planner/ModelCost.h"

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/IR/BraidTraits.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::plan;

StringRef mlir::braid::plan::getRecomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

std::optional<Recompute> mlir::braid::plan::parseRecompute(StringRef name) {
  for (int r = 0; r < kNumRecomputeModes; ++r)
    if (name == getRecomputeName(Recompute(r)))
      return Recompute(r);
  return std::nullopt;
}

StringRef mlir::braid::plan::getPassKindName(PassKind p) {
  switch (p) {
  case PassKind::Forward:
    return "F";
  case PassKind::Backward:
    return "B";
  case PassKind::Weight:
    return "W";
  }
  return "?";
}

double PassWork::getFlops() const {
  double n = 0;
  for (int c = 0; c < kNumOpClasses; ++c)
    n += split[c].flops + replicated[c].flops;
  return n;
}

Work PassWork::getRankWork(OpClass c, int tp, bool sequenceParallel) const {
  const Work &s = split[(int)c], &r = replicated[(int)c];
  double rdiv = sequenceParallel ? tp : 1;
  return {s.flops / tp + r.flops / rdiv, s.bytes / tp + r.bytes / rdiv};
}

bool SegmentCost::hasWork() const {
  const PassWork &f = passes[(int)Recompute::None][(int)PassKind::Forward];
  if (f.kernels > 0)
    return true;
  for (int c = 0; c < kNumOpClasses; ++c)
    if (f.split[c].flops + f.split[c].bytes + f.replicated[c].flops +
            f.replicated[c].bytes >
        0)
      return true;
  return false;
}

/// A rank's share of bytes divided over tp and of bytes replicated there
/// (divided too along the sequence with sequence parallelism).
static double getRankBytes(double split, double replicated, int tp,
                           bool sequenceParallel) {
  return split / tp + replicated / (sequenceParallel ? tp : 1);
}

double SegmentCost::getHeldBytes(Recompute r, int tp,
                                 bool sequenceParallel) const {
  return getRankBytes(heldSplitBytes[(int)r], heldReplicatedBytes[(int)r], tp,
                      sequenceParallel);
}

static double getRankBytes(const ArenaPoint &a, double scale, int tp,
                           bool sequenceParallel) {
  return (a.splitScaled * scale + a.splitFixed) / tp +
         a.replicatedScaled * scale / (sequenceParallel ? tp : 1) +
         a.replicatedFixed;
}

double SegmentCost::getArenaBytes(Recompute r, PassKind p, double scale, int tp,
                                  bool sequenceParallel) const {
  double peak = 0;
  for (const ArenaPoint &a : arena[(int)r][(int)p])
    peak = std::max(peak, getRankBytes(a, scale, tp, sequenceParallel));
  return peak;
}

double SegmentCost::getYieldedBytes(Recompute r, PassKind p, double scale,
                                    int tp, bool sequenceParallel) const {
  return getRankBytes(yielded[(int)r][(int)p], scale, tp, sequenceParallel);
}

double SegmentCost::getSavedBytes(Recompute r, int tp,
                                  bool sequenceParallel) const {
  return getRankBytes(savedSplitBytes[(int)r], savedReplicatedBytes[(int)r], tp,
                      sequenceParallel);
}

double VocabTable::getElements() const {
  double n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t ModelCost::getNumLayers() const {
  int64_t n = 0;
  for (const SegmentCost &l : layers)
    n += l.count;
  return n;
}

const SegmentCost &ModelCost::getLayer(int64_t i) const {
  for (const SegmentCost &l : layers) {
    if (i < l.count)
      return l;
    i -= l.count;
  }
  return layers.back();
}

double ModelCost::getParams() const {
  double n = pre.getParams() + post.getParams();
  for (const SegmentCost &l : layers)
    n += l.getParams() * l.count;
  return n;
}

double ModelCost::getModelFlops() const {
  auto seg = [](const SegmentCost &s) {
    double n = 0;
    for (int p = 0; p < kNumPassKinds; ++p)
      n += s.passes[(int)Recompute::None][p].getFlops();
    return n * s.count;
  };
  double n = seg(pre) + seg(post);
  for (const SegmentCost &l : layers)
    n += seg(l);
  return n;
}

//===----------------------------------------------------------------------===//
// Extraction
//===----------------------------------------------------------------------===//

static double bytesOf(Type type) {
  auto t = dyn_cast<ShapedType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  return double(t.getNumElements()) * ((t.getElementTypeBitWidth() + 7) / 8);
}

static std::string elementTypeName(Type t) {
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

static OpClass classify(Operation *op, CostOpInterface cost) {
  if (isa<AttentionOp>(op))
    return OpClass::Attention;
  if (isa<AttentionGradOp>(op))
    return OpClass::AttentionBackward;
  if (cost.getMatmulFlops() > 0)
    return OpClass::Matmul;
  if (isa<RowReductionOpInterface>(op)) {
    // Over class scores with integer labels: a loss or its gradient.
    bool labels = llvm::any_of(op->getOperandTypes(), [](Type t) {
      auto s = dyn_cast<ShapedType>(t);
      return s && isa<IntegerType>(s.getElementType());
    });
    return labels ? OpClass::Loss : OpClass::RowWise;
  }
  if (op->hasTrait<OpTrait::braid::Transcendental>())
    return OpClass::Transcendental;
  return OpClass::Memory;
}

/// Ops that cost nothing at run time: parameter reads, constants, views.
static bool isFree(Operation *op) {
  return isa<ParamOp, ConstantOp, ReshapeOp>(op) || !isa<CostOpInterface>(op);
}

SequenceGrad plan::getSequenceGrad(Operation *op, Type carried) {
  auto param = dyn_cast_or_null<ParamOp>(op);
  auto act = dyn_cast_or_null<ShapedType>(carried);
  if (!param || !act || !act.hasStaticShape() || act.getRank() < 2)
    return SequenceGrad::None;
  auto type = dyn_cast<ShapedType>(param.getType());
  if (!type || !type.hasRank())
    return SequenceGrad::None;
  SequenceGrad out = SequenceGrad::None;
  for (Operation *user : param->getUsers()) {
    if (getPhase(user).value_or(Phase::F) != Phase::F)
      continue;
    bool readsActivation = llvm::any_of(user->getOperands(), [&](Value v) {
      return v != param.getResult() && v.getType() == act;
    });
    if (!readsActivation)
      continue;
    // Divided only where the parameter is broadcast against the activation
    // elementwise (NumPy rules, from the right) and so indexed by its
    // sequence: its dimension that meets dimension 1, if any. Not where it
    // merely has a dimension of the sequence's size (a product's weight
    // when hidden == sequence contracts it).
    bool broadcast = isa<AddOp, SubOp, MulOp, DivOp>(user) &&
                     user->getNumResults() == 1 &&
                     user->getResult(0).getType() == act;
    int64_t j = 1 - (act.getRank() - type.getRank());
    if (broadcast && j >= 0 && type.getDimSize(j) == act.getDimSize(1) &&
        act.getDimSize(1) > 1)
      return SequenceGrad::Divided;
    out = SequenceGrad::Partial;
  }
  return out;
}

/// Adds `param` to `seg`'s sequence-parallel gradient counts
/// (SegmentCost::sequencePartialParamTensors, sequenceSplitParamTensors),
/// unless tensor parallelism divides it.
static void countSequenceGrad(SegmentCost &seg, ParamOp param, bool split,
                              Type carried) {
  if (split)
    return;
  switch (getSequenceGrad(param, carried)) {
  case SequenceGrad::Partial:
    seg.sequencePartialParamTensors += 1;
    seg.sequencePartialParams +=
        cast<ShapedType>(param.getType()).getNumElements();
    break;
  case SequenceGrad::Divided:
    seg.sequenceSplitParamTensors += 1;
    break;
  case SequenceGrad::None:
    break;
  }
}

namespace {
/// Which values and ops of a run of forward ops tensor parallelism divides,
/// and the collectives that needs (ModelCost.h).
struct SplitAnalysis {
  llvm::DenseSet<Value> splitValues;
  llvm::DenseSet<Operation *> splitWork;
  llvm::DenseSet<Value> dividedParams;
  /// Column-parallel matmuls and their replicated input: one all_reduce of
  /// each distinct input's gradient in B.
  llvm::MapVector<Operation *, Value> columnParallel;
  /// Ops needing an all_reduce of their result in F: row-parallel matmuls
  /// (partial sums), vocabulary-parallel embedding lookups.
  llvm::SmallVector<Operation *> forwardCollectiveOps;
  /// Cross-entropies of divided logits (vocabulary parallel).
  llvm::SmallVector<Operation *> splitCrossEntropies;

  int getNumBackwardAllReduces() const {
    llvm::DenseSet<Value> inputs;
    for (auto &[op, input] : columnParallel)
      inputs.insert(input);
    return inputs.size();
  }

  bool isSplit(Value v) const { return splitValues.contains(v); }

  void run(llvm::ArrayRef<Operation *> ops) {
    // Parameters read by a matmul are divided, and embedding tables
    // (vocabulary parallel, tied to the head or not).
    for (Operation *op : ops) {
      if (isa<MatmulOp>(op))
        for (Value v : op->getOperands())
          if (v.getDefiningOp<ParamOp>())
            dividedParams.insert(v);
      if (isa<EmbeddingOp>(op) && op->getOperand(0).getDefiningOp<ParamOp>())
        dividedParams.insert(op->getOperand(0));
    }
    for (Operation *op : ops)
      visit(op);
    // Another parameter is divided where its users' results are (biases of
    // column-parallel matmuls).
    for (Operation *op : ops) {
      auto param = dyn_cast<ParamOp>(op);
      if (!param || dividedParams.contains(param.getResult()))
        continue;
      for (Operation *user : param->getUsers())
        if (llvm::any_of(user->getResults(),
                         [&](Value r) { return isSplit(r); }))
          splitValues.insert(param.getResult());
    }
  }

  void visit(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (dividedParams.contains(param.getResult()))
        splitValues.insert(param.getResult());
      return;
    }
    if (isa<RepeatOp, ConstantOp>(op))
      return;
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      Value lhs = mm.getLhs(), rhs = mm.getRhs();
      bool lhsParam = dividedParams.contains(lhs);
      bool rhsParam = dividedParams.contains(rhs);
      splitWork.insert(op);
      if (lhsParam != rhsParam) {
        Value x = lhsParam ? rhs : lhs;
        if (isSplit(x)) {
          forwardCollectiveOps.push_back(op); // row parallel: partial sums
        } else {
          columnParallel[op] = x;
          splitValues.insert(mm.getResult());
        }
        return;
      }
      if (isSplit(lhs) || isSplit(rhs))
        splitValues.insert(mm.getResult());
      return;
    }
    if (isa<EmbeddingOp>(op)) {
      if (isSplit(op->getOperand(0)))
        forwardCollectiveOps.push_back(op); // vocabulary parallel lookup
      return;
    }
    bool anySplit =
        llvm::any_of(op->getOperands(), [&](Value v) { return isSplit(v); });
    if (!anySplit)
      return;
    splitWork.insert(op);
    if (isa<CrossEntropyOp>(op))
      splitCrossEntropies.push_back(op);
    else
      for (Value r : op->getResults())
        splitValues.insert(r);
  }
};

/// Whether braid-fuse-elementwise keeps `v` in a fused region's registers:
/// an elementwise value read only by elementwise ops of its shape (or
/// row-wise ones reducing it) in its own block.
static bool isFusedAway(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !FusedOp::isFusible(def) || v.use_empty())
    return false;
  return llvm::all_of(v.getUsers(), [&](Operation *user) {
    if (user->getBlock() != def->getBlock() ||
        user->hasTrait<OpTrait::IsTerminator>())
      return false;
    if (FusedOp::isRowwise(user))
      return user->getOperand(0) == v;
    return FusedOp::isFusible(user) &&
           user->getResult(0).getType() == v.getType();
  });
}

/// Work of one pass of one segment before it is divided: split and
/// replicated as far as known (F), or all in `split` (B, W) until the
/// forward's fractions are applied.
struct Accumulator {
  PassWork work;
  void add(Operation *op, bool split) {
    auto cost = dyn_cast<CostOpInterface>(op);
    if (!cost || isFree(op))
      return;
    OpClass c = classify(op, cost);
    // A value a fused region keeps in registers is neither written by its
    // producer nor read by its users, and its producer is no kernel of its
    // own (braid-fuse-elementwise runs the chain as one loop).
    double fused = 0;
    bool joinsRegion = false;
    for (Value v : op->getResults())
      if (isFusedAway(v)) {
        fused += bytesOf(v.getType());
        joinsRegion = true;
      }
    for (Value v : op->getOperands())
      if (isFusedAway(v))
        fused += bytesOf(v.getType());
    // Matrix products: their multiply-adds only (the result's writes are
    // in the bytes).
    Work w{c == OpClass::Matmul ? cost.getMatmulFlops() : cost.getFlops(),
           std::max(0.0, cost.getBytes() - fused)};
    (split ? work.split : work.replicated)[(int)c] += w;
    // Every rank of a tp group runs the kernel, on its share of the work.
    if (!joinsRegion)
      work.kernels += 1;
  }
};
} // namespace

/// Ops of `layer`'s body in order (without the terminator).
static SmallVector<Operation *> bodyOps(LayerOp layer) {
  SmallVector<Operation *> ops;
  for (Operation &op : layer.getBody().front().without_terminator())
    ops.push_back(&op);
  return ops;
}

/// Divides B and W work like F's: per class, the share F divides (FLOPs for
/// compute classes, bytes for memory-bound ops). Autodiff's ops carry no
/// link to the forward op they differentiate, and each gradient op works on
/// tensors of the forward value's sharding.
static void applyForwardShares(SegmentCost &seg, int r) {
  PassWork &f = seg.passes[r][(int)PassKind::Forward];
  double totalSplit = 0, total = 0;
  for (int c = 0; c < kNumOpClasses; ++c) {
    totalSplit += f.split[c].bytes;
    total += f.split[c].bytes + f.replicated[c].bytes;
  }
  for (int c = 0; c < kNumOpClasses; ++c) {
    bool compute = !isBytesBound(OpClass(c));
    // The attention's gradients are divided as its forward is.
    int fc =
        OpClass(c) == OpClass::AttentionBackward ? (int)OpClass::Attention : c;
    double s = compute ? f.split[fc].flops : f.split[fc].bytes;
    double a = s + (compute ? f.replicated[fc].flops : f.replicated[fc].bytes);
    double share =
        a > 0 ? s / a
              : (compute ? 1.0 : (total > 0 ? totalSplit / total : 1.0));
    for (int p = 1; p < kNumPassKinds; ++p) {
      PassWork &w = seg.passes[r][p];
      Work all = w.split[c];
      all += w.replicated[c];
      w.split[c] = {all.flops * share, all.bytes * share};
      w.replicated[c] = {all.flops * (1 - share), all.bytes * (1 - share)};
    }
  }
}

namespace {
/// Collects what one recomputation mode's gradient function costs.
class Extractor {
public:
  Extractor(ModelCost &model, int r) : model(model), r(r) {}

  LogicalResult run(ModuleOp module, func::FuncOp grad) {
    SmallVector<Operation *> top;
    for (Operation &op : grad.getBody().front().without_terminator())
      top.push_back(&op);

    // Segments of the repeats, by prefix; top-level ops go before or after
    // the layers by their position relative to the repeat of their phase.
    SmallVector<Operation *> forwardOps;
    // The activation the first repeat carries (what sequence parallelism
    // divides along its sequence).
    Type carried;
    bool seenForwardRepeat = false, seenBackwardRepeat = false;
    llvm::DenseMap<Operation *, SegmentCost *> segmentOf;
    for (Operation *op : top) {
      Phase phase = getPhase(op).value_or(Phase::F);
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        SegmentCost *seg = layerSegment(repeat);
        if (!seg)
          return repeat.emitOpError("repeat of an unknown layer prefix '")
                 << repeat.getPrefix() << "'";
        auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
            repeat, repeat.getLayerAttr());
        if (!layer)
          return repeat.emitOpError("layer not found");
        if (phase == Phase::F) {
          seenForwardRepeat = true;
          if (!carried && repeat.getNumOperands() > 0)
            carried = repeat.getOperand(0).getType();
          forwardLayer(repeat, layer, *seg);
          scanArena(repeat, layer, phase, *seg);
        } else {
          if (phase == Phase::B)
            seenBackwardRepeat = true;
          scanArena(repeat, layer, phase, *seg);
          countHeld(repeat, layer, phase, *seg);
          Accumulator acc;
          int rerun = 0;
          bool lead = false;
          for (Operation *inner : bodyOps(layer)) {
            acc.add(inner, true);
            if (phase == Phase::B && !lead)
              lead = countLead(inner, seg->backwardLeadParamTensors[r],
                               seg->backwardLeadParams[r],
                               seg->backwardLeadWorkingCopyTensors[r],
                               seg->backwardLeadWorkingCopyParams[r]);
            if (auto param = dyn_cast<ParamOp>(inner))
              if (phase == Phase::B && !param->use_empty()) {
                seg->backwardParamTensors[r] += 1;
                seg->backwardParams[r] +=
                    cast<ShapedType>(param.getType()).getNumElements();
                if (isWorkingCopy(param)) {
                  seg->backwardWorkingCopyTensors[r] += 1;
                  seg->backwardWorkingCopyParams[r] +=
                      cast<ShapedType>(param.getType()).getNumElements();
                }
              }
            // A forward row-parallel product B re-runs (the same weight,
            // untransposed) needs its all_reduce again.
            if (auto mm = dyn_cast<MatmulOp>(inner))
              if (auto w = mm.getRhs().getDefiningOp<ParamOp>())
                if (!inner->hasAttr("transpose_a") &&
                    !inner->hasAttr("transpose_b") &&
                    rowParallelWeights[seg].contains(w.getName()))
                  ++rerun;
          }
          seg->passes[r][(int)phase] = acc.work;
          if (phase == Phase::B && r == (int)Recompute::Full &&
              rowParallelWeights.count(seg))
            seg->tpAllReduces[r][(int)phase] =
                seg->tpAllReduces[r][(int)phase] - forwardCollectives[seg] +
                rerun;
        }
        continue;
      }
      SegmentCost *seg;
      if (phase == Phase::F)
        seg = seenForwardRepeat ? &model.post : &model.pre;
      else
        seg = seenBackwardRepeat ? &model.pre : &model.post;
      segmentOf[op] = seg;
      if (phase == Phase::F)
        forwardOps.push_back(op);
      else
        (phase == Phase::B ? backward : weight)[seg].add(op, true);
      if (phase == Phase::B)
        for (Value v : op->getOperands())
          if (auto param = v.getDefiningOp<ParamOp>())
            if (backwardParamNames[seg].insert(param.getName()).second) {
              seg->backwardParamTensors[r] += 1;
              seg->backwardParams[r] +=
                  cast<ShapedType>(param.getType()).getNumElements();
            }
    }

    // The forward ops outside layers: one analysis over both segments, so a
    // tied parameter read before the layers is divided by its use after.
    SplitAnalysis split;
    split.run(forwardOps);
    // Parameters read on both sides of the layers: tied.
    llvm::StringMap<std::pair<unsigned, double>> sidesOf;
    for (Operation *op : forwardOps) {
      SegmentCost *seg = segmentOf[op];
      forward[seg].add(op, split.splitWork.contains(op));
      if (r == 0 && isa<EmbeddingOp>(op) &&
          op->getOperand(0).getDefiningOp<ParamOp>()) {
        seg->paramLookups += 1;
        seg->paramLookupBytes += bytesOf(op->getResult(0).getType());
      }
      if (auto param = dyn_cast<ParamOp>(op)) {
        // The segments of the op and of its forward users (one param op
        // may feed both the embedding and the head).
        auto &sides = sidesOf[param.getName()];
        auto side = [&](SegmentCost *s) {
          return s == &model.pre ? 1u : s == &model.post ? 2u : 0u;
        };
        sides.first |= side(seg);
        for (Operation *user : param->getUsers())
          if (getPhase(user).value_or(Phase::F) == Phase::F)
            if (SegmentCost *u = segmentOf.lookup(user))
              sides.first |= side(u);
        sides.second = cast<ShapedType>(param.getType()).getNumElements();
        if (r == 0 && paramNames.insert(param.getName()).second) {
          (split.isSplit(param.getResult()) ? seg->splitParams
                                            : seg->replicatedParams) +=
              cast<ShapedType>(param.getType()).getNumElements();
          seg->paramTensors += 1;
          if (split.isSplit(param.getResult()))
            seg->splitParamTensors += 1;
          countSequenceGrad(*seg, param, split.isSplit(param.getResult()),
                            carried);
        }
        continue;
      }
      // Saved for the backward: used by a B or W op.
      for (Value v : op->getResults())
        if (llvm::any_of(v.getUsers(), [](Operation *u) {
              return getPhase(u).value_or(Phase::F) != Phase::F;
            }))
          (split.isSplit(v) ? seg->savedSplitBytes[r]
                            : seg->savedReplicatedBytes[r]) +=
              bytesOf(v.getType());
    }
    if (r == 0)
      findVocabTables(forwardOps, split);
    if (r == 0)
      for (auto &entry : sidesOf)
        if (entry.second.first == 3) {
          model.tiedParams += entry.second.second;
          model.tiedParamTensors += 1;
        }
    // The collectives of the outside ops, attributed to the segment of the
    // op that needs them.
    for (Operation *op : split.forwardCollectiveOps)
      segmentOf[op]->tpAllReduces[r][(int)PassKind::Forward] += 1;
    if (r == 0)
      for (Operation *op : split.splitCrossEntropies) {
        segmentOf[op]->tpRowGathers += 5;
        segmentOf[op]->tpRowGatherBytes +=
            cast<ShapedType>(op->getOperand(1).getType()).getNumElements() *
            bytesOf(op->getResult(0).getType());
      }
    llvm::DenseSet<Value> counted;
    for (auto &[op, input] : split.columnParallel) {
      if (counted.insert(input).second)
        segmentOf[op]->tpAllReduces[r][(int)PassKind::Backward] += 1;
      if (r == 0)
        segmentOf[op]->tpColumnProducts += 1;
    }
    for (SegmentCost *seg : {&model.pre, &model.post}) {
      seg->passes[r][(int)PassKind::Forward] = forward[seg].work;
      seg->passes[r][(int)PassKind::Backward] = backward[seg].work;
      seg->passes[r][(int)PassKind::Weight] = weight[seg].work;
      applyForwardShares(*seg, r);
    }
    for (SegmentCost &seg : model.layers)
      applyForwardShares(seg, r);
    return success();
  }

private:
  /// ModelCost::vocabTables: the parameter tables of the ops around the
  /// layers whose every forward use is an embedding lookup in them or the
  /// product of a vocabulary-parallel head (a product of an activation with
  /// the table, as its right operand, whose logits a divided cross-entropy
  /// reads), with one vocabulary dimension for all uses.
  void findVocabTables(ArrayRef<Operation *> forwardOps,
                       const SplitAnalysis &split) {
    llvm::MapVector<StringRef, VocabTable> tables;
    llvm::StringSet<> other;
    llvm::DenseSet<Operation *> splitLosses(split.splitCrossEntropies.begin(),
                                            split.splitCrossEntropies.end());
    for (Operation *op : forwardOps) {
      auto param = dyn_cast<ParamOp>(op);
      if (!param)
        continue;
      StringRef name = param.getName();
      auto type = cast<ShapedType>(param.getType());
      VocabTable &t = tables[name];
      t.shape.assign(type.getShape().begin(), type.getShape().end());
      auto setVocabDim = [&](int d) {
        if (t.lookups + t.heads > 0 && t.vocabDim != d)
          other.insert(name);
        t.vocabDim = d;
      };
      for (OpOperand &use : param->getUses()) {
        Operation *user = use.getOwner();
        Phase phase = getPhase(user).value_or(Phase::F);
        if (phase != Phase::F)
          continue;
        if (isa<EmbeddingOp>(user) && use.getOperandNumber() == 0) {
          setVocabDim(0);
          t.lookups += 1;
          t.lookupIdBytes += bytesOf(user->getOperand(1).getType());
          continue;
        }
        auto mm = dyn_cast<MatmulOp>(user);
        CrossEntropyOp loss;
        if (mm && use.getOperandNumber() == 1 && !mm.getTransposeA() &&
            !mm.getLhs().getDefiningOp<ParamOp>() && type.getRank() == 2)
          for (Operation *u : mm.getResult().getUsers())
            if (auto ce = dyn_cast<CrossEntropyOp>(u))
              if (splitLosses.contains(ce) &&
                  ce->getOperand(0) == mm.getResult())
                loss = ce;
        if (!loss) {
          other.insert(name);
          continue;
        }
        setVocabDim(mm.getTransposeB() ? 0 : 1);
        t.heads += 1;
      }
    }
    for (auto &[name, t] : tables)
      if (!other.contains(name) && t.lookups + t.heads > 0)
        model.vocabTables.push_back(t);
  }

  SegmentCost *layerSegment(RepeatOp repeat) {
    for (SegmentCost &seg : model.layers)
      if (seg.name.rfind(repeat.getPrefix().str() + " ", 0) == 0)
        return &seg;
    return nullptr;
  }

  /// Whether bf16-mixed reads `param` as a bf16 working copy: an op that
  /// computes in bf16 uses it.
  static bool isWorkingCopy(ParamOp param) {
    return llvm::any_of(param->getUsers(), [](Operation *user) {
      return user->hasTrait<OpTrait::braid::ComputesInBF16>();
    });
  }

  /// If `op` is no parameter read but reads parameters: adds their
  /// tensors and elements (each once) and returns true.
  /// Those of them that are working copies (isWorkingCopy) are added to
  /// `copies` and `copyElements` too.
  static bool countLead(Operation *op, double &tensors, double &elements,
                        double &copies, double &copyElements) {
    if (isa<ParamOp>(op))
      return false;
    llvm::SmallPtrSet<Operation *, 4> seen;
    for (Value v : op->getOperands())
      if (auto param = v.getDefiningOp<ParamOp>())
        if (seen.insert(param).second) {
          double n = cast<ShapedType>(param.getType()).getNumElements();
          tensors += 1;
          elements += n;
          if (isWorkingCopy(param)) {
            copies += 1;
            copyElements += n;
          }
        }
    return !seen.empty();
  }

  void forwardLayer(RepeatOp repeat, LayerOp layer, SegmentCost &seg) {
    SmallVector<Operation *> ops = bodyOps(layer);
    SplitAnalysis split;
    split.run(ops);
    Accumulator acc;
    bool lead = r != 0;
    for (Operation *op : ops) {
      acc.add(op, split.splitWork.contains(op));
      if (!lead)
        lead = countLead(op, seg.forwardLeadParamTensors, seg.forwardLeadParams,
                         seg.forwardLeadWorkingCopyTensors,
                         seg.forwardLeadWorkingCopyParams);
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (r == 0 && layerParamNames[&seg].insert(param.getName()).second) {
          (split.isSplit(param.getResult()) ? seg.splitParams
                                            : seg.replicatedParams) +=
              cast<ShapedType>(param.getType()).getNumElements();
          seg.paramTensors += 1;
          if (isWorkingCopy(param)) {
            seg.forwardWorkingCopyTensors += 1;
            seg.forwardWorkingCopyParams +=
                cast<ShapedType>(param.getType()).getNumElements();
          }
          if (split.isSplit(param.getResult()))
            seg.splitParamTensors += 1;
          if (layer.getBody().front().getNumArguments() > 0)
            countSequenceGrad(seg, param, split.isSplit(param.getResult()),
                              layer.getBody().front().getArgument(0).getType());
        }
        if (r == 0)
          seg.paramElementBytes =
              (cast<ShapedType>(param.getType()).getElementTypeBitWidth() + 7) /
              8;
      }
    }
    seg.passes[r][(int)PassKind::Forward] = acc.work;
    int fwd = split.forwardCollectiveOps.size();
    int bwd = split.getNumBackwardAllReduces();
    seg.tpColumnProducts = split.columnParallel.size();
    // A carried value that leaves the layer divided (a layer ending in a
    // column-parallel product) is gathered for the next instance, which
    // expects it whole: counted as one more collective in F.
    Operation *terminator = layer.getBody().front().getTerminator();
    for (Value v : terminator->getOperands().take_front(repeat.getNumCarried()))
      if (split.isSplit(v))
        ++fwd;
    seg.tpAllReduces[r][(int)PassKind::Forward] = fwd;
    // Full recomputation re-runs in B what the backward needs, collectives
    // included: all of F's here, fewer once B's body is read (the
    // row-parallel products it re-runs, rowParallelWeights).
    seg.tpAllReduces[r][(int)PassKind::Backward] =
        bwd + (r == (int)Recompute::Full ? fwd : 0);
    forwardCollectives[&seg] = fwd;
    for (Operation *op : split.forwardCollectiveOps)
      if (isa<MatmulOp>(op))
        for (Value v : op->getOperands())
          if (auto w = v.getDefiningOp<ParamOp>())
            rowParallelWeights[&seg].insert(w.getName());
    // What F keeps: the yields after the carried values.
    Operation *yield = layer.getBody().front().getTerminator();
    unsigned carried = repeat.getNumCarried();
    for (auto [i, v] : llvm::enumerate(yield->getOperands()))
      if (i < repeat->getNumResults())
        resultSplit[repeat->getResult(i)] = split.isSplit(v);
    for (Value v : yield->getOperands().drop_front(carried)) {
      (split.isSplit(v) ? seg.savedSplitBytes[r]
                        : seg.savedReplicatedBytes[r]) += bytesOf(v.getType());
      seg.savedTensors[r] += 1;
    }
    if (layer.getBody().front().getNumArguments() > 0) {
      double carriedBytes =
          bytesOf(layer.getBody().front().getArgument(0).getType());
      seg.tpCollectiveBytes = carriedBytes;
      seg.outputBytes = carriedBytes;
    }
  }

  /// A B layer's results that tp divides (from F's: seeded with the
  /// divided saved values it reads, propagated as in F); a W layer's
  /// operands from F's or B's results are what an instance holds from its
  /// B until its W (SegmentCost::heldSplitBytes).
  void countHeld(RepeatOp repeat, LayerOp layer, Phase phase,
                 SegmentCost &seg) {
    Block &body = layer.getBody().front();
    if (phase == Phase::B) {
      SplitAnalysis split;
      for (auto [i, v] : llvm::enumerate(repeat->getOperands()))
        if (i < body.getNumArguments() && resultSplit.lookup(v))
          split.splitValues.insert(body.getArgument(i));
      split.run(bodyOps(layer));
      Operation *yield = body.getTerminator();
      for (auto [i, v] : llvm::enumerate(yield->getOperands()))
        if (i < repeat->getNumResults())
          resultSplit[repeat->getResult(i)] = split.isSplit(v);
      return;
    }
    if (phase != Phase::W)
      return;
    for (auto [i, v] : llvm::enumerate(repeat->getOperands())) {
      auto from = v.getDefiningOp<RepeatOp>();
      if (!from || i >= body.getNumArguments())
        continue;
      double bytes = bytesOf(body.getArgument(i).getType());
      (resultSplit.lookup(v) ? seg.heldSplitBytes[r]
                             : seg.heldReplicatedBytes[r]) += bytes;
    }
  }

  /// SegmentCost::arena of `phase`'s layer function, read from its body
  /// as braidc's lowering places buffers (FunctionLowering): the peak of
  /// braidc's best-fit arena is at least this, and close to it.
  void scanArena(RepeatOp repeat, LayerOp layer, Phase phase,
                 SegmentCost &seg) {
    Block &body = layer.getBody().front();
    SplitAnalysis split;
    for (auto [i, v] : llvm::enumerate(repeat->getOperands()))
      if (i < body.getNumArguments() && resultSplit.lookup(v))
        split.splitValues.insert(body.getArgument(i));
    SmallVector<Operation *> ops = bodyOps(layer);
    split.run(ops);
    Operation *yield = body.getTerminator();
    int64_t end = ops.size();
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = i;
    auto lastUse = [&](Value v) {
      int64_t last = -1;
      for (Operation *user : v.getUsers())
        if (Operation *op = body.findAncestorOpInBlock(*user))
          last = std::max(last, op == yield ? end : index.lookup(op));
      return last;
    };
    struct Buffer {
      ArenaPoint bytes;
      int64_t start, end;
      bool donated = false;
    };
    SmallVector<Buffer> buffers;
    llvm::DenseMap<Value, unsigned> bufferOf;
    for (auto [i, op] : llvm::enumerate(ops)) {
      int64_t at = i;
      if (isa<ParamOp>(op))
        continue;
      if (isa<ReshapeOp, ShardOp>(op)) {
        auto it = bufferOf.find(op->getOperand(0));
        if (it != bufferOf.end()) {
          bufferOf[op->getResult(0)] = it->second;
          Buffer &b = buffers[it->second];
          b.end = std::max(b.end, lastUse(op->getResult(0)));
        }
        continue;
      }
      for (OpResult v : op->getResults()) {
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || !type.hasStaticShape() || isFusedAway(v))
          continue;
        int64_t last = std::max(at, lastUse(v));
        // Over an operand of its type whose buffer dies here.
        std::optional<unsigned> over;
        if (auto inPlace = dyn_cast<InPlaceOpInterface>(op))
          for (unsigned k : inPlace.getInPlaceOperands(v.getResultNumber())) {
            Value x = op->getOperand(k);
            auto it = bufferOf.find(x);
            if (x.getType() != v.getType() || it == bufferOf.end())
              continue;
            Buffer &b = buffers[it->second];
            if (b.end == at && b.start < at && !b.donated) {
              over = it->second;
              break;
            }
          }
        if (over) {
          Buffer &b = buffers[*over];
          b.donated = true;
          b.end = std::max(b.end, last);
          bufferOf[v] = *over;
          continue;
        }
        ArenaPoint bytes;
        double n = bytesOf(type);
        bool scaled = type.getRank() > 0 && type.getDimSize(0) == model.batch;
        (split.isSplit(v)
             ? (scaled ? bytes.splitScaled : bytes.splitFixed)
             : (scaled ? bytes.replicatedScaled : bytes.replicatedFixed)) += n;
        bufferOf[v] = buffers.size();
        buffers.push_back({bytes, at, last});
      }
    }
    ArenaPoint results;
    for (Value v : yield->getOperands()) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type || !type.hasStaticShape())
        continue;
      bool scaled = type.getRank() > 0 && type.getDimSize(0) == model.batch;
      double n = bytesOf(type);
      (split.isSplit(v) ? (scaled ? results.splitScaled : results.splitFixed)
                        : (scaled ? results.replicatedScaled
                                  : results.replicatedFixed)) += n;
    }
    std::vector<ArenaPoint> points(end + 1);
    for (const Buffer &b : buffers)
      for (int64_t i = b.start; i <= b.end && i <= end; ++i) {
        points[i].splitScaled += b.bytes.splitScaled;
        points[i].splitFixed += b.bytes.splitFixed;
        points[i].replicatedScaled += b.bytes.replicatedScaled;
        points[i].replicatedFixed += b.bytes.replicatedFixed;
      }
    PassKind pass = phase == Phase::F   ? PassKind::Forward
                    : phase == Phase::B ? PassKind::Backward
                                        : PassKind::Weight;
    seg.arena[r][(int)pass] = std::move(points);
    seg.yielded[r][(int)pass] = results;
  }

  ModelCost &model;
  int r;
  /// Whether tp divides each result of the F and B repeats (countHeld).
  llvm::DenseMap<Value, bool> resultSplit;
  llvm::DenseMap<SegmentCost *, Accumulator> forward, backward, weight;
  llvm::StringSet<> paramNames;
  llvm::DenseMap<SegmentCost *, llvm::StringSet<>> layerParamNames;
  llvm::DenseMap<SegmentCost *, llvm::StringSet<>> backwardParamNames;
  /// Per layer: F's collectives, and the weights of its row-parallel
  /// products (what B must re-run with its all_reduce under full
  /// recomputation).
  llvm::DenseMap<SegmentCost *, int> forwardCollectives;
  llvm::DenseMap<SegmentCost *, llvm::StringSet<>> rowParallelWeights;
};
} // namespace

llvm::Expected<ModelCost> mlir::braid::plan::extractModelCost(ModuleOp module,
                                                              StringRef entry) {
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn)
    return llvm::createStringError("no function @%s in the module",
                                   entry.str().c_str());
  ModelCost model;
  model.entry = entry.str();
  if (fn.getNumArguments() > 0)
    if (auto t = dyn_cast<ShapedType>(fn.getArgumentTypes()[0]))
      if (t.hasRank() && t.getRank() > 0 && !t.isDynamicDim(0))
        model.batch = t.getDimSize(0);

  // Segments: one per repeat of the forward function, in order.
  for (Operation &op : fn.getBody().front()) {
    auto repeat = dyn_cast<RepeatOp>(op);
    if (!repeat)
      continue;
    SegmentCost seg;
    seg.name = (repeat.getPrefix() + " (@" + repeat.getLayer() + ")").str();
    seg.count = repeat.getCount();
    if (repeat.getNumOperands() > 0) {
      Type carried = repeat.getOperand(0).getType();
      if (model.dtype.empty())
        if (auto t = dyn_cast<ShapedType>(carried)) {
          model.dtype = elementTypeName(t.getElementType());
          model.elementBytes = (t.getElementTypeBitWidth() + 7) / 8;
        }
      if (model.layers.empty()) {
        model.pre.outputBytes = bytesOf(carried);
        model.pre.tpCollectiveBytes = bytesOf(carried);
      }
      model.post.tpCollectiveBytes = bytesOf(carried);
    }
    model.layers.push_back(std::move(seg));
  }
  model.pre.name = "(before layers)";
  model.post.name = "(after layers)";
  if (model.dtype.empty())
    fn.walk([&](ParamOp p) {
      if (model.dtype.empty() && isa<FloatType>(p.getType().getElementType())) {
        model.dtype = elementTypeName(p.getType().getElementType());
        model.elementBytes = (p.getType().getElementTypeBitWidth() + 7) / 8;
      }
    });
  if (model.dtype.empty())
    return llvm::createStringError(
        "@%s has no floating-point parameters or activations to cost",
        entry.str().c_str());
  model.pre.paramElementBytes = model.post.paramElementBytes =
      model.elementBytes;

  for (int r = 0; r < kNumRecomputeModes; ++r) {
    OwningOpRef<ModuleOp> copy = module.clone();
    std::string diagnostics;
    llvm::raw_string_ostream diagOS(diagnostics);
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      diagOS << d.getLocation() << ": " << d << "\n";
      return success();
    });
    PassManager pm(module.getContext());
    AutodiffPassOptions options;
    options.entry = entry.str();
    options.recompute = getRecomputeName(Recompute(r)).str();
    pm.addPass(createAutodiffPass(options));
    if (failed(pm.run(*copy)))
      return llvm::createStringError(
          "cannot derive the gradient of @%s (recompute=%s): %s",
          entry.str().c_str(), options.recompute.c_str(), diagnostics.c_str());
    auto grad = copy->lookupSymbol<func::FuncOp>((entry + "_grad").str());
    if (!grad)
      return llvm::createStringError("braid-autodiff made no @%s_grad",
                                     entry.str().c_str());
    Extractor extractor(model, r);
    if (failed(extractor.run(*copy, grad)))
      return llvm::createStringError("cannot read the costs of @%s_grad: %s",
                                     entry.str().c_str(), diagnostics.c_str());
  }
  return model;
}

void mlir::braid::plan::printModelCost(llvm::raw_ostream &os,
                                       const ModelCost &model,
                                       Recompute recompute) {
  os << llvm::format("model @%s: batch %lld, %s, %.6g parameters, %lld "
                     "layers\n",
                     model.entry.c_str(), (long long)model.batch,
                     model.dtype.c_str(), model.getParams(),
                     (long long)model.getNumLayers());
  os << llvm::format("%-24s %9s %12s %12s %12s %12s %12s %12s %14s\n",
                     "segment (per instance)", "instances", "params",
                     "F matmul", "B matmul", "W matmul", "F+B+W FLOPs",
                     "tp a_r F/B", "saved bytes");
  auto row = [&](const SegmentCost &s) {
    const PassWork *p = s.passes[(int)recompute];
    double all = p[0].getFlops() + p[1].getFlops() + p[2].getFlops();
    std::string ar = std::to_string(s.tpAllReduces[(int)recompute][0]) + "/" +
                     std::to_string(s.tpAllReduces[(int)recompute][1]);
    os << llvm::format("%-24s %9lld %12.6g %12.6g %12.6g %12.6g %12.6g %12s "
                       "%14.6g\n",
                       s.name.c_str(), (long long)s.count, s.getParams(),
                       p[0].getFlops(OpClass::Matmul),
                       p[1].getFlops(OpClass::Matmul),
                       p[2].getFlops(OpClass::Matmul), all, ar.c_str(),
                       s.savedSplitBytes[(int)recompute] +
                           s.savedReplicatedBytes[(int)recompute]);
  };
  row(model.pre);
  for (const SegmentCost &l : model.layers)
    row(l);
  row(model.post);
}
