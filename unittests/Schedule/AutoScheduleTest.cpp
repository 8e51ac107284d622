//===- AutoScheduleTest.cpp - The automatic zero-bubble scheduler ---------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

using namespace mlir::braid::sched;

namespace {

struct Outcome {
  Schedule schedule;
  SimulationResult result;
};

Outcome runAuto(const CostModel &costs, int m, double limit,
                MemoryModel memory = {}) {
  AutoScheduleOptions options;
  options.memoryLimit = limit;
  options.memory = memory;
  llvm::Expected<Schedule> s = buildAutoZeroBubble(costs, m, options);
  EXPECT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  if (!s)
    return {};
  EXPECT_FALSE(static_cast<bool>(insertCommunication(*s, &costs)));
  VerifyOptions verify;
  verify.memoryLimit = limit;
  verify.memory = memory;
  llvm::Error err = verifySchedule(*s, verify);
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  llvm::Expected<SimulationResult> r = simulate(*s, costs, memory);
  EXPECT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
  return {std::move(*s), r ? *r : SimulationResult()};
}

double bubbleOf(const Schedule &s, const CostModel &costs) {
  llvm::Expected<SimulationResult> r = simulate(s, costs);
  EXPECT_TRUE(static_cast<bool>(r));
  return r ? r->getBubbleTime() : -1;
}

// Tests that the memory limit holds and that the search is at least as
// good as the handcrafted schedules that fit the same limit: ZB-H1 at p,
// ZB-H2 at 2p - 1, with unit times and with unequal ones plus transfers.
TEST(AutoScheduleTest, MatchesOrBeatsHandcrafted) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {1, p, 2 * p, 3 * p + 1}) {
      for (auto [tf, tb, tw, tc] :
           {std::tuple<double, double, double, double>{1, 1, 1, 0},
            {3, 2, 1, 0.2}}) {
        SCOPED_TRACE(llvm::formatv("p={0} m={1} times {2}/{3}/{4}/{5}", p, m,
                                   tf, tb, tw, tc)
                         .str());
        CostModel costs = CostModel::uniform(p, 1, tf, tb, tw, tc);
        Outcome atP = runAuto(costs, m, p);
        EXPECT_LE(atP.result.getMaxPeakMemory(), p);
        EXPECT_LE(atP.result.getBubbleTime(),
                  bubbleOf(buildZBH1(p, m), costs) + 1e-9);
        Outcome at2P = runAuto(costs, m, 2 * p - 1);
        EXPECT_LE(at2P.result.getBubbleTime(),
                  bubbleOf(buildZBH2(p, m), costs) + 1e-9);
      }
    }
  }
}

// Tests that with enough memory and equal pass times the bubble vanishes,
// the automatic counterpart of ZB-H2.
TEST(AutoScheduleTest, ZeroBubbleWithEnoughMemory) {
  for (int p : {2, 4, 8}) {
    CostModel costs = CostModel::uniform(p, 1, 1, 1, 1, 0);
    Outcome o = runAuto(costs, 3 * p, 2 * p);
    EXPECT_NEAR(o.result.bubbleRate, 0, 1e-12) << "p=" << p;
  }
}

// Tests the tightest limit: one activation per rank serialises each
// micro-batch's F, B and W on a rank, and is still valid.
TEST(AutoScheduleTest, LimitOfOne) {
  CostModel costs = CostModel::uniform(4, 1, 1, 1, 1, 0);
  Outcome o = runAuto(costs, 6, 1);
  EXPECT_DOUBLE_EQ(o.result.getMaxPeakMemory(), 1);
}

// Tests uneven stages: a slower last stage and per-stage transfer times.
TEST(AutoScheduleTest, UnevenStages) {
  CostModel costs = CostModel::uniform(4, 1, 1, 1, 1, 0.1);
  costs.forward[3] = 1.5;
  costs.backward[3] = 1.5;
  costs.weight[0] = 0.5;
  costs.comm = {0.1, 0.3, 0.2};
  Outcome o = runAuto(costs, 12, 4);
  Schedule oneF = build1F1B(4, 12);
  llvm::Expected<SimulationResult> base = simulate(oneF, costs);
  ASSERT_TRUE(static_cast<bool>(base));
  EXPECT_LT(o.result.cost, base->cost);
}

// Tests the paper's memory accounting: with B freeing most of the
// activation, a limit of 2p allows more deferred W passes.
TEST(AutoScheduleTest, PaperMemoryModel) {
  CostModel costs = CostModel::uniform(8, 1, 18.522, 18.086, 9.337, 0.601);
  MemoryModel paper;
  paper.weightFraction = MemoryModel::transformerWeightFraction(2304, 24, 1024);
  EXPECT_NEAR(paper.weightFraction, 73728.0 / 201216.0, 1e-12);
  Outcome strict = runAuto(costs, 24, 16);
  Outcome fine = runAuto(costs, 24, 16, paper);
  EXPECT_LT(fine.result.bubbleRate, strict.result.bubbleRate);
  // Table 5 of the paper: ZB-2p on this setting.
  EXPECT_LE(fine.result.bubbleRate, 0.0433 + 0.005);
}

// Tests that a limit below one activation is an error, not a crash.
TEST(AutoScheduleTest, RejectsTinyLimit) {
  AutoScheduleOptions options;
  options.memoryLimit = 0.5;
  llvm::Expected<Schedule> s =
      buildAutoZeroBubble(CostModel::uniform(2, 1, 1, 1, 1, 0), 4, options);
  ASSERT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(llvm::toString(s.takeError()),
            "memory limit 0.5 is below one micro-batch activation; no "
            "forward can run");
}

} // namespace
