//===- Pipelines.cpp - Scheduled pipelines ----------------------------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

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

/// A started collective marked braid.start_in_pipeline that the pipeline
/// issues: the code of it and of the pure ops it reads the pipeline's
/// results through (a bucket's concat), run on `stage` once the means of
/// `results` are complete.
struct EarlyStart {
  int64_t stage = 0;
  SmallVector<int64_t> results;
  SmallVector<Operation *> code;
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

/// Lowers the starts marked braid.start_in_pipeline (braid-schedule-
/// collectives) that read results of `op` through pure ops only, all placed
/// with them on the stage computing those results: their code is emitted
/// here, and all of it but the addresses (which later ops use) is moved
/// into that stage's actions by the caller. The others are lowered where
/// they are, after the pipeline.
static LogicalResult lowerEarlyStarts(PipelineOp op, FunctionLowering &l,
                                      std::vector<EarlyStart> &early) {
  const StagePlacement *placement = l.getPlacement();
  if (!placement)
    return success();
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    auto start = dyn_cast<CollectiveOpInterface>(next);
    if (!start || !start.isStarted() ||
        !next->hasAttr("braid.start_in_pipeline"))
      continue;
    EarlyStart s;
    llvm::SetVector<Operation *> cone;
    bool ok = true;
    SmallVector<Value> work(next->getOperands());
    while (ok && !work.empty()) {
      Value v = work.pop_back_val();
      if (auto result = dyn_cast<OpResult>(v);
          result && result.getOwner() == op) {
        if (!llvm::is_contained(s.results, result.getResultNumber()))
          s.results.push_back(result.getResultNumber());
        continue;
      }
      Operation *def = v.getDefiningOp();
      ok = def && def->getBlock() == op->getBlock() &&
           op->isBeforeInBlock(def) && isPure(def) &&
           def->getNumRegions() == 0 && !l.isLoweredEarly(def);
      if (ok && cone.insert(def))
        llvm::append_range(work, def->getOperands());
    }
    if (!ok || s.results.empty())
      continue;
    s.stage = l.getPipelineStage(op->getResult(s.results.front()));
    ok = s.stage != StagePlacement::kAll &&
         llvm::all_of(s.results, [&](int64_t k) {
           return l.getPipelineStage(op->getResult(k)) == s.stage;
         });
    SmallVector<Operation *> ops(cone.begin(), cone.end());
    llvm::sort(
        ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    ops.push_back(next);
    ok = ok && llvm::all_of(ops, [&](Operation *x) {
           return placement->getStage(x) == s.stage &&
                  placement->getTransfers(x).empty();
         });
    if (!ok)
      continue;
    Block *block = l.b.getInsertionBlock();
    Operation *last = l.b.getInsertionPoint() == block->begin()
                          ? nullptr
                          : &*std::prev(l.b.getInsertionPoint());
    // Its buffers are the issuing stage's (the start and its wait run
    // there).
    if (l.module.reuseBuffers)
      l.allocationStage = s.stage;
    for (Operation *x : ops)
      if (failed(l.lowerEarly(x)))
        return failure();
    l.allocationStage = -1;
    DenseSet<Operation *> moved;
    for (Operation &e : llvm::make_range(last ? std::next(Block::iterator(last))
                                              : block->begin(),
                                         l.b.getInsertionPoint()))
      if (!FunctionLowering::isAddress(&e)) {
        s.code.push_back(&e);
        moved.insert(&e);
      }
    // What moves into the stage's code must not be needed outside it.
    auto inside = [&](Value v) {
      return v && v.getDefiningOp() && moved.contains(v.getDefiningOp());
    };
    for (Operation *e : s.code)
      for (Operation *user : e->getUsers())
        if (!moved.contains(user))
          return next->emitOpError()
                 << "is marked braid.start_in_pipeline, but its code is "
                    "used outside the stage that issues it";
    for (Operation *x : ops)
      for (Value r : x->getResults())
        if (inside(l.get(r)))
          return next->emitOpError()
                 << "is marked braid.start_in_pipeline, but its buffers "
                    "would be defined inside the stage that issues it";
    early.push_back(std::move(s));
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
/// micro-batches of the results it computed; each mean stays on its stage
/// (StagePlacement places what follows). A start marked
/// braid.start_in_pipeline on a stage's results is issued in that stage's
/// code right after the action completing their means and the sends that
/// follow that action (what the other stages wait for goes first).
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
  // (Tag 32767 is braid_rt_program_pp_transfer_f32's, after the pipeline.)
  if (m * numChunks * 3 > 32767)
    return op.emitOpError()
           << "runs " << m << " micro-batches of " << numChunks
           << " chunks: more transfers than message tags (32767)";

  Value mask = l.i64(l.module.pipelineMask);
  Value stage = emitc::CallOpaqueOp::create(b, loc, b.getI64Type(),
                                            "braid_rt_program_pp_stage",
                                            ValueRange{mask})
                    .getResult(0);
  // Each mean is allocated on the stage computing it only (broadcasting it
  // later makes it every stage's again).
  SmallVector<Value> means;
  for (auto [r, v] : llvm::zip(op.getResults(), ret->getOperands())) {
    if (l.module.reuseBuffers)
      l.allocationStage = plan.stages[plan.producer[v].first];
    means.push_back(l.result(r));
  }
  l.allocationStage = -1;
  std::vector<EarlyStart> early;
  if (failed(lowerEarlyStarts(op, l, early)))
    return failure();

  for (int64_t r = 0; r < numRanks; ++r) {
    Value cond = emitc::CmpOp::create(b, loc, b.getI1Type(),
                                      emitc::CmpPredicate::eq, stage, l.i64(r));
    auto ifOp = emitc::IfOp::create(b, loc, cond); // then: a yield
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.getThenRegion().front().getTerminator());
    // This stage's buffers: other stages' may share memory with them. Each
    // lives from the action that computes it (receives: from the start) to
    // its last use; what is sent, until the transfers' wait at the end.
    l.allocationStage = r;
    l.subPosition = 0;
    constexpr int64_t atEnd = FunctionLowering::kOpPositions - 1;

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
      l.useAt(bufferOf(mb, v), atEnd);
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
    // The means of the results this stage computes: micro-batch k is added
    // as soon as it and those before it are computed (the sums keep
    // micro-batch order), so that its buffer dies there.
    SmallVector<int64_t> nextMean(means.size(), 0);
    auto addMeans = [&]() {
      for (auto [k, v] : llvm::enumerate(ret->getOperands())) {
        if (plan.stages[plan.producer[v].first] != r)
          continue;
        while (nextMean[k] < m && available.count(keyOf(nextMean[k], v))) {
          Value buffer = have.find(keyOf(nextMean[k], v))->second;
          l.useAt(buffer, l.subPosition);
          l.call("braid_rt_program_accumulate_mean_f32",
                 {means[k], buffer, l.i64(l.countOf(v)), l.i64(nextMean[k]),
                  l.i64(m)});
          ++nextMean[k];
        }
      }
    };
    // The early starts of this stage whose means are complete, here: in
    // flight while the stage runs its remaining actions. Every rank of a
    // start's group runs this stage's code, so they issue it in one order.
    auto issueEarlyStarts = [&]() {
      for (EarlyStart &s : early)
        if (s.stage == r && !s.code.empty() &&
            llvm::all_of(s.results,
                         [&](int64_t k) { return nextMean[k] == m; })) {
          for (Operation *e : s.code)
            e->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
          s.code.clear();
        }
    };
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
        l.useAt(found->second, l.subPosition);
        args.push_back(found->second);
      }
      for (Value res : call.getResults()) {
        args.push_back(bufferOf(mb, res));
        available.insert(keyOf(mb, res));
      }
      l.call(getEmittedFunctionName(call.getCallee()), args);
      addMeans();
      return success();
    };

    // Early starts due after a compute action are issued after the sends
    // that follow it: a send carries what another stage waits for, while a
    // start (its bucket's copy and MPI's start call) only begins a transfer
    // that is waited for after the pipeline.
    bool startsDue = false;
    for (auto [i, a] : llvm::enumerate(plan.parsed[r])) {
      l.subPosition = 1 + i;
      if (a.kind != "send" && startsDue) {
        issueEarlyStarts();
        startsDue = false;
      }
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
      startsDue = true;
    }
    // After the schedule: the W results other stages' deferred pieces read,
    // those this stage's read, its deferred pieces.
    for (auto [from, to, mb, v] : late)
      if (from == r)
        send(mb, v, to, tagOf(mb, plan.producer[v].first, 'W'));
    if (startsDue)
      issueEarlyStarts();
    waitReceives("recv tied weight gradients", lateReceives);
    for (auto [mb, chunk] : deferred[r]) {
      ++l.subPosition;
      int64_t local = llvm::find(plan.localChunks[r], chunk) -
                      plan.localChunks[r].begin();
      l.call("braid_rt_program_trace_begin",
             {l.text(("W" + Twine(mb) + "." + Twine(local) + " (deferred)")
                         .str()),
              l.text("pipeline")});
      if (failed(compute(mb, chunk, 'W', true)))
        return failure();
      l.call("braid_rt_program_trace_end", {});
      issueEarlyStarts();
    }
    // Every micro-batch of the results this stage computes is in a mean.
    for (auto [k, v] : llvm::enumerate(ret->getOperands()))
      if (plan.stages[plan.producer[v].first] == r && nextMean[k] < m)
        return op.emitOpError() << "rank " << r << " never computes "
                                << "micro-batch " << nextMean[k]
                                << " of a result of @" << fn.getName();
  }
  l.allocationStage = -1;
  l.subPosition = -1;
  // Each mean stays on its stage: what follows is placed by StagePlacement.
  l.call("braid_rt_program_pp_wait_all", {l.whereText()});
  return success();
}

void mlir::braid::lowering::populatePipelineLowerings(LoweringTable &t) {
  t.add<PipelineOp>(lowerPipeline);
}
