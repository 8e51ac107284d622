//===- FunctionLowering.cpp - A function's buffers and calls ----------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"
#include "llvm/ADT/StringSet.h"

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
  // bf16 storage (braid-legalize-bf16): the elements' 16 bits.
  if (element.isBF16())
    return emitc::PointerType::get(
        IntegerType::get(type.getContext(), 16, IntegerType::Unsigned));
  return {};
}

StringRef mlir::braid::lowering::getElementSuffix(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isInteger(32))
    return "i32";
  if (element.isBF16() || element.isUnsignedInteger(16))
    return "bf16";
  return "i64";
}

int64_t mlir::braid::lowering::getElementBytes(Type element) {
  if (element.isInteger(64))
    return 8;
  if (element.isBF16() || element.isInteger(16))
    return 2;
  return 4;
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
  PlannedBuffer planning;
  planning.bytes = alignBytes(type.getNumElements() * getElementBytes(element));
  // The whole op, or one point of it (a pipeline's action).
  planning.start = subPosition >= 0 ? opBegin() + subPosition : opBegin();
  planning.end = subPosition >= 0 ? planning.start : opEnd();
  planning.stage = allocationStage;
  Value buffer;
  if (!module.reuseBuffers) {
    Value global = module.getBufferGlobal(b, loc, bufferType);
    Value address = emitc::AddressOfOp::create(
        b, loc, emitc::PointerType::get(bufferType), global);
    buffer = emitc::CallOpaqueOp::create(
                 b, loc, bufferType,
                 ("braid_rt_program_buffer_" + getElementSuffix(element)).str(),
                 ValueRange{address, i64(type.getNumElements())})
                 .getResult(0);
  } else {
    int64_t depth = module.depth.lookup(body->getParentOp());
    if (arenaName.empty() && depth >= 1)
      arenaName = module.sharedArenas[depth].name;
    if (arenaName.empty()) {
      Value global = module.getBufferGlobal(
          b, loc, emitc::PointerType::get(b.getF32Type()), "braid_arena_");
      arenaName = cast<emitc::GetGlobalOp>(global.getDefiningOp()).getName();
      global.getDefiningOp()->erase();
      if (depth >= 1)
        module.sharedArenas[depth].name = arenaName;
    }
    // Its address once the plan has placed it (finishPlan).
    auto literal =
        emitc::LiteralOp::create(b, loc, bufferType, "braid_arena_unplanned");
    addresses.push_back({literal, element});
    buffer = literal;
  }
  plannedOf[buffer] = planned.size();
  planned.push_back(planning);
  return buffer;
}

Value FunctionLowering::result(Value v) {
  Type type = v.getType();
  if (auto future = dyn_cast<FutureType>(type)) // a started collective's
    type = future.getValueType();
  // A future the layer yields completes in the caller's buffer.
  if (yieldedPending.contains(v)) {
    Value out = outOf.lookup(v);
    buffers[v] = out;
    return out;
  }
  // bf16 storage packed for the caller (by a pack, by a fused region's
  // loop packing it, or by a repeat's layers: a pipeline piece's result):
  // straight into its buffer.
  if ((v.getDefiningOp<ConvertOp>() ||
       (isa_and_present<RepeatOp, FusedOp>(v.getDefiningOp()) &&
        getElementTypeOrSelf(type).isBF16())) &&
      v.hasOneUse() && v.use_begin()->getOwner() == body->getTerminator() &&
      v.use_begin()->getOperandNumber() < outValues.size()) {
    Value out = outValues[v.use_begin()->getOperandNumber()];
    buffers[v] = out;
    return out;
  }
  Value buffer = getConcatPiece(v);
  if (!buffer && module.reuseBuffers)
    buffer = getInPlaceBuffer(v);
  if (!buffer)
    buffer = allocate(cast<RankedTensorType>(type));
  buffers[v] = buffer;
  extendTo(buffer, v);
  return buffer;
}

int64_t FunctionLowering::lastUse(Value v) {
  int64_t last = current;
  for (Operation *user : v.getUsers())
    if (Operation *op = body->findAncestorOpInBlock(*user))
      last = std::max(last, opIndex.lookup(op));
  return last * kOpPositions + kOpPositions - 1;
}

void FunctionLowering::extendTo(Value buffer, Value v) {
  if (Value base = viewBase.lookup(buffer))
    buffer = base;
  auto it = plannedOf.find(buffer);
  if (it == plannedOf.end())
    return; // a parameter slot or an argument
  PlannedBuffer &p = planned[it->second];
  p.end = std::max(p.end, lastUse(v));
  p.gradient |= gradients.contains(v);
}

bool FunctionLowering::aliasView(Value v, Value base, int64_t offset) {
  // Only a whole buffer planned here, outside pipelines: a view is not an
  // address literal that a stage guard keeps in place, and a later op
  // never overwrites it in place (it is not in plannedOf).
  if (!module.reuseBuffers || subPosition >= 0 || allocationStage >= 0 ||
      placement || !plannedOf.count(base))
    return false;
  Value view = emitc::AddOp::create(b, loc, base.getType(), base, i64(offset));
  viewBase[view] = base;
  alias(v, view);
  return true;
}

void FunctionLowering::findConcatPieces() {
  if (!module.reuseBuffers)
    return;
  for (auto concat : body->getOps<ConcatOp>()) {
    // Contiguous pieces: every dimension before the axis of size 1.
    auto type = cast<RankedTensorType>(concat.getType());
    int64_t axis = concat.getAxis();
    if (axis < 0)
      axis += type.getRank();
    if (llvm::any_of(type.getShape().take_front(axis),
                     [](int64_t d) { return d != 1; }))
      continue;
    int64_t offset = 0;
    for (Value x : concat.getInputs()) {
      // Back through the ops that alias their input; each value used by
      // the next only, so that nothing else reads the piece once the
      // concatenation's result is written over (a bucket summed in place).
      Value root = x;
      while (root.hasOneUse())
        if (auto reshape = root.getDefiningOp<ReshapeOp>())
          root = reshape.getInput();
        else if (auto shard = root.getDefiningOp<ShardOp>())
          root = shard.getInput();
        else
          break;
      Operation *producer = root.getDefiningOp();
      if (root.hasOneUse() && x.hasOneUse() && producer &&
          producer->getBlock() == body && !isa<ParamOp>(producer)) {
        concatPieceOf.try_emplace(root, concat, offset);
        // A piece computed over an operand in place (a sum of partial
        // gradients: the tied wte's head and embedding partials) takes
        // that operand's place too, so the operand is computed straight
        // into the concat's buffer and the piece adds into it there,
        // rather than holding its own buffer until the piece (a whole
        // vocabulary table, across the layers' backward). The earliest
        // such operand, of the piece's type, that nothing else reads:
        // the same additions in the same order, into one buffer.
        while (auto inPlace =
                   dyn_cast_or_null<InPlaceOpInterface>(producer)) {
          if (producer->getNumResults() != 1 ||
              inPlace.mayUpdateParameterSlot())
            break;
          Operation *first = nullptr;
          Value into;
          for (unsigned i : inPlace.getInPlaceOperands(0)) {
            Value operand = producer->getOperand(i);
            Operation *def = operand.getDefiningOp();
            if (operand.getType() != root.getType() ||
                !operand.hasOneUse() || !def || def->getBlock() != body ||
                isa<ParamOp>(def) || concatPieceOf.count(operand) ||
                (first && !def->isBeforeInBlock(first)))
              continue;
            first = def;
            into = operand;
          }
          if (!into)
            break;
          concatPieceOf.try_emplace(into, concat, offset);
          producer = first;
        }
      }
      offset += cast<RankedTensorType>(x.getType()).getNumElements();
    }
  }
}

Value FunctionLowering::getConcatPiece(Value v) {
  auto it = concatPieceOf.find(v);
  if (it == concatPieceOf.end() || subPosition >= 0 || allocationStage >= 0 ||
      placement)
    return {};
  auto [concat, offset] = it->second;
  Value &base = concatBuffer[concat];
  if (!base)
    base = allocate(cast<RankedTensorType>(concat.getType()));
  return getConcatView(concat, offset);
}

Value FunctionLowering::getConcatView(ConcatOp op, int64_t offset) {
  Value &view = concatViews[{op, offset}];
  if (!view) {
    Value base = concatBuffer.lookup(op);
    view = emitc::AddOp::create(b, loc, base.getType(), base, i64(offset));
    viewBase[view] = base;
  }
  return view;
}

Value FunctionLowering::getInPlaceBuffer(Value v) {
  Operation *op = v.getDefiningOp();
  unsigned k = cast<OpResult>(v).getResultNumber();
  // The operands each result may overwrite (InPlaceOpInterface; the
  // kernels accept it, kernels.h "Aliasing"), of the result's type.
  SmallVector<unsigned> candidates;
  bool update = false;
  if (auto inPlace = dyn_cast<InPlaceOpInterface>(op)) {
    candidates = inPlace.getInPlaceOperands(k);
    update = inPlace.mayUpdateParameterSlot();
  } else if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
    // The program runtime's all_reduce copies its input to the result and
    // sums in place there: an input that dies here saves the copy (a dp
    // gradient bucket: 3 MiB a layer). A blocking one (a started one's
    // result is a future), not compressed.
    if (collective.getCollectiveKind() == CollectiveKind::all_reduce &&
        !collective.isStarted() && !op->hasAttr("braid.compress"))
      for (OpOperand &operand : op->getOpOperands())
        if (operand.get() == collective.getInput())
          candidates.push_back(operand.getOperandNumber());
  }
  for (unsigned i : candidates) {
    Value x = op->getOperand(i);
    if (x.getType() != v.getType())
      continue;
    Value buffer = get(x);
    auto it = plannedOf.find(buffer);
    if (it != plannedOf.end()) {
      // A buffer of this function that dies here (no later use of x or of
      // anything sharing its buffer), of this op's stage, that no other
      // result of the op took. Another operand may be the same buffer only
      // as the same view.
      const PlannedBuffer &p = planned[it->second];
      bool sameView = llvm::all_of(op->getOperands(), [&](Value o) {
        return get(o) != buffer || o.getType() == v.getType();
      });
      // (Every rank's buffer may take a result of one stage's op.)
      if (p.end == opEnd() && p.start < opBegin() &&
          (p.stage == allocationStage || p.stage < 0) && sameView &&
          donated.insert(it->second).second)
        return buffer;
      continue;
    }
    if (update && canUpdateSlotInPlace(x, v)) {
      writtenInPlace.insert(v);
      return buffer;
    }
  }
  return {};
}

bool FunctionLowering::canUpdateSlotInPlace(Value operand, Value v) {
  // x = param "n"; new = update(x, ...); store_param "n", new: the update
  // may write the slot itself when nothing reads the slot between the
  // update and the store.
  auto read = operand.getDefiningOp<ParamOp>();
  if (!read || read->getBlock() != body || !v.hasOneUse())
    return false;
  auto store = dyn_cast<StoreParamOp>(*v.getUsers().begin());
  if (!store || store->getBlock() != body || store.getName() != read.getName())
    return false;
  // Tied names share a slot (outside layers, where slots are known).
  auto sameSlot = [&](StringRef name) {
    if (name == read.getName())
      return true;
    if (layerSlots)
      return false;
    auto a = module.slotOf.find(name), b = module.slotOf.find(read.getName());
    return a != module.slotOf.end() && b != module.slotOf.end() &&
           a->second == b->second;
  };
  // On a pipeline, the store must run where the update does, with nothing
  // broadcast into the slot.
  if (placement &&
      (placement->getStage(store) != placement->getStage(v.getDefiningOp()) ||
       !placement->getTransfers(store).empty()))
    return false;
  int64_t storeAt = opIndex.lookup(store);
  for (Operation &o : *body) {
    int64_t i = opIndex.lookup(&o);
    if (i >= storeAt)
      break;
    auto other = dyn_cast<ParamOp>(&o);
    if (other && sameSlot(other.getName()) &&
        (i > current || lastUse(other) > opEnd()))
      return false;
    // Layers and pipeline pieces read slots by name.
    if (i > current && isa<RepeatOp, PipelineOp, func::CallOp>(o))
      return false;
  }
  return true;
}

void FunctionLowering::useAt(Value buffer, int64_t position) {
  auto it = plannedOf.find(buffer);
  if (it != plannedOf.end())
    planned[it->second].end =
        std::max(planned[it->second].end, opBegin() + position);
}

void FunctionLowering::finishPlan(emitc::FuncOp target) {
  Operation *fn = body->getParentOp();
  if (!module.reuseBuffers || planned.empty()) {
    module.functionBuffers.push_back({fn, planned});
    return;
  }
  assignOffsets(planned);
  for (auto [literal, element] : addresses) {
    const PlannedBuffer &p = planned[plannedOf.lookup(literal)];
    std::string address =
        "(" + arenaName + " + " + std::to_string(p.offset / 4) + ")";
    if (!element.isF32())
      address = (element.isInteger(64)   ? "((int64_t *)"
                 : element.isInteger(16) ? "((uint16_t *)"
                                         : "((int32_t *)") +
                address + ")";
    literal.setValue(address);
  }
  // The arena, allocated on the function's first call and kept: on a
  // pipeline, each stage's ranks allocate what their code uses.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&target.getBody().front());
  auto f32Ptr = emitc::PointerType::get(b.getF32Type());
  int64_t stages = 0;
  for (const PlannedBuffer &p : planned)
    stages = std::max(stages, p.stage + 1);
  if (stages && !module.drivers.empty())
    stages = std::max(stages, module.drivers.begin()->second.getNumRanks());
  Value count;
  int64_t depth = module.depth.lookup(fn);
  if (depth >= 1) {
    // The depth's shared arena: as large as its largest user's plan.
    ModuleLowering::SharedArena &shared = module.sharedArenas[depth];
    for (int64_t s = stages ? 0 : -1; s < std::max<int64_t>(stages, 0); ++s)
      shared.bytes = std::max(shared.bytes, getArenaBytes(planned, s));
    count = i64(0);
    shared.counts.push_back(cast<emitc::ConstantOp>(count.getDefiningOp()));
  } else if (!stages) {
    count = i64(getArenaBytes(planned, -1) / 4);
  } else {
    SmallVector<int64_t> counts;
    for (int64_t s = 0; s < stages; ++s)
      counts.push_back(getArenaBytes(planned, s) / 4);
    Value stage = emitc::CallOpaqueOp::create(
                      b, loc, b.getI64Type(), "braid_rt_program_pp_stage",
                      ValueRange{i64(module.pipelineMask)})
                      .getResult(0);
    Value entry =
        emitc::SubscriptOp::create(b, loc,
                                   cast<TypedValue<emitc::ArrayType>>(
                                       module.getShapeArray(b, loc, counts)),
                                   ValueRange{stage});
    count = emitc::LoadOp::create(b, loc, b.getI64Type(), entry);
  }
  Value global = emitc::GetGlobalOp::create(
      b, loc, emitc::LValueType::get(f32Ptr),
      FlatSymbolRefAttr::get(b.getContext(), arenaName));
  Value address = emitc::AddressOfOp::create(
      b, loc, emitc::PointerType::get(f32Ptr), global);
  emitc::CallOpaqueOp::create(b, loc, f32Ptr, "braid_rt_program_buffer_f32",
                              ValueRange{address, count});
  module.functionBuffers.push_back({fn, planned});
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
  kernel(elementType.isF32()    ? "braid_rt_copy_f32"
         : elementType.isBF16() ? "braid_rt_copy_bf16"
                                : "braid_rt_copy_i32",
         {from, i64(count), to});
}

/// The ops through which a gradient (or the loss) only moves: a reshape,
/// a sharding, a wait, a slice, a transpose or a collective.
static bool onlyMoves(Operation *op) {
  return isa<ReshapeOp, ShardOp, WaitOp, SliceOp, TransposeOp,
             CollectiveOpInterface>(op);
}

// Fills `gradients`: the values holding parameter gradients, what an optimizer
// update (here or in a layer repeated here) reads as its gradient, what a
// pipeline returns (the means of its gradients), and back through the ops that
// only move or sum them: a bucket's slices lead back to its reduction and its
// concat to the pieces (under ZeRO the reduce_scatter's input bucket, which
// holds the gradients of the ops around the layers from the first one computed,
// was an activation). The ops are named, not the Linear trait: braid.sub,
// braid.neg and braid.broadcast are linear too, but through them the walk would
// reach an activation's cotangent (a parameter subtracted from the logits has
// the negated logits' cotangent as its gradient), which the memory report would
// then count as a gradient. A braid.fused result is followed back through the
// region's braid.add and braid.round ops to the operands it sums (under
// bf16-mixed a tied parameter's two partial gradients, each rounded): only an
// operand of the result's own type, and through no other op, so an activation
// an op like gelu_grad reads with a gradient is never one. Of a pipeline's
// results, those its driver takes from an F piece (the loss) are not gradients,
// nor what only moves them (a reshape into a bucket, whose concat joins them to
// gradients); the others come from B and W.
void FunctionLowering::findGradients() {
  Block &body = *this->body;
  SmallVector<Value> work;
  llvm::SmallPtrSet<Value, 4> notGradients;
  for (Operation &op : body) {
    if (isa<AdamWUpdateOp, SgdUpdateOp>(op))
      work.push_back(op.getOperand(1));
    if (auto pipeline = dyn_cast<PipelineOp>(op)) {
      auto driver = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          pipeline, pipeline.getCalleeAttr());
      auto it = driver ? module.drivers.find(driver) : module.drivers.end();
      for (auto [i, result] : llvm::enumerate(pipeline.getResults())) {
        if (it != module.drivers.end()) {
          Value returned =
              it->second.fn.getBody().front().getTerminator()->getOperand(i);
          auto piece = it->second.producer.find(returned);
          if (piece != it->second.producer.end() &&
              piece->second.second == 'F') {
            notGradients.insert(result);
            continue;
          }
        }
        work.push_back(result);
      }
    }
    auto repeat = dyn_cast<RepeatOp>(op);
    auto layer = repeat ? SymbolTable::lookupNearestSymbolFrom<LayerOp>(
                              repeat, repeat.getLayerAttr())
                        : LayerOp();
    if (layer)
      for (auto [input, arg] : llvm::zip(
               repeat.getInputs(), layer.getBody().front().getArguments()))
        if (llvm::any_of(arg.getUses(), [](OpOperand &use) {
              return isa<AdamWUpdateOp, SgdUpdateOp>(use.getOwner()) &&
                     use.getOperandNumber() == 1;
            }))
          work.push_back(input);
  }
  // What only moves the loss (its reshape into a bucket) is not either.
  for (Operation &op : body)
    if (onlyMoves(&op) && op.getNumOperands() == 1 &&
        notGradients.contains(op.getOperand(0)))
      notGradients.insert(op.result_begin(), op.result_end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (notGradients.contains(v) || !gradients.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == &body &&
        (onlyMoves(def) || isa<AddOp, ConcatOp>(def)))
      llvm::append_range(work, def->getOperands());
    auto fused = def && def->getBlock() == &body ? dyn_cast<FusedOp>(def)
                                                 : FusedOp();
    if (!fused)
      continue;
    Block &region = fused.getBody().front();
    SmallVector<Value> inner = {region.getTerminator()->getOperand(
        cast<OpResult>(v).getResultNumber())};
    llvm::SmallPtrSet<Value, 8> seen;
    while (!inner.empty()) {
      Value u = inner.pop_back_val();
      if (!seen.insert(u).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(u)) {
        if (arg.getOwner() == &region && arg.getType() == v.getType())
          work.push_back(fused->getOperand(arg.getArgNumber()));
      } else if (isa<AddOp, RoundOp>(u.getDefiningOp())) {
        llvm::append_range(inner, u.getDefiningOp()->getOperands());
      }
    }
  }
}

LogicalResult FunctionLowering::lowerBody(Block &body, emitc::FuncOp target,
                                          Value slots, ArrayRef<Value> outs,
                                          ArrayRef<Value> pendingOuts,
                                          ArrayRef<Value> pendingIns,
                                          Value nextSlots) {
  Block &entry = target.getBody().front();
  for (auto [arg, buffer] : llvm::zip(body.getArguments(),
                                      entry.getArguments()))
    buffers[arg] = buffer;
  // A future carried in: the instance before started it on the site given.
  auto pendingIn = pendingIns.begin();
  for (BlockArgument arg : body.getArguments())
    if (isa<FutureType>(arg.getType()) && pendingIn != pendingIns.end())
      pendingOf[arg] = *pendingIn++;
  nextLayerSlots = nextSlots;
  // Yielded futures: each a collective started in this body, once.
  Operation *terminator = body.getTerminator();
  auto pendingOut = pendingOuts.begin();
  for (auto [i, value, out] :
       llvm::enumerate(terminator->getOperands(), outs)) {
    if (!isa<FutureType>(value.getType()))
      continue;
    auto start = value.getDefiningOp<CollectiveOpInterface>();
    if (!start || start->getBlock() != &body ||
        yieldedPending.contains(value) || pendingOut == pendingOuts.end())
      return terminator->emitOpError()
             << "yields a future that is not a collective started in this "
                "body (or yields one twice); generated code starts a yielded "
                "future on its caller's pending site";
    yieldedPending[value] = *pendingOut++;
    if (i < body.getNumArguments() &&
        isa<FutureType>(body.getArgument(i).getType()))
      carriedPending.insert(value);
    outOf[value] = out;
  }
  layerSlots = slots;
  outValues.assign(outs.begin(), outs.end());
  this->body = &body;
  for (auto [i, op] : llvm::enumerate(body))
    opIndex[&op] = i;
  findConcatPieces();
  findGradients();
  // A function running a scheduled pipeline: place what follows it.
  std::optional<StagePlacement> stagePlacement;
  if (module.pipelineMask &&
      llvm::any_of(body.getOps<PipelineOp>(),
                   [](PipelineOp) { return true; }) &&
      failed(placeStages(body, stagePlacement)))
    return failure();
  std::optional<StagePlacement> &placement = stagePlacement;
  this->placement = placement ? &*placement : nullptr;
  // Started collectives move only inside MPI calls on the CPU backend:
  // while any may be in flight, the program lets them progress between ops.
  Operation *moduleOp = body.getParentOp()->getParentOfType<ModuleOp>();
  bool progress = moduleOp && moduleOp
                                  ->walk([](CollectiveOpInterface c) {
                                    return c.isStarted()
                                               ? WalkResult::interrupt()
                                               : WalkResult::advance();
                                  })
                                  .wasInterrupted();
  if (placement)
    progress |= llvm::any_of(body.getOps<ParamOp>(), [&](ParamOp read) {
      return isStageSharedSum(read);
    });
  for (Operation &op : body) {
    if (loweredEarly.contains(&op))
      continue;
    loc = op.getLoc();
    where = describe(&op);
    current = opIndex.lookup(&op);
    donated.clear();
    // A pending sum's reduction over the pipeline completes before its
    // first use.
    SmallVector<Value> summed;
    for (auto [v, site] : stageSums)
      if (llvm::any_of(v.getUsers(), [&](Operation *user) {
            return body.findAncestorOpInBlock(*user) == &op;
          }))
        summed.push_back(v);
    for (Value v : summed) {
      call("braid_rt_program_wait", {stageSums.lookup(v)});
      stageSums.erase(v);
    }
    // Operands received point to point: the op reads the receiving stage's
    // copy, a buffer of that stage alone (the sender's stays its own).
    SmallVector<std::pair<Value, Value>> received; // (value, its buffer)
    if (placement)
      for (auto [operand, from, to] : placement->getTransfers(&op)) {
        Value v = op.getOperand(operand);
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || !type.getElementType().isF32())
          return op.emitOpError()
                 << "needs operand " << operand << " of type " << v.getType()
                 << " from pipeline stage " << from
                 << "; generated pipelines move f32 only";
        if (to == StagePlacement::kShare) {
          Value share = allocate(typeOf(v));
          call("braid_rt_program_pp_local_f32",
               {i64(module.pipelineMask), get(v), share, i64(countOf(v)),
                i64(from)});
          received.push_back({v, get(v)});
          buffers[v] = share;
          continue;
        }
        if (to != StagePlacement::kAll) {
          if (module.reuseBuffers)
            allocationStage = to;
          Value copy = allocate(typeOf(v));
          allocationStage = -1;
          call("braid_rt_program_pp_transfer_f32",
               {i64(module.pipelineMask), get(v), copy, i64(countOf(v)),
                i64(from), i64(to), whereText()});
          received.push_back({v, get(v)});
          buffers[v] = copy;
          continue;
        }
        // Broadcasting into a slot's buffer needs it on every stage; into
        // an arena buffer, that buffer on every stage.
        if (get(v).getDefiningOp<emitc::LoadOp>())
          module.stageLocal = false;
        setEveryStage(get(v));
        call("braid_rt_program_pp_broadcast_f32",
             {i64(module.pipelineMask), get(v), i64(countOf(v)), i64(from),
              whereText()});
      }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      for (auto [value, out] : llvm::zip(op.getOperands(), outs))
        if (!yieldedPending.contains(value) && // started into `out`
            get(value) != out)                 // computed into `out`
          copy(typeOf(value).getElementType(), get(value), out, countOf(value));
      emitc::ReturnOp::create(b, loc, Value());
      continue;
    }
    for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults())) {
      if (!getBufferType(v.getType()))
        return op.emitOpError()
               << "has a value of type " << v.getType()
               << "; generated code handles statically shaped tensors of "
                  "f32, i32 and i64 only";
      // bf16 storage only moves: packed, passed between layers, unpacked
      // (by a conversion of its own or in a fused region's loop).
      if (getElementTypeOrSelf(v.getType()).isBF16() &&
          !isa<ConvertOp, RepeatOp, FusedOp>(op))
        return op.emitOpError()
               << "has a value of type " << v.getType()
               << "; generated code holds bf16 only in storage (a "
                  "braid.convert to or from f32, a fused region's "
                  "conversions, a layer's stacked values)";
    }
    Block *block = b.getInsertionBlock();
    Operation *last = b.getInsertionPoint() == block->begin()
                          ? nullptr
                          : &*std::prev(b.getInsertionPoint());
    // An op placed on one stage allocates that stage's buffers only (a
    // gradient's mean, clipped copy and update temporaries stay with the
    // parameter's stage). Without reuse, a site's buffer is allocated
    // outside the guard, on every rank.
    int64_t opStage =
        placement ? placement->getStage(&op) : StagePlacement::kAll;
    if (module.reuseBuffers)
      allocationStage = opStage;
    size_t firstBuffer = planned.size();
    std::optional<LogicalResult> lowered = module.table.lower(&op, *this);
    allocationStage = -1;
    if (!lowered)
      return op.emitOpError()
             << "has no lowering to EmitC yet (braid-lower-to-emitc handles "
                "compute ops, parameters, braid.repeat and collectives)";
    if (failed(*lowered))
      return failure();
    // A started collective reads its operand until its wait.
    for (Value r : op.getResults())
      if (isa<FutureType>(r.getType()))
        for (Value x : op.getOperands())
          extendTo(get(x), r);
    if (opStage != StagePlacement::kAll &&
        !guardStage(&op, block, last, opStage)) {
      // It runs on every stage: so must all the buffers it touches.
      for (size_t i = firstBuffer; i < planned.size(); ++i)
        planned[i].stage = -1;
      for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
        if (Value buffer = buffers.lookup(v))
          setEveryStage(buffer);
    }
    for (auto [v, buffer] : received)
      buffers[v] = buffer;
    if (auto read = dyn_cast<ParamOp>(op); read && isStageSharedSum(read))
      startStageSum(read);
    // A parameter stored on one stage whose pieces on other stages read it
    // (a tied weight): its new value goes from the slot there into theirs,
    // point to point; the stages that do not read it never hold it.
    if (auto store = dyn_cast<StoreParamOp>(op);
        store && opStage != StagePlacement::kAll) {
      int64_t slot = module.slotOf.lookup(store.getName());
      for (int64_t reader : module.pieceReaders[slot]) {
        if (reader == opStage)
          continue;
        Value table = module.getParamTable(b, loc);
        Value element = emitc::SubscriptOp::create(
            b, loc, cast<TypedValue<emitc::ArrayType>>(table),
            ValueRange{index(slot)});
        Value buffer = emitc::LoadOp::create(
            b, loc, emitc::PointerType::get(b.getF32Type()), element);
        call("braid_rt_program_pp_transfer_f32",
             {i64(module.pipelineMask), buffer, buffer,
              i64(module.slots[slot].type.getNumElements()), i64(opStage),
              i64(reader), whereText()});
      }
    }
    if (progress && !isa<CollectiveOpInterface, WaitOp, ParamOp>(op))
      call("braid_rt_program_progress", {});
  }
  finishPlan(target);
  return success();
}

LogicalResult FunctionLowering::lowerEarly(Operation *op) {
  Location outerLoc = loc;
  std::string outerWhere = where;
  loc = op->getLoc();
  where = describe(op);
  std::optional<LogicalResult> lowered = module.table.lower(op, *this);
  loweredEarly.insert(op);
  // A started collective reads its operand until its wait.
  for (Value r : op->getResults())
    if (isa<FutureType>(r.getType()))
      for (Value x : op->getOperands())
        extendTo(get(x), r);
  loc = outerLoc;
  where = outerWhere;
  if (!lowered)
    return op->emitOpError() << "has no lowering to EmitC yet";
  return *lowered;
}

bool FunctionLowering::isStageSharedSum(Value v) const {
  auto read = v.getDefiningOp<ParamOp>();
  return placement && read && read->getBlock() == body &&
         read->hasAttr(kPendingSumAttrName);
}

/// Whether `user` sums `v` over a group of its own (the all_reduce that
/// braid-partition puts after the read of a pending sum partial over mesh
/// axes): the pipeline joins that group.
static bool sumsOverGroup(Operation *user, Value v) {
  auto collective = dyn_cast<CollectiveOpInterface>(user);
  return collective &&
         collective.getCollectiveKind() == CollectiveKind::all_reduce &&
         collective.getReduction() == ReduceKind::sum &&
         collective.getInput() == v && !user->hasAttr("braid.compress");
}

/// Whether every reader of `v` sums it over a group of its own (true when
/// nothing reads it).
static bool onlySummedOverGroups(Value v) {
  return llvm::all_of(v.getUsers(),
                      [&](Operation *u) { return sumsOverGroup(u, v); });
}

bool FunctionLowering::foldsStageSum(Operation *user, Value v) const {
  return isStageSharedSum(v) && sumsOverGroup(user, v) &&
         onlySummedOverGroups(v);
}

void FunctionLowering::startStageSum(ParamOp read) {
  Value v = read.getResult();
  // Unread, or the all_reduces reading it sum over the pipeline too.
  if (onlySummedOverGroups(v))
    return;
  Value shares = get(v);
  Value sum = allocate(typeOf(v));
  Value site = module.getPendingSite(b, loc);
  call("braid_rt_program_collective_start_f32",
       {enumValue("braid_rt_program_collective_t",
                  /*BRAID_RT_PROGRAM_ALL_REDUCE=*/0),
        i64(module.pipelineMask), shares, i64(countOf(v)), i64(1), i64(1),
        i64(1), i64(1), i64(0), sum, site, whereText()});
  // The start reads the shares until its wait, at the sum's first use.
  buffers[v] = sum;
  extendTo(sum, v);
  extendTo(shares, v);
  stageSums[v] = site;
}

bool FunctionLowering::isAddress(Operation *e) {
  if (isa<emitc::ConstantOp, emitc::LiteralOp, emitc::GetGlobalOp,
          emitc::AddressOfOp>(e))
    return true;
  auto call = dyn_cast<emitc::CallOpaqueOp>(e);
  return call && call.getCallee().starts_with("braid_rt_program_buffer_");
}

/// An add, or a fused region of adds only (braid-fuse-elementwise groups
/// the terms of a sum): linear in its operands, so the sum of the stages'
/// shares of them is a share of its result.
static bool isSumOfOperands(Operation *op) {
  if (isa<AddOp>(op))
    return true;
  auto fused = dyn_cast<FusedOp>(op);
  return fused && fused->getNumResults() == 1 &&
         llvm::all_of(fused.getBody().front().without_terminator(),
                      [](Operation &inner) { return isa<AddOp>(inner); });
}

LogicalResult
FunctionLowering::placeStages(Block &body,
                              std::optional<StagePlacement> &placement) {
  // A pending sum (braid.pending_sum) is stored as each stage's share of
  // it, and summed over the pipeline where it is read: so are the adds
  // whose only use is to sum its terms, and no term moves at the end of
  // the step.
  sumsShares.clear();
  llvm::StringSet<> pendingSums;
  for (ParamOp read : body.getOps<ParamOp>())
    if (read->hasAttr(kPendingSumAttrName))
      pendingSums.insert(read.getName());
  for (auto store : body.getOps<StoreParamOp>()) {
    if (!store->hasAttr(kPendingSumAttrName) &&
        !pendingSums.contains(store.getName()))
      continue;
    sumsShares.insert(store);
    SmallVector<Value> terms{store.getValue()};
    while (!terms.empty()) {
      Value v = terms.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (def && def->getBlock() == &body && v.hasOneUse() &&
          isSumOfOperands(def) && sumsShares.insert(def).second)
        llvm::append_range(terms, def->getOperands());
    }
  }
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
        },
        [&](Operation *op) { return sumsShares.contains(op); });
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

void FunctionLowering::setEveryStage(Value buffer) {
  auto it = plannedOf.find(buffer);
  if (it != plannedOf.end())
    planned[it->second].stage = -1;
}

bool FunctionLowering::guardStage(Operation *op, Block *block, Operation *last,
                                  int64_t stage) {
  // What the lowering of `op` emitted: its buffers' addresses stay where
  // they are (later ops use them), the rest runs under the condition.
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
      return false;
    }
  if (llvm::any_of(op->getResults(),
                   [&](Value r) { return get(r) && inside(get(r)); })) {
    module.stageLocal = false;
    return false;
  }
  if (guarded.empty())
    return true;
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
  return true;
}
