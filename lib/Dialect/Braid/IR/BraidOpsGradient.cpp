//===- BraidOpsGradient.cpp - Vector-Jacobian products of braid ops --------===//
//
// GradientOpInterface implementations. Each rule builds, for one operand,
// the gradient of the loss from the gradients of the op's results, using
// only the op's operands and results (saved by the forward pass) and the
// result gradients (produced by the backward pass). Rules compose braid ops
// where that is short and use the dedicated *_grad ops otherwise.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::braid;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

/// A rank-0 constant `value` of `elementType`; it broadcasts against any
/// tensor in elementwise ops.
static Value scalar(OpBuilder &b, Location loc, Type elementType,
                    double value) {
  auto type = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

/// A constant tensor of `type` filled with `value`.
static Value filled(OpBuilder &b, Location loc, RankedTensorType type,
                    double value) {
  return ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type,
                             b.getFloatAttr(type.getElementType(), value)));
}

/// Sums `grad` (the gradient of a broadcast result) down to `target`, the
/// type of the operand that was broadcast: leading dimensions the operand
/// lacks are summed away, stretched size-1 dimensions are summed in place.
static Value sumToType(OpBuilder &b, Location loc, Value grad,
                       RankedTensorType target) {
  RankedTensorType type = tensorType(grad);
  if (type == target)
    return grad;
  int64_t lead = type.getRank() - target.getRank();
  if (lead > 0) {
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < lead; ++i)
      axes.push_back(i);
    type = withShape(type, type.getShape().drop_front(lead));
    grad = ReduceOp::create(b, loc, type, ReduceKind::sum, grad, axes,
                            /*keep_dims=*/false);
  }
  SmallVector<int64_t> stretched;
  for (int64_t i = 0; i < target.getRank(); ++i)
    if (target.getDimSize(i) == 1 && type.getDimSize(i) != 1)
      stretched.push_back(i);
  if (!stretched.empty())
    grad = ReduceOp::create(b, loc, target, ReduceKind::sum, grad, stretched,
                            /*keep_dims=*/true);
  return grad;
}

/// The result type of matmul(a, b) with the given transposes.
static RankedTensorType matmulType(Value a, Value b, bool ta, bool tb) {
  ArrayRef<int64_t> sa = tensorType(a).getShape(), sb = tensorType(b).getShape();
  SmallVector<int64_t> shape =
      *broadcastShapes(sa.drop_back(2), sb.drop_back(2));
  shape.push_back(ta ? sa.back() : sa[sa.size() - 2]);
  shape.push_back(tb ? sb[sb.size() - 2] : sb.back());
  return withShape(tensorType(a), shape);
}

static Value matmul(OpBuilder &b, Location loc, Value x, Value y, bool tx,
                    bool ty) {
  return MatmulOp::create(b, loc, matmulType(x, y, tx, ty), x, y, tx, ty);
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise arithmetic
//===----------------------------------------------------------------------===//

/// The gradient of operand `index` (0: x, 1: y) of matmul(x, y) with the
/// given transposes, from the product's gradient `dy`.
static Value matmulGradient(OpBuilder &b, Location loc, Value x, Value y,
                            bool ta, bool tb, Value dy, unsigned index) {
  // With Y = op(A) op(B): d op(A) = dY op(B)^T and d op(B) = op(A)^T dY.
  Value grad;
  if (index == 0)
    grad = ta ? matmul(b, loc, y, dy, tb, true) : matmul(b, loc, dy, y, false, !tb);
  else
    grad = tb ? matmul(b, loc, dy, x, true, ta) : matmul(b, loc, x, dy, !ta, false);
  return sumToType(b, loc, grad, tensorType(index == 0 ? x : y));
}

Value MatmulOp::buildGradient(OpBuilder &b, unsigned index,
                              ValueRange resultGrads) {
  return matmulGradient(b, getLoc(), getLhs(), getRhs(), getTransposeA(),
                        getTransposeB(), resultGrads[0], index);
}

Value MatmulBiasOp::buildGradient(OpBuilder &b, unsigned index,
                                  ValueRange resultGrads) {
  Location loc = getLoc();
  // The gradient of the pre-activation lhs rhs + bias. With GELU, the
  // pre-activation is recomputed (the same values: the op without its
  // GELU), since the rule may not use what the forward pass did not keep.
  Value grad = resultGrads[0];
  if (GeluApproximationAttr gelu = getGeluAttr()) {
    Value pre = MatmulBiasOp::create(b, loc, getType(), getLhs(), getRhs(),
                                     getBias(), getTransposeA(),
                                     getTransposeB(), GeluApproximationAttr());
    grad = GeluGradOp::create(b, loc, gelu.getValue(), pre, grad);
  }
  if (index == 2)
    return sumToType(b, loc, grad, tensorType(getBias()));
  return matmulGradient(b, loc, getLhs(), getRhs(), getTransposeA(),
                        getTransposeB(), grad, index);
}

Value AddOp::buildGradient(OpBuilder &b, unsigned index,
                           ValueRange resultGrads) {
  return sumToType(b, getLoc(), resultGrads[0],
                   tensorType(getOperand(index)));
}

Value SubOp::buildGradient(OpBuilder &b, unsigned index,
                           ValueRange resultGrads) {
  Value g = resultGrads[0];
  if (index == 1)
    g = NegOp::create(b, getLoc(), g);
  return sumToType(b, getLoc(), g, tensorType(getOperand(index)));
}

Value MulOp::buildGradient(OpBuilder &b, unsigned index,
                           ValueRange resultGrads) {
  Value g = resultGrads[0];
  Value other = getOperand(1 - index);
  Value prod = MulOp::create(b, getLoc(), g.getType(), g, other);
  return sumToType(b, getLoc(), prod, tensorType(getOperand(index)));
}

Value DivOp::buildGradient(OpBuilder &b, unsigned index,
                           ValueRange resultGrads) {
  Location loc = getLoc();
  Value g = resultGrads[0];
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
  Value q = DivOp::create(b, loc, g.getType(), g, getRhs());
  if (index == 1) {
    q = MulOp::create(b, loc, g.getType(), q, getResult());
    q = NegOp::create(b, loc, q);
  }
  return sumToType(b, loc, q, tensorType(getOperand(index)));
}

Value NegOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return NegOp::create(b, getLoc(), resultGrads[0]);
}

// The gradient goes back in the operand's type: a bf16 working copy's
// gradient reaches its f32 master weight as f32.
Value ConvertOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return ConvertOp::create(b, getLoc(), getInput().getType(), resultGrads[0]);
}

// A sharding constraint is the identity on values: its gradient is the same
// constraint (sharding and priority) on the cotangent, as JAX's
// with_sharding_constraint transposes.
Value ShardOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return ShardOp::create(b, getLoc(), resultGrads[0], getSharding(),
                         getPriority());
}

Value ExpOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return MulOp::create(b, getLoc(), getType(), resultGrads[0], getResult());
}

Value SqrtOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  // d sqrt(x) = 0.5 / sqrt(x).
  Location loc = getLoc();
  Value q = DivOp::create(b, loc, getType(), resultGrads[0], getResult());
  return MulOp::create(b, loc, getType(), q,
                       scalar(b, loc, getType().getElementType(), 0.5));
}

Value RsqrtOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  // d x^-1/2 = -0.5 x^-3/2 = -0.5 y^3.
  Location loc = getLoc();
  Value y = getResult();
  Value y2 = MulOp::create(b, loc, getType(), y, y);
  Value y3 = MulOp::create(b, loc, getType(), y2, y);
  Value g = MulOp::create(b, loc, getType(), resultGrads[0], y3);
  return MulOp::create(b, loc, getType(), g,
                       scalar(b, loc, getType().getElementType(), -0.5));
}

Value ReluOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return ReluGradOp::create(b, getLoc(), getInput(), resultGrads[0]);
}

Value SiluOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return SiluGradOp::create(b, getLoc(), getInput(), resultGrads[0]);
}

Value GeluOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return GeluGradOp::create(b, getLoc(), getApproximate(), getInput(),
                            resultGrads[0]);
}

//===----------------------------------------------------------------------===//
// Normalisation, embeddings, attention, loss
//===----------------------------------------------------------------------===//

Value SoftmaxOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  // dx = y * (dy - sum(dy * y, axis)).
  Location loc = getLoc();
  Value y = getResult(), dy = resultGrads[0];
  RankedTensorType type = getType();
  SmallVector<int64_t> keptShape(type.getShape());
  keptShape[getAxis()] = 1;
  Value prod = MulOp::create(b, loc, type, dy, y);
  Value sum = ReduceOp::create(b, loc, withShape(type, keptShape),
                               ReduceKind::sum, prod,
                               ArrayRef<int64_t>{(int64_t)getAxis()},
                               /*keep_dims=*/true);
  Value diff = SubOp::create(b, loc, type, dy, sum);
  return MulOp::create(b, loc, type, y, diff);
}

Value LayerNormOp::buildGradient(OpBuilder &b, unsigned index,
                                 ValueRange resultGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  if (index == 0)
    return LayerNormGradOp::create(b, loc, getType(), getInput(), getScale(),
                                   dy, getEpsilon());
  RankedTensorType paramType = tensorType(getOperand(index));
  if (index == 2)
    return sumToType(b, loc, dy, paramType);
  // d scale = sum(dy * xhat): recompute xhat from the saved input.
  Value xhat = LayerNormOp::create(b, loc, getType(), getInput(),
                                   filled(b, loc, paramType, 1.0),
                                   filled(b, loc, paramType, 0.0),
                                   getEpsilon());
  Value prod = MulOp::create(b, loc, getType(), dy, xhat);
  return sumToType(b, loc, prod, paramType);
}

Value RmsNormOp::buildGradient(OpBuilder &b, unsigned index,
                               ValueRange resultGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  if (index == 0)
    return RmsNormGradOp::create(b, loc, getType(), getInput(), getScale(), dy,
                                 getEpsilon());
  RankedTensorType paramType = tensorType(getScale());
  Value xhat = RmsNormOp::create(b, loc, getType(), getInput(),
                                 filled(b, loc, paramType, 1.0), getEpsilon());
  Value prod = MulOp::create(b, loc, getType(), dy, xhat);
  return sumToType(b, loc, prod, paramType);
}

Value EmbeddingOp::buildGradient(OpBuilder &b, unsigned,
                                 ValueRange resultGrads) {
  return EmbeddingGradOp::create(b, getLoc(), getTable().getType(), getIds(),
                                 resultGrads[0], getMeshAttr(),
                                 getVocabAxesAttr());
}

Value RotaryOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  // A rotation's transpose is the rotation by the negated angle.
  return RotaryOp::create(b, getLoc(), resultGrads[0], getBase(),
                          !getInverse());
}

Value AttentionOp::buildGradient(OpBuilder &b, unsigned index,
                                 ValueRange resultGrads) {
  return AttentionGradOp::create(b, getLoc(), getOperand(index).getType(),
                                 getQuery(), getKey(), getValue(),
                                 resultGrads[0], index, getCausal(),
                                 getScaleAttr());
}

Value CrossEntropyOp::buildGradient(OpBuilder &b, unsigned,
                                    ValueRange resultGrads) {
  return CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                    getLogits(), getLabels(), resultGrads[0],
                                    getMeshAttr(), getVocabAxesAttr());
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

Value ReshapeOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return ReshapeOp::create(b, getLoc(), getInput().getType(), resultGrads[0]);
}

Value TransposeOp::buildGradient(OpBuilder &b, unsigned,
                                 ValueRange resultGrads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return TransposeOp::create(b, getLoc(), getInput().getType(),
                             resultGrads[0], inverse);
}

Value ReduceOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  Location loc = getLoc();
  RankedTensorType inType = tensorType(getInput());
  Value dy = resultGrads[0];
  if (getKind() == ReduceKind::max)
    return ReduceMaxGradOp::create(b, loc, inType, getInput(), dy, getAxes(),
                                   getKeepDims());
  // Sum and mean: every input element receives its output's gradient.
  SmallVector<int64_t> kept(inType.getShape());
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    count *= kept[a];
    kept[a] = 1;
  }
  if (!getKeepDims())
    dy = ReshapeOp::create(b, loc, withShape(inType, kept), dy);
  Value g = BroadcastOp::create(b, loc, inType, dy);
  // Divided by the count (exact in any float type), not multiplied by a
  // reciprocal rounded to the element type: f64 evaluation stays exact.
  if (getKind() == ReduceKind::mean)
    g = DivOp::create(b, loc, inType, g,
                      scalar(b, loc, inType.getElementType(),
                             static_cast<double>(count)));
  return g;
}

Value BroadcastOp::buildGradient(OpBuilder &b, unsigned,
                                 ValueRange resultGrads) {
  return sumToType(b, getLoc(), resultGrads[0], tensorType(getInput()));
}

Value SliceOp::buildGradient(OpBuilder &b, unsigned, ValueRange resultGrads) {
  return SliceGradOp::create(b, getLoc(), getInput().getType(),
                             resultGrads[0], getStartAttr(), getLimitAttr(),
                             getStrideAttr());
}

Value ConcatOp::buildGradient(OpBuilder &b, unsigned index,
                              ValueRange resultGrads) {
  RankedTensorType out = getType(), in = tensorType(getOperand(index));
  int64_t axis = getAxis(), offset = 0;
  for (unsigned i = 0; i < index; ++i)
    offset += tensorType(getOperand(i)).getDimSize(axis);
  SmallVector<int64_t> start(out.getRank(), 0), limit(out.getShape());
  start[axis] = offset;
  limit[axis] = offset + in.getDimSize(axis);
  return SliceOp::create(b, getLoc(), in, resultGrads[0], start, limit,
                         /*stride=*/nullptr);
}
