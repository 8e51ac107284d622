//===- SearchTest.cpp - The planner's search ------------------------------===//
//
// The search against what it must find: on hand-built model costs and a
// made-up device, the optimum a hand argument gives; the best plans of an
// exhaustive evaluation of the same space (so pruning loses nothing); no
// plan over the memory budget; top-k in order; the smallest memory when
// nothing fits; determinism; and stage boundaries balanced by time.
//
//===----------------------------------------------------------------------===//

#include "braid/Planner/Search.h"

#include "gtest/gtest.h"

#include <cmath>
#include <numeric>

using namespace mlir::braid;
using namespace mlir::braid::plan;
using sched::ScheduleKind;

namespace {

Hardware toyHardware() {
  Hardware hw;
  hw.name = "toy";
  hw.peakFlops["f32"] = 1e12;
  hw.efficiency[0] = 1;
  hw.efficiency[1] = 1;
  hw.efficiency[2] = 1;
  hw.memoryBandwidth = 1e12;
  hw.deviceMemory = 1e12;
  hw.devicesPerNode = 8;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    hw.intraNode.costs[k] = {1e-6, 1e11};
    hw.interNode.costs[k] = {1e-5, 1e10};
  }
  return hw;
}

/// A pass of `flops` matmul FLOPs, all divided by tp.
PassWork splitWork(double flops) {
  PassWork w;
  w.split[(int)OpClass::Matmul].flops = flops;
  return w;
}

/// `layers` identical layers of 1 GFLOP F, 1 B, 1 W (recomputation adds the
/// forward to B), 1e6 parameters, everything divided by tp; batch 8.
ModelCost toyModel(int layers, double savedBytes = 1e8) {
  ModelCost m;
  m.entry = "forward";
  m.batch = 8;
  m.dtype = "f32";
  m.elementBytes = 4;
  SegmentCost layer;
  layer.name = "h (@block)";
  layer.count = layers;
  for (int r = 0; r < kNumRecomputeModes; ++r) {
    layer.passes[r][0] = splitWork(1e9);
    layer.passes[r][1] = splitWork(r == 0 ? 1e9 : r == 1 ? 1.2e9 : 2e9);
    layer.passes[r][2] = splitWork(1e9);
  }
  layer.savedSplitBytes[0] = savedBytes;
  layer.savedSplitBytes[1] = savedBytes / 2;
  layer.savedSplitBytes[2] = savedBytes / 20;
  layer.splitParams = 1e6;
  layer.outputBytes = 1e6;
  m.layers.push_back(layer);
  m.pre.name = "(before layers)";
  m.post.name = "(after layers)";
  return m;
}

/// The toy model with an embedding and a head as heavy as `edge` layers
/// each, with tp collectives: stage balancing and every axis matter.
ModelCost edgeModel(int layers, double edge) {
  ModelCost m = toyModel(layers);
  for (SegmentCost *s : {&m.pre, &m.post}) {
    for (int r = 0; r < kNumRecomputeModes; ++r)
      for (int p = 0; p < kNumPassKinds; ++p)
        s->passes[r][p] = splitWork(edge * 1e9);
    s->splitParams = edge * 1e6;
    s->savedSplitBytes[0] = s->savedSplitBytes[1] = s->savedSplitBytes[2] =
        edge * 1e7;
    s->outputBytes = 1e6;
  }
  SegmentCost &l = m.layers[0];
  for (int r = 0; r < kNumRecomputeModes; ++r) {
    l.tpAllReduces[r][0] = 2;
    l.tpAllReduces[r][1] = 2;
  }
  l.tpCollectiveBytes = 4e6;
  // Norms: replicated memory-bound work, what sp divides.
  for (int r = 0; r < kNumRecomputeModes; ++r)
    l.passes[r][0].replicated[(int)OpClass::Memory].bytes = 2e7;
  l.savedReplicatedBytes[0] = l.savedReplicatedBytes[1] = 2e7;
  l.replicatedParams = 1e4;
  return m;
}

/// Every plan of the space searchPlans covers, evaluated (no pruning).
std::vector<PlanCost> exhaustive(PlanCostModel &cm, const SearchOptions &o) {
  std::vector<PlanCost> all;
  const ModelCost &model = cm.getModel();
  int64_t layers = model.getNumLayers();
  int64_t batch = o.globalBatch ? o.globalBatch : model.batch;
  std::vector<int64_t> sizes = o.microBatchSizes.empty()
                                   ? std::vector<int64_t>{1, 2, 4, 8}
                                   : o.microBatchSizes;
  for (int pp = 1; pp <= o.devices; ++pp)
    for (int tp = 1; tp <= o.devices / pp; ++tp) {
      if (o.devices % (pp * tp))
        continue;
      int dp = o.devices / pp / tp;
      if (batch % dp || pp > layers)
        continue;
      for (int64_t mbs : sizes) {
        if ((batch / dp) % mbs)
          continue;
        int m = batch / dp / mbs;
        std::vector<std::pair<ScheduleKind, int>> scheds;
        if (pp == 1)
          scheds = {{ScheduleKind::OneFOneB, 0}};
        else
          for (ScheduleKind k : o.schedules) {
            if (k == ScheduleKind::Interleaved1F1B) {
              for (int v = 2; v <= o.maxChunks; ++v)
                if (m % pp == 0 && pp * v <= layers)
                  scheds.push_back({k, v});
            } else if (k == ScheduleKind::ZBV) {
              if (2 * pp <= layers)
                scheds.push_back({k, 0});
            } else {
              scheds.push_back({k, 0});
            }
          }
        for (auto [kind, chunks] : scheds)
          for (int rc = 0; rc < 3; ++rc)
            for (int sp = 0; sp < (tp > 1 ? 2 : 1); ++sp)
              for (int zero = 0; zero < (dp > 1 ? 4 : 1); ++zero) {
                Plan p;
                p.dp = dp;
                p.tp = tp;
                p.pp = pp;
                p.schedule = kind;
                p.chunks = chunks;
                p.microBatchSize = mbs;
                p.microbatches = m;
                p.zero = zero;
                p.sequenceParallel = sp;
                p.recompute = Recompute(rc);
                std::vector<std::vector<int>> layouts = {{}};
                if (pp > 1) {
                  llvm::Expected<std::vector<int>> b =
                      balanceStageLayers(cm, p);
                  EXPECT_TRUE(bool(b));
                  std::vector<int> even(
                      pp * (kind == ScheduleKind::OneFOneB ||
                                    kind == ScheduleKind::ZBH1 ||
                                    kind == ScheduleKind::ZBH2 ||
                                    kind == ScheduleKind::Auto
                                ? 1
                            : kind == ScheduleKind::ZBV ? 2
                                                        : chunks),
                      0);
                  for (size_t i = 0; i < even.size(); ++i)
                    even[i] = layers / even.size() +
                              (int64_t(i) < layers % (int64_t)even.size());
                  layouts = {even};
                  if (b && *b != even)
                    layouts.push_back(*b);
                  llvm::Expected<std::vector<std::vector<int>>> rb =
                      balanceRankLayers(cm, p);
                  EXPECT_TRUE(bool(rb));
                  if (rb)
                    for (const std::vector<int> &split : *rb)
                      if (!llvm::is_contained(layouts, split))
                        layouts.push_back(split);
                }
                for (auto &layout : layouts) {
                  p.stageLayers = layout;
                  llvm::Expected<PlanCost> c = cm.evaluate(p);
                  if (!c) {
                    llvm::consumeError(c.takeError());
                    continue;
                  }
                  all.push_back(*c);
                }
              }
      }
    }
  return all;
}

double budgetOf(const SearchOptions &o, const PlanCostModel &cm) {
  return o.memoryBudget > 0 ? o.memoryBudget : cm.getHardware().deviceMemory;
}

SearchResult search(PlanCostModel &cm, const SearchOptions &o) {
  llvm::Expected<SearchResult> r = searchPlans(cm, o);
  EXPECT_TRUE(bool(r)) << (r ? "" : llvm::toString(r.takeError()));
  return r ? *r : SearchResult();
}

// Free tensor parallelism (collectives cost nothing, all work divides),
// costly data parallelism (the gradient all_reduce) and pipelines (the
// bubble): tp over all devices, nothing else, is the one optimum.
TEST(SearchTest, FindsTheOptimumOfAHandArgument) {
  Hardware hw = toyHardware();
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    hw.intraNode.costs[k] = {1, 1e3}; // dp: seconds per all_reduce
    hw.interNode.costs[k] = {1, 1e3};
  }
  ModelCost model = toyModel(8);
  PlanCostModel cm(model, hw);
  SearchOptions o;
  o.devices = 4;
  o.globalBatch = 16;
  SearchResult r = search(cm, o);
  ASSERT_FALSE(r.top.empty());
  const Plan &best = r.top[0].plan;
  EXPECT_EQ(best.dp, 1);
  EXPECT_EQ(best.tp, 4);
  EXPECT_EQ(best.pp, 1);
  EXPECT_EQ(best.recompute, Recompute::None);
  EXPECT_EQ(best.zero, 0);
  // Its time by hand: 16 samples x 3 GFLOP per 8 samples per layer x 8
  // layers over 4 devices at 1 TFLOP/s, plus the optimizer step reading
  // and writing 2e6 parameters' 4 + 4 + 4 + 4 + 16 bytes (the gradients
  // twice: the norm, then AdamW) at 1 TB/s... on 1/4 of them; with several
  // micro-batches, the accumulation loop's 5 passes over those gradients
  // (4 bytes each) at 1 TB/s in each (and 2 more once after an odd count).
  double compute = 16.0 / 8 * 3e9 * 8 / 4 / 1e12;
  double optimizer = 8e6 / 4 * (4 + 4 + 4 + 4 + 2 * 8) / 1e12;
  int m = best.microbatches;
  double accumulation =
      m > 1 ? (m * 5 + (m % 2 ? 2 : 0)) * 8e6 / 4 * 4 / 1e12 : 0;
  EXPECT_NEAR(r.top[0].stepTime, compute + optimizer + accumulation, 1e-9);
}

// The pruned search returns exactly the best plans of an exhaustive
// evaluation, in order, on a model where every axis matters.
TEST(SearchTest, MatchesExhaustiveEvaluation) {
  ModelCost model = edgeModel(8, 1.5);
  Hardware hw = toyHardware();
  hw.devicesPerNode = 4;
  double unconstrainedPeak = 0;
  std::string unconstrainedPlan;
  for (int budgetCase = 0; budgetCase < 2; ++budgetCase) {
    PlanCostModel cm(model, hw);
    SearchOptions o;
    o.devices = 8;
    o.globalBatch = 32;
    o.topK = 6;
    o.schedules = {ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B,
                   ScheduleKind::ZBH1, ScheduleKind::ZBH2, ScheduleKind::ZBV};
    o.maxChunks = 2;
    // Second round: just below what the unconstrained optimum needs.
    if (budgetCase)
      o.memoryBudget = 0.999 * unconstrainedPeak;
    SearchResult r = search(cm, o);
    PlanCostModel cm2(model, hw);
    std::vector<PlanCost> all = exhaustive(cm2, o);
    if (!budgetCase && !r.top.empty()) {
      unconstrainedPeak = r.top[0].getPeakMemory();
      unconstrainedPlan = r.top[0].plan.str();
    }
    double budget = budgetOf(o, cm);
    std::vector<PlanCost> fits;
    bool someOver = false;
    for (const PlanCost &c : all) {
      if (c.getPeakMemory() <= budget)
        fits.push_back(c);
      else
        someOver = true;
    }
    // One time per kind: the search folds alike plans (only the schedule or
    // ZeRO stage differ, same time) into one entry. By time, ties in
    // enumeration order (a stable sort; std::stable_sort warns with
    // libstdc++ 12 and clang).
    std::vector<size_t> order(fits.size());
    std::iota(order.begin(), order.end(), 0);
    llvm::sort(order, [&](size_t a, size_t b) {
      if (fits[a].stepTime != fits[b].stepTime)
        return fits[a].stepTime < fits[b].stepTime;
      return a < b;
    });
    std::vector<PlanCost> kinds;
    for (size_t i : order)
      if (llvm::none_of(kinds, [&](const PlanCost &k) {
            return isAlikePlan(fits[i], k);
          }))
        kinds.push_back(fits[i]);
    std::vector<double> fitting;
    for (const PlanCost &c : kinds)
      fitting.push_back(c.stepTime);
    ASSERT_GE(fitting.size(), 6u);
    ASSERT_EQ(r.top.size(), 6u);
    for (size_t i = 0; i < r.top.size(); ++i)
      EXPECT_NEAR(r.top[i].stepTime, fitting[i], 1e-9 * fitting[i])
          << "rank " << i << ": " << r.top[i].plan.str();
    if (budgetCase) {
      // The budget bites: the unconstrained optimum is over it.
      EXPECT_TRUE(someOver);
      double fastest = 1e300;
      for (const PlanCost &c : all)
        fastest = std::min(fastest, c.stepTime);
      EXPECT_GE(r.top[0].stepTime, fastest * (1 - 1e-9));
      EXPECT_NE(r.top[0].plan.str(), unconstrainedPlan);
      EXPECT_GT(r.overMemory, 0);
    }
    // Each candidate counted once.
    EXPECT_EQ(r.candidates, r.invalid + r.overMemory + r.pruned + r.simulated);
    // Pruning did something.
    EXPECT_GT(r.pruned, 0);
    EXPECT_LT(r.simulated, (int64_t)all.size());
  }
}

// Plans that differ only in what the prediction does not see (ZeRO-1 and
// ZeRO-2 cost the same time; so do ZeRO-0's all_reduce and ZeRO-1's
// reduce_scatter + all_gather on rings of equal links) are one entry of the
// top k, with the others listed under it: the k entries are k kinds.
TEST(SearchTest, FoldsAlikePlans) {
  ModelCost model = edgeModel(8, 1.5);
  PlanCostModel cm(model, toyHardware());
  SearchOptions o;
  o.devices = 8;
  o.globalBatch = 32;
  o.topK = 10;
  SearchResult r = search(cm, o);
  ASSERT_EQ(r.top.size(), 10u);
  ASSERT_EQ(r.alike.size(), r.top.size());
  size_t folded = 0;
  bool zeroFolded = false;
  for (size_t i = 0; i < r.top.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(isAlikePlan(r.top[i], r.top[j]))
          << "#" << j + 1 << " " << r.top[j].plan.str() << " and #" << i + 1
          << " " << r.top[i].plan.str();
    for (const Plan &q : r.alike[i]) {
      PlanCostModel cm2(model, toyHardware());
      llvm::Expected<PlanCost> c = cm2.evaluate(q);
      ASSERT_TRUE(bool(c));
      EXPECT_TRUE(isAlikePlan(*c, r.top[i])) << q.str();
      zeroFolded |= q.zero != r.top[i].plan.zero;
      ++folded;
    }
  }
  EXPECT_GT(folded, 0u);
  EXPECT_TRUE(zeroFolded);
  // Alike: only the ZeRO stage or the schedule differ, and the time.
  PlanCostModel cm3(model, toyHardware());
  Plan a;
  a.dp = 2;
  a.pp = 2;
  a.microbatches = 4;
  a.schedule = ScheduleKind::ZBH1;
  a.zero = 1;
  Plan b = a;
  b.zero = 2;
  Plan c = a;
  c.recompute = Recompute::Full;
  llvm::Expected<PlanCost> ca = cm3.evaluate(a), cb = cm3.evaluate(b),
                           cc = cm3.evaluate(c);
  ASSERT_TRUE(ca && cb && cc);
  EXPECT_TRUE(isAlikePlan(*ca, *cb));
  EXPECT_FALSE(isAlikePlan(*ca, *cc));
  PlanCost slower = *cb;
  slower.stepTime *= 1.001;
  EXPECT_FALSE(isAlikePlan(*ca, slower));
}

TEST(SearchTest, NothingOverBudgetAndTopKInOrder) {
  ModelCost model = edgeModel(8, 1.5);
  PlanCostModel cm(model, toyHardware());
  SearchOptions o;
  o.devices = 8;
  o.globalBatch = 32;
  o.topK = 10;
  o.memoryBudget = 3e8;
  SearchResult r = search(cm, o);
  ASSERT_EQ(r.top.size(), 10u);
  for (size_t i = 0; i < r.top.size(); ++i) {
    EXPECT_LE(r.top[i].getPeakMemory(), o.memoryBudget);
    if (i)
      EXPECT_LE(r.top[i - 1].stepTime, r.top[i].stepTime * (1 + 1e-9));
    EXPECT_EQ(r.top[i].plan.getNumDevices(), 8);
    EXPECT_EQ(r.top[i].plan.getGlobalBatch(), 32);
  }
}

TEST(SearchTest, NoPlanFitsReportsTheSmallestRequirement) {
  ModelCost model = edgeModel(8, 1.5);
  PlanCostModel cm(model, toyHardware());
  SearchOptions o;
  o.devices = 4;
  o.globalBatch = 16;
  o.schedules = {ScheduleKind::OneFOneB, ScheduleKind::ZBH1, ScheduleKind::ZBH2,
                 ScheduleKind::ZBV};
  o.memoryBudget = 1e6;
  SearchResult r = search(cm, o);
  EXPECT_TRUE(r.top.empty());
  PlanCostModel cm2(model, toyHardware());
  double smallest = 1e300;
  for (const PlanCost &c : exhaustive(cm2, o))
    smallest = std::min(smallest, c.getPeakMemory());
  EXPECT_NEAR(r.minMemory, smallest, 1e-9 * smallest);
  ASSERT_TRUE(r.minMemoryPlan.has_value());
  EXPECT_EQ(r.candidates, r.invalid + r.overMemory + r.pruned + r.simulated);
}

// A mesh none of whose plans fits reports exactly the smallest peak of its
// plans (the budget it would fit under), not a lower bound that moves with
// the budget; every candidate is counted once.
TEST(SearchTest, MeshRejectedForMemoryReportsItsSmallestNeed) {
  ModelCost model = edgeModel(8, 1.5);
  SearchOptions o;
  o.devices = 4;
  o.globalBatch = 16;
  o.schedules = {ScheduleKind::OneFOneB, ScheduleKind::ZBH1, ScheduleKind::ZBH2,
                 ScheduleKind::ZBV};
  PlanCostModel all(model, toyHardware());
  std::vector<PlanCost> plans = exhaustive(all, o);
  int rejected = 0;
  for (double budget : {1e6, 3e7, 1e8, 2e8, 3e8}) {
    o.memoryBudget = budget;
    PlanCostModel cm(model, toyHardware());
    SearchResult r = search(cm, o);
    EXPECT_EQ(r.candidates, r.invalid + r.overMemory + r.pruned + r.simulated)
        << "budget " << budget;
    for (const MeshSummary &mesh : r.meshes) {
      if (mesh.status != MeshSummary::Status::Memory)
        continue;
      ++rejected;
      double smallest = 1e300;
      for (const PlanCost &c : plans)
        if (c.plan.dp == mesh.dp && c.plan.tp == mesh.tp &&
            c.plan.pp == mesh.pp)
          smallest = std::min(smallest, c.getPeakMemory());
      EXPECT_NEAR(mesh.minMemory, smallest, 1e-9 * smallest)
          << "budget " << budget << " mesh " << mesh.dp << "x" << mesh.tp << "x"
          << mesh.pp;
      EXPECT_GT(mesh.minMemory, budget);
      ASSERT_TRUE(mesh.plan.has_value());
    }
  }
  EXPECT_GT(rejected, 3);
}

TEST(SearchTest, Deterministic) {
  ModelCost model = edgeModel(8, 1.5);
  PlanCostModel a(model, toyHardware()), b(model, toyHardware());
  SearchOptions o;
  o.devices = 8;
  o.globalBatch = 32;
  o.topK = 8;
  SearchResult ra = search(a, o), rb = search(b, o);
  ASSERT_EQ(ra.top.size(), rb.top.size());
  for (size_t i = 0; i < ra.top.size(); ++i)
    EXPECT_EQ(ra.top[i].plan.str(), rb.top[i].plan.str());
}

TEST(SearchTest, IllegalDegreesAndUnfactorableDevices) {
  ModelCost model = toyModel(2);
  PlanCostModel cm(model, toyHardware());
  SearchOptions o;
  o.devices = 7; // dp 7 does not divide batch 8, tp 7 illegal, pp 7 > 2
  o.tpDegrees = std::vector<int>{1, 2, 4};
  o.illegalTp = {{7, "tp=7 does not divide attention heads (4)"}};
  llvm::Expected<SearchResult> r = searchPlans(cm, o);
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("over 7 devices"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dp=7,tp=1,pp=1: dp=7 does not divide the global "
                     "batch 8"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("tp=7 does not divide attention heads"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("pp=7: the model has 2 layers"), std::string::npos) << msg;
}

// A hardware description that prices no plan of the model (no peak for its
// element type) is one error, not one per mesh under "no plan can split".
TEST(SearchTest, HardwareWithoutTheModelsElementType) {
  ModelCost model = toyModel(2);
  Hardware hw = toyHardware();
  hw.peakFlops.clear();
  hw.peakFlops["bf16"] = 1e12;
  PlanCostModel cm(model, hw);
  SearchOptions o;
  o.devices = 2;
  llvm::Expected<SearchResult> r = searchPlans(cm, o);
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_EQ(msg, "hardware 'toy' has no peak FLOP/s for element type 'f32' "
                 "(it has: bf16)");
}

TEST(SearchTest, FixedChoicesAndProgramBatch) {
  ModelCost model = edgeModel(8, 1.5);
  PlanCostModel cm(model, toyHardware());
  SearchOptions o;
  o.devices = 8;
  o.globalBatch = 32;
  o.microBatchSamples = 8; // the program's batch: dp * mbs = 8, m = 4
  o.zero = 1;
  o.recompute = Recompute::Full;
  o.topK = 20;
  SearchResult r = search(cm, o);
  ASSERT_FALSE(r.top.empty());
  for (const PlanCost &c : r.top) {
    EXPECT_EQ(c.plan.dp * c.plan.microBatchSize, 8);
    EXPECT_EQ(c.plan.microbatches, 4);
    EXPECT_EQ(c.plan.recompute, Recompute::Full);
    if (c.plan.dp > 1)
      EXPECT_EQ(c.plan.zero, 1);
  }
}

// Layers move off the stages that hold the embedding and the head, and the
// largest stage time is the least any split gives.
TEST(SearchTest, BalancesStagesByTime) {
  ModelCost model = edgeModel(10, 1.0);
  PlanCostModel cm(model, toyHardware());
  Plan p;
  p.pp = 4;
  p.microbatches = 4;
  llvm::Expected<std::vector<int>> sizes = balanceStageLayers(cm, p);
  ASSERT_TRUE(bool(sizes));
  // 12 layer-equivalents over 4 stages: 3 each, the edges take 2.
  EXPECT_EQ(*sizes, (std::vector<int>{2, 3, 3, 2}));
  // Against every split of 10 layers into 4 non-empty stages.
  auto largest = [&](const std::vector<int> &s) {
    Plan q = p;
    q.stageLayers = s;
    llvm::Expected<std::vector<StageCost>> c = cm.getStageCosts(q);
    EXPECT_TRUE(bool(c));
    double mx = 0;
    for (const StageCost &st : *c)
      mx = std::max(mx, st.forward + st.backward + st.weight);
    return mx;
  };
  double best = 1e300;
  for (int a = 1; a <= 7; ++a)
    for (int b = 1; a + b <= 8; ++b)
      for (int c = 1; a + b + c <= 9; ++c)
        best = std::min(best, largest({a, b, c, 10 - a - b - c}));
  EXPECT_NEAR(largest(*sizes), best, 1e-12);
  // The search prefers it to the even split (4, 3, 3... the edges late).
  SearchOptions o;
  o.devices = 4;
  o.pp = 4;
  o.globalBatch = 32;
  o.schedules = {ScheduleKind::OneFOneB};
  SearchResult r = search(cm, o);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.top[0].plan.stageLayers, (std::vector<int>{2, 3, 3, 2}));
}

/// The toy model with an embedding of `pre` layers' work and a head of
/// `post` layers' (issue 13's GPT: a layer about 80 ms a step, the
/// embedding 10, the head 150).
ModelCost headModel(int layers, double pre, double post) {
  ModelCost m = toyModel(layers);
  for (auto [s, w] : {std::pair{&m.pre, pre}, std::pair{&m.post, post}}) {
    for (int r = 0; r < kNumRecomputeModes; ++r)
      for (int p = 0; p < kNumPassKinds; ++p)
        s->passes[r][p] = splitWork(w * 1e9);
    s->splitParams = w * 1e6;
    s->outputBytes = 1e6;
  }
  return m;
}

// ZB-V runs stages 0 and 3 on rank 0. With 4 layers and a head of nearly
// two, every split of at least one layer per stage leaves rank 0 the
// embedding, the head and two layers; the embedding alone on stage 0, or
// the head alone on stage 3, balances the ranks, and the search picks
// such a split.
TEST(SearchTest, BalancesRanksWithAStageOfNoLayer) {
  ModelCost model = headModel(4, 0.125, 1.875);
  PlanCostModel cm(model, toyHardware());
  Plan p;
  p.pp = 2;
  p.schedule = ScheduleKind::ZBV;
  p.microbatches = 8;
  p.microBatchSize = 8;
  llvm::Expected<std::vector<std::vector<int>>> splits =
      balanceRankLayers(cm, p);
  ASSERT_TRUE(bool(splits)) << llvm::toString(splits.takeError());
  // Rank 0: 0.125 + 1 + 1.875, rank 1: 3 layers. First the split whose
  // rank 1 starts soonest (the embedding alone before it), then the others
  // as even: one layer on rank 0, with the embedding or with the head.
  using Splits = std::vector<std::vector<int>>;
  ASSERT_FALSE(splits->empty());
  EXPECT_EQ(splits->front(), (std::vector<int>{0, 2, 1, 1}));
  Splits sorted = *splits;
  llvm::sort(sorted);
  EXPECT_EQ(sorted,
            (Splits{{0, 1, 2, 1}, {0, 2, 1, 1}, {1, 1, 2, 0}, {1, 2, 1, 0}}));
  auto busiest = [&](const std::vector<int> &s) {
    Plan q = p;
    q.stageLayers = s;
    llvm::Expected<std::vector<StageCost>> c = cm.getStageCosts(q);
    if (!c) {
      llvm::consumeError(c.takeError());
      return 1e300;
    }
    double rank[2] = {0, 0};
    for (size_t i = 0; i < c->size(); ++i)
      rank[i == 0 || i == 3 ? 0 : 1] +=
          (*c)[i].forward + (*c)[i].backward + (*c)[i].weight;
    return std::max(rank[0], rank[1]);
  };
  // Against every split of 4 layers into 4 stages, empty ones included
  // (the cost model refuses an empty middle stage): the least busiest
  // rank, and every split that reaches it.
  double best = 1e300;
  for (int a = 0; a <= 4; ++a)
    for (int b = 0; a + b <= 4; ++b)
      for (int c = 0; a + b + c <= 4; ++c)
        best = std::min(best, busiest({a, b, c, 4 - a - b - c}));
  for (const std::vector<int> &s : *splits)
    EXPECT_NEAR(busiest(s), best, 1e-12 * best);
  Splits optimal;
  for (int a = 0; a <= 4; ++a)
    for (int b = 0; a + b <= 4; ++b)
      for (int c = 0; a + b + c <= 4; ++c)
        if (busiest({a, b, c, 4 - a - b - c}) <= best * (1 + 1e-12))
          optimal.push_back({a, b, c, 4 - a - b - c});
  EXPECT_EQ(optimal, sorted);
  EXPECT_EQ(busiest({1, 0, 2, 1}), 1e300);
  // One layer per stage (balanceStageLayers' split) is a third slower.
  llvm::Expected<std::vector<int>> stages = balanceStageLayers(cm, p);
  ASSERT_TRUE(bool(stages));
  EXPECT_EQ(*stages, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_GT(busiest(*stages), 1.3 * best);
  // The search: ZB-V with one of them beats 1F1B's best (3, 1).
  SearchOptions o;
  o.devices = 2;
  o.pp = 2;
  o.globalBatch = 64;
  o.microBatchSizes = {8};
  o.schedules = {ScheduleKind::OneFOneB, ScheduleKind::ZBV};
  o.topK = 10;
  SearchResult r = search(cm, o);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.top[0].plan.schedule, ScheduleKind::ZBV);
  EXPECT_TRUE(llvm::is_contained(sorted, r.top[0].plan.stageLayers));
  bool oneF = false;
  for (const PlanCost &c : r.top)
    if (c.plan.schedule == ScheduleKind::OneFOneB) {
      oneF = true;
      EXPECT_LT(r.top[0].stepTime, c.stepTime);
    }
  EXPECT_TRUE(oneF);
  // Without work outside the layers no stage may be empty, and one layer
  // per stage balances the ranks already: nothing to add.
  ModelCost bare = toyModel(4);
  PlanCostModel bareCosts(bare, toyHardware());
  llvm::Expected<std::vector<std::vector<int>>> even =
      balanceRankLayers(bareCosts, p);
  ASSERT_TRUE(bool(even));
  EXPECT_TRUE(even->empty());
}

TEST(SearchTest, PlanFlags) {
  Plan p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  p.schedule = ScheduleKind::Interleaved1F1B;
  p.chunks = 2;
  p.microbatches = 4;
  p.zero = 1;
  p.sequenceParallel = true;
  p.recompute = Recompute::Selective;
  p.stageLayers = {1, 2, 2, 1};
  EXPECT_EQ(getPlanFlags(p),
            "--mesh dp=2,tp=2,pp=2 --schedule interleaved-1f1b --chunks 2 "
            "--microbatches 4 --zero 1 --sp --recompute selective "
            "--stage-layers 1,2,2,1");
  Plan q;
  q.dp = 4;
  q.microbatches = 2;
  EXPECT_EQ(getPlanFlags(q), "--mesh dp=4,tp=1,pp=1 --microbatches 2");
}

} // namespace
