//===- Evaluator.cpp - Reference evaluation of braid IR --------------------===//

#include "braid/Eval/Evaluator.h"
#include "braid/Dialect/Braid/IR/ArgumentNames.h"
#include "braid/Dialect/Braid/IR/BF16BiasProduct.h"
#include "braid/Eval/PipelineExecutor.h"

#include "braid/rt/init.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallSet.h"
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
  // braid-zero3-prefetch reads the next instance's share ahead of it.
  std::string name =
      (op->hasAttr("braid.next_instance") ? nextPrefix : prefix) +
      op.getName().str();
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

  // A sharded parameter is materialised whole, then this device's block is
  // cut out of it, so every layout sees the same numbers.
  ShardingAttr sharding = op.getBlockOfAttr();
  MeshOp mesh;
  if (sharding) {
    if (!placement)
      return op.emitOpError() << "reads a block of sharded parameter '" << name
                              << "'; evaluate the per-device program with "
                                 "braid-eval --mesh";
    if (!sharding.getPartialAxes().empty())
      return op.emitOpError("a parameter cannot be a partial sum");
    mesh = placement->mesh;
  }
  SmallVector<int64_t> globalShape =
      sharding ? getGlobalShape(type.getShape(), sharding, mesh)
               : SmallVector<int64_t>(type.getShape());
  Tensor value(globalShape, dtypeFor(type));
  std::optional<TensorMap> &source = op.getState() ? optimizerState : weights;
  StringRef fileKind = op.getState() ? "optimizer-state" : "weights";
  // Transient state is never saved, so never read: it starts as zeros.
  if (source && !op->hasAttr(kTransientAttrName)) {
    auto w = source->find(name);
    if (w == source->end())
      return op.emitOpError() << (op.getState() ? "state" : "parameter")
                              << " '" << name << "' (" << op.getType()
                              << ") is missing from the " << fileKind
                              << " file";
    if (w->second.shape() != ArrayRef<int64_t>(globalShape))
      return op.emitOpError()
             << "parameter '" << name << "' has shape "
             << shapeString(w->second.shape()) << " in the " << fileKind
             << " file; "
             << "the model declares " << shapeString(globalShape);
    if (!isFloatDType(w->second.dtype()))
      return op.emitOpError() << "parameter '" << name << "' has integer "
                              << "dtype " << dtypeName(w->second.dtype())
                              << " in the " << fileKind << " file";
    std::copy_n(w->second.data(), value.numElements(), value.data());
    value.roundToDType();
  } else {
    initialise(value, op.getInit(), options.seed, name);
  }
  if (sharding)
    value = extractShard(value, sharding, mesh, placement->coords);
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

LogicalResult Evaluator::exchange(Operation *op, MeshOp mesh,
                                 ArrayRef<StringRef> axes, const Tensor &mine,
                                 SmallVectorImpl<Tensor> &group,
                                 unsigned &position) {
  SmallVector<unsigned> axisIndex;
  int64_t size = 1;
  for (StringRef a : axes) {
    axisIndex.push_back(*mesh.getAxisIndex(a));
    size *= mesh.getShape()[axisIndex.back()];
  }
  if (!placement) {
    if (size != 1)
      return op->emitOpError()
             << "exchanges data between " << size
             << " devices; evaluate the per-device program with braid-eval "
                "--mesh";
    group.push_back(mine);
    position = 0;
    return success();
  }
  if (mesh != placement->mesh)
    return op->emitOpError() << "uses mesh @" << mesh.getSymName()
                             << " but the run is on @"
                             << placement->mesh.getSymName();
  // Group members differ from this device only along `axes`; their order
  // is the row-major order of their coordinates along `axes`.
  ArrayRef<int64_t> shape = mesh.getShape();
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  SmallVector<int64_t> members;
  position = 0;
  for (int64_t k = 0; k < size; ++k) {
    SmallVector<int64_t> coords(placement->coords);
    int64_t rest = k;
    for (int64_t j = (int64_t)axisIndex.size() - 1; j >= 0; --j) {
      coords[axisIndex[j]] = rest % shape[axisIndex[j]];
      rest /= shape[axisIndex[j]];
    }
    int64_t rank = 0;
    for (auto [c, st] : llvm::zip(coords, strides))
      rank += c * st;
    if (rank == placement->rank)
      position = k;
    members.push_back(rank);
  }
  bool ok = placement->hub->exchange(
      placement->rank, mine, [&](ArrayRef<const Tensor *> all) {
        for (int64_t r : members)
          group.push_back(*all[r]);
      });
  if (!ok)
    return op->emitOpError() << "was abandoned on device "
                             << placement->rank
                             << " because another device failed";
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
  for (const auto &[name, t] : parameters) {
    ParamOp decl = declarations.lookup(name);
    if (decl.getState() && !decl->hasAttr(kTransientAttrName))
      out.insert({name, t});
  }
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
                                   StringRef nextInstancePrefix,
                                   ArrayRef<const Tensor *> args,
                                   SmallVectorImpl<Tensor> &results) {
  std::string saved = prefix, savedNext = nextPrefix;
  nextPrefix = prefix + nextInstancePrefix.str();
  prefix += instancePrefix.str();
  llvm::scope_exit restore([&] {
    prefix = saved;
    nextPrefix = savedNext;
  });
  return evaluateBlock(layer.getBody().front(), args, results);
}

LogicalResult Evaluator::evaluateOp(Operation &op,
                                    ArrayRef<const Tensor *> operands,
                                    SmallVectorImpl<Tensor> &results) {
  // Calls of outlined pieces (per-chunk programs) run the callee's body.
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (!callee || callee.isExternal())
      return call.emitOpError()
             << "calls @" << call.getCallee()
             << ", which has no body for braid-eval to run";
    return evaluateBlock(callee.getBody().front(), operands, results);
  }
  auto evaluable = dyn_cast<EvalOpInterface>(op);
  if (!evaluable && !hasEvalInterfaceExternalModels(op.getContext()))
    return op.emitOpError(
        "cannot be evaluated: the braid ops' evaluation models are not "
        "registered in this MLIRContext (add "
        "mlir::braid::registerEvalInterfaceExternalModels to its registry)");
  if (!evaluable)
    return op.emitOpError("has no reference semantics (EvalOpInterface), "
                          "so braid-eval cannot run it");
  return evaluable.evaluate(*this, operands, results);
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
    SmallVector<Tensor> outs;
    if (failed(evaluateOp(op, operands, outs)))
      return failure();
    if (outs.size() != op.getNumResults())
      return op.emitOpError() << "evaluation produced " << outs.size()
                              << " values for " << op.getNumResults()
                              << " results (evaluator bug)";
    for (auto [result, t] : llvm::zip_equal(op.getResults(), outs)) {
      // A future holds the tensor it will give.
      auto future = dyn_cast<FutureType>(result.getType());
      auto type = future ? future.getValueType()
                         : cast<RankedTensorType>(result.getType());
      if (t.shape() != type.getShape())
        return op.emitOpError() << "evaluation produced shape "
                                << shapeString(t.shape()) << " for result "
                                << "type " << type << " (evaluator bug)";
      DType dtype = dtypeFor(type);
      // A bf16 product its bias add sums before rounding: f32 until then.
      // The add's sum is rounded to f32, then to bf16, as the compiled
      // program (an f32 add, then braid.round) and PyTorch's addmm do.
      if (dtype == DType::BF16) {
        auto matmul = dyn_cast<MatmulOp>(&op);
        auto add = dyn_cast<AddOp>(&op);
        if (matmul && isBF16BiasProduct(matmul))
          dtype = DType::F32;
        else if (add && getBF16BiasProduct(add)) {
          t.setDType(DType::F32);
          t.roundToDType();
        }
      }
      t.setDType(dtype);
      t.roundToDType();
      values[result] = std::move(t);
    }
  }
  return block.getParentOp()->emitOpError("body has no terminator");
}

std::string Evaluator::getArgumentName(FunctionOpInterface fn,
                                       unsigned index) {
  return braid::getArgumentName(fn, index);
}

FailureOr<SmallVector<Tensor>>
Evaluator::makeInputs(FunctionOpInterface fn, const TensorMap &given) {
  SmallVector<Tensor> inputs;
  // Inputs are made, read and saved by name: two arguments of one name
  // would get one value.
  if (failed(verifyDistinctArgumentNames(fn)))
    return failure();
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
    // A sharded argument of a per-device program: the whole input is made
    // (or read) and this device's block taken from it.
    auto sharding = fn.getArgAttrOfType<ShardingAttr>(i, "braid.block_of");
    if (sharding && !placement)
      return fn.emitError() << "argument '" << name
                            << "' is sharded; evaluate the per-device "
                               "program with braid-eval --mesh";
    if (sharding)
      type = RankedTensorType::get(
          getGlobalShape(type.getShape(), sharding, placement->mesh),
          type.getElementType());
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
    if (sharding)
      t = extractShard(t, sharding, placement->mesh, placement->coords);
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
  prefix.clear();
  nextPrefix.clear();
  return call(fn, inputs);
}

FailureOr<SmallVector<Tensor>> Evaluator::call(FunctionOpInterface fn,
                                               ArrayRef<Tensor> inputs) {
  if (fn.isExternal())
    return fn.emitError() << "@" << fn.getName() << " has no body";
  SmallVector<const Tensor *> args;
  for (const Tensor &t : inputs)
    args.push_back(&t);
  SmallVector<Tensor> results;
  if (failed(evaluateBlock(fn.getFunctionBody().front(), args, results)))
    return failure();
  return results;
}

void mlir::braid::accumulateMean(SmallVectorImpl<Tensor> &sums,
                                 ArrayRef<Tensor> values, int64_t index,
                                 int64_t count) {
  if (index == 0)
    sums.assign(values.begin(), values.end());
  else
    for (auto [sum, t] : llvm::zip_equal(sums, values)) {
      for (int64_t k = 0; k < sum.numElements(); ++k)
        sum[k] += t[k];
      sum.roundToDType();
    }
  if (index + 1 < count)
    return;
  for (Tensor &sum : sums) {
    double inv = roundToDType(1.0 / double(count), sum.dtype());
    for (int64_t k = 0; k < sum.numElements(); ++k)
      sum[k] *= inv;
    sum.roundToDType();
  }
}

LogicalResult Evaluator::runPipeline(PipelineOp op,
                                     ArrayRef<const Tensor *> args,
                                     SmallVectorImpl<Tensor> &results) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      op, op.getCalleeAttr());
  if (!callee)
    return op.emitOpError() << "'" << op.getCallee()
                            << "' does not name a function";
  int64_t m = op.getNumMicrobatches();
  std::vector<SmallVector<Tensor>> microbatches(m);
  for (const Tensor *t : args)
    for (int64_t i = 0; i < m; ++i) {
      Tensor slice(t->shape().drop_front(), t->dtype());
      std::copy_n(t->data() + i * slice.numElements(), slice.numElements(),
                  slice.data());
      microbatches[i].push_back(std::move(slice));
    }
  if (options.pipelineSchedule) {
    if (!callee->hasAttr("braid.schedule"))
      return op.emitOpError()
             << "cannot run in schedule order: @" << callee.getName()
             << " has no braid.schedule (run braid-pipeline-outline and "
                "braid-pipeline-schedule)";
    return runScheduledPipeline(*this, callee, microbatches, results);
  }
  // Micro-batch by micro-batch, summing in order, then the means.
  for (int64_t i = 0; i < m; ++i) {
    FailureOr<SmallVector<Tensor>> out = call(callee, microbatches[i]);
    if (failed(out))
      return failure();
    accumulateMean(results, *out, i, m);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Multi-device runs
//===----------------------------------------------------------------------===//

bool ExchangeHub::barrier() {
  std::unique_lock<std::mutex> lock(mutex);
  if (aborted)
    return false;
  uint64_t gen = generation;
  if (++arrived == numDevices) {
    arrived = 0;
    ++generation;
    wake.notify_all();
    return true;
  }
  wake.wait(lock, [&] { return generation != gen || aborted; });
  return !aborted;
}

bool ExchangeHub::exchange(
    int64_t rank, const Tensor &mine,
    llvm::function_ref<void(ArrayRef<const Tensor *>)> read) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    slots[rank] = &mine;
  }
  if (!barrier())
    return false;
  read(slots);
  return barrier();
}

void ExchangeHub::abort() {
  std::lock_guard<std::mutex> lock(mutex);
  aborted = true;
  wake.notify_all();
}

SmallVector<int64_t> mlir::braid::getDeviceCoords(MeshOp mesh, int64_t rank) {
  ArrayRef<int64_t> shape = mesh.getShape();
  SmallVector<int64_t> coords(shape.size());
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    coords[i] = rank % shape[i];
    rank /= shape[i];
  }
  return coords;
}

/// For each dimension: the number of blocks it is split into, and the
/// index of the block the device at `coords` holds.
static void blockIndex(ArrayRef<StringRef> axes, MeshOp mesh,
                       ArrayRef<int64_t> coords, int64_t &count,
                       int64_t &index) {
  count = 1;
  index = 0;
  for (StringRef a : axes) {
    unsigned i = *mesh.getAxisIndex(a);
    count *= mesh.getShape()[i];
    index = index * mesh.getShape()[i] + coords[i];
  }
}
static void blockIndex(ShardingAttr sharding, MeshOp mesh,
                       ArrayRef<int64_t> coords, unsigned dim, int64_t &count,
                       int64_t &index) {
  blockIndex(sharding.getDimAxes(dim), mesh, coords, count, index);
}

namespace {
/// The block the device at `coords` holds, as a box in the view of the
/// whole tensor where strided splits are plain (ShardingAttr::getView):
/// row-major, the view's flat indices are the tensor's, and the box's are
/// the device's local tensor's.
struct ViewBlock {
  SmallVector<int64_t> global, local, offsets;
  ViewBlock(ShardingAttr sharding, MeshOp mesh, ArrayRef<int64_t> coords,
            ArrayRef<int64_t> shape) {
    SmallVector<SmallVector<StringRef>> axes;
    sharding.getView(shape, global, axes);
    for (auto [n, dimAxes] : llvm::zip(global, axes)) {
      int64_t count, index;
      blockIndex(dimAxes, mesh, coords, count, index);
      local.push_back(n / count);
      offsets.push_back(index * local.back());
    }
  }
};
} // namespace

SmallVector<int64_t> mlir::braid::getGlobalShape(ArrayRef<int64_t> local,
                                                 ShardingAttr sharding,
                                                 MeshOp mesh) {
  SmallVector<int64_t> shape(local);
  SmallVector<int64_t> zeros(mesh.getShape().size(), 0);
  for (unsigned d = 0; d < shape.size(); ++d) {
    int64_t count, index;
    blockIndex(sharding, mesh, zeros, d, count, index);
    shape[d] *= count;
  }
  return shape;
}

/// Calls `fn(globalFlat, localFlat)` for every element of the block at
/// `offsets` with shape `local` inside a tensor of shape `global`.
template <typename Fn>
static void forEachInBlock(ArrayRef<int64_t> global, ArrayRef<int64_t> local,
                           ArrayRef<int64_t> offsets, Fn fn) {
  int64_t rank = global.size(), n = numElements(local);
  SmallVector<int64_t> idx(rank, 0), strides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * global[i + 1];
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t g = 0;
    for (int64_t d = 0; d < rank; ++d)
      g += (offsets[d] + idx[d]) * strides[d];
    fn(g, flat);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < local[d])
        break;
      idx[d] = 0;
    }
  }
}

Tensor mlir::braid::extractShard(const Tensor &global, ShardingAttr sharding,
                                 MeshOp mesh, ArrayRef<int64_t> coords) {
  SmallVector<int64_t> local(global.shape());
  for (unsigned d = 0; d < local.size(); ++d) {
    int64_t count, index;
    blockIndex(sharding, mesh, coords, d, count, index);
    local[d] /= count;
  }
  Tensor out(local, global.dtype());
  ViewBlock view(sharding, mesh, coords, global.shape());
  forEachInBlock(view.global, view.local, view.offsets,
                 [&](int64_t g, int64_t l) { out[l] = global[g]; });
  return out;
}

FailureOr<Tensor> mlir::braid::assembleShards(ArrayRef<Tensor> blocks,
                                              ShardingAttr sharding,
                                              MeshOp mesh,
                                              std::string &error) {
  ArrayRef<int64_t> local = blocks[0].shape();
  SmallVector<int64_t> shape = getGlobalShape(local, sharding, mesh);
  Tensor global(shape, blocks[0].dtype(), 0.0);
  // Devices whose coordinates along the axes that neither split nor sum the
  // value are all zero contribute; the others are replicas and must agree.
  llvm::SmallSet<unsigned, 4> used;
  for (unsigned d = 0; d < local.size(); ++d)
    for (StringRef a : sharding.getDimAxes(d))
      used.insert(*mesh.getAxisIndex(a));
  for (StringRef a : sharding.getPartialAxes())
    used.insert(*mesh.getAxisIndex(a));
  SmallVector<int64_t> ranks;
  for (int64_t r = 0, n = blocks.size(); r < n; ++r) {
    SmallVector<int64_t> coords = getDeviceCoords(mesh, r);
    ViewBlock view(sharding, mesh, coords, shape);
    bool primary = true;
    SmallVector<int64_t> source(coords);
    for (unsigned i = 0; i < coords.size(); ++i)
      if (!used.contains(i) && coords[i] != 0) {
        primary = false;
        source[i] = 0;
      }
    if (primary) {
      forEachInBlock(view.global, view.local, view.offsets,
                     [&](int64_t g, int64_t l) { global[g] += blocks[r][l]; });
      continue;
    }
    // A replica: compare with the primary copy.
    int64_t primaryRank = 0;
    for (unsigned i = 0; i < source.size(); ++i)
      primaryRank = primaryRank * mesh.getShape()[i] + source[i];
    const Tensor &p = blocks[primaryRank];
    for (int64_t i = 0; i < p.numElements(); ++i)
      if (p[i] != blocks[r][i]) {
        error = "devices " + std::to_string(primaryRank) + " and " +
                std::to_string(r) +
                " should hold the same block (they are replicas) but "
                "differ at element " +
                std::to_string(i);
        return failure();
      }
  }
  return global;
}
