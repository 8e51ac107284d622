//===- Collectives.cpp - Collectives as program runtime calls ---------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "braid/Dialect/Braid/Utils/ShardingTransparent.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

/// [outer][size][chunk] view of `shape` split into `size` blocks along `dim`.
static std::pair<int64_t, int64_t> splitView(ArrayRef<int64_t> shape,
                                             int64_t dim, int64_t size) {
  int64_t outer = 1, chunk = shape[dim] / size;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1, e = shape.size(); d < e; ++d)
    chunk *= shape[d];
  return {outer, chunk};
}

/// The runtime's braid_rt_program_collective_t for `kind`.
static int64_t getRuntimeKind(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::all_reduce:
    return 0;
  case CollectiveKind::all_gather:
    return 1;
  case CollectiveKind::reduce_scatter:
    return 2;
  case CollectiveKind::all_to_all:
    return 3;
  case CollectiveKind::broadcast_from:
    return 4;
  case CollectiveKind::all_slice:
    break;
  }
  llvm_unreachable("all_slice is lowered on its own");
}

/// `buffer` as the `float *` the program runtime's collectives take. An i32
/// tensor that a collective only moves (gathers ids, say) is moved as the
/// same 4-byte words, bit for bit; null for any other element type.
static Value asF32Words(FunctionLowering &l, Value tensor, Value buffer,
                        bool reduces) {
  Type element = l.typeOf(tensor).getElementType();
  if (element.isF32())
    return buffer;
  if (!element.isInteger(32) || reduces)
    return {};
  return emitc::CastOp::create(l.b, l.loc,
                               emitc::PointerType::get(l.b.getF32Type()),
                               buffer);
}

/// `braid.all_slice`: each device keeps its block; no data moves.
static LogicalResult lowerAllSlice(CollectiveOpInterface op,
                                   FunctionLowering &l) {
  int64_t size = 1;
  FailureOr<int64_t> mask =
      l.module.getGroup(op, op.getMeshAttr(), op.getAxes(), &size);
  if (failed(mask))
    return failure();
  Value input = op.getInput();
  Value from = asF32Words(l, input, l.get(input), /*reduces=*/false);
  if (!from)
    return op->emitOpError() << "slices a tensor of "
                             << l.typeOf(input).getElementType()
                             << "; generated code takes f32 and i32";
  int64_t dim = *op.getScatterDim();
  if (dim < 0)
    dim += l.rankOf(input);
  auto [outer, chunk] = splitView(l.typeOf(input).getShape(), dim, size);
  // (A braced list evaluates in order: the result buffer comes last.)
  l.call("braid_rt_program_all_slice_f32",
         {l.i64(*mask), from, l.i64(outer), l.i64(chunk),
          asF32Words(l, input, l.result(op->getResult(0)), false)});
  return success();
}

/// An all_reduce marked for PowerSGD (braid-compress-gradients): the
/// runtime's PowerSGD on the buffers of its state params, which the pass
/// read in the same block, for each matrix of the batch its leading
/// dimensions make; a reduce_scatter keeps its block of the result.
static LogicalResult lowerPowerSgd(CollectiveOpInterface op,
                                   FunctionLowering &l, DictionaryAttr psgd,
                                   int64_t mask, int64_t size, Value from,
                                   Value result, Value pending) {
  auto type = cast<RankedTensorType>(op.getInput().getType());
  int64_t rank = type.getRank();
  CollectiveKind kind = op.getCollectiveKind();
  if ((kind != CollectiveKind::all_reduce &&
       kind != CollectiveKind::reduce_scatter) ||
      rank < 2)
    return op->emitOpError() << "is marked for PowerSGD, which takes the "
                                "all_reduce or reduce_scatter of a matrix or "
                                "a batch of them";
  Value state[2];
  const char *keys[2] = {"q", "error"};
  for (int i = 0; i < 2; ++i) {
    StringRef name = psgd.getAs<StringAttr>(keys[i]).getValue();
    for (auto param : op->getBlock()->getOps<ParamOp>())
      if (param.getName() == name && param->isBeforeInBlock(op))
        state[i] = l.get(param.getResult());
    if (!state[i])
      return op->emitOpError() << "is marked for PowerSGD, but its state '"
                               << name << "' is not read before it";
  }
  int64_t rows = type.getDimSize(rank - 2), cols = type.getDimSize(rank - 1);
  int64_t batch = type.getNumElements() / (rows * cols);
  int64_t approxRank = psgd.getAs<IntegerAttr>("rank").getInt();
  SmallVector<Value> args{l.i64(mask), from,        l.i64(batch),
                          l.i64(rows), l.i64(cols), l.i64(approxRank),
                          state[0],    state[1]};
  if (kind == CollectiveKind::all_reduce) {
    args.append({result, pending, l.whereText()});
    l.call("braid_rt_program_powersgd_f32", args);
    return success();
  }
  // ZeRO: the whole approximation, then this device's block of it.
  int64_t dim = *op.getScatterDim();
  if (dim < 0)
    dim += rank;
  auto [outer, chunk] = splitView(type.getShape(), dim, size);
  args.append({l.i64(outer), l.i64(chunk), result, pending, l.whereText()});
  l.call("braid_rt_program_powersgd_reduce_scatter_f32", args);
  return success();
}

/// A collective or its started form: braid_rt_program_collective[_start]_f32
/// with its views, over the group of its axes.
static LogicalResult lowerCollective(CollectiveOpInterface op,
                                     FunctionLowering &l) {
  CollectiveKind kind = op.getCollectiveKind();
  if (kind == CollectiveKind::all_slice)
    return lowerAllSlice(op, l);
  std::optional<ReduceKind> reduction = op.getReduction();
  if (reduction && *reduction != ReduceKind::sum)
    return op->emitOpError() << "reduces with '"
                             << stringifyReduceKind(*reduction)
                             << "'; generated collectives sum only";
  int64_t size = 1;
  FailureOr<int64_t> mask =
      l.module.getGroup(op, op.getMeshAttr(), op.getAxes(), &size);
  if (failed(mask))
    return failure();
  Value input = op.getInput();
  // Each pipeline stage holds its share of a pending sum: the sum over the
  // mesh axes is over the pipeline too.
  if (l.foldsStageSum(op.getOperation(), input))
    *mask |= l.module.pipelineMask;
  Value from = asF32Words(l, input, l.get(input), reduction.has_value());
  if (!from)
    return op->emitOpError()
           << "exchanges " << l.typeOf(input).getElementType()
           << "; generated collectives take f32, and i32 where they only "
              "move data";
  ArrayRef<int64_t> in = l.typeOf(input).getShape();
  ArrayRef<int64_t> out = op.getResultTensorType().getShape();
  int64_t rank = in.size();
  // [outer][size][chunk] views of the input split along the scatter
  // dimension and of the result along the gather dimension.
  std::pair<int64_t, int64_t> inView{1, 1}, outView{1, 1};
  if (std::optional<int64_t> dim = op.getScatterDim())
    inView = splitView(in, *dim < 0 ? *dim + rank : *dim, size);
  if (std::optional<int64_t> dim = op.getGatherDim())
    outView = splitView(out, *dim < 0 ? *dim + rank : *dim, size);
  Value result = asF32Words(l, input, l.result(op->getResult(0)),
                            reduction.has_value());
  // A future the layer yields starts on its caller's site for the instance.
  Value pending = l.yieldedPending.lookup(op->getResult(0));
  if (!pending)
    pending = l.module.getPendingSite(l.b, l.loc);
  if (op.isStarted())
    l.pendingOf[op->getResult(0)] = pending;
  // A future carried to the next layer instance: the last instance has no
  // next one and is given no site, which only the guarded start below of
  // the next instance's parameter share checks for.
  if (l.carriedPending.contains(op->getResult(0))) {
    if (op->hasAttr("braid.compress"))
      return op->emitOpError()
             << "is compressed and started for the next layer instance; "
                "generated code starts a carried future uncompressed only";
    if (!getNextInstanceShareRead(input))
      return op->emitOpError()
             << "starts a future the layer carries to its next instance, "
                "but not on the next instance's parameter share (a "
                "braid.param marked braid.next_instance, as "
                "braid-zero3-prefetch makes it); generated code has no "
                "site to start it on in the last instance";
  }
  // braid-compress-gradients: a blocking 16-bit ring; a started one
  // completes at its start, leaving its wait nothing to do.
  if (auto compress = op->getAttrOfType<StringAttr>("braid.compress")) {
    if (kind != CollectiveKind::all_reduce &&
        kind != CollectiveKind::reduce_scatter)
      return op->emitOpError() << "is marked braid.compress; only all_reduce "
                                  "and reduce_scatter are compressed";
    if (auto psgd = op->getAttrOfType<DictionaryAttr>("braid.powersgd"))
      return lowerPowerSgd(op, l, psgd, *mask, size, from, result, pending);
    if (compress.getValue() != "bf16" && compress.getValue() != "fp16")
      return op->emitOpError() << "braid.compress is '" << compress.getValue()
                               << "'; generated code sends bf16 or fp16";
    l.call("braid_rt_program_collective_compressed_f32",
           {l.enumValue("braid_rt_program_collective_t", getRuntimeKind(kind)),
            l.i64(*mask), from, l.i64(l.countOf(input)), l.i64(inView.first),
            l.i64(inView.second), l.i64(compress.getValue() == "fp16"), result,
            pending, l.whereText()});
    return success();
  }
  // An instance's start of the next instance's parameter gather
  // (braid-zero3-prefetch across-repeats): the last instance, given no
  // site, has no next one to start it for.
  std::optional<OpBuilder::InsertionGuard> guard;
  if (op.isStarted() && l.yieldedPending.contains(op->getResult(0)) &&
      getNextInstanceShareRead(input)) {
    // The share's slot outlives the instance; a buffer of this layer (a
    // working copy) is reused by the next instance while the collective
    // may still read it.
    if (!input.getDefiningOp<ParamOp>())
      return op->emitOpError()
             << "starts a collective for the next layer instance on a value "
                "computed in this one; generated code starts those on a "
                "parameter share only (the instance's buffers are reused "
                "before the next one waits)";
    Value null = emitc::LiteralOp::create(l.b, l.loc, pending.getType(),
                                          l.b.getStringAttr("nullptr"));
    Value started = emitc::CmpOp::create(
        l.b, l.loc, l.b.getI1Type(), emitc::CmpPredicate::ne, pending, null);
    auto ifOp = emitc::IfOp::create(l.b, l.loc, started);
    guard.emplace(l.b);
    l.b.setInsertionPoint(ifOp.getThenRegion().front().getTerminator());
  }
  l.call(op.isStarted() ? "braid_rt_program_collective_start_f32"
                        : "braid_rt_program_collective_f32",
         {l.enumValue("braid_rt_program_collective_t", getRuntimeKind(kind)),
          l.i64(*mask), from, l.i64(l.countOf(input)),
          l.i64(inView.first), l.i64(inView.second), l.i64(outView.first),
          l.i64(outView.second), l.i64(op.getGroupRoot().value_or(0)), result,
          pending, l.whereText()});
  return success();
}

void mlir::braid::lowering::populateCollectiveLowerings(LoweringTable &t) {
  t.addInterface<CollectiveOpInterface>(lowerCollective);
  t.add<WaitOp>([](WaitOp op, FunctionLowering &l) -> LogicalResult {
    Value pending = l.pendingOf.lookup(op.getFuture());
    if (!pending)
      return op.emitOpError() << "waits for a future not started in this "
                                 "function; generated code waits where it "
                                 "starts";
    // A repeat's stacked future: one site per instance.
    if (int64_t count = l.pendingCount.lookup(op.getFuture())) {
      OpBuilder &b = l.b;
      auto loop =
          emitc::ForOp::create(b, l.loc, l.i64(0), l.i64(count), l.i64(1));
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      Value site = emitc::SubscriptOp::create(
          b, l.loc, cast<TypedValue<emitc::ArrayType>>(pending),
          ValueRange{loop.getInductionVar()});
      l.call("braid_rt_program_wait",
             {emitc::AddressOfOp::create(
                 b, l.loc,
                 emitc::PointerType::get(
                     cast<emitc::LValueType>(site.getType()).getValueType()),
                 site)});
    } else {
      l.call("braid_rt_program_wait", {pending});
    }
    l.alias(op.getResult(), l.get(op.getFuture()));
    return success();
  });
}
