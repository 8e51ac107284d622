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
// stride of 0 or 1 along the last dimension.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

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
};

} // namespace

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
  auto binary = [&](StringRef symbol, StringRef intrinsic) -> std::string {
    if (cuda)
      return (intrinsic + "(" + args[0] + ", " + args[1] + ")").str();
    return args[0] + " " + symbol.str() + " " + args[1];
  };
  // The CPU kernels' per-element functions are braid_rt_<op>_of; the CUDA
  // kernels' are braid_rt_cuda::<op>Of and friends.
  auto unary = [&](StringRef cpu, StringRef gpu) -> std::string {
    return ((cuda ? gpu : cpu) + "(" + args[0] + ")").str();
  };
  auto grad = [&](StringRef cpu, StringRef gpu,
                  StringRef extra = "") -> std::string {
    return ((cuda ? gpu : cpu) + "(" + args[0] + ", " + args[1] +
            (cuda ? extra : "") + ")")
        .str();
  };
  if (isa<AddOp>(inner))
    return binary("+", "__fadd_rn");
  if (isa<SubOp>(inner))
    return binary("-", "__fsub_rn");
  if (isa<MulOp>(inner))
    return binary("*", "__fmul_rn");
  if (isa<DivOp>(inner))
    return binary("/", "__fdiv_rn");
  if (isa<NegOp>(inner))
    return unary("braid_rt_neg_of", "braid_rt_cuda::negOf");
  if (isa<ExpOp>(inner))
    return unary("braid_rt_exp_of", "braid_rt_cuda::expOf");
  if (isa<SqrtOp>(inner))
    return unary("braid_rt_sqrt_of", "braid_rt_cuda::sqrtOf");
  if (isa<RsqrtOp>(inner))
    return unary("braid_rt_rsqrt_of", "braid_rt_cuda::rsqrtOf");
  if (isa<ReluOp>(inner))
    return unary("braid_rt_relu_of", "braid_rt_cuda::reluOf");
  if (isa<SiluOp>(inner))
    return unary("braid_rt_silu_of", "braid_rt_cuda::siluOf");
  // Only tanh GELU is fusible (FusedOp::isFusible).
  if (isa<GeluOp>(inner))
    return cuda ? "braid_rt_cuda::geluOf(" + args[0] + ", true)"
                : "braid_rt_gelu_tanh_of(" + args[0] + ")";
  if (isa<ReluGradOp>(inner))
    return grad("braid_rt_relu_grad_of", "braid_rt_cuda::reluGrad");
  if (isa<SiluGradOp>(inner))
    return grad("braid_rt_silu_grad_of", "braid_rt_cuda::siluGrad");
  if (isa<GeluGradOp>(inner))
    return grad("braid_rt_gelu_tanh_grad_of", "braid_rt_cuda::geluGrad",
                ", true");
  return inner.emitOpError("has no fused lowering");
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
    os << indent << "const float a" << i << " = p" << i << "["
       << (variesInRow(i) ? "j" : "0") << "];\n";
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
    os << indent << "const float " << name << " = " << *expr << ";\n";
  }
  for (auto [i, v] : llvm::enumerate(block.getTerminator()->getOperands()))
    os << indent << (cuda ? "out" : "q") << i << (cuda ? "[i]" : "[j]") << " = "
       << names.lookup(v) << ";\n";
  return text;
}

FailureOr<std::string> FusedEmitter::emit(StringRef name) {
  unsigned numIn = op.getInputs().size(), numOut = op.getNumResults();
  std::string params;
  for (unsigned i = 0; i < numIn; ++i)
    params += "const float *in" + std::to_string(i) + ", ";
  for (unsigned i = 0; i < numOut; ++i)
    params += "float *out" + std::to_string(i) + (i + 1 < numOut ? ", " : "");
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
      os << "    const float *p" << i << " = in" << i << " + " << rowOffset(i)
         << ";\n";
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
    os << "  const float *in" << i << ";\n";
  for (unsigned i = 0; i < numOut; ++i)
    os << "  float *out" << i << ";\n";
  os << "};\n";
  os << "static void " << name
     << "_rows(void *ctx, int64_t begin, int64_t end) {\n";
  os << "  const " << name << "_args &c = *static_cast<const " << name
     << "_args *>(ctx);\n";
  os << "  for (int64_t r = begin; r < end; ++r) {\n";
  for (unsigned i = 0; i < numIn; ++i)
    os << "    const float *__restrict p" << i << " = c.in" << i << " + "
       << rowOffset(i) << ";\n";
  for (unsigned i = 0; i < numOut; ++i)
    os << "    float *__restrict q" << i << " = c.out" << i << " + r * " << cols
       << ";\n";
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
    SmallVector<Value> args;
    for (Value input : op.getInputs())
      args.push_back(l.get(input));
    for (Value result : op.getResults())
      args.push_back(l.result(result));
    l.call(name, args);
    return success();
  });
}
