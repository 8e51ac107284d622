//===- BraidToEmitC.cpp - braid to EmitC calls of the runtime's kernels ---===//
//
// Lowers a single-device braid program to EmitC: tensors become buffers,
// compute ops become calls of the runtime's kernels (braid/rt/kernels.h),
// parameters become slots of a global table, braid.repeat becomes a loop
// calling the layer's function. See docs/codegen.md.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "StagePlacement.h"
#include "braid/Dialect/Braid/Transforms/PipelineDriver.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

#include <functional>
#include <map>
#include <set>

#define DEBUG_TYPE "braid-lower-to-emitc"

namespace mlir::braid {
#define GEN_PASS_DEF_CONVERTBRAIDTOEMITCPASS
#include "braid/Conversion/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

std::string mlir::braid::getEmittedFunctionName(StringRef symbol) {
  std::string name = "braid_";
  for (char c : symbol)
    name += llvm::isAlnum(c) || c == '_' ? c : '_';
  return name;
}

namespace {

class FunctionLowering;

/// Lowers one op inside a function being lowered; reports errors on the op.
using OpLowering = std::function<LogicalResult(Operation *, FunctionLowering &)>;

/// The lowering of each op kind that has one, keyed by the op's TypeID.
class LoweringTable {
public:
  template <typename OpT>
  void add(std::function<LogicalResult(OpT, FunctionLowering &)> fn) {
    table[TypeID::get<OpT>()] = [fn](Operation *op, FunctionLowering &l) {
      return fn(cast<OpT>(op), l);
    };
  }
  const OpLowering *lookup(Operation *op) const {
    auto it = table.find(op->getName().getTypeID());
    return it == table.end() ? nullptr : &it->second;
  }

private:
  DenseMap<TypeID, OpLowering> table;
};

/// One global parameter: its full name, type and initializer.
struct ParamSlot {
  std::string name;
  RankedTensorType type;
  InitAttr init;
  /// The block this device holds (a per-device program), or null.
  ShardingAttr blockOf;
  /// The pipeline stage whose ranks hold its current value (the stage that
  /// updates it), or -1: every rank.
  int64_t owner = -1;
};

/// Module-wide state: the parameter table, the static arrays, the emitted
/// functions.
class ModuleLowering {
public:
  ModuleLowering(ModuleOp module, const LoweringTable &table, bool spmd)
      : table(table), spmd(spmd), module(module),
        globals(module.getContext()), funcs(module.getContext()) {}

  LogicalResult run(StringRef entry);

  /// The slot of the parameter `name`, created on first use.
  FailureOr<int64_t> getSlot(Operation *op, StringRef name,
                             RankedTensorType type, InitAttr init);
  /// A `static const int64_t[]` global holding `values`, shared by equal
  /// arrays.
  Value getShapeArray(OpBuilder &b, Location loc, ArrayRef<int64_t> values);
  /// A `static int64_t[]` global (mutable, so that its elements' addresses
  /// are plain `int64_t *`) holding a repeat's slot table.
  Value getSlotTable(OpBuilder &b, Location loc, ArrayRef<int64_t> values);
  Value getParamTable(OpBuilder &b, Location loc);
  /// A `static const` global array holding the elements of `data`.
  Value getConstantData(OpBuilder &b, Location loc, DenseElementsAttr data);
  /// A new `static T *braid_buffer_N` global (null until first used), as an
  /// lvalue: the buffer of one allocation site.
  Value getBufferGlobal(OpBuilder &b, Location loc, Type bufferType);
  /// The address of a new `static braid_rt_program_pending_t braid_pending_N`
  /// global: one collective site's request and staging buffers.
  Value getPendingSite(OpBuilder &b, Location loc);
  /// The bit mask of the group over `axes` of mesh `meshRef` (recorded, so
  /// that braid_program_init creates its communicator); errors on `op`.
  FailureOr<int64_t> getGroup(Operation *op, FlatSymbolRefAttr meshRef,
                              ArrayAttr axes, int64_t *size = nullptr);
  /// For a sharded parameter or argument: the whole shape and the spec of
  /// braid_rt_program_block (per dimension: the number of axes, their
  /// indices).
  LogicalResult getBlockSpec(Operation *op, ShardingAttr sharding,
                             ArrayRef<int64_t> local,
                             SmallVectorImpl<int64_t> &global,
                             SmallVectorImpl<int64_t> &spec);

  const LoweringTable &table;
  /// The program runs on the runtime's context (program_spmd.h), with a
  /// mesh, a pipeline, or as one rank (the pass's `spmd`).
  bool spmd;
  bool isPerRank() const { return spmd || mesh || pipelineMask; }
  bool hasMesh() const { return bool(mesh); }
  /// The group of the pipeline axis "pp" (appended after the mesh's axes)
  /// when the program runs a scheduled braid.pipeline, else 0.
  int64_t pipelineMask = 0;
  /// Local parameter names of each layer, in order of first appearance:
  /// position j is the instance's j-th slot.
  DenseMap<Operation *, llvm::MapVector<StringRef, ParamOp>> layerParams;
  /// The slot table (instance-major) of each repeat.
  DenseMap<Operation *, SmallVector<int64_t>> repeatSlots;
  /// The parameter table's slots, and the slot of each full name.
  std::vector<ParamSlot> slots;
  llvm::StringMap<int64_t> slotOf;
  /// The scheduled drivers of the pipelines, read.
  std::map<Operation *, PipelineDriver> drivers;
  /// In a pipelined program whose placement guarded every op it placed on
  /// one stage and never moves an owned slot's buffer: each stage holds
  /// only the slots it updates or its pieces read (the others stay null).
  bool stageLocal = false;
  /// In a pipelined program: the stages whose pieces read each slot.
  std::vector<std::set<int64_t>> pieceReaders;
  /// Whether pieces read each slot that `op` (a store or a repeat) writes
  /// only on `stage`; records `stage` as their owner if so. False for a
  /// braid.pipeline, which every stage runs.
  bool claimSlots(Operation *op, int64_t stage);
  /// The slots of `repeat`'s instances and of the repeats in its layer.
  SmallVector<int64_t> getAllRepeatSlots(RepeatOp repeat);

private:
  LogicalResult collectParams(ArrayRef<func::FuncOp> functions,
                              ArrayRef<LayerOp> layers);
  void emitInitFunction(Location loc);
  /// The slot table of `repeat` (instance-major), and those of the repeats
  /// inside its layer.
  LogicalResult addRepeatSlots(RepeatOp repeat, SymbolTable &symbols);
  Value getGlobalArray(OpBuilder &b, Location loc, StringRef prefix,
                       ArrayRef<int64_t> values, bool constant);

  ModuleOp module;
  OpBuilder globals; // before the first original op, after the includes
  OpBuilder funcs;   // at the end of the module
  std::map<std::pair<bool, std::vector<int64_t>>, std::string> arrays;
  unsigned numArrays = 0;
  unsigned numBuffers = 0;
  unsigned numPending = 0;
  emitc::GlobalOp paramTable;
  /// The module's mesh (per-device programs), or null.
  MeshOp mesh;
  /// The groups of axes used, in order of first use.
  llvm::SetVector<int64_t> groups;
};

/// Per-function state: the buffer of each tensor value and the buffers to
/// free on return.
class FunctionLowering {
public:
  FunctionLowering(ModuleLowering &module, OpBuilder &b)
      : module(module), b(b) {}

  /// Lowers the body of `fn` (a func.func or braid.layer) into `target`.
  /// `slots` is the layer instance's slot numbers (null for a function),
  /// `outs` the out-pointer arguments of the results.
  LogicalResult lowerBody(Block &body, emitc::FuncOp target, Value slots,
                          ArrayRef<Value> outs);

  //===--- Helpers for op lowerings ---------------------------------------===//

  /// The buffer holding `v`.
  Value get(Value v) { return buffers.lookup(v); }
  /// The buffer of op result `v`.
  Value result(Value v) {
    Type type = v.getType();
    if (auto future = dyn_cast<FutureType>(type)) // a started collective's
      type = future.getValueType();
    Value buffer = allocate(cast<RankedTensorType>(type));
    buffers[v] = buffer;
    return buffer;
  }
  /// A buffer for a tensor of `type`: each allocation site has its own,
  /// allocated on first use and kept (functions are not reentrant, and
  /// results leave a function by copy, so a site's buffer is dead when its
  /// function is entered again).
  Value allocate(RankedTensorType type);
  /// Makes `v` share `buffer` (no copy).
  void alias(Value v, Value buffer) { buffers[v] = buffer; }

  Value i64(int64_t v) {
    return emitc::ConstantOp::create(b, loc, b.getI64Type(),
                                     b.getI64IntegerAttr(v));
  }
  Value index(int64_t v) {
    return emitc::ConstantOp::create(b, loc, b.getIndexType(),
                                     b.getIndexAttr(v));
  }
  Value f64(double v) {
    return emitc::ConstantOp::create(b, loc, b.getF64Type(),
                                     b.getF64FloatAttr(v));
  }
  Value f32(double v) {
    return emitc::ConstantOp::create(b, loc, b.getF32Type(),
                                     b.getF32FloatAttr(v));
  }
  /// An `int` 0 or 1 (unit attributes).
  Value flag(bool v) {
    return emitc::ConstantOp::create(b, loc, b.getI32Type(),
                                     b.getI32IntegerAttr(v));
  }
  /// `(cType)value`, for the runtime's enums.
  Value enumValue(StringRef cType, int64_t value) {
    Value v = emitc::ConstantOp::create(b, loc, b.getI32Type(),
                                        b.getI32IntegerAttr(value));
    return emitc::CastOp::create(
        b, loc, emitc::OpaqueType::get(b.getContext(), cType), v);
  }
  Value shape(ArrayRef<int64_t> dims) {
    return module.getShapeArray(b, loc, dims);
  }
  Value shapeOf(Value tensor) { return shape(typeOf(tensor).getShape()); }
  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  static int64_t rankOf(Value v) { return typeOf(v).getRank(); }
  static int64_t countOf(Value v) { return typeOf(v).getNumElements(); }
  /// `rows` of a row-wise kernel: the product of all dimensions but the last.
  static int64_t rowsOf(Value v) {
    ArrayRef<int64_t> shape = typeOf(v).getShape();
    int64_t rows = 1;
    for (int64_t d : shape.drop_back(shape.empty() ? 0 : 1))
      rows *= d;
    return rows;
  }
  static int64_t colsOf(Value v) {
    auto shape = typeOf(v).getShape();
    return shape.empty() ? 1 : shape.back();
  }

  void call(StringRef callee, ArrayRef<Value> args) {
    emitc::CallOpaqueOp::create(b, loc, TypeRange{}, callee, args);
  }
  /// Calls a kernel returning braid_rt_status_t and checks the status.
  void callChecked(StringRef callee, ArrayRef<Value> args);
  /// Calls a kernel of braid/rt/kernels.h on the program's stream (its
  /// first argument on every backend).
  void kernel(StringRef callee, ArrayRef<Value> args) {
    call(callee, withStream(args));
  }
  void kernelChecked(StringRef callee, ArrayRef<Value> args) {
    callChecked(callee, withStream(args));
  }
  /// Places the ops of `body` after its braid.pipeline on the pipeline's
  /// stages, with the owners of the parameter slots (and whether each stage
  /// can hold only its own slots).
  LogicalResult placeStages(Block &body,
                            std::optional<StagePlacement> &placement);
  /// The stage of the pipeline that computes `v` (a braid.pipeline
  /// result), or StagePlacement::kAll.
  int64_t getPipelineStage(Value v);
  /// Runs what the lowering of `op` emitted after `last` in `block` only on
  /// pipeline stage `stage` (its buffers stay visible to later ops).
  void guardStage(Operation *op, Block *block, Operation *last,
                  int64_t stage);
  /// The C string naming the current op (its location), for messages.
  Value whereText() { return text(where); }
  /// A C string literal.
  Value text(StringRef s);
  /// `args` after the program's compute stream.
  SmallVector<Value> withStream(ArrayRef<Value> args);
  /// The pending site of a started collective's future.
  DenseMap<Value, Value> pendingOf;
  /// Copies `count` elements of `from` to `to` (f32, i32 or i64).
  void copy(Type elementType, Value from, Value to, int64_t count);

  ModuleLowering &module;
  OpBuilder &b;
  Location loc = UnknownLoc::get(b.getContext());
  std::string where;
  /// The slot numbers of the current layer instance (null outside layers).
  Value layerSlots;

private:
  DenseMap<Value, Value> buffers;
};

} // namespace

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// The buffer type of a tensor type, or null when the element type is not one
/// the kernels take.
static Type getBufferType(Type type) {
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

static StringRef getElementSuffix(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isInteger(32))
    return "i32";
  return "i64";
}

/// The C string literal of `s`.
static std::string quote(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// "file:line:col: op-name", for messages from the running program.
static std::string describe(Operation *op) {
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
      "braid_rt_program_stream()")};
  llvm::append_range(all, args);
  return all;
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

static bool isOverwrittenWhileLive(ParamOp read);

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
    const OpLowering *lowering = module.table.lookup(&op);
    if (!lowering)
      return op.emitOpError()
             << "has no lowering to EmitC yet (braid-lower-to-emitc handles "
                "compute ops, parameters, braid.repeat and collectives)";
    Block *block = b.getInsertionBlock();
    Operation *last = b.getInsertionPoint() == block->begin()
                          ? nullptr
                          : &*std::prev(b.getInsertionPoint());
    if (failed((*lowering)(&op, *this)))
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

bool ModuleLowering::claimSlots(Operation *op, int64_t stage) {
  if (isa<PipelineOp>(op))
    return false; // every stage runs its part of a pipeline
  SmallVector<int64_t> written;
  if (auto store = dyn_cast<StoreParamOp>(op))
    written.push_back(slotOf.lookup(store.getName()));
  else if (auto repeat = dyn_cast<RepeatOp>(op))
    written = getAllRepeatSlots(repeat);
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
                                      Type bufferType) {
  std::string name = ("braid_buffer_" + Twine(numBuffers++)).str();
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

LogicalResult ModuleLowering::getBlockSpec(Operation *op,
                                           ShardingAttr sharding,
                                           ArrayRef<int64_t> local,
                                           SmallVectorImpl<int64_t> &global,
                                           SmallVectorImpl<int64_t> &spec) {
  if (!mesh || sharding.getMesh().getValue() != mesh.getSymName())
    return op->emitOpError() << "holds a block on mesh " << sharding.getMesh()
                             << "; generated code runs on the module's one "
                                "braid.mesh";
  if (!sharding.getPartialAxes().empty())
    return op->emitOpError() << "holds a partial sum; generated code takes "
                                "blocks of whole tensors only";
  if (local.size() > 16) // braid_rt_program_block_runs
    return op->emitOpError() << "holds a block of a rank-" << local.size()
                             << " tensor; generated code takes blocks of "
                                "rank 16 at most";
  for (unsigned d = 0; d < local.size(); ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
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
    global.push_back(local[d] * count);
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
      std::string name =
          repeat.getPrefix().empty()
              ? local.str()
              : (repeat.getPrefix() + "." + Twine(i) + "." + local).str();
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
    if (param.blockOf) {
      SmallVector<int64_t> global, spec;
      (void)getBlockSpec(module, param.blockOf, param.type.getShape(), global,
                         spec); // checked in getSlot
      Value rank = emitc::ConstantOp::create(
          b, loc, b.getI64Type(), b.getI64IntegerAttr(param.type.getRank()));
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
    SmallVector<int64_t> global, spec;
    if (param.blockOf) {
      (void)getBlockSpec(module, param.blockOf, param.type.getShape(), global,
                         spec);
    } else {
      global.assign(param.type.getShape().begin(), param.type.getShape().end());
      spec.assign(global.size(), 0);
    }
    os << "static const int64_t braid_slot_shape_" << slot << "[] = ";
    list(global);
    os << ";\nstatic const int64_t braid_slot_spec_" << slot << "[] = ";
    list(spec);
    os << ";\n";
  }
  os << "static const braid_rt_program_slot_t braid_slots[] = {";
  for (auto [slot, param] : llvm::enumerate(slots))
    os << "\n    {" << quote(param.name) << ", " << param.type.getRank()
       << ", braid_slot_shape_" << slot << ", braid_slot_spec_" << slot
       << ", " << param.owner << "},";
  os << "\n    {0, 0, 0, 0, 0}};\nstatic const int64_t braid_num_slots = "
     << slots.size() << ";\nstatic const int64_t braid_pipeline_mask = "
     << pipelineMask << ";";
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
  SmallVector<StringRef> headers = {"braid/rt/kernels.h", "braid/rt/program.h"};
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
    if (isLayer)
      inputs.insert(inputs.begin() + numArgs,
                    emitc::PointerType::get(top.getI64Type()));
    auto target = emitc::FuncOp::create(
        funcs, fn.getLoc(), getEmittedFunctionName(fn.getName()),
        FunctionType::get(ctx, inputs, {}));
    Block *body = target.addEntryBlock();
    OpBuilder b(ctx);
    b.setInsertionPointToStart(body);
    FunctionLowering lowering(*this, b);
    Value slots = isLayer ? body->getArgument(numArgs) : Value();
    SmallVector<Value> outArgs(
        body->getArguments().drop_front(numArgs + (isLayer ? 1 : 0)));
    return lowering.lowerBody(fn.getFunctionBody().front(), target, slots,
                              outArgs);
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
  for (LayerOp layer : layers)
    if (failed(lowerFunction(layer, /*isLayer=*/true)))
      return failure();
  for (func::FuncOp fn : functions)
    if (failed(lowerFunction(fn, /*isLayer=*/false)))
      return failure();
  emitInitFunction(loc);

  // The braid definitions are now emitted functions.
  for (Operation &op : llvm::make_early_inc_range(module.getOps()))
    if (op.getDialect() && !isa<emitc::EmitCDialect>(op.getDialect()))
      op.erase();
  return success();
}

//===----------------------------------------------------------------------===//
// Op lowerings
//===----------------------------------------------------------------------===//

/// The parameter buffer of slot `slot` (an i64 value) or of a constant slot.
static Value loadParam(FunctionLowering &l, Value slot) {
  OpBuilder &b = l.b;
  Value table = l.module.getParamTable(b, l.loc);
  Value element = emitc::SubscriptOp::create(
      b, l.loc, cast<TypedValue<emitc::ArrayType>>(table), ValueRange{slot});
  return emitc::LoadOp::create(b, l.loc,
                               emitc::PointerType::get(b.getF32Type()),
                               element);
}

/// The slot value of parameter `name` as seen from the current function:
/// a constant outside layers, the instance's slot table entry inside.
static FailureOr<Value> getParamSlot(Operation *op, StringRef name,
                                     RankedTensorType type, InitAttr init,
                                     FunctionLowering &l) {
  if (!l.layerSlots) {
    FailureOr<int64_t> slot = l.module.getSlot(op, name, type, init);
    if (failed(slot))
      return failure();
    return l.index(*slot);
  }
  auto layer = op->getParentOfType<LayerOp>();
  auto &params = l.module.layerParams[layer];
  int64_t j = std::distance(params.begin(), params.find(name));
  Value entry = emitc::SubscriptOp::create(
      l.b, l.loc, cast<TypedValue<emitc::PointerType>>(l.layerSlots),
      l.index(j));
  return emitc::LoadOp::create(l.b, l.loc, l.b.getI64Type(), entry)
      .getResult();
}

/// Whether `op` may write parameter `name`: a store of it, or a repeat
/// whose layer stores any parameter (its instances' names are computed).
static bool mayWriteParam(Operation *op, StringRef name) {
  if (auto store = dyn_cast<StoreParamOp>(op))
    return store.getName() == name;
  auto repeat = dyn_cast<RepeatOp>(op);
  if (!repeat)
    return false;
  auto layer =
      SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, repeat.getLayerAttr());
  // Any store in the layer, or in the layers it repeats, may write it.
  return layer && layer.walk([&](Operation *inner) {
                        return isa<StoreParamOp>(inner) ||
                                       (isa<RepeatOp>(inner) &&
                                        mayWriteParam(inner, name))
                                   ? WalkResult::interrupt()
                                   : WalkResult::advance();
                      }).wasInterrupted();
}

/// Whether the value `read` gives may be overwritten (by a store of the same
/// parameter) before its last use. A read aliases the parameter's buffer,
/// which is right only when it is not.
static bool isOverwrittenWhileLive(ParamOp read) {
  Block *block = read->getBlock();
  Operation *lastUse = nullptr;
  for (Operation *user : read->getUsers()) {
    Operation *inBlock = block->findAncestorOpInBlock(*user);
    if (inBlock && (!lastUse || lastUse->isBeforeInBlock(inBlock)))
      lastUse = inBlock;
  }
  if (!lastUse)
    return false;
  // A terminator copies its operands out before anything else runs.
  for (Operation *op = read->getNextNode(); op && op != lastUse;
       op = op->getNextNode())
    if (mayWriteParam(op, read.getName()))
      return true;
  return false;
}

static LogicalResult lowerRepeat(RepeatOp op, FunctionLowering &l) {
  OpBuilder &b = l.b;
  Location loc = l.loc;
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, op.getLayerAttr());
  int64_t count = op.getCount();
  unsigned carried = op.getNumCarried();
  int64_t perInstance = l.module.layerParams[layer].size();

  // Carried values live in `current`; each instance writes `next`, which is
  // copied back (the instance's operands and results must not overlap).
  SmallVector<Value> current, next, stacked;
  for (unsigned i = 0; i < carried; ++i) {
    Value input = op.getInputs()[i];
    Value cur = l.result(op.getResult(i));
    l.copy(l.typeOf(input).getElementType(), l.get(input), cur,
           l.countOf(input));
    current.push_back(cur);
    next.push_back(l.allocate(l.typeOf(input)));
  }
  for (unsigned i = 0; i < op.getResults().size(); ++i)
    if (i >= carried)
      stacked.push_back(l.result(op.getResult(i)));

  Value slotTable =
      l.module.getSlotTable(b, loc, l.module.repeatSlots[op.getOperation()]);
  // The instance counter is an int64_t: pointer offsets need an integer.
  Value zero = l.i64(0), one = l.i64(1), upper = l.i64(count);
  auto loop = emitc::ForOp::create(b, loc, zero, upper, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value iv = loop.getInductionVar();
  Value instance = iv;
  if (op.getReverse())
    instance = emitc::SubOp::create(b, loc, b.getI64Type(), l.i64(count - 1),
                                    iv);
  Value slotEntry = emitc::SubscriptOp::create(
      b, loc, cast<TypedValue<emitc::ArrayType>>(slotTable),
      ValueRange{emitc::MulOp::create(b, loc, b.getI64Type(), instance,
                                      l.i64(perInstance))
                     .getResult()});
  Value slots = emitc::AddressOfOp::create(
      b, loc, emitc::PointerType::get(b.getI64Type()), slotEntry);

  // The instance's slice of a stacked buffer: `instance` times the slice's
  // element count past its start.
  auto slice = [&](Value buffer, Value stackedValue) -> Value {
    int64_t sliceCount = l.countOf(stackedValue) / count;
    Value offset = emitc::MulOp::create(b, loc, b.getI64Type(), instance,
                                        l.i64(sliceCount));
    return emitc::AddOp::create(b, loc, buffer.getType(), buffer, offset);
  };
  SmallVector<Value> args(current);
  for (Value input : op.getInputs().drop_front(carried))
    args.push_back(slice(l.get(input), input));
  args.push_back(slots);
  args.append(next);
  for (auto [buffer, value] :
       llvm::zip(stacked, op.getResults().drop_front(carried)))
    args.push_back(slice(buffer, value));
  l.call(getEmittedFunctionName(layer.getSymName()), args);
  for (unsigned i = 0; i < carried; ++i)
    l.copy(l.typeOf(op.getResult(i)).getElementType(), next[i], current[i],
           l.countOf(op.getResult(i)));
  return success();
}

template <typename OpT>
static void addBinary(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel, {l.get(op.getLhs()), l.get(op.getRhs()),
                      l.i64(l.rankOf(op.getLhs())), l.shapeOf(op.getLhs()),
                      l.i64(l.rankOf(op.getRhs())), l.shapeOf(op.getRhs()),
                      l.result(op.getResult())});
    return success();
  });
}

template <typename OpT>
static void addUnary(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel, {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
                      l.result(op.getResult())});
    return success();
  });
}

/// The kernel name for integer operand `ids`: `base` for i32, `base_i64`.
static std::string idKernel(StringRef base, Value ids) {
  return FunctionLowering::typeOf(ids).getElementType().isInteger(64)
             ? (base + "_i64").str()
             : base.str();
}

/// The group of a vocabulary-parallel op (with `mesh` and `vocab_axes`),
/// or -1 for a single-device op.
template <typename OpT>
static FailureOr<int64_t> vocabGroup(OpT op, FunctionLowering &l) {
  if (!op.getMeshAttr())
    return int64_t(-1);
  if (!op.getVocabAxesAttr())
    return op.emitOpError() << "has a mesh but no vocab_axes";
  return l.module.getGroup(op, op.getMeshAttr(), op.getVocabAxesAttr());
}

/// Whether ids of `v` are i64 (an `int` flag for the SPMD helpers).
static Value isI64(FunctionLowering &l, Value ids) {
  return l.flag(FunctionLowering::typeOf(ids).getElementType().isInteger(64));
}

/// Checks ids (labels, token ids) against [0, range) before a kernel, whose
/// INVALID_ARGUMENT would name neither the id nor its position.
static void checkIds(FunctionLowering &l, StringRef what, Value ids,
                     int64_t range) {
  l.call("braid_rt_program_check_ids",
         {l.text(what), l.get(ids), isI64(l, ids), l.i64(l.countOf(ids)),
          l.i64(range), l.whereText()});
}

/// [outer][size][chunk] view of `shape` split into `size` blocks along `dim`.
static std::pair<int64_t, int64_t> splitView(ArrayRef<int64_t> shape,
                                             int64_t dim, int64_t size) {
  int64_t outer = 1, chunk = shape[dim] / size;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1, e = shape.size(); d < e; ++d)
    chunk *= shape[d];
  return {outer, chunk};
}

/// A collective or its `_start` form: braid_rt_program_collective[_start]_f32
/// with its views, over the group of `axes`.
static LogicalResult lowerCollective(Operation *op, FunctionLowering &l,
                                     StringRef kind, Value input,
                                     FlatSymbolRefAttr meshRef, ArrayAttr axes,
                                     RankedTensorType resultType,
                                     int64_t splitDim, int64_t concatDim,
                                     int64_t root, bool start) {
  int64_t size = 1;
  FailureOr<int64_t> mask = l.module.getGroup(op, meshRef, axes, &size);
  if (failed(mask))
    return failure();
  if (!l.typeOf(input).getElementType().isF32())
    return op->emitOpError() << "exchanges " << l.typeOf(input).getElementType()
                             << "; generated collectives take f32";
  ArrayRef<int64_t> in = l.typeOf(input).getShape();
  ArrayRef<int64_t> out = resultType.getShape();
  int64_t rank = in.size();
  if (splitDim < 0)
    splitDim += rank;
  if (concatDim < 0)
    concatDim += rank;
  std::pair<int64_t, int64_t> inView{1, 1}, outView{1, 1};
  if (kind == "REDUCE_SCATTER" || kind == "ALL_TO_ALL")
    inView = splitView(in, splitDim, size);
  if (kind == "ALL_GATHER" || kind == "ALL_TO_ALL")
    outView = splitView(out, concatDim, size);
  Value result = l.result(op->getResult(0));
  Value pending = l.module.getPendingSite(l.b, l.loc);
  if (start)
    l.pendingOf[op->getResult(0)] = pending;
  l.call(start ? "braid_rt_program_collective_start_f32"
               : "braid_rt_program_collective_f32",
         {l.enumValue("braid_rt_program_collective_t",
                      kind == "ALL_REDUCE"       ? 0
                      : kind == "ALL_GATHER"     ? 1
                      : kind == "REDUCE_SCATTER" ? 2
                      : kind == "ALL_TO_ALL"     ? 3
                                                 : 4),
          l.i64(*mask), l.get(input), l.i64(l.countOf(input)),
          l.i64(inView.first), l.i64(inView.second), l.i64(outView.first),
          l.i64(outView.second), l.i64(root), result, pending, l.whereText()});
  return success();
}

template <typename OpT> static LogicalResult checkSum(OpT op) {
  if (op.getKind() != ReduceKind::sum)
    return op.emitOpError() << "reduces with '"
                            << stringifyReduceKind(op.getKind())
                            << "'; generated collectives sum only";
  return success();
}

static void populateCollectiveLowerings(LoweringTable &t) {
  t.add<AllReduceOp>([](AllReduceOp op, FunctionLowering &l) -> LogicalResult {
    if (failed(checkSum(op)))
      return failure();
    return lowerCollective(op, l, "ALL_REDUCE", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), 0, 0, 0, false);
  });
  t.add<AllReduceStartOp>(
      [](AllReduceStartOp op, FunctionLowering &l) -> LogicalResult {
        if (failed(checkSum(op)))
          return failure();
        return lowerCollective(op, l, "ALL_REDUCE", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, 0, 0, true);
      });
  t.add<AllGatherOp>([](AllGatherOp op, FunctionLowering &l) -> LogicalResult {
    return lowerCollective(op, l, "ALL_GATHER", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), 0, op.getDim(), 0, false);
  });
  t.add<AllGatherStartOp>(
      [](AllGatherStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "ALL_GATHER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, op.getDim(), 0, true);
      });
  t.add<ReduceScatterOp>(
      [](ReduceScatterOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "REDUCE_SCATTER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               l.typeOf(op.getResult()), op.getDim(), 0, 0,
                               false);
      });
  t.add<ReduceScatterStartOp>(
      [](ReduceScatterStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "REDUCE_SCATTER", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), op.getDim(), 0, 0, true);
      });
  t.add<AllToAllOp>([](AllToAllOp op, FunctionLowering &l) -> LogicalResult {
    return lowerCollective(op, l, "ALL_TO_ALL", op.getInput(),
                           op.getMeshAttr(), op.getAxesAttr(),
                           l.typeOf(op.getResult()), op.getSplitDim(),
                           op.getConcatDim(), 0, false);
  });
  t.add<AllToAllStartOp>(
      [](AllToAllStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "ALL_TO_ALL", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), op.getSplitDim(),
                               op.getConcatDim(), 0, true);
      });
  t.add<BroadcastFromOp>(
      [](BroadcastFromOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "BROADCAST", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               l.typeOf(op.getResult()), 0, 0, op.getRoot(),
                               false);
      });
  t.add<BroadcastFromStartOp>(
      [](BroadcastFromStartOp op, FunctionLowering &l) -> LogicalResult {
        return lowerCollective(op, l, "BROADCAST", op.getInput(),
                               op.getMeshAttr(), op.getAxesAttr(),
                               op.getValueType(), 0, 0, op.getRoot(), true);
      });
  t.add<WaitOp>([](WaitOp op, FunctionLowering &l) -> LogicalResult {
    Value pending = l.pendingOf.lookup(op.getFuture());
    if (!pending)
      return op.emitOpError() << "waits for a future not started in this "
                                 "function; generated code waits where it "
                                 "starts";
    l.call("braid_rt_program_wait", {pending});
    l.alias(op.getResult(), l.get(op.getFuture()));
    return success();
  });
  t.add<AllSliceOp>([](AllSliceOp op, FunctionLowering &l) -> LogicalResult {
    int64_t size = 1;
    FailureOr<int64_t> mask =
        l.module.getGroup(op, op.getMeshAttr(), op.getAxesAttr(), &size);
    if (failed(mask))
      return failure();
    if (!l.typeOf(op.getInput()).getElementType().isF32())
      return op.emitOpError() << "slices a non-f32 tensor; generated code "
                                 "takes f32";
    int64_t dim = op.getDim();
    if (dim < 0)
      dim += l.rankOf(op.getInput());
    auto [outer, chunk] =
        splitView(l.typeOf(op.getInput()).getShape(), dim, size);
    l.call("braid_rt_program_all_slice_f32",
           {l.i64(*mask), l.get(op.getInput()), l.i64(outer), l.i64(chunk),
            l.result(op.getResult())});
    return success();
  });
}

/// The effective scale of attention and its gradient: the attribute, else
/// 1 / sqrt(dim).
template <typename OpT> static double attentionScale(OpT op, int64_t dim) {
  if (std::optional<APFloat> scale = op.getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(dim));
}

/// A local `float *inputs[n]` holding the buffers of `values`, and the
/// static array of their element counts, for the kernels over lists.
static std::pair<Value, Value> bufferList(FunctionLowering &l,
                                          ValueRange values) {
  OpBuilder &b = l.b;
  auto type = emitc::ArrayType::get(
      {std::max<int64_t>(1, values.size())},
      emitc::PointerType::get(l.typeOf(values.front()).getElementType()));
  Value list = emitc::VariableOp::create(
      b, l.loc, type, emitc::OpaqueAttr::get(b.getContext(), ""));
  SmallVector<int64_t> counts;
  for (auto [i, v] : llvm::enumerate(values)) {
    Value element = emitc::SubscriptOp::create(
        b, l.loc, cast<TypedValue<emitc::ArrayType>>(list),
        ValueRange{l.index(i)});
    emitc::AssignOp::create(b, l.loc, element, l.get(v));
    counts.push_back(l.countOf(v));
  }
  return {list, l.shape(counts)};
}

template <typename OpT>
static void addActivationGrad(LoweringTable &t, StringRef kernel) {
  t.add<OpT>([kernel](OpT op, FunctionLowering &l) -> LogicalResult {
    l.kernel(kernel,
             {l.get(op.getInput()), l.get(op.getGrad()),
              l.i64(l.countOf(op.getInput())), l.result(op.getResult())});
    return success();
  });
}

/// The kernel for a data-movement op on `v`'s element type (f32 or i32).
static FailureOr<std::string> movementKernel(Operation *op, StringRef base,
                                             Value v) {
  Type element = FunctionLowering::typeOf(v).getElementType();
  if (element.isInteger(64))
    return op->emitOpError() << "moves i64 elements; the kernels take f32 and "
                                "i32";
  return (base + "_" + getElementSuffix(element)).str();
}

/// The `stride` attribute as an array, or a null pointer when absent.
static Value strideArray(FunctionLowering &l,
                         std::optional<ArrayRef<int64_t>> stride) {
  if (stride)
    return l.shape(*stride);
  return emitc::LiteralOp::create(l.b, l.loc,
                                  emitc::PointerType::get(l.b.getI64Type()),
                                  l.b.getStringAttr("nullptr"));
}

static void populateShapeLowerings(LoweringTable &t) {
  t.add<SliceOp>([](SliceOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<std::string> kernel =
        movementKernel(op, "braid_rt_slice", op.getInput());
    if (failed(kernel))
      return failure();
    l.kernel(*kernel, {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
                       l.shapeOf(op.getInput()), l.shape(op.getStart()),
                       strideArray(l, op.getStride()),
                       l.shapeOf(op.getResult()), l.result(op.getResult())});
    return success();
  });
  t.add<SliceGradOp>([](SliceGradOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_slice_grad_f32",
             {l.get(op.getGrad()), l.i64(l.rankOf(op.getGrad())),
              l.shapeOf(op.getGrad()), l.shape(op.getStart()),
              strideArray(l, op.getStride()), l.shapeOf(op.getResult()),
              l.result(op.getResult())});
    return success();
  });
  t.add<ConcatOp>([](ConcatOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<std::string> kernel =
        movementKernel(op, "braid_rt_concat", op.getResult());
    if (failed(kernel))
      return failure();
    int64_t axis = op.getAxis();
    int64_t rank = l.rankOf(op.getResult());
    if (axis < 0)
      axis += rank;
    SmallVector<int64_t> sizes;
    for (Value input : op.getInputs())
      sizes.push_back(l.typeOf(input).getDimSize(axis));
    Value list = bufferList(l, op.getInputs()).first;
    l.kernel(*kernel, {list, l.i64(op.getInputs().size()), l.i64(rank),
                       l.shapeOf(op.getResult()), l.i64(axis), l.shape(sizes),
                       l.result(op.getResult())});
    return success();
  });
  t.add<ReduceMaxGradOp>(
      [](ReduceMaxGradOp op, FunctionLowering &l) -> LogicalResult {
        ArrayRef<int64_t> axes = op.getAxes();
        l.kernelChecked("braid_rt_reduce_max_grad_f32",
                        {l.get(op.getInput()), l.get(op.getGrad()),
                         l.i64(l.rankOf(op.getInput())),
                         l.shapeOf(op.getInput()), l.i64(axes.size()),
                         l.shape(axes), l.result(op.getResult())});
        return success();
      });
}

static void populateTrainingLowerings(LoweringTable &t) {
  t.add<ConstantOp>([](ConstantOp op, FunctionLowering &l) -> LogicalResult {
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    Type element = l.typeOf(op.getResult()).getElementType();
    if (!dense)
      return op.emitOpError() << "has a value that is not dense elements; "
                                 "generated code takes dense constants only";
    if (!dense.isSplat() || element.isInteger(64)) {
      l.copy(element, l.module.getConstantData(l.b, l.loc, dense),
             l.result(op.getResult()), l.countOf(op.getResult()));
      return success();
    }
    Value value =
        element.isF32()
            ? l.f32(dense.getSplatValue<APFloat>().convertToDouble())
            : emitc::ConstantOp::create(
                  l.b, l.loc, l.b.getI32Type(),
                  l.b.getI32IntegerAttr(
                      dense.getSplatValue<APInt>().getSExtValue()))
                  .getResult();
    l.kernel(
        ("braid_rt_fill_" + getElementSuffix(element)).str(),
        {value, l.i64(l.countOf(op.getResult())), l.result(op.getResult())});
    return success();
  });
  t.add<ReduceOp>([](ReduceOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> axes = op.getAxes();
    l.kernel("braid_rt_reduce_f32",
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.i64(axes.size()), l.shape(axes),
              l.enumValue("braid_rt_reduce_kind_t",
                          static_cast<int64_t>(op.getKind())),
              l.result(op.getResult())});
    return success();
  });
  t.add<BroadcastOp>([](BroadcastOp op, FunctionLowering &l) -> LogicalResult {
    Type element = l.typeOf(op.getInput()).getElementType();
    if (element.isInteger(64))
      return op.emitOpError() << "broadcasts i64; the kernels take f32 and i32";
    l.kernel(("braid_rt_broadcast_to_" + getElementSuffix(element)).str(),
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.i64(l.rankOf(op.getResult())),
              l.shapeOf(op.getResult()), l.result(op.getResult())});
    return success();
  });
  addActivationGrad<ReluGradOp>(t, "braid_rt_relu_grad_f32");
  addActivationGrad<SiluGradOp>(t, "braid_rt_silu_grad_f32");
  t.add<GeluGradOp>([](GeluGradOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_gelu_grad_f32",
             {l.get(op.getInput()), l.get(op.getGrad()),
              l.i64(l.countOf(op.getInput())),
              l.enumValue("braid_rt_gelu_approximation_t",
                          static_cast<int64_t>(op.getApproximate())),
              l.result(op.getResult())});
    return success();
  });
  t.add<LayerNormGradOp>(
      [](LayerNormGradOp op, FunctionLowering &l) -> LogicalResult {
        Value x = op.getInput();
        l.kernel("braid_rt_layer_norm_grad_f32",
                 {l.get(x), l.get(op.getScale()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<RmsNormGradOp>(
      [](RmsNormGradOp op, FunctionLowering &l) -> LogicalResult {
        Value x = op.getInput();
        l.kernel("braid_rt_rms_norm_grad_f32",
                 {l.get(x), l.get(op.getScale()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<EmbeddingGradOp>(
      [](EmbeddingGradOp op, FunctionLowering &l) -> LogicalResult {
        FailureOr<int64_t> group = vocabGroup(op, l);
        if (failed(group))
          return failure();
        ArrayRef<int64_t> table = l.typeOf(op.getResult()).getShape();
        if (*group >= 0) {
          l.call("braid_rt_program_embedding_grad_vp_f32",
                 {l.get(op.getIds()), isI64(l, op.getIds()),
                  l.get(op.getGrad()), l.i64(l.countOf(op.getIds())),
                  l.i64(table[0]), l.i64(table[1]), l.i64(*group),
                  l.result(op.getResult()), l.whereText()});
          return success();
        }
        checkIds(l, "id", op.getIds(), table[0]);
        l.kernelChecked(idKernel("braid_rt_embedding_grad_f32", op.getIds()),
                        {l.get(op.getIds()), l.get(op.getGrad()),
                         l.i64(l.countOf(op.getIds())), l.i64(table[0]),
                         l.i64(table[1]), l.result(op.getResult())});
        return success();
      });
  t.add<AttentionGradOp>(
      [](AttentionGradOp op, FunctionLowering &l) -> LogicalResult {
        ArrayRef<int64_t> q = l.typeOf(op.getQuery()).getShape();
        ArrayRef<int64_t> k = l.typeOf(op.getKey()).getShape();
        l.kernelChecked("braid_rt_attention_grad_f32",
                        {l.get(op.getQuery()), l.get(op.getKey()),
                         l.get(op.getValue()), l.get(op.getGrad()), l.i64(q[0]),
                         l.i64(q[1]), l.i64(k[1]), l.i64(q[2]), l.i64(k[2]),
                         l.i64(q[3]), l.flag(op.getCausal()),
                         l.f64(attentionScale(op, q[3])),
                         l.i64(op.getOperand()), l.result(op.getResult())});
        return success();
      });
  t.add<CrossEntropyGradOp>(
      [](CrossEntropyGradOp op, FunctionLowering &l) -> LogicalResult {
        FailureOr<int64_t> group = vocabGroup(op, l);
        if (failed(group))
          return failure();
        Value logits = op.getLogits();
        if (*group >= 0) {
          l.call("braid_rt_program_cross_entropy_grad_vp_f32",
                 {l.get(logits), l.get(op.getLabels()),
                  isI64(l, op.getLabels()), l.get(op.getGrad()),
                  l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
                  l.i64(*group), l.result(op.getResult()), l.whereText()});
          return success();
        }
        checkIds(l, "label", op.getLabels(), l.colsOf(logits));
        l.kernelChecked(
            idKernel("braid_rt_cross_entropy_grad_f32", op.getLabels()),
            {l.get(logits), l.get(op.getLabels()), l.get(op.getGrad()),
             l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
             l.result(op.getResult())});
        return success();
      });
  t.add<LrScheduleOp>(
      [](LrScheduleOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel(idKernel("braid_rt_lr_schedule_f32", op.getStep()),
                 {l.get(op.getStep()),
                  l.enumValue("braid_rt_lr_decay_t",
                              static_cast<int64_t>(op.getDecay())),
                  l.f64(op.getLr().convertToDouble()),
                  l.f64(op.getMinLr().convertToDouble()),
                  l.i64(op.getWarmupSteps()), l.i64(op.getTotalSteps()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<GlobalNormOp>([](GlobalNormOp op, FunctionLowering &l) -> LogicalResult {
    auto [list, counts] = bufferList(l, op.getInputs());
    l.kernel(
        "braid_rt_global_norm_f32",
        {list, counts, l.i64(op.getInputs().size()), l.result(op.getResult())});
    return success();
  });
  t.add<SumSquaresOp>([](SumSquaresOp op, FunctionLowering &l) -> LogicalResult {
    auto [list, counts] = bufferList(l, op.getInputs());
    l.kernel(
        "braid_rt_sum_squares_f32",
        {list, counts, l.i64(op.getInputs().size()), l.result(op.getResult())});
    return success();
  });
  t.add<ClipCoefficientOp>(
      [](ClipCoefficientOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel("braid_rt_clip_coefficient_f32",
                 {l.get(op.getNorm()), l.f64(op.getMaxNorm().convertToDouble()),
                  l.result(op.getResult())});
        return success();
      });
  t.add<AdamWUpdateOp>(
      [](AdamWUpdateOp op, FunctionLowering &l) -> LogicalResult {
        l.kernel(idKernel("braid_rt_adamw_update_f32", op.getStep()),
                 {l.get(op.getParam()), l.get(op.getGrad()), l.get(op.getM()),
                  l.get(op.getV()), l.get(op.getLr()), l.get(op.getStep()),
                  l.get(op.getGradScale()), l.i64(l.countOf(op.getParam())),
                  l.f64(op.getBeta1().convertToDouble()),
                  l.f64(op.getBeta2().convertToDouble()),
                  l.f64(op.getEpsilon().convertToDouble()),
                  l.f64(op.getWeightDecay().convertToDouble()),
                  l.result(op.getNewParam()), l.result(op.getNewM()),
                  l.result(op.getNewV())});
        return success();
      });
  t.add<SgdUpdateOp>([](SgdUpdateOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_sgd_update_f32",
             {l.get(op.getParam()), l.get(op.getGrad()),
              l.get(op.getMomentumBuffer()), l.get(op.getLr()),
              l.get(op.getGradScale()), l.i64(l.countOf(op.getParam())),
              l.f64(op.getMomentum().convertToDouble()),
              l.flag(op.getNesterov()),
              l.f64(op.getWeightDecay().convertToDouble()),
              l.result(op.getNewParam()), l.result(op.getNewMomentumBuffer())});
    return success();
  });
}

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

namespace {
/// A scheduled gradient function (PipelineDriver) and its actions as the
/// lowering walks them: kind "F", "B", "W", "BW", "send" or "recv", the
/// model chunk, and for a transfer the payload's phase ('F' activation, 'B'
/// gradient) and the peer.
struct PipelinePlan : PipelineDriver {
  struct Action {
    std::string text; // as written in the schedule
    std::string kind;
    int64_t mb = 0, chunk = 0, peer = 0;
    char phase = 0;
  };
  std::vector<std::vector<Action>> parsed;
};
} // namespace

/// The plan of `op`, whose driver `fn` the module read; errors on `op`.
static LogicalResult readPipeline(PipelineOp op, func::FuncOp fn,
                                  const ModuleLowering &module,
                                  PipelinePlan &plan) {
  if (!fn->hasAttr("braid.schedule"))
    return op.emitOpError()
           << "calls @" << fn.getName()
           << ", which has no braid.schedule; generated code runs scheduled "
              "pipelines (run braid-pipeline-outline and "
              "braid-pipeline-schedule)";
  static_cast<PipelineDriver &>(plan) = module.drivers.at(fn);
  if (plan.microbatches != op.getNumMicrobatches())
    return op.emitOpError() << "runs " << op.getNumMicrobatches()
                            << " micro-batches, but the schedule of @"
                            << fn.getName() << " " << plan.microbatches;
  plan.parsed.resize(plan.getNumRanks());
  for (auto [r, actions] : llvm::enumerate(plan.actions))
    for (const sched::Action &a : actions) {
      PipelinePlan::Action step;
      step.text = sched::formatAction(a);
      step.kind = sched::getActionKindName(a.kind).str();
      step.mb = a.microbatch;
      step.chunk = plan.getChunk(r, a.chunk);
      step.peer = a.peer;
      step.phase = a.payload == sched::Payload::Activation ? 'F' : 'B';
      plan.parsed[r].push_back(step);
    }
  return success();
}

/// A scheduled braid.pipeline on a pipeline axis: every stage runs its
/// rank's actions of the schedule as straight-line code under
/// `if (stage == r)` (all receives of the step started first; then piece
/// calls into per-micro-batch buffers, each a trace event, started sends of
/// what the peer's chunks use, and waits for receives), then the
/// weight-gradient pieces that read another stage's W results (a tied
/// parameter's gradient sum) after those arrive, then the means over
/// micro-batches of the results it computed; each mean is then broadcast
/// from its stage to the whole pipeline, so every stage runs the rest of
/// the step (clipping, optimizer) on the whole model's values.
static LogicalResult lowerPipeline(PipelineOp op, FunctionLowering &l) {
  OpBuilder &b = l.b;
  Location loc = l.loc;
  auto module = op->getParentOfType<ModuleOp>();
  auto fn = module.lookupSymbol<func::FuncOp>(op.getCallee());
  if (!fn)
    return op.emitOpError() << "'" << op.getCallee()
                            << "' does not name a function";
  PipelinePlan plan;
  if (failed(readPipeline(op, fn, l.module, plan)))
    return failure();
  int64_t m = plan.microbatches;
  int64_t numRanks = plan.parsed.size();
  Operation *ret = fn.getBody().front().getTerminator();
  auto f32Only = [&](Value v) -> LogicalResult {
    if (!l.typeOf(v).getElementType().isF32())
      return op.emitOpError()
             << "would send or average a value of type " << v.getType()
             << " between pipeline stages; generated pipelines move f32 only";
    return success();
  };
  for (Value v : ret->getOperands()) {
    if (isa<BlockArgument>(v) || !plan.producer.count(v))
      return op.emitOpError("returns an argument of the gradient function; "
                            "generated pipelines return piece results");
    if (failed(f32Only(v)))
      return failure();
  }

  // W pieces that read a W result their rank has not computed yet (another
  // stage's: a tied parameter's partial gradient) run after the schedule,
  // as in the executor; the W results they need from other stages are sent
  // then.
  using MbPiece = std::pair<int64_t, int64_t>; // (micro-batch, chunk)
  std::vector<std::vector<MbPiece>> deferred(numRanks);
  // (from, to, micro-batch, value)
  std::vector<std::tuple<int64_t, int64_t, int64_t, Value>> late;
  for (int64_t r = 0; r < numRanks; ++r) {
    std::set<MbPiece> ran;
    for (const PipelinePlan::Action &a : plan.parsed[r]) {
      if (a.kind != "W" && a.kind != "BW")
        continue;
      auto it = plan.pieces.find({a.chunk, 'W'});
      if (it == plan.pieces.end())
        continue;
      bool wait = llvm::any_of(it->second.getOperands(), [&](Value v) {
        return plan.isProducedByW(v) &&
               (plan.stages[plan.producer[v].first] != r ||
                !ran.count({a.mb, plan.producer[v].first}));
      });
      if (wait)
        deferred[r].push_back({a.mb, a.chunk});
      else
        ran.insert({a.mb, a.chunk});
    }
    for (auto [mb, chunk] : deferred[r])
      for (Value v : plan.pieces[{chunk, 'W'}].getOperands()) {
        if (!plan.isProducedByW(v))
          continue;
        int64_t from = plan.stages[plan.producer[v].first];
        if (llvm::is_contained(deferred[from],
                               MbPiece{mb, plan.producer[v].first}))
          return op.emitOpError()
                 << "its weight-gradient piece of chunk " << chunk
                 << " reads that of chunk " << plan.producer[v].first
                 << ", which also waits for another stage; generated "
                    "pipelines defer one level of W pieces";
        if (from != r && failed(f32Only(v)))
          return failure();
        if (from != r &&
            !llvm::is_contained(late, std::make_tuple(from, r, mb, v)))
          late.push_back({from, r, mb, v});
      }
  }

  // A message's tag names the piece whose result it carries: receives match
  // their sends whatever order they are started in.
  int64_t numChunks = plan.stages.size();
  auto tagOf = [&](int64_t mb, int64_t chunk, char phase) {
    int64_t kind = phase == 'F' ? 0 : phase == 'B' ? 1 : 2;
    return (mb * numChunks + chunk) * 3 + kind;
  };
  if (m * numChunks * 3 > 32768)
    return op.emitOpError()
           << "runs " << m << " micro-batches of " << numChunks
           << " chunks: more transfers than message tags (32768)";

  Value mask = l.i64(l.module.pipelineMask);
  Value stage = emitc::CallOpaqueOp::create(b, loc, b.getI64Type(),
                                            "braid_rt_program_pp_stage",
                                            ValueRange{mask})
                    .getResult(0);
  SmallVector<Value> means;
  for (Value r : op.getResults())
    means.push_back(l.result(r));

  for (int64_t r = 0; r < numRanks; ++r) {
    Value cond = emitc::CmpOp::create(b, loc, b.getI1Type(),
                                      emitc::CmpPredicate::eq, stage, l.i64(r));
    auto ifOp = emitc::IfOp::create(b, loc, cond); // then: a yield
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.getThenRegion().front().getTerminator());

    // This stage's buffer of each (micro-batch, value), and the values it
    // holds at this point of the schedule (computed, or received and waited
    // for): a piece or a send may use only those.
    std::map<std::pair<int64_t, const void *>, Value> have;
    std::set<std::pair<int64_t, const void *>> available;
    auto keyOf = [](int64_t mb, Value v) {
      return std::make_pair(mb, v.getAsOpaquePointer());
    };
    auto bufferOf = [&](int64_t mb, Value v) {
      Value &buffer = have[keyOf(mb, v)];
      if (!buffer)
        buffer = l.allocate(l.typeOf(v));
      return buffer;
    };
    auto send = [&](int64_t mb, Value v, int64_t peer, int64_t tag) {
      l.call("braid_rt_program_pp_send_f32",
             {mask, bufferOf(mb, v), l.i64(l.countOf(v)), l.i64(peer),
              l.i64(tag), l.whereText()});
    };
    // Every receive of the step starts first; receive k is waited for where
    // the schedule receives it (k: the order they start in).
    SmallVector<std::pair<int64_t, const void *>> receiveKeys;
    auto startReceive = [&](int64_t mb, Value v, int64_t peer, int64_t tag) {
      l.call("braid_rt_program_pp_recv_start_f32",
             {mask, bufferOf(mb, v), l.i64(l.countOf(v)), l.i64(peer),
              l.i64(tag), l.whereText()});
      receiveKeys.push_back(keyOf(mb, v));
      return int64_t(receiveKeys.size() - 1);
    };
    auto waitReceives = [&](StringRef event, ArrayRef<int64_t> receives) {
      if (receives.empty())
        return;
      l.call("braid_rt_program_trace_begin", {l.text(event), l.text("recv")});
      for (int64_t k : receives) {
        l.call("braid_rt_program_pp_recv_wait", {l.i64(k), l.whereText()});
        available.insert(receiveKeys[k]);
      }
      l.call("braid_rt_program_trace_end", {});
    };
    // The receives of each recv action, then the late ones.
    std::vector<SmallVector<int64_t>> actionReceives(plan.parsed[r].size());
    for (auto [i, a] : llvm::enumerate(plan.parsed[r])) {
      if (a.kind != "recv")
        continue;
      // The sender names its own chunk: the neighbour of ours.
      int64_t from = a.phase == 'F' ? a.chunk - 1 : a.chunk + 1;
      auto it = plan.pieces.find({from, a.phase});
      if (it == plan.pieces.end())
        continue;
      for (Value v : it->second.getResults())
        if (plan.isUsedOn(v, r)) {
          if (failed(f32Only(v)))
            return failure();
          actionReceives[i].push_back(
              startReceive(a.mb, v, a.peer, tagOf(a.mb, from, a.phase)));
        }
    }
    SmallVector<int64_t> lateReceives;
    for (auto [from, to, mb, v] : late)
      if (to == r)
        lateReceives.push_back(
            startReceive(mb, v, from, tagOf(mb, plan.producer[v].first, 'W')));

    // Runs piece (chunk, phase) on micro-batch mb (or skips a deferred W).
    auto compute = [&](int64_t mb, int64_t chunk, char phase,
                       bool late) -> LogicalResult {
      auto it = plan.pieces.find({chunk, phase});
      if (it == plan.pieces.end())
        return success(); // nothing of this phase in this chunk
      if (phase == 'W' && !late &&
          llvm::is_contained(deferred[r], MbPiece{mb, chunk}))
        return success();
      func::CallOp call = it->second;
      SmallVector<Value> args;
      for (Value v : call.getOperands()) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          Value input = op.getInputs()[arg.getArgNumber()];
          Value offset = l.i64(mb * (l.countOf(input) / m));
          args.push_back(emitc::AddOp::create(b, loc, l.get(input).getType(),
                                              l.get(input), offset));
          continue;
        }
        auto found = have.find(keyOf(mb, v));
        if (!available.count(keyOf(mb, v)))
          return call.emitOpError()
                 << "rank " << r << " runs " << phase << mb << " of chunk "
                 << chunk
                 << " without an input it neither computed nor received "
                    "(the schedule misses a transfer)";
        args.push_back(found->second);
      }
      for (Value res : call.getResults()) {
        args.push_back(bufferOf(mb, res));
        available.insert(keyOf(mb, res));
      }
      l.call(getEmittedFunctionName(call.getCallee()), args);
      return success();
    };

    for (auto [i, a] : llvm::enumerate(plan.parsed[r])) {
      if (a.kind == "send") {
        // Everything of this piece that a chunk on the peer uses.
        auto it = plan.pieces.find({a.chunk, a.phase});
        if (it == plan.pieces.end())
          continue;
        for (Value v : it->second.getResults())
          if (plan.isUsedOn(v, a.peer)) {
            if (!available.count(keyOf(a.mb, v)))
              return op.emitOpError()
                     << "rank " << r << " sends " << a.phase << a.mb
                     << " of chunk " << a.chunk << " before computing it";
            if (failed(f32Only(v)))
              return failure();
            send(a.mb, v, a.peer, tagOf(a.mb, a.chunk, a.phase));
          }
        continue;
      }
      if (a.kind == "recv") {
        waitReceives(a.text, actionReceives[i]);
        continue;
      }
      // A compute action, one trace event (category "pipeline"); a deferred
      // W runs later.
      if (a.kind == "W" &&
          llvm::is_contained(deferred[r], MbPiece{a.mb, a.chunk}))
        continue;
      l.call("braid_rt_program_trace_begin",
             {l.text(a.text), l.text("pipeline")});
      if (a.kind == "BW") {
        if (failed(compute(a.mb, a.chunk, 'B', false)) ||
            failed(compute(a.mb, a.chunk, 'W', false)))
          return failure();
      } else if (failed(compute(a.mb, a.chunk, a.kind[0], false))) {
        return failure();
      }
      l.call("braid_rt_program_trace_end", {});
    }
    // After the schedule: the W results other stages' deferred pieces read,
    // those this stage's read, its deferred pieces.
    for (auto [from, to, mb, v] : late)
      if (from == r)
        send(mb, v, to, tagOf(mb, plan.producer[v].first, 'W'));
    waitReceives("recv tied weight gradients", lateReceives);
    for (auto [mb, chunk] : deferred[r]) {
      int64_t local = llvm::find(plan.localChunks[r], chunk) -
                      plan.localChunks[r].begin();
      l.call("braid_rt_program_trace_begin",
             {l.text(("W" + Twine(mb) + "." + Twine(local) + " (deferred)")
                         .str()),
              l.text("pipeline")});
      if (failed(compute(mb, chunk, 'W', true)))
        return failure();
      l.call("braid_rt_program_trace_end", {});
    }
    // The means of the results this stage computed, in micro-batch order.
    for (auto [mean, v] : llvm::zip(means, ret->getOperands())) {
      if (plan.stages[plan.producer[v].first] != r)
        continue;
      for (int64_t mb = 0; mb < m; ++mb) {
        auto found = have.find(keyOf(mb, v));
        if (!available.count(keyOf(mb, v)))
          return op.emitOpError() << "rank " << r << " never computes "
                                  << "micro-batch " << mb
                                  << " of a result of @" << fn.getName();
        l.call("braid_rt_program_accumulate_mean_f32",
               {mean, found->second, l.i64(l.countOf(v)), l.i64(mb),
                l.i64(m)});
      }
    }
  }
  // Each mean stays on its stage: what follows is placed by StagePlacement.
  l.call("braid_rt_program_pp_wait_all", {l.whereText()});
  return success();
}

static void populateLowerings(LoweringTable &t) {
  populateShapeLowerings(t);
  populateTrainingLowerings(t);
  populateCollectiveLowerings(t);
  t.add<ParamOp>([](ParamOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<Value> slot =
        getParamSlot(op, op.getName(), cast<RankedTensorType>(op.getType()),
                     op.getInit(), l);
    if (failed(slot))
      return failure();
    Value buffer = loadParam(l, *slot);
    if (!isOverwrittenWhileLive(op)) {
      l.alias(op.getResult(), buffer);
      return success();
    }
    l.copy(l.typeOf(op.getResult()).getElementType(), buffer,
           l.result(op.getResult()), l.countOf(op.getResult()));
    return success();
  });
  t.add<StoreParamOp>([](StoreParamOp op, FunctionLowering &l) -> LogicalResult {
    auto type = l.typeOf(op.getValue());
    FailureOr<Value> slot = getParamSlot(op, op.getName(), type, InitAttr(), l);
    if (failed(slot))
      return failure();
    l.copy(type.getElementType(), l.get(op.getValue()), loadParam(l, *slot),
           type.getNumElements());
    return success();
  });
  t.add<RepeatOp>(lowerRepeat);
  t.add<PipelineOp>(lowerPipeline);
  t.add<ReshapeOp>([](ReshapeOp op, FunctionLowering &l) -> LogicalResult {
    l.alias(op.getResult(), l.get(op.getInput()));
    return success();
  });
  // A sharding annotation is the identity on one device.
  t.add<ShardOp>([](ShardOp op, FunctionLowering &l) -> LogicalResult {
    l.alias(op.getResult(), l.get(op.getInput()));
    return success();
  });
  t.add<RotaryOp>([](RotaryOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> x = l.typeOf(op.getInput()).getShape();
    l.kernel("braid_rt_rotary_f32",
             {l.get(op.getInput()), l.i64(x[0]), l.i64(x[1]), l.i64(x[2]),
              l.i64(x[3]), l.f64(op.getBase().convertToDouble()),
              l.flag(op.getInverse()), l.result(op.getResult())});
    return success();
  });
  t.add<TransposeOp>([](TransposeOp op, FunctionLowering &l) -> LogicalResult {
    Type element = l.typeOf(op.getInput()).getElementType();
    if (element.isInteger(64))
      return op.emitOpError() << "transposes i64; the kernels take f32 and i32";
    l.kernel(("braid_rt_transpose_" + getElementSuffix(element)).str(),
             {l.get(op.getInput()), l.i64(l.rankOf(op.getInput())),
              l.shapeOf(op.getInput()), l.shape(op.getPermutation()),
              l.result(op.getResult())});
    return success();
  });
  t.add<MatmulOp>([](MatmulOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_matmul_f32",
             {l.get(op.getLhs()), l.get(op.getRhs()),
              l.i64(l.rankOf(op.getLhs())), l.shapeOf(op.getLhs()),
              l.i64(l.rankOf(op.getRhs())), l.shapeOf(op.getRhs()),
              l.flag(op.getTransposeA()), l.flag(op.getTransposeB()),
              l.result(op.getResult())});
    return success();
  });
  addBinary<AddOp>(t, "braid_rt_add_f32");
  addBinary<SubOp>(t, "braid_rt_sub_f32");
  addBinary<MulOp>(t, "braid_rt_mul_f32");
  addBinary<DivOp>(t, "braid_rt_div_f32");
  addUnary<NegOp>(t, "braid_rt_neg_f32");
  addUnary<ExpOp>(t, "braid_rt_exp_f32");
  addUnary<SqrtOp>(t, "braid_rt_sqrt_f32");
  addUnary<RsqrtOp>(t, "braid_rt_rsqrt_f32");
  addUnary<ReluOp>(t, "braid_rt_relu_f32");
  addUnary<SiluOp>(t, "braid_rt_silu_f32");
  t.add<GeluOp>([](GeluOp op, FunctionLowering &l) -> LogicalResult {
    l.kernel("braid_rt_gelu_f32",
             {l.get(op.getInput()), l.i64(l.countOf(op.getInput())),
              l.enumValue("braid_rt_gelu_approximation_t",
                          static_cast<int64_t>(op.getApproximate())),
              l.result(op.getResult())});
    return success();
  });
  t.add<SoftmaxOp>([](SoftmaxOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> shape = l.typeOf(op.getInput()).getShape();
    int64_t axis = op.getAxis();
    if (axis < 0)
      axis += shape.size();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    for (int64_t d = axis + 1, e = shape.size(); d < e; ++d)
      inner *= shape[d];
    l.kernel("braid_rt_softmax_f32",
             {l.get(op.getInput()), l.i64(outer), l.i64(shape[axis]),
              l.i64(inner), l.result(op.getResult())});
    return success();
  });
  t.add<LayerNormOp>([](LayerNormOp op, FunctionLowering &l) -> LogicalResult {
    Value x = op.getInput();
    l.kernel("braid_rt_layer_norm_f32",
             {l.get(x), l.get(op.getScale()), l.get(op.getBias()),
              l.i64(l.rowsOf(x)), l.i64(l.colsOf(x)),
              l.f64(op.getEpsilon().convertToDouble()),
              l.result(op.getResult())});
    return success();
  });
  t.add<RmsNormOp>([](RmsNormOp op, FunctionLowering &l) -> LogicalResult {
    Value x = op.getInput();
    l.kernel("braid_rt_rms_norm_f32",
             {l.get(x), l.get(op.getScale()), l.i64(l.rowsOf(x)),
              l.i64(l.colsOf(x)), l.f64(op.getEpsilon().convertToDouble()),
              l.result(op.getResult())});
    return success();
  });
  t.add<EmbeddingOp>([](EmbeddingOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<int64_t> group = vocabGroup(op, l);
    if (failed(group))
      return failure();
    ArrayRef<int64_t> table = l.typeOf(op.getTable()).getShape();
    if (*group >= 0) {
      l.call("braid_rt_program_embedding_vp_f32",
             {l.get(op.getTable()), l.get(op.getIds()), isI64(l, op.getIds()),
              l.i64(table[0]), l.i64(table[1]), l.i64(l.countOf(op.getIds())),
              l.i64(*group), l.result(op.getResult()), l.whereText()});
      return success();
    }
    checkIds(l, "id", op.getIds(), table[0]);
    l.kernelChecked(idKernel("braid_rt_embedding_f32", op.getIds()),
                    {l.get(op.getTable()), l.get(op.getIds()), l.i64(table[0]),
                     l.i64(table[1]), l.i64(l.countOf(op.getIds())),
                     l.result(op.getResult())});
    return success();
  });
  t.add<AttentionOp>([](AttentionOp op, FunctionLowering &l) -> LogicalResult {
    ArrayRef<int64_t> q = l.typeOf(op.getQuery()).getShape();
    ArrayRef<int64_t> k = l.typeOf(op.getKey()).getShape();
    double scale = attentionScale(op, q[3]);
    l.kernelChecked("braid_rt_attention_f32",
                    {l.get(op.getQuery()), l.get(op.getKey()),
                     l.get(op.getValue()), l.i64(q[0]), l.i64(q[1]),
                     l.i64(k[1]), l.i64(q[2]), l.i64(k[2]), l.i64(q[3]),
                     l.flag(op.getCausal()), l.f64(scale),
                     l.result(op.getResult())});
    return success();
  });
  t.add<CrossEntropyOp>([](CrossEntropyOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<int64_t> group = vocabGroup(op, l);
    if (failed(group))
      return failure();
    Value logits = op.getLogits();
    if (*group >= 0) {
      l.call("braid_rt_program_cross_entropy_vp_f32",
             {l.get(logits), l.get(op.getLabels()), isI64(l, op.getLabels()),
              l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)), l.i64(*group),
              l.result(op.getResult()), l.whereText()});
      return success();
    }
    checkIds(l, "label", op.getLabels(), l.colsOf(logits));
    l.kernelChecked(idKernel("braid_rt_cross_entropy_f32", op.getLabels()),
                    {l.get(logits), l.get(op.getLabels()),
                     l.i64(l.rowsOf(logits)), l.i64(l.colsOf(logits)),
                     l.result(op.getResult())});
    return success();
  });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertBraidToEmitCPass
    : public braid::impl::ConvertBraidToEmitCPassBase<ConvertBraidToEmitCPass> {
  using ConvertBraidToEmitCPassBase::ConvertBraidToEmitCPassBase;

  void runOnOperation() override {
    LoweringTable table;
    populateLowerings(table);
    ModuleLowering lowering(getOperation(), table, spmd);
    if (failed(lowering.run(entry)))
      signalPassFailure();
  }
};
} // namespace
