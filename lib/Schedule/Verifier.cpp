//===- Verifier.cpp - Dependencies, P2P matching, deadlock, memory --------===//

#include "braid/Schedule/Verifier.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir::braid::sched;

namespace {
/// A piece of data that moves between stages: the activation F(mb, stage)
/// produces, or the input gradient B(mb, stage) produces.
struct DataItem {
  Payload payload;
  int microbatch;
  int stage;
  bool operator==(const DataItem &o) const {
    return payload == o.payload && microbatch == o.microbatch &&
           stage == o.stage;
  }
  bool operator!=(const DataItem &o) const { return !(*this == o); }
};

class Verifier {
public:
  Verifier(const Schedule &schedule, const VerifyOptions &options)
      : schedule(schedule), options(options), p(schedule.numRanks),
        m(schedule.numMicrobatches), v(schedule.numChunks),
        numStages(schedule.getNumStages()) {}

  llvm::Error run();

private:
  llvm::Error checkShape();
  llvm::Error checkRoutes();
  llvm::Error checkCompleteness();
  llvm::Error checkMatching();
  llvm::Error execute();

  /// "rank 1 action 4 (F2.0): <message>".
  llvm::Error fail(int rank, int index, const llvm::Twine &message) const {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("rank {0} action {1} ({2}): {3}", rank, index,
                      formatAction(schedule.ranks[rank][index]),
                      message.str()));
  }
  static llvm::Error fail(const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  }

  /// What a send or receive of rank `rank` carries.
  DataItem getItem(int rank, const Action &a) const {
    int stage = schedule.getStage(rank, a.chunk);
    if (a.kind == ActionKind::Send)
      return {a.payload, a.microbatch, stage};
    // A receive names the consuming chunk; the data comes from the stage
    // before (activation) or after (gradient) it.
    return {a.payload, a.microbatch,
            a.payload == Payload::Activation ? stage - 1 : stage + 1};
  }
  std::string describe(const DataItem &item) const {
    return llvm::formatv("{0} of micro-batch {1} from stage {2}",
                         getPayloadName(item.payload), item.microbatch,
                         item.stage);
  }
  int getRankOf(int stage) const {
    return schedule.getRankAndChunk(stage).first;
  }
  size_t key(int stage, int mb) const { return size_t(stage) * m + mb; }

  const Schedule &schedule;
  const VerifyOptions &options;
  int p, m, v, numStages;
  bool explicitCommunication = true;

  // Execution state.
  std::vector<bool> forwardDone, backwardDone;
  /// received[r][item key]: rank r has received the item.
  std::vector<std::map<std::tuple<int, int, int>, bool>> received;
};
} // namespace

llvm::Error Verifier::checkShape() {
  if (p < 1 || m < 1 || v < 1)
    return fail(llvm::formatv("p, m and v must be at least 1 (got p = {0}, m "
                              "= {1}, v = {2})",
                              p, m, v));
  if (static_cast<int>(schedule.ranks.size()) != p)
    return fail(llvm::formatv("schedule declares {0} ranks but lists {1}", p,
                              schedule.ranks.size()));
  if (schedule.placement == Placement::VShape && v != 2)
    return fail(llvm::formatv("V-shape placement needs 2 chunks (got {0})", v));
  for (int r = 0; r < p; ++r) {
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (a.microbatch < 0 || a.microbatch >= m)
        return fail(r, i,
                    llvm::formatv("micro-batch out of range [0, {0})", m));
      if (a.chunk < 0 || a.chunk >= v)
        return fail(r, i, llvm::formatv("chunk out of range [0, {0})", v));
      if (a.isCommunication() && (a.peer < 0 || a.peer >= p || a.peer == r))
        return fail(r, i,
                    llvm::formatv("peer must be another rank in [0, {0})", p));
    }
  }
  return llvm::Error::success();
}

llvm::Error Verifier::checkRoutes() {
  // Every send goes to, and every receive comes from, the rank that holds the
  // neighbouring stage.
  for (int r = 0; r < p; ++r) {
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (!a.isCommunication())
        continue;
      int stage = schedule.getStage(r, a.chunk);
      bool toNext =
          (a.kind == ActionKind::Send) == (a.payload == Payload::Activation);
      int other = toNext ? stage + 1 : stage - 1;
      if (other < 0 || other >= numStages)
        return fail(r, i,
                    llvm::formatv("stage {0} has no {1} neighbour", stage,
                                  toNext ? "next" : "previous"));
      int otherRank = getRankOf(other);
      if (otherRank != a.peer)
        return fail(
            r, i,
            llvm::formatv("stage {0}'s neighbour, stage {1}, is on rank "
                          "{2}, not rank {3}",
                          stage, other, otherRank, a.peer));
    }
  }
  return llvm::Error::success();
}

llvm::Error Verifier::checkCompleteness() {
  for (int r = 0; r < p; ++r) {
    // Per (micro-batch, chunk): counts of F, B, W, BW and where the first
    // duplicate is.
    std::vector<std::array<int, 4>> counts(m * v, {0, 0, 0, 0});
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (!a.isCompute())
        continue;
      int kind = static_cast<int>(a.kind);
      int &c = counts[a.microbatch * v + a.chunk][kind];
      if (++c > 1)
        return fail(r, i, "appears twice");
    }
    for (int mb = 0; mb < m; ++mb) {
      for (int c = 0; c < v; ++c) {
        const std::array<int, 4> &n = counts[mb * v + c];
        auto where = [&] {
          return llvm::formatv("rank {0}: micro-batch {1} chunk {2} (stage "
                               "{3})",
                               r, mb, c, schedule.getStage(r, c))
              .str();
        };
        if (n[0] == 0)
          return fail(where() + " has no F");
        if (n[3] == 1 && (n[1] || n[2]))
          return fail(where() + " has a full backward and also B or W");
        if (n[3] == 1)
          continue;
        if (n[1] == 0 && n[2] == 0)
          return fail(where() + " has no backward (B and W, or BW)");
        if (n[1] == 0)
          return fail(where() + " has a W but no B");
        if (n[2] == 0)
          return fail(where() + " has a B but no W");
      }
    }
  }
  return llvm::Error::success();
}

llvm::Error Verifier::checkMatching() {
  // Point-to-point messages between two ranks arrive in the order they were
  // sent, so the k-th send from r to q must carry what q's k-th receive from
  // r expects. Sends and receives are listed per pair in one pass over each
  // rank, and only a mismatch looks further: linear in the actions.
  std::vector<std::map<int, std::vector<int>>> sendsTo(p), recvsFrom(p);
  for (int r = 0; r < p; ++r)
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (a.kind == ActionKind::Send)
        sendsTo[r][a.peer].push_back(i);
      else if (a.kind == ActionKind::Recv)
        recvsFrom[r][a.peer].push_back(i);
    }
  static const std::vector<int> none;
  auto listed = [](const std::map<int, std::vector<int>> &lists, int peer)
      -> const std::vector<int> & {
    auto it = lists.find(peer);
    return it == lists.end() ? none : it->second;
  };
  // The pairs that exchange anything, in (sender, receiver) order.
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < p; ++r) {
    for (const auto &to : sendsTo[r])
      pairs.insert({r, to.first});
    for (const auto &from : recvsFrom[r])
      pairs.insert({from.first, r});
  }
  for (const std::pair<int, int> &pair : pairs) {
    int r = pair.first, q = pair.second;
    const std::vector<int> &sends = listed(sendsTo[r], q);
    const std::vector<int> &recvs = listed(recvsFrom[q], r);
    for (size_t k = 0; k < sends.size(); ++k) {
      DataItem sent = getItem(r, schedule.ranks[r][sends[k]]);
      std::optional<DataItem> expected;
      if (k < recvs.size())
        expected = getItem(q, schedule.ranks[q][recvs[k]]);
      if (expected == sent)
        continue;
      bool anywhere = llvm::any_of(recvs, [&](int j) {
        return getItem(q, schedule.ranks[q][j]) == sent;
      });
      if (!anywhere || !expected)
        return fail(r, sends[k],
                    llvm::formatv("rank {0} has no matching recv", q));
      return fail(r, sends[k],
                  llvm::formatv("send #{0} from rank {1} to rank {2} "
                                "carries the {3}, but rank {2}'s recv #{0} "
                                "from rank {1} (action {4}) expects the "
                                "{5}: sends and recvs are out of order",
                                k, r, q, describe(sent), recvs[k],
                                describe(*expected)));
    }
    if (recvs.size() > sends.size())
      return fail(q, recvs[sends.size()],
                  llvm::formatv("rank {0} never sends it", r));
  }
  return llvm::Error::success();
}

llvm::Error Verifier::execute() {
  forwardDone.assign(numStages * m, false);
  backwardDone.assign(numStages * m, false);
  received.assign(p, {});
  std::vector<size_t> next(p, 0);
  std::vector<double> memoryNow(p, 0);

  auto isReceived = [&](int r, const DataItem &item) {
    return received[r].count(
        {static_cast<int>(item.payload), item.microbatch, item.stage});
  };
  auto isProduced = [&](const DataItem &item) {
    return item.payload == Payload::Activation
               ? forwardDone[key(item.stage, item.microbatch)]
               : backwardDone[key(item.stage, item.microbatch)];
  };

  // Whether rank r may use `item` now. Local data must have been computed
  // earlier on this rank; remote data must have been received (or, without
  // explicit communication, computed by its rank: then `wait` is set when it
  // has not been yet).
  auto checkInput = [&](int r, int i, const DataItem &item,
                        bool &wait) -> llvm::Error {
    int from = getRankOf(item.stage);
    const char *what =
        item.payload == Payload::Activation ? "the F" : "the backward";
    if (from == r) {
      if (!isProduced(item))
        return fail(r, i,
                    llvm::formatv("needs {0} of micro-batch {1} on stage {2}, "
                                  "which this rank runs later or never",
                                  what, item.microbatch, item.stage));
      return llvm::Error::success();
    }
    if (!explicitCommunication) {
      wait = !isProduced(item);
      return llvm::Error::success();
    }
    if (!isReceived(r, item))
      return fail(r, i,
                  llvm::formatv("uses the {0} before any recv delivers it "
                                "from rank {1}",
                                describe(item), from));
    return llvm::Error::success();
  };

  // Runs compute action i of rank r; `wait` is set if it must wait.
  auto runCompute = [&](int r, int i, bool &wait) -> llvm::Error {
    const Action &a = schedule.ranks[r][i];
    int stage = schedule.getStage(r, a.chunk);
    size_t k = key(stage, a.microbatch);
    switch (a.kind) {
    case ActionKind::Forward:
      if (stage > 0)
        if (llvm::Error err = checkInput(
                r, i, {Payload::Activation, a.microbatch, stage - 1}, wait))
          return err;
      break;
    case ActionKind::Backward:
    case ActionKind::FullBackward:
      if (!forwardDone[k])
        return fail(r, i, "backward before its F");
      if (stage + 1 < numStages)
        if (llvm::Error err = checkInput(
                r, i, {Payload::Gradient, a.microbatch, stage + 1}, wait))
          return err;
      break;
    case ActionKind::Weight:
      if (!forwardDone[k])
        return fail(r, i, "W before its F");
      if (!backwardDone[k])
        return fail(r, i, "W before its B");
      break;
    default:
      break;
    }
    if (wait)
      return llvm::Error::success();
    if (a.kind == ActionKind::Forward)
      forwardDone[k] = true;
    else if (a.kind != ActionKind::Weight)
      backwardDone[k] = true;
    memoryNow[r] += options.memory.getDelta(a.kind, v);
    if (options.memoryLimit && memoryNow[r] > *options.memoryLimit + 1e-9)
      return fail(r, i,
                  llvm::formatv("activation memory reaches {0} micro-batches, "
                                "above the limit of {1}",
                                formatNumber(memoryNow[r], 4),
                                formatNumber(*options.memoryLimit, 4)));
    return llvm::Error::success();
  };

  // Blocking semantics: a send and its receive complete together, when both
  // ranks have reached them.
  auto tryRendezvous = [&](int r, bool &matched) -> llvm::Error {
    const Action &a = schedule.ranks[r][next[r]];
    int q = a.peer;
    if (next[q] >= schedule.ranks[q].size())
      return llvm::Error::success();
    const Action &b = schedule.ranks[q][next[q]];
    if (b.peer != r || !b.isCommunication() || b.kind == a.kind)
      return llvm::Error::success();
    int sender = a.kind == ActionKind::Send ? r : q;
    int receiver = a.kind == ActionKind::Send ? q : r;
    DataItem item = getItem(sender, schedule.ranks[sender][next[sender]]);
    if (!isProduced(item))
      return fail(sender, next[sender],
                  "sends data this rank has not "
                  "computed yet");
    received[receiver][{static_cast<int>(item.payload), item.microbatch,
                        item.stage}] = true;
    ++next[r];
    ++next[q];
    matched = true;
    return llvm::Error::success();
  };

  auto isDone = [&](int r) { return next[r] >= schedule.ranks[r].size(); };
  // Sweeps alternate direction, as in the simulator: activations move to
  // higher ranks and gradients to lower ones, each in one sweep.
  for (bool down = false;; down = !down) {
    bool progressed = false;
    for (int i = 0; i < p; ++i) {
      int r = down ? p - 1 - i : i;
      while (!isDone(r)) {
        const Action &a = schedule.ranks[r][next[r]];
        if (a.isCompute()) {
          bool wait = false;
          if (llvm::Error err = runCompute(r, next[r], wait))
            return err;
          if (wait)
            break;
          ++next[r];
          progressed = true;
          continue;
        }
        bool matched = false;
        if (llvm::Error err = tryRendezvous(r, matched))
          return err;
        if (!matched)
          break;
        progressed = true;
      }
    }
    bool allDone = true;
    for (int r = 0; r < p; ++r)
      allDone &= isDone(r);
    if (allDone)
      return llvm::Error::success();
    if (progressed)
      continue;

    // Nobody can move: describe the wait of the first blocked rank and whom
    // it waits for.
    for (int r = 0; r < p; ++r) {
      if (isDone(r))
        continue;
      const Action &a = schedule.ranks[r][next[r]];
      int q = a.isCommunication()
                  ? a.peer
                  : getRankOf(a.kind == ActionKind::Forward
                                  ? schedule.getStage(r, a.chunk) - 1
                                  : schedule.getStage(r, a.chunk) + 1);
      std::string other =
          isDone(q)
              ? llvm::formatv("rank {0}, which has finished", q).str()
              : llvm::formatv("rank {0}, blocked at action {1} ({2})", q,
                              next[q], formatAction(schedule.ranks[q][next[q]]))
                    .str();
      return fail(r, next[r], "deadlock: waits for " + other);
    }
  }
}

llvm::Error Verifier::run() {
  if (llvm::Error err = checkShape())
    return err;
  explicitCommunication =
      !options.allowImplicitCommunication || schedule.hasCommunication();
  if (llvm::Error err = checkRoutes())
    return err;
  if (llvm::Error err = checkCompleteness())
    return err;
  if (llvm::Error err = checkMatching())
    return err;
  return execute();
}

llvm::Error mlir::braid::sched::verifySchedule(const Schedule &schedule,
                                               const VerifyOptions &options) {
  return Verifier(schedule, options).run();
}
