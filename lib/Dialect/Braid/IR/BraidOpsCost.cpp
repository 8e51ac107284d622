//===- BraidOpsCost.cpp - FLOP counts of braid ops -------------------------===//
//
// CostOpInterface overrides for the ops that contain matrix products; all
// other ops use the interface's defaults.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;

/// 2 M N K per matrix, over the (broadcast) batch of the result.
static double matmulFlops(Value lhs, bool transposeA, Value result) {
  auto a = cast<RankedTensorType>(lhs.getType());
  int64_t k = transposeA ? a.getDimSize(a.getRank() - 2)
                         : a.getDimSize(a.getRank() - 1);
  return 2.0 * cast<RankedTensorType>(result.getType()).getNumElements() * k;
}

double MatmulOp::getMatmulFlops() {
  return matmulFlops(getLhs(), getTransposeA(), getResult());
}

// The bias add (and GELU) count one FLOP per result element, as the
// interface's default counts an elementwise op.
double MatmulBiasOp::getMatmulFlops() {
  return matmulFlops(getLhs(), getTransposeA(), getResult());
}

/// 2 B Hq S T D: one matrix product of the attention core (q k^T or p v).
static double attentionProduct(Value query, Value key) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  return 2.0 * q.getNumElements() * k.getDimSize(1);
}

double AttentionOp::getMatmulFlops() {
  // q k^T and p v.
  return 2 * attentionProduct(getQuery(), getKey());
}

double AttentionGradOp::getMatmulFlops() {
  // The backward of the core is four products: dP = dY V^T, dQ = dS K,
  // dK = dS^T Q, dV = P^T dY. They share dP, which is attributed to the
  // query gradient, so the three ops of one attention sum to the four.
  return (getOperand() == 0 ? 2 : 1) * attentionProduct(getQuery(), getKey());
}
