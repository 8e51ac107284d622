//===- Lowering.h - State shared by the braid-to-EmitC lowering -*- C++ -*-===//
//
// The lowering of braid-lower-to-emitc, split by concern: the module's
// tables and globals (ModuleLowering.cpp), a function's buffers and calls
// (FunctionLowering.cpp), parameters and layer repeats (Params.cpp),
// compute ops (ComputeOps.cpp), collectives (Collectives.cpp), pipelines
// (Pipelines.cpp), fused regions (FusedOps.cpp) and the pass
// (BraidToEmitC.cpp). Internal to the library.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CONVERSION_BRAIDTOEMITC_LOWERING_H
#define BRAID_LIB_CONVERSION_BRAIDTOEMITC_LOWERING_H

#include "MemoryPlan.h"
#include "StagePlacement.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Utils/PipelineDriver.h"

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

namespace mlir::braid::lowering {

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
  /// Lowers every op implementing `InterfaceT` that has no lowering of its
  /// own.
  template <typename InterfaceT>
  void addInterface(std::function<LogicalResult(InterfaceT, FunctionLowering &)> fn) {
    interfaces.push_back(
        [fn](Operation *op, FunctionLowering &l) -> std::optional<LogicalResult> {
          if (auto iface = dyn_cast<InterfaceT>(op))
            return fn(iface, l);
          return std::nullopt;
        });
  }
  /// Lowers `op` with its lowering, else with that of an interface it
  /// implements; nullopt when there is none.
  std::optional<LogicalResult> lower(Operation *op, FunctionLowering &l) const {
    auto it = table.find(op->getName().getTypeID());
    if (it != table.end())
      return it->second(op, l);
    for (const auto &fn : interfaces)
      if (std::optional<LogicalResult> result = fn(op, l))
        return result;
    return std::nullopt;
  }

private:
  DenseMap<TypeID, OpLowering> table;
  SmallVector<std::function<std::optional<LogicalResult>(Operation *,
                                                         FunctionLowering &)>>
      interfaces;
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
  /// Optimizer state (a braid.param with `state`), for the memory report.
  bool state = false;
  /// Held between two calls of the step only (braid.transient): not in
  /// checkpoints.
  bool transient = false;
};

/// What the generated code needs of its target (the pass's `target`).
/// Kernels, the program runtime and collectives have the same C API on
/// every backend (braid/rt/), so targets differ only in these few places;
/// the toolchain (lib/Target) picks the compiler and libraries.
struct TargetDescription {
  /// "cpu" or "cuda".
  StringRef name;
  /// The headers the program includes (program_spmd.h follows for a
  /// per-rank program).
  SmallVector<StringRef> headers;
  /// The C expression of the stream the kernels run on.
  StringRef stream;
  /// Whether tensors live in device memory apart from the host: constants
  /// in the program text are then uploaded
  /// (braid_rt_memory_copy_to_device) instead of copied by a kernel, which
  /// could not read host memory.
  bool deviceMemory;

  /// The description of target `name`, or null for an unknown one.
  static const TargetDescription *get(StringRef name);
};

/// Module-wide state: the parameter table, the static arrays, the emitted
/// functions.
class ModuleLowering {
public:
  ModuleLowering(ModuleOp module, const LoweringTable &table,
                 const TargetDescription &target, bool spmd)
      : table(table), target(target), spmd(spmd), module(module),
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
  Value getBufferGlobal(OpBuilder &b, Location loc, Type bufferType,
                        StringRef prefix = "braid_buffer_");
  /// The address of a new `static braid_rt_program_pending_t braid_pending_N`
  /// global: one collective site's request and staging buffers.
  Value getPendingSite(OpBuilder &b, Location loc);
  /// A new `static braid_rt_program_pending_t braid_pending_N[count]` global
  /// (as an array value): the sites of a collective started by each of a
  /// repeat's instances.
  Value getPendingSites(OpBuilder &b, Location loc, int64_t count);
  /// The bit mask of the group over `axes` of mesh `meshRef` (recorded, so
  /// that braid_program_init creates its communicator); errors on `op`.
  FailureOr<int64_t> getGroup(Operation *op, FlatSymbolRefAttr meshRef,
                              ArrayAttr axes, int64_t *size = nullptr);
  /// For a sharded parameter or argument: the whole shape and the spec of
  /// braid_rt_program_block (per dimension: the number of axes, their
  /// indices). With `view`, a split strided over blocks is described as a
  /// plain split of the view [b, n / b] (row-major, the same elements), as
  /// braid_rt_program_block takes it; without, `blocks` gets each
  /// dimension's count, as checkpoint slots take it.
  LogicalResult getBlockSpec(Operation *op, ShardingAttr sharding,
                             ArrayRef<int64_t> local,
                             SmallVectorImpl<int64_t> &global,
                             SmallVectorImpl<int64_t> &spec, bool view = true,
                             SmallVectorImpl<int64_t> *blocks = nullptr);

  const LoweringTable &table;
  const TargetDescription &target;
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
  /// The slots `op` updates in place: a PowerSGD reduction's state (its
  /// `keys` of braid.powersgd), and for a repeat those of the reductions
  /// in its layer's instances.
  SmallVector<int64_t>
  getInPlaceSlots(Operation *op, ArrayRef<StringRef> keys = {"q", "error"});
  /// Whether `op` (a store, a repeat or a PowerSGD reduction) may write its
  /// slots on `stage` alone; records `stage` as their owner if so. A store
  /// may (its value then goes to the other stages whose pieces read the
  /// slot); the others if pieces read their slots only on `stage`. False
  /// for a braid.pipeline, which every stage runs.
  bool claimSlots(Operation *op, int64_t stage);
  /// The slots of `repeat`'s instances and of the repeats in its layer.
  SmallVector<int64_t> getAllRepeatSlots(RepeatOp repeat);
  /// The braid.fused regions emitted so far (their functions' numbers).
  unsigned numFused = 0;
  /// Whether buffers of values whose lifetimes do not overlap share memory
  /// (the pass's `reuse-buffers`): one arena per function, planned at
  /// compile time, and in-place updates where the kernels allow them.
  /// Without, every allocation site has its own buffer.
  bool reuseBuffers = true;
  /// The call depth of each function lowered: 0 for an entry, for a layer
  /// or pipeline piece one more than its deepest caller. Two functions of
  /// one depth never run at the same time (neither calls the other, nor
  /// anything that does), so those of depth >= 1 share one arena.
  DenseMap<Operation *, int64_t> depth;
  struct SharedArena {
    std::string name;  // the `static float *` global
    int64_t bytes = 0; // the most any of its functions uses
    /// The element counts its functions allocate, set once all are lowered.
    SmallVector<emitc::ConstantOp> counts;
  };
  std::map<int64_t, SharedArena> sharedArenas;
  /// The buffers of each lowered function (layer, piece or function), for
  /// the memory report.
  std::vector<std::pair<Operation *, std::vector<PlannedBuffer>>>
      functionBuffers;

private:
  LogicalResult collectParams(ArrayRef<func::FuncOp> functions,
                              ArrayRef<LayerOp> layers);
  void emitInitFunction(Location loc);
  /// Attaches the memory report (braidc.memory_plan: bytes per pipeline
  /// stage of parameters, gradients, optimizer state, activations,
  /// workspace, and the arenas) to the module.
  void attachMemoryPlan(ArrayRef<func::FuncOp> functions,
                        ArrayRef<LayerOp> layers);
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
  /// `outs` the out-pointer arguments of the results; `pendingOuts` the
  /// caller's sites of the yielded futures, `pendingIns` those of the
  /// futures carried in, `nextSlots` the next instance's slot numbers.
  LogicalResult lowerBody(Block &body, emitc::FuncOp target, Value slots,
                          ArrayRef<Value> outs,
                          ArrayRef<Value> pendingOuts = {},
                          ArrayRef<Value> pendingIns = {},
                          Value nextSlots = {});

  //===--- Helpers for op lowerings ---------------------------------------===//

  /// The buffer holding `v`.
  Value get(Value v) { return buffers.lookup(v); }
  /// The buffer of op result `v` (of the op being lowered): an operand's
  /// that dies at this op where its kernel may write in place (see
  /// getInPlaceBuffer), else a new one live until v's last use.
  Value result(Value v);
  /// A buffer for a tensor of `type`, needed by the op being lowered only
  /// (unless result() extends it). With buffer reuse, a place in the
  /// function's arena (braid_arena_N + offset, planned once the body is
  /// lowered); without, each allocation site has its own, allocated on
  /// first use and kept (functions are not reentrant, and results leave a
  /// function by copy, so a site's buffer is dead when its function is
  /// entered again).
  Value allocate(RankedTensorType type);
  /// Makes `v` share `buffer` (no copy), which then lives as long as v.
  void alias(Value v, Value buffer) {
    buffers[v] = buffer;
    extendTo(buffer, v);
  }
  /// Makes `v` the elements of `base` from `offset` on (no copy), keeping
  /// `base` alive as long as v; false where it cannot (base not a buffer
  /// planned by this function, or in a pipeline).
  bool aliasView(Value v, Value base, int64_t offset);
  /// The buffer of a braid.concat whose pieces its operands' producers
  /// wrote in place (findConcatPieces), or null.
  Value getConcatBuffer(ConcatOp op) { return concatBuffer.lookup(op); }
  /// The view of that buffer from element `offset` on (one per place).
  Value getConcatView(ConcatOp op, int64_t offset);
  /// While not -1, buffers allocated belong to the code of this pipeline
  /// stage only (under `if (stage == r)`): other stages' may share memory.
  int64_t allocationStage = -1;
  /// Positions within one op, for the lowering of an op that runs a
  /// sequence of steps (a pipeline's actions): while subPosition is not -1,
  /// allocate() gives a buffer live at that position of the op only, and
  /// useAt() extends a buffer to a later position. A value of the function
  /// lives over whole ops.
  static constexpr int64_t kOpPositions = int64_t(1) << 20;
  int64_t subPosition = -1;
  void useAt(Value buffer, int64_t position);
  /// Results of optimizer updates written in place into the parameter slot
  /// their braid.store_param would copy them to (the store copies nothing).
  DenseSet<Value> writtenInPlace;

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
  /// pipeline stage `stage` (its buffers stay visible to later ops); false
  /// where it could not, and the code runs on every stage.
  bool guardStage(Operation *op, Block *block, Operation *last, int64_t stage);
  /// Makes `buffer` (if planned here) exist on every pipeline stage.
  void setEveryStage(Value buffer);
  /// The placement of the ops after this function's pipeline, or null.
  const StagePlacement *getPlacement() const { return placement; }
  /// Whether `v` is the read of a pending sum in a function running a
  /// pipeline: each stage holds its share of it (StagePlacement's kShare).
  bool isStageSharedSum(Value v) const;
  /// Whether `user`, a collective reading `v`, sums `v` over the pipeline
  /// too (with the mesh axes it names): `v` is a stage-shared sum that only
  /// such all_reduces read.
  bool foldsStageSum(Operation *user, Value v) const;
  /// After the read of a stage-shared sum: starts its all_reduce over the
  /// pipeline, waited for before the sum's first use, unless
  /// foldsStageSum holds for its readers.
  void startStageSum(ParamOp read);
  /// The started pipeline sums not yet waited for, by value: their sites.
  DenseMap<Value, Value> stageSums;
  /// The ops after the pipeline that sum a pending sum's shares.
  DenseSet<Operation *> sumsShares;
  /// Lowers `op`, an op of the body after the one being lowered, as part
  /// of the latter (which runs it: a start issued inside a pipeline, see
  /// Pipelines.cpp): its buffers live from the current op on, and the body
  /// skips it later.
  LogicalResult lowerEarly(Operation *op);
  bool isLoweredEarly(Operation *op) const { return loweredEarly.contains(op); }
  /// Whether the emitted `e` only computes an address or a constant (a
  /// buffer's, a global's): it may stay outside a stage's guard.
  static bool isAddress(Operation *e);
  /// The C string naming the current op (its location), for messages.
  Value whereText() { return text(where); }
  /// A C string literal.
  Value text(StringRef s);
  /// Copies `bytes` of host memory `from` (a constant in the program text)
  /// to the tensor buffer `to`.
  void upload(Value from, Value to, int64_t bytes);
  /// `args` after the program's compute stream.
  SmallVector<Value> withStream(ArrayRef<Value> args);
  /// The pending site of a started collective's future; for a repeat's
  /// stacked future, the array of its instances' sites.
  DenseMap<Value, Value> pendingOf;
  /// The number of sites behind a repeat's stacked future (one per instance).
  DenseMap<Value, int64_t> pendingCount;
  /// The futures a layer body yields, with the pending-site argument of
  /// each: their collectives start on the caller's site, into the caller's
  /// buffer (the out pointer), and the caller waits.
  DenseMap<Value, Value> yieldedPending;
  /// Those of them the layer carries to its next instance (yielded where a
  /// future argument is taken): the last instance's site is null.
  DenseSet<Value> carriedPending;
  /// The out pointer of each yielded future.
  DenseMap<Value, Value> outOf;
  /// Copies `count` elements of `from` to `to` (f32, i32 or i64).
  void copy(Type elementType, Value from, Value to, int64_t count);

  ModuleLowering &module;
  OpBuilder &b;
  Location loc = UnknownLoc::get(b.getContext());
  std::string where;
  /// The slot numbers of the current layer instance (null outside layers).
  Value layerSlots;
  /// Those of the instance its repeat runs next, for the reads marked
  /// braid.next_instance (its own on the last instance).
  Value nextLayerSlots;

private:
  /// Reuse: the operand buffer that result `v` of the op being lowered may
  /// take, or null.
  Value getInPlaceBuffer(Value v);
  /// Whether `v`, a result of an optimizer update, may be written into the
  /// parameter slot that `operand` (a braid.param read) aliases.
  bool canUpdateSlotInPlace(Value operand, Value v);
  /// Extends the buffer's planned life to the last use of `v`.
  void extendTo(Value buffer, Value v);
  /// The last position of the last op of the body that uses `v` (at least
  /// the op being lowered).
  int64_t lastUse(Value v);
  /// The first and last position of the op being lowered.
  int64_t opBegin() const { return current * kOpPositions; }
  int64_t opEnd() const { return opBegin() + kOpPositions - 1; }
  /// Assigns the arena offsets and emits the arena's allocation at the
  /// function's start.
  void finishPlan(emitc::FuncOp target);

  DenseMap<Value, Value> buffers;
  Block *body = nullptr;
  /// The placement of the ops after a pipeline on its stages, if any.
  const StagePlacement *placement = nullptr;
  /// Ops lowered early, as part of an op before them (lowerEarly).
  DenseSet<Operation *> loweredEarly;
  DenseMap<Operation *, int64_t> opIndex;
  int64_t current = 0;
  /// The planned buffers, the buffer value of each, and its address
  /// literals (patched with the offset).
  std::vector<PlannedBuffer> planned;
  DenseMap<Value, unsigned> plannedOf;
  /// The planned buffer each view (aliasView) is part of.
  DenseMap<Value, Value> viewBase;
  /// Values computed straight into their place in a braid.concat's result
  /// (a dp gradient bucket): the concat and the element offset.
  DenseMap<Value, std::pair<ConcatOp, int64_t>> concatPieceOf;
  DenseMap<Operation *, Value> concatBuffer;
  DenseMap<std::pair<Operation *, int64_t>, Value> concatViews;
  /// Fills concatPieceOf for the body: each operand of a concat of
  /// contiguous pieces that nothing else reads, produced in the body.
  void findConcatPieces();
  /// A view of `v`'s place in its concat's buffer (allocated with the first
  /// piece), or null.
  Value getConcatPiece(Value v);
  std::vector<std::pair<emitc::LiteralOp, Type>> addresses;
  /// Buffers an in-place result took at the op being lowered.
  DenseSet<unsigned> donated;
  /// Values holding parameter gradients (for the report).
  DenseSet<Value> gradients;
  /// Fills `gradients` for the body (see the definition for which values).
  void findGradients();
  /// The name of the function's arena (a `static float *` global).
  std::string arenaName;
  /// The out-pointer arguments of the body's results (lowerBody's `outs`).
  SmallVector<Value> outValues;
};

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// The buffer type of a tensor type, or null when the element type is not one
/// the kernels take.
Type getBufferType(Type type);
/// "f32", "i32", "i64" or "bf16": the suffix of a kernel on `element`
/// (bf16 storage: a tensor's bf16 element type or its buffer's ui16).
StringRef getElementSuffix(Type element);
/// The bytes of one element of `element` (a tensor's or its buffer's).
int64_t getElementBytes(Type element);
/// The C string literal of `s`.
std::string quote(StringRef s);
/// "file:line:col: op-name", for messages from the running program.
std::string describe(Operation *op);
/// Whether the value `read` gives may be overwritten (by a store of the same
/// parameter) before its last use.
bool isOverwrittenWhileLive(ParamOp read);
/// Whether `layer` reads parameters of the instance run after the current
/// one (braid.next_instance): its function then takes their slot numbers.
bool readsNextInstance(LayerOp layer);

/// The lowerings of each concern, added to `t`.
void populateParamLowerings(LoweringTable &t);
void populateComputeLowerings(LoweringTable &t);
void populateCollectiveLowerings(LoweringTable &t);
void populatePipelineLowerings(LoweringTable &t);
void populateFusedLowerings(LoweringTable &t);

} // namespace mlir::braid::lowering

#endif // BRAID_LIB_CONVERSION_BRAIDTOEMITC_LOWERING_H
