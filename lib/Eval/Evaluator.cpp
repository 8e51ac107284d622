//===- Evaluator.cpp - Reference evaluation of braid IR --------------------===//

#include "braid/Eval/Evaluator.h"

#include "braid/rt/init.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mlir::braid;

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

DType Evaluator::dtypeFor(RankedTensorType type) const {
  DType d = getDType(type.getElementType()).value_or(DType::F64);
  return options.f64 && isFloatDType(d) ? DType::F64 : d;
}

/// Fills `t` (of `dtype`) with values of the initializer `init` for the
/// stream named `name`, rounded to the dtype.
static void initialise(Tensor &t, InitAttr init, uint64_t seed,
                       StringRef name) {
  uint64_t key = braid_rt_init_key(seed, name.str().c_str());
  braid_rt_init_fill_f64(static_cast<braid_rt_init_kind_t>(init.getKind()),
                         init.getA().convertToDouble(),
                         init.getB().convertToDouble(), key, 0,
                         t.numElements(), t.data());
  t.roundToDType();
}

FailureOr<Tensor> Evaluator::getParameter(ParamOp op) {
  std::string name = prefix + op.getName().str();
  auto type = cast<RankedTensorType>(op.getType());
  auto it = parameters.find(name);
  if (it != parameters.end()) {
    ParamOp first = declarations.lookup(name);
    if (first.getType() != op.getType() || first.getInit() != op.getInit() ||
        first.getState() != op.getState()) {
      InFlightDiagnostic diag = op.emitOpError()
                                << "declares parameter '" << name << "' as "
                                << op.getType() << " with " << op.getInit()
                                << ", but it was already declared as "
                                << first.getType() << " with "
                                << first.getInit();
      diag.attachNote(first.getLoc()) << "first declaration";
      return failure();
    }
    return it->second;
  }

  Tensor value(type.getShape(), dtypeFor(type));
  std::optional<TensorMap> &source = op.getState() ? optimizerState : weights;
  StringRef fileKind = op.getState() ? "optimizer-state" : "weights";
  if (source) {
    auto w = source->find(name);
    if (w == source->end())
      return op.emitOpError() << (op.getState() ? "state" : "parameter")
                              << " '" << name << "' (" << op.getType()
                              << ") is missing from the " << fileKind
                              << " file";
    if (w->second.shape() != type.getShape())
      return op.emitOpError()
             << "parameter '" << name << "' has shape "
             << shapeString(w->second.shape()) << " in the " << fileKind
             << " file; "
             << "the model declares " << shapeString(type.getShape());
    if (!isFloatDType(w->second.dtype()))
      return op.emitOpError() << "parameter '" << name << "' has integer "
                              << "dtype " << dtypeName(w->second.dtype())
                              << " in the " << fileKind << " file";
    std::copy_n(w->second.data(), value.numElements(), value.data());
    value.roundToDType();
  } else {
    initialise(value, op.getInit(), options.seed, name);
  }
  declarations[name] = op;
  parameters.insert({name, value});
  return value;
}

LogicalResult Evaluator::storeParameter(StoreParamOp op, const Tensor &value) {
  std::string name = prefix + op.getName().str();
  auto it = parameters.find(name);
  if (it == parameters.end())
    return op.emitOpError() << "stores '" << name
                            << "', which no braid.param has declared yet";
  if (it->second.shape() != value.shape())
    return op.emitOpError() << "stores a value of shape "
                            << shapeString(value.shape()) << " into '" << name
                            << "' of shape " << shapeString(it->second.shape());
  DType dtype = it->second.dtype();
  it->second = value;
  it->second.setDType(dtype);
  it->second.roundToDType();
  return success();
}

TensorMap Evaluator::getParameters() const {
  TensorMap out;
  for (const auto &[name, t] : parameters)
    if (!declarations.lookup(name).getState())
      out.insert({name, t});
  return out;
}

TensorMap Evaluator::getOptimizerState() const {
  TensorMap out;
  for (const auto &[name, t] : parameters)
    if (declarations.lookup(name).getState())
      out.insert({name, t});
  return out;
}

LogicalResult Evaluator::checkAllWeightsUsed(FunctionOpInterface fn) {
  for (auto [source, kind] : {std::make_pair(&weights, "weights"),
                              std::make_pair(&optimizerState,
                                             "optimizer-state")}) {
    if (!*source)
      continue;
    std::string unused;
    for (const auto &kv : **source)
      if (!parameters.count(kv.first))
        unused += (unused.empty() ? "'" : ", '") + kv.first + "'";
    if (!unused.empty())
      return fn.emitError() << "the " << kind
                            << " file has tensors that no parameter of @"
                            << fn.getName() << " uses: " << unused
                            << " (wrong file or wrong model?)";
  }
  return success();
}

LogicalResult Evaluator::callLayer(LayerOp layer, StringRef instancePrefix,
                                   ArrayRef<const Tensor *> args,
                                   SmallVectorImpl<Tensor> &results) {
  std::string saved = prefix;
  prefix += instancePrefix.str();
  llvm::scope_exit restore([&] { prefix = saved; });
  return evaluateBlock(layer.getBody().front(), args, results);
}

LogicalResult Evaluator::evaluateBlock(Block &block,
                                       ArrayRef<const Tensor *> args,
                                       SmallVectorImpl<Tensor> &results) {
  DenseMap<Value, Tensor> values;
  for (auto [arg, t] : llvm::zip_equal(block.getArguments(), args))
    values[arg] = *t;
  for (Operation &op : block) {
    SmallVector<const Tensor *> operands;
    for (Value v : op.getOperands()) {
      auto it = values.find(v);
      if (it == values.end())
        return op.emitOpError("uses a value the evaluator has not computed");
      operands.push_back(&it->second);
    }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      for (const Tensor *t : operands)
        results.push_back(*t);
      return success();
    }
    auto evaluable = dyn_cast<EvalOpInterface>(op);
    if (!evaluable)
      return op.emitOpError("has no reference semantics (EvalOpInterface), "
                            "so braid-eval cannot run it");
    SmallVector<Tensor> outs;
    if (failed(evaluable.evaluate(*this, operands, outs)))
      return failure();
    if (outs.size() != op.getNumResults())
      return op.emitOpError() << "evaluation produced " << outs.size()
                              << " values for " << op.getNumResults()
                              << " results (evaluator bug)";
    for (auto [result, t] : llvm::zip_equal(op.getResults(), outs)) {
      auto type = cast<RankedTensorType>(result.getType());
      if (t.shape() != type.getShape())
        return op.emitOpError() << "evaluation produced shape "
                                << shapeString(t.shape()) << " for result "
                                << "type " << type << " (evaluator bug)";
      t.setDType(dtypeFor(type));
      t.roundToDType();
      values[result] = std::move(t);
    }
  }
  return block.getParentOp()->emitOpError("body has no terminator");
}

std::string Evaluator::getArgumentName(FunctionOpInterface fn,
                                       unsigned index) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(index, "braid.name"))
    return name.str();
  return "arg" + std::to_string(index);
}

FailureOr<SmallVector<Tensor>>
Evaluator::makeInputs(FunctionOpInterface fn, const TensorMap &given) {
  SmallVector<Tensor> inputs;
  llvm::StringSet<> names;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    std::string name = getArgumentName(fn, i);
    names.insert(name);
    auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    if (!type || !type.hasStaticShape())
      return fn.emitError() << "argument '" << name << "' has type "
                            << fn.getArgument(i).getType()
                            << "; braid-eval needs statically shaped tensors";
    DType dtype = dtypeFor(type);
    Tensor t(type.getShape(), dtype);
    auto it = given.find(name);
    if (it != given.end()) {
      if (it->second.shape() != type.getShape())
        return fn.emitError() << "input '" << name << "' has shape "
                              << shapeString(it->second.shape())
                              << " in the inputs file; @" << fn.getName()
                              << " expects " << type;
      if (isFloatDType(it->second.dtype()) != isFloatDType(dtype))
        return fn.emitError() << "input '" << name << "' has dtype "
                              << dtypeName(it->second.dtype())
                              << " in the inputs file; @" << fn.getName()
                              << " expects " << type;
      std::copy_n(it->second.data(), t.numElements(), t.data());
      if (!isFloatDType(dtype))
        for (int64_t j = 0; j < t.numElements(); ++j)
          if (t[j] != std::floor(t[j]))
            return fn.emitError() << "input '" << name
                                  << "' has a non-integer value";
      t.roundToDType();
    } else if (isFloatDType(dtype)) {
      uint64_t key = braid_rt_init_key(options.seed, name.c_str());
      braid_rt_init_fill_f64(BRAID_RT_INIT_NORMAL, 1.0, 0.0, key, 0,
                             t.numElements(), t.data());
      t.roundToDType();
    } else {
      auto range = fn.getArgAttrOfType<IntegerAttr>(i, "braid.range");
      if (!range || range.getInt() < 1)
        return fn.emitError() << "integer argument '" << name
                              << "' needs a positive 'braid.range' argument "
                                 "attribute to be generated, or a value in "
                                 "the inputs file";
      uint64_t key = braid_rt_init_key(options.seed, name.c_str());
      braid_rt_init_fill_f64(BRAID_RT_INIT_UNIFORM, 0.0, range.getInt(), key,
                             0, t.numElements(), t.data());
      for (int64_t j = 0; j < t.numElements(); ++j)
        t[j] = std::floor(t[j]);
    }
    inputs.push_back(std::move(t));
  }
  for (const auto &kv : given)
    if (!names.contains(kv.first))
      return fn.emitError() << "the inputs file has '" << kv.first << "', "
                            << "which is not an argument of @"
                            << fn.getName();
  return inputs;
}

FailureOr<SmallVector<Tensor>> Evaluator::run(FunctionOpInterface fn,
                                              ArrayRef<Tensor> inputs) {
  if (fn.isExternal())
    return fn.emitError() << "@" << fn.getName() << " has no body";
  SmallVector<const Tensor *> args;
  for (const Tensor &t : inputs)
    args.push_back(&t);
  SmallVector<Tensor> results;
  prefix.clear();
  if (failed(evaluateBlock(fn.getFunctionBody().front(), args, results)))
    return failure();
  return results;
}
