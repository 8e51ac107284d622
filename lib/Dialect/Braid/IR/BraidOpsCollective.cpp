//===- BraidOpsCollective.cpp - CollectiveOpInterface of the collectives --===//
//
// What each collective is: its kind, reduction, dimensions and root, its
// started form and its ring-model cost. A blocking op and its started form
// share their arguments, so each pair shares one implementation. Methods
// not defined here use the interface's defaults (no reduction, dimension or
// root; (n-1)/n of the data in n-1 steps).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::braid;

int64_t CollectiveOpInterface::getGroupSize(MeshOp mesh) {
  int64_t n = 1;
  for (Attribute a : getAxes())
    n *= mesh.getShape()[*mesh.getAxisIndex(cast<StringAttr>(a).getValue())];
  return n;
}

/// Builds `StartOpTy` with the operands and attributes (inherent and
/// discardable: cause, phase, chunk) of `op` and a future of its result.
template <typename StartOpTy>
static Operation *createStartOf(Operation *op, OpBuilder &b) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  return StartOpTy::create(b, op->getLoc(),
                           TypeRange{FutureType::get(op->getContext(), type)},
                           op->getOperands(), op->getAttrs());
}

// An all_reduce sends each element out and back around the ring:
// reduce-scatter then all-gather.
static double allReduceTraffic(int64_t n) { return 2 * (double(n - 1) / n); }
static int64_t allReduceSteps(int64_t n) { return 2 * (n - 1); }

//===----------------------------------------------------------------------===//
// all_reduce
//===----------------------------------------------------------------------===//

CollectiveKind AllReduceOp::getCollectiveKind() {
  return CollectiveKind::all_reduce;
}
std::optional<ReduceKind> AllReduceOp::getReduction() { return getKind(); }
Operation *AllReduceOp::createStart(OpBuilder &b) {
  return createStartOf<AllReduceStartOp>(*this, b);
}
double AllReduceOp::getRingTraffic(int64_t n) { return allReduceTraffic(n); }
int64_t AllReduceOp::getRingSteps(int64_t n) { return allReduceSteps(n); }

CollectiveKind AllReduceStartOp::getCollectiveKind() {
  return CollectiveKind::all_reduce;
}
std::optional<ReduceKind> AllReduceStartOp::getReduction() { return getKind(); }
double AllReduceStartOp::getRingTraffic(int64_t n) {
  return allReduceTraffic(n);
}
int64_t AllReduceStartOp::getRingSteps(int64_t n) { return allReduceSteps(n); }

//===----------------------------------------------------------------------===//
// all_gather
//===----------------------------------------------------------------------===//

CollectiveKind AllGatherOp::getCollectiveKind() {
  return CollectiveKind::all_gather;
}
std::optional<int64_t> AllGatherOp::getGatherDim() { return getDim(); }
Operation *AllGatherOp::createStart(OpBuilder &b) {
  return createStartOf<AllGatherStartOp>(*this, b);
}

CollectiveKind AllGatherStartOp::getCollectiveKind() {
  return CollectiveKind::all_gather;
}
std::optional<int64_t> AllGatherStartOp::getGatherDim() { return getDim(); }

//===----------------------------------------------------------------------===//
// reduce_scatter (always a sum)
//===----------------------------------------------------------------------===//

CollectiveKind ReduceScatterOp::getCollectiveKind() {
  return CollectiveKind::reduce_scatter;
}
std::optional<ReduceKind> ReduceScatterOp::getReduction() {
  return ReduceKind::sum;
}
std::optional<int64_t> ReduceScatterOp::getScatterDim() { return getDim(); }
Operation *ReduceScatterOp::createStart(OpBuilder &b) {
  return createStartOf<ReduceScatterStartOp>(*this, b);
}

CollectiveKind ReduceScatterStartOp::getCollectiveKind() {
  return CollectiveKind::reduce_scatter;
}
std::optional<ReduceKind> ReduceScatterStartOp::getReduction() {
  return ReduceKind::sum;
}
std::optional<int64_t> ReduceScatterStartOp::getScatterDim() {
  return getDim();
}

//===----------------------------------------------------------------------===//
// all_to_all
//===----------------------------------------------------------------------===//

CollectiveKind AllToAllOp::getCollectiveKind() {
  return CollectiveKind::all_to_all;
}
std::optional<int64_t> AllToAllOp::getScatterDim() { return getSplitDim(); }
std::optional<int64_t> AllToAllOp::getGatherDim() { return getConcatDim(); }
Operation *AllToAllOp::createStart(OpBuilder &b) {
  return createStartOf<AllToAllStartOp>(*this, b);
}

CollectiveKind AllToAllStartOp::getCollectiveKind() {
  return CollectiveKind::all_to_all;
}
std::optional<int64_t> AllToAllStartOp::getScatterDim() {
  return getSplitDim();
}
std::optional<int64_t> AllToAllStartOp::getGatherDim() {
  return getConcatDim();
}

//===----------------------------------------------------------------------===//
// all_slice (no communication, so no started form)
//===----------------------------------------------------------------------===//

CollectiveKind AllSliceOp::getCollectiveKind() {
  return CollectiveKind::all_slice;
}
std::optional<int64_t> AllSliceOp::getScatterDim() { return getDim(); }
double AllSliceOp::getRingTraffic(int64_t) { return 0.0; }
int64_t AllSliceOp::getRingSteps(int64_t) { return 0; }

//===----------------------------------------------------------------------===//
// broadcast_from (a pipelined chain: all of the tensor, n-1 hops)
//===----------------------------------------------------------------------===//

CollectiveKind BroadcastFromOp::getCollectiveKind() {
  return CollectiveKind::broadcast_from;
}
std::optional<int64_t> BroadcastFromOp::getGroupRoot() { return getRoot(); }
Operation *BroadcastFromOp::createStart(OpBuilder &b) {
  return createStartOf<BroadcastFromStartOp>(*this, b);
}
double BroadcastFromOp::getRingTraffic(int64_t) { return 1.0; }

CollectiveKind BroadcastFromStartOp::getCollectiveKind() {
  return CollectiveKind::broadcast_from;
}
std::optional<int64_t> BroadcastFromStartOp::getGroupRoot() {
  return getRoot();
}
double BroadcastFromStartOp::getRingTraffic(int64_t) { return 1.0; }
