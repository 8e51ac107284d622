//===- BraidOpsEval.cpp - Reference semantics of braid ops -----------------===//
//
// EvalOpInterface implementations: the numerical definition of every braid
// op, used by braid-eval as the oracle for all later passes. Values are
// computed in double precision; the evaluator rounds results to their
// element type. Clarity over speed: these loops define the semantics.
//
// They are external models (attached by registerEvalInterfaceExternalModels)
// so that the dialect library knows nothing of evaluation.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Eval/EvalOpInterface.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::braid;

std::optional<DType> mlir::braid::getDType(Type type) {
  if (type.isF64())
    return DType::F64;
  if (type.isF32())
    return DType::F32;
  if (type.isF16())
    return DType::F16;
  if (type.isBF16())
    return DType::BF16;
  if (type.isInteger(64))
    return DType::I64;
  if (type.isInteger(32))
    return DType::I32;
  return std::nullopt;
}

EvalContext::~EvalContext() = default;

/// An uninitialised result tensor with the shape and dtype of `v`.
static Tensor resultFor(Value v) {
  // A future (a repeat's stacked one) holds the tensor it will give.
  Type t = v.getType();
  if (auto future = dyn_cast<FutureType>(t))
    t = future.getValueType();
  auto type = cast<RankedTensorType>(t);
  return Tensor(type.getShape(),
                getDType(type.getElementType()).value_or(DType::F64));
}

/// Splits `shape` around `axis` into (outer, size, inner) extents.
static void splitAround(ArrayRef<int64_t> shape, int64_t axis, int64_t &outer,
                        int64_t &size, int64_t &inner) {
  outer = numElements(shape.take_front(axis));
  size = shape[axis];
  inner = numElements(shape.drop_front(axis + 1));
}

//===----------------------------------------------------------------------===//
// Parameters and layers
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(ParamOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *>,
                                SmallVectorImpl<Tensor> &results) {
  FailureOr<Tensor> value = ctx.getParameter(op);
  if (failed(value))
    return failure();
  results.push_back(std::move(*value));
  return success();
}

static LogicalResult evaluateOp(StoreParamOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> operands,
                                SmallVectorImpl<Tensor> &) {
  return ctx.storeParameter(op, *operands[0]);
}

static LogicalResult evaluateOp(PipelineOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> operands,
                                SmallVectorImpl<Tensor> &results) {
  return ctx.runPipeline(op, operands, results);
}

static LogicalResult evaluateOp(RepeatOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> operands,
                                SmallVectorImpl<Tensor> &results) {
  auto layer =
      SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, op.getLayerAttr());
  if (!layer)
    return op.emitOpError()
           << "'" << op.getLayer() << "' does not name a layer";
  unsigned numCarried = op.getNumCarried();
  int64_t first = op.getFirst(), count = op.getCount();
  SmallVector<Tensor> carried;
  for (const Tensor *t : operands.take_front(numCarried))
    carried.push_back(*t);
  // Stacked results, filled slice by slice.
  SmallVector<Tensor> stacked;
  for (Value r : op.getResults().drop_front(numCarried))
    stacked.push_back(resultFor(r));

  for (int64_t n = 0; n < count; ++n) {
    int64_t slot = op.getReverse() ? count - 1 - n : n;
    SmallVector<Tensor> slices;
    for (const Tensor *t : operands.drop_front(numCarried)) {
      Tensor s(t->shape().drop_front(), t->dtype());
      std::copy_n(t->data() + slot * s.numElements(), s.numElements(),
                  s.data());
      slices.push_back(std::move(s));
    }
    SmallVector<const Tensor *> args;
    for (const Tensor &t : carried)
      args.push_back(&t);
    for (const Tensor &t : slices)
      args.push_back(&t);
    SmallVector<Tensor> outs;
    std::string prefix = op.getParamPrefix(first + slot);
    // The instance run next; the last has none and reads its own.
    int64_t next =
        n + 1 < count ? (op.getReverse() ? slot - 1 : slot + 1) : slot;
    std::string nextPrefix = op.getParamPrefix(first + next);
    if (failed(ctx.callLayer(layer, prefix, nextPrefix, args, outs)))
      return failure();
    for (auto [stack, out] : llvm::zip_equal(
             stacked, ArrayRef<Tensor>(outs).drop_front(numCarried)))
      std::copy_n(out.data(), out.numElements(),
                  stack.data() + slot * out.numElements());
    outs.resize(numCarried);
    carried = std::move(outs);
  }
  results.append(std::make_move_iterator(carried.begin()),
                 std::make_move_iterator(carried.end()));
  results.append(std::make_move_iterator(stacked.begin()),
                 std::make_move_iterator(stacked.end()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise arithmetic
//===----------------------------------------------------------------------===//

/// braid.matmul's product of `a` and `b` into `c` (shaped for the result).
static void matmulInto(const Tensor &a, const Tensor &b, bool transposeA,
                       bool transposeB, Tensor &c) {
  int64_t ra = a.rank(), rb = b.rank(), rc = c.rank();
  int64_t m = c.dim(rc - 2), n = c.dim(rc - 1);
  int64_t k = transposeA ? a.dim(ra - 2) : a.dim(ra - 1);
  // Element strides of (row, column) of each operand's logical matrix.
  int64_t aRow = transposeA ? 1 : a.dim(ra - 1);
  int64_t aCol = transposeA ? a.dim(ra - 1) : 1;
  int64_t bRow = transposeB ? 1 : b.dim(rb - 1);
  int64_t bCol = transposeB ? b.dim(rb - 1) : 1;
  ArrayRef<int64_t> batch = c.shape().drop_back(2);
  std::vector<int64_t> aBatch =
      broadcastIndexMap(a.shape().drop_back(2), batch);
  std::vector<int64_t> bBatch =
      broadcastIndexMap(b.shape().drop_back(2), batch);
  int64_t aSize = a.dim(ra - 2) * a.dim(ra - 1);
  int64_t bSize = b.dim(rb - 2) * b.dim(rb - 1);
  for (int64_t p = 0, e = aBatch.size(); p < e; ++p) {
    const double *pa = a.data() + aBatch[p] * aSize;
    const double *pb = b.data() + bBatch[p] * bSize;
    double *pc = c.data() + p * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t q = 0; q < k; ++q)
          sum += pa[i * aRow + q * aCol] * pb[q * bRow + j * bCol];
        pc[i * n + j] = sum;
      }
  }
}

static LogicalResult evaluateOp(MatmulOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor c = resultFor(op.getResult());
  matmulInto(*ops[0], *ops[1], op.getTransposeA(), op.getTransposeB(), c);
  results.push_back(std::move(c));
  return success();
}

static double geluTanh(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

/// As braid.matmul, braid.add of the bias and braid.gelu tanh, each result
/// rounded to the operands' type (f32, or f64 under braid-eval --f64) as
/// the evaluator rounds each op's (the last rounding is the evaluator's);
/// but a bf16 product is rounded to f32, not bf16, as the evaluator holds
/// a bf16 linear layer's product before its bias add (isBF16BiasProduct),
/// and the sum is rounded to f32 before bf16, as the evaluator rounds that
/// add's.
static LogicalResult evaluateOp(MatmulBiasOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  DType dtype = ops[0]->dtype();
  Tensor c = resultFor(op.getResult());
  c.setDType(dtype == DType::BF16 ? DType::F32 : dtype);
  matmulInto(*ops[0], *ops[1], op.getTransposeA(), op.getTransposeB(), c);
  c.roundToDType();
  const Tensor &bias = *ops[2];
  int64_t n = bias.numElements();
  for (int64_t i = 0, e = c.numElements(); i < e; ++i)
    c[i] = c[i] + bias[i % n];
  c.roundToDType(); // f32 (or the operands' type): a bf16 sum rounds twice
  c.setDType(dtype);
  if (op.getGelu()) {
    c.roundToDType();
    for (int64_t i = 0, e = c.numElements(); i < e; ++i)
      c[i] = geluTanh(c[i]);
  }
  results.push_back(std::move(c));
  return success();
}

template <typename Fn>
static LogicalResult evalBinary(Value result, ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results, Fn fn) {
  Tensor c = resultFor(result);
  std::vector<int64_t> ia = broadcastIndexMap(ops[0]->shape(), c.shape());
  std::vector<int64_t> ib = broadcastIndexMap(ops[1]->shape(), c.shape());
  for (int64_t i = 0, e = c.numElements(); i < e; ++i)
    c[i] = fn((*ops[0])[ia[i]], (*ops[1])[ib[i]]);
  results.push_back(std::move(c));
  return success();
}

static LogicalResult evaluateOp(AddOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results,
                    [](double x, double y) { return x + y; });
}
static LogicalResult evaluateOp(SubOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results,
                    [](double x, double y) { return x - y; });
}
static LogicalResult evaluateOp(MulOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results,
                    [](double x, double y) { return x * y; });
}
static LogicalResult evaluateOp(DivOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results,
                    [](double x, double y) { return x / y; });
}

template <typename Fn>
static LogicalResult evalUnary(Value result, ArrayRef<const Tensor *> ops,
                               SmallVectorImpl<Tensor> &results, Fn fn) {
  Tensor c = resultFor(result);
  for (int64_t i = 0, e = c.numElements(); i < e; ++i)
    c[i] = fn((*ops[0])[i]);
  results.push_back(std::move(c));
  return success();
}

static LogicalResult evaluateOp(NegOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results, [](double x) { return -x; });
}
// The evaluator rounds the result to its element type (ties to even), which
// is the conversion.
static LogicalResult evaluateOp(ConvertOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results, [](double x) { return x; });
}
static LogicalResult evaluateOp(RoundOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  DType to = *getDType(op.getElementType());
  return evalUnary(op.getResult(), ops, results,
                   [to](double x) { return roundToDType(x, to); });
}
static LogicalResult evaluateOp(ExpOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results,
                   [](double x) { return std::exp(x); });
}
static LogicalResult evaluateOp(SqrtOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results,
                   [](double x) { return std::sqrt(x); });
}
static LogicalResult evaluateOp(RsqrtOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results,
                   [](double x) { return 1.0 / std::sqrt(x); });
}
static LogicalResult evaluateOp(ReluOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results,
                   [](double x) { return x > 0.0 ? x : 0.0; });
}
static LogicalResult evaluateOp(SiluOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalUnary(op.getResult(), ops, results,
                   [](double x) { return x / (1.0 + std::exp(-x)); });
}

static LogicalResult evaluateOp(GeluOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  if (op.getApproximate() == GeluApproximation::tanh)
    return evalUnary(op.getResult(), ops, results, geluTanh);
  return evalUnary(op.getResult(), ops, results, [](double x) {
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  });
}

//===----------------------------------------------------------------------===//
// Normalisation, embeddings, attention, loss
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(SoftmaxOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0];
  Tensor y = resultFor(op.getResult());
  int64_t outer, size, inner;
  splitAround(x.shape(), op.getAxis(), outer, size, inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * size * inner + in;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < size; ++i)
        mx = std::max(mx, x[base + i * inner]);
      double sum = 0.0;
      for (int64_t i = 0; i < size; ++i)
        sum += (y[base + i * inner] = std::exp(x[base + i * inner] - mx));
      for (int64_t i = 0; i < size; ++i)
        y[base + i * inner] /= sum;
    }
  results.push_back(std::move(y));
  return success();
}

/// The mean of the `h` values at `x` and the reciprocal of their standard
/// deviation (biased variance, plus `eps`): layer_norm's statistics.
static std::pair<double, double> normalizer(const double *x, int64_t h,
                                            double eps) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < h; ++i)
    mean += x[i];
  mean /= h;
  for (int64_t i = 0; i < h; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.0 / std::sqrt(var / h + eps)};
}

static LogicalResult evaluateOp(LayerNormOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0], &g = *ops[1], &b = *ops[2];
  Tensor y = resultFor(op.getResult());
  int64_t h = x.dim(x.rank() - 1), rows = x.numElements() / h;
  double eps = op.getEpsilon().convertToDouble();
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.data() + r * h;
    auto [mean, inv] = normalizer(px, h, eps);
    for (int64_t i = 0; i < h; ++i)
      y[r * h + i] = (px[i] - mean) * inv * g[i] + b[i];
  }
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(RmsNormOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0], &g = *ops[1];
  Tensor y = resultFor(op.getResult());
  int64_t h = x.dim(x.rank() - 1), rows = x.numElements() / h;
  double eps = op.getEpsilon().convertToDouble();
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.data() + r * h;
    double ms = 0.0;
    for (int64_t i = 0; i < h; ++i)
      ms += px[i] * px[i];
    double inv = 1.0 / std::sqrt(ms / h + eps);
    for (int64_t i = 0; i < h; ++i)
      y[r * h + i] = px[i] * inv * g[i];
  }
  results.push_back(std::move(y));
  return success();
}

/// Reads an integer id, reporting one outside [0, bound) on `op`.
static FailureOr<int64_t> checkedId(Operation *op, const Tensor &ids,
                                    int64_t pos, int64_t bound,
                                    StringRef what) {
  double v = ids[pos];
  if (v >= 0 && v < bound && v == std::floor(v))
    return static_cast<int64_t>(v);
  std::string value;
  llvm::raw_string_ostream(value) << llvm::format("%.17g", v);
  return op->emitOpError() << what << " " << value << " at flat position "
                           << pos << " is out of range; expected 0 <= " << what
                           << " < " << bound;
}

/// A vocabulary-parallel op (`mesh` and `vocab_axes` set) exchanges
/// `mine` with its group over the vocabulary axes, filling `group` and this
/// device's `position`; otherwise the group is this device alone.
template <typename OpTy>
static LogicalResult
vocabExchange(OpTy op, EvalContext &ctx, const Tensor &mine,
              SmallVectorImpl<Tensor> &group, unsigned &position) {
  group.clear();
  if (!op.getVocabAxes()) {
    group.assign(1, mine);
    position = 0;
    return success();
  }
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr());
  SmallVector<StringRef> axes;
  for (Attribute a : op.getVocabAxesAttr())
    axes.push_back(cast<StringAttr>(a).getValue());
  return ctx.exchange(op, mesh, axes, mine, group, position);
}

/// This device's block of the vocabulary: the first id it holds and the
/// size of the whole vocabulary, for a block of `rows` ids.
template <typename OpTy>
static LogicalResult vocabBlock(OpTy op, EvalContext &ctx, int64_t rows,
                                int64_t &first, int64_t &total) {
  SmallVector<Tensor> group;
  unsigned position;
  if (failed(
          vocabExchange(op, ctx, Tensor({}, DType::F64, 0.0), group, position)))
    return failure();
  first = position * rows;
  total = rows * int64_t(group.size());
  return success();
}

static LogicalResult evaluateOp(EmbeddingOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &table = *ops[0], &ids = *ops[1];
  Tensor y = resultFor(op.getResult());
  int64_t v = table.dim(0), h = table.dim(1), first = 0, total = v;
  if (failed(vocabBlock(op, ctx, v, first, total)))
    return failure();
  for (int64_t p = 0, e = ids.numElements(); p < e; ++p) {
    FailureOr<int64_t> id = checkedId(op, ids, p, total, "id");
    if (failed(id))
      return failure();
    // Another device's row: this device adds zeros to the group's sum.
    if (*id < first || *id >= first + v)
      std::fill_n(y.data() + p * h, h, 0.0);
    else
      std::copy_n(table.data() + (*id - first) * h, h, y.data() + p * h);
  }
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(RotaryOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0];
  Tensor y = resultFor(op.getResult());
  int64_t B = x.dim(0), S = x.dim(1), A = x.dim(2), D = x.dim(3), half = D / 2;
  double base = op.getBase().convertToDouble();
  double sign = op.getInverse() ? -1.0 : 1.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t a = 0; a < A; ++a) {
        int64_t off = ((b * S + s) * A + a) * D;
        for (int64_t i = 0; i < half; ++i) {
          double angle = s * std::pow(base, -2.0 * i / D);
          double c = std::cos(angle), sn = sign * std::sin(angle);
          double x0 = x[off + i], x1 = x[off + i + half];
          y[off + i] = x0 * c - x1 * sn;
          y[off + i + half] = x1 * c + x0 * sn;
        }
      }
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(AttentionOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &q = *ops[0], &k = *ops[1], &v = *ops[2];
  Tensor y = resultFor(op.getResult());
  int64_t B = q.dim(0), S = q.dim(1), Hq = q.dim(2), D = q.dim(3);
  int64_t T = k.dim(1), Hkv = k.dim(2), group = Hq / Hkv;
  double scale = op.getEffectiveScale();
  std::vector<double> p(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kh = h / group;
      for (int64_t s = 0; s < S; ++s) {
        const double *pq = q.data() + ((b * S + s) * Hq + h) * D;
        int64_t tEnd = op.getCausal() ? s + 1 : T;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < tEnd; ++t) {
          const double *pk = k.data() + ((b * T + t) * Hkv + kh) * D;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d)
            dot += pq[d] * pk[d];
          p[t] = dot * scale;
          mx = std::max(mx, p[t]);
        }
        double sum = 0.0;
        for (int64_t t = 0; t < tEnd; ++t)
          sum += (p[t] = std::exp(p[t] - mx));
        double *py = y.data() + ((b * S + s) * Hq + h) * D;
        for (int64_t d = 0; d < D; ++d)
          py[d] = 0.0;
        for (int64_t t = 0; t < tEnd; ++t) {
          const double *pv = v.data() + ((b * T + t) * Hkv + kh) * D;
          for (int64_t d = 0; d < D; ++d)
            py[d] += p[t] / sum * pv[d];
        }
      }
    }
  results.push_back(std::move(y));
  return success();
}

/// Per row of `logits` (rows of `v` logits), the maximum and the sum of
/// exponentials over the whole vocabulary: over this device's block, then
/// combined over a vocabulary-parallel op's group (max, then sum; every
/// device combines in group order, so all get the same bits).
template <typename OpTy>
static LogicalResult softmaxStats(OpTy op, EvalContext &ctx,
                                  const Tensor &logits, int64_t rows, int64_t v,
                                  Tensor &mx, Tensor &sum) {
  mx = Tensor({rows}, DType::F64);
  for (int64_t r = 0; r < rows; ++r) {
    const double *pl = logits.data() + r * v;
    mx[r] = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < v; ++i)
      mx[r] = std::max(mx[r], pl[i]);
  }
  SmallVector<Tensor> group;
  unsigned position;
  if (failed(vocabExchange(op, ctx, mx, group, position)))
    return failure();
  for (const Tensor &t : group)
    for (int64_t r = 0; r < rows; ++r)
      mx[r] = std::max(mx[r], t[r]);
  sum = Tensor({rows}, DType::F64);
  for (int64_t r = 0; r < rows; ++r) {
    const double *pl = logits.data() + r * v;
    sum[r] = 0.0;
    for (int64_t i = 0; i < v; ++i)
      sum[r] += std::exp(pl[i] - mx[r]);
  }
  if (failed(vocabExchange(op, ctx, sum, group, position)))
    return failure();
  for (int64_t r = 0; r < rows; ++r) {
    sum[r] = 0.0;
    for (const Tensor &t : group)
      sum[r] += t[r];
  }
  return success();
}

static LogicalResult evaluateOp(CrossEntropyOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &logits = *ops[0], &labels = *ops[1];
  Tensor y = resultFor(op.getResult());
  int64_t v = logits.dim(logits.rank() - 1), rows = labels.numElements();
  int64_t first = 0, vocab = v;
  Tensor mx, sum;
  if (failed(vocabBlock(op, ctx, v, first, vocab)) ||
      failed(softmaxStats(op, ctx, logits, rows, v, mx, sum)))
    return failure();
  // The label's logit: from the device holding it, zero elsewhere, summed.
  Tensor picked({rows}, DType::F64);
  for (int64_t r = 0; r < rows; ++r) {
    FailureOr<int64_t> label = checkedId(op, labels, r, vocab, "label");
    if (failed(label))
      return failure();
    bool mine = *label >= first && *label < first + v;
    picked[r] = mine ? logits[r * v + (*label - first)] : 0.0;
  }
  SmallVector<Tensor> group;
  unsigned position;
  if (failed(vocabExchange(op, ctx, picked, group, position)))
    return failure();
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double target = 0.0;
    for (const Tensor &t : group)
      target += t[r];
    total += mx[r] + std::log(sum[r]) - target;
  }
  y[0] = rows ? total / rows : 0.0;
  results.push_back(std::move(y));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops and constants
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(ReshapeOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  std::copy_n(ops[0]->data(), y.numElements(), y.data());
  results.push_back(std::move(y));
  return success();
}

/// Calls `fn(outFlat, inFlat)` for every element of a result whose index i
/// reads the input at sum_d(idx[d] * inStride[d]) + inOffset.
template <typename Fn>
static void forEachStrided(ArrayRef<int64_t> outShape,
                           ArrayRef<int64_t> inStride, int64_t inOffset,
                           Fn fn) {
  int64_t n = numElements(outShape), rank = outShape.size();
  SmallVector<int64_t> idx(rank, 0);
  int64_t src = inOffset;
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, src);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < outShape[d]) {
        src += inStride[d];
        break;
      }
      src -= inStride[d] * (outShape[d] - 1);
      idx[d] = 0;
    }
  }
}

static LogicalResult evaluateOp(TransposeOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0];
  Tensor y = resultFor(op.getResult());
  SmallVector<int64_t> xs = x.strides(), stride;
  for (int64_t p : op.getPermutation())
    stride.push_back(xs[p]);
  forEachStrided(y.shape(), stride, 0,
                 [&](int64_t out, int64_t in) { y[out] = x[in]; });
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(ReduceOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0];
  Tensor y = resultFor(op.getResult());
  bool isMax = op.getKind() == ReduceKind::max;
  std::fill_n(y.data(), y.numElements(),
              isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  // Stride of each input dimension in the result (0 for reduced ones).
  SmallVector<bool> reduced(x.rank(), false);
  for (int64_t a : op.getAxes())
    reduced[a] = true;
  SmallVector<int64_t> outStride(x.rank(), 0);
  int64_t s = 1, count = 1;
  for (int64_t d = x.rank() - 1; d >= 0; --d) {
    if (reduced[d]) {
      count *= x.dim(d);
      continue;
    }
    outStride[d] = s;
    s *= x.dim(d);
  }
  forEachStrided(x.shape(), outStride, 0, [&](int64_t in, int64_t out) {
    y[out] = isMax ? std::max(y[out], x[in]) : y[out] + x[in];
  });
  if (op.getKind() == ReduceKind::mean)
    for (int64_t i = 0, e = y.numElements(); i < e; ++i)
      y[i] /= count;
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(BroadcastOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  std::vector<int64_t> map = broadcastIndexMap(ops[0]->shape(), y.shape());
  for (int64_t i = 0, e = y.numElements(); i < e; ++i)
    y[i] = (*ops[0])[map[i]];
  results.push_back(std::move(y));
  return success();
}

/// The element strides (`stride`) and offset, in a tensor like `x`, of the
/// slice starting at `start` with steps `steps` (1 where absent).
static int64_t sliceView(const Tensor &x, ArrayRef<int64_t> start,
                         std::optional<ArrayRef<int64_t>> steps,
                         SmallVectorImpl<int64_t> &stride) {
  SmallVector<int64_t> xs = x.strides();
  int64_t offset = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    stride.push_back(xs[d] * (steps ? (*steps)[d] : 1));
    offset += start[d] * xs[d];
  }
  return offset;
}

static LogicalResult evaluateOp(SliceOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0];
  Tensor y = resultFor(op.getResult());
  SmallVector<int64_t> stride;
  int64_t offset = sliceView(x, op.getStart(), op.getStride(), stride);
  forEachStrided(y.shape(), stride, offset,
                 [&](int64_t out, int64_t in) { y[out] = x[in]; });
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(ConcatOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  int64_t axis = op.getAxis(), outer, size, inner;
  splitAround(y.shape(), axis, outer, size, inner);
  int64_t at = 0;
  for (const Tensor *x : ops) {
    int64_t part = x->dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(x->data() + o * part, part,
                  y.data() + o * size * inner + at * inner);
    at += x->dim(axis);
  }
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(ConstantOp op, EvalContext &,
                                ArrayRef<const Tensor *>,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  auto dense = cast<DenseIntOrFPElementsAttr>(op.getValue());
  int64_t i = 0;
  if (isa<FloatType>(dense.getElementType())) {
    for (APFloat f : dense.getValues<APFloat>()) {
      bool lost;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      y[i++] = f.convertToDouble();
    }
  } else {
    for (APInt v : dense.getValues<APInt>())
      y[i++] = static_cast<double>(v.getSExtValue());
  }
  results.push_back(std::move(y));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(ReluGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results,
                    [](double x, double g) { return x > 0.0 ? g : 0.0; });
}

static LogicalResult evaluateOp(SiluGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  return evalBinary(op.getResult(), ops, results, [](double x, double g) {
    double s = 1.0 / (1.0 + std::exp(-x));
    return g * s * (1.0 + x * (1.0 - s));
  });
}

static LogicalResult evaluateOp(GeluGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  if (op.getApproximate() == GeluApproximation::tanh)
    return evalBinary(op.getResult(), ops, results, [](double x, double g) {
      const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
      double t = std::tanh(c * (x + a * x * x * x));
      return g * (0.5 * (1.0 + t) +
                  0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x));
    });
  return evalBinary(op.getResult(), ops, results, [](double x, double g) {
    double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    return g * (cdf + x * pdf);
  });
}

static LogicalResult evaluateOp(LayerNormGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0], &g = *ops[1], &dy = *ops[2];
  Tensor dx = resultFor(op.getResult());
  int64_t h = x.dim(x.rank() - 1), rows = x.numElements() / h;
  double eps = op.getEpsilon().convertToDouble();
  std::vector<double> xhat(h), dxhat(h);
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.data() + r * h, *pdy = dy.data() + r * h;
    auto [mean, inv] = normalizer(px, h, eps);
    double meanD = 0.0, meanDX = 0.0;
    for (int64_t i = 0; i < h; ++i) {
      xhat[i] = (px[i] - mean) * inv;
      dxhat[i] = pdy[i] * g[i];
      meanD += dxhat[i];
      meanDX += dxhat[i] * xhat[i];
    }
    meanD /= h;
    meanDX /= h;
    for (int64_t i = 0; i < h; ++i)
      dx[r * h + i] = inv * (dxhat[i] - meanD - xhat[i] * meanDX);
  }
  results.push_back(std::move(dx));
  return success();
}

static LogicalResult evaluateOp(RmsNormGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0], &g = *ops[1], &dy = *ops[2];
  Tensor dx = resultFor(op.getResult());
  int64_t h = x.dim(x.rank() - 1), rows = x.numElements() / h;
  double eps = op.getEpsilon().convertToDouble();
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.data() + r * h, *pdy = dy.data() + r * h;
    double ms = 0.0, dot = 0.0;
    for (int64_t i = 0; i < h; ++i) {
      ms += px[i] * px[i];
      dot += pdy[i] * g[i] * px[i];
    }
    double inv = 1.0 / std::sqrt(ms / h + eps);
    for (int64_t i = 0; i < h; ++i)
      dx[r * h + i] = inv * pdy[i] * g[i] - px[i] * inv * inv * inv * dot / h;
  }
  results.push_back(std::move(dx));
  return success();
}

static LogicalResult evaluateOp(EmbeddingGradOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &ids = *ops[0], &dy = *ops[1];
  Tensor table = resultFor(op.getResult());
  int64_t v = table.dim(0), h = table.dim(1), first = 0, total = v;
  if (failed(vocabBlock(op, ctx, v, first, total)))
    return failure();
  std::fill_n(table.data(), table.numElements(), 0.0);
  for (int64_t p = 0, e = ids.numElements(); p < e; ++p) {
    FailureOr<int64_t> id = checkedId(op, ids, p, total, "id");
    if (failed(id))
      return failure();
    if (*id < first || *id >= first + v)
      continue; // another device's row
    for (int64_t i = 0; i < h; ++i)
      table[(*id - first) * h + i] += dy[p * h + i];
  }
  results.push_back(std::move(table));
  return success();
}

static LogicalResult evaluateOp(AttentionGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &q = *ops[0], &k = *ops[1], &v = *ops[2], &dy = *ops[3];
  int64_t B = q.dim(0), S = q.dim(1), Hq = q.dim(2), D = q.dim(3);
  int64_t T = k.dim(1), Hkv = k.dim(2), group = Hq / Hkv;
  double scale = op.getScale() ? op.getScale()->convertToDouble()
                               : 1.0 / std::sqrt(double(D));
  Tensor dq(q.shape(), q.dtype()), dk(k.shape(), k.dtype()),
      dv(v.shape(), v.dtype());
  std::vector<double> p(T), dp(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kh = h / group;
      for (int64_t s = 0; s < S; ++s) {
        int64_t qOff = ((b * S + s) * Hq + h) * D;
        int64_t tEnd = op.getCausal() ? s + 1 : T;
        // Recompute the attention probabilities of query s.
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < tEnd; ++t) {
          int64_t kOff = ((b * T + t) * Hkv + kh) * D;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d)
            dot += q[qOff + d] * k[kOff + d];
          p[t] = dot * scale;
          mx = std::max(mx, p[t]);
        }
        double sum = 0.0;
        for (int64_t t = 0; t < tEnd; ++t)
          sum += (p[t] = std::exp(p[t] - mx));
        double pdp = 0.0;
        for (int64_t t = 0; t < tEnd; ++t) {
          p[t] /= sum;
          int64_t vOff = ((b * T + t) * Hkv + kh) * D;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            dot += dy[qOff + d] * v[vOff + d];
            dv[vOff + d] += p[t] * dy[qOff + d];
          }
          dp[t] = dot;
          pdp += p[t] * dot;
        }
        for (int64_t t = 0; t < tEnd; ++t) {
          double ds = p[t] * (dp[t] - pdp) * scale;
          int64_t kOff = ((b * T + t) * Hkv + kh) * D;
          for (int64_t d = 0; d < D; ++d) {
            dq[qOff + d] += ds * k[kOff + d];
            dk[kOff + d] += ds * q[qOff + d];
          }
        }
      }
    }
  Tensor *chosen[] = {&dq, &dk, &dv};
  results.push_back(std::move(*chosen[op.getOperand()]));
  return success();
}

static LogicalResult evaluateOp(CrossEntropyGradOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &logits = *ops[0], &labels = *ops[1], &g = *ops[2];
  Tensor dl = resultFor(op.getResult());
  int64_t v = logits.dim(logits.rank() - 1), rows = labels.numElements();
  double coeff = rows ? g[0] / rows : 0.0;
  int64_t first = 0, vocab = v;
  Tensor mx, sum;
  if (failed(vocabBlock(op, ctx, v, first, vocab)) ||
      failed(softmaxStats(op, ctx, logits, rows, v, mx, sum)))
    return failure();
  for (int64_t r = 0; r < rows; ++r) {
    FailureOr<int64_t> label = checkedId(op, labels, r, vocab, "label");
    if (failed(label))
      return failure();
    const double *pl = logits.data() + r * v;
    for (int64_t i = 0; i < v; ++i)
      dl[r * v + i] = coeff * (std::exp(pl[i] - mx[r]) / sum[r] -
                               (first + i == *label ? 1.0 : 0.0));
  }
  results.push_back(std::move(dl));
  return success();
}

static LogicalResult evaluateOp(ReduceMaxGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &x = *ops[0], &dy = *ops[1];
  Tensor dx = resultFor(op.getResult());
  SmallVector<bool> reduced(x.rank(), false);
  for (int64_t a : op.getAxes())
    reduced[a] = true;
  SmallVector<int64_t> outStride(x.rank(), 0);
  int64_t s = 1;
  for (int64_t d = x.rank() - 1; d >= 0; --d)
    if (!reduced[d]) {
      outStride[d] = s;
      s *= x.dim(d);
    }
  std::vector<double> mx(dy.numElements(),
                         -std::numeric_limits<double>::infinity());
  std::vector<int64_t> ties(dy.numElements(), 0);
  forEachStrided(x.shape(), outStride, 0, [&](int64_t in, int64_t out) {
    mx[out] = std::max(mx[out], x[in]);
  });
  forEachStrided(x.shape(), outStride, 0, [&](int64_t in, int64_t out) {
    ties[out] += x[in] == mx[out];
  });
  forEachStrided(x.shape(), outStride, 0, [&](int64_t in, int64_t out) {
    dx[in] = x[in] == mx[out] ? dy[out] / ties[out] : 0.0;
  });
  results.push_back(std::move(dx));
  return success();
}

static LogicalResult evaluateOp(SliceGradOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &dy = *ops[0];
  Tensor dx = resultFor(op.getResult());
  std::fill_n(dx.data(), dx.numElements(), 0.0);
  SmallVector<int64_t> stride;
  int64_t offset = sliceView(dx, op.getStart(), op.getStride(), stride);
  forEachStrided(dy.shape(), stride, offset,
                 [&](int64_t out, int64_t in) { dx[in] = dy[out]; });
  results.push_back(std::move(dx));
  return success();
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(LrScheduleOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  double t = (*ops[0])[0], lr = op.getLr().convertToDouble();
  double minLr = op.getMinLr().convertToDouble();
  int64_t warmup = op.getWarmupSteps(), total = op.getTotalSteps();
  if (t < warmup) {
    y[0] = lr * (t + 1) / warmup;
  } else {
    double p = std::min(1.0, (t - warmup) /
                                 std::max<double>(1.0, double(total - warmup)));
    switch (op.getDecay()) {
    case LrDecay::constant:
      y[0] = lr;
      break;
    case LrDecay::linear:
      y[0] = minLr + (lr - minLr) * (1.0 - p);
      break;
    case LrDecay::cosine:
      y[0] = minLr + (lr - minLr) * 0.5 * (1.0 + std::cos(M_PI * p));
      break;
    }
  }
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(GlobalNormOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  double sum = 0.0;
  for (const Tensor *t : ops)
    for (int64_t i = 0, e = t->numElements(); i < e; ++i)
      sum += (*t)[i] * (*t)[i];
  y[0] = std::sqrt(sum);
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(SumSquaresOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  double sum = 0.0;
  for (const Tensor *t : ops)
    for (int64_t i = 0, e = t->numElements(); i < e; ++i)
      sum += (*t)[i] * (*t)[i];
  y[0] = sum;
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(ClipCoefficientOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  Tensor y = resultFor(op.getResult());
  y[0] =
      std::min(1.0, op.getMaxNorm().convertToDouble() / ((*ops[0])[0] + 1e-6));
  results.push_back(std::move(y));
  return success();
}

static LogicalResult evaluateOp(SelectOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  // NaN is not zero, as in C.
  results.push_back((*ops[0])[0] != 0.0 ? *ops[1] : *ops[2]);
  return success();
}

static LogicalResult evaluateOp(AdamWUpdateOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &p = *ops[0], &g = *ops[1], &m = *ops[2], &v = *ops[3];
  double lr = (*ops[4])[0], t = (*ops[5])[0] + 1, scale = (*ops[6])[0];
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEpsilon().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  double c1 = 1.0 - std::pow(b1, t), c2 = 1.0 - std::pow(b2, t);
  Tensor np = resultFor(op.getNewParam()), nm = resultFor(op.getNewM()),
         nv = resultFor(op.getNewV());
  if (!std::isfinite(scale)) { // a skipped step: everything stays
    for (int64_t i = 0, e = p.numElements(); i < e; ++i) {
      np[i] = p[i];
      nm[i] = m[i];
      nv[i] = v[i];
    }
    results.push_back(std::move(np));
    results.push_back(std::move(nm));
    results.push_back(std::move(nv));
    return success();
  }
  for (int64_t i = 0, e = p.numElements(); i < e; ++i) {
    double gi = g[i] * scale;
    nm[i] = b1 * m[i] + (1.0 - b1) * gi;
    nv[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
    double decayed = p[i] * (1.0 - lr * wd);
    np[i] = decayed - lr * (nm[i] / c1) / (std::sqrt(nv[i] / c2) + eps);
  }
  results.push_back(std::move(np));
  results.push_back(std::move(nm));
  results.push_back(std::move(nv));
  return success();
}

static LogicalResult evaluateOp(SgdUpdateOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  const Tensor &p = *ops[0], &g = *ops[1], &buf = *ops[2];
  double lr = (*ops[3])[0], scale = (*ops[4])[0];
  double mu = op.getMomentum().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor np = resultFor(op.getNewParam()),
         nb = resultFor(op.getNewMomentumBuffer());
  bool skip = !std::isfinite(scale); // a skipped step: everything stays
  for (int64_t i = 0, e = p.numElements(); i < e; ++i) {
    if (skip) {
      np[i] = p[i];
      nb[i] = buf[i];
      continue;
    }
    double gi = g[i] * scale + wd * p[i];
    nb[i] = mu * buf[i] + gi;
    double step = op.getNesterov() ? gi + mu * nb[i] : nb[i];
    np[i] = p[i] - lr * step;
  }
  results.push_back(std::move(np));
  results.push_back(std::move(nb));
  return success();
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

static LogicalResult evaluateOp(ShardOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  results.push_back(*ops[0]);
  return success();
}

/// Exchanges `mine` over the group of collective `op`.
template <typename OpTy>
static LogicalResult exchangeFor(OpTy op, EvalContext &ctx, const Tensor &mine,
                                 SmallVectorImpl<Tensor> &group,
                                 unsigned &position) {
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr());
  SmallVector<StringRef> axes;
  for (Attribute a : op.getAxes())
    axes.push_back(cast<StringAttr>(a).getValue());
  return ctx.exchange(op, mesh, axes, mine, group, position);
}

/// The sum (or max) of `group`, in group order.
static Tensor combine(ArrayRef<Tensor> group, bool max) {
  Tensor out = group[0];
  for (const Tensor &t : group.drop_front())
    for (int64_t i = 0, e = out.numElements(); i < e; ++i)
      out[i] = max ? std::max(out[i], t[i]) : out[i] + t[i];
  return out;
}

/// Splits `t` along `dim` into `n` equal blocks and returns block `k`.
static Tensor block(const Tensor &t, int64_t dim, int64_t n, int64_t k) {
  SmallVector<int64_t> shape(t.shape());
  shape[dim] /= n;
  Tensor out(shape, t.dtype());
  int64_t outer, size, inner;
  splitAround(t.shape(), dim, outer, size, inner);
  int64_t part = shape[dim] * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(t.data() + o * size * inner + k * part, part,
                out.data() + o * part);
  return out;
}

/// Concatenates `parts` along `dim`.
static Tensor concatenate(ArrayRef<Tensor> parts, int64_t dim) {
  SmallVector<int64_t> shape(parts[0].shape());
  shape[dim] *= parts.size();
  Tensor out(shape, parts[0].dtype());
  int64_t outer, size, inner;
  splitAround(out.shape(), dim, outer, size, inner);
  int64_t part = parts[0].dim(dim) * inner;
  for (auto [k, p] : llvm::enumerate(parts))
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(p.data() + o * part, part,
                  out.data() + o * size * inner + k * part);
  return out;
}

// Each collective's semantics, shared by its synchronous and start forms
// (a start form exchanges at once; its future holds the result).

/// Exchanges the operand with the op's group and appends what `fromGroup`
/// makes of every member's tensor (in group order) and this device's
/// position.
template <typename OpTy, typename Fn>
static LogicalResult
evalCollective(OpTy op, EvalContext &ctx, ArrayRef<const Tensor *> ops,
               SmallVectorImpl<Tensor> &results, Fn fromGroup) {
  SmallVector<Tensor> group;
  unsigned position;
  if (failed(exchangeFor(op, ctx, *ops[0], group, position)))
    return failure();
  results.push_back(fromGroup(ArrayRef<Tensor>(group), position));
  return success();
}

template <typename OpTy>
static LogicalResult evalAllReduce(OpTy op, EvalContext &ctx,
                                   ArrayRef<const Tensor *> ops,
                                   SmallVectorImpl<Tensor> &results) {
  return evalCollective(
      op, ctx, ops, results, [&](ArrayRef<Tensor> group, unsigned) {
        return combine(group, op.getKind() == ReduceKind::max);
      });
}

template <typename OpTy>
static LogicalResult evalAllGather(OpTy op, EvalContext &ctx,
                                   ArrayRef<const Tensor *> ops,
                                   SmallVectorImpl<Tensor> &results) {
  return evalCollective(op, ctx, ops, results,
                        [&](ArrayRef<Tensor> group, unsigned) {
                          return concatenate(group, op.getDim());
                        });
}

template <typename OpTy>
static LogicalResult evalReduceScatter(OpTy op, EvalContext &ctx,
                                       ArrayRef<const Tensor *> ops,
                                       SmallVectorImpl<Tensor> &results) {
  return evalCollective(op, ctx, ops, results,
                        [&](ArrayRef<Tensor> group, unsigned position) {
                          return block(combine(group, false), op.getDim(),
                                       group.size(), position);
                        });
}

template <typename OpTy>
static LogicalResult evalAllToAll(OpTy op, EvalContext &ctx,
                                  ArrayRef<const Tensor *> ops,
                                  SmallVectorImpl<Tensor> &results) {
  return evalCollective(op, ctx, ops, results,
                        [&](ArrayRef<Tensor> group, unsigned position) {
                          SmallVector<Tensor> received;
                          for (const Tensor &t : group)
                            received.push_back(block(t, op.getSplitDim(),
                                                     group.size(), position));
                          return concatenate(received, op.getConcatDim());
                        });
}

template <typename OpTy>
static LogicalResult evalBroadcastFrom(OpTy op, EvalContext &ctx,
                                       ArrayRef<const Tensor *> ops,
                                       SmallVectorImpl<Tensor> &results) {
  return evalCollective(
      op, ctx, ops, results,
      [&](ArrayRef<Tensor> group, unsigned) { return group[op.getRoot()]; });
}

#define BRAID_EVAL_COLLECTIVE(Op, fn)                                          \
  static LogicalResult evaluateOp(Op op, EvalContext &ctx,                     \
                                  ArrayRef<const Tensor *> ops,                \
                                  SmallVectorImpl<Tensor> &results) {          \
    return fn(op, ctx, ops, results);                                          \
  }
BRAID_EVAL_COLLECTIVE(AllReduceOp, evalAllReduce)
BRAID_EVAL_COLLECTIVE(AllReduceStartOp, evalAllReduce)
BRAID_EVAL_COLLECTIVE(AllGatherOp, evalAllGather)
BRAID_EVAL_COLLECTIVE(AllGatherStartOp, evalAllGather)
BRAID_EVAL_COLLECTIVE(ReduceScatterOp, evalReduceScatter)
BRAID_EVAL_COLLECTIVE(ReduceScatterStartOp, evalReduceScatter)
BRAID_EVAL_COLLECTIVE(AllToAllOp, evalAllToAll)
BRAID_EVAL_COLLECTIVE(AllToAllStartOp, evalAllToAll)
BRAID_EVAL_COLLECTIVE(BroadcastFromOp, evalBroadcastFrom)
BRAID_EVAL_COLLECTIVE(BroadcastFromStartOp, evalBroadcastFrom)
#undef BRAID_EVAL_COLLECTIVE

static LogicalResult evaluateOp(WaitOp op, EvalContext &,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  results.push_back(*ops[0]);
  return success();
}

static LogicalResult evaluateOp(AllSliceOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  // Only the position is needed; the exchange also keeps devices in step.
  SmallVector<Tensor> group;
  unsigned position;
  if (failed(exchangeFor(op, ctx, *ops[0], group, position)))
    return failure();
  results.push_back(block(*ops[0], op.getDim(), group.size(), position));
  return success();
}

/// The body op by op, each result rounded as the evaluator rounds an op's
/// (to its element type: f32, or bf16 for a conversion to bf16 storage; not
/// at all under --f64, which the operands' dtype tells), so a fused module
/// evaluates as before.
static LogicalResult evaluateOp(FusedOp op, EvalContext &ctx,
                                ArrayRef<const Tensor *> ops,
                                SmallVectorImpl<Tensor> &results) {
  bool f64 = llvm::any_of(
      ops, [](const Tensor *t) { return t->dtype() == DType::F64; });
  Block &body = op.getBody().front();
  DenseMap<Value, Tensor> values;
  for (auto [arg, t] : llvm::zip_equal(body.getArguments(), ops))
    values[arg] = *t;
  for (Operation &inner : body.without_terminator()) {
    auto evaluable = dyn_cast<EvalOpInterface>(inner);
    if (!evaluable)
      return inner.emitOpError("has no reference semantics (EvalOpInterface)");
    SmallVector<const Tensor *> operands;
    for (Value v : inner.getOperands())
      operands.push_back(&values[v]);
    SmallVector<Tensor> outs;
    if (failed(evaluable.evaluate(ctx, operands, outs)))
      return failure();
    Tensor &t = outs.front();
    t.setDType(
        f64 ? DType::F64
            : getDType(getElementTypeOrSelf(inner.getResult(0).getType()))
                  .value_or(DType::F32));
    t.roundToDType();
    values[inner.getResult(0)] = std::move(t);
  }
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(values[v]);
  return success();
}

//===----------------------------------------------------------------------===//
// External models
//===----------------------------------------------------------------------===//

#include "braid/Eval/EvalOpInterface.cpp.inc"

namespace {
/// EvalOpInterface for `OpTy`, through its evaluateOp above.
template <typename OpTy>
struct EvalOpModel
    : public EvalOpInterface::ExternalModel<EvalOpModel<OpTy>, OpTy> {
  LogicalResult evaluate(Operation *op, EvalContext &ctx,
                         ArrayRef<const Tensor *> operands,
                         SmallVectorImpl<Tensor> &results) const {
    return evaluateOp(cast<OpTy>(op), ctx, operands, results);
  }
};

template <typename... OpTys> void attachEvalModels(MLIRContext *ctx) {
  (OpTys::template attachInterface<EvalOpModel<OpTys>>(*ctx), ...);
}
} // namespace

void mlir::braid::registerEvalInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, BraidDialect *) {
    attachEvalModels<
        ParamOp, StoreParamOp, PipelineOp, RepeatOp, MatmulOp, MatmulBiasOp,
        AddOp, SubOp, MulOp, DivOp, NegOp, ConvertOp, RoundOp, ExpOp, SqrtOp,
        RsqrtOp, ReluOp, SiluOp, GeluOp, SoftmaxOp, LayerNormOp, RmsNormOp,
        EmbeddingOp, RotaryOp, AttentionOp, CrossEntropyOp, ReshapeOp,
        TransposeOp, ReduceOp, BroadcastOp, SliceOp, ConcatOp, ConstantOp,
        ReluGradOp, SiluGradOp, GeluGradOp, LayerNormGradOp, RmsNormGradOp,
        EmbeddingGradOp, AttentionGradOp, CrossEntropyGradOp, ReduceMaxGradOp,
        SliceGradOp, LrScheduleOp, GlobalNormOp, SumSquaresOp,
        ClipCoefficientOp, SelectOp, AdamWUpdateOp, SgdUpdateOp, ShardOp,
        AllReduceOp, AllReduceStartOp, AllGatherOp, AllGatherStartOp,
        ReduceScatterOp, ReduceScatterStartOp, AllToAllOp, AllToAllStartOp,
        BroadcastFromOp, BroadcastFromStartOp, WaitOp, AllSliceOp, FusedOp>(
        ctx);
  });
}

bool mlir::braid::hasEvalInterfaceExternalModels(MLIRContext *ctx) {
  std::optional<RegisteredOperationName> param =
      RegisteredOperationName::lookup(ParamOp::getOperationName(), ctx);
  return param && param->hasInterface<EvalOpInterface>();
}
