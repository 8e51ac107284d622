//===- BraidDialect.cpp - The braid dialect -------------------------------===//

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/ArgumentNames.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::braid;

#include "braid/Dialect/Braid/IR/BraidDialect.cpp.inc"

void BraidDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "braid/Dialect/Braid/IR/BraidOps.cpp.inc"
      >();
}

LogicalResult BraidDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == "braid.phase") {
    auto phase = dyn_cast<StringAttr>(attr.getValue());
    if (!phase || !llvm::is_contained({"F", "B", "W"}, phase.getValue()))
      return op->emitError() << "braid.phase must be \"F\", \"B\" or \"W\"";
    return success();
  }
  if (name == "braid.cause") {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError("braid.cause must be a string");
    return success();
  }
  if (name == "braid.chunk") {
    auto chunk = dyn_cast<IntegerAttr>(attr.getValue());
    if (!chunk || chunk.getValue().isNegative())
      return op->emitError("braid.chunk must be a non-negative integer");
    return success();
  }
  if (name == "braid.bucket") {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    // On the fused collective (and the wait of its started form).
    if (!count || count.getValue().slt(2))
      return op->emitError("braid.bucket must be the number (2 or more) of "
                           "collectives a collective fuses");
    return success();
  }
  if (name == "braid.compress") {
    auto format = dyn_cast<StringAttr>(attr.getValue());
    if (!format ||
        !llvm::is_contained({"bf16", "fp16", "powersgd"}, format.getValue()))
      return op->emitError(
          "braid.compress must be \"bf16\", \"fp16\" or \"powersgd\"");
    if ((format.getValue() == "powersgd") != op->hasAttr("braid.powersgd"))
      return op->emitError("braid.compress = \"powersgd\" goes with "
                           "braid.powersgd, and only with it");
    // On a sum that braid-compress-gradients marked (and the wait of its
    // started form).
    auto collective = dyn_cast<CollectiveOpInterface>(op);
    if (!isa<WaitOp>(op) &&
        (!collective || collective.getReduction() != ReduceKind::sum))
      return op->emitError("braid.compress marks an all_reduce or "
                           "reduce_scatter that sums");
    return success();
  }
  if (name == "braid.powersgd") {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto rank = dict ? dict.getAs<IntegerAttr>("rank") : IntegerAttr();
    if (!dict || !rank || rank.getInt() < 1 || !dict.getAs<StringAttr>("q") ||
        !dict.getAs<StringAttr>("error"))
      return op->emitError("braid.powersgd must be {rank = R (positive), "
                           "q = \"name\", error = \"name\"}");
    return success();
  }
  if (name == "braid.chunk_stages") {
    auto stages = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!stages ||
        llvm::any_of(stages.asArrayRef(), [](int64_t s) { return s < 0; }))
      return op->emitError("braid.chunk_stages must be an array<i64> of "
                           "non-negative stage numbers");
    return success();
  }
  if (name == "braid.schedule") {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto ranks = dict ? dict.getAs<ArrayAttr>("ranks") : ArrayAttr();
    if (!dict || !dict.getAs<StringAttr>("name") ||
        !dict.getAs<IntegerAttr>("microbatches") || !ranks ||
        llvm::any_of(ranks, [](Attribute rank) {
          auto actions = dyn_cast<ArrayAttr>(rank);
          return !actions || llvm::any_of(actions, [](Attribute a) {
            return !isa<StringAttr>(a);
          });
        }))
      return op->emitError("braid.schedule must be {name = \"...\", "
                           "microbatches = N, ranks = [[\"action\", ...], "
                           "...]}");
    return success();
  }
  if (name == "braid.next_instance") {
    // braid-zero3-prefetch: a layer instance reads the next one's share.
    if (!isa<UnitAttr>(attr.getValue()) || !isa<ParamOp>(op) ||
        !op->getParentOfType<LayerOp>())
      return op->emitError("braid.next_instance is a unit attribute of a "
                           "braid.param in a braid.layer");
    return success();
  }
  if (name == "braid.pending_sum") {
    // braid-train-step's defer-validation: a scalar state tensor each
    // device keeps its share of, reduced where it is read (braid-partition).
    auto type = op->getNumResults() ? op->getResult(0).getType()
                : isa<StoreParamOp>(op) ? op->getOperand(0).getType()
                                        : Type();
    auto tensor = dyn_cast_or_null<RankedTensorType>(type);
    if (!isa<UnitAttr>(attr.getValue()) || !isa<ParamOp, StoreParamOp>(op) ||
        !tensor || tensor.getRank() != 0)
      return op->emitError("braid.pending_sum is a unit attribute of a "
                           "braid.param or braid.store_param of a rank-0 "
                           "tensor");
    return success();
  }
  if (name == kTransientAttrName) {
    auto param = dyn_cast<ParamOp>(op);
    if (!isa<UnitAttr>(attr.getValue()) || !param || !param.getState())
      return op->emitError("braid.transient is a unit attribute of a "
                           "braid.param {state}");
    return success();
  }
  if (name == "braid.start_in_pipeline") {
    // braid-schedule-collectives: issued inside the pipeline computing its
    // operands (see the lowering of braid.pipeline).
    auto collective = dyn_cast<CollectiveOpInterface>(op);
    if (!isa<UnitAttr>(attr.getValue()) || !collective ||
        !collective.isStarted())
      return op->emitError("braid.start_in_pipeline is a unit attribute of "
                           "a started collective");
    return success();
  }
  if (name == "braid.bf16_operands") {
    // braid-legalize-bf16: the f32 operands hold bf16 values (the lhs and
    // rhs of a braid.matmul, or of the braid.matmul_bias made from one).
    bool matmul = isa<MatmulOp, MatmulBiasOp>(op);
    if (!isa<UnitAttr>(attr.getValue()) || !matmul ||
        !getElementTypeOrSelf(op->getOperand(0).getType()).isF32() ||
        !getElementTypeOrSelf(op->getOperand(1).getType()).isF32())
      return op->emitError("braid.bf16_operands is a unit attribute of a "
                           "braid.matmul of f32 operands (or of a "
                           "braid.matmul_bias made from one)");
    return success();
  }
  if (name == "braid.shardings") {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    SmallVector<Value> tensors;
    for (Value r : op->getResults())
      if (isa<RankedTensorType>(r.getType()))
        tensors.push_back(r);
    if (!list || list.size() != tensors.size())
      return op->emitError() << "braid.shardings must list one "
                                "#braid.sharding per tensor result";
    for (auto [a, r] : llvm::zip(list, tensors)) {
      auto sharding = dyn_cast<ShardingAttr>(a);
      if (!sharding)
        return op->emitError("braid.shardings must list #braid.sharding "
                             "attributes");
      if (failed(verifyShardingFor(op, sharding, r.getType(), "a result")))
        return failure();
    }
    return success();
  }
  return op->emitError() << "unknown braid attribute '" << name
                         << "'; known: braid.phase, braid.shardings, "
                            "braid.cause, braid.bucket, braid.compress, "
                            "braid.powersgd, braid.chunk, braid.chunk_stages, "
                            "braid.schedule, braid.next_instance, "
                            "braid.start_in_pipeline, braid.bf16_operands, "
                            "braid.pending_sum, braid.transient";
}

LogicalResult BraidDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == "braid.gradient_of" || name == "braid.name") {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "result #" << resultIndex << ": " << name
                             << " must be a string";
    return success();
  }
  if (name == "braid.sharding" || name == "braid.block_of") {
    auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
    auto fn = dyn_cast<FunctionOpInterface>(op);
    if (!sharding || !fn)
      return op->emitError() << "result #" << resultIndex << ": " << name
                             << " must be a #braid.sharding<...>";
    return verifyShardingFor(op, sharding, fn.getResultTypes()[resultIndex],
                             ("result #" + Twine(resultIndex)).str(),
                             /*local=*/name == "braid.block_of");
  }
  if (name == "braid.instances") {
    auto range = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!range || range.size() != 2 || range[0] < 0 || range[1] < 1)
      return op->emitError() << "result #" << resultIndex
                             << ": braid.instances must be array<i64: first, "
                                "count> with first >= 0 and count >= 1";
    return success();
  }
  if (name == "braid.instance_names") {
    // The repeat's instance_names, one per instance of braid.instances.
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    auto fn = dyn_cast<FunctionOpInterface>(op);
    auto range = fn ? fn.getResultAttrOfType<DenseI64ArrayAttr>(
                          resultIndex, "braid.instances")
                    : nullptr;
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>) || !range ||
        range.size() != 2 || (int64_t)names.size() != range[1])
      return op->emitError() << "result #" << resultIndex
                             << ": braid.instance_names must be an array of "
                                "strings, one per instance of "
                                "braid.instances";
    return success();
  }
  return op->emitError() << "result #" << resultIndex
                         << ": unknown braid attribute '" << name
                         << "'; known: braid.name, braid.gradient_of, "
                            "braid.instances, braid.instance_names, "
                            "braid.sharding, braid.block_of";
}

LogicalResult BraidDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  // A declaration has attributes on its arguments but no block: the type
  // comes from the function type (found by fuzz_braid_opt.cpp: a
  // declaration with braid.range crashed the verifier).
  Type argType;
  if (auto fn = dyn_cast<FunctionOpInterface>(op);
      fn && argIndex < fn.getNumArguments())
    argType = fn.getArgumentTypes()[argIndex];
  else if (Region &region = op->getRegion(regionIndex);
           !region.empty() && argIndex < region.getNumArguments())
    argType = region.getArgument(argIndex).getType();
  else
    return op->emitError() << "argument #" << argIndex << ": attribute '"
                           << name << "' on an argument the op does not have";
  if (name == "braid.name") {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError()
             << "argument #" << argIndex << ": braid.name must be a string";
    return success();
  }
  if (name == "braid.range") {
    auto range = dyn_cast<IntegerAttr>(attr.getValue());
    if (!range || range.getInt() < 1)
      return op->emitError() << "argument #" << argIndex
                             << ": braid.range must be a positive integer";
    auto tensor = dyn_cast<RankedTensorType>(argType);
    if (!tensor || !tensor.getElementType().isInteger())
      return op->emitError() << "argument #" << argIndex
                             << ": braid.range applies to integer tensors, "
                                "not "
                             << argType;
    return success();
  }
  // The argument's role in a training step's --data batch: token ids, or
  // labels that are the next tokens (ProgramDriver.cpp feeds them from the
  // runtime's data source).
  if (name == "braid.data") {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (!role || (role.getValue() != "tokens" && role.getValue() != "labels"))
      return op->emitError() << "argument #" << argIndex
                             << ": braid.data must be \"tokens\" or "
                                "\"labels\"";
    auto tensor = dyn_cast<RankedTensorType>(argType);
    if (!tensor || !tensor.getElementType().isInteger())
      return op->emitError() << "argument #" << argIndex
                             << ": braid.data applies to integer tensors, "
                                "not "
                             << argType;
    return success();
  }
  if (name == "braid.sharding" || name == "braid.block_of") {
    auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
    if (!sharding)
      return op->emitError() << "argument #" << argIndex << ": " << name
                             << " must be a #braid.sharding<...>";
    return verifyShardingFor(op, sharding, argType,
                             ("argument #" + Twine(argIndex)).str(),
                             /*local=*/name == "braid.block_of");
  }
  return op->emitError() << "argument #" << argIndex
                         << ": unknown braid attribute '" << name
                         << "'; known: braid.name, braid.range, "
                            "braid.data, braid.sharding, braid.block_of";
}

std::string mlir::braid::getArgumentName(FunctionOpInterface fn,
                                         unsigned index) {
  if (auto name = fn.getArgAttrOfType<StringAttr>(index, "braid.name"))
    return name.str();
  return "arg" + std::to_string(index);
}

LogicalResult mlir::braid::verifyDistinctArgumentNames(FunctionOpInterface fn) {
  llvm::StringSet<> names;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    std::string name = getArgumentName(fn, i);
    if (!names.insert(name).second)
      return fn.emitError() << "argument #" << i << " is named '" << name
                            << "' as an earlier argument is; arguments "
                               "need distinct names (braid.name)";
  }
  return success();
}
