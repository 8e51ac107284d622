//===- FusedOps.cpp - braid.fused as one loop nest ------------------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h. Each braid.fused region
// becomes a function of the program text (emitc.verbatim before the
// function using it) called with the operands' and results' buffers:
//
//  - cpu: a loop over the rows of the iteration shape (all dimensions but
//    the last), split over the kernels' threads by braid_rt_parallel_for
//    (braid/rt/parallel.h: the same OpenMP policy as the elementwise
//    kernels), and a plain inner loop over the last dimension that the C++
//    compiler vectorizes. Each op is one statement calling the per-element
//    function its kernel calls (braid/rt/elementwise_math.h), so the bits
//    are the kernels'.
//  - cuda: one __global__ kernel, a grid-stride loop over every element,
//    launched on the program's stream; each op calls the function of the
//    CUDA kernels' math (kernel_math.h), and the arithmetic ops use the
//    _rn intrinsics so that nvcc cannot contract them across ops into
//    FMAs the unfused kernels do not do. Compiled here, not yet run on a
//    GPU (docs/cuda.md).
//
// Operands broadcast: each keeps its own offset of the current row and a
// stride of 0 or 1 along the last dimension. Values are floats but for
// bf16 storage under bf16-mixed (an operand a conversion unpacks, a
// conversion's packed result): its 16 bits, uint16_t, which only the
// conversions' expressions read and write. Each op's expression is its
// own (FusibleElementwiseOpInterface::getElementExpression).
//
// A region with row-wise ops (norms, softmax, cross-entropy) is computed a
// row at a time instead: the elementwise ops before a row-wise op in a loop
// over the row, their values that later stages read kept in row buffers
// (the region's result rows, or per-thread scratch rows, still in cache),
// then the row-wise op's statistics and result row exactly as its kernel
// computes them (runtime/src/cpu/kernels/rowwise.c: the same formulas in
// double, summed in the same order), then the elementwise ops after it.
// The loss of cross-entropy is kept per row and summed in row order after
// the loop; a loss and its gradient over the same logits share the row's
// maximum, sum and exponentials. On CUDA: one block per row, the row loops
// strided over the block's threads, sums and maxima through warp shuffles.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

/// The C type of a value's elements in the loops: float, the 16 bits of
/// bf16 storage (read and written by conversions only), a label's integer.
static std::string cType(Type type) {
  Type t = getElementTypeOrSelf(type);
  return t.isF32()         ? "float"
         : t.isBF16()      ? "uint16_t"
         : t.isInteger(64) ? "int64_t"
                           : "int32_t";
}

namespace {

/// The C++ of one fused region: names of the operands (`in<i>`), results
/// (`out<i>`) and values (`v<i>`).
class FusedEmitter {
public:
  FusedEmitter(FusedOp op, bool cuda) : op(op), cuda(cuda) {
    shape.assign(op.getIterationShape().begin(), op.getIterationShape().end());
    cols = shape.empty() ? 1 : shape.back();
    rows = 1;
    for (int64_t d : ArrayRef<int64_t>(shape).drop_back(shape.empty() ? 0 : 1))
      rows *= d;
  }

  /// The definition of function `name` taking (inputs..., outputs...), or a
  /// failure on an op it cannot emit.
  FailureOr<std::string> emit(StringRef name);

private:
  /// emit() for a region with row-wise ops.
  FailureOr<std::string> emitRows(StringRef name);
  /// The statements computing one row (`r`) of a region with row-wise ops.
  FailureOr<std::string> rowBody();
  /// The C type of operand `i`'s elements.
  std::string elementType(unsigned i) { return cType(typeOf(i)); }
  /// The C type of result `k`'s elements.
  std::string resultType(unsigned k) {
    return cType(op.getResult(k).getType());
  }
  /// The loop over the row's columns (cuda: strided over the block).
  std::string rowLoop() const {
    return cuda ? "for (int64_t j = threadIdx.x; j < " + std::to_string(cols) +
                      "; j += blockDim.x)"
                : "for (int64_t j = 0; j < " + std::to_string(cols) + "; ++j)";
  }

  /// For operand `i`: the C expression of its offset at row `r`.
  std::string rowOffset(unsigned i);
  /// Whether operand `i` varies along the last dimension.
  bool variesInRow(unsigned i) {
    ArrayRef<int64_t> s = typeOf(i).getShape();
    return !s.empty() && s.back() != 1;
  }
  RankedTensorType typeOf(unsigned i) {
    return cast<RankedTensorType>(op.getInputs()[i].getType());
  }
  /// The C++ expression of `inner`'s value from its operands' names.
  FailureOr<std::string> expression(Operation &inner,
                                    ArrayRef<std::string> args);
  /// The per-element statements: loads of the operands (through their row
  /// pointers p<i>), one per op, stores (to q<i>[j] on the CPU, out<i>[i]
  /// on CUDA).
  FailureOr<std::string> body();

  FusedOp op;
  bool cuda;
  SmallVector<int64_t> shape;
  int64_t rows, cols;
  /// Row regions: scratch rows per row, and the results holding a loss.
  int64_t numScratch = 0;
  SmallVector<unsigned> lossResults;
};

} // namespace

/// `v` as a C++ double literal that reads back exactly.
static std::string doubleLiteral(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string FusedEmitter::rowOffset(unsigned i) {
  ArrayRef<int64_t> in = typeOf(i).getShape();
  int64_t rank = shape.size(), inRank = in.size();
  if (in == ArrayRef<int64_t>(shape))
    return "r * " + std::to_string(cols);
  // Dimension d of the input right-aligned in the iteration shape.
  auto dimAt = [&](int64_t d) -> int64_t {
    int64_t k = d - (rank - inRank);
    return k < 0 ? 1 : in[k];
  };
  std::string expr;
  int64_t stride = dimAt(rank - 1), divisor = 1;
  for (int64_t d = rank - 2; d >= 0; --d) {
    if (dimAt(d) != 1) {
      if (!expr.empty())
        expr += " + ";
      expr += "(r / " + std::to_string(divisor) + " % " +
              std::to_string(shape[d]) + ") * " + std::to_string(stride);
    }
    stride *= dimAt(d);
    divisor *= shape[d];
  }
  return expr.empty() ? "0" : "(" + expr + ")";
}

FailureOr<std::string> FusedEmitter::expression(Operation &inner,
                                                ArrayRef<std::string> args) {
  // The op's own expression for the target (FusibleElementwiseOpInterface),
  // its operands' names in place of $0, $1, ...
  StringRef pattern;
  if (auto fusible = dyn_cast<FusibleElementwiseOpInterface>(inner))
    pattern = fusible.getElementExpression(cuda ? "cuda" : "cpu");
  if (pattern.empty())
    return inner.emitOpError("has no fused lowering");
  std::string expr;
  for (StringRef rest = pattern; !rest.empty();) {
    size_t dollar = rest.find('$');
    expr += rest.take_front(dollar);
    if (dollar == StringRef::npos)
      break;
    rest = rest.drop_front(dollar + 1);
    size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
    unsigned index;
    if (digits == 0 || rest.take_front(digits).getAsInteger(10, index) ||
        index >= args.size())
      return inner.emitOpError()
             << "has a fused expression naming no operand: " << pattern;
    expr += args[index];
    rest = rest.drop_front(digits);
  }
  return expr;
}

FailureOr<std::string> FusedEmitter::body() {
  std::string text;
  llvm::raw_string_ostream os(text);
  Block &block = op.getBody().front();
  // Inside the kernel's loop (cuda) or the row and column loops (cpu).
  StringRef indent = cuda ? "    " : "      ";
  DenseMap<Value, std::string> names;
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    names[arg] = "a" + std::to_string(i);
    os << indent << "const " << elementType(i) << " a" << i << " = p" << i
       << "[" << (variesInRow(i) ? "j" : "0") << "];\n";
  }
  unsigned next = 0;
  for (Operation &inner : block.without_terminator()) {
    SmallVector<std::string> args;
    for (Value v : inner.getOperands())
      args.push_back(names.lookup(v));
    FailureOr<std::string> expr = expression(inner, args);
    if (failed(expr))
      return failure();
    std::string name = "v" + std::to_string(next++);
    names[inner.getResult(0)] = name;
    os << indent << "const " << cType(inner.getResult(0).getType()) << " "
       << name << " = " << *expr << ";\n";
  }
  for (auto [i, v] : llvm::enumerate(block.getTerminator()->getOperands()))
    os << indent << (cuda ? "out" : "q") << i << (cuda ? "[i]" : "[j]") << " = "
       << names.lookup(v) << ";\n";
  return text;
}

FailureOr<std::string> FusedEmitter::emit(StringRef name) {
  if (llvm::any_of(op.getBody().front().without_terminator(),
                   [](Operation &o) { return FusedOp::isRowwise(&o); }))
    return emitRows(name);
  unsigned numIn = op.getInputs().size(), numOut = op.getNumResults();
  std::string params;
  for (unsigned i = 0; i < numIn; ++i)
    params += "const " + elementType(i) + " *in" + std::to_string(i) + ", ";
  for (unsigned i = 0; i < numOut; ++i)
    params += resultType(i) + " *out" + std::to_string(i) +
              (i + 1 < numOut ? ", " : "");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// " << describe(op) << ": "
     << op.getBody().front().getOperations().size() - 1 << " ops over [";
  llvm::interleave(shape, os, "x");
  os << "] in one loop nest\n";
  if (cuda) {
    std::string args;
    for (unsigned i = 0; i < numIn; ++i)
      args += "in" + std::to_string(i) + ", ";
    for (unsigned i = 0; i < numOut; ++i)
      args += "out" + std::to_string(i) + (i + 1 < numOut ? ", " : "");
    os << "__global__ static void " << name << "_kernel(" << params << ") {\n";
    os << "  const int64_t n = " << rows * cols << ";\n";
    os << "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
          "i < n;\n       i += (int64_t)gridDim.x * blockDim.x) {\n";
    os << "    const int64_t r = i / " << cols << ", j = i % " << cols << ";\n";
    for (unsigned i = 0; i < numIn; ++i)
      os << "    const " << elementType(i) << " *p" << i << " = in" << i
         << " + " << rowOffset(i) << ";\n";
    FailureOr<std::string> loop = body();
    if (failed(loop))
      return failure();
    os << *loop;
    os << "  }\n}\n";
    os << "static void " << name << "(" << params << ") {\n";
    os << "  const int64_t n = " << rows * cols << ";\n";
    os << "  const int64_t threads = 256;\n";
    os << "  int64_t blocks = (n + threads - 1) / threads;\n";
    os << "  if (blocks > 65535)\n    blocks = 65535;\n";
    os << "  if (n == 0)\n    return;\n";
    os << "  " << name << "_kernel<<<(unsigned)blocks, (unsigned)threads, 0, "
       << "braid_rt_cuda_stream(braid_rt_program_stream())>>>(" << args
       << ");\n";
    os << "}\n";
    return text;
  }
  os << "struct " << name << "_args {\n";
  for (unsigned i = 0; i < numIn; ++i)
    os << "  const " << elementType(i) << " *in" << i << ";\n";
  for (unsigned i = 0; i < numOut; ++i)
    os << "  " << resultType(i) << " *out" << i << ";\n";
  os << "};\n";
  os << "static void " << name
     << "_rows(void *ctx, int64_t begin, int64_t end) {\n";
  os << "  const " << name << "_args &c = *static_cast<const " << name
     << "_args *>(ctx);\n";
  os << "  for (int64_t r = begin; r < end; ++r) {\n";
  for (unsigned i = 0; i < numIn; ++i)
    os << "    const " << elementType(i) << " *__restrict p" << i << " = c.in"
       << i << " + " << rowOffset(i) << ";\n";
  for (unsigned i = 0; i < numOut; ++i)
    os << "    " << resultType(i) << " *__restrict q" << i << " = c.out" << i
       << " + r * " << cols << ";\n";
  os << "    for (int64_t j = 0; j < " << cols << "; ++j) {\n";
  FailureOr<std::string> loop = body();
  if (failed(loop))
    return failure();
  os << *loop;
  os << "    }\n  }\n}\n";
  os << "static void " << name << "(" << params << ") {\n";
  os << "  " << name << "_args c = {";
  for (unsigned i = 0; i < numIn; ++i)
    os << "in" << i << (i + 1 < numIn + numOut ? ", " : "");
  for (unsigned i = 0; i < numOut; ++i)
    os << "out" << i << (i + 1 < numOut ? ", " : "");
  os << "};\n";
  // The elementwise kernels' threshold counts the elements of the result.
  os << "  braid_rt_parallel_for(" << rows << ", " << rows * cols << ", "
     << name << "_rows, &c);\n";
  os << "}\n";
  return text;
}

FailureOr<std::string> FusedEmitter::rowBody() {
  std::string text;
  llvm::raw_string_ostream os(text);
  Block &block = op.getBody().front();
  Operation *yield = block.getTerminator();
  std::string C = std::to_string(cols), R = std::to_string(rows);
  StringRef in = "    ";
  auto isRow = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape() ==
           ArrayRef<int64_t>(shape);
  };
  // The stage of each op: the number of row-wise ops before it.
  DenseMap<Operation *, unsigned> stage;
  unsigned numRowwise = 0;
  for (Operation &inner : block.without_terminator()) {
    stage[&inner] = numRowwise;
    if (FusedOp::isRowwise(&inner))
      ++numRowwise;
  }
  // Where each row value lives beyond its stage: the first result row
  // yielding it (q<k>), else a scratch row (t<n>).
  DenseMap<Value, std::string> rowBuffer;
  SmallVector<std::pair<std::string, std::string>> copies;
  for (auto [k, v] : llvm::enumerate(yield->getOperands())) {
    if (!isRow(v))
      continue;
    std::string q = "q" + std::to_string(k);
    if (!rowBuffer.count(v))
      rowBuffer[v] = q;
    else
      copies.push_back({q, rowBuffer[v]});
  }
  auto scratchRow = [&]() { return "t" + std::to_string(numScratch++); };
  for (Operation &inner : block.without_terminator()) {
    Value v = inner.getResult(0);
    if (rowBuffer.count(v) || !isRow(v))
      continue;
    bool later = FusedOp::isRowwise(&inner) ||
                 llvm::any_of(v.getUsers(), [&](Operation *user) {
                   return FusedOp::isRowwise(user) ||
                          stage.lookup(user) != stage.lookup(&inner);
                 });
    if (later)
      rowBuffer[v] = scratchRow();
  }
  // Logits whose exponentials a gradient reuses keep them in a row.
  DenseMap<Value, std::string> expRow;
  for (Operation &inner : block.without_terminator())
    if (auto grad = dyn_cast<CrossEntropyGradOp>(inner))
      if (!expRow.count(grad.getLogits()))
        expRow[grad.getLogits()] = scratchRow();

  // A row operand as a pointer to its row; an operand of the region read
  // whole (scale, bias: offset 0; a rank-0 gradient) likewise.
  auto pointer = [&](Value v) -> std::string {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return "p" + std::to_string(arg.getArgNumber());
    return rowBuffer.lookup(v);
  };
  auto label = [&](Value v) {
    unsigned i = cast<BlockArgument>(v).getArgNumber();
    return (cuda ? "in" : "c.in") + std::to_string(i) + "[r]";
  };
  // Reductions: a thread's share on CUDA, then the block's.
  auto sum = [&](StringRef var, StringRef term) {
    os << in << "double " << var << " = 0.0;\n"
       << in << rowLoop() << "\n"
       << in << "  " << var << " += " << term << ";\n";
    if (cuda)
      os << in << var << " = braid_fused_block_sum(" << var << ");\n";
  };
  auto sync = [&]() {
    if (cuda)
      os << in << "__syncthreads();\n";
  };
  auto once = [&]() {
    return cuda ? "if (threadIdx.x == 0)\n" + in.str() + "  " : std::string();
  };

  DenseMap<Value, unsigned> stats; // logits -> index of mx<s>, lse<s>
  SmallVector<Operation *> pending;
  unsigned next = 0;
  // The elementwise ops of a stage, in one loop over the row.
  auto flush = [&]() -> LogicalResult {
    if (pending.empty())
      return success();
    os << in << rowLoop() << " {\n";
    DenseMap<Value, std::string> names;
    auto read = [&](Value v) -> std::string {
      if (auto it = names.find(v); it != names.end())
        return it->second;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        unsigned i = arg.getArgNumber();
        return "p" + std::to_string(i) + (variesInRow(i) ? "[j]" : "[0]");
      }
      std::string buf = rowBuffer.lookup(v), type = cType(v.getType());
      // Scratch rows are float: a bf16 value's bits kept there (exactly,
      // being below 2^24) are read back as its own type.
      if (StringRef(buf).starts_with("t") && type != "float")
        return "(" + type + ")" + buf + "[j]";
      return buf + "[j]";
    };
    for (Operation *inner : pending) {
      SmallVector<std::string> args;
      for (Value v : inner->getOperands())
        args.push_back(read(v));
      FailureOr<std::string> expr = expression(*inner, args);
      if (failed(expr))
        return failure();
      std::string name = "v" + std::to_string(next++);
      names[inner->getResult(0)] = name;
      os << in << "  const " << cType(inner->getResult(0).getType()) << " "
         << name << " = " << *expr << ";\n";
      if (std::string buf = rowBuffer.lookup(inner->getResult(0)); !buf.empty())
        os << in << "  " << buf << "[j] = " << name << ";\n";
    }
    os << in << "}\n";
    sync();
    pending.clear();
    return success();
  };
  // The maximum, sum of exponentials and logsumexp of logits `x`, once.
  auto logSumExp = [&](Value logits) -> unsigned {
    if (auto it = stats.find(logits); it != stats.end())
      return it->second;
    unsigned s = stats.size();
    stats[logits] = s;
    std::string X = pointer(logits), mx = "mx" + std::to_string(s),
                e = expRow.lookup(logits);
    os << in << "float " << mx << " = -INFINITY;\n"
       << in << rowLoop() << "\n"
       << in << "  " << mx << " = " << X << "[j] > " << mx << " ? " << X
       << "[j] : " << mx << ";\n";
    if (cuda)
      os << in << mx << " = braid_fused_block_max(" << mx << ");\n";
    os << in << "double sum" << s << " = 0.0;\n"
       << in << rowLoop() << " {\n"
       << in << "  const float e = expf(" << X << "[j] - " << mx << ");\n";
    if (!e.empty())
      os << in << "  " << e << "[j] = e;\n";
    os << in << "  sum" << s << " += e;\n" << in << "}\n";
    if (cuda)
      os << in << "sum" << s << " = braid_fused_block_sum(sum" << s << ");\n";
    os << in << "const double lse" << s << " = " << mx << " + log(sum" << s
       << ");\n";
    if (!e.empty())
      sync();
    return s;
  };

  for (Operation &inner : block.without_terminator()) {
    if (!FusedOp::isRowwise(&inner)) {
      pending.push_back(&inner);
      continue;
    }
    if (failed(flush()))
      return failure();
    Value result = inner.getResult(0);
    std::string Y = rowBuffer.lookup(result);
    // The logits' statistics outlive the op: its gradient may share them.
    unsigned s = 0;
    if (auto ce = dyn_cast<CrossEntropyOp>(inner))
      s = logSumExp(ce.getLogits());
    if (auto grad = dyn_cast<CrossEntropyGradOp>(inner))
      s = logSumExp(grad.getLogits());
    os << in << "{ // " << inner.getName() << "\n";
    if (auto ln = dyn_cast<LayerNormOp>(inner)) {
      std::string X = pointer(ln.getInput()), S = pointer(ln.getScale()),
                  B = pointer(ln.getBias());
      sum("mean", X + "[j]");
      os << in << "mean /= " << C << ";\n";
      sum("var", "(" + X + "[j] - mean) * (" + X + "[j] - mean)");
      os << in << "const double inv = 1.0 / sqrt(var / " << C << " + "
         << doubleLiteral(ln.getEpsilon().convertToDouble()) << ");\n"
         << in << rowLoop() << "\n"
         << in << "  " << Y << "[j] = (float)((" << X << "[j] - mean) * inv * "
         << S << "[j] + " << B << "[j]);\n";
    } else if (auto rms = dyn_cast<RmsNormOp>(inner)) {
      std::string X = pointer(rms.getInput()), S = pointer(rms.getScale());
      sum("ms", "(double)" + X + "[j] * " + X + "[j]");
      os << in << "const double inv = 1.0 / sqrt(ms / " << C << " + "
         << doubleLiteral(rms.getEpsilon().convertToDouble()) << ");\n"
         << in << rowLoop() << "\n"
         << in << "  " << Y << "[j] = (float)(" << X << "[j] * inv * " << S
         << "[j]);\n";
    } else if (auto grad = dyn_cast<LayerNormGradOp>(inner)) {
      std::string X = pointer(grad.getInput()), S = pointer(grad.getScale()),
                  D = pointer(grad.getGrad());
      sum("mean", X + "[j]");
      os << in << "mean /= " << C << ";\n";
      sum("var", "(" + X + "[j] - mean) * (" + X + "[j] - mean)");
      os << in << "const double inv = 1.0 / sqrt(var / " << C << " + "
         << doubleLiteral(grad.getEpsilon().convertToDouble()) << ");\n";
      std::string xhat = "((" + X + "[j] - mean) * inv)",
                  dxhat = "((double)" + D + "[j] * " + S + "[j])";
      sum("mean_d", dxhat);
      sum("mean_dx", dxhat + " * " + xhat);
      os << in << "mean_d /= " << C << ";\n"
         << in << "mean_dx /= " << C << ";\n"
         << in << rowLoop() << " {\n"
         << in << "  const double xhat = " << xhat << ", dxhat = " << dxhat
         << ";\n"
         << in << "  " << Y
         << "[j] = (float)(inv * (dxhat - mean_d - xhat * mean_dx));\n"
         << in << "}\n";
    } else if (auto grad = dyn_cast<RmsNormGradOp>(inner)) {
      std::string X = pointer(grad.getInput()), S = pointer(grad.getScale()),
                  D = pointer(grad.getGrad());
      sum("ms", "(double)" + X + "[j] * " + X + "[j]");
      sum("dot", "(double)" + D + "[j] * " + S + "[j] * " + X + "[j]");
      os << in << "const double inv = 1.0 / sqrt(ms / " << C << " + "
         << doubleLiteral(grad.getEpsilon().convertToDouble()) << ");\n"
         << in << "const double cf = inv * inv * inv * dot / " << C << ";\n"
         << in << rowLoop() << "\n"
         << in << "  " << Y << "[j] = (float)(inv * " << D << "[j] * " << S
         << "[j] - " << X << "[j] * cf);\n";
    } else if (auto softmax = dyn_cast<SoftmaxOp>(inner)) {
      std::string X = pointer(softmax.getInput());
      os << in << "float mx = -INFINITY;\n"
         << in << rowLoop() << "\n"
         << in << "  mx = " << X << "[j] > mx ? " << X << "[j] : mx;\n";
      if (cuda)
        os << in << "mx = braid_fused_block_max(mx);\n";
      os << in << "double sum = 0.0;\n"
         << in << rowLoop() << " {\n"
         << in << "  const float e = expf(" << X << "[j] - mx);\n"
         << in << "  " << Y << "[j] = e;\n"
         << in << "  sum += e;\n"
         << in << "}\n";
      if (cuda)
        os << in << "sum = braid_fused_block_sum(sum);\n";
      os << in << "const float inv = (float)(1.0 / sum);\n"
         << in << rowLoop() << "\n"
         << in << "  " << Y << "[j] *= inv;\n";
    } else if (auto ce = dyn_cast<CrossEntropyOp>(inner)) {
      unsigned res = llvm::find(yield->getOperands(), result) -
                     yield->getOperands().begin();
      os << in << once() << (cuda ? "loss" : "c.loss") << res << "[r] = lse"
         << s << " - " << pointer(ce.getLogits()) << "["
         << label(ce.getLabels()) << "];\n";
    } else if (auto grad = dyn_cast<CrossEntropyGradOp>(inner)) {
      std::string e = expRow.lookup(grad.getLogits()), S = std::to_string(s);
      os << in << "const double coeff = (double)" << pointer(grad.getGrad())
         << "[0] / " << R << ";\n"
         << in << "const double inv = exp(mx" << S << " - lse" << S << ");\n"
         << in << rowLoop() << "\n"
         << in << "  " << Y << "[j] = (float)(coeff * (" << e
         << "[j] * inv));\n";
      sync();
      os << in << once() << "{\n"
         << in << "  const int64_t l = " << label(grad.getLabels()) << ";\n"
         << in << "  " << Y << "[l] = (float)(coeff * (" << e
         << "[l] * inv - 1.0));\n"
         << in << "}\n";
    } else {
      return inner.emitOpError("has no fused lowering");
    }
    os << in << "}\n";
    sync();
  }
  if (failed(flush()))
    return failure();
  for (auto [to, from] : copies)
    os << in << rowLoop() << "\n"
       << in << "  " << to << "[j] = " << from << "[j];\n";
  return text;
}

FailureOr<std::string> FusedEmitter::emitRows(StringRef name) {
  unsigned numIn = op.getInputs().size(), numOut = op.getNumResults();
  std::string C = std::to_string(cols), R = std::to_string(rows);
  Block &block = op.getBody().front();
  for (auto [k, v] : llvm::enumerate(block.getTerminator()->getOperands()))
    if (cast<RankedTensorType>(v.getType()).getShape() !=
        ArrayRef<int64_t>(shape))
      lossResults.push_back(k);
  auto isLoss = [&](unsigned k) { return llvm::is_contained(lossResults, k); };
  FailureOr<std::string> body = rowBody();
  if (failed(body))
    return failure();
  // params: the function's; args (and kparams, the CUDA kernel's): the
  // operands and the result rows, without the losses.
  std::string params, args, kparams;
  for (unsigned i = 0; i < numIn; ++i) {
    params += "const " + elementType(i) + " *in" + std::to_string(i) + ", ";
    args += "in" + std::to_string(i) + ", ";
  }
  kparams = params;
  for (unsigned i = 0; i < numOut; ++i) {
    params += resultType(i) + " *out" + std::to_string(i) +
              (i + 1 < numOut ? ", " : "");
    if (!isLoss(i)) {
      args += "out" + std::to_string(i) + ", ";
      kparams += resultType(i) + " *out" + std::to_string(i) + ", ";
    }
  }
  kparams.resize(kparams.size() - 2);
  std::string text;
  llvm::raw_string_ostream os(text);
  unsigned numRowwise =
      llvm::count_if(block.without_terminator(),
                     [](Operation &o) { return FusedOp::isRowwise(&o); });
  os << "// " << describe(op) << ": " << block.getOperations().size() - 1
     << " ops over [";
  llvm::interleave(shape, os, "x");
  os << "] row by row (" << numRowwise << " row-wise)\n";
  // Pointers to row r of each operand and result.
  // (Labels are read as c.in<i>[r].)
  auto rowPointers = [&](StringRef prefix, StringRef in) {
    for (unsigned i = 0; i < numIn; ++i)
      if (!typeOf(i).getElementType().isInteger())
        os << in << "const " << elementType(i) << " *p" << i << " = " << prefix
           << "in" << i << " + " << rowOffset(i) << ";\n";
    for (unsigned i = 0; i < numOut; ++i)
      if (!isLoss(i))
        os << in << resultType(i) << " *q" << i << " = " << prefix << "out" << i
           << " + r * " << C << ";\n";
  };
  if (cuda) {
    // Sums and maxima over a block (a multiple of 32 threads), every
    // thread getting the result: warp shuffles, then one value per warp.
    os << "#ifndef BRAID_FUSED_ROW_HELPERS\n"
          "#define BRAID_FUSED_ROW_HELPERS\n"
          "__device__ static double braid_fused_block_sum(double v) {\n"
          "  __shared__ double part[32];\n"
          "  for (int o = 16; o > 0; o /= 2)\n"
          "    v += __shfl_xor_sync(0xffffffffu, v, o);\n"
          "  __syncthreads();\n"
          "  if (threadIdx.x % 32 == 0)\n"
          "    part[threadIdx.x / 32] = v;\n"
          "  __syncthreads();\n"
          "  double total = 0.0;\n"
          "  for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w)\n"
          "    total += part[w];\n"
          "  return total;\n"
          "}\n"
          "__device__ static float braid_fused_block_max(float v) {\n"
          "  __shared__ float part[32];\n"
          "  for (int o = 16; o > 0; o /= 2) {\n"
          "    const float w = __shfl_xor_sync(0xffffffffu, v, o);\n"
          "    v = w > v ? w : v;\n"
          "  }\n"
          "  __syncthreads();\n"
          "  if (threadIdx.x % 32 == 0)\n"
          "    part[threadIdx.x / 32] = v;\n"
          "  __syncthreads();\n"
          "  float m = -INFINITY;\n"
          "  for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w)\n"
          "    m = part[w] > m ? part[w] : m;\n"
          "  return m;\n"
          "}\n"
          "#endif\n";
    if (numScratch)
      kparams += ", float *scratch";
    for (unsigned k : lossResults)
      kparams += ", double *loss" + std::to_string(k);
    os << "__global__ static void " << name << "_kernel(" << kparams << ") {\n";
    os << "  const int64_t r = blockIdx.x;\n";
    rowPointers("", "  ");
    for (int64_t n = 0; n < numScratch; ++n)
      os << "  float *t" << n << " = scratch + (r * " << numScratch << " + "
         << n << ") * " << C << ";\n";
    os << *body << "}\n";
    for (unsigned k : lossResults)
      os << "__global__ static void " << name << "_loss" << k
         << "(const double *loss, float *out) {\n"
         << "  double total = 0.0;\n"
         << "  for (int64_t r = 0; r < " << R << "; ++r)\n"
         << "    total += loss[r];\n"
         << "  out[0] = " << R << " ? (float)(total / " << R
         << ") : 0.0f;\n}\n";
    os << "static void " << name << "(" << params << ") {\n";
    os << "  cudaStream_t stream = "
          "braid_rt_cuda_stream(braid_rt_program_stream());\n";
    std::string kargs = args;
    if (!kargs.empty())
      kargs.resize(kargs.size() - 2);
    if (numScratch) {
      os << "  static float *scratch = nullptr;\n"
         << "  braid_rt_program_buffer_f32(&scratch, "
         << rows * cols * numScratch << ");\n";
      kargs += ", scratch";
    }
    for (unsigned k : lossResults) {
      // A double per row, in a float buffer twice the size.
      os << "  static float *loss" << k << " = nullptr;\n"
         << "  braid_rt_program_buffer_f32(&loss" << k << ", " << 2 * rows
         << ");\n";
      kargs += ", (double *)loss" + std::to_string(k);
    }
    os << "  if (" << R << " == 0)\n    return;\n";
    os << "  " << name << "_kernel<<<" << R << ", 256, 0, stream>>>(" << kargs
       << ");\n";
    for (unsigned k : lossResults)
      os << "  " << name << "_loss" << k
         << "<<<1, 1, 0, stream>>>((double *)loss" << k << ", out" << k
         << ");\n";
    os << "}\n";
    return text;
  }
  os << "struct " << name << "_args {\n";
  for (unsigned i = 0; i < numIn; ++i)
    os << "  const " << elementType(i) << " *in" << i << ";\n";
  for (unsigned i = 0; i < numOut; ++i)
    if (!isLoss(i))
      os << "  " << resultType(i) << " *out" << i << ";\n";
  for (unsigned k : lossResults)
    os << "  double *loss" << k << ";\n";
  os << "};\n";
  os << "static void " << name
     << "_rows(void *ctx, int64_t begin, int64_t end) {\n";
  os << "  const " << name << "_args &c = *static_cast<const " << name
     << "_args *>(ctx);\n";
  if (numScratch) {
    // This thread's scratch rows, reused row after row.
    os << "  std::vector<float> scratch(" << numScratch * cols << ");\n";
    for (int64_t n = 0; n < numScratch; ++n)
      os << "  float *t" << n << " = scratch.data() + " << n * cols << ";\n";
  }
  os << "  for (int64_t r = begin; r < end; ++r) {\n";
  rowPointers("c.", "    ");
  os << *body;
  os << "  }\n}\n";
  os << "static void " << name << "(" << params << ") {\n";
  for (unsigned k : lossResults)
    os << "  std::vector<double> loss" << k << "(" << R << ");\n";
  os << "  " << name << "_args c = {" << args;
  for (unsigned k : lossResults)
    os << "loss" << k << ".data(), ";
  os << "};\n";
  os << "  braid_rt_parallel_for(" << R << ", " << rows * cols << ", " << name
     << "_rows, &c);\n";
  // The loss: the rows' terms summed in row order, as the kernel on one
  // thread sums them.
  for (unsigned k : lossResults)
    os << "  {\n"
       << "    double total = 0.0;\n"
       << "    for (int64_t r = 0; r < " << R << "; ++r)\n"
       << "      total += loss" << k << "[r];\n"
       << "    out" << k << "[0] = " << R << " ? (float)(total / " << R
       << ") : 0.0f;\n"
       << "  }\n";
  os << "}\n";
  return text;
}

/// Adds the headers of the fused loops after the module's includes, once.
static void addFusionIncludes(ModuleOp module, bool cuda) {
  StringRef first = cuda ? "braid/rt/cuda.h" : "braid/rt/elementwise_math.h";
  Operation *lastInclude = nullptr;
  for (auto include : module.getBody()->getOps<emitc::IncludeOp>()) {
    if (include.getInclude() == first)
      return;
    lastInclude = include;
  }
  OpBuilder b(module.getContext());
  if (lastInclude)
    b.setInsertionPointAfter(lastInclude);
  else
    b.setInsertionPointToStart(module.getBody());
  Location loc = module.getLoc();
  if (cuda) {
    emitc::IncludeOp::create(b, loc, b.getStringAttr(first), nullptr);
    // The CUDA kernels' math lives with their sources (runtime/src/cuda/
    // kernels), next to the headers the program is compiled against.
    emitc::IncludeOp::create(
        b, loc, b.getStringAttr("../src/cuda/kernels/kernel_math.h"), nullptr);
    return;
  }
  emitc::IncludeOp::create(b, loc, b.getStringAttr(first), nullptr);
  emitc::IncludeOp::create(b, loc, b.getStringAttr("braid/rt/parallel.h"),
                           nullptr);
  // Row regions' scratch rows and per-row losses.
  emitc::IncludeOp::create(b, loc, b.getStringAttr("vector"), b.getUnitAttr());
}

void mlir::braid::lowering::populateFusedLowerings(LoweringTable &t) {
  t.add<FusedOp>([](FusedOp op, FunctionLowering &l) -> LogicalResult {
    bool cuda = l.module.target.name == "cuda";
    std::string name = "braid_fused_" + std::to_string(l.module.numFused++);
    FailureOr<std::string> text = FusedEmitter(op, cuda).emit(name);
    if (failed(text))
      return failure();
    // The definition goes right before the function being emitted.
    Operation *fn = l.b.getInsertionBlock()->getParentOp();
    while (fn && !isa<emitc::FuncOp>(fn))
      fn = fn->getParentOp();
    if (!fn)
      return op.emitOpError("is not inside a function being lowered");
    auto module = fn->getParentOfType<ModuleOp>();
    addFusionIncludes(module, cuda);
    OpBuilder before(fn);
    emitc::VerbatimOp::create(before, op.getLoc(), before.getStringAttr(*text));
    // Labels are checked as the unfused kernels' callers check them, with
    // the row-wise op's location.
    for (Operation &inner : op.getBody().front()) {
      Value labels;
      if (auto ce = dyn_cast<CrossEntropyOp>(inner))
        labels = ce.getLabels();
      else if (auto grad = dyn_cast<CrossEntropyGradOp>(inner))
        labels = grad.getLabels();
      else
        continue;
      Value ids = op.getInputs()[cast<BlockArgument>(labels).getArgNumber()];
      l.call("braid_rt_program_check_ids",
             {l.text("label"), l.get(ids),
              l.flag(l.typeOf(ids).getElementType().isInteger(64)),
              l.i64(l.countOf(ids)), l.i64(l.colsOf(inner.getOperand(0))),
              l.text(describe(&inner))});
    }
    SmallVector<Value> args;
    for (Value input : op.getInputs())
      args.push_back(l.get(input));
    for (Value result : op.getResults())
      args.push_back(l.result(result));
    l.call(name, args);
    return success();
  });
}
