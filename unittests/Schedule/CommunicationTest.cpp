//===- CommunicationTest.cpp - Inserted sends and receives never deadlock -===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "gtest/gtest.h"

#include <random>

using namespace mlir::braid::sched;

namespace {

/// A random valid compute order: a random topological order of the
/// F -> F -> ... -> B -> B -> ... -> W dependency graph of every
/// micro-batch, each pass appended to its rank's list as it is picked.
Schedule makeRandomOrder(int p, int m, int v, Placement placement, bool split,
                         std::mt19937 &rng) {
  Schedule s("random", p, m, v, placement);
  int numStages = s.getNumStages();
  // Per micro-batch: how far its forward and backward have got.
  std::vector<int> forwardNext(m, 0), backwardNext(m, numStages - 1);
  std::vector<std::vector<int>> weightsPending(m);
  while (true) {
    std::vector<std::pair<int, int>> choices; // (micro-batch, 0/1/2)
    for (int mb = 0; mb < m; ++mb) {
      if (forwardNext[mb] < numStages)
        choices.push_back({mb, 0});
      else if (backwardNext[mb] >= 0)
        choices.push_back({mb, 1});
      if (!weightsPending[mb].empty())
        choices.push_back({mb, 2});
    }
    if (choices.empty())
      break;
    auto [mb, what] = choices[std::uniform_int_distribution<size_t>(
        0, choices.size() - 1)(rng)];
    if (what == 0) {
      auto [rank, chunk] = s.getRankAndChunk(forwardNext[mb]++);
      s.ranks[rank].push_back(Action::forward(mb, chunk));
    } else if (what == 1) {
      int stage = backwardNext[mb]--;
      auto [rank, chunk] = s.getRankAndChunk(stage);
      if (split) {
        s.ranks[rank].push_back(Action::backward(mb, chunk));
        weightsPending[mb].push_back(stage);
      } else {
        s.ranks[rank].push_back(Action::fullBackward(mb, chunk));
      }
    } else {
      size_t k = std::uniform_int_distribution<size_t>(
          0, weightsPending[mb].size() - 1)(rng);
      auto [rank, chunk] = s.getRankAndChunk(weightsPending[mb][k]);
      weightsPending[mb].erase(weightsPending[mb].begin() + k);
      s.ranks[rank].push_back(Action::weight(mb, chunk));
    }
  }
  return s;
}

// Tests, on random compute orders, that the inserted communication is
// deadlock-free under blocking point-to-point and that every cross-rank
// hand-over gets exactly one send and one receive.
TEST(CommunicationTest, RandomOrdersNeverDeadlock) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    int p = 1 + trial % 5, m = 1 + (trial / 5) % 6;
    bool vshape = trial % 3 == 0;
    int v = vshape ? 2 : 1 + trial % 3;
    bool split = trial % 2 == 0;
    Schedule s = makeRandomOrder(
        p, m, v, vshape ? Placement::VShape : Placement::Interleaved, split,
        rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " p=" << p
                                      << " m=" << m << " v=" << v);
    VerifyOptions implicit;
    implicit.allowImplicitCommunication = true;
    llvm::Error err = verifySchedule(s, implicit);
    ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));

    // Random pass times, so that the transfer order differs between trials.
    CostModel costs = CostModel::uniform(p, v, 1, 1, 1, 0);
    std::uniform_real_distribution<double> time(0.1, 3);
    for (std::vector<double> *times :
         {&costs.forward, &costs.backward, &costs.weight, &costs.comm})
      for (double &t : *times)
        t = time(rng);
    ASSERT_FALSE(static_cast<bool>(insertCommunication(s, &costs)));
    err = verifySchedule(s);
    ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));

    int sends = 0, recvs = 0, handOvers = 0;
    for (int stage = 0; stage + 1 < s.getNumStages(); ++stage)
      handOvers +=
          s.getRankAndChunk(stage).first != s.getRankAndChunk(stage + 1).first;
    for (const std::vector<Action> &actions : s.ranks)
      for (const Action &a : actions) {
        sends += a.kind == ActionKind::Send;
        recvs += a.kind == ActionKind::Recv;
      }
    EXPECT_EQ(sends, 2 * m * handOvers);
    EXPECT_EQ(recvs, sends);
  }
}

// Tests that communication is inserted once only.
TEST(CommunicationTest, RejectsSecondInsertion) {
  Schedule s = build1F1B(2, 2);
  ASSERT_FALSE(static_cast<bool>(insertCommunication(s)));
  llvm::Error err = insertCommunication(s);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "schedule already has sends and receives; insert them once");
  EXPECT_EQ(s.withoutCommunication().ranks, build1F1B(2, 2).ranks);
}

// Tests that zero-length passes still get a valid order.
TEST(CommunicationTest, ZeroLengthPasses) {
  Schedule s = buildZBH1(3, 6);
  CostModel costs = CostModel::uniform(3, 1, 1, 0, 0, 0);
  ASSERT_FALSE(static_cast<bool>(insertCommunication(s, &costs)));
  llvm::Error err = verifySchedule(s);
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
}

} // namespace
