//===- FuseElementwise.cpp - Elementwise chains into braid.fused ----------===//
//
// Groups runs of elementwise ops that feed each other and share a result
// shape into braid.fused regions, which code generation computes in one
// loop nest each. Greedy, in program order, one block at a time. A
// row-wise op (RowReductionOpInterface: a norm, softmax, cross-entropy)
// joins the region computing its rows, or one whose row-wise op reads the
// same rows and shares its statistics (a loss and its gradient), and the
// elementwise ops using its result join it in turn. Under bf16-mixed the
// roundings braid-legalize-bf16 adds are fusible ops like the others, and
// so are its conversions to and from bf16 storage: a pack of a region's
// value joins the region, which then writes the bf16 storage in its loop,
// and an unpack starts a region that the ops reading its value join, so
// that the loop reads the storage itself. A pack of a value no region
// computes (a layer's input) whose value only leaves the block joins the
// first region reading that value whole. A pack that cannot join the
// region it reads (a loss's) but whose value only leaves the block does
// not close that region: it moves after it.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braid-fuse-elementwise"

namespace mlir::braid {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// A region being built: its ops in program order, and whether an op
/// outside it has used one of its values (then nothing may join it: the
/// fused op replaces its last op, after that use).
struct Group {
  SmallVector<Operation *> ops;
  /// The iteration shape.
  SmallVector<int64_t> shape;
  bool sealed = false;
};

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Replaces the ops of `group` by one braid.fused op where the last one
/// was.
static void fuse(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp()))
        inputs.insert(v);
    Value r = op->getResult(0);
    if (llvm::any_of(r.getUsers(),
                     [&](Operation *user) { return !members.contains(user); }))
      outputs.push_back(r);
  }
  // Every op feeds another or is used: the last one's value at least is.
  Operation *last = ops.back();
  OpBuilder b(last);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  // The last op's value first: it has the iteration shape, as all do.
  auto fused =
      FusedOp::create(b, last->getLoc(), resultTypes, inputs.getArrayRef());
  Block *body = b.createBlock(&fused.getBody());
  IRMapping map;
  for (Value v : inputs)
    map.map(v, body->addArgument(v.getType(), v.getLoc()));
  b.setInsertionPointToEnd(body);
  for (Operation *op : ops)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  YieldOp::create(b, last->getLoc(), yielded);
  for (auto [v, r] : llvm::zip(outputs, fused.getResults()))
    v.replaceAllUsesWith(r);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

/// Whether `op` stores values for later in bf16 (bf16 storage: a
/// braid-legalize-bf16 pack of a value saved for the backward) and may
/// move later in its block: free of memory effects, no regions, its bf16
/// values used by the block's terminator only, so nothing in the block
/// reads them. Such an op reading a region's value leaves the region open
/// (it moves after it) where another use would close it.
static bool isMovableUse(Operation &op) {
  if (op.getNumRegions() || !isMemoryEffectFree(&op) ||
      op.hasTrait<OpTrait::IsTerminator>() || op.getNumResults() == 0 ||
      !op.getBlock()->mightHaveTerminator())
    return false;
  if (!llvm::all_of(op.getResultTypes(), [](Type t) {
        auto tensor = dyn_cast<RankedTensorType>(t);
        return tensor && tensor.getElementType().isBF16();
      }))
    return false;
  Operation *terminator = op.getBlock()->getTerminator();
  return llvm::all_of(op.getUsers(),
                      [&](Operation *user) { return user == terminator; });
}

static void fuseBlock(Block &block, int64_t minOps) {
  // The group of each op that is in one (index into `groups`).
  std::vector<Group> groups;
  DenseMap<Operation *, unsigned> groupOf;
  // The row-wise ops in groups reading each value as their rows.
  DenseMap<Value, SmallVector<Operation *>> rowReaders;
  // The ops reading a region's value that move after the region.
  SmallVector<Operation *> moved;
  // The groups of a lone pack of each value no group computes (a layer's
  // input saved for the backward), which a region reading that value
  // whole takes in: its loop reads the value anyway.
  DenseMap<Value, SmallVector<unsigned>> packsOf;
  for (Operation &op : block) {
    // The groups whose values `op` reads.
    llvm::SmallSetVector<unsigned, 4> producers;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = groupOf.find(def); it != groupOf.end())
          producers.insert(it->second);
    bool rowwise = FusedOp::isRowwise(&op);
    std::optional<unsigned> joined;
    if (rowwise || FusedOp::isFusible(&op)) {
      ArrayRef<int64_t> shape = shapeOf(op.getOperand(0));
      if (!rowwise)
        shape = shapeOf(op.getResult(0));
      // The open groups that may take `op`: those computing a value of the
      // iteration shape that it reads (not a loss, which is known only
      // after every row), and for a row-wise op those already reducing the
      // same rows.
      llvm::SmallSetVector<unsigned, 4> candidates, excluded;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp())
          if (auto it = groupOf.find(def); it != groupOf.end())
            (shapeOf(v) == shape ? candidates : excluded).insert(it->second);
      for (Value v : op.getOperands())
        if (shapeOf(v) == shape)
          for (unsigned g : packsOf.lookup(v))
            candidates.insert(g);
      if (rowwise)
        for (Operation *reader : rowReaders.lookup(op.getOperand(0)))
          if (cast<RowReductionOpInterface>(reader).sharesRowStatistics(&op))
            candidates.insert(groupOf.lookup(reader));
      // Join (and merge) the open groups of the same shape.
      for (unsigned g : candidates) {
        Group &group = groups[g];
        if (group.sealed || ArrayRef<int64_t>(group.shape) != shape ||
            excluded.contains(g))
          continue;
        if (!joined) {
          joined = g;
          continue;
        }
        // Two regions meet at `op`: the later-built one moves into the
        // first (program order is kept when fusing, below).
        for (Operation *member : group.ops) {
          groups[*joined].ops.push_back(member);
          groupOf[member] = *joined;
        }
        group.ops.clear();
        group.sealed = true;
      }
      // A pack reading a region it cannot join (a loss, known only after
      // the region) whose value only leaves the block moves after that
      // region rather than closing it with a region of its own (below).
      if (!joined && !producers.empty() && isMovableUse(op)) {
        moved.push_back(&op);
        continue;
      }
      if (!joined) {
        joined = groups.size();
        groups.emplace_back();
        groups.back().shape.assign(shape.begin(), shape.end());
        if (producers.empty() && op.getNumOperands() == 1 &&
            isMovableUse(op))
          packsOf[op.getOperand(0)].push_back(*joined);
      }
      groups[*joined].ops.push_back(&op);
      groupOf[&op] = *joined;
      if (rowwise)
        rowReaders[op.getOperand(0)].push_back(&op);
    }
    // A use from outside a group closes it, unless the op's values only
    // leave the block (a bf16 pack of a saved value, yielded): it moves
    // after the region instead (below).
    if (!joined && isMovableUse(op)) {
      if (!producers.empty())
        moved.push_back(&op);
      continue;
    }
    for (unsigned g : producers)
      if (!joined || g != *joined)
        groups[g].sealed = true;
  }
  for (Group &group : groups) {
    if ((int64_t)group.ops.size() < std::max<int64_t>(1, minOps))
      continue;
    llvm::sort(group.ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    LLVM_DEBUG(llvm::dbgs() << "fusing " << group.ops.size()
                            << " ops ending in " << *group.ops.back() << "\n");
    fuse(group.ops);
  }
  // Each op that read a region's value before its end follows the region
  // (in reverse, so that those following one region keep their order).
  for (Operation *op : llvm::reverse(moved)) {
    Operation *last = nullptr;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (def->getBlock() == &block && (!last || last->isBeforeInBlock(def)))
          last = def;
    if (last && op->isBeforeInBlock(last))
      op->moveAfter(last);
  }
}

struct FuseElementwisePass
    : public braid::impl::FuseElementwisePassBase<FuseElementwisePass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op))
        return WalkResult::skip();
      for (Region &region : op->getRegions())
        for (Block &block : region)
          blocks.push_back(&block);
      return WalkResult::advance();
    });
    for (Block *block : blocks)
      fuseBlock(*block, minOps);
  }
};

} // namespace
