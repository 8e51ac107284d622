//===- Collectives.cpp - Collectives as program runtime calls ---------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

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

/// A collective or its `_start` form: braid_rt_program_collective[_start]_f32
/// with its views, over the group of `axes`.
static LogicalResult lowerCollective(Operation *op, FunctionLowering &l,
                                     StringRef kind, Value input,
                                     FlatSymbolRefAttr meshRef, ArrayAttr axes,
                                     RankedTensorType resultType,
                                     int64_t splitDim, int64_t concatDim,
                                     int64_t root, bool start) {
  int64_t size = 1;
  FailureOr<int64_t> mask = l.module.getGroup(op, meshRef, axes, &size);
  if (failed(mask))
    return failure();
  if (!l.typeOf(input).getElementType().isF32())
    return op->emitOpError() << "exchanges " << l.typeOf(input).getElementType()
                             << "; generated collectives take f32";
  ArrayRef<int64_t> in = l.typeOf(input).getShape();
  ArrayRef<int64_t> out = resultType.getShape();
  int64_t rank = in.size();
  if (splitDim < 0)
    splitDim += rank;
  if (concatDim < 0)
    concatDim += rank;
  std::pair<int64_t, int64_t> inView{1, 1}, outView{1, 1};
  if (kind == "REDUCE_SCATTER" || kind == "ALL_TO_ALL")
    inView = splitView(in, splitDim, size);
  if (kind == "ALL_GATHER" || kind == "ALL_TO_ALL")
    outView = splitView(out, concatDim, size);
  Value result = l.result(op->getResult(0));
  Value pending = l.module.getPendingSite(l.b, l.loc);
  if (start)
    l.pendingOf[op->getResult(0)] = pending;
  l.call(start ? "braid_rt_program_collective_start_f32"
               : "braid_rt_program_collective_f32",
         {l.enumValue("braid_rt_program_collective_t",
                      kind == "ALL_REDUCE"       ? 0
                      : kind == "ALL_GATHER"     ? 1
                      : kind == "REDUCE_SCATTER" ? 2
                      : kind == "ALL_TO_ALL"     ? 3
                                                 : 4),
          l.i64(*mask), l.get(input), l.i64(l.countOf(input)),
          l.i64(inView.first), l.i64(inView.second), l.i64(outView.first),
          l.i64(outView.second), l.i64(root), result, pending, l.whereText()});
  return success();
}

template <typename OpT> static LogicalResult checkSum(OpT op) {
  if (op.getKind() != ReduceKind::sum)
    return op.emitOpError() << "reduces with '"
                            << stringifyReduceKind(op.getKind())
                            << "'; generated collectives sum only";
  return success();
}

void mlir::braid::lowering::populateCollectiveLowerings(LoweringTable &t) {
  t.add<AllReduceOp>([](AllReduceOp op, FunctionLowering &l) -> LogicalResult {
    if (failed(checkSum(op)))
      return failure();
    return lowerCollective(op, l, "ALL_REDUCE", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), 0, 0, 0, false);
  });
  t.add<AllReduceStartOp>(
      [](AllReduceStartOp op, FunctionLowering &l) -> LogicalResult {
        if (failed(checkSum(op)))
          return failure();
        return lowerCollective(op, l, "ALL_REDUCE", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, 0, 0, true);
      });
  t.add<AllGatherOp>([](AllGatherOp op, FunctionLowering &l) -> LogicalResult {
    return lowerCollective(op, l, "ALL_GATHER", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), 0, op.getDim(), 0, false);
  });
  t.add<AllGatherStartOp>(
      [](AllGatherStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "ALL_GATHER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, op.getDim(), 0, true);
      });
  t.add<ReduceScatterOp>(
      [](ReduceScatterOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "REDUCE_SCATTER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               l.typeOf(op.getResult()), op.getDim(), 0, 0,
                               false);
      });
  t.add<ReduceScatterStartOp>(
      [](ReduceScatterStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "REDUCE_SCATTER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), op.getDim(), 0, 0, true);
      });
  t.add<AllToAllOp>([](AllToAllOp op, FunctionLowering &l) -> LogicalResult {
    return lowerCollective(op, l, "ALL_TO_ALL", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), op.getSplitDim(),
                           op.getConcatDim(), 0, false);
  });
  t.add<AllToAllStartOp>(
      [](AllToAllStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "ALL_TO_ALL", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), op.getSplitDim(),
                               op.getConcatDim(), 0, true);
      });
  t.add<BroadcastFromOp>(
      [](BroadcastFromOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "BROADCAST", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               l.typeOf(op.getResult()), 0, 0, op.getRoot(),
                               false);
      });
  t.add<BroadcastFromStartOp>(
      [](BroadcastFromStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "BROADCAST", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, 0, op.getRoot(), true);
      });
  t.add<WaitOp>([](WaitOp op, FunctionLowering &l) -> LogicalResult {
    Value pending = l.pendingOf.lookup(op.getFuture());
    if (!pending)
      return op.emitOpError() << "waits for a future not started in this "
                                 "function; generated code waits where it "
                                 "starts";
    l.call("braid_rt_program_wait", {pending});
    l.alias(op.getResult(), l.get(op.getFuture()));
    return success();
  });
  t.add<AllSliceOp>([](AllSliceOp op, FunctionLowering &l) -> LogicalResult {
    int64_t size = 1;
    FailureOr<int64_t> mask =
        l.module.getGroup(op, op.getMeshAttr(), op.getAxesAttr(), &size);
    if (failed(mask))
      return failure();
    if (!l.typeOf(op.getInput()).getElementType().isF32())
      return op.emitOpError() << "slices a non-f32 tensor; generated code "
                                 "takes f32";
    int64_t dim = op.getDim();
    if (dim < 0)
      dim += l.rankOf(op.getInput());
    auto [outer, chunk] =
        splitView(l.typeOf(op.getInput()).getShape(), dim, size);
    l.call("braid_rt_program_all_slice_f32",
           {l.i64(*mask), l.get(op.getInput()), l.i64(outer), l.i64(chunk),
            l.result(op.getResult())});
    return success();
  });
}
