//===- GeneratorTest.cpp - Every generator verifies; Table 2 bubbles ------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <set>
#include <string>
#include <tuple>

using namespace mlir::braid::sched;

namespace {

/// p in {2, 3, 4, 8} and, for each, m in {1, p-1, p, 2p, 3p+1} (p - 1 and 1
/// coincide for p = 2 and are tested once).
std::vector<std::pair<int, int>> getSizes() {
  std::vector<std::pair<int, int>> sizes;
  for (int p : {2, 3, 4, 8}) {
    std::set<int> ms = {1, p - 1, p, 2 * p, 3 * p + 1};
    for (int m : ms)
      sizes.push_back({p, m});
  }
  return sizes;
}

SimulationResult simulateUnit(const Schedule &schedule, double tf = 1,
                              double tb = 1, double tw = 1) {
  CostModel costs =
      CostModel::uniform(schedule.numRanks, schedule.numChunks, tf, tb, tw, 0);
  llvm::Expected<SimulationResult> result = simulate(schedule, costs);
  EXPECT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  return result ? *result : SimulationResult();
}

Schedule generate(ScheduleKind kind, int p, int m, int chunks = 0,
                  std::optional<CostModel> costs = std::nullopt) {
  ScheduleRequest request;
  request.kind = kind;
  request.numRanks = p;
  request.numMicrobatches = m;
  request.numChunks = chunks;
  request.costs = std::move(costs);
  llvm::Expected<Schedule> schedule = generateSchedule(request);
  EXPECT_TRUE(static_cast<bool>(schedule))
      << llvm::toString(schedule.takeError());
  return schedule ? std::move(*schedule) : Schedule();
}

using Case = std::tuple<ScheduleKind, std::pair<int, int>>;

class EveryGeneratorTest : public ::testing::TestWithParam<Case> {};

// Tests that each generator's schedule, with its sends and receives, passes
// the verifier (dependencies, matching, no deadlock under blocking P2P) for
// every size in the grid.
TEST_P(EveryGeneratorTest, PassesVerifier) {
  auto [kind, size] = GetParam();
  auto [p, m] = size;
  ScheduleRequest request;
  request.kind = kind;
  request.numRanks = p;
  request.numMicrobatches = m;
  llvm::Expected<Schedule> schedule = generateSchedule(request);
  if (kind == ScheduleKind::Interleaved1F1B && m % p != 0) {
    // Megatron's interleaving sends micro-batches round the ranks in groups
    // of p; other m are rejected with an explanation, not silently changed.
    ASSERT_FALSE(static_cast<bool>(schedule));
    EXPECT_NE(llvm::toString(schedule.takeError()).find("multiple of p"),
              std::string::npos);
    return;
  }
  ASSERT_TRUE(static_cast<bool>(schedule))
      << llvm::toString(schedule.takeError());
  EXPECT_TRUE(schedule->hasCommunication() || p == 1);
  llvm::Error err = verifySchedule(*schedule);
  EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));

  // Every micro-batch is computed: p*v stages * m micro-batches * passes.
  int compute = 0;
  for (const std::vector<Action> &actions : schedule->ranks)
    for (const Action &a : actions)
      compute += a.isCompute();
  bool split = kind == ScheduleKind::ZBH1 || kind == ScheduleKind::ZBH2 ||
               kind == ScheduleKind::ZBV || kind == ScheduleKind::Auto;
  EXPECT_EQ(compute, schedule->getNumStages() * m * (split ? 3 : 2));

  // The order must also hold when the pass times differ from the ones the
  // communication was placed with.
  CostModel skewed = CostModel::uniform(p, schedule->numChunks, 3, 2, 1, 0.5);
  skewed.forward.back() *= 2;
  llvm::Expected<SimulationResult> sim = simulate(*schedule, skewed);
  EXPECT_TRUE(static_cast<bool>(sim)) << llvm::toString(sim.takeError());
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  auto [kind, size] = info.param;
  std::string name = getScheduleKindName(kind).str();
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return llvm::formatv("{0}_p{1}_m{2}", name, size.first, size.second);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, EveryGeneratorTest,
    ::testing::Combine(::testing::ValuesIn(getAllScheduleKinds()),
                       ::testing::ValuesIn(getSizes())),
    caseName);

// Tests the bubbles of Table 2 of Qi et al. with T_F = T_B = T_W = 1 and no
// transfer cost, and with unequal times (3, 2, 1) where the formulas differ.
// They describe the steady state, which needs m >= p (1F1B, ZB-H1) and
// m >= 2p (ZB-H2: its warm-up is 2p - 1 forwards long).
TEST(GeneratorTest, BubblesMatchTable2) {
  for (auto [tf, tb, tw] :
       {std::tuple<double, double, double>{1, 1, 1}, {3, 2, 1}, {2, 2, 1}}) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {p, 2 * p, 3 * p + 1}) {
        SCOPED_TRACE(
            llvm::formatv("p={0} m={1} tf={2} tb={3} tw={4}", p, m, tf, tb, tw)
                .str());
        SimulationResult oneF =
            simulateUnit(generate(ScheduleKind::OneFOneB, p, m), tf, tb, tw);
        EXPECT_DOUBLE_EQ(oneF.getBubbleTime(), (p - 1) * (tf + tb + tw));
        SimulationResult h1 =
            simulateUnit(generate(ScheduleKind::ZBH1, p, m), tf, tb, tw);
        EXPECT_DOUBLE_EQ(h1.getBubbleTime(), (p - 1) * (tf + tb - tw));
        if (m >= 2 * p) {
          SimulationResult h2 =
              simulateUnit(generate(ScheduleKind::ZBH2, p, m), tf, tb, tw);
          EXPECT_DOUBLE_EQ(h2.getBubbleTime(), (p - 1) * (tf + tb - 2 * tw));
        }
      }
    }
  }
}

// Tests the peak activation memory of Table 2: p M_B for 1F1B, ZB-H1 and
// ZB-V, 2p - 1 for ZB-H2 (once m is large enough to reach it), m for GPipe.
TEST(GeneratorTest, PeakMemoryMatchesTable2) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      SCOPED_TRACE(llvm::formatv("p={0} m={1}", p, m).str());
      EXPECT_DOUBLE_EQ(simulateUnit(generate(ScheduleKind::OneFOneB, p, m))
                           .getMaxPeakMemory(),
                       p);
      EXPECT_DOUBLE_EQ(
          simulateUnit(generate(ScheduleKind::ZBH1, p, m)).getMaxPeakMemory(),
          p);
      EXPECT_DOUBLE_EQ(
          simulateUnit(generate(ScheduleKind::GPipe, p, m)).getMaxPeakMemory(),
          m);
      if (m >= 2 * p) {
        EXPECT_DOUBLE_EQ(
            simulateUnit(generate(ScheduleKind::ZBV, p, m)).getMaxPeakMemory(),
            p);
        EXPECT_DOUBLE_EQ(
            simulateUnit(generate(ScheduleKind::ZBH2, p, m)).getMaxPeakMemory(),
            2 * p - 1);
      }
      // Below that the memory is bounded by what exists.
      EXPECT_LE(
          simulateUnit(generate(ScheduleKind::ZBV, p, m)).getMaxPeakMemory(),
          p);
    }
  }
}

// Tests that ZB-V has no bubble when F, B and W take equally long, and that
// interleaved 1F1B divides 1F1B's bubble by v.
TEST(GeneratorTest, ZBVAndInterleavedBubbles) {
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p}) {
      SCOPED_TRACE(llvm::formatv("p={0} m={1}", p, m).str());
      EXPECT_NEAR(
          simulateUnit(generate(ScheduleKind::ZBV, p, m)).getBubbleTime(), 0,
          1e-9);
      for (int v : {2, 3}) {
        SimulationResult sim = simulateUnit(
            generate(ScheduleKind::Interleaved1F1B, p, m, v), 3, 2, 1);
        EXPECT_NEAR(sim.getBubbleTime(), (p - 1) * 6.0 / v, 1e-9);
      }
    }
  }
}

// Tests the placements: interleaved stage c*p + r, V-shape r and 2p-1-r.
TEST(GeneratorTest, Placement) {
  Schedule interleaved = generate(ScheduleKind::Interleaved1F1B, 4, 8, 3);
  EXPECT_EQ(interleaved.getStage(1, 2), 9);
  EXPECT_EQ(interleaved.getRankAndChunk(9), std::make_pair(1, 2));
  Schedule v = generate(ScheduleKind::ZBV, 4, 8);
  EXPECT_EQ(v.getStage(1, 0), 1);
  EXPECT_EQ(v.getStage(1, 1), 6);
  EXPECT_EQ(v.getRankAndChunk(6), std::make_pair(1, 1));
  EXPECT_EQ(v.getRankAndChunk(3), std::make_pair(3, 0));
  EXPECT_EQ(v.getRankAndChunk(4), std::make_pair(3, 1));
  // The bottom of the V stays on rank 3: nothing is sent from chunk 0 of
  // rank 3 to its own chunk 1.
  for (const Action &a : v.ranks[3])
    if (a.kind == ActionKind::Send && a.payload == Payload::Activation)
      EXPECT_EQ(a.chunk, 1);
}

// Tests the argument checks of generateSchedule.
TEST(GeneratorTest, RejectsBadRequests) {
  auto message = [](const ScheduleRequest &request) {
    llvm::Expected<Schedule> s = generateSchedule(request);
    return s ? std::string() : llvm::toString(s.takeError());
  };
  ScheduleRequest request;
  request.numRanks = 0;
  EXPECT_NE(message(request).find("at least 1"), std::string::npos);
  request.numRanks = 4;
  request.numMicrobatches = 0;
  EXPECT_NE(message(request).find("micro-batches"), std::string::npos);
  request.numMicrobatches = 8;
  request.numChunks = 2;
  EXPECT_NE(message(request).find("one chunk per rank"), std::string::npos);
  request.kind = ScheduleKind::ZBV;
  request.numChunks = 3;
  EXPECT_NE(message(request).find("exactly 2"), std::string::npos);
  request.kind = ScheduleKind::Interleaved1F1B;
  request.numChunks = 1;
  EXPECT_NE(message(request).find("at least 2"), std::string::npos);
  request.numChunks = 2;
  request.numMicrobatches = 6;
  EXPECT_NE(message(request).find("multiple of p"), std::string::npos);
  request.kind = ScheduleKind::OneFOneB;
  request.numChunks = 0;
  request.costs = CostModel::uniform(3, 1, 1, 1, 1, 0);
  EXPECT_NE(message(request).find("the schedule needs 4"), std::string::npos);
}

// Tests that a single rank works (no communication at all).
TEST(GeneratorTest, SingleRank) {
  for (ScheduleKind kind : getAllScheduleKinds()) {
    Schedule s = generate(kind, 1, 3);
    EXPECT_FALSE(s.hasCommunication()) << getScheduleKindName(kind).str();
    llvm::Error err = verifySchedule(s);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  }
}

} // namespace
