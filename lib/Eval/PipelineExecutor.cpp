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

#include <map>

using namespace mlir;
using namespace mlir::braid;

LogicalResult
mlir::braid::runScheduledPipeline(Evaluator &evaluator, func::FuncOp fn,
                                  ArrayRef<SmallVector<Tensor>> microbatches,
                                  SmallVectorImpl<Tensor> &results) {
  auto module = fn->getParentOfType<ModuleOp>();
  auto schedule = fn->getAttrOfType<DictionaryAttr>("braid.schedule");
  if (!schedule)
    return fn.emitError() << "@" << fn.getName()
                          << " has no braid.schedule (run "
                             "braid-pipeline-outline and "
                             "braid-pipeline-schedule)";
  int64_t m = schedule.getAs<IntegerAttr>("microbatches").getInt();
  if (m != (int64_t)microbatches.size())
    return fn.emitError() << "the schedule of @" << fn.getName() << " runs "
                          << m << " micro-batches, given "
                          << microbatches.size();
  auto ranks = schedule.getAs<ArrayAttr>("ranks");
  int numRanks = ranks.size();

  // The driver: which call computes each piece, and each value's piece.
  Block &body = fn.getBody().front();
  std::map<std::pair<int64_t, char>, func::CallOp> piece;
  DenseMap<Value, std::pair<int64_t, char>> producer;
  DenseMap<Operation *, std::pair<int64_t, char>> callKey;
  for (Operation &op : body.without_terminator()) {
    auto call = dyn_cast<func::CallOp>(op);
    auto callee = call ? module.lookupSymbol<func::FuncOp>(call.getCallee())
                       : func::FuncOp();
    auto chunk =
        callee ? callee->getAttrOfType<IntegerAttr>("braid.chunk") : nullptr;
    auto phase =
        callee ? callee->getAttrOfType<StringAttr>("braid.phase") : nullptr;
    if (!chunk || !phase)
      return op.emitOpError("is not a call of an outlined piece; pipelines run "
                            "functions made by braid-pipeline-outline");
    std::pair<int64_t, char> key{chunk.getInt(), phase.getValue()[0]};
    piece[key] = call;
    callKey[call] = key;
    for (Value r : call.getResults())
      producer[r] = key;
  }
  auto forward = module.lookupSymbol<func::FuncOp>(
      fn.getName().drop_back(StringRef("_grad").size()));
  auto stages =
      forward ? forward->getAttrOfType<DenseI64ArrayAttr>("braid.chunk_stages")
              : nullptr;
  if (!stages)
    return fn.emitError("no braid.chunk_stages on the forward "
                        "function");
  // Rank r's local chunk j is its j-th model chunk.
  std::vector<std::vector<int64_t>> localChunks(numRanks);
  for (auto [c, r] : llvm::enumerate(stages.asArrayRef())) {
    if (r >= numRanks)
      return fn.emitError()
             << "chunk " << c << " is on stage " << r
             << ", but the schedule has " << numRanks << " ranks";
    localChunks[r].push_back(c);
  }
  auto rankOf = [&](int64_t chunk) { return stages[chunk]; };

  // (micro-batch, value)
  using Key = std::pair<int64_t, const void *>;
  auto key = [](int64_t mb, Value v) {
    return Key{mb, v.getAsOpaquePointer()};
  };
  std::vector<std::map<Key, Tensor>> store(numRanks);
  std::map<Key, Tensor> weightGrads;
  // In flight: (from, to, payload, micro-batch, model chunk) -> values.
  std::map<std::tuple<int, int, std::string, int64_t, int64_t>,
           std::vector<std::pair<Value, Tensor>>>
      wire;
  auto lookup = [&](int rank, int64_t mb, Value v,
                    bool &ready) -> const Tensor * {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return &microbatches[mb][arg.getArgNumber()];
    if (producer.lookup(v).second == 'W') {
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
      auto actions = cast<ArrayAttr>(ranks[r]);
      while (ok && next[r] < actions.size()) {
        StringRef text = cast<StringAttr>(actions[next[r]]).getValue();
        SmallVector<StringRef> words;
        text.split(words, ' ');
        bool done = true;
        auto parseMbChunk = [&](StringRef s, int64_t &mb, int64_t &local) {
          auto [a, b] = s.split('.');
          return !a.getAsInteger(10, mb) && !b.getAsInteger(10, local) &&
                 mb >= 0 && mb < m && local >= 0 &&
                 local < (int64_t)localChunks[r].size();
        };
        int64_t mb = 0, local = 0;
        // "send activation 3.0 to rank 1", "recv gradient 3.1 from rank 0"
        if (words.size() == 6 && (words[0] == "send" || words[0] == "recv")) {
          int peer = 0;
          if (!parseMbChunk(words[2], mb, local) ||
              words[5].getAsInteger(10, peer) || peer < 0 || peer >= numRanks)
            return fn.emitError()
                   << "bad action '" << text << "' in braid.schedule";
          int64_t chunk = localChunks[r][local];
          char phase = words[1] == "activation" ? 'F' : 'B';
          if (words[0] == "send") {
            // Everything of this piece that a chunk on `peer` uses.
            std::vector<std::pair<Value, Tensor>> payload;
            auto it = piece.find({chunk, phase});
            if (it != piece.end())
              for (Value v : it->second.getResults()) {
                bool needed = llvm::any_of(v.getUsers(), [&](Operation *u) {
                  auto user = callKey.find(u);
                  return user != callKey.end() &&
                         rankOf(user->second.first) == peer;
                });
                auto found = store[r].find(key(mb, v));
                if (needed && found != store[r].end())
                  payload.push_back({v, found->second});
              }
            wire[{r, peer, words[1].str(), mb, chunk}] = std::move(payload);
          } else {
            // The sender names its own chunk: the neighbour of ours.
            int64_t from = phase == 'F' ? chunk - 1 : chunk + 1;
            auto it = wire.find({peer, r, words[1].str(), mb, from});
            if (it == wire.end()) {
              done = false;
            } else {
              for (auto &[v, t] : it->second)
                store[r][key(mb, v)] = t;
              wire.erase(it);
            }
          }
        } else {
          StringRef kind = text.take_while([](char c) { return isalpha(c); });
          if (!parseMbChunk(text.drop_front(kind.size()), mb, local) ||
              !llvm::is_contained({"F", "B", "W", "BW"}, kind))
            return fn.emitError()
                   << "bad action '" << text << "' in braid.schedule";
          int64_t chunk = localChunks[r][local];
          if (kind == "BW")
            ok = compute(r, mb, chunk, 'B') && compute(r, mb, chunk, 'W');
          else
            ok = compute(r, mb, chunk, kind[0]);
        }
        if (!done)
          break;
        ++next[r];
        progress = true;
      }
      if (next[r] < cast<ArrayAttr>(ranks[r]).size())
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
        if (next[r] < cast<ArrayAttr>(ranks[r]).size())
          diag
              << " rank " << r << " waits at '"
              << cast<StringAttr>(cast<ArrayAttr>(ranks[r])[next[r]]).getValue()
              << "';";
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
  Operation *ret = body.getTerminator();
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
