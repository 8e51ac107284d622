//===- BraidOpsSharding.cpp - Sharding rules of braid ops ------------------===//
//
// ShardingRuleOpInterface implementations: how each op's dimensions map to
// iteration factors. Dimensions whose sharding the current partitioner
// cannot handle locally (normalised axes, sequence positions, vocabulary
// lookups) are Blocked; lifting a block is a matter of teaching the
// partitioner the collective the op then needs.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;

using Kind = ShardingRule::Kind;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// One parallel factor per result dimension; every operand is aligned to
/// the result at its trailing dimensions (NumPy broadcasting), dimensions
/// of size 1 that the result stretches map to no factor.
static ShardingRule elementwiseRule(Operation *op) {
  ShardingRule rule;
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int64_t> factors;
  for (int64_t d : out)
    factors.push_back(rule.addFactor(d, Kind::Parallel));
  for (Value v : op->getOperands()) {
    ArrayRef<int64_t> in = shapeOf(v);
    SmallVector<int64_t> map;
    size_t offset = out.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i)
      map.push_back(in[i] == out[offset + i] ? factors[offset + i] : -1);
    rule.operands.push_back(map);
  }
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.results.push_back(factors);
  return rule;
}

/// An elementwise rule whose listed factors (by result dimension) are
/// blocked.
static ShardingRule blockDims(ShardingRule rule, ArrayRef<int64_t> dims) {
  for (int64_t d : dims)
    rule.factors[rule.results[0][d]].kind = Kind::Blocked;
  return rule;
}

ShardingRule ParamOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ConstantOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ShardOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule AddOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SubOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule MulOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule DivOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule NegOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ConvertOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule RoundOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ExpOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SqrtOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule RsqrtOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ReluOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SiluOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule GeluOp::getShardingRule() { return elementwiseRule(*this); }

ShardingRule SoftmaxOp::getShardingRule() {
  return blockDims(elementwiseRule(*this), {(int64_t)getAxis()});
}

ShardingRule LayerNormOp::getShardingRule() {
  // Scale and bias are aligned with the normalised (last) dimension.
  return blockDims(elementwiseRule(*this), {getType().getRank() - 1});
}

ShardingRule RmsNormOp::getShardingRule() {
  return blockDims(elementwiseRule(*this), {getType().getRank() - 1});
}

ShardingRule RotaryOp::getShardingRule() {
  // Positions are indices along dimension 1; the pairs span dimension 3.
  return blockDims(elementwiseRule(*this), {1, 3});
}

/// The rule of a matmul of `lhs` and `rhs` with the given transposes and
/// result `result`, its contraction of kind `contraction`.
static ShardingRule matmulRule(Value lhs, Value rhs, bool transposeA,
                               bool transposeB, Value result,
                               Kind contraction) {
  ShardingRule rule;
  ArrayRef<int64_t> out = shapeOf(result);
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs);
  size_t rank = out.size();
  SmallVector<int64_t> batch;
  for (size_t i = 0; i + 2 < rank; ++i)
    batch.push_back(rule.addFactor(out[i], Kind::Parallel));
  int64_t m = rule.addFactor(out[rank - 2], Kind::Parallel);
  int64_t n = rule.addFactor(out[rank - 1], Kind::Parallel);
  int64_t k =
      rule.addFactor(transposeA ? a[a.size() - 2] : a.back(), contraction);
  auto operandMap = [&](ArrayRef<int64_t> shape, int64_t row, int64_t col) {
    SmallVector<int64_t> map;
    size_t offset = (rank - 2) - (shape.size() - 2);
    for (size_t i = 0; i + 2 < shape.size(); ++i)
      map.push_back(shape[i] == out[offset + i] ? batch[offset + i] : -1);
    map.push_back(row);
    map.push_back(col);
    return map;
  };
  rule.operands.push_back(transposeA ? operandMap(a, k, m)
                                     : operandMap(a, m, k));
  rule.operands.push_back(transposeB ? operandMap(b, n, k)
                                     : operandMap(b, k, n));
  SmallVector<int64_t> resultMap(batch);
  resultMap.push_back(m);
  resultMap.push_back(n);
  rule.results.push_back(resultMap);
  return rule;
}

ShardingRule MatmulOp::getShardingRule() {
  return matmulRule(getLhs(), getRhs(), getTransposeA(), getTransposeB(),
                    getResult(), Kind::Sum);
}

ShardingRule MatmulBiasOp::getShardingRule() {
  // The contraction stays whole: a device holding a share of it would add
  // the bias (and apply GELU) to a partial sum. The bias is the result's
  // columns.
  ShardingRule rule = matmulRule(getLhs(), getRhs(), getTransposeA(),
                                 getTransposeB(), getResult(), Kind::Blocked);
  rule.operands.push_back({rule.results[0].back()});
  return rule;
}

ShardingRule EmbeddingOp::getShardingRule() {
  // ids [...] -> [..., H]; the table's rows are looked up: split, each
  // device finds the ids of its block and the rows sum over the devices
  // (localize tells it its block). Its columns are the hidden factor.
  ShardingRule rule;
  ArrayRef<int64_t> out = getType().getShape();
  SmallVector<int64_t> factors;
  for (int64_t d : out)
    factors.push_back(rule.addFactor(d, Kind::Parallel));
  int64_t vocab = rule.addFactor(shapeOf(getTable())[0], Kind::Sum);
  rule.operands.push_back({vocab, factors.back()});
  rule.operands.push_back(SmallVector<int64_t>(ArrayRef(factors).drop_back()));
  rule.results.push_back(factors);
  return rule;
}

/// The factors of attention over q [B, S, Hq, D] and k, v [B, T, Hkv, D]:
/// batch and heads are parallel (query and key/value heads split together,
/// which keeps each query head's KV head on its device when both divide);
/// positions and the head dimension are blocked. Sets the maps of query,
/// key and value to `qMap`, `kMap` (value as key).
static ShardingRule attentionRule(Value query, Value key,
                                  SmallVector<int64_t> &qMap,
                                  SmallVector<int64_t> &kMap) {
  ShardingRule rule;
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  int64_t b = rule.addFactor(q[0], Kind::Parallel);
  int64_t s = rule.addFactor(q[1], Kind::Blocked);
  int64_t t = rule.addFactor(k[1], Kind::Blocked);
  int64_t h = rule.addFactor(q[2], Kind::Parallel);
  int64_t d = rule.addFactor(q[3], Kind::Blocked);
  qMap = {b, s, h, d};
  kMap = {b, t, h, d};
  return rule;
}

ShardingRule AttentionOp::getShardingRule() {
  SmallVector<int64_t> qMap, kMap;
  ShardingRule rule = attentionRule(getQuery(), getKey(), qMap, kMap);
  rule.operands = {qMap, kMap, kMap};
  rule.results.push_back(qMap);
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  // The mean over label positions: a mean factor per label dimension.
  ShardingRule rule;
  ArrayRef<int64_t> labels = shapeOf(getLabels());
  SmallVector<int64_t> factors;
  for (int64_t d : labels)
    factors.push_back(rule.addFactor(d, Kind::Mean));
  // The vocabulary: split, the devices all-reduce their statistics.
  int64_t vocab =
      rule.addFactor(shapeOf(getLogits()).back(), Kind::Cooperative);
  SmallVector<int64_t> logits(factors);
  logits.push_back(vocab);
  rule.operands.push_back(logits);
  rule.operands.push_back(factors);
  rule.results.push_back({});
  return rule;
}

/// The groups of a reshape from `in` to `out`: runs of dimensions with
/// equal products (size-1 dimensions join none), as [i0, i1) x [j0, j1).
static SmallVector<std::array<size_t, 4>> reshapeGroups(ArrayRef<int64_t> in,
                                                        ArrayRef<int64_t> out) {
  SmallVector<std::array<size_t, 4>> groups;
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[j] == 1) {
      ++j;
      continue;
    }
    size_t i0 = i, j0 = j;
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj)
        pi *= in[i++];
      else
        pj *= out[j++];
    }
    groups.push_back({i0, i, j0, j});
  }
  return groups;
}

ShardingRule ReshapeOp::getShardingRule() {
  // Groups of dimensions with equal products correspond. Within a group,
  // each dimension is a range of mixed-radix digits of the group's index;
  // an input and an output dimension whose ranges overlap share a factor
  // over the overlap, which each views as the minor part of [b, n / b]
  // blocks (its major digits outside the overlap) and may follow with
  // minor digits of its own: a block of heads is then a block of heads on
  // both sides. The group's two major dimensions are paired first (a
  // block of the major dimension is contiguous in both); the others pair
  // major first.
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), out = getType().getShape();
  SmallVector<int64_t> inMap(in.size(), -1), outMap(out.size(), -1);
  SmallVector<int64_t> inBlocks(in.size(), 1), outBlocks(out.size(), 1);
  // A reshape merging dimensions that its only user, a reshape, splits
  // apart again (nn.MultiheadAttention's [T, B, H, D] -> [T, B*H, D] ->
  // [T*B, H*D]) carries, within a merged group, the dimension that leads a
  // group of the composed reshape: the one the pair keeps separable. So
  // does, within a split group, a reshape of a reshape (the gradient's
  // [T*B, H*D] -> [T, B*H, D] -> [T, B, H, D]).
  SmallVector<bool> leads, outLeads;
  if (getResult().hasOneUse())
    if (auto next = dyn_cast<ReshapeOp>(*getResult().getUsers().begin())) {
      leads.assign(in.size(), false);
      for (auto g : reshapeGroups(in, shapeOf(next.getResult())))
        leads[g[0]] = true;
    }
  if (auto prev = getInput().getDefiningOp<ReshapeOp>()) {
    outLeads.assign(out.size(), false);
    for (auto g : reshapeGroups(shapeOf(prev.getInput()), out))
      outLeads[g[2]] = true;
  }
  for (std::array<size_t, 4> group : reshapeGroups(in, out)) {
    size_t i0 = group[0], i1 = group[1], j0 = group[2], j1 = group[3];
    // Digit ranges [lo, hi) of each dimension within the group.
    auto ranges = [](ArrayRef<int64_t> dims) {
      SmallVector<std::pair<int64_t, int64_t>> r(dims.size());
      int64_t lo = 1;
      for (size_t k = dims.size(); k-- > 0;) {
        r[k] = {lo, lo * dims[k]};
        lo *= dims[k];
      }
      return r;
    };
    auto inR = ranges(in.slice(i0, i1 - i0)),
         outR = ranges(out.slice(j0, j1 - j0));
    // Pairs input dimension a with output dimension b if their overlap is
    // a factor both can view as blocks (blocks or minor digits, not both).
    auto pair = [&](size_t a, size_t b) {
      if (inMap[i0 + a] >= 0 || outMap[j0 + b] >= 0 || in[i0 + a] == 1 ||
          out[j0 + b] == 1)
        return false;
      auto [ilo, ihi] = inR[a];
      auto [jlo, jhi] = outR[b];
      int64_t lo = std::max(ilo, jlo), hi = std::min(ihi, jhi);
      if (hi <= lo || hi % lo || ihi % hi || jhi % hi || lo % ilo || lo % jlo)
        return false;
      int64_t ib = ihi / hi, jb = jhi / hi;
      if ((ib > 1 && lo > ilo) || (jb > 1 && lo > jlo))
        return false;
      int64_t f = rule.addFactor(hi / lo, Kind::Parallel);
      inMap[i0 + a] = outMap[j0 + b] = f;
      inBlocks[i0 + a] = ib;
      outBlocks[j0 + b] = jb;
      return true;
    };
    size_t first = 0;
    if (!leads.empty() && j1 - j0 == 1)
      while (first + 1 < i1 - i0 && !leads[i0 + first])
        ++first;
    if (first + 1 == i1 - i0 && !leads.empty() && !leads[i0 + first])
      first = 0;
    size_t firstOut = 0;
    if (!outLeads.empty() && i1 - i0 == 1 && j1 - j0 > 1) {
      while (firstOut + 1 < j1 - j0 && !outLeads[j0 + firstOut])
        ++firstOut;
      if (!outLeads[j0 + firstOut])
        firstOut = 0;
    }
    pair(first, firstOut);
    for (size_t a = 0; a < i1 - i0; ++a)
      for (size_t b = 0; b < j1 - j0; ++b)
        pair(a, b);
  }
  rule.operands.push_back(inMap);
  rule.results.push_back(outMap);
  rule.operandBlocks.push_back(inBlocks);
  rule.resultBlocks.push_back(outBlocks);
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> factors;
  for (int64_t d : in)
    factors.push_back(rule.addFactor(d, Kind::Parallel));
  rule.operands.push_back(factors);
  SmallVector<int64_t> out;
  for (int64_t p : getPermutation())
    out.push_back(factors[p]);
  rule.results.push_back(out);
  return rule;
}

ShardingRule ReduceOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  Kind reduced = getKind() == ReduceKind::sum    ? Kind::Sum
                 : getKind() == ReduceKind::mean ? Kind::Mean
                                                 : Kind::Blocked;
  SmallVector<int64_t> factors, out;
  for (auto [d, size] : llvm::enumerate(in)) {
    bool isReduced = llvm::is_contained(getAxes(), (int64_t)d);
    factors.push_back(rule.addFactor(size, isReduced ? reduced : Kind::Parallel));
    if (!isReduced)
      out.push_back(factors.back());
    else if (getKeepDims())
      out.push_back(-1);
  }
  rule.operands.push_back(factors);
  rule.results.push_back(out);
  return rule;
}

ShardingRule BroadcastOp::getShardingRule() { return elementwiseRule(*this); }

/// The rule of a slice of `whole` into `part` (or of its gradient, the
/// other way): a dimension taken whole is parallel; one taken as block j of
/// b equal blocks (start j * size, unit stride) is parallel over the
/// block's rows, the whole tensor's dimension viewed as [b, size], so that
/// a strided split with b blocks (a fused q/k/v projection's output under
/// tensor parallelism) slices locally into plain splits (localize divides
/// start and limit by the split). Other slices keep the dimension whole.
static ShardingRule sliceRule(ArrayRef<int64_t> whole, ArrayRef<int64_t> part,
                              ArrayRef<int64_t> start,
                              std::optional<ArrayRef<int64_t>> stride,
                              bool gradient) {
  ShardingRule rule;
  SmallVector<int64_t> factors, blocks;
  for (auto [d, n] : llvm::enumerate(whole)) {
    int64_t size = part[d];
    bool unit = !stride || (*stride)[d] == 1;
    if (unit && size == n) {
      factors.push_back(rule.addFactor(n, Kind::Parallel));
      blocks.push_back(1);
    } else if (unit && size > 0 && n % size == 0 && start[d] % size == 0) {
      factors.push_back(rule.addFactor(size, Kind::Parallel));
      blocks.push_back(n / size);
    } else {
      factors.push_back(rule.addFactor(n, Kind::Blocked));
      blocks.push_back(1);
    }
  }
  // The sliced dimensions of the part map to the block-sized factors.
  SmallVector<int64_t> partFactors;
  for (auto [d, f] : llvm::enumerate(factors))
    partFactors.push_back(
        rule.factors[f].kind == Kind::Blocked && part[d] != whole[d] ? -1 : f);
  rule.operands.push_back(gradient ? partFactors : factors);
  rule.results.push_back(gradient ? factors : partFactors);
  (gradient ? rule.resultBlocks : rule.operandBlocks).push_back(blocks);
  return rule;
}

ShardingRule SliceOp::getShardingRule() {
  return sliceRule(shapeOf(getInput()), getType().getShape(), getStart(),
                   getStride(), /*gradient=*/false);
}

/// Start and limit of a per-device slice (or slice gradient) whose
/// dimensions are split as `factorAxes` says: every sharded dimension is
/// taken whole or as an aligned block (sliceRule), so both divide by the
/// split.
static void localizeSlice(Operation *global, Operation *local,
                          const ShardingRule &rule, unsigned wholeIndex,
                          bool wholeIsResult,
                          ArrayRef<SmallVector<StringRef>> factorAxes,
                          FlatSymbolRefAttr meshName) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(global, meshName);
  const auto &map =
      wholeIsResult ? rule.results[wholeIndex] : rule.operands[wholeIndex];
  SmallVector<int64_t> start(
      cast<DenseI64ArrayAttr>(local->getAttr("start")).asArrayRef());
  SmallVector<int64_t> limit(
      cast<DenseI64ArrayAttr>(local->getAttr("limit")).asArrayRef());
  for (auto [d, f] : llvm::enumerate(map)) {
    if (f < 0 || factorAxes[f].empty())
      continue;
    int64_t n = 1;
    for (StringRef a : factorAxes[f])
      n *= mesh.getShape()[*mesh.getAxisIndex(a)];
    start[d] /= n;
    limit[d] /= n;
  }
  Builder b(local->getContext());
  local->setAttr("start", b.getDenseI64ArrayAttr(start));
  local->setAttr("limit", b.getDenseI64ArrayAttr(limit));
}

void SliceOp::localize(Operation *local,
                       ArrayRef<SmallVector<StringRef>> factorAxes,
                       FlatSymbolRefAttr mesh) {
  localizeSlice(*this, local, getShardingRule(), 0, false, factorAxes, mesh);
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule = elementwiseRule(*this);
  // Operands differ from the result along the axis: map it nowhere.
  int64_t axis = getAxis();
  rule.factors[rule.results[0][axis]].kind = Kind::Blocked;
  for (auto [i, v] : llvm::enumerate(getInputs()))
    rule.operands[i][axis] = shapeOf(v)[axis] == getType().getDimSize(axis)
                                 ? rule.results[0][axis]
                                 : -1;
  return rule;
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

ShardingRule ReluGradOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SiluGradOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule GeluGradOp::getShardingRule() { return elementwiseRule(*this); }

ShardingRule LayerNormGradOp::getShardingRule() {
  return blockDims(elementwiseRule(*this), {getType().getRank() - 1});
}

ShardingRule RmsNormGradOp::getShardingRule() {
  return blockDims(elementwiseRule(*this), {getType().getRank() - 1});
}

ShardingRule EmbeddingGradOp::getShardingRule() {
  // Row gradients at every position are summed into the table: the
  // positions are sum factors; rows parallel (each device keeps its block's
  // ids, see localize), columns parallel.
  ShardingRule rule;
  ArrayRef<int64_t> ids = shapeOf(getIds());
  SmallVector<int64_t> positions;
  for (int64_t d : ids)
    positions.push_back(rule.addFactor(d, Kind::Sum));
  int64_t vocab = rule.addFactor(getType().getDimSize(0), Kind::Parallel);
  int64_t hidden = rule.addFactor(getType().getDimSize(1), Kind::Parallel);
  rule.operands.push_back(positions);
  SmallVector<int64_t> grad(positions);
  grad.push_back(hidden);
  rule.operands.push_back(grad);
  rule.results.push_back({vocab, hidden});
  return rule;
}

ShardingRule AttentionGradOp::getShardingRule() {
  SmallVector<int64_t> qMap, kMap;
  ShardingRule rule = attentionRule(getQuery(), getKey(), qMap, kMap);
  rule.operands = {qMap, kMap, kMap, qMap};
  rule.results.push_back(getOperand() == 0 ? qMap : kMap);
  return rule;
}

ShardingRule CrossEntropyGradOp::getShardingRule() {
  // The gradient of a mean: each label position's row, divided by the
  // number of positions.
  ShardingRule rule;
  ArrayRef<int64_t> labels = shapeOf(getLabels());
  SmallVector<int64_t> factors;
  for (int64_t d : labels)
    factors.push_back(rule.addFactor(d, Kind::ParallelMean));
  int64_t vocab = rule.addFactor(getType().getShape().back(), Kind::Parallel);
  SmallVector<int64_t> logits(factors);
  logits.push_back(vocab);
  rule.operands = {logits, factors, {}};
  rule.results.push_back(logits);
  return rule;
}

ShardingRule ReduceMaxGradOp::getShardingRule() {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> factors, grad;
  for (auto [d, size] : llvm::enumerate(in)) {
    bool reduced = llvm::is_contained(getAxes(), (int64_t)d);
    factors.push_back(
        rule.addFactor(size, reduced ? Kind::Blocked : Kind::Parallel));
    if (!reduced)
      grad.push_back(factors.back());
    else if (getKeepDims())
      grad.push_back(-1);
  }
  rule.operands = {factors, grad};
  rule.results.push_back(factors);
  return rule;
}

ShardingRule SliceGradOp::getShardingRule() {
  return sliceRule(getType().getShape(), shapeOf(getGrad()), getStart(),
                   getStride(), /*gradient=*/true);
}

void SliceGradOp::localize(Operation *local,
                           ArrayRef<SmallVector<StringRef>> factorAxes,
                           FlatSymbolRefAttr mesh) {
  localizeSlice(*this, local, getShardingRule(), 0, true, factorAxes, mesh);
}

//===----------------------------------------------------------------------===//
// Training ops and parameter stores
//===----------------------------------------------------------------------===//

ShardingRule LrScheduleOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ClipCoefficientOp::getShardingRule() {
  return elementwiseRule(*this);
}
ShardingRule AdamWUpdateOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SgdUpdateOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SelectOp::getShardingRule() { return elementwiseRule(*this); }

ShardingRule GlobalNormOp::getShardingRule() {
  // The square root of a sum over everything: blocked, so every input is
  // whole where it is computed.
  ShardingRule rule;
  for (Value v : getInputs()) {
    SmallVector<int64_t> map;
    for (int64_t d : shapeOf(v))
      map.push_back(rule.addFactor(d, Kind::Blocked));
    rule.operands.push_back(map);
  }
  rule.results.push_back({});
  return rule;
}

ShardingRule SumSquaresOp::getShardingRule() {
  // One operand: a sum over its dimensions. Several: blocked, because a
  // device's partial sum would count replicated operands once per device.
  ShardingRule rule;
  Kind kind = getInputs().size() == 1 ? Kind::Sum : Kind::Blocked;
  for (Value v : getInputs()) {
    SmallVector<int64_t> map;
    for (int64_t d : shapeOf(v))
      map.push_back(rule.addFactor(d, kind));
    rule.operands.push_back(map);
  }
  rule.results.push_back({});
  return rule;
}

ShardingRule StoreParamOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> map;
  for (int64_t d : shapeOf(getValue()))
    map.push_back(rule.addFactor(d, Kind::Parallel));
  rule.operands.push_back(map);
  return rule;
}

//===----------------------------------------------------------------------===//
// Vocabulary parallelism: the ops learn their group.
//===----------------------------------------------------------------------===//

/// Marks `local` vocabulary-parallel over the axes of factor `vocab`.
static void setVocabAxes(Operation *local,
                         ArrayRef<SmallVector<StringRef>> factorAxes,
                         int64_t vocab, FlatSymbolRefAttr mesh) {
  if (factorAxes[vocab].empty())
    return;
  Builder b(local->getContext());
  local->setAttr("mesh", mesh);
  local->setAttr("vocab_axes", b.getStrArrayAttr(factorAxes[vocab]));
}

// The vocabulary factor's index follows the order of getShardingRule.
void EmbeddingOp::localize(Operation *local,
                           ArrayRef<SmallVector<StringRef>> factorAxes,
                           FlatSymbolRefAttr mesh) {
  setVocabAxes(local, factorAxes, getType().getRank(), mesh);
}
void EmbeddingGradOp::localize(Operation *local,
                               ArrayRef<SmallVector<StringRef>> factorAxes,
                               FlatSymbolRefAttr mesh) {
  setVocabAxes(local, factorAxes, shapeOf(getIds()).size(), mesh);
}
void CrossEntropyOp::localize(Operation *local,
                              ArrayRef<SmallVector<StringRef>> factorAxes,
                              FlatSymbolRefAttr mesh) {
  setVocabAxes(local, factorAxes, shapeOf(getLabels()).size(), mesh);
}
void CrossEntropyGradOp::localize(Operation *local,
                                  ArrayRef<SmallVector<StringRef>> factorAxes,
                                  FlatSymbolRefAttr mesh) {
  setVocabAxes(local, factorAxes, shapeOf(getLabels()).size(), mesh);
}
