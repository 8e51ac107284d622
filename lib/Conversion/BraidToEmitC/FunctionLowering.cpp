//===- FunctionLowering.cpp - A function's buffers and calls ----------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// The buffer type of a tensor type, or null when the element type is not one
/// the kernels take.
Type mlir::braid::lowering::getBufferType(Type type) {
  // A future's buffer is that of the tensor it will hold.
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return {};
  Type element = tensor.getElementType();
  if (element.isF32() || element.isInteger(32) || element.isInteger(64))
    return emitc::PointerType::get(element);
  return {};
}

StringRef mlir::braid::lowering::getElementSuffix(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isInteger(32))
    return "i32";
  return "i64";
}

/// The C string literal of `s`.
std::string mlir::braid::lowering::quote(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// "file:line:col: op-name", for messages from the running program.
std::string mlir::braid::lowering::describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto fileLoc = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << fileLoc.getFilename().getValue() << ":" << fileLoc.getLine() << ":"
       << fileLoc.getColumn() << ": ";
  os << op->getName();
  return s;
}

//===----------------------------------------------------------------------===//
// FunctionLowering
//===----------------------------------------------------------------------===//

Value FunctionLowering::allocate(RankedTensorType type) {
  Type bufferType = getBufferType(type);
  auto element = cast<emitc::PointerType>(bufferType).getPointee();
  Value global = module.getBufferGlobal(b, loc, bufferType);
  Value address = emitc::AddressOfOp::create(
      b, loc, emitc::PointerType::get(bufferType), global);
  return emitc::CallOpaqueOp::create(
             b, loc, bufferType,
             ("braid_rt_program_buffer_" + getElementSuffix(element)).str(),
             ValueRange{address, i64(type.getNumElements())})
      .getResult(0);
}

Value FunctionLowering::text(StringRef s) {
  MLIRContext *ctx = b.getContext();
  return emitc::LiteralOp::create(
      b, loc, emitc::PointerType::get(emitc::OpaqueType::get(ctx, "const char")),
      b.getStringAttr(quote(s)));
}

SmallVector<Value> FunctionLowering::withStream(ArrayRef<Value> args) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> all = {emitc::LiteralOp::create(
      b, loc,
      emitc::PointerType::get(emitc::OpaqueType::get(ctx, "braid_rt_stream_t")),
      module.target.stream)};
  llvm::append_range(all, args);
  return all;
}

void FunctionLowering::upload(Value from, Value to, int64_t bytes) {
  callChecked("braid_rt_memory_copy_to_device",
              withStream({to, from, i64(bytes)}));
}

void FunctionLowering::callChecked(StringRef callee, ArrayRef<Value> args) {
  MLIRContext *ctx = b.getContext();
  Value status = emitc::CallOpaqueOp::create(
                     b, loc, emitc::OpaqueType::get(ctx, "braid_rt_status_t"),
                     callee, args)
                     .getResult(0);
  call("braid_rt_program_check", {status, whereText()});
}

void FunctionLowering::copy(Type elementType, Value from, Value to,
                            int64_t count) {
  // The kernels copy f32 and i32; the program support header i64.
  if (elementType.isInteger(64))
    return call("braid_rt_program_copy_i64", {from, i64(count), to});
  kernel(elementType.isF32() ? "braid_rt_copy_f32" : "braid_rt_copy_i32",
         {from, i64(count), to});
}

LogicalResult FunctionLowering::lowerBody(Block &body, emitc::FuncOp target,
                                          Value slots, ArrayRef<Value> outs) {
  Block &entry = target.getBody().front();
  for (auto [arg, buffer] : llvm::zip(body.getArguments(),
                                      entry.getArguments()))
    buffers[arg] = buffer;
  layerSlots = slots;
  // A function running a scheduled pipeline: place what follows it.
  std::optional<StagePlacement> placement;
  if (module.pipelineMask &&
      llvm::any_of(body.getOps<PipelineOp>(), [](PipelineOp) { return true; }) &&
      failed(placeStages(body, placement)))
    return failure();
  for (Operation &op : body) {
    loc = op.getLoc();
    where = describe(&op);
    if (placement)
      for (auto [operand, stage] : placement->getBroadcasts(&op)) {
        Value v = op.getOperand(operand);
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || !type.getElementType().isF32())
          return op.emitOpError()
                 << "needs operand " << operand << " of type " << v.getType()
                 << " from pipeline stage " << stage
                 << "; generated pipelines move f32 only";
        // Broadcasting into a slot's buffer needs it on every stage.
        if (get(v).getDefiningOp<emitc::LoadOp>())
          module.stageLocal = false;
        call("braid_rt_program_pp_broadcast_f32",
             {i64(module.pipelineMask), get(v), i64(countOf(v)), i64(stage),
              whereText()});
      }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      for (auto [value, out] : llvm::zip(op.getOperands(), outs))
        copy(typeOf(value).getElementType(), get(value), out, countOf(value));
      emitc::ReturnOp::create(b, loc, Value());
      continue;
    }
    for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
      if (!getBufferType(v.getType()))
        return op.emitOpError()
               << "has a value of type " << v.getType()
               << "; generated code handles statically shaped tensors of "
                  "f32, i32 and i64 only";
    Block *block = b.getInsertionBlock();
    Operation *last = b.getInsertionPoint() == block->begin()
                          ? nullptr
                          : &*std::prev(b.getInsertionPoint());
    std::optional<LogicalResult> lowered = module.table.lower(&op, *this);
    if (!lowered)
      return op.emitOpError()
             << "has no lowering to EmitC yet (braid-lower-to-emitc handles "
                "compute ops, parameters, braid.repeat and collectives)";
    if (failed(*lowered))
      return failure();
    if (placement && placement->getStage(&op) != StagePlacement::kAll)
      guardStage(&op, block, last, placement->getStage(&op));
  }
  return success();
}

LogicalResult
FunctionLowering::placeStages(Block &body,
                              std::optional<StagePlacement> &placement) {
  // A slot's owner is the stage placed to store it, and a read of an
  // owned slot is current only there: place until the owners settle.
  std::vector<int64_t> owners(module.slots.size(), -1);
  for (int round = 0;; ++round) {
    for (ParamSlot &slot : module.slots)
      slot.owner = -1;
    placement.emplace(
        body,
        [&](Value v) {
          if (auto read = v.getDefiningOp<ParamOp>()) {
            int64_t owner = owners[module.slotOf.lookup(read.getName())];
            return owner >= 0 ? owner : StagePlacement::kAll;
          }
          return getPipelineStage(v);
        },
        [&](Operation *op, int64_t stage) {
          return module.claimSlots(op, stage);
        });
    bool settled = true;
    for (auto [slot, owner] : llvm::zip(module.slots, owners)) {
      settled &= slot.owner == owner;
      owner = slot.owner;
    }
    if (settled) {
      // A read of an owned slot that is copied runs on every stage.
      module.stageLocal = module.drivers.size() == 1 &&
                          module.drivers.begin()->second.getNumRanks() < 63;
      for (ParamOp read : body.getOps<ParamOp>())
        if (owners[module.slotOf.lookup(read.getName())] >= 0 &&
            isOverwrittenWhileLive(read))
          module.stageLocal = false;
      break;
    }
    if (round == 8)
      return body.getParentOp()->emitError(
          "cannot place the ops after its braid.pipeline on the pipeline's "
          "stages: the parameters' owners do not settle");
  }
  return success();
}

int64_t FunctionLowering::getPipelineStage(Value v) {
  auto pipeline = v.getDefiningOp<PipelineOp>();
  if (!pipeline)
    return StagePlacement::kAll;
  auto driver = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      pipeline, pipeline.getCalleeAttr());
  auto it = module.drivers.find(driver);
  if (it == module.drivers.end())
    return StagePlacement::kAll; // unscheduled: refused by its lowering
  const PipelineDriver &read = it->second;
  Value returned =
      func::FuncOp(read.fn).getBody().front().getTerminator()->getOperand(
          cast<OpResult>(v).getResultNumber());
  if (!read.producer.count(returned))
    return StagePlacement::kAll; // not a piece's: refused by its lowering
  return read.getStage(returned);
}

void FunctionLowering::guardStage(Operation *op, Block *block,
                                  Operation *last, int64_t stage) {
  // What the lowering of `op` emitted: its buffers' addresses stay where
  // they are (later ops use them), the rest runs under the condition.
  auto isAddress = [](Operation *e) {
    if (isa<emitc::ConstantOp, emitc::LiteralOp, emitc::GetGlobalOp,
            emitc::AddressOfOp>(e))
      return true;
    auto call = dyn_cast<emitc::CallOpaqueOp>(e);
    return call && call.getCallee().starts_with("braid_rt_program_buffer_");
  };
  auto emitted = llvm::make_range(
      last ? std::next(Block::iterator(last)) : block->begin(),
      b.getInsertionPoint());
  SmallVector<Operation *> guarded;
  DenseSet<Operation *> moved;
  for (Operation &e : emitted)
    if (!isAddress(&e)) {
      guarded.push_back(&e);
      moved.insert(&e);
    }
  // Unguarded is still right (a stage computes what it does not use), so
  // anything unexpected leaves the code as it is.
  auto inside = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && moved.contains(def);
  };
  for (Operation &e : emitted)
    if (!moved.contains(&e) && llvm::any_of(e.getOperands(), inside)) {
      module.stageLocal = false;
      return;
    }
  if (llvm::any_of(op->getResults(),
                   [&](Value r) { return get(r) && inside(get(r)); })) {
    module.stageLocal = false;
    return;
  }
  if (guarded.empty())
    return;
  Value stageValue =
      emitc::CallOpaqueOp::create(b, loc, b.getI64Type(),
                                  "braid_rt_program_pp_stage",
                                  ValueRange{i64(module.pipelineMask)})
          .getResult(0);
  Value cond = emitc::CmpOp::create(b, loc, b.getI1Type(),
                                    emitc::CmpPredicate::eq, stageValue,
                                    i64(stage));
  auto ifOp = emitc::IfOp::create(b, loc, cond);
  Operation *yield = ifOp.getThenRegion().front().getTerminator();
  for (Operation *e : guarded)
    e->moveBefore(yield);
}
