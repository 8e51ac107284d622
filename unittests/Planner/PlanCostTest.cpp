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

#include <cmath>

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
  hw.efficiency[3] = 0.8;
  hw.efficiency[4] = 0.8;
  hw.efficiency[5] = 0.8;
  hw.efficiency[6] = 0.8;
  hw.efficiency[7] = 0.25; // the attention's gradients, as its forward
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

  /// Calls per step of the collectives `getCollectives` lists on pipeline
  /// rank `rank` (every rank where negative) over `axis`, of `kind`, for
  /// `what`.
  static double count(const PlanCost &c, int rank, llvm::StringRef axis,
                      llvm::StringRef kind, llvm::StringRef what) {
    double n = 0;
    for (const CollectiveCount &k : c.collectives)
      if ((rank < 0 || k.rank == rank) && k.axis == axis && k.kind == kind &&
          k.what == what)
        n += k.count;
    return n;
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

// TrainingConfig::precision: bf16-mixed stores the saved activations in
// 2 bytes an element, the model's state as f32 does.
TEST_F(PlanCostTest, BF16MixedHalvesSavedActivations) {
  TrainingConfig config;
  config.precision = Precision::BF16Mixed;
  PlanCostModel bf16(costs->getModel(), testHardware(), config);
  ASSERT_EQ(costs->getModel().elementBytes, 4);
  Plan flat;
  flat.microbatches = 2;
  Plan piped;
  piped.pp = 2;
  piped.microbatches = 4;
  Plan recomputed = piped;
  recomputed.recompute = Recompute::Full;
  for (const Plan &plan : {flat, piped, recomputed}) {
    PlanCost f32 = evaluate(plan);
    llvm::Expected<PlanCost> half = bf16.evaluate(plan);
    ASSERT_TRUE(bool(half)) << llvm::toString(half.takeError());
    ASSERT_EQ(half->memory.size(), f32.memory.size());
    for (size_t r = 0; r < f32.memory.size(); ++r) {
      ASSERT_GT(f32.memory[r].activations, 0);
      EXPECT_DOUBLE_EQ(half->memory[r].activations,
                       f32.memory[r].activations / 2)
          << plan.str() << " rank " << r;
      EXPECT_EQ(half->memory[r].params, f32.memory[r].params);
      EXPECT_EQ(half->memory[r].grads, f32.memory[r].grads);
      EXPECT_EQ(half->memory[r].optimizer, f32.memory[r].optimizer);
    }
    for (size_t s = 0; s < f32.stages.size(); ++s)
      EXPECT_DOUBLE_EQ(half->stages[s].activationBytes,
                       f32.stages[s].activationBytes / 2);
  }
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

// The optimizer step reads a rank's gradients twice (the norm, then AdamW)
// and reads and writes its parameters and both moments, 32 bytes per f32
// parameter with AdamW, at the optimizer class's efficiency; ZeRO-1 divides
// it over dp.
TEST_F(PlanCostTest, OptimizerStepAtItsOwnEfficiency) {
  Plan plan;
  plan.dp = 4;
  PlanCost whole = evaluate(plan);
  double params = whole.stages[0].params;
  EXPECT_NEAR(whole.optimizerTime, 32 * params / (1e11 * 0.8),
              1e-9 * whole.optimizerTime);
  plan.zero = 1;
  EXPECT_NEAR(evaluate(plan).optimizerTime, whole.optimizerTime / 4,
              1e-9 * whole.optimizerTime);
  Hardware slow = testHardware();
  slow.efficiency[(int)OpClass::Optimizer] = 0.2;
  PlanCostModel slower(costs->getModel(), slow);
  plan.zero = 0;
  llvm::Expected<PlanCost> s = slower.evaluate(plan);
  ASSERT_TRUE(bool(s));
  EXPECT_NEAR(s->optimizerTime, 4 * whole.optimizerTime,
              1e-9 * s->optimizerTime);
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
  // Without a pipeline each micro-batch's W all_reduces every layer
  // instance's gradients as one bucket, and the other tensors (wte, wpe,
  // ln_f's scale and bias) as one more: 5.
  EXPECT_NEAR(across.dpCommTime, 5 * 6 * 1e-5 + 1.5 * grads / 1e9,
              1e-9 * across.dpCommTime);
  // ... in every micro-batch.
  plan.microbatches = 3;
  EXPECT_NEAR(evaluate(plan).dpCommTime, 3 * across.dpCommTime,
              1e-9 * across.dpCommTime);
  // Megatron-LM's form: once per step, one bucket.
  TrainingConfig once;
  once.gradientReductionPerMicrobatch = false;
  PlanCostModel megatron(costs->getModel(), costs->getHardware(), once);
  llvm::Expected<PlanCost> m = megatron.evaluate(plan);
  ASSERT_TRUE(bool(m));
  EXPECT_NEAR(m->dpCommTime, 6 * 1e-5 + 1.5 * grads / 1e9,
              1e-9 * m->dpCommTime);
}

// In a pipeline the gradients are all_reduced once per step, whole under
// ZeRO-1/2 too, bucketed per chunk: the first of 2 stages of the GPT
// reduces its layers' and wpe's (1), the last its layers' and ln_f's (1)
// and the tied wte's sum (1), which it owns and updates. ZeRO-1/2 then gather
// each parameter tensor a rank updated, one all_gather per tensor (1 + 2 x
// 16 on the first, 2 x 16 + 2 + 1 on the last).
TEST_F(PlanCostTest, ZeroOneTwoGatherEachTensor) {
  Plan plan;
  plan.dp = 2;
  plan.pp = 2;
  plan.microbatches = 2;
  PlanCost z0 = evaluate(plan);
  const Hardware &hw = costs->getHardware();
  auto collective = [&](CollectiveKind k, double bytes) {
    return getCollectiveTime(hw.intraNode.get(k), k, bytes, 2);
  };
  for (const StageCost &st : z0.stages)
    EXPECT_EQ(st.paramTensors, 2 + 2 * 16);
  double tied = costs->getModel().tiedParams;
  struct {
    double params, tensors, calls;
  } owned[] = {{z0.stages[0].params - tied, 33, 1},
               {z0.stages[1].params + tied, 35, 2}};
  double reduce = 0;
  for (int r : {0, 1}) {
    auto [params, tensors, calls] = owned[r];
    reduce = std::max(reduce, calls * collective(CollectiveKind::AllReduce,
                                                 params * 4 / calls));
    EXPECT_EQ(count(z0, r, "dp", "all_reduce", "grad-bucket"), calls);
  }
  EXPECT_NEAR(z0.dpCommTime, reduce, 1e-15);
  for (int z : {1, 2}) {
    plan.zero = z;
    PlanCost c = evaluate(plan);
    double t = 0;
    for (int r : {0, 1}) {
      auto [params, tensors, calls] = owned[r];
      t = std::max(
          t, calls * collective(CollectiveKind::AllReduce, params * 4 / calls) +
                 tensors * collective(CollectiveKind::AllGather,
                                      params * 4 / tensors));
      EXPECT_EQ(count(c, r, "dp", "all_gather", "zero-gather"), tensors);
    }
    EXPECT_NEAR(c.dpCommTime, t, 1e-15) << "zero " << z;
  }
}

TEST_F(PlanCostTest, RecomputationTradesMemoryForTime) {
  Plan plan;
  PlanCost none = evaluate(plan);
  plan.recompute = Recompute::Full;
  PlanCost full = evaluate(plan);
  EXPECT_LT(full.stages[0].activationBytes, none.stages[0].activationBytes);
  EXPECT_GT(full.stages[0].backward, none.stages[0].backward);
  // F keeps only the layer's input: values it saved for B before are now
  // read only by fused elementwise ops and stay in registers, so F costs
  // no more.
  EXPECT_LE(full.stages[0].forward, none.stages[0].forward);
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

// The first stage may hold the embedding alone and the last the head
// alone (ZB-V puts both on rank 0); a middle stage of no layer runs
// nothing and is refused, as braid-pipeline-split refuses it.
TEST_F(PlanCostTest, StageOfNoLayer) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::ZBV;
  plan.stageLayers = {0, 2, 1, 1};
  PlanCost c = evaluate(plan);
  ASSERT_EQ(c.stages.size(), 4u);
  EXPECT_EQ(c.stages[0].numLayers, 0);
  EXPECT_EQ(c.stages[1].firstLayer, 0);
  // The embedding's work, less than a layer's.
  EXPECT_GT(c.stages[0].forward, 0);
  EXPECT_LT(c.stages[0].forward, c.stages[2].forward);
  // Stage 0 sends the embedding's output: as many bytes as a layer's.
  plan.stageLayers = {1, 1, 1, 1};
  PlanCost one = evaluate(plan);
  EXPECT_EQ(c.ppCommBytes, one.ppCommBytes);
  EXPECT_GT(c.ppCommBytes, 0);
  plan.stageLayers = {1, 2, 1, 0};
  PlanCost head = evaluate(plan);
  EXPECT_EQ(head.stages[3].numLayers, 0);
  EXPECT_GT(head.stages[3].forward, 0);
  // Rank 0 holds stages 0 and 3: the embedding, one layer, the head.
  EXPECT_EQ(head.stages[0].params + head.stages[3].params,
            c.stages[0].params + c.stages[3].params);
  plan.stageLayers = {1, 0, 2, 1};
  llvm::Error e = costs->validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e))
                .find("stage 1 would run nothing: only the first stage"),
            std::string::npos);
  plan.stageLayers = {2, 3, -1, 0};
  e = costs->validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e))
                .find("stage 2 has a negative layer count -1"),
            std::string::npos);
  // A model with nothing outside its layers has no stage of no layer.
  ModelCost bare = costs->getModel();
  bare.pre = SegmentCost();
  PlanCostModel bareCosts(bare, testHardware());
  plan.stageLayers = {0, 2, 1, 1};
  e = bareCosts.validate(plan);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("stage 0 would run nothing"),
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
  // A pipeline runs its schedule with the ranks computing at once sharing
  // the 2 cores (sched::CoreSharing): at least the node's work over them,
  // more while fewer ranks than cores compute (the warm-up and cool-down).
  sched::CostModel stageCosts;
  sched::CoreSharing cores;
  cores.cores = 2;
  for (const StageCost &st : pplain.stages) {
    stageCosts.forward.push_back(st.forward);
    stageCosts.backward.push_back(st.backward);
    stageCosts.weight.push_back(st.weight);
    cores.forwardIdle.push_back(st.comm[0]);
    cores.backwardIdle.push_back(st.comm[1]);
    cores.weightIdle.push_back(st.comm[2]);
  }
  stageCosts.comm.assign(3, pplain.ppTransferTime);
  sched::Schedule zbh1 = sched::buildZBH1(4, 16);
  llvm::Expected<sched::SimulationResult> onCores =
      sched::simulate(zbh1, stageCosts, {}, cores);
  llvm::Expected<sched::SimulationResult> alone =
      sched::simulate(zbh1, stageCosts);
  ASSERT_TRUE(onCores && alone);
  EXPECT_NEAR(ps->pipelineTime - pplain.pipelineTime,
              onCores->makespan - alone->makespan, 1e-12 * ps->pipelineTime);
  EXPECT_GT(ps->pipelineTime, std::max(pplain.pipelineTime, work / 2));
  // The schedule matters: 1F1B's warm-up and cool-down leave a core unused
  // longer than ZB-H1's, which fills them with W.
  pp.schedule = sched::ScheduleKind::OneFOneB;
  llvm::Expected<PlanCost> ones = sharing.evaluate(pp);
  ASSERT_TRUE(bool(ones));
  EXPECT_GT(ones->pipelineTime, ps->pipelineTime);
  // Two devices on the node: nothing shared.
  Plan two;
  two.dp = 2;
  llvm::Expected<PlanCost> t = sharing.evaluate(two);
  ASSERT_TRUE(bool(t));
  EXPECT_EQ(t->stepTime, evaluate(two).stepTime);
}

/// Kernels of every pass of the whole model, per micro-batch.
static double modelKernels(const ModelCost &model, int pass) {
  double n =
      model.pre.passes[0][pass].kernels + model.post.passes[0][pass].kernels;
  for (const SegmentCost &l : model.layers)
    n += l.passes[0][pass].kernels * l.count;
  return n;
}

/// Gradient tensors of the whole model: a repeat's instances' stacked.
static double gradientTensors(const ModelCost &model) {
  double n = model.pre.paramTensors + model.post.paramTensors;
  for (const SegmentCost &l : model.layers)
    n += l.paramTensors;
  return n;
}

// A fixed cost per kernel: F, B and W each take their kernels times it
// longer, whatever the micro-batch size, and so does the step, m times.
// W also runs the accumulation loop's 2 kernels per gradient tensor (and,
// with 3 micro-batches, a third of the copy after an odd count).
TEST_F(PlanCostTest, KernelOverhead) {
  Hardware hw = testHardware();
  hw.kernelOverhead = 1e-5;
  const ModelCost &model = costs->getModel();
  PlanCostModel withOverhead(model, hw);
  Plan plan;
  plan.microbatches = 3;
  plan.microBatchSize = 2;
  PlanCost base = evaluate(plan);
  llvm::Expected<PlanCost> o = withOverhead.evaluate(plan);
  ASSERT_TRUE(bool(o)) << llvm::toString(o.takeError());
  double f = modelKernels(model, 0), b = modelKernels(model, 1),
         w = modelKernels(model, 2) + (2 + 1.0 / 3) * gradientTensors(model);
  EXPECT_GT(f, 0);
  EXPECT_NEAR(o->stages[0].forward - base.stages[0].forward, 1e-5 * f, 1e-12);
  EXPECT_NEAR(o->stages[0].backward - base.stages[0].backward, 1e-5 * b, 1e-12);
  EXPECT_NEAR(o->stages[0].weight - base.stages[0].weight, 1e-5 * w, 1e-12);
  EXPECT_NEAR(o->stages[0].overhead, 1e-5 * (f + b + w), 1e-12);
  EXPECT_NEAR(o->overheadTime, 3e-5 * (f + b + w), 1e-12);
  EXPECT_NEAR(o->stepTime - base.stepTime, 3e-5 * (f + b + w), 1e-12);
  EXPECT_NEAR(o->computeTime - base.computeTime, 3e-5 * (f + b + w), 1e-12);
  // Half the micro-batch: half the work, the same overhead.
  plan.microBatchSize = 1;
  llvm::Expected<PlanCost> half = withOverhead.evaluate(plan);
  ASSERT_TRUE(bool(half));
  EXPECT_EQ(half->stages[0].overhead, o->stages[0].overhead);
  EXPECT_NEAR(half->stages[0].compute[(int)OpClass::Matmul],
              o->stages[0].compute[(int)OpClass::Matmul] / 2, 1e-15);
}

// A repeated layer's saved activations are copied into the repeat's stack
// in F and out of it in B (savedActivationCopies 2): each copy reads and
// writes their bytes at the memory bandwidth (a copy's rate) and is a
// kernel per saved value.
TEST_F(PlanCostTest, SavedActivationCopies) {
  Hardware hw = testHardware();
  hw.savedActivationCopies = 2;
  hw.kernelOverhead = 1e-6;
  Hardware noCopies = testHardware();
  noCopies.kernelOverhead = 1e-6;
  const ModelCost &model = costs->getModel();
  PlanCostModel with(model, hw), without(model, noCopies);
  const SegmentCost &l = model.layers[0];
  double rate = 1e11; // memcpy's bandwidth
  for (Recompute rc : {Recompute::None, Recompute::Full}) {
    Plan plan;
    plan.recompute = rc;
    plan.microBatchSize = 2; // the model's batch: its saved bytes
    llvm::Expected<PlanCost> a = without.evaluate(plan),
                             c = with.evaluate(plan);
    ASSERT_TRUE(a && c);
    double saved = l.getSavedBytes(rc, 1, false);
    double n = l.savedTensors[(int)rc];
    // 4 layers, one copy in F and one in B.
    double copy = 4 * (2 * saved / rate + n * 1e-6);
    EXPECT_NEAR(c->stages[0].forward - a->stages[0].forward, copy, 1e-15);
    EXPECT_NEAR(c->stages[0].backward - a->stages[0].backward, copy, 1e-15);
    EXPECT_EQ(c->stages[0].weight, a->stages[0].weight);
  }
  // Full recomputation keeps one value, the layer's input (b s h floats).
  EXPECT_EQ(l.savedTensors[(int)Recompute::Full], 1);
  EXPECT_GT(l.savedTensors[(int)Recompute::None], 1);
  EXPECT_EQ(model.pre.savedTensors[0], 0);
}

// Gradient accumulation as braidc's programs run it, in each micro-batch's
// W at memcpy's bandwidth: without a pipeline the loop's 5 passes over the
// rank's gradients (divided over dp under ZeRO) and 2 kernels per gradient
// tensor, and after an odd count one copy more (2 passes and a kernel per
// tensor once a step), none with one micro-batch; a pipeline stage 5
// passes over its gradients and 2 kernels per tensor.
TEST_F(PlanCostTest, GradientAccumulation) {
  Hardware hw = testHardware();
  hw.kernelOverhead = 1e-6;
  const ModelCost &model = costs->getModel();
  PlanCostModel cm(model, hw);
  double rate = 1e11; // memcpy's bandwidth
  double tensors = gradientTensors(model);
  auto accumulation = [&](const Plan &plan) {
    llvm::Expected<PlanCost> c = cm.evaluate(plan);
    EXPECT_TRUE(bool(c)) << (c ? "" : llvm::toString(c.takeError()));
    double sum = 0;
    if (c)
      for (const StageCost &st : c->stages)
        sum += st.accumulation;
    return sum;
  };
  Plan one;
  one.microBatchSize = 2;
  EXPECT_EQ(accumulation(one), 0);
  Plan loop = one;
  loop.microbatches = 4;
  double params = model.getParams();
  EXPECT_NEAR(accumulation(loop), 5 * params * 4 / rate + 2 * tensors * 1e-6,
              1e-15);
  Plan odd = one;
  odd.microbatches = 3;
  llvm::Expected<PlanCost> o3 = cm.evaluate(odd);
  ASSERT_TRUE(bool(o3));
  EXPECT_NEAR(3 * o3->stages[0].accumulation,
              (3 * 5 + 2) * params * 4 / rate + (3 * 2 + 1) * tensors * 1e-6,
              1e-15);
  // The W of each micro-batch: the step pays it m times.
  llvm::Expected<PlanCost> c = cm.evaluate(loop);
  ASSERT_TRUE(bool(c));
  EXPECT_NEAR(c->stages[0].compute[(int)OpClass::Memory] -
                  evaluate(one).stages[0].compute[(int)OpClass::Memory],
              5 * params * 4 / rate, 1e-15);
  // Under ZeRO the loop carries the rank's share of the sums.
  Plan zero = loop;
  zero.dp = 2;
  zero.microBatchSize = 1;
  zero.zero = 1;
  EXPECT_NEAR(accumulation(zero),
              5 * params / 2 * 4 / rate + 2 * tensors * 1e-6, 1e-15);
  // A pipeline: each stage its own gradients, 5 passes, 2 kernels a
  // tensor; the layers' repeat is split, a stack of each tensor per stage.
  Plan pipeline = loop;
  pipeline.pp = 2;
  ASSERT_EQ(model.layers.size(), 1u);
  EXPECT_NEAR(accumulation(pipeline),
              5 * params * 4 / rate +
                  2 * (tensors + model.layers[0].paramTensors) * 1e-6,
              1e-15);
}

// Row-wise ops (the norms) and the loss take their bytes over the memory
// bandwidth times their own class's efficiency; nothing else changes.
TEST_F(PlanCostTest, RowWiseAndLossEfficiency) {
  Hardware hw = testHardware();
  hw.efficiency[(int)OpClass::RowWise] = 0.1;
  hw.efficiency[(int)OpClass::Loss] = 0.05;
  PlanCostModel slow(costs->getModel(), hw);
  Plan plan;
  plan.microBatchSize = 2;
  PlanCost base = evaluate(plan);
  llvm::Expected<PlanCost> s = slow.evaluate(plan);
  ASSERT_TRUE(bool(s));
  const StageCost &a = base.stages[0], &c = s->stages[0];
  EXPECT_GT(a.compute[(int)OpClass::RowWise], 0);
  EXPECT_NEAR(c.compute[(int)OpClass::RowWise],
              8 * a.compute[(int)OpClass::RowWise], 1e-15);
  EXPECT_NEAR(c.compute[(int)OpClass::Loss], 16 * a.compute[(int)OpClass::Loss],
              1e-15);
  for (OpClass k : {OpClass::Matmul, OpClass::Attention, OpClass::Memory})
    EXPECT_EQ(c.compute[(int)k], a.compute[(int)k]);
  // By hand, F: the layer norms (4 layers of 2 and ln_f, each 2 b s h + 2 h
  // floats) at 0.1 of 1e11 B/s, the loss (b s V logits and b s labels
  // read, 1 float written) at 0.05; B: the loss's gradient (the logits
  // twice).
  const double b = 2, sq = 16, h = 64, V = 128;
  double norms = 9 * (2 * b * sq * h + 2 * h) * 4;
  double loss = (b * sq * V + b * sq + 1) * 4;
  double lossGrad = (2 * b * sq * V + b * sq + 1) * 4;
  const ModelCost &model = costs->getModel();
  double rowF = 0;
  for (auto [seg, n] : {std::pair<const SegmentCost *, double>{&model.pre, 1},
                        {&model.layers[0], 4},
                        {&model.post, 1}}) {
    const PassWork &f = seg->passes[0][0];
    rowF += n * (f.split[(int)OpClass::RowWise].bytes +
                 f.replicated[(int)OpClass::RowWise].bytes);
  }
  EXPECT_DOUBLE_EQ(rowF, norms);
  double rowB = 0;
  for (int p = 1; p < kNumPassKinds; ++p)
    for (const SegmentCost *seg : {&model.pre, &model.layers[0], &model.post})
      rowB += (seg == &model.layers[0] ? 4 : 1) *
              (seg->passes[0][p].split[(int)OpClass::RowWise].bytes +
               seg->passes[0][p].replicated[(int)OpClass::RowWise].bytes);
  EXPECT_NEAR(c.compute[(int)OpClass::RowWise], (norms + rowB) / 1e10, 1e-15);
  EXPECT_NEAR(c.compute[(int)OpClass::Loss], (loss + lossGrad) / 5e9, 1e-15);
}

// The attention's forward and its gradients: their products at their own
// efficiencies, plus their bytes at the kernels' streaming rates.
TEST_F(PlanCostTest, AttentionStreamingAndBackwardEfficiency) {
  Hardware hw = testHardware();
  hw.efficiency[(int)OpClass::AttentionBackward] = 0.125;
  hw.attentionBandwidth = 1e9;
  hw.attentionBackwardBandwidth = 5e8;
  PlanCostModel model(costs->getModel(), hw);
  Plan plan;
  plan.microBatchSize = 2;
  PlanCost base = evaluate(plan);
  llvm::Expected<PlanCost> c = model.evaluate(plan);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  // By hand, per layer (batch 2, sequence 16, 4 heads of 16): F's q k^T and
  // p v, 2 x 2 b s^2 h FLOPs, reading q, k, v and writing y (4 b s h
  // floats); B's three gradients, four products (twice F's), each reading
  // q, k, v, dy and writing one gradient (15 b s h floats).
  // (The cost interface adds the softmax's and its gradient's elementwise
  // FLOPs, b s h per op.)
  const double b = 2, s = 16, h = 64, layers = 4;
  const PassWork *layer = costs->getModel().layers[0].passes[0];
  double flopsF = layer[0].getFlops(OpClass::Attention);
  double flopsB = layer[1].getFlops(OpClass::AttentionBackward);
  EXPECT_EQ(flopsF, 4 * b * s * s * h + b * s * h);
  EXPECT_EQ(flopsB, 8 * b * s * s * h + 3 * b * s * h);
  double bytesF = 4 * b * s * h * 4, bytesB = 15 * b * s * h * 4;
  EXPECT_NEAR(base.stages[0].compute[(int)OpClass::Attention],
              layers * flopsF / 0.25e12, 1e-15);
  EXPECT_NEAR(c->stages[0].compute[(int)OpClass::Attention],
              layers * (flopsF / 0.25e12 + bytesF / 1e9), 1e-15);
  EXPECT_NEAR(base.stages[0].compute[(int)OpClass::AttentionBackward],
              layers * flopsB / 0.25e12, 1e-15);
  EXPECT_NEAR(c->stages[0].compute[(int)OpClass::AttentionBackward],
              layers * (flopsB / 0.125e12 + bytesB / 5e8), 1e-15);
  // In B's pass time, not F's.
  EXPECT_NEAR(c->stages[0].backward - base.stages[0].backward,
              layers * (flopsB / 0.25e12 + bytesB / 5e8), 1e-12);
  EXPECT_NEAR(c->stages[0].forward - base.stages[0].forward,
              layers * bytesF / 1e9, 1e-12);
}

// A member of a collective that needs a core held by a rank blocking every
// g seconds (at a uniformly random point of it), or preempted after L,
// waits E[min(U g, L)].
TEST(DescheduledWaitTest, ExpectedWait) {
  EXPECT_EQ(expectedDescheduledWait(0, 1e-3), 0);
  EXPECT_EQ(expectedDescheduledWait(1e-3, 0), 1e-3);
  EXPECT_NEAR(expectedDescheduledWait(1e-3, 0.5e-3), 0.25e-3, 1e-15);
  EXPECT_NEAR(expectedDescheduledWait(1e-3, 1e-3), 0.5e-3, 1e-15);
  EXPECT_NEAR(expectedDescheduledWait(1e-3, 4e-3), 1e-3 - 1e-6 / 8e-3, 1e-15);
  // Behind 3 holders of the core: 2 whole intervals, then half of one.
  EXPECT_NEAR(expectedDescheduledWait(1e-3, 0.2e-3, 3), 0.5e-3, 1e-15);
  // The cap within the last holder's interval: t = (L - a) / g of it
  // below the cap (a = 2 g = 0.8 ms, t = 0.5).
  EXPECT_NEAR(expectedDescheduledWait(1e-3, 0.4e-3, 3),
              0.8e-3 * 0.5 + 0.4e-3 * 0.125 + 0.5 * 1e-3, 1e-15);
  EXPECT_EQ(expectedDescheduledWait(1e-3, 0.6e-3, 3), 1e-3);
}

// Devices sharing cores wait for descheduled peers at a blocking collective
// only where the node's devices outside its group can hold every core; then
// each tp collective (with sp, a reduce_scatter and the all_gather after
// it together), pipeline transfer and dp collective gains the expected
// wait, with the blocking interval the plan's compute over its blocking
// points.
TEST_F(PlanCostTest, DescheduledWait) {
  Hardware shared = testHardware();
  shared.concurrentDevicesPerNode = 2;
  Hardware waiting = shared;
  waiting.descheduledWait = 1e-3;
  const ModelCost &model = costs->getModel();
  PlanCostModel plain(model, shared), slow(model, waiting);
  auto both = [&](const Plan &p) {
    llvm::Expected<PlanCost> a = plain.evaluate(p), w = slow.evaluate(p);
    EXPECT_TRUE(a && w);
    return std::make_pair(*a, *w);
  };
  // The plan's compute per micro-batch over its blocking points.
  auto interval = [](const PlanCost &c) {
    double compute = 0, points = 0;
    for (const StageCost &st : c.stages) {
      compute += st.forward + st.backward + st.weight - st.comm[0] -
                 st.comm[1] - st.comm[2];
      points += st.blockingPoints;
    }
    return compute / points;
  };
  // tp = 4: every device of the node is in the group, so a member that
  // waits yields its core to another member: no wait.
  Plan tp;
  tp.tp = 4;
  auto [t0, t1] = both(tp);
  EXPECT_EQ(t1.stepTime, t0.stepTime);
  EXPECT_EQ(slow.getDescheduledWait(tp, 4, 1e-3), 0);
  // Per micro-batch the embedding's all_reduce, 2 + 2 per layer, the
  // head's input gradient and the cross-entropy's 5 row gathers: the
  // blocking points of one stage.
  double collectives = 1 + 4 * (2 + 2) + 1 + 5;
  EXPECT_EQ(t1.stages[0].blockingPoints, collectives);
  // Without a pipeline the devices share the work but the collectives,
  // which each device spends itself (the links are calibrated on ranks
  // sharing the cores).
  const StageCost &st = t1.stages[0];
  double work = st.forward + st.backward + st.weight;
  double comm = st.comm[0] + st.comm[1] + st.comm[2];
  EXPECT_NEAR(t1.pipelineTime, (work - comm) * 4 / 2 + comm, 1e-12);
  // dp = 2 x tp = 2: each tp group leaves 2 devices, as many as the cores,
  // outside it: each tp collective and the dp all_reduce wait.
  Plan mixed;
  mixed.dp = 2;
  mixed.tp = 2;
  auto [m0, m1] = both(mixed);
  double w = expectedDescheduledWait(1e-3, interval(m0));
  EXPECT_GT(w, 0);
  EXPECT_LT(w, 1e-3);
  EXPECT_NEAR(slow.getDescheduledWait(mixed, 2, interval(m0)), w, 1e-15);
  EXPECT_NEAR(m1.stages[0].wait, w * collectives, 1e-12);
  // At the step's end the gradient norm's 11 tp sums go as one all_reduce:
  // one wait; the loss's dp sums are in the gradients' buckets.
  EXPECT_NEAR(m1.stepEndCommTime - m0.stepEndCommTime, w, 1e-12);
  EXPECT_NEAR(m1.stages[0].tpComm - m0.stages[0].tpComm, w * collectives,
              1e-12);
  // One wait per gradient bucket: the 4 layers' and the other tensors'.
  EXPECT_NEAR(m1.dpCommTime - m0.dpCommTime, 5 * w, 1e-12);
  mixed.sequenceParallel = true;
  auto [s0, s1] = both(mixed);
  EXPECT_NEAR(s1.stages[0].wait,
              expectedDescheduledWait(1e-3, interval(s0)) *
                  s1.stages[0].blockingPoints,
              1e-12);
  // With sp each all_reduce is a reduce_scatter and an all_gather, but the
  // all_gather follows its reduce_scatter across a norm, the group just
  // released together: one blocking point for the pair. W adds, per layer,
  // an all_gather of each column-parallel product's input and the
  // all_reduce of its sequence-partial gradients (the norms' and biases'),
  // and one all_reduce of those of the ops around the layers.
  const SegmentCost &layer = model.layers.front();
  ASSERT_GT(layer.tpColumnProducts, 0);
  ASSERT_GT(layer.sequencePartialParamTensors, 0);
  EXPECT_EQ(s1.stages[0].blockingPoints,
            collectives + 4 * (layer.tpColumnProducts + 1) + 1);
  // With 3 of the 4 devices computing at once, the 2 outside a group
  // cannot hold every core: no wait.
  Hardware three = waiting;
  three.concurrentDevicesPerNode = 3;
  PlanCostModel roomy(model, three);
  EXPECT_EQ(roomy.getDescheduledWait(mixed, 2, 1e-3), 0);
  // 8 devices on a node of 2 cores, groups of 2: 6 outside queue for the
  // 2 cores, 3 ahead of a member on each.
  Hardware eight = waiting;
  eight.devicesPerNode = 8;
  PlanCostModel crowded(model, eight);
  Plan big;
  big.dp = 4;
  big.tp = 2;
  EXPECT_NEAR(crowded.getDescheduledWait(big, 2, 0.1e-3),
              expectedDescheduledWait(1e-3, 0.1e-3, 3), 1e-15);
  EXPECT_NEAR(crowded.getDescheduledWait(big, 2, 0.1e-3), 0.25e-3, 1e-15);
  // dp = 4: the gradients' all_reduce spans the node: no wait.
  Plan dp;
  dp.dp = 4;
  auto [d0, d1] = both(dp);
  EXPECT_EQ(d1.dpCommTime, d0.dpCommTime);
  // pp = 4: each transfer (2 devices) waits; the blocking points are the
  // receives, 1 + 2 + 2 + 1.
  Plan pp;
  pp.pp = 4;
  pp.microbatches = 4;
  auto [p0, p1] = both(pp);
  double points = 0;
  for (const StageCost &s : p1.stages)
    points += s.blockingPoints;
  EXPECT_EQ(points, 6);
  EXPECT_NEAR(p1.ppTransferTime - p0.ppTransferTime,
              expectedDescheduledWait(1e-3, interval(p0)), 1e-12);
  EXPECT_GT(p1.pipelineTime, p0.pipelineTime);
  // Two devices on the node: they do not share cores, nothing waits.
  Plan two;
  two.tp = 2;
  auto [w0, w1] = both(two);
  EXPECT_EQ(w1.stepTime, w0.stepTime);
  // 8 ranks, dp = 2 x pp = 4 with ZeRO-1: each of the gradients'
  // all_reduces waits at the pipeline's pace (the last rank's 2: its layer's
  // and ln_f's two tensors' bucket, the tied wte); each of its 19 gathers after the
  // optimizer waits behind ranks that block at every tensor of their own
  // update (the optimizer's time over the tensors).
  Plan zero;
  zero.dp = 2;
  zero.pp = 4;
  zero.microbatches = 4;
  zero.zero = 1;
  Hardware eightNoWait = eight;
  eightNoWait.descheduledWait = 0;
  PlanCostModel calm(model, eightNoWait);
  llvm::Expected<PlanCost> z0 = calm.evaluate(zero),
                           z1 = crowded.evaluate(zero);
  ASSERT_TRUE(z0 && z1);
  double k = 16 + 2 + 1;
  double gatherWait = expectedDescheduledWait(1e-3, z1->optimizerTime / k, 3);
  double dpWait = expectedDescheduledWait(1e-3, interval(*z1), 3);
  EXPECT_GT(gatherWait, 0);
  EXPECT_LT(gatherWait, dpWait);
  EXPECT_NEAR(z1->dpCommTime - z0->dpCommTime, 2 * dpWait + k * gatherWait,
              1e-12);
}

// ZeRO-3 gathers each parameter tensor before its use in F and again each
// one a layer's B reads (its 6 weights and 2 norm scales: 4 x 8), one
// collective each, not one of the stage's parameters. Without a pipeline
// the ops around the layers run F and B in one function: B reads ln_f's
// scale and the head's wte as F gathered them. The tied wte, a vocabulary
// table that ZeRO-3 divides along the vocabulary, is read as stored by the
// lookup, which gathers the dp group's token ids instead; the head gathers
// it (so wpe, wte, 4 x 16 and ln_f's 2) (braidc's dp2 ZeRO-3 GPT with
// --bucket-mb 0, TrainingConfig::gatherBuckets off).
TEST_F(PlanCostTest, ZeroThreeGathersEachTensor) {
  Plan plan;
  plan.dp = 2;
  plan.zero = 3;
  TrainingConfig perTensor;
  perTensor.gatherBuckets = false;
  PlanCostModel tensors(costs->getModel(), testHardware(), perTensor);
  llvm::Expected<PlanCost> e = tensors.evaluate(plan);
  ASSERT_TRUE(bool(e)) << llvm::toString(e.takeError());
  PlanCost c = *e;
  const StageCost &st = c.stages[0];
  const ModelCost &model = costs->getModel();
  ASSERT_EQ(model.vocabTables.size(), 1u);
  const VocabTable &wte = model.vocabTables[0];
  double k = 1 + 1 + 4 * 16 + 2;
  double bytes = st.params * model.elementBytes;
  const Hardware &hw = costs->getHardware();
  auto gathers = [&](double calls, double bytes) {
    return calls *
           getCollectiveTime(hw.intraNode.get(CollectiveKind::AllGather),
                             CollectiveKind::AllGather, bytes / calls, 2);
  };
  double scale = double(plan.microBatchSize) / model.batch;
  double group = 2 * scale;
  double values = group * wte.lookupIdBytes;
  // F also sums the embedding lookup in the divided wte: each device looks
  // up the dp group's ids (2 x the micro-batch's embeddings).
  double lookup = getCollectiveTime(
      hw.intraNode.get(CollectiveKind::ReduceScatter),
      CollectiveKind::ReduceScatter, model.pre.paramLookupBytes * scale * 2, 2);
  EXPECT_EQ(model.pre.paramLookups, 1);
  EXPECT_NEAR(st.comm[(int)PassKind::Forward],
              gathers(k, bytes) + gathers(1, values) + lookup, 1e-15);
  EXPECT_EQ(model.layers[0].backwardParamTensors[0], 8);
  EXPECT_EQ(model.pre.backwardParamTensors[0], 0);
  EXPECT_EQ(model.post.backwardParamTensors[0], 2);
  double kb = 4 * 8;
  EXPECT_EQ(st.backwardParamTensors, kb);
  EXPECT_LT(st.backwardParams, st.params);
  EXPECT_NEAR(st.comm[(int)PassKind::Backward],
              gathers(kb, st.backwardParams * model.elementBytes), 1e-15);
  EXPECT_EQ(st.blockingPoints, k + 1 + 1 + kb);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-gather"), k);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-vocab"), 1);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-gather-b"), kb);
  // A vocabulary that dp does not divide: ZeRO-3 divides wte along the
  // hidden dimension, and F and B gather it as any other tensor.
  ModelCost odd = model;
  odd.vocabTables[0].shape[0] = 127;
  PlanCostModel oddCosts(odd, testHardware(), perTensor);
  llvm::Expected<PlanCost> o = oddCosts.evaluate(plan);
  ASSERT_TRUE(bool(o));
  EXPECT_EQ(count(*o, 0, "dp", "all_gather", "zero-gather"), k);
  EXPECT_EQ(count(*o, 0, "dp", "all_gather", "zero-vocab"), 0);
  EXPECT_EQ(count(*o, 0, "dp", "all_gather", "zero-gather-b"), kb);
}

// TrainingConfig::gatherBuckets (braidc's default, braid-bucket-gathers):
// the same bytes in fewer calls. Per layer instance F gathers its first
// layer norm's scale and bias alone (braid-zero3-prefetch starts those in
// the instance before) and its other 14 tensors in one bucket, B its first
// product's weight alone and the other 7 in one; wpe before the layers and
// ln_f's two with the head's wte after are a bucket each (a repeat ends a
// bucket); the lookup's ids as before. In a pipeline (dp2 x pp2) the last
// stage's F gathers ln_f's two and the tied wte in one bucket. braidc's
// programs: test_plan_collectives.py.
TEST_F(PlanCostTest, ZeroThreeGathersBucketed) {
  Plan plan;
  plan.dp = 2;
  plan.zero = 3;
  const ModelCost &model = costs->getModel();
  EXPECT_EQ(model.layers[0].forwardLeadParamTensors, 2);
  EXPECT_EQ(model.layers[0].forwardLeadParams, 2 * 64); // hidden 64
  EXPECT_EQ(model.layers[0].backwardLeadParamTensors[0], 1);
  auto bytes = [](const PlanCost &c, llvm::StringRef what) {
    double b = 0;
    for (const CollectiveCount &k : c.collectives)
      if (k.kind == "all_gather" && k.what == what)
        b += k.count * k.bytes;
    return b;
  };
  PlanCost c = evaluate(plan);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-gather"), 4 * 3 + 1 + 1);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-gather-b"), 4 * 2);
  EXPECT_EQ(count(c, 0, "dp", "all_gather", "zero-vocab"), 1);
  TrainingConfig perTensor;
  perTensor.gatherBuckets = false;
  llvm::Expected<PlanCost> t =
      PlanCostModel(model, testHardware(), perTensor).evaluate(plan);
  ASSERT_TRUE(bool(t));
  for (llvm::StringRef what : {"zero-gather", "zero-gather-b", "zero-vocab"})
    EXPECT_NEAR(bytes(c, what), bytes(*t, what), 1e-6 * bytes(*t, what))
        << what.str();
  EXPECT_LT(c.stages[0].comm[(int)PassKind::Forward],
            t->stages[0].comm[(int)PassKind::Forward]);
  // A layer instance's gathered parameters held at once: its workspace.
  EXPECT_EQ(c.memory[0].workspace - t->memory[0].workspace,
            model.layers[0].getRankParams(1) * model.elementBytes);
  // And copied twice: each bucket's shares packed into one buffer (a read
  // and a write of 1/dp of its bytes) and each member sliced out of the
  // gathered bucket (a read and a write of all): 2 (1 + 1/2) passes over
  // the gathered bytes, a kernel per bucket and per member; the per-tensor
  // gathers copy nothing.
  {
    const Hardware &hw = costs->getHardware();
    const StageCost &bs = c.stages[0], &ts = t->stages[0];
    double eb = model.elementBytes;
    auto beside = [](const StageCost &st, PassKind p) {
      double time = p == PassKind::Forward ? st.forward : st.backward;
      return time - st.comm[(int)p];
    };
    double fb = bs.params * eb;
    double bb = bs.backwardParams * eb;
    EXPECT_NEAR(beside(bs, PassKind::Forward) - beside(ts, PassKind::Forward),
                3 * fb / hw.memoryBandwidth +
                    (4 * 3 + 1 + 1 + bs.paramTensors) * hw.kernelOverhead,
                1e-12);
    EXPECT_NEAR(beside(bs, PassKind::Backward) - beside(ts, PassKind::Backward),
                3 * bb / hw.memoryBandwidth +
                    (4 * 2 + bs.backwardParamTensors) * hw.kernelOverhead,
                1e-12);
  }

  // Without prefetch none stays alone.
  TrainingConfig noPrefetch;
  noPrefetch.zero3Prefetch = 0;
  llvm::Expected<PlanCost> n =
      PlanCostModel(model, testHardware(), noPrefetch).evaluate(plan);
  ASSERT_TRUE(bool(n));
  EXPECT_EQ(count(*n, 0, "dp", "all_gather", "zero-gather"), 4 + 1 + 1);
  EXPECT_EQ(count(*n, 0, "dp", "all_gather", "zero-gather-b"), 4);
  // bf16-mixed: a bucket per element type, the products' working copies
  // (12 in F, 6 in B) and the norms' f32 parameters; of the first op's
  // only those no working copy stays alone (F's layer norm's two; B's first
  // product's weight is one); after the layers ln_f's two and the head's
  // working copy of wte are a bucket each.
  TrainingConfig bf16;
  bf16.precision = Precision::BF16Mixed;
  EXPECT_EQ(model.layers[0].forwardWorkingCopyTensors, 12);
  EXPECT_EQ(model.layers[0].backwardWorkingCopyTensors[0], 6);
  EXPECT_EQ(model.layers[0].backwardLeadWorkingCopyTensors[0], 1);
  llvm::Expected<PlanCost> b =
      PlanCostModel(model, testHardware(), bf16).evaluate(plan);
  ASSERT_TRUE(bool(b));
  EXPECT_EQ(count(*b, 0, "dp", "all_gather", "zero-gather"), 4 * 4 + 1 + 2);
  EXPECT_EQ(count(*b, 0, "dp", "all_gather", "zero-gather-b"), 4 * 2);

  Plan piped = plan;
  piped.pp = 2;
  piped.microbatches = 4;
  PlanCost p = evaluate(piped);
  EXPECT_EQ(count(p, 0, "dp", "all_gather", "zero-gather"), 4 * (2 * 3 + 1));
  EXPECT_EQ(count(p, 1, "dp", "all_gather", "zero-gather"), 4 * (2 * 3 + 1));
  EXPECT_EQ(count(p, 0, "dp", "all_gather", "zero-gather-b"), 4 * 2 * 2);
  EXPECT_EQ(count(p, 1, "dp", "all_gather", "zero-gather-b"), 4 * 2 * 2);
}

// Without a pipeline ZeRO-1/2/3 reduce-scatter the gradients into each
// device's share in every micro-batch, bucketed as ZeRO-0's all_reduces
// (braid-bucket-collectives): a bucket per layer instance and one of the
// tensors around the layers (4 + 1); ZeRO-3 also sums the embedding
// lookup.
TEST_F(PlanCostTest, ZeroScattersABucketPerLayer) {
  Plan plan;
  plan.dp = 2;
  plan.microbatches = 3;
  const ModelCost &model = costs->getModel();
  const Hardware &hw = costs->getHardware();
  for (int z : {1, 2, 3}) {
    plan.zero = z;
    PlanCost c = evaluate(plan);
    EXPECT_EQ(count(c, -1, "dp", "all_reduce", "grad-bucket"), 0) << z;
    EXPECT_EQ(count(c, -1, "dp", "reduce_scatter", "grad-bucket"), 3 * 5) << z;
    EXPECT_EQ(count(c, -1, "dp", "reduce_scatter", "lookup"), z == 3 ? 3 : 0);
    for (const CollectiveCount &k : c.collectives)
      if (k.what == "grad-bucket")
        EXPECT_EQ(k.bytes, c.stages[0].params * 4 / 5) << z;
  }
  PlanCost c = evaluate(plan);
  double grads = c.stages[0].params * 4;
  double t = 3 * 5 *
             getCollectiveTime(hw.intraNode.get(CollectiveKind::ReduceScatter),
                               CollectiveKind::ReduceScatter, grads / 5, 2);
  EXPECT_NEAR(c.dpCommTime, t, 1e-15);
  // Half of each gradient leaves a device; and the gathers' halves.
  EXPECT_NEAR(c.dpCommBytes,
              3 * 0.5 * grads +
                  3 * 0.5 * (c.stages[0].params + c.stages[0].backwardParams) *
                      4,
              1e-6 * grads);
  EXPECT_GT(model.tiedParams, 0);
  // Each micro-batch's W packs the 5 buckets (a concat) and the runtime
  // stages each for its reduce_scatter: 4 passes over the whole gradients
  // at memcpy's bandwidth, 2 kernels a bucket; without ZeRO, W writes into
  // the all_reduce's buckets in place.
  Hardware withOverhead = testHardware();
  withOverhead.kernelOverhead = 1e-6;
  PlanCostModel costed(model, withOverhead);
  plan.zero = 1;
  llvm::Expected<PlanCost> z1 = costed.evaluate(plan);
  plan.zero = 0;
  llvm::Expected<PlanCost> z0 = costed.evaluate(plan);
  ASSERT_TRUE(z0 && z1);
  double accumulation0 = z0->stages[0].accumulation,
         accumulation1 = z1->stages[0].accumulation;
  EXPECT_NEAR(z1->stages[0].weight - accumulation1 -
                  (z0->stages[0].weight - accumulation0),
              4 * grads / 1e11 + 2 * 5 * 1e-6, 1e-12);
}

// braidc's bucket cap (--bucket-mb, 25 MiB of f32 elements): a bucket
// larger than it is ceil(bytes / cap) reductions, a layer instance's and
// the one of the ops around the layers (wte, wpe, ln_f's two, the head's
// partial of the tied wte) alike; MPI's reduce_scatter temporaries follow
// the largest piece.
TEST_F(PlanCostTest, BucketCapSplitsLargeBuckets) {
  const ModelCost &mc = costs->getModel();
  ASSERT_EQ(mc.layers.size(), 1u);
  double n = mc.layers[0].count;
  double layer = mc.layers[0].getParams();
  double outside = mc.pre.getParams() + mc.post.getParams() + mc.tiedParams;
  EXPECT_DOUBLE_EQ(costs->getOutsideBucketParams(), outside);
  // The test GPT's buckets are far under 25 MiB: one each.
  EXPECT_EQ(costs->getGradientBuckets(1), n + 1);
  TrainingConfig capped;
  capped.bucketCapBytes = 4 * outside / 1.5; // the outside in 2 pieces
  PlanCostModel small(mc, costs->getHardware(), capped);
  double layerPieces = std::ceil(1.5 * layer / outside);
  ASSERT_GT(layerPieces, 1);
  EXPECT_EQ(small.getGradientBuckets(1), layerPieces * n + 2);
  // A rank holding half of each (tp 2, about): the outside in 1.
  EXPECT_EQ(small.getGradientBuckets(0.5),
            std::ceil(0.75 * layer / outside) * n + 1);
  Plan plan;
  plan.dp = 2;
  plan.zero = 3; // (ZeRO-1/2 add their gathers to the time)
  plan.microbatches = 3;
  llvm::Expected<PlanCost> c = small.evaluate(plan);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  double buckets = layerPieces * n + 2;
  EXPECT_EQ(count(*c, -1, "dp", "reduce_scatter", "grad-bucket"), 3 * buckets);
  double grads = c->stages[0].params * 4;
  double t =
      3 * buckets *
      getCollectiveTime(
          costs->getHardware().intraNode.get(CollectiveKind::ReduceScatter),
          CollectiveKind::ReduceScatter, grads / buckets, 2);
  EXPECT_NEAR(c->dpCommTime, t, 1e-15);
  // The largest reduce_scatter input is the cap, once on the first of 2.
  EXPECT_DOUBLE_EQ(small.getReduceScatterTemporaryBytes(plan),
                   capped.bucketCapBytes);
  // No cap: the largest bucket whole.
  capped.bucketCapBytes = 0;
  PlanCostModel uncapped(mc, costs->getHardware(), capped);
  EXPECT_EQ(uncapped.getGradientBuckets(1), n + 1);
  EXPECT_DOUBLE_EQ(uncapped.getReduceScatterTemporaryBytes(plan),
                   4 * std::max(layer, outside));
}

// With sequence parallelism each of B's all_reduces becomes a
// reduce_scatter and an all_gather (a GPT layer's 2: q, k and v's input
// gradients summed before one reduce_scatter, and the MLP fc's), and W
// gathers each column-parallel product's input again (q, k, v and fc: 4).
TEST_F(PlanCostTest, SequenceParallelWeightGathers) {
  Plan plan;
  plan.tp = 2;
  plan.sequenceParallel = true;
  PlanCost c = evaluate(plan);
  const ModelCost &model = costs->getModel();
  const Hardware &hw = costs->getHardware();
  // Costs are for the model's batch, scaled to the micro-batch.
  double scale = double(plan.microBatchSize) / model.batch;
  auto time = [&](CollectiveKind k, double bytes) {
    return getCollectiveTime(hw.intraNode.get(k), k, bytes * scale, 2);
  };
  const SegmentCost &l = model.layers[0];
  double b = l.tpCollectiveBytes;
  double rs = time(CollectiveKind::ReduceScatter, b);
  double ag = time(CollectiveKind::AllGather, b);
  // The head's W reads F's gathered input (only a repeat saves its
  // activations divided). W also sums over tp the gradients of the
  // replicated tensors applied along the sequence (each rank's covers its
  // block of it): a layer instance's 2 norms' scales and biases and 2
  // row-parallel biases as one all_reduce, ln_f's two as another
  // (bucketed; not wpe's, divided along the sequence).
  EXPECT_EQ(model.post.tpColumnProducts, 1);
  auto sum = [&](double elements) {
    return getCollectiveTime(hw.intraNode.get(CollectiveKind::AllReduce),
                             CollectiveKind::AllReduce, elements * 4, 2);
  };
  double h = 64;
  double w = 4 * 4 * ag + 4 * sum(6 * h) + sum(2 * h);
  EXPECT_NEAR(c.stages[0].comm[(int)PassKind::Weight], w, 1e-15);
  EXPECT_EQ(count(c, 0, "tp", "all_reduce", "sequence-grads"), 4 + 1);
  // The gradient norm sums over tp the squares of the divided tensors
  // (11) and of wpe, divided along the sequence: one all_reduce of 12
  // floats.
  auto normBytes = [](const PlanCost &c) {
    for (const CollectiveCount &k : c.collectives)
      if (k.what == "grad-norm" && k.axis == "tp")
        return k.bytes;
    return 0.0;
  };
  EXPECT_EQ(count(c, 0, "tp", "all_reduce", "grad-norm"), 1);
  EXPECT_EQ(normBytes(c), (11 + 1) * 4);
  double bwd =
      4 * 2 * (rs + ag) +
      time(CollectiveKind::ReduceScatter, model.post.tpCollectiveBytes) +
      time(CollectiveKind::AllGather, model.post.tpCollectiveBytes);
  EXPECT_NEAR(c.stages[0].comm[(int)PassKind::Backward], bwd, 1e-15);
  // Without it, W has no collective.
  plan.sequenceParallel = false;
  PlanCost n = evaluate(plan);
  EXPECT_EQ(n.stages[0].comm[(int)PassKind::Weight], 0);
  EXPECT_EQ(count(n, 0, "tp", "all_reduce", "sequence-grads"), 0);
  EXPECT_EQ(normBytes(n), 11 * 4);
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
    // The default, Braid's way: W in the schedule, then the first stage's
    // partial of the tied gradient sent to the last one, point to point
    // (alpha + bytes / beta; an all_reduce on 2 ranks would take 2 alpha).
    PlanCost end = evaluate(plan);
    EXPECT_NEAR(end.pipelineTime,
                free->pipelineTime + 1e-6 + 128 * 64 * 4 / 1e10,
                1e-12 * end.pipelineTime)
        << name;
  }
}

// The step's collectives beside the layers', the pipeline's and the dp
// reduction (python/tests/test_plan_collectives.py checks the counts against
// compiled programs): each at its latency, in stepEndCommTime.
TEST_F(PlanCostTest, StepEndCollectives) {
  Plan plan;
  plan.dp = 2;
  plan.tp = 2;
  plan.microbatches = 3;
  PlanCost c = evaluate(plan);
  // The gradient norm's tp sums: one float per divided tensor, the 4
  // layers' stacked (q, k, v and their biases, the projections, fc's bias:
  // 10) and wte, as one all_reduce (braid-bucket-collectives); the loss's
  // dp sum of every micro-batch goes in the bucket of the gradients of the
  // ops around the layers.
  EXPECT_EQ(count(c, 0, "tp", "all_reduce", "grad-norm"), 1);
  for (const CollectiveCount &k : c.collectives)
    if (k.what == "grad-norm" && k.axis == "tp")
      EXPECT_EQ(k.bytes, 11 * 4);
  EXPECT_EQ(count(c, 0, "dp", "all_reduce", "loss"), 0);
  EXPECT_TRUE(costs->isLossInGradientBucket(plan));
  // The vocabulary-parallel cross-entropy's 5 per-row gathers per
  // micro-batch, of one float a row from each of the 2 devices.
  const ModelCost &model = costs->getModel();
  EXPECT_EQ(count(c, 0, "tp", "all_gather", "cross-entropy"), 3 * 5);
  EXPECT_EQ(model.post.tpRowGathers, 5);
  double rows = model.post.tpRowGatherBytes / 4;
  for (const CollectiveCount &k : c.collectives)
    if (k.what == "cross-entropy")
      EXPECT_EQ(k.bytes, rows * plan.microBatchSize / model.batch * 4 * 2);
  // An all_reduce of 11 floats on 2 devices in the node: 2 alpha + 44 /
  // beta.
  EXPECT_NEAR(c.stepEndCommTime, 2e-6 + 44 / 1e10, 1e-15);
  EXPECT_NEAR(c.stepTime,
              c.pipelineTime + c.dpCommTime + c.optimizerTime +
                  c.stepEndCommTime,
              1e-15);
  // With ZeRO and no pipeline the gradients are reduce-scattered into
  // shares: the norm sums theirs over dp, one float once a step; the loss
  // is summed over dp per micro-batch (under ZeRO-3 too: the head gathers
  // its table and computes its device's rows).
  plan.tp = 1;
  plan.zero = 1;
  PlanCost z1 = evaluate(plan);
  EXPECT_FALSE(costs->isLossInGradientBucket(plan));
  EXPECT_EQ(count(z1, 0, "dp", "all_reduce", "grad-norm"), 1);
  EXPECT_EQ(count(z1, 0, "dp", "all_reduce", "loss"), 3);
  EXPECT_NEAR(z1.stepEndCommTime, (1 + 3) * (2e-6 + 4 / 1e10), 1e-15);
  // Of one micro-batch (no accumulation loop: one block), the loss's sum
  // and the norm's go as one all_reduce of 2 floats.
  Plan one = plan;
  one.microbatches = 1;
  PlanCost z1one = evaluate(one);
  EXPECT_EQ(count(z1one, 0, "dp", "all_reduce", "loss"), 0);
  EXPECT_EQ(count(z1one, 0, "dp", "all_reduce", "grad-norm"), 1);
  for (const CollectiveCount &k : z1one.collectives)
    if (k.what == "grad-norm")
      EXPECT_EQ(k.bytes, 8);
  plan.zero = 3;
  PlanCost z3 = evaluate(plan);
  EXPECT_EQ(count(z3, 0, "dp", "all_reduce", "grad-norm"), 1);
  EXPECT_EQ(count(z3, 0, "dp", "all_reduce", "loss"), 3);
  EXPECT_NEAR(z3.stepEndCommTime, (1 + 3) * (2e-6 + 4 / 1e10), 1e-15);
  plan.zero = 0;
  EXPECT_EQ(count(evaluate(plan), 0, "dp", "all_reduce", "grad-norm"), 0);
  // A pipeline: rank 0 sends rank 1, which computes the norm, its layers'
  // 16 stacked tensors' and wpe's sums of squares (wte's is summed there);
  // rank 1 broadcasts the update's scale before rank 0 updates, both get
  // the loss and the norm back, and rank 0 the updated wte.
  Plan pipe;
  pipe.pp = 2;
  pipe.microbatches = 4;
  PlanCost p = evaluate(pipe);
  EXPECT_EQ(count(p, 0, "pp", "send", "grad-norm"), 17);
  EXPECT_EQ(count(p, 1, "pp", "recv", "grad-norm"), 17);
  EXPECT_EQ(count(p, 0, "pp", "send", "tied-gradient"), 1);
  EXPECT_EQ(count(p, 1, "pp", "recv", "tied-gradient"), 1);
  EXPECT_EQ(count(p, 0, "pp", "broadcast", "update-scale"), 1);
  EXPECT_EQ(count(p, 1, "pp", "broadcast", "update-scale"), 1);
  EXPECT_EQ(count(p, 0, "pp", "broadcast", "returns"), 2);
  EXPECT_EQ(count(p, 1, "pp", "broadcast", "tied-param"), 1);
  // Rank 0's: 17 transfers of one float, three broadcasts of one and one
  // of wte (128 x 64 floats), each alpha + bytes / beta (pp - 1 = 1 step).
  EXPECT_NEAR(p.stepEndCommTime,
              17 * (1e-6 + 4 / 1e10) + 3 * (1e-6 + 4 / 1e10) +
                  (1e-6 + 128 * 64 * 4 / 1e10),
              1e-15);
  // Under ZeRO-3 on dp=2 the updated wte goes back as each device's share,
  // point to point from the last stage's rank to the first's.
  pipe.dp = 2;
  pipe.zero = 3;
  PlanCost z3pipe = evaluate(pipe);
  EXPECT_EQ(count(z3pipe, 0, "pp", "broadcast", "tied-param"), 0);
  EXPECT_EQ(count(z3pipe, 1, "pp", "broadcast", "tied-param"), 0);
  EXPECT_EQ(count(z3pipe, 1, "pp", "send", "tied-param"), 1);
  EXPECT_EQ(count(z3pipe, 0, "pp", "recv", "tied-param"), 1);
  for (const CollectiveCount &k : z3pipe.collectives)
    if (k.what == "tied-param")
      EXPECT_EQ(k.bytes, 128 * 64 * 4 / 2);
}

// TrainingConfig::compiledBuffers: each of braidc's buffers the planner
// counts, one test per term (RankMemory::buffers).
class CompiledBuffersTest : public PlanCostTest {
protected:
  PlanCost evaluateWith(const Plan &plan, double copies, bool hold = false) {
    TrainingConfig config;
    config.compiledBuffers = true;
    config.workingActivationCopies = copies;
    config.backwardHold = hold;
    PlanCostModel model(costs->getModel(), testHardware(), config);
    llvm::Expected<PlanCost> c = model.evaluate(plan);
    EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
    return c ? *c : PlanCost();
  }
  double savedWithout(const SegmentCost &s) const {
    return s.getSavedBytes(Recompute::None, 1, false);
  }
};

TEST_F(CompiledBuffersTest, LayersHoldWhatWReadsBetweenBAndW) {
  // braid-autodiff's B and W layers: between them an instance holds F's
  // saved values W reads and B's results W reads (braidc's memory report
  // of test/Planner/precision.test's GPT: 2.50 MiB a layer against 2.00
  // saved). Without a pipeline every layer's B runs before any W.
  const ModelCost &mc = costs->getModel();
  const SegmentCost &l = mc.layers[0];
  double held = l.getHeldBytes(Recompute::None, 1, false);
  ASSERT_GT(held, savedWithout(l));
  // Against braidc's memory report of this model (GptModel.h's command,
  // braidc --train --memory-report, one device, one micro-batch of 2): its
  // activations, 663616 bytes, peak at the layers' W: F's saved values W
  // reads (294912) and B's results (360448), which the planner's peak
  // there, its activations and the hold's excess over them, counts exactly
  // (655360 = 4 x 163840); beside them the layers' input gradient, which
  // the embedding's W reads after the layers' W (2 x 16 x 64 floats, 8192
  // bytes), and the loss (a 64-byte buffer), not counted. None of the
  // head's saved values is live there (its 8192 + 16384 bytes; counting
  // them, as from 3af1bb8, gives 679936).
  Plan plan;
  plan.microBatchSize = mc.batch;
  PlanCost without = evaluateWith(plan, 0);
  PlanCost with = evaluateWith(plan, 0, /*hold=*/true);
  double peak = with.memory[0].activations + with.memory[0].buffers -
                without.memory[0].buffers;
  EXPECT_DOUBLE_EQ(peak, 663616 - 8192 - 64);
  // In a pipeline (1F1B: B then W at once), the last micro-batch's hold.
  plan.pp = 2;
  plan.microbatches = 2;
  without = evaluateWith(plan, 0);
  with = evaluateWith(plan, 0, /*hold=*/true);
  EXPECT_GT(with.memory[0].buffers, without.memory[0].buffers);
}

TEST_F(CompiledBuffersTest, OffByDefault) {
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 4;
  for (const RankMemory &m : evaluate(plan).memory)
    EXPECT_EQ(m.buffers, 0);
}

TEST_F(CompiledBuffersTest, WorkingArenasOfOneMicrobatch) {
  // No pipeline, no ZeRO: the layers' arena, `copies` times the widest
  // layer's activations without recomputation, per micro-batch, and the
  // head's B working gradient in the step's arena, once: the size of what
  // the head saved (its logits), whatever the copies. Until 2026-12-03 the
  // widest counted the ops around the layers too, so the logits counted
  // `copies` times and nothing else (3 * widest * 2 here, with the head's
  // saved values the widest: a GPT with vocabulary 8192 and hidden 64
  // predicted 40.3 MiB of buffers where braidc holds a 1 MiB layers'
  // arena and 8 MiB of the logits' gradient).
  const ModelCost &mc = costs->getModel();
  double widest = 0;
  for (const SegmentCost &l : mc.layers)
    widest = std::max(widest, savedWithout(l));
  double head = savedWithout(mc.post);
  ASSERT_GT(widest, 0);
  ASSERT_GT(head, 0);
  Plan plan;
  plan.microBatchSize = 2 * mc.batch;
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 3).memory[0].buffers,
                   3 * widest * 2 + head * 2);
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 6).memory[0].buffers,
                   6 * widest * 2 + head * 2);
  EXPECT_EQ(evaluateWith(plan, 0).memory[0].buffers, 0);
}

TEST_F(CompiledBuffersTest, GradientsStayWholeUnderZero) {
  // The compiled step accumulates every gradient whole: ZeRO-2 shards
  // them only after (beside the reduce_scatter sites' staging).
  Plan plan;
  plan.dp = 4;
  plan.zero = 2;
  PlanCostModel model(costs->getModel(), testHardware());
  RankMemory m = evaluateWith(plan, 0).memory[0];
  EXPECT_DOUBLE_EQ(m.buffers, 3 * m.grads + model.getZeroStagingBytes(plan) +
                                  model.getReduceScatterTemporaryBytes(plan));
}

TEST_F(CompiledBuffersTest, ZeroStagesEveryGradientSite) {
  // ZeRO without a pipeline: a reduce_scatter site per parameter gradient,
  // each keeping a staging buffer of its whole input in the runtime: one
  // layer body (the repeat's 4 instances share its sites), the ops around
  // the layers, and the head's partial of the tied wte (128 x 64).
  const ModelCost &mc = costs->getModel();
  ASSERT_EQ(mc.layers.size(), 1u);
  ASSERT_GT(mc.tiedParams, 0);
  double sites = (mc.pre.getParams() + mc.post.getParams() + mc.tiedParams +
                  mc.layers[0].getParams()) *
                 4;
  Plan plan;
  plan.dp = 4;
  plan.zero = 1;
  // One micro-batch: no accumulation loop; ZeRO-1 keeps gradients whole.
  PlanCostModel model(mc, testHardware());
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 0).memory[0].buffers,
                   sites + model.getReduceScatterTemporaryBytes(plan));
  plan.zero = 0;
  EXPECT_EQ(evaluateWith(plan, 0).memory[0].buffers, 0);
  // A pipeline all_reduces its gradients whole; with tp only the
  // replicated parameters are sites (not counted).
  plan.zero = 1;
  plan.pp = 2;
  EXPECT_EQ(model.getZeroStagingBytes(plan), 0);
  plan.pp = 1;
  plan.dp = 2;
  plan.tp = 2;
  EXPECT_EQ(model.getZeroStagingBytes(plan), 0);
}

TEST_F(CompiledBuffersTest, ReduceScatterTemporariesOnTheGroupsFirstDevice) {
  // libnbc's reduce_scatter reduces to the dp group's first device over a
  // binomial tree, writing a temporary of the whole input each round it
  // receives in, two at most: the largest bucket (here a layer instance's
  // gradients) twice from 3 devices on, once on 2. Measured 2026-12-02 on
  // the hidden-224 GPT of docs/planner.md: dp4 ZeRO-1 rank 0 67.4 MiB
  // against 58.7 on ranks 1 and 3.
  const ModelCost &mc = costs->getModel();
  ASSERT_EQ(mc.layers.size(), 1u);
  double layer = mc.layers[0].getParams() * 4;
  ASSERT_GT(layer, mc.tiedParams * 4);
  PlanCostModel model(mc, testHardware());
  Plan plan;
  plan.zero = 1;
  plan.dp = 4;
  EXPECT_DOUBLE_EQ(model.getReduceScatterTemporaryBytes(plan), 2 * layer);
  plan.dp = 8;
  EXPECT_DOUBLE_EQ(model.getReduceScatterTemporaryBytes(plan), 2 * layer);
  plan.dp = 2;
  EXPECT_DOUBLE_EQ(model.getReduceScatterTemporaryBytes(plan), layer);
  // The bucket of the ops around the layers is one reduce_scatter (since
  // bc9f928): where it is the largest (a vocabulary 8x the test GPT's),
  // its temporaries are the largest.
  ModelCost wide = mc;
  wide.tiedParams = 8 * mc.tiedParams;
  double outside =
      (wide.pre.getParams() + wide.post.getParams() + wide.tiedParams) * 4;
  ASSERT_GT(outside, layer);
  PlanCostModel wideModel(wide, testHardware());
  EXPECT_DOUBLE_EQ(wideModel.getReduceScatterTemporaryBytes(plan), outside);
  // In the rank's memory, beside the runtime's staging (one micro-batch:
  // no accumulation loop).
  plan.dp = 4;
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 0).memory[0].buffers,
                   model.getZeroStagingBytes(plan) + 2 * layer);
  // With tp a device's bucket is its piece of the layer (the divided
  // parameters' half of tp2), on each dp group's first device too
  // (held-out dp2 x tp2 ZeRO-1 sp: ranks 0 and 1 0.6 MiB above 2 and 3).
  const SegmentCost &l = mc.layers[0];
  ASSERT_GT(l.splitParams, 0);
  plan.tp = 2;
  EXPECT_DOUBLE_EQ(model.getReduceScatterTemporaryBytes(plan),
                   2 * (l.splitParams / 2 + l.replicatedParams) * 4);
  plan.tp = 1;
  // No reduce_scatter of the gradients: without ZeRO, in a pipeline (an
  // all_reduce).
  plan.zero = 0;
  EXPECT_EQ(model.getReduceScatterTemporaryBytes(plan), 0);
  plan.zero = 3;
  plan.pp = 2;
  EXPECT_EQ(model.getReduceScatterTemporaryBytes(plan), 0);
}

TEST_F(CompiledBuffersTest, RecomputationKeepsTheUnpipelinedPlan) {
  // Without a pipeline braidc's plan is the same with and without
  // recomputation: the activations without it.
  const ModelCost &mc = costs->getModel();
  double none = savedWithout(mc.pre) + savedWithout(mc.post);
  for (const SegmentCost &l : mc.layers)
    none += savedWithout(l) * l.count;
  Plan plan;
  plan.microBatchSize = mc.batch;
  plan.recompute = Recompute::Full;
  RankMemory m = evaluateWith(plan, 0).memory[0];
  ASSERT_LT(m.activations, none);
  EXPECT_DOUBLE_EQ(m.activations + m.buffers, none);
}

TEST_F(CompiledBuffersTest, AccumulationLoopHoldsWholeZerosAndThreeSums) {
  // No pipeline, 4 micro-batches: the accumulation loop's zeros filled
  // whole, three sums of the rank's share (the slice, the carried sum, its
  // next copy) and the micro-batch's own gradients, less the gradients the
  // memory counts already.
  const ModelCost &mc = costs->getModel();
  double whole = mc.getParams() * 4;
  Plan plan;
  plan.dp = 4;
  plan.microbatches = 4;
  // Without ZeRO the share is every gradient: 3 + 1 - 1 of them.
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 0).memory[0].buffers, 3 * whole);
  // ZeRO-1: a quarter each, the whole zeros above three of them (beside
  // the reduce_scatter sites' staging and MPI's temporaries).
  plan.zero = 1;
  PlanCostModel model(mc, testHardware());
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 0).memory[0].buffers,
                   whole + whole / 4 - whole + model.getZeroStagingBytes(plan) +
                       model.getReduceScatterTemporaryBytes(plan));
  // One micro-batch runs no loop.
  plan.zero = 0;
  plan.microbatches = 1;
  EXPECT_EQ(evaluateWith(plan, 0).memory[0].buffers, 0);
}

TEST_F(CompiledBuffersTest, SequenceParallelStagingPerCallSite) {
  // tp=2 with sequence parallelism: the runtime's staging buffer of every
  // reduce_scatter and all_gather site, a whole activation of the
  // micro-batch each: 4 per all_reduce of a layer body's F and B (one body
  // for the repeat's 4 instances), 2 before and after the layers.
  const ModelCost &mc = costs->getModel();
  auto sites = [](const SegmentCost &s) {
    return s.tpAllReduces[(int)Recompute::None][(int)PassKind::Forward] +
           s.tpAllReduces[(int)Recompute::None][(int)PassKind::Backward];
  };
  ASSERT_EQ(mc.layers.size(), 1u);
  ASSERT_GT(sites(mc.layers[0]), 0);
  double expected = 4 * sites(mc.layers[0]) * mc.layers[0].tpCollectiveBytes +
                    2 * sites(mc.pre) * mc.pre.tpCollectiveBytes +
                    2 * sites(mc.post) * mc.post.tpCollectiveBytes;
  Plan plan;
  plan.tp = 2;
  plan.microBatchSize = 2 * mc.batch;
  EXPECT_EQ(evaluateWith(plan, 0).memory[0].buffers, 0);
  plan.sequenceParallel = true;
  EXPECT_DOUBLE_EQ(evaluateWith(plan, 0).memory[0].buffers, 2 * expected);
  // A pipeline rank stages the sites of what it runs: the last of 2 the
  // layer body and the head's.
  plan.pp = 2;
  plan.microBatchSize = mc.batch;
  plan.microbatches = 2;
  PlanCost c = evaluateWith(plan, 0);
  PlanCostModel model(mc, testHardware());
  EXPECT_DOUBLE_EQ(model.getStagingBytes(plan, c.stages, 1),
                   4 * sites(mc.layers[0]) * mc.layers[0].tpCollectiveBytes +
                       2 * sites(mc.post) * mc.post.tpCollectiveBytes);
}

TEST_F(CompiledBuffersTest, RecomputedInputsWaitForADeferredW) {
  // pp=2, one micro-batch, full recomputation: under ZB-H1 each rank's B
  // hands its W what the stage keeps without recomputation, so the rank
  // peaks there instead of at F's share; 1F1B's full backward hands over
  // nothing.
  const ModelCost &mc = costs->getModel();
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 1;
  plan.microBatchSize = mc.batch;
  plan.recompute = Recompute::Full;
  plan.schedule = sched::ScheduleKind::OneFOneB;
  PlanCost full = evaluateWith(plan, 0);
  plan.schedule = sched::ScheduleKind::ZBH1;
  PlanCost split = evaluateWith(plan, 0);
  for (int r = 0; r < 2; ++r) {
    const StageCost &st = split.stages[r];
    double without = r == 0 ? savedWithout(mc.pre) : savedWithout(mc.post);
    for (int i = st.firstLayer; i < st.firstLayer + st.numLayers; ++i)
      without += savedWithout(mc.getLayer(i));
    ASSERT_GT(without, st.activationBytes);
    EXPECT_DOUBLE_EQ(split.memory[r].activations, full.memory[r].activations);
    EXPECT_DOUBLE_EQ(split.memory[r].buffers - full.memory[r].buffers,
                     without - st.activationBytes)
        << "rank " << r;
  }
}

TEST_F(CompiledBuffersTest, PipelineGradientMeansAndReceives) {
  // pp=2 GPipe over 4 micro-batches: each stage holds the means of its own
  // gradients (RankMemory::grads), the last also its partial of the tied
  // wte's (the first stage's reaches it after the peak); all 4 receives of
  // its boundary (forward on rank 1, backward on rank 0). Its step arena is
  // its own: no more for the rank keeping the most activations.
  const ModelCost &mc = costs->getModel();
  ASSERT_EQ(mc.getNumLayers(), 4);
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::GPipe;
  plan.microBatchSize = mc.batch;
  PlanCost c = evaluateWith(plan, 0);
  double tied = 128 * 64 * 4;
  double handed = mc.getLayer(1).outputBytes;
  ASSERT_GT(handed, 0);
  ASSERT_NE(c.memory[0].activations, c.memory[1].activations);
  // And one micro-batch's W results (the stage's gradients) before they
  // join the means.
  for (int r = 0; r < 2; ++r)
    EXPECT_DOUBLE_EQ(c.memory[r].buffers,
                     tied * r + 4 * handed + c.stages[r].params * 4)
        << "rank " << r;
}

TEST_F(CompiledBuffersTest, ArenasHoldWhatWWritesThere) {
  // The arenas hold at least what W writes there: the layers' arena a
  // layer's weight gradients and, in a pipeline, the pieces' arena the W
  // piece's results (the rank's largest chunk's gradients) (braidc's dp4 x
  // pp2 of the hidden-224 GPT at micro-batch 1: arenas of 2.50 and 4.98
  // MiB, 2.31 and 4.98 MiB of them gradients; the model had 3.7 MiB and
  // under-predicted the resident set 0.84).
  const ModelCost &mc = costs->getModel();
  ASSERT_EQ(mc.layers.size(), 1u);
  double layer = mc.layers[0].getParams() * 4;
  Plan plan;
  plan.pp = 2;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::OneFOneB;
  plan.microBatchSize = 1;
  PlanCostModel model(mc, testHardware());
  PlanCost tiny = evaluateWith(plan, 1e-9), none = evaluateWith(plan, 0);
  // In a pipeline both arenas are derived (since 2026-12-03): the layer
  // functions' buffers (SegmentCost::arena) and what the layers yield to
  // the pieces, not the fitted working copies; the last stage's step
  // arena holds the head's gradient beside the logits once.
  double head = savedWithout(mc.post) / mc.batch;
  PlanCost many = evaluateWith(plan, 50);
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(many.memory[r].buffers, tiny.memory[r].buffers)
        << "rank " << r;
    EXPECT_GE(tiny.memory[r].buffers - none.memory[r].buffers,
              layer + model.getPipelineResultBytes(plan, tiny.stages, r) +
                  (r == 1 ? head : 0) - 1e-3)
        << "rank " << r;
  }
  // Without a pipeline (the arenas fitted) a layer's gradients alone, and
  // the head's working gradient in the step's arena.
  plan.pp = 1;
  EXPECT_NEAR(evaluateWith(plan, 1e-9).memory[0].buffers -
                  evaluateWith(plan, 0).memory[0].buffers,
              layer + head, 1e-3);
  // Many working copies: those of the widest layer (not of the ops around
  // the layers, since 2026-12-03).
  double widest = savedWithout(mc.layers[0]);
  double copies = 10 * (layer + 4 * mc.getParams()) / widest * mc.batch;
  EXPECT_NEAR(evaluateWith(plan, copies).memory[0].buffers -
                  evaluateWith(plan, 0).memory[0].buffers,
              copies * widest / mc.batch + head, 1e-3);
}

TEST_F(CompiledBuffersTest, PipelineResultsOfTheLargestChunk) {
  // Interleaved 1F1B, pp=2 with 2 chunks a rank: one micro-batch's W
  // results are the gradients of one chunk, the rank's largest; none
  // without a pipeline.
  Plan plan;
  plan.pp = 2;
  plan.chunks = 2;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::Interleaved1F1B;
  plan.microBatchSize = costs->getModel().batch;
  PlanCost c = evaluateWith(plan, 0);
  ASSERT_EQ(c.stages.size(), 4u);
  PlanCostModel model(costs->getModel(), testHardware());
  for (int r = 0; r < 2; ++r) {
    double largest = std::max(c.stages[r].params, c.stages[r + 2].params);
    ASSERT_LT(largest, c.stages[r].params + c.stages[r + 2].params);
    EXPECT_DOUBLE_EQ(model.getPipelineResultBytes(plan, c.stages, r),
                     largest * 4)
        << "rank " << r;
  }
  plan.pp = 1;
  plan.chunks = 1;
  EXPECT_EQ(model.getPipelineResultBytes(plan, c.stages, 0), 0);
}

TEST_F(CompiledBuffersTest, PipelineStageHoldsItsOwnGradients) {
  // Against the same model without a tied parameter (the same receives and
  // arenas), only the tied wte's gradients: on pp=4 the last rank's own
  // partial, none on a middle rank (the first stage's partial goes to the
  // last alone, point to point, after the peak; until 2026-12-02 it was
  // broadcast: one on each middle rank, two on the last); under ZB-V
  // (first and last chunk on rank 0) one on rank 0. braidc before the
  // stage-local means held every gradient on every stage.
  ModelCost untiedModel = costs->getModel();
  untiedModel.tiedParams = 0;
  TrainingConfig config;
  config.compiledBuffers = true;
  config.workingActivationCopies = 0;
  config.backwardHold = false;
  PlanCostModel untied(untiedModel, testHardware(), config);
  double tied = 128 * 64 * 4;
  auto extraOf = [&](const Plan &plan) {
    PlanCost with = evaluateWith(plan, 0);
    llvm::Expected<PlanCost> without = untied.evaluate(plan);
    EXPECT_TRUE(bool(without));
    std::vector<double> extra;
    for (int r = 0; without && r < plan.pp; ++r)
      extra.push_back(
          std::round((with.memory[r].buffers - without->memory[r].buffers) /
                     tied * 1e6) /
          1e6);
    return extra;
  };
  Plan plan;
  plan.pp = 4;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::GPipe;
  plan.microBatchSize = costs->getModel().batch;
  EXPECT_EQ(extraOf(plan), (std::vector<double>{0, 0, 0, 1}));
  plan.pp = 2;
  plan.schedule = sched::ScheduleKind::ZBV;
  plan.chunks = 2;
  EXPECT_EQ(extraOf(plan), (std::vector<double>{1, 0}));
}

TEST_F(CompiledBuffersTest, PipelineTiedParameterOnItsStagesOnly) {
  // The tied wte (counted with the first stage) is a parameter of the first
  // and the last rank, none between, and its optimizer state is the last
  // rank's, which updates it; under ZB-V rank 0 holds both ends; ZeRO-1
  // shards the state, ZeRO-3 the parameter too.
  ModelCost untiedModel = costs->getModel();
  untiedModel.tiedParams = 0;
  TrainingConfig config;
  config.compiledBuffers = true;
  PlanCostModel untied(untiedModel, testHardware(), config);
  double tied = 128 * 64;
  auto extraOf = [&](const Plan &plan, double RankMemory::*term, double bytes) {
    PlanCost with = evaluateWith(plan, 0);
    llvm::Expected<PlanCost> without = untied.evaluate(plan);
    EXPECT_TRUE(bool(without));
    std::vector<double> extra;
    for (int r = 0; without && r < plan.pp; ++r)
      extra.push_back(
          std::round((with.memory[r].*term - without->memory[r].*term) /
                     (tied * bytes) * 1e6) /
          1e6);
    return extra;
  };
  double param = untiedModel.elementBytes, state = config.optimizerBytes;
  Plan plan;
  plan.pp = 4;
  plan.microbatches = 4;
  plan.schedule = sched::ScheduleKind::GPipe;
  plan.microBatchSize = costs->getModel().batch;
  EXPECT_EQ(extraOf(plan, &RankMemory::params, param),
            (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(extraOf(plan, &RankMemory::optimizer, state),
            (std::vector<double>{-1, 0, 0, 1}));
  plan.dp = 2;
  plan.zero = 3;
  EXPECT_EQ(extraOf(plan, &RankMemory::params, param),
            (std::vector<double>{0, 0, 0, 0.5}));
  EXPECT_EQ(extraOf(plan, &RankMemory::optimizer, state),
            (std::vector<double>{-0.5, 0, 0, 0.5}));
  plan.dp = 1;
  plan.zero = 0;
  plan.pp = 2;
  plan.schedule = sched::ScheduleKind::ZBV;
  plan.chunks = 2;
  EXPECT_EQ(extraOf(plan, &RankMemory::params, param),
            (std::vector<double>{0, 0}));
  EXPECT_EQ(extraOf(plan, &RankMemory::optimizer, state),
            (std::vector<double>{0, 0}));
}

} // namespace
