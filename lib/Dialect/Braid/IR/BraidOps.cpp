//===- BraidOps.cpp - braid op verifiers and assembly ----------------------===//
//
// Every verifier infers the result type from the operands and, when the IR
// disagrees, says which type it expected.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mlir::braid;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

LogicalResult mlir::OpTrait::braid::verifyStaticShapes(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto shaped = dyn_cast<ShapedType>(type);
    if (shaped && !shaped.hasStaticShape())
      return op->emitOpError() << what << " #" << index << " has type " << type
                               << " with a dynamic dimension; braid needs "
                                  "static shapes";
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", i)))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", i)))
      return failure();
  return success();
}

LogicalResult mlir::OpTrait::braid::verifyNoUnknownAttributes(Operation *op) {
  ArrayRef<StringAttr> known = op->getName().getAttributeNames();
  for (NamedAttribute attr : op->getAttrs()) {
    StringRef name = attr.getName().getValue();
    if (name.contains('.') || llvm::is_contained(known, attr.getName()))
      continue;
    InFlightDiagnostic diag = op->emitOpError()
                              << "has unknown attribute '" << name << "'";
    if (known.empty())
      return diag << "; it takes no attributes";
    diag << "; known attributes: ";
    llvm::interleaveComma(known, diag,
                          [&](StringAttr a) { diag << a.getValue(); });
    return diag;
  }
  return success();
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// Checks that `result` has the inferred shape and element type.
static LogicalResult checkResult(Operation *op, Value result,
                                 ArrayRef<int64_t> shape, Type elementType) {
  auto expected = RankedTensorType::get(shape, elementType);
  if (result.getType() != expected)
    return op->emitOpError() << "result type " << result.getType()
                             << " does not match the inferred type "
                             << expected;
  return success();
}

/// All floating-point operands and results share one element type.
static LogicalResult checkSameFloatElementType(Operation *op) {
  Type first;
  auto visit = [&](Type type) -> LogicalResult {
    Type element = getElementTypeOrSelf(type);
    if (!isa<FloatType>(element))
      return success();
    if (!first) {
      first = element;
      return success();
    }
    if (element != first)
      return op->emitOpError() << "mixes element types " << first << " and "
                               << element
                               << "; all floating-point operands and results "
                                  "must share one element type";
    return success();
  };
  for (Type t : op->getOperandTypes())
    if (failed(visit(t)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(visit(t)))
      return failure();
  return success();
}

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Normalises `axis` against `rank`, reporting an out-of-range axis.
static FailureOr<int64_t> checkAxis(Operation *op, int64_t axis, int64_t rank,
                                    StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << what << " " << axis
                             << " is out of range for rank " << rank
                             << "; expected 0 <= " << what << " < " << rank;
  return axis;
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  StringRef name = getName();
  if (name.empty())
    return emitOpError("parameter name must not be empty");
  if (llvm::any_of(name, [](char c) { return isspace(c) || c == '"'; }))
    return emitOpError() << "parameter name '" << name
                         << "' must not contain whitespace or quotes";
  Operation *parent = (*this)->getParentOp();
  if (!isa<LayerOp, FunctionOpInterface>(parent))
    return emitOpError("must be directly inside a braid.layer or a function");
  if (ShardingAttr block = getBlockOfAttr())
    return verifyShardingFor(*this, block, getType(), "the parameter block",
                             /*local=*/true);
  return success();
}

LogicalResult StoreParamOp::verify() {
  StringRef name = getName();
  if (name.empty())
    return emitOpError("parameter name must not be empty");
  Operation *parent = (*this)->getParentOp();
  if (!isa<LayerOp, FunctionOpInterface>(parent))
    return emitOpError("must be directly inside a braid.layer or a function");
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

ParseResult LayerOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildFuncType = [](Builder &builder, ArrayRef<Type> argTypes,
                          ArrayRef<Type> results,
                          function_interface_impl::VariadicFlag,
                          std::string &) {
    return builder.getFunctionType(argTypes, results);
  };
  return function_interface_impl::parseFunctionOp(
      parser, result, /*allowVariadic=*/false,
      getFunctionTypeAttrName(result.name), buildFuncType,
      getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name));
}

void LayerOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(
      p, *this, /*isVariadic=*/false, getFunctionTypeAttrName(),
      getArgAttrsAttrName(), getResAttrsAttrName());
}

LogicalResult LayerOp::verify() {
  if (getBody().empty())
    return emitOpError("must have a body");
  auto yield = dyn_cast<YieldOp>(getBody().front().getTerminator());
  if (!yield)
    return emitOpError("body must end with braid.yield");
  TypeRange yielded = yield.getOperandTypes();
  ArrayRef<Type> declared = getResultTypes();
  if (TypeRange(declared) != yielded) {
    InFlightDiagnostic diag = yield.emitOpError()
                              << "yields " << yielded.size() << " value(s) of types (";
    llvm::interleaveComma(yielded, diag);
    diag << ") but layer @" << getSymName() << " declares results (";
    llvm::interleaveComma(declared, diag);
    return diag << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RepeatOp
//===----------------------------------------------------------------------===//

LogicalResult RepeatOp::verify() {
  // I64Attr getters are unsigned; read them as the signed values written.
  int64_t count = getCount(), first = getFirst();
  if (count < 1)
    return emitOpError() << "count must be at least 1, got " << count;
  if (first < 0)
    return emitOpError() << "first must be non-negative, got " << first;
  if (getPrefix().contains(' '))
    return emitOpError() << "prefix '" << getPrefix()
                         << "' must not contain spaces";
  if (getCarried()) {
    int64_t carried = *getCarried();
    if (carried < 0 || carried > (int64_t)getInputs().size() ||
        carried > (int64_t)getResults().size())
      return emitOpError() << "carried (" << carried
                           << ") must be between 0 and the number of "
                              "operands and of results";
  }
  if (std::optional<ArrayAttr> names = getInstanceNames()) {
    // Each name is one component of a dotted parameter name.
    if (getPrefix().empty())
      return emitOpError() << "has instance_names but no prefix: without a "
                              "prefix the instances share their parameters";
    if ((int64_t)names->size() != count)
      return emitOpError() << "has " << names->size() << " instance_names for "
                           << count << " instance(s)";
    llvm::StringSet<> seen;
    for (StringRef name : names->getAsValueRange<StringAttr>()) {
      if (name.empty() || name.find_first_of(". ") != StringRef::npos)
        return emitOpError() << "instance name '" << name
                             << "' must be non-empty, without dots or spaces";
      if (!seen.insert(name).second)
        return emitOpError() << "instance name '" << name << "' is given twice";
    }
  }
  return success();
}

std::string RepeatOp::getInstanceName(int64_t i) {
  if (std::optional<ArrayAttr> names = getInstanceNames())
    return cast<StringAttr>((*names)[i - (int64_t)getFirst()]).str();
  return std::to_string(i);
}

std::string RepeatOp::getParamPrefix(int64_t i) {
  if (getPrefix().empty())
    return "";
  return (getPrefix() + "." + getInstanceName(i) + ".").str();
}

LogicalResult RepeatOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto layer = symbolTable.lookupNearestSymbolFrom<LayerOp>(*this,
                                                            getLayerAttr());
  if (!layer)
    return emitOpError() << "'" << getLayer()
                         << "' does not name a braid.layer";
  unsigned carried = getNumCarried();
  int64_t count = getCount();
  ArrayRef<Type> ins = layer.getArgumentTypes();
  ArrayRef<Type> outs = layer.getResultTypes();
  if (ins.size() < carried || outs.size() < carried ||
      ins.take_front(carried) != outs.take_front(carried))
    return emitOpError() << "layer @" << getLayer()
                         << " cannot be repeated: its result types must "
                            "equal its argument types"
                         << (getCarried() ? " for the carried values" : "");

  // A carried future (an instance starting the next one's collective) is
  // dropped after the last instance, whose successor does not run: nothing
  // may wait for it.
  for (auto [i, t] : llvm::enumerate(ins.take_front(carried)))
    if (isa<FutureType>(t) && i < getNumResults() &&
        !getResult(i).use_empty())
      return emitOpError() << "result #" << i
                           << " is a carried future, which the last instance "
                              "drops; it must have no uses";
  // Only stacked results are futures of a stack.
  if (llvm::any_of(ins.drop_front(carried),
                   [](Type t) { return isa<FutureType>(t); }))
    return emitOpError() << "layer @" << getLayer()
                         << " takes a future as a stacked operand; only "
                            "carried operands may be futures";

  // The types the operands and results must have: carried ones as in the
  // layer, stacked ones with a leading dimension of `count` (a stacked
  // future is the future of the stack).
  auto expected = [&](ArrayRef<Type> layerTypes) {
    SmallVector<Type> types(layerTypes.take_front(carried));
    for (Type t : layerTypes.drop_front(carried)) {
      auto future = dyn_cast<FutureType>(t);
      auto r = future ? future.getValueType() : dyn_cast<RankedTensorType>(t);
      if (!r) {
        types.push_back(t); // the layer's verifier reports it
        continue;
      }
      SmallVector<int64_t> shape{count};
      shape.append(r.getShape().begin(), r.getShape().end());
      auto stacked = RankedTensorType::get(shape, r.getElementType());
      types.push_back(future ? Type(FutureType::get(getContext(), stacked))
                             : Type(stacked));
    }
    return types;
  };
  SmallVector<Type> wantIns = expected(ins), wantOuts = expected(outs);
  if (TypeRange(getInputs().getTypes()) != TypeRange(wantIns)) {
    InFlightDiagnostic diag = emitOpError() << "operand types do not match "
                                            << "layer @" << getLayer()
                                            << "; expected (";
    llvm::interleaveComma(wantIns, diag);
    return diag << ")";
  }
  if (TypeRange(getResults().getTypes()) != TypeRange(wantOuts)) {
    InFlightDiagnostic diag = emitOpError() << "result types do not match "
                                            << "layer @" << getLayer()
                                            << "; expected (";
    llvm::interleaveComma(wantOuts, diag);
    return diag << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

LogicalResult PipelineOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand: the micro-batch count is "
                       "their leading dimension");
  int64_t m = -1;
  for (auto [i, v] : llvm::enumerate(getInputs())) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() == 0 || t.isDynamicDim(0))
      return emitOpError() << "operand " << i
                           << " must have a static leading micro-batch "
                              "dimension, got "
                           << t;
    if (m >= 0 && t.getDimSize(0) != m)
      return emitOpError() << "operand " << i << " stacks " << t.getDimSize(0)
                           << " micro-batches, operand 0 stacks " << m;
    m = t.getDimSize(0);
  }
  for (auto [i, v] : llvm::enumerate(getResults()))
    if (!isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
      return emitOpError() << "result " << i
                           << " must be a floating-point tensor (results "
                              "are means over micro-batches)";
  return success();
}

LogicalResult
PipelineOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto callee = dyn_cast_or_null<FunctionOpInterface>(
      symbolTable.lookupNearestSymbolFrom(*this, getCalleeAttr()));
  if (!callee)
    return emitOpError() << "'" << getCallee()
                         << "' does not name a function";
  int64_t m = getNumMicrobatches();
  SmallVector<Type> wantIns;
  for (Type t : callee.getArgumentTypes()) {
    auto r = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape{m};
    shape.append(r.getShape().begin(), r.getShape().end());
    wantIns.push_back(RankedTensorType::get(shape, r.getElementType()));
  }
  if (TypeRange(getInputs().getTypes()) != TypeRange(wantIns)) {
    InFlightDiagnostic diag = emitOpError()
                              << "operand types do not match @" << getCallee()
                              << " over " << m << " micro-batches; expected (";
    llvm::interleaveComma(wantIns, diag);
    return diag << ")";
  }
  if (TypeRange(getResults().getTypes()) != callee.getResultTypes())
    return emitOpError() << "result types do not match those of @"
                         << getCallee();
  if (auto schedule =
          callee->getAttrOfType<DictionaryAttr>("braid.schedule"))
    if (auto n = schedule.getAs<IntegerAttr>("microbatches");
        n && n.getInt() != m)
      return emitOpError() << "runs " << m << " micro-batches, but the "
                           << "schedule of @" << getCallee() << " has "
                           << n.getInt();
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

/// The checks of braid.matmul, on `op`'s first two operands and result #0.
static LogicalResult verifyMatmul(Operation *op, bool transposeA,
                                  bool transposeB) {
  if (failed(checkSameFloatElementType(op)))
    return failure();
  ArrayRef<int64_t> a = tensorType(op->getOperand(0)).getShape();
  ArrayRef<int64_t> b = tensorType(op->getOperand(1)).getShape();
  if (a.size() < 2 || b.size() < 2)
    return op->emitOpError() << "operands must have rank >= 2, got ranks "
                             << a.size() << " and " << b.size();
  size_t ra = a.size(), rb = b.size();
  int64_t m = transposeA ? a[ra - 1] : a[ra - 2];
  int64_t ka = transposeA ? a[ra - 2] : a[ra - 1];
  int64_t kb = transposeB ? b[rb - 1] : b[rb - 2];
  int64_t n = transposeB ? b[rb - 2] : b[rb - 1];
  if (ka != kb)
    return op->emitOpError()
           << "contracting dimensions differ: lhs " << shapeString(a)
           << " has K = " << ka << " but rhs " << shapeString(b)
           << " has K = " << kb;
  auto batch = broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (!batch)
    return op->emitOpError()
           << "batch dimensions " << shapeString(a.drop_back(2)) << " and "
           << shapeString(b.drop_back(2)) << " do not broadcast";
  SmallVector<int64_t> shape = *batch;
  shape.push_back(m);
  shape.push_back(n);
  return checkResult(op, op->getResult(0), shape,
                     tensorType(op->getOperand(0)).getElementType());
}

LogicalResult MatmulOp::verify() {
  return verifyMatmul(*this, getTransposeA(), getTransposeB());
}

LogicalResult MatmulBiasOp::verify() {
  if (failed(verifyMatmul(*this, getTransposeA(), getTransposeB())))
    return failure();
  ArrayRef<int64_t> c = tensorType(getResult()).getShape();
  ArrayRef<int64_t> bias = tensorType(getBias()).getShape();
  if (bias.size() != 1 || bias[0] != c.back())
    return emitOpError() << "bias must be [" << c.back()
                         << "] (the result's last dimension), got "
                         << shapeString(bias);
  if (getGelu() && *getGelu() != GeluApproximation::tanh)
    return emitOpError() << "takes tanh GELU only (cuBLASLt's GELU epilogue)";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyBinary(Operation *op) {
  if (failed(checkSameFloatElementType(op)))
    return failure();
  ArrayRef<int64_t> a = tensorType(op->getOperand(0)).getShape();
  ArrayRef<int64_t> b = tensorType(op->getOperand(1)).getShape();
  auto shape = broadcastShapes(a, b);
  if (!shape)
    return op->emitOpError() << "operand shapes " << shapeString(a) << " and "
                             << shapeString(b) << " do not broadcast";
  return checkResult(op, op->getResult(0), *shape,
                     tensorType(op->getOperand(0)).getElementType());
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }

//===----------------------------------------------------------------------===//
// ConvertOp, RoundOp
//===----------------------------------------------------------------------===//

LogicalResult ConvertOp::verify() {
  if (tensorType(getInput()).getShape() != tensorType(getResult()).getShape())
    return emitOpError() << "changes the shape from " << getInput().getType()
                         << " to " << getResult().getType()
                         << "; a conversion keeps it";
  return success();
}

LogicalResult RoundOp::verify() {
  Type to = getElementType();
  if (!to.isBF16() && !to.isF16())
    return emitOpError() << "rounds to " << to << "; expected bf16 or f16";
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation, embeddings, attention, loss
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return checkAxis(*this, getAxis(), tensorType(getInput()).getRank());
}

/// Checks that a normalisation's `param` (scale or bias) is a vector over
/// the last dimension of `input`.
static LogicalResult checkNormParam(Operation *op, Value input, Value param,
                                    StringRef what) {
  ArrayRef<int64_t> shape = tensorType(input).getShape();
  if (shape.empty())
    return op->emitOpError("input must have rank >= 1");
  ArrayRef<int64_t> p = tensorType(param).getShape();
  if (p.size() != 1 || p[0] != shape.back())
    return op->emitOpError()
           << what << " has shape " << shapeString(p) << "; expected ["
           << shape.back() << "] (the last dimension of the input)";
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(checkNormParam(*this, getInput(), getScale(), "scale")) ||
      failed(checkNormParam(*this, getInput(), getBias(), "bias")))
    return failure();
  if (getEpsilon().convertToDouble() < 0.0)
    return emitOpError("epsilon must be non-negative");
  RankedTensorType in = tensorType(getInput());
  return checkResult(*this, getResult(), in.getShape(), in.getElementType());
}

LogicalResult RmsNormOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(checkNormParam(*this, getInput(), getScale(), "scale")))
    return failure();
  if (getEpsilon().convertToDouble() < 0.0)
    return emitOpError("epsilon must be non-negative");
  RankedTensorType in = tensorType(getInput());
  return checkResult(*this, getResult(), in.getShape(), in.getElementType());
}

/// The vocabulary-parallel attributes come together, on a known mesh with
/// known, distinct axes.
static LogicalResult verifyVocabShard(Operation *op, FlatSymbolRefAttr mesh,
                                      ArrayAttr axes) {
  if (!mesh && !axes)
    return success();
  if (!mesh || !axes || axes.empty())
    return op->emitOpError("needs both mesh and vocab_axes (non-empty), or "
                           "neither");
  auto meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, mesh);
  if (!meshOp)
    return op->emitOpError() << mesh << " does not name a braid.mesh";
  llvm::SmallSet<StringRef, 4> seen;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (!meshOp.getAxisIndex(name))
      return op->emitOpError() << "unknown mesh axis '" << name << "'";
    if (!seen.insert(name).second)
      return op->emitOpError() << "mesh axis '" << name
                               << "' is listed twice";
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(verifyVocabShard(*this, getMeshAttr(), getVocabAxesAttr())))
    return failure();
  RankedTensorType table = tensorType(getTable());
  if (table.getRank() != 2)
    return emitOpError() << "table must have rank 2 ([vocab, hidden]), got "
                         << shapeString(table.getShape());
  SmallVector<int64_t> shape(tensorType(getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  return checkResult(*this, getResult(), shape, table.getElementType());
}

LogicalResult RotaryOp::verify() {
  ArrayRef<int64_t> shape = tensorType(getInput()).getShape();
  if (shape.size() != 4)
    return emitOpError() << "input must be [batch, seq, heads, head_dim], got "
                         << shapeString(shape);
  if (shape[3] % 2 != 0)
    return emitOpError() << "head dimension " << shape[3]
                         << " must be even to rotate pairs";
  if (getBase().convertToDouble() <= 0.0)
    return emitOpError("base must be positive");
  return success();
}

double AttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(double(tensorType(getQuery()).getDimSize(3)));
}

/// Checks query, key and value shapes and the scale of an attention op.
static LogicalResult verifyAttentionOperands(Operation *op, Value query,
                                             Value key, Value value,
                                             bool causal,
                                             std::optional<APFloat> scale) {
  if (failed(checkSameFloatElementType(op)))
    return failure();
  ArrayRef<int64_t> q = tensorType(query).getShape();
  ArrayRef<int64_t> k = tensorType(key).getShape();
  ArrayRef<int64_t> v = tensorType(value).getShape();
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return op->emitOpError("query, key and value must be "
                           "[batch, seq, heads, head_dim]");
  if (k != v)
    return op->emitOpError() << "value has shape " << shapeString(v)
                             << "; expected the key's shape " << shapeString(k);
  if (k[0] != q[0] || k[3] != q[3])
    return op->emitOpError() << "key shape " << shapeString(k)
                             << " does not fit query " << shapeString(q)
                             << "; expected [" << q[0] << ", T, Hkv, " << q[3]
                             << "]";
  if (k[2] == 0 || q[2] % k[2] != 0)
    return op->emitOpError() << "query heads (" << q[2]
                             << ") must be a multiple of key/value heads ("
                             << k[2] << ")";
  if (causal && q[1] != k[1])
    return op->emitOpError() << "causal attention needs equal query and key "
                                "lengths, got "
                             << q[1] << " and " << k[1];
  if (scale && !(scale->convertToDouble() > 0.0))
    return op->emitOpError("scale must be positive");
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getCausal(), getScale())))
    return failure();
  RankedTensorType q = tensorType(getQuery());
  return checkResult(*this, getResult(), q.getShape(), q.getElementType());
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(verifyVocabShard(*this, getMeshAttr(), getVocabAxesAttr())))
    return failure();
  ArrayRef<int64_t> logits = tensorType(getLogits()).getShape();
  ArrayRef<int64_t> labels = tensorType(getLabels()).getShape();
  if (logits.empty())
    return emitOpError("logits must have rank >= 1 ([..., vocab])");
  if (labels != logits.drop_back())
    return emitOpError() << "labels have shape " << shapeString(labels)
                         << "; expected " << shapeString(logits.drop_back())
                         << " (the logits' shape without the vocabulary)";
  return checkResult(*this, getResult(), {},
                     tensorType(getLogits()).getElementType());
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

static LogicalResult checkSameElementType(Operation *op, Value in,
                                          Value out) {
  Type a = tensorType(in).getElementType(), b = tensorType(out).getElementType();
  if (a != b)
    return op->emitOpError() << "result element type " << b
                             << " differs from the input's " << a;
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), getResult())))
    return failure();
  RankedTensorType in = tensorType(getInput()), out = tensorType(getResult());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << shapeString(in.getShape())
                         << " (" << in.getNumElements() << " elements) to "
                         << shapeString(out.getShape()) << " ("
                         << out.getNumElements() << " elements)";
  return success();
}

LogicalResult TransposeOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), getResult())))
    return failure();
  RankedTensorType in = tensorType(getInput());
  ArrayRef<int64_t> perm = getPermutation();
  if ((int64_t)perm.size() != in.getRank())
    return emitOpError() << "permutation has " << perm.size()
                         << " entries; expected " << in.getRank();
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOpError() << "permutation " << shapeString(perm)
                           << " is not a permutation of 0.." << in.getRank() - 1;
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  return checkResult(*this, getResult(), shape, in.getElementType());
}

/// The result shape of reducing `axes` of `in`, or failure (reported).
static FailureOr<SmallVector<int64_t>>
inferReduceShape(Operation *op, RankedTensorType in, ArrayRef<int64_t> axes,
                 bool keepDims) {
  if (axes.empty())
    return op->emitOpError("needs at least one axis to reduce");
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t a : axes) {
    if (failed(checkAxis(op, a, in.getRank())))
      return failure();
    if (!seen.insert(a).second)
      return op->emitOpError() << "axis " << a << " appears twice";
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (!seen.contains(i))
      shape.push_back(in.getDimSize(i));
    else if (keepDims)
      shape.push_back(1);
  }
  return shape;
}

LogicalResult ReduceOp::verify() {
  RankedTensorType in = tensorType(getInput());
  FailureOr<SmallVector<int64_t>> shape =
      inferReduceShape(*this, in, getAxes(), getKeepDims());
  if (failed(shape))
    return failure();
  return checkResult(*this, getResult(), *shape, in.getElementType());
}

LogicalResult ReduceMaxGradOp::verify() {
  if (failed(checkSameFloatElementType(*this)))
    return failure();
  RankedTensorType in = tensorType(getInput());
  FailureOr<SmallVector<int64_t>> shape =
      inferReduceShape(*this, in, getAxes(), getKeepDims());
  if (failed(shape))
    return failure();
  auto gradType = RankedTensorType::get(*shape, in.getElementType());
  if (getGrad().getType() != gradType)
    return emitOpError() << "grad has type " << getGrad().getType()
                         << "; expected " << gradType
                         << " (the type of the reduction's result)";
  return checkResult(*this, getResult(), in.getShape(), in.getElementType());
}

LogicalResult BroadcastOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), getResult())))
    return failure();
  ArrayRef<int64_t> in = tensorType(getInput()).getShape();
  ArrayRef<int64_t> out = tensorType(getResult()).getShape();
  auto shape = broadcastShapes(in, out);
  if (!shape || ArrayRef<int64_t>(*shape) != out)
    return emitOpError() << "cannot broadcast " << shapeString(in) << " to "
                         << shapeString(out);
  return success();
}

/// The shape of slicing `in` with start/limit/stride, or failure.
static FailureOr<SmallVector<int64_t>>
inferSliceShape(Operation *op, RankedTensorType in, ArrayRef<int64_t> start,
                ArrayRef<int64_t> limit,
                std::optional<ArrayRef<int64_t>> strideAttr) {
  int64_t rank = in.getRank();
  SmallVector<int64_t> stride(rank, 1);
  if (strideAttr)
    stride.assign(strideAttr->begin(), strideAttr->end());
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)stride.size() != rank)
    return op->emitOpError() << "start, limit and stride need " << rank
                             << " entries each (the input rank)";
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (stride[i] < 1)
      return op->emitOpError() << "stride " << stride[i] << " in dimension "
                               << i << " must be positive";
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.getDimSize(i))
      return op->emitOpError() << "dimension " << i << ": need 0 <= start ("
                               << start[i] << ") <= limit (" << limit[i]
                               << ") <= size (" << in.getDimSize(i) << ")";
    shape.push_back((limit[i] - start[i] + stride[i] - 1) / stride[i]);
  }
  return shape;
}

LogicalResult SliceOp::verify() {
  RankedTensorType in = tensorType(getInput());
  FailureOr<SmallVector<int64_t>> shape =
      inferSliceShape(*this, in, getStart(), getLimit(), getStride());
  if (failed(shape))
    return failure();
  return checkResult(*this, getResult(), *shape, in.getElementType());
}

LogicalResult SliceGradOp::verify() {
  RankedTensorType out = tensorType(getResult());
  if (failed(checkSameElementType(*this, getGrad(), getResult())))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      inferSliceShape(*this, out, getStart(), getLimit(), getStride());
  if (failed(shape))
    return failure();
  auto gradType = RankedTensorType::get(*shape, out.getElementType());
  if (getGrad().getType() != gradType)
    return emitOpError() << "grad has type " << getGrad().getType()
                         << "; expected " << gradType
                         << " (the slice of the result type)";
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  RankedTensorType first = tensorType(getInputs()[0]);
  FailureOr<int64_t> axis = checkAxis(*this, getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(getInputs().drop_front())) {
    RankedTensorType t = tensorType(v);
    if (t.getElementType() != first.getElementType())
      return emitOpError() << "input #" << i + 1 << " has element type "
                           << t.getElementType() << "; expected "
                           << first.getElementType();
    if (t.getRank() != first.getRank())
      return emitOpError() << "input #" << i + 1 << " has rank "
                           << t.getRank() << "; expected " << first.getRank();
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d == *axis)
        continue;
      if (t.getDimSize(d) != first.getDimSize(d))
        return emitOpError() << "input #" << i + 1 << " has shape "
                             << shapeString(t.getShape())
                             << "; all dimensions but " << *axis
                             << " must equal input #0's "
                             << shapeString(first.getShape());
    }
    shape[*axis] += t.getDimSize(*axis);
  }
  return checkResult(*this, getResult(), shape, first.getElementType());
}

LogicalResult ConstantOp::verify() {
  if (!isa<DenseIntOrFPElementsAttr>(getValue()))
    return emitOpError("value must be a dense<...> elements attribute");
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

/// Checks that `grad` and the result have the type of `input`.
static LogicalResult checkLikeInput(Operation *op, Value input, Value grad) {
  if (grad.getType() != input.getType())
    return op->emitOpError() << "grad has type " << grad.getType()
                             << "; expected the input's type "
                             << input.getType();
  return checkResult(op, op->getResult(0), tensorType(input).getShape(),
                     tensorType(input).getElementType());
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(checkNormParam(*this, getInput(), getScale(), "scale")))
    return failure();
  return checkLikeInput(*this, getInput(), getGrad());
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(checkNormParam(*this, getInput(), getScale(), "scale")))
    return failure();
  return checkLikeInput(*this, getInput(), getGrad());
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(verifyVocabShard(*this, getMeshAttr(), getVocabAxesAttr())))
    return failure();
  RankedTensorType table = tensorType(getResult());
  if (table.getRank() != 2)
    return emitOpError() << "result must be a [vocab, hidden] table, got "
                         << table;
  SmallVector<int64_t> shape(tensorType(getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  auto gradType = RankedTensorType::get(shape, table.getElementType());
  if (getGrad().getType() != gradType)
    return emitOpError() << "grad has type " << getGrad().getType()
                         << "; expected " << gradType;
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getCausal(), getScale())))
    return failure();
  if (getGrad().getType() != getQuery().getType())
    return emitOpError() << "grad has type " << getGrad().getType()
                         << "; expected the query's type "
                         << getQuery().getType();
  int64_t operand = getOperand();
  if (operand < 0 || operand > 2)
    return emitOpError() << "operand must be 0 (query), 1 (key) or 2 "
                            "(value), got "
                         << operand;
  Type want = getOperation()->getOperand(operand).getType();
  if (getResult().getType() != want)
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match the inferred type " << want;
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(checkSameFloatElementType(*this)) ||
      failed(verifyVocabShard(*this, getMeshAttr(), getVocabAxesAttr())))
    return failure();
  ArrayRef<int64_t> logits = tensorType(getLogits()).getShape();
  if (logits.empty() ||
      tensorType(getLabels()).getShape() != logits.drop_back())
    return emitOpError() << "labels must have the logits' shape without the "
                            "last dimension";
  if (tensorType(getGrad()).getRank() != 0)
    return emitOpError("grad must be rank 0 (the gradient of the mean loss)");
  return checkResult(*this, getResult(), logits,
                     tensorType(getLogits()).getElementType());
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

/// Checks that `v` is a rank-0 tensor; `what` names it in the message.
static LogicalResult checkScalar(Operation *op, Value v, StringRef what) {
  if (tensorType(v).getRank() != 0)
    return op->emitOpError() << what << " must be a rank-0 tensor, got "
                             << v.getType();
  return success();
}

LogicalResult LrScheduleOp::verify() {
  if (failed(checkScalar(*this, getStep(), "step")) ||
      failed(checkScalar(*this, getResult(), "the result")))
    return failure();
  int64_t warmup = getWarmupSteps(), total = getTotalSteps();
  double lr = getLr().convertToDouble(), minLr = getMinLr().convertToDouble();
  if (!(lr > 0.0) || !std::isfinite(lr))
    return emitOpError("lr must be positive and finite");
  if (!(minLr >= 0.0 && minLr <= lr))
    return emitOpError("min_lr must be between 0 and lr");
  if (warmup < 0 || total < 1)
    return emitOpError() << "need warmup_steps >= 0 and total_steps >= 1, "
                            "got "
                         << warmup << " and " << total;
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (failed(checkSameFloatElementType(*this)))
    return failure();
  return checkScalar(*this, getResult(), "the result");
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (failed(checkSameFloatElementType(*this)))
    return failure();
  return checkScalar(*this, getResult(), "the result");
}

LogicalResult ClipCoefficientOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0.0))
    return emitOpError("max_norm must be positive");
  return checkScalar(*this, getNorm(), "norm");
}

/// Checks an optimizer update: `state` tensors and the results have the
/// parameter's type; `scalars` are rank-0.
static LogicalResult checkUpdate(Operation *op, Value param,
                                 ArrayRef<Value> state,
                                 ArrayRef<Value> scalars) {
  if (failed(checkSameFloatElementType(op)))
    return failure();
  for (Value v : state)
    if (v.getType() != param.getType())
      return op->emitOpError() << "operand has type " << v.getType()
                               << "; expected the parameter's type "
                               << param.getType();
  for (Value v : op->getResults())
    if (v.getType() != param.getType())
      return op->emitOpError() << "result has type " << v.getType()
                               << "; expected the parameter's type "
                               << param.getType();
  for (Value v : scalars)
    if (failed(checkScalar(op, v, "learning rate, step and gradient scale")))
      return failure();
  return success();
}

LogicalResult SelectOp::verify() {
  auto condition = cast<RankedTensorType>(getCondition().getType());
  if (condition.getRank() != 0 ||
      condition.getElementType() != getResult().getType().getElementType())
    return emitOpError() << "needs a rank-0 condition of the result's element "
                            "type, got "
                         << condition;
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0.0 && b1 < 1.0) || !(b2 >= 0.0 && b2 < 1.0))
    return emitOpError("beta1 and beta2 must be in [0, 1)");
  // Written so that NaN and infinity fail too.
  double eps = getEpsilon().convertToDouble();
  double wd = getWeightDecay().convertToDouble();
  if (!(eps > 0.0 && std::isfinite(eps)) || !(wd >= 0.0 && std::isfinite(wd)))
    return emitOpError("needs epsilon > 0 and weight_decay >= 0");
  return checkUpdate(*this, getParam(), {getGrad(), getM(), getV()},
                     {getLr(), getStep(), getGradScale()});
}

LogicalResult SgdUpdateOp::verify() {
  double momentum = getMomentum().convertToDouble();
  double wd = getWeightDecay().convertToDouble();
  if (!(momentum >= 0.0 && std::isfinite(momentum)) ||
      !(wd >= 0.0 && std::isfinite(wd)))
    return emitOpError("needs momentum >= 0 and weight_decay >= 0");
  if (getNesterov() && !(getMomentum().convertToDouble() > 0.0))
    return emitOpError("Nesterov momentum needs momentum > 0");
  return checkUpdate(*this, getParam(), {getGrad(), getMomentumBuffer()},
                     {getLr(), getGradScale()});
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (getAxes().size() != shape.size())
    return emitOpError() << "has " << getAxes().size() << " axis names but "
                         << shape.size() << " sizes";
  if (shape.empty())
    return emitOpError("needs at least one axis");
  llvm::SmallSet<StringRef, 4> seen;
  for (auto [name, size] : llvm::zip(getAxes(), shape)) {
    StringRef n = cast<StringAttr>(name).getValue();
    if (n.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(n).second)
      return emitOpError() << "axis '" << n << "' appears twice";
    if (size < 1)
      return emitOpError() << "axis '" << n << "' has size " << size
                           << "; sizes must be at least 1";
  }
  return success();
}

std::optional<unsigned> MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, a] : llvm::enumerate(getAxes()))
    if (cast<StringAttr>(a).getValue() == name)
      return i;
  return std::nullopt;
}

int64_t MeshOp::getNumDevices() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

/// The mesh `op` refers to by `name`, or a diagnostic.
static FailureOr<MeshOp> lookupMesh(Operation *op, FlatSymbolRefAttr name) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, name);
  if (!mesh)
    return op->emitOpError() << name << " does not name a braid.mesh";
  return mesh;
}

/// The product of the sizes of `axes` of `mesh`, or a diagnostic naming an
/// unknown axis.
static FailureOr<int64_t> axesSize(Operation *op, MeshOp mesh,
                                   ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes) {
    std::optional<unsigned> i = mesh.getAxisIndex(a);
    if (!i) {
      InFlightDiagnostic diag = op->emitOpError()
                                << "unknown mesh axis '" << a << "'; @"
                                << mesh.getSymName() << " has axes ";
      llvm::interleaveComma(mesh.getAxes(), diag, [&](Attribute x) {
        diag << "'" << cast<StringAttr>(x).getValue() << "'";
      });
      return diag;
    }
    n *= mesh.getShape()[*i];
  }
  return n;
}

LogicalResult mlir::braid::verifyShardingFor(Operation *op,
                                             ShardingAttr sharding, Type type,
                                             StringRef what, bool local) {
  FailureOr<MeshOp> mesh = lookupMesh(op, sharding.getMesh());
  if (failed(mesh))
    return failure();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return op->emitOpError() << what << " of type " << type
                             << " cannot be sharded";
  if ((int64_t)sharding.getDims().size() != tensor.getRank())
    return op->emitOpError() << "sharding of " << what << " lists "
                             << sharding.getDims().size()
                             << " dimensions but " << type << " has rank "
                             << tensor.getRank();
  for (int64_t d = 0; d < tensor.getRank(); ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
    FailureOr<int64_t> n = axesSize(op, *mesh, axes);
    if (failed(n))
      return failure();
    // A strided split cuts each of its blocks: the dimension (whole, or
    // this device's share) holds a whole number of rows of every block.
    int64_t blocks = sharding.getDimBlocks(d);
    if (tensor.getDimSize(d) % (local ? blocks : *n * blocks) != 0) {
      InFlightDiagnostic diag = op->emitOpError()
                                << "dimension " << d << " of size "
                                << tensor.getDimSize(d) << " of " << what
                                << " (" << type << ") is not divisible by ";
      if (blocks > 1)
        diag << blocks << " blocks" << (local ? "" : " times ");
      if (!local)
        diag << "mesh axes ";
      if (!local)
        llvm::interleaveComma(axes, diag, [&](StringRef a) {
          diag << "'" << a << "' (size "
               << mesh->getShape()[*mesh->getAxisIndex(a)] << ")";
        });
      return diag;
    }
  }
  return axesSize(op, *mesh, sharding.getPartialAxes());
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyShardingFor(*this, getSharding(), getType(), "the value");
}

/// Common checks of a collective: its mesh exists and its axes are known
/// and distinct. Returns the group size.
static FailureOr<int64_t> verifyCollective(Operation *op,
                                           FlatSymbolRefAttr meshName,
                                           ArrayAttr axesAttr) {
  FailureOr<MeshOp> mesh = lookupMesh(op, meshName);
  if (failed(mesh))
    return failure();
  SmallVector<StringRef> axes;
  llvm::SmallSet<StringRef, 4> seen;
  for (Attribute a : axesAttr) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (!seen.insert(name).second)
      return op->emitOpError() << "mesh axis '" << name << "' is listed twice";
    axes.push_back(name);
  }
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  return axesSize(op, *mesh, axes);
}

template <typename OpTy>
static int64_t groupSizeOf(OpTy op, MeshOp mesh) {
  int64_t n = 1;
  for (Attribute a : op.getAxes())
    n *= mesh.getShape()[*mesh.getAxisIndex(cast<StringAttr>(a).getValue())];
  return n;
}

int64_t AllReduceOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllGatherOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t ReduceScatterOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllToAllOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t BroadcastFromOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllSliceOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllReduceStartOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllGatherStartOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t ReduceScatterStartOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t AllToAllStartOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }
int64_t BroadcastFromStartOp::getGroupSize(MeshOp mesh) { return groupSizeOf(*this, mesh); }

/// The tensor a collective produces: its result, or what its future holds.
static Type collectiveResultType(Operation *op) {
  Type type = op->getResult(0).getType();
  if (auto future = dyn_cast<FutureType>(type))
    return future.getValueType();
  return type;
}

/// Checks that the result is the input with dimension `dim` scaled:
/// multiplied by `n` (gather) or divided by it (scatter).
static LogicalResult checkScaledDim(Operation *op, Value input, int64_t dim,
                                    int64_t n, bool multiply) {
  auto in = cast<RankedTensorType>(input.getType());
  if (failed(checkAxis(op, dim, in.getRank(), "dim")))
    return failure();
  if (!multiply && in.getDimSize(dim) % n != 0)
    return op->emitOpError() << "dimension " << dim << " of size "
                             << in.getDimSize(dim)
                             << " is not divisible by the group size " << n;
  SmallVector<int64_t> shape(in.getShape());
  shape[dim] = multiply ? shape[dim] * n : shape[dim] / n;
  auto expected = RankedTensorType::get(shape, in.getElementType());
  if (collectiveResultType(op) != expected)
    return op->emitOpError() << "result type " << collectiveResultType(op)
                             << " does not match the inferred type "
                             << expected;
  return success();
}

// The checks of each collective, shared by its synchronous and start forms.

template <typename OpTy>
static LogicalResult verifyAllReduce(OpTy op) {
  if (op.getKind() == ReduceKind::mean)
    return op.emitOpError("reduces with sum or max");
  if (failed(verifyCollective(op, op.getMeshAttr(), op.getAxes())))
    return failure();
  if (collectiveResultType(op) != op.getInput().getType())
    return op.emitOpError() << "result type " << collectiveResultType(op)
                            << " must equal the input type "
                            << op.getInput().getType();
  return success();
}

template <typename OpTy>
static LogicalResult verifyScaling(OpTy op, bool multiply) {
  FailureOr<int64_t> n = verifyCollective(op, op.getMeshAttr(), op.getAxes());
  if (failed(n))
    return failure();
  return checkScaledDim(op, op.getInput(), op.getDim(), *n, multiply);
}

template <typename OpTy>
static LogicalResult verifyAllToAll(OpTy op) {
  FailureOr<int64_t> n = verifyCollective(op, op.getMeshAttr(), op.getAxes());
  if (failed(n))
    return failure();
  auto in = cast<RankedTensorType>(op.getInput().getType());
  int64_t split = op.getSplitDim(), concat = op.getConcatDim();
  if (failed(checkAxis(op, split, in.getRank(), "split_dim")) ||
      failed(checkAxis(op, concat, in.getRank(), "concat_dim")))
    return failure();
  if (in.getDimSize(split) % *n != 0)
    return op.emitOpError() << "dimension " << split << " of size "
                            << in.getDimSize(split)
                            << " is not divisible by the group size " << *n;
  SmallVector<int64_t> shape(in.getShape());
  shape[split] /= *n;
  shape[concat] *= *n;
  auto expected = RankedTensorType::get(shape, in.getElementType());
  if (collectiveResultType(op) != expected)
    return op.emitOpError() << "result type " << collectiveResultType(op)
                            << " does not match the inferred type "
                            << expected;
  return success();
}

template <typename OpTy>
static LogicalResult verifyBroadcastFrom(OpTy op) {
  FailureOr<int64_t> n = verifyCollective(op, op.getMeshAttr(), op.getAxes());
  if (failed(n))
    return failure();
  if ((int64_t)op.getRoot() < 0 || (int64_t)op.getRoot() >= *n)
    return op.emitOpError() << "root " << (int64_t)op.getRoot()
                            << " is not a position in a group of " << *n;
  if (collectiveResultType(op) != op.getInput().getType())
    return op.emitOpError() << "result type " << collectiveResultType(op)
                            << " must equal the input type "
                            << op.getInput().getType();
  return success();
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyAllReduce(*this);
}
LogicalResult AllReduceStartOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyAllReduce(*this);
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyScaling(*this, /*multiply=*/true);
}
LogicalResult AllGatherStartOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyScaling(*this, /*multiply=*/true);
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyScaling(*this, /*multiply=*/false);
}
LogicalResult ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyScaling(*this, /*multiply=*/false);
}
LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyScaling(*this, /*multiply=*/false);
}
LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyAllToAll(*this);
}
LogicalResult AllToAllStartOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyAllToAll(*this);
}
LogicalResult BroadcastFromOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyBroadcastFrom(*this);
}
LogicalResult BroadcastFromStartOp::verifySymbolUses(SymbolTableCollection &) {
  return verifyBroadcastFrom(*this);
}

#define GET_OP_CLASSES
#include "braid/Dialect/Braid/IR/BraidOps.cpp.inc"

#include "braid/Dialect/Braid/IR/BraidInterfaces.cpp.inc"
