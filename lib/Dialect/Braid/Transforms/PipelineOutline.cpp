//===- PipelineOutline.cpp - One function per chunk and phase --------------===//
//
// Cuts a chunk-split gradient function into the per-chunk F, B and W programs
// a pipeline schedule runs; their arguments and results are what stages
// send and receive.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::braid {
#define GEN_PASS_DEF_PIPELINEOUTLINEPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

using PieceKey = std::pair<int64_t, int>;

struct Piece {
  int64_t chunk;
  Phase phase;
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> inputs, outputs;
  llvm::SetVector<ParamOp> params;
  llvm::SetVector<unsigned> deps;
};

/// Gives ops that later passes added without a chunk and phase (the
/// collectives and scalings of braid-partition, most of which are tagged
/// after the op they serve, but not all: a reduction before the return,
/// a constant) those of their producers, or failing that, of their users.
void inheritChunks(Block &body) {
  auto tagged = [](Operation *op) {
    return op && op->hasAttr(kChunkAttrName) && getPhase(op);
  };
  // Fills in what `to` lacks; false if it lacked nothing.
  auto inherit = [](Operation *from, Operation *to) {
    if (!to->hasAttr(kChunkAttrName))
      to->setAttr(kChunkAttrName, from->getAttr(kChunkAttrName));
    if (!getPhase(to))
      setPhase(to, *getPhase(from));
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : body.without_terminator()) {
      if (isa<ParamOp>(op) || tagged(&op))
        continue;
      for (Value v : op.getOperands())
        if (tagged(v.getDefiningOp())) {
          inherit(v.getDefiningOp(), &op);
          changed = true;
          break;
        }
    }
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (isa<ParamOp>(op) || tagged(&op))
        continue;
      for (Operation *user : op.getUsers())
        if (tagged(user)) {
          inherit(user, &op);
          changed = true;
          break;
        }
    }
  }
}

/// Gives each chunk and phase its own copy of a side-effect-free op that
/// reads only parameters (bf16-mixed's rounded working copy of a tied
/// weight), as parameters themselves are read where used. Left where its
/// first user is, its result would be a piece's result: sent to another
/// chunk with every micro-batch (GPT's head would receive the embedding's
/// rounded wte), or kept from F for B per micro-batch in flight.
void copyParamFunctionsPerPiece(Block &body) {
  auto keyOf = [](Operation *op) -> std::optional<PieceKey> {
    auto chunk = op->getAttrOfType<IntegerAttr>(kChunkAttrName);
    std::optional<Phase> phase = getPhase(op);
    if (!chunk || !phase)
      return std::nullopt;
    return PieceKey{chunk.getInt(), (int)*phase};
  };
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (isa<ParamOp>(op) || op.getNumResults() != 1 ||
        op.getNumOperands() == 0 || !isMemoryEffectFree(&op) ||
        !llvm::all_of(op.getOperands(), [](Value v) {
          return isa_and_nonnull<ParamOp>(v.getDefiningOp());
        }))
      continue;
    std::optional<PieceKey> home = keyOf(&op);
    // Per other piece: its uses and its first user in the block.
    llvm::MapVector<PieceKey, std::pair<SmallVector<OpOperand *>, Operation *>>
        elsewhere;
    for (OpOperand &use : op.getResult(0).getUses()) {
      Operation *user = body.findAncestorOpInBlock(*use.getOwner());
      std::optional<PieceKey> key = user ? keyOf(user) : std::nullopt;
      if (!key || key == home)
        continue;
      auto &[uses, first] = elsewhere[*key];
      uses.push_back(&use);
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    for (auto &[key, usesAndFirst] : elsewhere) {
      auto &[uses, first] = usesAndFirst;
      OpBuilder builder(first);
      Operation *copy = builder.clone(op);
      copy->setAttr(kChunkAttrName, first->getAttr(kChunkAttrName));
      setPhase(copy, *getPhase(first));
      for (OpOperand *use : uses)
        use->set(copy->getResult(0));
    }
    if (op.use_empty())
      op.erase();
  }
}

/// Whether `op` is linear in its operands (no constant term), so that
/// applying it to means over micro-batches equals the mean of applying it to
/// each: sums, collectives that sum or only move data, and the wait of a
/// started one.
bool isLinear(Operation *op) {
  if (isa<AddOp, WaitOp>(op))
    return true;
  if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
    std::optional<ReduceKind> reduction = collective.getReduction();
    return !reduction || *reduction == ReduceKind::sum;
  }
  return false;
}

/// Whether every caller of `grad` is a braid.pipeline, which returns the
/// means of its results over micro-batches.
static bool isCalledByPipelinesOnly(func::FuncOp grad, ModuleOp module) {
  std::optional<SymbolTable::UseRange> uses = grad.getSymbolUses(module);
  return uses && !uses->empty() &&
         llvm::all_of(*uses, [](const SymbolTable::SymbolUse &use) {
           return isa<PipelineOp>(use.getUser());
         });
}

/// Moves the all_reduces of weight gradients that a repeated layer yields
/// (a layer's data-parallel gradient reduction in the body of `@block.W`)
/// out of the layer: each repeat of it is followed by one all_reduce of the
/// stacked gradient, which sums each instance's slice as the body did.
/// hoistGradientSums then moves that out of the function like any returned
/// gradient's, so a layer's gradients are reduced once per step, on their
/// means, instead of once per micro-batch, and a stage can start them when
/// its last W action of the chunk has run. Only where every use of the
/// layer is a W repeat in `grad`, and only an all_reduce whose result the
/// body yields as stacked results and nothing else uses.
static void hoistLayerReductions(func::FuncOp grad, ModuleOp module) {
  if (!isCalledByPipelinesOnly(grad, module))
    return;
  Block &body = grad.getBody().front();
  llvm::MapVector<Operation *, SmallVector<RepeatOp>> repeatsOf;
  for (auto repeat : body.getOps<RepeatOp>())
    if (getPhase(repeat) == Phase::W)
      if (auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
              repeat, repeat.getLayerAttr()))
        repeatsOf[layer].push_back(repeat);
  for (auto &[op, repeats] : repeatsOf) {
    auto layer = cast<LayerOp>(op);
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(layer, module);
    if (!uses || llvm::count_if(*uses, [](const SymbolTable::SymbolUse &) {
                   return true;
                 }) != static_cast<int64_t>(repeats.size()))
      continue; // repeated elsewhere too
    unsigned firstStacked = 0;
    for (RepeatOp repeat : repeats)
      firstStacked = std::max(firstStacked, repeat.getNumCarried());
    Block &layerBody = layer.getBody().front();
    Operation *yield = layerBody.getTerminator();
    // A summing all_reduce (or a started one and its wait) whose result is
    // only yielded, as stacked results.
    struct Moved {
      Operation *reduce;
      WaitOp wait; // of a started reduce, or null
      Value result;
    };
    SmallVector<Moved> moved;
    for (Operation &inner : layerBody) {
      auto collective = dyn_cast<CollectiveOpInterface>(&inner);
      std::optional<ReduceKind> kind =
          collective ? collective.getReduction() : std::nullopt;
      if (!collective ||
          collective.getCollectiveKind() != CollectiveKind::all_reduce ||
          !kind || *kind != ReduceKind::sum ||
          collective.getResultTensorType() != collective.getInput().getType())
        continue;
      Moved m{&inner, nullptr, inner.getResult(0)};
      if (collective.isStarted()) {
        if (!m.result.hasOneUse())
          continue;
        m.wait = dyn_cast<WaitOp>(*m.result.getUsers().begin());
        if (!m.wait)
          continue;
        m.result = m.wait.getResult();
      }
      if (m.result.use_empty() ||
          llvm::any_of(m.result.getUses(), [&](OpOperand &use) {
            return use.getOwner() != yield ||
                   use.getOperandNumber() < firstStacked;
          }))
        continue;
      moved.push_back(m);
    }
    if (moved.empty())
      continue;
    // After each repeat, the reductions of the stacked results the moved
    // ones fed, tagged with the repeat's chunk and phase.
    for (RepeatOp repeat : repeats) {
      OpBuilder b(repeat->getContext());
      b.setInsertionPointAfter(repeat);
      for (Moved &m : moved)
        for (OpOperand &use : m.result.getUses()) {
          Value stacked = repeat.getResult(use.getOperandNumber());
          auto tag = [&](Operation *copy) {
            copy->setAttr(kChunkAttrName, repeat->getAttr(kChunkAttrName));
            setPhase(copy, Phase::W);
          };
          IRMapping mapping;
          mapping.map(m.reduce->getOperand(0), stacked);
          Operation *copy = b.clone(*m.reduce, mapping);
          tag(copy);
          Operation *first = copy;
          if (m.wait) {
            copy->getResult(0).setType(FutureType::get(
                b.getContext(), cast<RankedTensorType>(stacked.getType())));
            mapping.map(m.wait.getFuture(), copy->getResult(0));
            copy = b.clone(*m.wait, mapping);
            tag(copy);
          }
          copy->getResult(0).setType(stacked.getType());
          stacked.replaceAllUsesExcept(copy->getResult(0), first);
        }
    }
    for (Moved &m : moved) {
      m.result.replaceAllUsesWith(m.reduce->getOperand(0));
      if (m.wait)
        m.wait.erase();
      m.reduce->erase();
    }
  }
}

/// Moves the sums of weight gradients that several chunks contribute to (a
/// tied parameter's, e.g. GPT's embedding and head) and the all_reduces of
/// gradients the function returns out of the gradient function into its
/// callers, after their braid.pipeline: the function returns the partial
/// gradients instead, as Megatron reduces tied embeddings and data-parallel
/// gradients at the end of the step. Left inside, the tied sum would make
/// the W piece of the chunk holding it wait for another stage's W of the
/// same micro-batch, so all of that piece's W would run after the schedule
/// (see the lowering of braid.pipeline), and every gradient would be
/// reduced once per micro-batch. Only where it is exact: the moved ops are
/// linear (the pipeline returns means), read only W results (or, in F, a
/// summing collective whose result only the function returns: the loss's
/// dp sum, which B does not read), and feed only the function's results; and every caller is a braid.pipeline. Otherwise
/// nothing moves.
void hoistGradientSums(func::FuncOp grad, ModuleOp module) {
  std::optional<SymbolTable::UseRange> uses = grad.getSymbolUses(module);
  if (!uses || uses->empty())
    return;
  SmallVector<PipelineOp> callers;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto pipeline = dyn_cast<PipelineOp>(use.getUser());
    if (!pipeline)
      return;
    callers.push_back(pipeline);
  }
  Block &body = grad.getBody().front();
  auto chunkOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto chunk = op->getAttrOfType<IntegerAttr>(kChunkAttrName))
      return chunk.getInt();
    return std::nullopt;
  };
  Operation *terminator = body.getTerminator();
  // Candidates: W ops reading another chunk's W result (a tied sum) and
  // what they feed; then, from the end, all_reduces (and their waits)
  // whose results only the function returns or a candidate reads: a
  // gradient's reduction over dp (or tp), then summed once per step on the
  // means rather than once per micro-batch, as Megatron reduces gradients
  // after the pipeline. A reduce_scatter stays: its caller would hold the
  // whole gradient, which ZeRO-2 shards.
  DenseSet<Operation *> candidate;
  for (Operation &op : body.without_terminator()) {
    if (getPhase(&op) != Phase::W)
      continue;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && (candidate.contains(def) || (getPhase(def) == Phase::W &&
                                              chunkOf(def) != chunkOf(&op)))) {
        candidate.insert(&op);
        break;
      }
    }
  }
  auto feedsOnlyCandidates = [&](Operation *op) {
    return !op->use_empty() &&
           llvm::all_of(op->getUsers(), [&](Operation *user) {
             return user == terminator || candidate.contains(user);
           });
  };
  // Also, in F, the loss's reduction (over dp, or anything else summing a
  // value only the function returns): nothing in B reads it (B seeds the
  // local loss), so the last stage's replicas need not meet inside every
  // micro-batch's F; the caller sums the mean of the local losses once.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    std::optional<Phase> phase = getPhase(&op);
    if ((phase != Phase::W && phase != Phase::F) || candidate.contains(&op))
      continue;
    auto collective = dyn_cast<CollectiveOpInterface>(&op);
    bool keepsShape = collective && collective.getResultTensorType() ==
                                        collective.getInput().getType();
    if ((keepsShape || isa<WaitOp>(op)) && feedsOnlyCandidates(&op))
      candidate.insert(&op);
  }
  // Only what moves exactly: linear ops reading W results (an F one: F
  // results) or candidates and feeding only candidates or the function's
  // results.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : body.without_terminator()) {
      if (!candidate.contains(&op))
        continue;
      bool exact = isLinear(&op) && feedsOnlyCandidates(&op) &&
                   llvm::all_of(op.getOperands(), [&](Value v) {
                     Operation *def = v.getDefiningOp();
                     return def && (candidate.contains(def) ||
                                    getPhase(def) == Phase::W ||
                                    getPhase(def) == getPhase(&op));
                   });
      if (!exact) {
        candidate.erase(&op);
        changed = true;
      }
    }
  }
  llvm::SetVector<Operation *> moved;
  for (Operation &op : body.without_terminator())
    if (candidate.contains(&op))
      moved.insert(&op);
  if (moved.empty())
    return;
  llvm::SetVector<Value> partials;
  for (Operation *op : moved)
    for (Value v : op->getOperands())
      if (!moved.contains(v.getDefiningOp()))
        partials.insert(v);
  // The chunks whose partials each moved op sums. One that sums several
  // chunks' (a tied gradient's, after its sum) belongs to no chunk: left
  // with the chunk its op inherited, braid-bucket-collectives would fuse it
  // with that chunk's other reductions (GPT's wpe with the tied wte, on
  // the first chunk), and the bucket, placed where most of its elements
  // are (the stage summing wte), would take wpe's gradient there.
  DenseMap<Operation *, llvm::SmallSetVector<int64_t, 2>> chunksOf;
  for (Operation *op : moved)
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (moved.contains(def)) {
        // A copy: chunksOf[def] could grow the map under chunksOf[op].
        llvm::SmallSetVector<int64_t, 2> from = chunksOf.lookup(def);
        chunksOf[op].insert(from.begin(), from.end());
      } else if (std::optional<int64_t> chunk =
                     def ? chunkOf(def) : std::nullopt)
        chunksOf[op].insert(*chunk);
    }

  // The function returns its other results, then the partials.
  SmallVector<Value> returned;
  SmallVector<int64_t> newIndex;
  for (Value v : terminator->getOperands()) {
    Operation *def = v.getDefiningOp();
    newIndex.push_back(def && moved.contains(def) ? -1 : returned.size());
    if (newIndex.back() >= 0)
      returned.push_back(v);
  }
  int64_t firstPartial = returned.size();
  llvm::append_range(returned, partials);
  SmallVector<Value> oldReturned(terminator->getOperands());
  // Result attributes: the kept results keep theirs; a partial takes the
  // layout (braid.block_of) of the sum it feeds, being of its type, but
  // is the gradient of no parameter by itself.
  SmallVector<DictionaryAttr> oldAttrs;
  grad.getAllResultAttrs(oldAttrs);
  SmallVector<Attribute> newAttrs;
  for (auto [i, index] : llvm::enumerate(newIndex))
    if (index >= 0)
      newAttrs.push_back(oldAttrs.empty() ? DictionaryAttr() : oldAttrs[i]);
  for (Value partial : partials) {
    NamedAttrList attrs;
    Value sum = partial;
    while (!llvm::is_contained(oldReturned, sum)) {
      Operation *user = *llvm::find_if(
          sum.getUsers(), [&](Operation *u) { return moved.contains(u); });
      sum = user->getResult(0);
    }
    int64_t j = llvm::find(oldReturned, sum) - oldReturned.begin();
    if (!oldAttrs.empty() && sum.getType() == partial.getType())
      if (Attribute layout = oldAttrs[j].get("braid.block_of"))
        attrs.set("braid.block_of", layout);
    newAttrs.push_back(attrs.getDictionary(grad.getContext()));
  }
  terminator->setOperands(returned);
  grad.setType(FunctionType::get(grad.getContext(), grad.getArgumentTypes(),
                                 ValueRange(returned).getTypes()));
  grad.setAllResultAttrs(newAttrs);

  // Each caller sums the means of the partials.
  for (PipelineOp caller : callers) {
    OpBuilder b(caller);
    auto pipeline =
        PipelineOp::create(b, caller.getLoc(), ValueRange(returned).getTypes(),
                           caller.getCallee(), caller.getInputs());
    pipeline->setAttrs(caller->getAttrs());
    IRMapping mapping;
    for (auto [i, v] : llvm::enumerate(partials))
      mapping.map(v, pipeline.getResult(firstPartial + i));
    for (Operation *op : moved) {
      Operation *copy = b.clone(*op, mapping);
      // A collective of one chunk's partials keeps its chunk:
      // braid-bucket-collectives then fuses only one chunk's, whose operands
      // are on one stage.
      if (!isa<CollectiveOpInterface>(copy) || chunksOf[op].size() > 1)
        copy->removeAttr(kChunkAttrName);
      copy->removeAttr(kPhaseAttrName);
    }
    for (auto [i, old] : llvm::enumerate(caller.getResults()))
      old.replaceAllUsesWith(newIndex[i] >= 0 ? pipeline.getResult(newIndex[i])
                                              : mapping.lookup(oldReturned[i]));
    caller.erase();
  }
  for (Operation *op : llvm::reverse(moved))
    op->erase();
}

struct PipelineOutlinePass
    : public braid::impl::PipelineOutlinePassBase<PipelineOutlinePass> {
  using PipelineOutlinePassBase::PipelineOutlinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string gradName = entry + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!grad) {
      module.emitError() << "braid-pipeline-outline: no function @"
                         << gradName << "; run braid-autodiff (entry="
                         << entry << ") first";
      return signalPassFailure();
    }
    Block &body = grad.getBody().front();
    inheritChunks(body);
    copyParamFunctionsPerPiece(body);
    hoistLayerReductions(grad, module);
    hoistGradientSums(grad, module);

    // Pieces in order of their first op; parameters are read where used.
    llvm::MapVector<PieceKey, unsigned> index;
    SmallVector<Piece> pieces;
    DenseMap<Operation *, unsigned> pieceOf;
    for (Operation &op : body.without_terminator()) {
      if (isa<ParamOp>(op))
        continue;
      auto chunk = op.getAttrOfType<IntegerAttr>("braid.chunk");
      std::optional<Phase> phase = getPhase(&op);
      if (!chunk || !phase) {
        op.emitOpError() << "has no braid.chunk and braid.phase; run "
                            "braid-pipeline-split before braid-autodiff";
        return signalPassFailure();
      }
      PieceKey key{chunk.getInt(), (int)*phase};
      auto [it, inserted] = index.insert({key, pieces.size()});
      if (inserted)
        pieces.push_back({chunk.getInt(), *phase, {}, {}, {}, {}, {}});
      pieces[it->second].ops.push_back(&op);
      pieceOf[&op] = it->second;
    }

    // What each piece takes and gives.
    for (auto [i, piece] : llvm::enumerate(pieces))
      for (Operation *op : piece.ops)
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (auto param = dyn_cast_or_null<ParamOp>(def)) {
            piece.params.insert(param);
            continue;
          }
          auto it = def ? pieceOf.find(def) : pieceOf.end();
          if (it != pieceOf.end() && it->second == i)
            continue;
          piece.inputs.insert(v);
          if (it != pieceOf.end()) {
            piece.deps.insert(it->second);
            pieces[it->second].outputs.insert(v);
          }
        }
    for (Value v : body.getTerminator()->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = pieceOf.find(def); it != pieceOf.end())
          pieces[it->second].outputs.insert(v);

    // Dependence order; ties go to the piece whose first op comes first.
    SmallVector<unsigned> order;
    SmallVector<bool> done(pieces.size(), false);
    while (order.size() < pieces.size()) {
      bool progress = false;
      for (unsigned i = 0; i < pieces.size(); ++i) {
        if (done[i] ||
            llvm::any_of(pieces[i].deps, [&](unsigned d) { return !done[d]; }))
          continue;
        order.push_back(i);
        done[i] = true;
        progress = true;
        break;
      }
      if (!progress) {
        InFlightDiagnostic diag = grad.emitError()
                                  << "braid-pipeline-outline: the pieces of @"
                                  << gradName << " depend on each other in a "
                                                 "cycle:";
        for (unsigned i = 0; i < pieces.size(); ++i)
          if (!done[i])
            diag << " c" << pieces[i].chunk << "."
                 << stringifyPhase(pieces[i].phase);
        return signalPassFailure();
      }
    }

    // The pieces as functions, after the gradient function.
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(grad);
    SmallVector<func::FuncOp> functions(pieces.size());
    for (unsigned i : order) {
      Piece &piece = pieces[i];
      SmallVector<Type> argTypes, resultTypes;
      for (Value v : piece.inputs)
        argTypes.push_back(v.getType());
      for (Value v : piece.outputs)
        resultTypes.push_back(v.getType());
      std::string name = gradName + ".c" + std::to_string(piece.chunk) + "." +
                         stringifyPhase(piece.phase).str();
      auto fn = func::FuncOp::create(b, grad.getLoc(), name,
                                     b.getFunctionType(argTypes, resultTypes));
      fn->setAttr("braid.chunk", b.getI64IntegerAttr(piece.chunk));
      setPhase(fn, piece.phase);
      Block *entryBlock = fn.addEntryBlock();
      OpBuilder inner = OpBuilder::atBlockEnd(entryBlock);
      IRMapping mapping;
      for (auto [v, arg] : llvm::zip(piece.inputs, entryBlock->getArguments()))
        mapping.map(v, arg);
      for (ParamOp param : piece.params) {
        Operation *copy = inner.clone(*param, mapping);
        copy->setAttr("braid.chunk", b.getI64IntegerAttr(piece.chunk));
      }
      for (Operation *op : piece.ops)
        inner.clone(*op, mapping);
      SmallVector<Value> results;
      for (Value v : piece.outputs)
        results.push_back(mapping.lookup(v));
      func::ReturnOp::create(inner, grad.getLoc(), results);
      functions[i] = fn;
      b.setInsertionPointAfter(fn);
    }

    // The driver: calls in order, then the old ops go.
    Operation *terminator = body.getTerminator();
    b.setInsertionPoint(terminator);
    IRMapping mapping;
    for (unsigned i : order) {
      SmallVector<Value> operands;
      for (Value v : pieces[i].inputs)
        operands.push_back(mapping.lookupOrDefault(v));
      auto call = func::CallOp::create(b, grad.getLoc(), functions[i],
                                       operands);
      for (auto [v, r] : llvm::zip(pieces[i].outputs, call.getResults()))
        mapping.map(v, r);
    }
    for (OpOperand &operand : terminator->getOpOperands())
      operand.set(mapping.lookupOrDefault(operand.get()));
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(body.getOperations()))) {
      if (&op == terminator || isa<func::CallOp>(op) ||
          (isa<ParamOp>(op) && !op.use_empty()))
        continue;
      if (!op.use_empty()) {
        op.emitOpError("is still used after outlining (pass bug)");
        return signalPassFailure();
      }
      op.erase();
    }
  }
};

} // namespace
