//===- PipelineExecutor.cpp - Running a schedule on simulated ranks
//--------===//
//
// Each simulated rank keeps the values it computed or received, per
// micro-batch. A send packs what the peer's chunks use of the piece just
// run; a recv unpacks it. Parameter gradients that cross ranks (a tied
// embedding's sum over two stages) are read once produced, as the step-end
// reduction of a real pipeline would provide them: such W pieces run after
// the schedule instead of stalling their rank.
//
//===----------------------------------------------------------------------===//

#include "braid/Eval/PipelineExecutor.h"

#include "braid/Dialect/Braid/Utils/PipelineDriver.h"

#include <map>

using namespace mlir;
using namespace mlir::braid;

LogicalResult
mlir::braid::runScheduledPipeline(Evaluator &evaluator, func::FuncOp fn,
                                  ArrayRef<SmallVector<Tensor>> microbatches,
                                  SmallVectorImpl<Tensor> &results) {
  auto module = fn->getParentOfType<ModuleOp>();
  FailureOr<PipelineDriver> read = PipelineDriver::read(fn);
  if (failed(read))
    return failure();
  const PipelineDriver &driver = *read;
  int64_t m = driver.microbatches;
  if (m != (int64_t)microbatches.size())
    return fn.emitError() << "the schedule of @" << fn.getName() << " runs "
                          << m << " micro-batches, given "
                          << microbatches.size();
  int numRanks = driver.getNumRanks();
  const auto &piece = driver.pieces;
  const auto &producer = driver.producer;
  auto rankOf = [&](int64_t chunk) { return driver.stages[chunk]; };

  // (micro-batch, value)
  using Key = std::pair<int64_t, const void *>;
  auto key = [](int64_t mb, Value v) {
    return Key{mb, v.getAsOpaquePointer()};
  };
  std::vector<std::map<Key, Tensor>> store(numRanks);
  std::map<Key, Tensor> weightGrads;
  // In flight: (from, to, phase, micro-batch, model chunk) -> values.
  std::map<std::tuple<int, int, char, int64_t, int64_t>,
           std::vector<std::pair<Value, Tensor>>>
      wire;
  auto lookup = [&](int rank, int64_t mb, Value v,
                    bool &ready) -> const Tensor * {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return &microbatches[mb][arg.getArgNumber()];
    if (driver.isProducedByW(v)) {
      auto it = weightGrads.find(key(mb, v));
      ready = it != weightGrads.end();
      return ready ? &it->second : nullptr;
    }
    auto it = store[rank].find(key(mb, v));
    return it == store[rank].end() ? nullptr : &it->second;
  };
  struct Deferred {
    int rank;
    int64_t mb, chunk;
  };
  std::vector<Deferred> deferred;
  // Runs piece (chunk, phase) of `mb` on `rank` (or defers it); false on
  // an error, which it has reported.
  auto compute = [&](int rank, int64_t mb, int64_t chunk, char phase) -> bool {
    auto it = piece.find({chunk, phase});
    if (it == piece.end())
      return true; // nothing of this phase in this chunk
    func::CallOp call = it->second;
    SmallVector<Tensor> args;
    for (Value v : call.getOperands()) {
      bool ready = true;
      const Tensor *t = lookup(rank, mb, v, ready);
      if (!ready) {
        // Only W reads other ranks' W results (a tied parameter's
        // gradient sum): it runs after the schedule, as the step-end
        // reduction would, instead of stalling its rank.
        deferred.push_back({rank, mb, chunk});
        return true;
      }
      if (!t) {
        call.emitOpError() << "rank " << rank << " runs " << phase << mb
                           << " of chunk " << chunk
                           << " without an input it neither computed nor "
                              "received (the schedule misses a transfer)";
        return false;
      }
      args.push_back(*t);
    }
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    FailureOr<SmallVector<Tensor>> out = evaluator.call(callee, args);
    if (failed(out))
      return false;
    for (auto [r, t] : llvm::zip(call.getResults(), *out))
      (phase == 'W' ? weightGrads : store[rank])[key(mb, r)] = t;
    return true;
  };

  std::vector<size_t> next(numRanks, 0);
  bool ok = true;
  for (;;) {
    bool progress = false, finished = true;
    for (int r = 0; r < numRanks && ok; ++r) {
      while (ok && next[r] < driver.actions[r].size()) {
        const sched::Action &action = driver.actions[r][next[r]];
        bool done = true;
        int64_t mb = action.microbatch;
        int64_t chunk = driver.getChunk(r, action.chunk);
        if (action.isCommunication()) {
          int peer = action.peer;
          char phase = action.payload == sched::Payload::Activation ? 'F' : 'B';
          if (action.kind == sched::ActionKind::Send) {
            // Everything of this piece that a chunk on `peer` uses.
            std::vector<std::pair<Value, Tensor>> payload;
            auto it = piece.find({chunk, phase});
            if (it != piece.end())
              for (Value v : func::CallOp(it->second).getResults()) {
                auto found = store[r].find(key(mb, v));
                if (driver.isUsedOn(v, peer) && found != store[r].end())
                  payload.push_back({v, found->second});
              }
            wire[{r, peer, phase, mb, chunk}] = std::move(payload);
          } else {
            // The sender names its own chunk: the neighbour of ours.
            int64_t from = phase == 'F' ? chunk - 1 : chunk + 1;
            auto it = wire.find({peer, r, phase, mb, from});
            if (it == wire.end()) {
              done = false;
            } else {
              for (auto &[v, t] : it->second)
                store[r][key(mb, v)] = t;
              wire.erase(it);
            }
          }
        } else if (action.kind == sched::ActionKind::FullBackward) {
          ok = compute(r, mb, chunk, 'B') && compute(r, mb, chunk, 'W');
        } else {
          ok = compute(r, mb, chunk,
                       sched::getActionKindName(action.kind).front());
        }
        if (!done)
          break;
        ++next[r];
        progress = true;
      }
      if (next[r] < driver.actions[r].size())
        finished = false;
    }
    if (!ok)
      return failure();
    if (finished)
      break;
    if (!progress) {
      InFlightDiagnostic diag = fn.emitError()
                                << "the pipeline ranks deadlock:";
      for (int r = 0; r < numRanks; ++r)
        if (next[r] < driver.actions[r].size())
          diag << " rank " << r << " waits at '"
               << sched::formatAction(driver.actions[r][next[r]]) << "';";
      return diag;
    }
  }

  // Deferred W pieces, each once its inputs exist.
  while (!deferred.empty()) {
    std::vector<Deferred> waiting = std::move(deferred);
    deferred.clear();
    for (const Deferred &d : waiting)
      if (!compute(d.rank, d.mb, d.chunk, 'W'))
        return failure();
    if (deferred.size() == waiting.size())
      return fn.emitError("weight-gradient pieces wait for "
                          "each other's results");
  }

  // Means over micro-batches of the gradient function's results.
  Operation *ret = fn.getBody().front().getTerminator();
  SmallVector<Tensor> sums;
  for (int64_t mb = 0; mb < m; ++mb) {
    SmallVector<Tensor> values;
    for (Value v : ret->getOperands()) {
      bool ready = true;
      int rank = isa<BlockArgument>(v) ? 0 : rankOf(producer.lookup(v).first);
      const Tensor *t = lookup(rank, mb, v, ready);
      if (!t)
        return ret->emitOpError("a result was never computed");
      values.push_back(*t);
    }
    accumulateMean(sums, values, mb, m);
  }
  results.append(sums.begin(), sums.end());
  return success();
}
