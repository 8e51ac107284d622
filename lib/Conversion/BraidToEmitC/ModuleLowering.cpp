//===- ModuleLowering.cpp - Parameter table, globals, init ------------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

// LLVM_DEBUG needs it: builds with asserts (and -debug-only) did not compile.
#define DEBUG_TYPE "braid-lower-to-emitc"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

//===----------------------------------------------------------------------===//
// Slots written by pipeline stages
//===----------------------------------------------------------------------===//

SmallVector<int64_t> ModuleLowering::getAllRepeatSlots(RepeatOp repeat) {
  SmallVector<int64_t> all = repeatSlots.lookup(repeat);
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  if (layer)
    layer.walk([&](RepeatOp nested) {
      SmallVector<int64_t> inner = getAllRepeatSlots(nested);
      all.append(inner.begin(), inner.end());
    });
  return all;
}

SmallVector<int64_t> ModuleLowering::getInPlaceSlots(Operation *op,
                                                     ArrayRef<StringRef> keys) {
  SmallVector<int64_t> slotsOf;
  // (The wait of a started reduction keeps its attributes; the start is
  // what updates the state.)
  auto psgdOf = [](Operation *o) {
    return isa<CollectiveOpInterface>(o)
               ? o->getAttrOfType<DictionaryAttr>("braid.powersgd")
               : DictionaryAttr();
  };
  if (auto psgd = psgdOf(op)) {
    for (StringRef key : keys)
      if (auto name = psgd.getAs<StringAttr>(key))
        if (auto it = slotOf.find(name.getValue()); it != slotOf.end())
          slotsOf.push_back(it->second);
    return slotsOf;
  }
  auto repeat = dyn_cast<RepeatOp>(op);
  if (!repeat)
    return slotsOf;
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  if (!layer)
    return slotsOf;
  // The layer names its state locally; each instance's slot adds the
  // repeat's prefix (nested repeats only under an empty one).
  int64_t first = repeat.getFirst(), count = repeat.getCount();
  for (int64_t i = first; i < first + count; ++i)
    layer.walk([&](Operation *inner) {
      if (isa<RepeatOp>(inner)) {
        if (i == first)
          llvm::append_range(slotsOf, getInPlaceSlots(inner, keys));
        return;
      }
      auto psgd = psgdOf(inner);
      if (!psgd)
        return;
      for (StringRef key : keys)
        if (auto name = psgd.getAs<StringAttr>(key))
          if (auto it =
                  slotOf.find(repeat.getParamPrefix(i) + name.getValue().str());
              it != slotOf.end())
            slotsOf.push_back(it->second);
    });
  return slotsOf;
}

bool ModuleLowering::claimSlots(Operation *op, int64_t stage) {
  if (isa<PipelineOp>(op))
    return false; // every stage runs its part of a pipeline
  // A store's new value goes on to the other stages whose pieces read the
  // slot, point to point (FunctionLowering::lowerBody): a tied weight lives
  // only on the stages using it. Repeats and in-place updates keep their
  // slots where pieces of their stage alone read them.
  if (auto store = dyn_cast<StoreParamOp>(op)) {
    slots[slotOf.lookup(store.getName())].owner = stage;
    return true;
  }
  SmallVector<int64_t> written;
  if (auto repeat = dyn_cast<RepeatOp>(op))
    written = getAllRepeatSlots(repeat);
  else
    written = getInPlaceSlots(op);
  for (int64_t slot : written)
    if (llvm::any_of(pieceReaders[slot],
                     [&](int64_t reader) { return reader != stage; }))
      return false;
  for (int64_t slot : written)
    slots[slot].owner = stage;
  return true;
}

//===----------------------------------------------------------------------===//
// ModuleLowering
//===----------------------------------------------------------------------===//

FailureOr<int64_t> ModuleLowering::getSlot(Operation *op, StringRef name,
                                           RankedTensorType type,
                                           InitAttr init) {
  ShardingAttr blockOf;
  auto param = dyn_cast<ParamOp>(op);
  if (param)
    blockOf = param.getBlockOfAttr();
  auto it = slotOf.find(name);
  if (it != slotOf.end()) {
    const ParamSlot &slot = slots[it->second];
    if (slot.type != type)
      return op->emitOpError() << "declares parameter '" << name << "' as "
                               << type << ", but it was already declared as "
                               << slot.type;
    if (param && slot.blockOf != blockOf)
      return op->emitOpError() << "reads parameter '" << name
                               << "' with another block_of than an earlier "
                                  "read";
    return it->second;
  }
  if (blockOf) {
    SmallVector<int64_t> global, spec;
    if (failed(getBlockSpec(op, blockOf, type.getShape(), global, spec)))
      return failure();
  }
  if (!type.getElementType().isF32())
    return op->emitOpError() << "declares parameter '" << name << "' of "
                             << type
                             << "; generated code holds f32 parameters only";
  slotOf[name] = slots.size();
  slots.push_back({name.str(), type, init, blockOf});
  slots.back().state = param && param.getState();
  slots.back().transient = param && param->hasAttr(kTransientAttrName);
  return slots.size() - 1;
}

Value ModuleLowering::getGlobalArray(OpBuilder &b, Location loc,
                                     StringRef prefix,
                                     ArrayRef<int64_t> values, bool constant) {
  // A zero-length C array is not valid; rank-0 shapes get one unused entry.
  std::vector<int64_t> data(values.begin(), values.end());
  if (data.empty())
    data.push_back(0);
  auto type = emitc::ArrayType::get({static_cast<int64_t>(data.size())},
                                    b.getI64Type());
  std::string &name = arrays[{constant, data}];
  if (name.empty()) {
    name = (prefix + Twine(numArrays++)).str();
    auto init = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(data.size())},
                              b.getI64Type()),
        ArrayRef<int64_t>(data));
    emitc::GlobalOp::create(globals, loc, b.getStringAttr(name),
                            TypeAttr::get(type), init, /*extern=*/nullptr,
                            b.getUnitAttr(),
                            constant ? b.getUnitAttr() : nullptr);
  }
  return emitc::GetGlobalOp::create(b, loc, type,
                                    FlatSymbolRefAttr::get(b.getContext(),
                                                           name));
}

Value ModuleLowering::getShapeArray(OpBuilder &b, Location loc,
                                    ArrayRef<int64_t> values) {
  return getGlobalArray(b, loc, "braid_shape_", values, /*constant=*/true);
}

Value ModuleLowering::getSlotTable(OpBuilder &b, Location loc,
                                   ArrayRef<int64_t> values) {
  return getGlobalArray(b, loc, "braid_slots_", values, /*constant=*/false);
}

Value ModuleLowering::getConstantData(OpBuilder &b, Location loc,
                                      DenseElementsAttr data) {
  int64_t count = std::max<int64_t>(1, data.getNumElements());
  Type element = data.getElementType();
  auto type = emitc::ArrayType::get({count}, element);
  std::string name = ("braid_const_" + Twine(numArrays++)).str();
  Attribute init =
      data.getNumElements()
          ? Attribute(data.reshape(RankedTensorType::get({count}, element)))
          : Attribute(DenseElementsAttr::get(
                RankedTensorType::get({1}, element),
                b.getZeroAttr(element)));
  emitc::GlobalOp::create(globals, loc, b.getStringAttr(name),
                          TypeAttr::get(type), init, nullptr, b.getUnitAttr(),
                          b.getUnitAttr());
  return emitc::GetGlobalOp::create(b, loc, type,
                                    FlatSymbolRefAttr::get(b.getContext(),
                                                           name));
}

Value ModuleLowering::getBufferGlobal(OpBuilder &b, Location loc,
                                      Type bufferType, StringRef prefix) {
  std::string name = (prefix + Twine(numBuffers++)).str();
  emitc::GlobalOp::create(globals, loc, b.getStringAttr(name),
                          TypeAttr::get(bufferType), Attribute(), nullptr,
                          b.getUnitAttr(), nullptr);
  return emitc::GetGlobalOp::create(
      b, loc, emitc::LValueType::get(bufferType),
      FlatSymbolRefAttr::get(b.getContext(), name));
}

Value ModuleLowering::getPendingSite(OpBuilder &b, Location loc) {
  std::string name = ("braid_pending_" + Twine(numPending++)).str();
  auto type =
      emitc::OpaqueType::get(b.getContext(), "braid_rt_program_pending_t");
  emitc::GlobalOp::create(globals, loc, b.getStringAttr(name),
                          TypeAttr::get(type), Attribute(), nullptr,
                          b.getUnitAttr(), nullptr);
  Value global = emitc::GetGlobalOp::create(
      b, loc, emitc::LValueType::get(type),
      FlatSymbolRefAttr::get(b.getContext(), name));
  return emitc::AddressOfOp::create(b, loc, emitc::PointerType::get(type),
                                    global);
}

Value ModuleLowering::getPendingSites(OpBuilder &b, Location loc,
                                      int64_t count) {
  std::string name = ("braid_pending_" + Twine(numPending++)).str();
  auto type = emitc::ArrayType::get(
      {count},
      emitc::OpaqueType::get(b.getContext(), "braid_rt_program_pending_t"));
  emitc::GlobalOp::create(globals, loc, b.getStringAttr(name),
                          TypeAttr::get(type), Attribute(), nullptr,
                          b.getUnitAttr(), nullptr);
  return emitc::GetGlobalOp::create(
      b, loc, type, FlatSymbolRefAttr::get(b.getContext(), name));
}

FailureOr<int64_t> ModuleLowering::getGroup(Operation *op,
                                            FlatSymbolRefAttr meshRef,
                                            ArrayAttr axes, int64_t *size) {
  if (!mesh || meshRef.getValue() != mesh.getSymName())
    return op->emitOpError() << "uses mesh " << meshRef
                             << "; generated code runs on the module's one "
                                "braid.mesh";
  int64_t mask = 0, n = 1;
  int last = -1;
  for (Attribute a : axes) {
    StringRef axis = cast<StringAttr>(a).getValue();
    std::optional<unsigned> index = mesh.getAxisIndex(axis);
    if (!index)
      return op->emitOpError() << "names axis '" << axis
                               << "', which @" << mesh.getSymName()
                               << " does not have";
    if (int(*index) <= last)
      return op->emitOpError()
             << "lists its axes out of the mesh's order; generated code "
                "orders a group row-major in mesh order";
    last = *index;
    mask |= int64_t(1) << *index;
    n *= mesh.getShape()[*index];
  }
  groups.insert(mask);
  if (size)
    *size = n;
  return mask;
}

LogicalResult ModuleLowering::getBlockSpec(Operation *op, ShardingAttr sharding,
                                           ArrayRef<int64_t> local,
                                           SmallVectorImpl<int64_t> &global,
                                           SmallVectorImpl<int64_t> &spec,
                                           bool view,
                                           SmallVectorImpl<int64_t> *blocks) {
  if (!mesh || sharding.getMesh().getValue() != mesh.getSymName())
    return op->emitOpError() << "holds a block on mesh " << sharding.getMesh()
                             << "; generated code runs on the module's one "
                                "braid.mesh";
  if (!sharding.getPartialAxes().empty())
    return op->emitOpError() << "holds a partial sum; generated code takes "
                                "blocks of whole tensors only";
  int64_t strided =
      llvm::count_if(sharding.getBlocks(), [](int64_t b) { return b > 1; });
  if (local.size() + strided > 16) // braid_rt_program_block_runs
    return op->emitOpError()
           << "holds a block of a rank-" << local.size() << " tensor"
           << (strided ? " strided over blocks" : "")
           << "; generated code takes blocks of rank 16 at "
              "most (a strided dimension counts twice)";
  for (unsigned d = 0; d < local.size(); ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
    int64_t b = sharding.getDimBlocks(d);
    if (blocks)
      blocks->push_back(b);
    if (view && b > 1) {
      // The view's block index: whole on every device.
      spec.push_back(0);
      global.push_back(b);
    }
    spec.push_back(axes.size());
    int64_t count = 1;
    for (StringRef a : axes) {
      std::optional<unsigned> index = mesh.getAxisIndex(a);
      if (!index)
        return op->emitOpError() << "names axis '" << a << "', which @"
                                 << mesh.getSymName() << " does not have";
      spec.push_back(*index);
      count *= mesh.getShape()[*index];
    }
    global.push_back(local[d] * count / (view ? b : 1));
  }
  return success();
}

Value ModuleLowering::getParamTable(OpBuilder &b, Location loc) {
  return emitc::GetGlobalOp::create(
      b, loc, paramTable.getType(),
      FlatSymbolRefAttr::get(paramTable.getSymNameAttr()));
}

LogicalResult ModuleLowering::collectParams(ArrayRef<func::FuncOp> functions,
                                            ArrayRef<LayerOp> layers) {
  for (LayerOp layer : layers) {
    auto &params = layerParams[layer];
    WalkResult walk = layer.walk([&](Operation *op) {
      if (auto param = dyn_cast<ParamOp>(op))
        params.insert({param.getName(), param});
      if (auto store = dyn_cast<StoreParamOp>(op))
        if (!params.count(store.getName())) {
          store.emitOpError() << "stores '" << store.getName()
                              << "', which no braid.param of the layer reads "
                                 "before; its type and initializer are "
                                 "unknown";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  SymbolTable symbols(module);
  for (func::FuncOp fn : functions) {
    WalkResult walk = fn.walk([&](Operation *op) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (failed(getSlot(op, param.getName(),
                           cast<RankedTensorType>(param.getType()),
                           param.getInit())))
          return WalkResult::interrupt();
        ParamSlot &slot = slots[slotOf.lookup(param.getName())];
        slot.state |= param.getState();
        slot.transient |= param->hasAttr(kTransientAttrName);
      } else if (auto store = dyn_cast<StoreParamOp>(op)) {
        if (!slotOf.count(store.getName())) {
          store.emitOpError() << "stores '" << store.getName()
                              << "', which no braid.param reads before; its "
                                 "type and initializer are unknown";
          return WalkResult::interrupt();
        }
      } else if (auto repeat = dyn_cast<RepeatOp>(op)) {
        if (failed(addRepeatSlots(repeat, symbols)))
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}

LogicalResult ModuleLowering::addRepeatSlots(RepeatOp repeat,
                                            SymbolTable &symbols) {
  auto layer = symbols.lookup<LayerOp>(repeat.getLayer());
  SmallVector<int64_t> &table = repeatSlots[repeat];
  for (int64_t i = repeat.getFirst(), e = repeat.getFirst() + repeat.getCount();
       i < e; ++i)
    for (auto &[local, param] : layerParams[layer]) {
      std::string name = repeat.getParamPrefix(i) + local.str();
      FailureOr<int64_t> slot = getSlot(
          param, name, cast<RankedTensorType>(param.getType()), param.getInit());
      if (failed(slot))
        return failure();
      table.push_back(*slot);
    }
  // The layer's own repeats (a gradient-accumulation loop repeating the
  // model's blocks) name the same parameters in every instance only when
  // this repeat adds no prefix: their slot tables are then static.
  WalkResult walk = layer.walk([&](RepeatOp nested) {
    if (!repeat.getPrefix().empty()) {
      repeat.emitOpError()
          << "repeats @" << layer.getSymName() << " under prefix '"
          << repeat.getPrefix()
          << "', but that layer repeats layers itself; generated code "
             "handles a repeat inside a layer only when the layer is "
             "repeated without a prefix (gradient accumulation)";
      return WalkResult::interrupt();
    }
    if (repeatSlots.count(nested))
      return WalkResult::advance();
    return failed(addRepeatSlots(nested, symbols)) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

void ModuleLowering::emitInitFunction(Location loc) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  auto fn = emitc::FuncOp::create(
      funcs, loc, kProgramInitFunction,
      FunctionType::get(ctx, {b.getI64Type()}, {}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value seed = entry->getArgument(0);
  // PowerSGD's Q starts alike on every device, also where each tp block
  // keeps its own (a gradient replicated over tp must stay so): each block
  // is initialised as the whole [cols, R] tensor of its name.
  llvm::DenseSet<int64_t> alike;
  module.walk([&](func::FuncOp f) {
    if (f.getBody().empty())
      return;
    for (Operation &op : f.getBody().front())
      for (int64_t slot : getInPlaceSlots(&op, {"q"}))
        alike.insert(slot);
  });
  auto f32Ptr = emitc::PointerType::get(b.getF32Type());
  // The communicators, in the same order on every rank (creating one is
  // collective over the world).
  for (int64_t mask : groups) {
    Value m = emitc::ConstantOp::create(b, loc, b.getI64Type(),
                                        b.getI64IntegerAttr(mask));
    emitc::CallOpaqueOp::create(b, loc, TypeRange{}, "braid_rt_program_comm",
                                ValueRange{m});
  }
  for (auto [slot, param] : llvm::enumerate(slots)) {
    // With stage-local slots, a stage allocates and initialises only the
    // slots it updates or its pieces read; the others stay null.
    OpBuilder::InsertionGuard guard(b);
    if (stageLocal && param.owner >= 0) {
      int64_t holders = int64_t(1) << param.owner;
      for (int64_t reader : pieceReaders[slot])
        holders |= int64_t(1) << reader;
      Value holds = emitc::CallOpaqueOp::create(
                        b, loc, b.getI1Type(), "braid_rt_program_pp_holds",
                        ValueRange{emitc::ConstantOp::create(
                                       b, loc, b.getI64Type(),
                                       b.getI64IntegerAttr(pipelineMask)),
                                   emitc::ConstantOp::create(
                                       b, loc, b.getI64Type(),
                                       b.getI64IntegerAttr(holders))})
                        .getResult(0);
      auto ifOp = emitc::IfOp::create(b, loc, holds);
      b.setInsertionPoint(ifOp.getThenRegion().front().getTerminator());
    }
    Value count = emitc::ConstantOp::create(
        b, loc, b.getI64Type(), b.getI64IntegerAttr(param.type.getNumElements()));
    Value buffer = emitc::CallOpaqueOp::create(b, loc, f32Ptr,
                                               "braid_rt_program_alloc_f32",
                                               ValueRange{count})
                       .getResult(0);
    Value name = emitc::LiteralOp::create(
        b, loc, emitc::PointerType::get(emitc::OpaqueType::get(ctx, "const char")),
        b.getStringAttr(quote(param.name)));
    Value kind = emitc::ConstantOp::create(
        b, loc, b.getI32Type(),
        b.getI32IntegerAttr(static_cast<int32_t>(param.init.getKind())));
    Value a = emitc::ConstantOp::create(
        b, loc, b.getF64Type(),
        b.getF64FloatAttr(param.init.getA().convertToDouble()));
    Value bArg = emitc::ConstantOp::create(
        b, loc, b.getF64Type(),
        b.getF64FloatAttr(param.init.getB().convertToDouble()));
    if (param.blockOf && !alike.contains(slot)) {
      SmallVector<int64_t> global, spec;
      (void)getBlockSpec(module, param.blockOf, param.type.getShape(), global,
                         spec); // checked in getSlot
      Value rank = emitc::ConstantOp::create(
          b, loc, b.getI64Type(), b.getI64IntegerAttr((int64_t)global.size()));
      emitc::CallOpaqueOp::create(
          b, loc, TypeRange{}, "braid_rt_program_init_block_f32",
          ValueRange{seed, name, kind, a, bArg, rank,
                     getShapeArray(b, loc, global),
                     getShapeArray(b, loc, spec), buffer});
    } else {
      emitc::CallOpaqueOp::create(b, loc, TypeRange{},
                                  "braid_rt_program_init_f32",
                                  ValueRange{seed, name, kind, a, bArg, count,
                                             buffer});
    }
    Value table = getParamTable(b, loc);
    Value index = emitc::ConstantOp::create(b, loc, b.getIndexType(),
                                            b.getIndexAttr(slot));
    Value element = emitc::SubscriptOp::create(
        b, loc, cast<TypedValue<emitc::ArrayType>>(table), ValueRange{index});
    emitc::AssignOp::create(b, loc, element, buffer);
  }
  emitc::ReturnOp::create(b, loc, Value());
  // A per-device program also describes its slots for checkpoints
  // (braid_rt_program_save / _resume): each slot's global name, rank, whole
  // shape and block spec (the axes splitting each dimension, as
  // braid_rt_program_block reads it; none for a replicated slot).
  if (!isPerRank())
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  auto list = [&](ArrayRef<int64_t> v) {
    os << "{";
    for (int64_t x : v)
      os << x << ", ";
    os << "0}";
  };
  for (auto [slot, param] : llvm::enumerate(slots)) {
    SmallVector<int64_t> global, spec, blocks;
    if (param.blockOf) {
      (void)getBlockSpec(module, param.blockOf, param.type.getShape(), global,
                         spec, /*view=*/false, &blocks);
    } else {
      global.assign(param.type.getShape().begin(), param.type.getShape().end());
      spec.assign(global.size(), 0);
    }
    os << "static const int64_t braid_slot_shape_" << slot << "[] = ";
    list(global);
    os << ";\nstatic const int64_t braid_slot_spec_" << slot << "[] = ";
    list(spec);
    os << ";\n";
    if (llvm::any_of(blocks, [](int64_t b) { return b > 1; })) {
      os << "static const int64_t braid_slot_blocks_" << slot << "[] = ";
      list(blocks);
      os << ";\n";
    }
  }
  os << "static const braid_rt_program_slot_t braid_slots[] = {";
  for (auto [slot, param] : llvm::enumerate(slots))
    os << "\n    {" << quote(param.name) << ", " << param.type.getRank()
       << ", braid_slot_shape_" << slot << ", braid_slot_spec_" << slot << ", "
       << (param.transient ? "BRAID_RT_PROGRAM_SLOT_TRANSIENT"
                           : std::to_string(param.owner))
       << ", "
       << (param.blockOf && !param.blockOf.getBlocks().empty()
               ? "braid_slot_blocks_" + std::to_string(slot)
               : std::string("0"))
       << "},";
  os << "\n    {0, 0, 0, 0, 0, 0}};\nstatic const int64_t braid_num_slots = "
     << slots.size()
     << ";\nstatic const int64_t braid_pipeline_mask = " << pipelineMask << ";";
  OpBuilder after(ctx);
  after.setInsertionPointAfter(fn);
  emitc::VerbatimOp::create(after, loc, after.getStringAttr(text),
                            ValueRange{});
}

LogicalResult ModuleLowering::run(StringRef entry) {
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();

  // What to lower: the functions, and the layers they repeat (first).
  SmallVector<func::FuncOp> functions;
  for (auto fn : module.getOps<func::FuncOp>())
    if (entry.empty() || fn.getSymName() == entry)
      functions.push_back(fn);
  if (!entry.empty() && functions.empty())
    return module.emitError() << "no function @" << entry << " to lower";
  SymbolTable symbols(module);
  for (MeshOp m : module.getOps<MeshOp>()) {
    if (mesh)
      return m.emitError() << "is a second braid.mesh; generated code runs "
                              "on one mesh";
    mesh = m;
  }
  // A scheduled braid.pipeline runs on an extra innermost axis "pp": its
  // pieces are lowered before the entry (the driver is not: the pipeline's
  // lowering calls the pieces in schedule order).
  SmallVector<func::FuncOp> pieces;
  for (func::FuncOp fn : functions) {
    WalkResult walk = fn.walk([&](PipelineOp pipeline) {
      auto driver = symbols.lookup<func::FuncOp>(pipeline.getCallee());
      if (!driver || !driver->hasAttr("braid.schedule") ||
          drivers.count(driver))
        return WalkResult::advance();
      pipelineMask =
          int64_t(1) << (mesh ? int64_t(mesh.getShape().size()) : 0);
      FailureOr<PipelineDriver> read = PipelineDriver::read(driver);
      if (failed(read))
        return WalkResult::interrupt();
      for (auto call : driver.getOps<func::CallOp>()) // in the driver's order
        if (auto piece = symbols.lookup<func::FuncOp>(call.getCallee()))
          if (!llvm::is_contained(functions, piece) &&
              !llvm::is_contained(pieces, piece))
            pieces.push_back(piece);
      drivers.emplace(driver, std::move(*read));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  functions.insert(functions.begin(), pieces.begin(), pieces.end());
  // The layers the functions repeat, and those they repeat in turn: a
  // layer's function comes after those it calls.
  llvm::SetVector<LayerOp> layers;
  llvm::SmallPtrSet<Operation *, 8> visiting;
  std::function<LogicalResult(Operation *)> addLayers =
      [&](Operation *root) -> LogicalResult {
    WalkResult walk = root->walk([&](RepeatOp repeat) {
      auto layer = symbols.lookup<LayerOp>(repeat.getLayer());
      if (!layer || layers.contains(layer))
        return WalkResult::advance();
      if (!visiting.insert(layer).second) {
        repeat.emitOpError() << "repeats @" << layer.getSymName()
                             << ", which repeats itself through the layers "
                                "it repeats";
        return WalkResult::interrupt();
      }
      if (failed(addLayers(layer)))
        return WalkResult::interrupt();
      visiting.erase(layer);
      layers.insert(layer);
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  };
  for (func::FuncOp fn : functions)
    if (failed(addLayers(fn)))
      return failure();
  if (failed(collectParams(functions, layers.getArrayRef())))
    return failure();
  if (pipelineMask) {
    groups.insert(pipelineMask);
    // The stages whose pieces read each slot.
    pieceReaders.resize(slots.size());
    for (auto &[fn, driver] : drivers)
      for (auto &[key, call] : driver.pieces) {
        int64_t stage = driver.stages[key.first];
        auto piece = symbols.lookup<func::FuncOp>(call.getCallee());
        piece.walk([&](Operation *op) {
          if (auto param = dyn_cast<ParamOp>(op))
            pieceReaders[slotOf.lookup(param.getName())].insert(stage);
          else if (auto repeat = dyn_cast<RepeatOp>(op))
            for (int64_t slot : getAllRepeatSlots(repeat))
              pieceReaders[slot].insert(stage);
        });
      }
  }

  // Includes first, then the globals, then the functions.
  OpBuilder top(ctx);
  top.setInsertionPointToStart(module.getBody());
  Operation *lastInclude = nullptr;
  SmallVector<StringRef> headers(target.headers);
  if (isPerRank())
    headers.push_back("braid/rt/program_spmd.h");
  headers.push_back("stdint.h");
  for (StringRef header : headers)
    lastInclude = emitc::IncludeOp::create(top, loc, top.getStringAttr(header),
                                           header == "stdint.h"
                                               ? top.getUnitAttr()
                                               : nullptr);
  globals.setInsertionPointAfter(lastInclude);
  funcs.setInsertionPointToEnd(module.getBody());
  auto tableType = emitc::ArrayType::get(
      {std::max<int64_t>(1, slots.size())},
      emitc::PointerType::get(top.getF32Type()));
  paramTable = emitc::GlobalOp::create(
      globals, loc, top.getStringAttr("braid_params"), TypeAttr::get(tableType),
      Attribute(), nullptr, nullptr, nullptr);

  auto lowerFunction = [&](FunctionOpInterface fn,
                           bool isLayer) -> LogicalResult {
    SmallVector<Type> inputs, outs;
    for (Type t : llvm::concat<const Type>(fn.getArgumentTypes(),
                                           fn.getResultTypes())) {
      Type bufferType = getBufferType(t);
      if (!bufferType)
        return fn.emitError()
               << "@" << fn.getName() << " has a value of type " << t
               << "; generated code handles statically shaped tensors of "
                  "f32, i32 and i64 only";
      inputs.push_back(bufferType);
    }
    unsigned numArgs = fn.getNumArguments();
    // A layer takes its instance's slot numbers, and the next instance's
    // when it reads its parameters ahead.
    bool next = isLayer && readsNextInstance(cast<LayerOp>(fn));
    unsigned numSlots = isLayer ? (next ? 2 : 1) : 0;
    inputs.insert(inputs.begin() + numArgs, numSlots,
                  emitc::PointerType::get(top.getI64Type()));
    // A yielded future also takes the caller's pending site for it, and a
    // future carried in the site to wait on.
    unsigned numOuts = fn.getResultTypes().size();
    auto pendingType = emitc::PointerType::get(
        emitc::OpaqueType::get(ctx, "braid_rt_program_pending_t"));
    unsigned numPendingOuts = 0;
    for (Type t : fn.getResultTypes())
      if (isa<FutureType>(t)) {
        inputs.push_back(pendingType);
        ++numPendingOuts;
      }
    for (Type t : fn.getArgumentTypes())
      if (isa<FutureType>(t))
        inputs.push_back(pendingType);
    auto target = emitc::FuncOp::create(
        funcs, fn.getLoc(), getEmittedFunctionName(fn.getName()),
        FunctionType::get(ctx, inputs, {}));
    Block *body = target.addEntryBlock();
    OpBuilder b(ctx);
    b.setInsertionPointToStart(body);
    FunctionLowering lowering(*this, b);
    Value slots = isLayer ? body->getArgument(numArgs) : Value();
    Value nextSlots = next ? body->getArgument(numArgs + 1) : Value();
    auto rest = body->getArguments().drop_front(numArgs + numSlots);
    SmallVector<Value> outArgs(rest.begin(), rest.begin() + numOuts);
    SmallVector<Value> pendingArgs(rest.begin() + numOuts,
                                   rest.begin() + numOuts + numPendingOuts);
    SmallVector<Value> pendingIns(rest.begin() + numOuts + numPendingOuts,
                                  rest.end());
    return lowering.lowerBody(fn.getFunctionBody().front(), target, slots,
                              outArgs, pendingArgs, pendingIns, nextSlots);
  };
  // Emitted names flatten '.' and other characters: two symbols may meet.
  llvm::StringMap<Operation *> emittedNames;
  emittedNames[kProgramInitFunction] = nullptr;
  SmallVector<Operation *> definitions;
  for (LayerOp layer : layers)
    definitions.push_back(layer);
  for (func::FuncOp fn : functions)
    definitions.push_back(fn);
  for (Operation *fn : definitions) {
    StringRef symbol = SymbolTable::getSymbolName(fn).getValue();
    auto [it, inserted] =
        emittedNames.try_emplace(getEmittedFunctionName(symbol), fn);
    if (!inserted)
      return fn->emitError()
             << "@" << symbol << " would be emitted as '" << it->first()
             << "', the name of "
             << (it->second ? "@" + SymbolTable::getSymbolName(it->second)
                                        .getValue()
                                        .str()
                            : std::string("the parameter initialiser"))
             << "; rename one of them";
  }
  LLVM_DEBUG(llvm::dbgs() << "braid-lower-to-emitc: " << slots.size()
                          << " parameter slots, " << layers.size()
                          << " layers, " << functions.size()
                          << " functions\n");
  // The call depths: entries 0, then each callee deeper than its callers
  // (a longest path; layers do not recurse).
  DenseMap<Operation *, SmallVector<Operation *>> callees;
  DenseSet<Operation *> pieceFunctions;
  auto piecesOf = [&](PipelineOp pipeline, auto fn) {
    auto it = drivers.find(symbols.lookup<func::FuncOp>(pipeline.getCallee()));
    if (it != drivers.end())
      for (auto &[key, call] : it->second.pieces)
        if (auto piece = symbols.lookup<func::FuncOp>(call.getCallee()))
          fn(piece);
  };
  for (Operation *definition : definitions)
    definition->walk([&](Operation *op) {
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        if (auto layer = symbols.lookup<LayerOp>(repeat.getLayer()))
          callees[definition].push_back(layer);
      } else if (auto pipeline = dyn_cast<PipelineOp>(op)) {
        piecesOf(pipeline, [&](func::FuncOp piece) {
          callees[definition].push_back(piece);
          pieceFunctions.insert(piece);
        });
      }
    });
  for (func::FuncOp fn : functions)
    if (!pieceFunctions.contains(fn))
      depth[fn] = 0;
  for (size_t round = 0, changed = 1; changed && round <= definitions.size();
       ++round) {
    changed = 0;
    for (Operation *caller : definitions) {
      auto it = depth.find(caller);
      if (it == depth.end())
        continue;
      int64_t d = it->second + 1;
      for (Operation *callee : callees[caller]) {
        auto [entry, inserted] = depth.try_emplace(callee, d);
        if (inserted || entry->second < d) {
          entry->second = d;
          changed = 1;
        }
      }
    }
  }
  for (LayerOp layer : layers)
    if (failed(lowerFunction(layer, /*isLayer=*/true)))
      return failure();
  for (func::FuncOp fn : functions)
    if (failed(lowerFunction(fn, /*isLayer=*/false)))
      return failure();
  for (auto &[d, shared] : sharedArenas)
    for (emitc::ConstantOp count : shared.counts)
      count.setValueAttr(
          IntegerAttr::get(IntegerType::get(ctx, 64), shared.bytes / 4));
  emitInitFunction(loc);
  attachMemoryPlan(functions, layers.getArrayRef());

  // The braid definitions are now emitted functions.
  for (Operation &op : llvm::make_early_inc_range(module.getOps()))
    if (op.getDialect() && !isa<emitc::EmitCDialect>(op.getDialect()))
      op.erase();
  return success();
}

void ModuleLowering::attachMemoryPlan(ArrayRef<func::FuncOp> functions,
                                      ArrayRef<LayerOp> layers) {
  int64_t stages = drivers.empty() ? 1 : drivers.begin()->second.getNumRanks();
  // The stages running each lowered function: a piece its chunk's stage,
  // a layer those of the functions repeating it, the others every stage.
  SymbolTable symbols(module);
  DenseMap<Operation *, std::set<int64_t>> runsOn;
  DenseSet<Operation *> pieces;
  for (auto &[fn, driver] : drivers)
    for (auto &[key, call] : driver.pieces)
      if (auto piece = symbols.lookup<func::FuncOp>(call.getCallee())) {
        runsOn[piece].insert(driver.stages[key.first]);
        pieces.insert(piece);
      }
  SmallVector<Operation *> callers;
  for (func::FuncOp fn : functions) {
    if (!pieces.contains(fn))
      for (int64_t s = 0; s < stages; ++s)
        runsOn[fn].insert(s);
    callers.push_back(fn);
  }
  // Layers come after the layers they repeat: callers first in reverse.
  for (LayerOp layer : llvm::reverse(layers))
    callers.push_back(layer);
  for (Operation *caller : callers) {
    std::set<int64_t> on = runsOn[caller];
    caller->walk([&](RepeatOp repeat) {
      if (auto layer = symbols.lookup<LayerOp>(repeat.getLayer()))
        runsOn[layer].insert(on.begin(), on.end());
    });
  }
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  SmallVector<Attribute> perStage;
  for (int64_t s = 0; s < stages; ++s) {
    int64_t params = 0, state = 0, grads = 0, acts = 0, work = 0, arena = 0;
    for (auto [i, slot] : llvm::enumerate(slots)) {
      bool held = !pipelineMask || !stageLocal || slot.owner < 0 ||
                  slot.owner == s || pieceReaders[i].count(s);
      if (held)
        (slot.state ? state : params) +=
            alignBytes(slot.type.getNumElements() * 4);
    }
    std::set<int64_t> sharedUsed;
    for (auto &[fn, buffers] : functionBuffers) {
      if (!runsOn[fn].count(s))
        continue;
      int64_t d = depth.lookup(fn);
      if (reuseBuffers && d >= 1 && sharedArenas.count(d)) {
        sharedUsed.insert(d); // counted once below
        continue;
      }
      int64_t bytes = getArenaBytes(buffers, pipelineMask ? s : -1);
      arena += bytes;
      // The step's own function: what is live at its peak is gradients
      // and activations; the rest of its arena and the arenas of the
      // layers and pieces it calls are workspace.
      if (isa<func::FuncOp>(fn) && !pieces.contains(fn)) {
        LivePeak peak = getLivePeak(buffers, pipelineMask ? s : -1);
        grads += peak.gradients;
        acts += peak.others;
        work += bytes - peak.gradients - peak.others;
      } else {
        work += bytes;
      }
    }
    for (int64_t d : sharedUsed) {
      arena += sharedArenas[d].bytes;
      work += sharedArenas[d].bytes;
    }
    auto entry = [&](StringRef name, int64_t v) {
      return b.getNamedAttr(name, b.getI64IntegerAttr(v));
    };
    perStage.push_back(b.getDictionaryAttr(
        {entry("stage", s), entry("parameters", params),
         entry("gradients", grads), entry("optimizer_state", state),
         entry("activations", acts), entry("workspace", work),
         entry("arenas", arena),
         entry("total", params + state + grads + acts + work)}));
  }
  module->setAttr("braidc.memory_plan", b.getArrayAttr(perStage));
  module->setAttr("braidc.buffer_reuse", b.getBoolAttr(reuseBuffers));
  (void)ctx;
}

const TargetDescription *TargetDescription::get(StringRef name) {
  static const TargetDescription cpu{
      "cpu",
      {"braid/rt/kernels.h", "braid/rt/program.h"},
      "braid_rt_program_stream()",
      /*deviceMemory=*/false};
  static const TargetDescription cuda{
      "cuda",
      {"braid/rt/kernels.h", "braid/rt/program.h"},
      "braid_rt_program_stream()",
      /*deviceMemory=*/true};
  if (name == "cpu")
    return &cpu;
  if (name == "cuda")
    return &cuda;
  return nullptr;
}
