//===- Communication.cpp - Deadlock-free placement of sends and recvs -----===//
//
// A compute order says nothing about when data moves between ranks. This
// file adds one send after every F or B whose consumer lives on another
// rank and one receive before that consumer.
//
// The order matters: with blocking point-to-point (a send returns only when
// the receive is posted, as MPI may and NCCL does), two ranks that both send
// to each other first hang. We give every transfer a key, the time it starts
// when the schedule runs (then the sending rank and action index, so keys
// are unique), and put the sends and receives of every rank in key order.
// Then the pending transfer with the smallest key always has both sides at
// their heads, so some rank can always move: no deadlock, whatever the real
// pass times turn out to be. The verifier checks it again.
//
// Receives go as late as the key order allows (just before their consumer or
// the next later send), so a blocking receive waits as little as possible.
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir::braid::sched;

namespace {
struct Transfer {
  // Ordering key.
  double time;
  int sender;
  int senderIndex;
  // Payload and endpoints.
  int receiver;
  Payload payload;
  int microbatch;
  int senderChunk;
  int receiverChunk;
  int consumerIndex;
};
} // namespace

llvm::Error mlir::braid::sched::insertCommunication(Schedule &schedule,
                                                    const CostModel *costs) {
  if (schedule.hasCommunication())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "schedule already has sends and receives; insert them once");
  int p = schedule.numRanks, numStages = schedule.getNumStages();

  // The keys only need the order in which passes end, so any positive times
  // do; clamp zero-length passes so that a pass always ends after it starts.
  CostModel timing =
      costs ? *costs : CostModel::uniform(p, schedule.numChunks, 1, 1, 1, 0);
  double largest = 1;
  for (const std::vector<double> *times :
       {&timing.forward, &timing.backward, &timing.weight})
    for (double t : *times)
      largest = std::max(largest, t);
  for (std::vector<double> *times :
       {&timing.forward, &timing.backward, &timing.weight})
    for (double &t : *times)
      t = std::max(t, 1e-6 * largest);
  llvm::Expected<SimulationResult> sim = simulate(schedule, timing);
  if (!sim)
    return sim.takeError();

  // Where each (micro-batch, chunk)'s F and backward sit on their rank.
  std::vector<std::map<std::tuple<int, int, bool>, int>> index(p);
  for (int r = 0; r < p; ++r)
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      if (a.kind == ActionKind::Forward)
        index[r][{a.microbatch, a.chunk, false}] = i;
      else if (a.kind == ActionKind::Backward ||
               a.kind == ActionKind::FullBackward)
        index[r][{a.microbatch, a.chunk, true}] = i;
    }

  std::vector<Transfer> transfers;
  for (int r = 0; r < p; ++r) {
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      bool isForward = a.kind == ActionKind::Forward;
      if (!isForward && a.kind != ActionKind::Backward &&
          a.kind != ActionKind::FullBackward)
        continue;
      int stage = schedule.getStage(r, a.chunk);
      int consumerStage = isForward ? stage + 1 : stage - 1;
      if (consumerStage < 0 || consumerStage >= numStages)
        continue;
      auto [receiver, receiverChunk] = schedule.getRankAndChunk(consumerStage);
      if (receiver == r)
        continue;
      auto it = index[receiver].find({a.microbatch, receiverChunk, !isForward});
      if (it == index[receiver].end())
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("rank {0} has no {1} of micro-batch {2} chunk {3} "
                          "to consume what rank {4} sends",
                          receiver, isForward ? "F" : "backward", a.microbatch,
                          receiverChunk, r));
      transfers.push_back(
          Transfer{sim->timeline[r][i].end, r, static_cast<int>(i), receiver,
                   isForward ? Payload::Activation : Payload::Gradient,
                   a.microbatch, a.chunk, receiverChunk, it->second});
    }
  }
  llvm::sort(transfers, [](const Transfer &a, const Transfer &b) {
    return std::tie(a.time, a.sender, a.senderIndex) <
           std::tie(b.time, b.sender, b.senderIndex);
  });

  // Per rank: the send that follows each action, the receive each action
  // consumes (at most one of each), and the receives in key order.
  std::vector<std::map<int, int>> sendAfter(p), recvFor(p);
  std::vector<std::vector<int>> recvs(p);
  for (auto [k, t] : llvm::enumerate(transfers)) {
    sendAfter[t.sender][t.senderIndex] = k;
    recvFor[t.receiver][t.consumerIndex] = k;
    recvs[t.receiver].push_back(k);
  }

  auto recvAction = [&](int k) {
    const Transfer &t = transfers[k];
    return Action::recv(t.payload, t.microbatch, t.receiverChunk, t.sender);
  };
  for (int r = 0; r < p; ++r) {
    std::vector<Action> merged;
    size_t nextRecv = 0;
    // Emits every receive whose key is below `limit` (or up to and including
    // it when `inclusive`).
    auto emitRecvsUpTo = [&](int limit, bool inclusive) {
      while (nextRecv < recvs[r].size() &&
             (recvs[r][nextRecv] < limit ||
              (inclusive && recvs[r][nextRecv] == limit)))
        merged.push_back(recvAction(recvs[r][nextRecv++]));
    };
    for (auto [i, a] : llvm::enumerate(schedule.ranks[r])) {
      auto recv = recvFor[r].find(i);
      if (recv != recvFor[r].end())
        emitRecvsUpTo(recv->second, /*inclusive=*/true);
      merged.push_back(a);
      auto send = sendAfter[r].find(i);
      if (send != sendAfter[r].end()) {
        emitRecvsUpTo(send->second, /*inclusive=*/false);
        const Transfer &t = transfers[send->second];
        merged.push_back(
            Action::send(t.payload, t.microbatch, t.senderChunk, t.receiver));
      }
    }
    emitRecvsUpTo(transfers.size(), /*inclusive=*/false);
    schedule.ranks[r] = std::move(merged);
  }
  return llvm::Error::success();
}
