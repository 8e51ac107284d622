//===- SimulatorTest.cpp - Timelines, cost, bubble rate, memory -----------===//

#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Generators.h"

#include "gtest/gtest.h"

using namespace mlir::braid::sched;

namespace {

SimulationResult run(const Schedule &s, const CostModel &costs,
                     MemoryModel memory = {}) {
  llvm::Expected<SimulationResult> result = simulate(s, costs, memory);
  EXPECT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  return result ? *result : SimulationResult();
}

// Tests a timeline worked out by hand: 1F1B, p = 2, m = 1, F = 2, B = 3,
// W = 1, one transfer = 0.5.
//   rank 0: F0 [0, 2]                               BW0 [9, 13]
//   rank 1:           F0 [2.5, 4.5] BW0 [4.5, 8.5]
// (each hand-over waits one transfer, 0.5).
TEST(SimulatorTest, HandComputedTimeline) {
  Schedule s = build1F1B(2, 1);
  ASSERT_FALSE(static_cast<bool>(insertCommunication(s)));
  CostModel costs = CostModel::uniform(2, 1, 2, 3, 1, 0.5);
  SimulationResult r = run(s, costs);
  auto timeOf = [&](int rank, ActionKind kind) {
    for (auto [i, a] : llvm::enumerate(s.ranks[rank]))
      if (a.kind == kind)
        return r.timeline[rank][i];
    return TimedAction{-1, -1};
  };
  EXPECT_DOUBLE_EQ(timeOf(0, ActionKind::Forward).start, 0);
  EXPECT_DOUBLE_EQ(timeOf(0, ActionKind::Forward).end, 2);
  EXPECT_DOUBLE_EQ(timeOf(1, ActionKind::Forward).start, 2.5);
  EXPECT_DOUBLE_EQ(timeOf(1, ActionKind::FullBackward).start, 4.5);
  EXPECT_DOUBLE_EQ(timeOf(1, ActionKind::FullBackward).end, 8.5);
  EXPECT_DOUBLE_EQ(timeOf(0, ActionKind::FullBackward).start, 9);
  EXPECT_DOUBLE_EQ(timeOf(0, ActionKind::FullBackward).end, 13);
  EXPECT_DOUBLE_EQ(r.makespan, 13);
  // Rank 0 runs from 0 to 13, rank 1 from 2.5 to 8.5.
  EXPECT_DOUBLE_EQ(r.cost, 13);
  EXPECT_DOUBLE_EQ(r.rankWork[0], 6);
  EXPECT_DOUBLE_EQ(r.bubbleRate, 7.0 / 13);
  EXPECT_DOUBLE_EQ(r.getBubbleTime(), 7);
}

// Tests that the cost is the largest stage execution time, not the
// makespan: ZB-H2's stages start one F apart and have no idle time.
TEST(SimulatorTest, StaggeredStartIsNotBubble) {
  Schedule s = buildZBH2(4, 8);
  SimulationResult r = run(s, CostModel::uniform(4, 1, 1, 1, 1, 0));
  EXPECT_DOUBLE_EQ(r.cost, 24);
  EXPECT_DOUBLE_EQ(r.makespan, 27);
  EXPECT_DOUBLE_EQ(r.bubbleRate, 0);
  EXPECT_DOUBLE_EQ(r.rankStart[3], 3);
}

// Tests per-stage times: a slow last stage dominates 1F1B's steady state.
TEST(SimulatorTest, PerStageCosts) {
  Schedule s = build1F1B(2, 4);
  CostModel costs = CostModel::uniform(2, 1, 1, 1, 1, 0);
  costs.forward[1] = 2;
  costs.backward[1] = 2;
  SimulationResult r = run(s, costs);
  // Rank 1 is busy 4 * (2 + 3) = 20 from its start at 1; rank 0 waits
  // for each gradient.
  EXPECT_DOUBLE_EQ(r.rankWork[1], 20);
  EXPECT_DOUBLE_EQ(r.getRankTime(1), 20);
  EXPECT_DOUBLE_EQ(r.makespan, 1 + 20 + 2);
  EXPECT_DOUBLE_EQ(r.cost, r.getRankTime(0));
  // The bubble rate counts the busiest rank's work.
  EXPECT_DOUBLE_EQ(r.bubbleRate, (r.cost - 20) / r.cost);
}

// Tests peak memory in both accountings on one rank: F0 B0 F1 B1 W0 W1.
TEST(SimulatorTest, PeakMemory) {
  Schedule s("hand", 1, 2);
  s.ranks[0] = {Action::forward(0),  Action::backward(0), Action::forward(1),
                Action::backward(1), Action::weight(0),   Action::weight(1)};
  CostModel costs = CostModel::uniform(1, 1, 1, 1, 1, 0);
  EXPECT_DOUBLE_EQ(run(s, costs).peakMemory[0], 2);
  MemoryModel paper;
  paper.weightFraction = 0.25;
  EXPECT_DOUBLE_EQ(run(s, costs, paper).peakMemory[0], 1.25);
  // Interleaved chunks hold 1/v of a micro-batch each.
  Schedule i = *buildInterleaved1F1B(2, 2, 2);
  SimulationResult r = run(i, CostModel::uniform(2, 2, 1, 1, 1, 0));
  EXPECT_DOUBLE_EQ(r.peakMemory[0], 2); // GPipe-like when m == p.
}

// Tests that a chunk-to-chunk hand-over on the same rank (the bottom of
// ZB-V's V) costs no transfer time.
TEST(SimulatorTest, SameRankHandOverIsFree) {
  Schedule s = buildZBV(1, 1);
  SimulationResult r = run(s, CostModel::uniform(1, 2, 2, 2, 2, 100));
  EXPECT_DOUBLE_EQ(r.makespan, 6);
}

// Tests ranks sharing cores against timelines worked out by hand: 1F1B,
// p = 2, m = 2, F = 1, B = 1, W = 1 (BW = 2), no transfer time, one core.
//   t 0-1   rank 0 F0 alone (rank 1 waits for it): full speed
//   t 1-3   rank 0 F1 and rank 1 F0 together: half speed each
//   t 3-5   rank 1 BW0 alone (rank 0 waits for its gradient)
//   t 5-7   rank 0 BW0 and rank 1 F1 together: F1 ends, BW0 half done
//   t 7-9   rank 0 BW0 and rank 1 BW1 together: BW0 ends, BW1 half done
//   t 9-10  rank 1 BW1 alone; t 10-12 rank 0 BW1 alone
// One core runs all 12 units of work; the plain simulation's 9 assumes a
// core per rank.
TEST(SimulatorTest, CoreSharing) {
  Schedule s = build1F1B(2, 2);
  CostModel costs = CostModel::uniform(2, 1, 1, 1, 1, 0);
  CoreSharing one;
  one.cores = 1;
  llvm::Expected<SimulationResult> r = simulate(s, costs, {}, one);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(run(s, costs).makespan, 9);
  EXPECT_DOUBLE_EQ(r->makespan, 12);
  EXPECT_DOUBLE_EQ(r->timeline[1][0].end, 3); // rank 1 F0
  EXPECT_DOUBLE_EQ(r->timeline[0][2].end, 9); // rank 0 BW0
  EXPECT_DOUBLE_EQ(r->rankWork[0], 6);        // work is the plain one
  // Two replicas of the pipeline on two cores run as one on one core.
  CoreSharing two;
  two.cores = 2;
  two.replicas = 2;
  EXPECT_DOUBLE_EQ(simulate(s, costs, {}, two)->makespan, 12);
  // As many cores as ranks: no sharing, the plain timeline.
  CoreSharing enough;
  enough.cores = 2;
  EXPECT_FALSE(enough.isShared(2));
  EXPECT_DOUBLE_EQ(simulate(s, costs, {}, enough)->makespan, 9);
  // Half of each F idle (a collective's wait): it takes its time alone and
  // leaves the core to the other rank.
  //   t 0-1    rank 0 F0: compute 0.5, idle 0.5
  //   t 1-2.5  rank 0 F1, rank 1 F0: compute at half speed to 2, idle
  //   t 2.5-4.5 rank 1 BW0 alone
  //   t 4.5-6  rank 0 BW0 with rank 1 F1 (compute to 5.5, idle to 6):
  //            BW0 has 1 left
  //   t 6-8    BW0 with rank 1 BW1: BW0 ends, BW1 has 1 left
  //   t 8-9    BW1 alone; t 9-11 rank 0 BW1 alone
  one.forwardIdle = {0.5, 0.5};
  r = simulate(s, costs, {}, one);
  ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  EXPECT_DOUBLE_EQ(r->timeline[1][0].end, 2.5);
  EXPECT_DOUBLE_EQ(r->makespan, 11);
  one.forwardIdle = {0.5};
  r = simulate(s, costs, {}, one);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(llvm::toString(r.takeError()),
            "core sharing has 1 idle times, the schedule needs 2");
}

// Tests that a schedule that waits for data nobody produces is reported.
TEST(SimulatorTest, ReportsStuckSchedules) {
  Schedule s("hand", 2, 1);
  s.ranks[0] = {Action::fullBackward(0), Action::forward(0)};
  s.ranks[1] = {Action::forward(0), Action::fullBackward(0)};
  llvm::Expected<SimulationResult> r =
      simulate(s, CostModel::uniform(2, 1, 1, 1, 1, 0));
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(llvm::toString(r.takeError()),
            "rank 0 action 0 (BW0.0) needs the output of stage 0 on the same "
            "rank, which comes later or never");
}

} // namespace
