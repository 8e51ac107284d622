//===- PlanCostTest.cpp - Invariants of plan costs ------------------------===//
//
// Properties any correct cost model has, on the GPT of GptModel.h and a
// made-up device: tensor parallelism divides each rank's matmul work, a
// schedule's in-flight micro-batches set activation memory, ZeRO divides
// what it shards, recomputation trades memory for time.
//
//===----------------------------------------------------------------------===//

#include "braid/Planner/PlanCost.h"

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Schedule/Simulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include "GptModel.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::plan;

namespace {

Hardware testHardware() {
  Hardware hw;
  hw.name = "test";
  hw.peakFlops["f32"] = 1e12;
  hw.efficiency[0] = 0.5;
  hw.efficiency[1] = 0.25;
  hw.efficiency[2] = 0.8;
  hw.memoryBandwidth = 1e11;
  hw.deviceMemory = 1e9;
  hw.workspaceBytes = 1e6;
  hw.devicesPerNode = 4;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    hw.intraNode.costs[k] = {1e-6, 1e10};
    hw.interNode.costs[k] = {1e-5, 1e9};
  }
  return hw;
}

class PlanCostTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<BraidDialect, func::FuncDialect>();
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kGpt4, &context);
    ASSERT_TRUE(module);
    llvm::Expected<ModelCost> m = extractModelCost(*module);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    costs = std::make_unique<PlanCostModel>(*m, testHardware());
  }

  PlanCost evaluate(const Plan &plan) {
    llvm::Expected<PlanCost> c = costs->evaluate(plan);
    EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
    return c ? *c : PlanCost();
  }

  MLIRContext context;
  std::unique_ptr<PlanCostModel> costs;
};

TEST_F(PlanCostTest, TensorParallelHalvesMatmulWork) {
  Plan one, two;
  two.tp = 2;
  PlanCost a = evaluate(one), b = evaluate(two);
  ASSERT_EQ(a.stages.size(), 1u);
  double m1 = a.stages[0].compute[(int)OpClass::Matmul];
  double m2 = b.stages[0].compute[(int)OpClass::Matmul];
  EXPECT_NEAR(m2, m1 / 2, 1e-12 * m1);
  EXPECT_NEAR(b.stages[0].compute[(int)OpClass::Attention],
              a.stages[0].compute[(int)OpClass::Attention] / 2, 1e-12 * m1);
  // Norms and residual adds are repeated on both ranks: more than half.
  double e1 = a.stages[0].compute[(int)OpClass::Memory];
  double e2 = b.stages[0].compute[(int)OpClass::Memory];
  EXPECT_GT(e2, e1 / 2 * 1.01);
  // Sequence parallelism divides them too.
  two.sequenceParallel = true;
  PlanCost c = evaluate(two);
  EXPECT_NEAR(c.stages[0].compute[(int)OpClass::Memory], e1 / 2, 1e-9 * e1);
  // tp collectives appear only with tp > 1; parameters halve (nearly).
  EXPECT_EQ(a.tpCommTime, 0);
  EXPECT_GT(b.tpCommTime, 0);
  EXPECT_LT(b.stages[0].params, a.stages[0].params / 2 * 1.05);
}

TEST_F(PlanCostTest, ActivationMemoryFollowsInFlightMicrobatches) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 8;
  plan.schedule = sched::ScheduleKind::GPipe;
  PlanCost gpipe = evaluate(plan);
  plan.schedule = sched::ScheduleKind::OneFOneB;
  PlanCost oneF = evaluate(plan);
  double act0 = gpipe.stages[0].activationBytes;
  ASSERT_GT(act0, 0);
  // GPipe keeps all 8 micro-batches; 1F1B at most p = 2 on rank 0.
  EXPECT_DOUBLE_EQ(gpipe.memory[0].activations, 8 * act0);
  EXPECT_DOUBLE_EQ(oneF.memory[0].activations, 2 * act0);
  EXPECT_DOUBLE_EQ(oneF.memory[1].activations,
                   1 * oneF.stages[1].activationBytes);
  EXPECT_GT(gpipe.getPeakMemory(), oneF.getPeakMemory());
  // The same work, so the same time but for the schedule's bubble.
  EXPECT_NEAR(gpipe.computeTime, oneF.computeTime, 1e-12);
}

TEST_F(PlanCostTest, ZeroDividesWhatItShards) {
  Plan plan;
  plan.dp = 4;
  RankMemory m[4];
  for (int z = 0; z < 4; ++z) {
    plan.zero = z;
    m[z] = evaluate(plan).memory[0];
  }
  EXPECT_DOUBLE_EQ(m[1].optimizer, m[0].optimizer / 4);
  EXPECT_DOUBLE_EQ(m[1].grads, m[0].grads);
  EXPECT_DOUBLE_EQ(m[2].grads, m[0].grads / 4);
  EXPECT_DOUBLE_EQ(m[2].params, m[0].params);
  EXPECT_DOUBLE_EQ(m[3].params, m[0].params / 4);
  // AdamW's two f32 moments: 8 bytes per parameter.
  EXPECT_DOUBLE_EQ(m[0].optimizer, 2 * m[0].params);
}

TEST_F(PlanCostTest, DataParallelReduction) {
  Plan plan;
  EXPECT_EQ(evaluate(plan).dpCommTime, 0);
  plan.dp = 4;
  PlanCost inNode = evaluate(plan);
  EXPECT_GT(inNode.dpCommTime, 0);
  // tp * dp = 8 > 4 devices per node: the group crosses nodes.
  plan.tp = 2;
  PlanCost across = evaluate(plan);
  double grads = across.stages[0].params * 4; // f32 gradients
  EXPECT_NEAR(across.dpCommTime, 6 * 1e-5 + 1.5 * grads / 1e9,
              1e-9 * across.dpCommTime);
}

TEST_F(PlanCostTest, RecomputationTradesMemoryForTime) {
  Plan plan;
  PlanCost none = evaluate(plan);
  plan.recompute = Recompute::Full;
  PlanCost full = evaluate(plan);
  EXPECT_LT(full.stages[0].activationBytes, none.stages[0].activationBytes);
  EXPECT_GT(full.stages[0].backward, none.stages[0].backward);
  EXPECT_NEAR(full.stages[0].forward, none.stages[0].forward, 1e-15);
  EXPECT_GT(full.executedFlops, full.modelFlops);
  EXPECT_DOUBLE_EQ(full.modelFlops, none.modelFlops);
}

TEST_F(PlanCostTest, StageBoundaries) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 4;
  plan.stageLayers = {3, 1};
  PlanCost c = evaluate(plan);
  EXPECT_EQ(c.stages[0].numLayers, 3);
  EXPECT_EQ(c.stages[1].firstLayer, 3);
  EXPECT_GT(c.stages[0].forward, c.stages[1].forward);
  plan.stageLayers = {3, 2};
  llvm::Error e = costs->validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e))
                .find("stage sizes sum to 5, the model has 4 layers"),
            std::string::npos);
}

TEST_F(PlanCostTest, InvalidPlans) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 3;
  plan.schedule = sched::ScheduleKind::Interleaved1F1B;
  llvm::Error e = costs->validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e))
                .find("needs micro-batches (3) to be a multiple of pp (2)"),
            std::string::npos);
  plan.microbatches = 4;
  plan.pp = 4;
  plan.chunks = 2; // 8 stages, 4 layers
  e = costs->validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("4 layers cannot fill 8 stages"),
            std::string::npos);
}

TEST_F(PlanCostTest, MoreMicrobatchesShrinkTheBubble) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 2;
  double small = evaluate(plan).bubbleRate;
  plan.microbatches = 16;
  double large = evaluate(plan).bubbleRate;
  EXPECT_GT(small, large);
  EXPECT_GT(large, 0);
}

TEST_F(PlanCostTest, CachedSchedulesAndTheAutomaticOne) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 8;
  plan.schedule = sched::ScheduleKind::ZBH1;
  PlanCost first = evaluate(plan), again = evaluate(plan);
  EXPECT_EQ(first.stepTime, again.stepTime);
  plan.schedule = sched::ScheduleKind::OneFOneB;
  PlanCost oneF = evaluate(plan);
  // The automatic scheduler searches for the shortest schedule under the
  // default memory limit (p, as 1F1B's), so it is no slower than 1F1B.
  plan.schedule = sched::ScheduleKind::Auto;
  PlanCost automatic = evaluate(plan);
  EXPECT_LE(automatic.pipelineTime, oneF.pipelineTime * (1 + 1e-9));
  // ZB-H1 fills 1F1B's bubbles with W: shorter, where stage 0's W is in
  // the schedule (without the tied embedding, see below; with it, GPT's
  // stage 0 runs its W after the schedule and ZB-H1 gains nothing on 2
  // ranks).
  EXPECT_LE(first.pipelineTime, oneF.pipelineTime * (1 + 1e-9));
  ModelCost untiedModel = costs->getModel();
  untiedModel.tiedParams = 0;
  PlanCostModel untied(untiedModel, testHardware());
  plan.schedule = sched::ScheduleKind::OneFOneB;
  llvm::Expected<PlanCost> oneFUntied = untied.evaluate(plan);
  plan.schedule = sched::ScheduleKind::ZBH1;
  llvm::Expected<PlanCost> zbUntied = untied.evaluate(plan);
  ASSERT_TRUE(oneFUntied && zbUntied);
  EXPECT_LT(zbUntied->pipelineTime, oneFUntied->pipelineTime);
}

// Ranks sharing cores (4 devices on a node, 2 computing at once): with
// every rank busy (dp), the step's compute and optimizer take twice as
// long; a pipeline takes at least the node's work over 2 devices.
TEST_F(PlanCostTest, DevicesSharingCores) {
  Hardware shared = testHardware();
  shared.concurrentDevicesPerNode = 2;
  PlanCostModel sharing(costs->getModel(), shared);
  Plan dp;
  dp.dp = 4;
  dp.microbatches = 2;
  dp.microBatchSize = 1;
  PlanCost plain = evaluate(dp);
  llvm::Expected<PlanCost> s = sharing.evaluate(dp);
  ASSERT_TRUE(bool(s));
  EXPECT_NEAR(s->pipelineTime, 2 * plain.pipelineTime, 1e-12 * s->pipelineTime);
  EXPECT_NEAR(s->optimizerTime, 2 * plain.optimizerTime,
              1e-12 * s->optimizerTime);
  EXPECT_EQ(s->dpCommTime, plain.dpCommTime);
  Plan pp;
  pp.pp = 4;
  pp.microbatches = 16;
  pp.schedule = sched::ScheduleKind::ZBH1;
  PlanCost pplain = evaluate(pp);
  llvm::Expected<PlanCost> ps = sharing.evaluate(pp);
  ASSERT_TRUE(bool(ps));
  double work = 0;
  for (const StageCost &st : pplain.stages)
    work += 16 * (st.forward + st.backward + st.weight);
  EXPECT_NEAR(ps->pipelineTime, std::max(pplain.pipelineTime, work / 2),
              1e-12 * ps->pipelineTime);
  EXPECT_GT(ps->pipelineTime, pplain.pipelineTime);
  // Two devices on the node: nothing shared.
  Plan two;
  two.dp = 2;
  llvm::Expected<PlanCost> t = sharing.evaluate(two);
  ASSERT_TRUE(bool(t));
  EXPECT_EQ(t->stepTime, evaluate(two).stepTime);
}

// GPT's wte is read by the embedding (stage 0) and the head (the last
// stage): tied. By default its partial gradients are summed after the
// pipeline (braid-pipeline-outline moves the sum there, as Megatron-LM
// reduces it); costed the other way (tiedGradientAtStepEnd off, what the
// compiled pipeline does when the sum stays in a W piece), stage 0's
// weight-gradient pieces run after the schedule, once the last rank's
// partial gradients have arrived; ZB-V holds both stages on rank 0 and runs
// them in the schedule.
TEST_F(PlanCostTest, TiedEmbeddingWeightGradientAfterTheSchedule) {
  const ModelCost &model = costs->getModel();
  EXPECT_EQ(model.tiedParams, 128.0 * 64); // wte: vocabulary x hidden
  ModelCost untiedModel = model;
  untiedModel.tiedParams = 0;
  PlanCostModel untied(untiedModel, testHardware());
  TrainingConfig deferConfig;
  deferConfig.tiedGradientAtStepEnd = false;
  PlanCostModel deferring(model, testHardware(), deferConfig);
  struct Case {
    sched::ScheduleKind kind;
    int chunks;
  } cases[] = {{sched::ScheduleKind::OneFOneB, 0},
               {sched::ScheduleKind::ZBH1, 0},
               {sched::ScheduleKind::Interleaved1F1B, 2},
               {sched::ScheduleKind::ZBV, 0}};
  for (const Case &k : cases) {
    Plan plan;
    plan.pp = 2;
    plan.microbatches = 4;
    plan.schedule = k.kind;
    plan.chunks = k.chunks;
    llvm::Expected<PlanCost> deferred = deferring.evaluate(plan);
    ASSERT_TRUE(bool(deferred));
    PlanCost tied = *deferred;
    llvm::Expected<PlanCost> free = untied.evaluate(plan);
    ASSERT_TRUE(bool(free));
    std::string name = sched::getScheduleKindName(k.kind).str();
    if (k.kind == sched::ScheduleKind::ZBV) {
      EXPECT_EQ(tied.stepTime, free->stepTime) << name;
      continue;
    }
    // The schedule without stage 0's W, then its 4 micro-batches' W on rank
    // 0 after both ranks' schedules and the 4 partials (128 x 64 floats,
    // intra-node: alpha 1 us, beta 10 GB/s).
    sched::CostModel c;
    for (const StageCost &s : tied.stages) {
      c.forward.push_back(s.forward);
      c.backward.push_back(s.backward);
      c.weight.push_back(s.weight);
    }
    c.weight[0] = 0;
    c.comm.assign(tied.stages.size() - 1, tied.ppTransferTime);
    sched::ScheduleRequest request;
    request.kind = k.kind;
    request.numRanks = 2;
    request.numMicrobatches = 4;
    request.numChunks = k.chunks;
    llvm::Expected<sched::Schedule> schedule = sched::generateSchedule(request);
    ASSERT_TRUE(bool(schedule));
    llvm::Expected<sched::SimulationResult> sim = sched::simulate(*schedule, c);
    ASSERT_TRUE(bool(sim));
    double transfer = 1e-6 + 128 * 64 * 4 / 1e10;
    double start = std::max(sim->rankEnd[0], sim->rankEnd[1] + 4 * transfer);
    double expected =
        std::max(sim->makespan, start + 4 * tied.stages[0].weight);
    EXPECT_NEAR(tied.pipelineTime, expected, 1e-12 * expected) << name;
    EXPECT_GT(tied.stepTime, free->stepTime) << name;
    // The default, Megatron-LM's way and Braid's: W in the schedule, one
    // all_reduce of the tied gradient on 2 ranks (2 alpha + bytes / beta)
    // after it.
    PlanCost end = evaluate(plan);
    EXPECT_NEAR(end.pipelineTime,
                free->pipelineTime + 2e-6 + 128 * 64 * 4 / 1e10,
                1e-12 * end.pipelineTime)
        << name;
  }
}

} // namespace
