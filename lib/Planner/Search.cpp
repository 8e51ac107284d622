//===- Search.cpp - Finding the fastest parallel plan that fits -----------===//

#include "braid/Planner/Search.h"

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/TensorParallelPlan.h"
#include "braid/Schedule/Simulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::plan;
using sched::ScheduleKind;

static std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

/// Chunks per rank that `plan` runs.
static int chunksOf(const Plan &plan) {
  if (plan.pp == 1)
    return 1;
  llvm::Expected<int> v = sched::resolveNumChunks(plan.schedule, plan.chunks);
  if (!v) {
    llvm::consumeError(v.takeError());
    return 1;
  }
  return *v;
}

/// The pipeline rank of model stage `s` (chunk placement: a V for ZB-V,
/// round robin otherwise).
static int rankOfStage(const Plan &plan, int s) {
  if (plan.schedule == ScheduleKind::ZBV && plan.pp > 1)
    return s < plan.pp ? s : 2 * plan.pp - 1 - s;
  return s % plan.pp;
}

/// `plan` cut into one stage a layer, one micro-batch, 1F1B: its stage
/// costs are each layer's time alone (the embedding's ops added to the
/// first, the head's to the last).
static Plan perLayerPlan(const Plan &plan, int64_t layers) {
  Plan unit = plan;
  unit.pp = layers;
  unit.chunks = 0;
  unit.schedule = ScheduleKind::OneFOneB;
  unit.microbatches = 1;
  unit.stageLayers.clear();
  return unit;
}

//===----------------------------------------------------------------------===//
// Stage boundaries
//===----------------------------------------------------------------------===//

/// Splits `unit` (times of consecutive layers) into `groups` contiguous
/// non-empty groups minimising the largest sum; among those, groups at the
/// end take as much as they can (so stage 0, which holds the most
/// micro-batches in flight, gets the fewest layers).
static std::vector<int> partitionMinMax(const std::vector<double> &unit,
                                        int groups) {
  int n = unit.size();
  auto countGroups = [&](double limit) {
    int count = 0;
    double sum = 0;
    bool open = false;
    for (int i = n - 1; i >= 0; --i) {
      if (open && sum + unit[i] <= limit) {
        sum += unit[i];
        continue;
      }
      ++count;
      sum = unit[i];
      open = true;
    }
    return count;
  };
  double lo = *std::max_element(unit.begin(), unit.end());
  double hi = 0;
  for (double u : unit)
    hi += u;
  if (countGroups(lo) <= groups)
    hi = lo;
  for (int it = 0; it < 100 && hi - lo > 1e-12 * hi; ++it) {
    double mid = 0.5 * (lo + hi);
    if (countGroups(mid) <= groups)
      hi = mid;
    else
      lo = mid;
  }
  // Groups from the back under the limit `hi`.
  std::vector<int> sizes;
  double sum = 0;
  int size = 0;
  for (int i = n - 1; i >= 0; --i) {
    if (size > 0 && sum + unit[i] <= hi) {
      sum += unit[i];
      ++size;
      continue;
    }
    if (size > 0)
      sizes.push_back(size);
    sum = unit[i];
    size = 1;
  }
  sizes.push_back(size);
  std::reverse(sizes.begin(), sizes.end());
  // Fewer groups than wanted: split off the first layer of the first group
  // that has two or more (a split never raises the largest sum).
  while ((int)sizes.size() < groups) {
    auto it = llvm::find_if(sizes, [](int s) { return s >= 2; });
    if (it == sizes.end())
      break;
    --*it;
    sizes.insert(it, 1);
  }
  return sizes;
}

llvm::Expected<std::vector<int>>
mlir::braid::plan::balanceStageLayers(const PlanCostModel &model,
                                      const Plan &plan) {
  int64_t layers = model.getModel().getNumLayers();
  int stages = plan.pp * chunksOf(plan);
  if (stages > layers)
    return llvm::createStringError(
        llvm::formatv("{0} stages need at least {0} layers; the model has {1}",
                      stages, layers)
            .str());
  if (stages == 1)
    return std::vector<int>{(int)layers};
  Plan unit = perLayerPlan(plan, layers);
  llvm::Expected<std::vector<StageCost>> costs = model.getStageCosts(unit);
  if (!costs)
    return costs.takeError();
  std::vector<double> times;
  for (const StageCost &s : *costs)
    times.push_back(s.forward + s.backward + s.weight);
  return partitionMinMax(times, stages);
}

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

namespace {
struct Candidate {
  Plan plan;
  /// Lower bound on the step time: the busiest pipeline rank's work.
  double bound = 0;
  /// Peak memory without activations (a lower bound).
  double staticMemory = 0;
  size_t index = 0;
  int mesh = 0;
  /// Over the budget before activations: never simulated, kept for the
  /// smallest requirement when nothing fits.
  bool overStatic = false;
};

/// Peak in-flight micro-batches per rank of generated schedules (what the
/// memory check needs before a plan is simulated), by (kind, p, m, v).
class PeakCache {
public:
  llvm::Expected<std::vector<double>> get(const Plan &plan) {
    int v = chunksOf(plan);
    auto key =
        std::make_tuple((int)plan.schedule, plan.pp, plan.microbatches, v);
    auto it = peaks.find(key);
    if (it != peaks.end())
      return it->second;
    std::vector<double> peak;
    if (plan.pp == 1) {
      peak.assign(1, 1.0);
    } else if (plan.schedule == ScheduleKind::Auto) {
      // The automatic scheduler keeps at most p micro-batches (its default
      // limit) on every rank.
      peak.assign(plan.pp, double(plan.pp));
    } else {
      sched::ScheduleRequest request;
      request.kind = plan.schedule;
      request.numRanks = plan.pp;
      request.numMicrobatches = plan.microbatches;
      request.numChunks = plan.chunks;
      llvm::Expected<sched::Schedule> s = sched::generateSchedule(request);
      if (!s)
        return s.takeError();
      llvm::Expected<sched::SimulationResult> sim = sched::simulate(
          *s, sched::CostModel::uniform(plan.pp, v, 1, 1, 1, 0));
      if (!sim)
        return sim.takeError();
      peak = sim->peakMemory;
    }
    peaks.emplace(key, peak);
    return peak;
  }

private:
  std::map<std::tuple<int, int, int, int>, std::vector<double>> peaks;
};

/// A lower bound on the pipeline's time under any schedule: on rank r,
/// whose first stage is f, micro-batch 0 must pass the F of stages 0..f-1
/// before r starts (lead); r's F and B run one after another; and after
/// its last B, that micro-batch's B runs through stages f-1..0 (tail). So
/// the makespan is at least lead + all of r's work, and lead + r's F and B
/// + tail (W may overlap the tail).
double getPipelineBound(const Plan &plan,
                        const std::vector<StageCost> &stages) {
  int m = plan.microbatches;
  std::vector<double> work(plan.pp, 0.0), fb(plan.pp, 0.0);
  std::vector<int> first(plan.pp, (int)stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    int r = rankOfStage(plan, s);
    const StageCost &st = stages[s];
    work[r] += m * (st.forward + st.backward + st.weight);
    fb[r] += m * (st.forward + st.backward);
    first[r] = std::min(first[r], (int)s);
  }
  double bound = 0, lead = 0, tail = 0;
  // Ranks in the order of their first stage.
  std::vector<int> ranks(plan.pp);
  for (int r = 0; r < plan.pp; ++r)
    ranks[r] = r;
  llvm::sort(ranks, [&](int a, int b) { return first[a] < first[b]; });
  int next = 0;
  for (int r : ranks) {
    for (; next < first[r]; ++next) {
      lead += stages[next].forward;
      tail += stages[next].backward;
    }
    bound = std::max({bound, lead + work[r], lead + fb[r] + tail});
  }
  return bound;
}

/// Times equal within this relative tolerance are ties (ZeRO-1's
/// reduce_scatter + all_gather and an all_reduce cost the same).
constexpr double kTie = 1e-9;

/// For each of `values`, its tie class: classes numbered in increasing
/// order of value, each value (in sorted order) in the class of the
/// smallest value it is within kTie of. A sort must compare classes, not
/// "less unless within kTie": that is not a strict weak order (a ~ b and
/// b ~ c without a ~ c), which llvm::sort requires.
std::vector<int> getTieClasses(llvm::ArrayRef<double> values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::sort(order, [&](size_t a, size_t b) {
    if (values[a] != values[b])
      return values[a] < values[b];
    return a < b;
  });
  std::vector<int> classes(values.size());
  int current = -1;
  double first = 0;
  for (size_t i : order) {
    double scale = std::max(std::fabs(values[i]), std::fabs(first));
    if (current < 0 || std::fabs(values[i] - first) > kTie * scale) {
      ++current;
      first = values[i];
    }
    classes[i] = current;
  }
  return classes;
}

/// An entry of the top k: the first plan (in enumeration order) of its
/// kind, and the plans alike to it.
struct TopEntry {
  PlanCost cost;
  size_t index;
  std::vector<std::pair<Plan, size_t>> alike;
};

/// Orders `top` by step time, ties (within kTie) by the enumeration index,
/// which no two entries share: a total order, as a stable sort's.
void rankTop(std::vector<TopEntry> &top) {
  std::vector<double> times;
  for (const TopEntry &t : top)
    times.push_back(t.cost.stepTime);
  std::vector<int> classes = getTieClasses(times);
  std::vector<size_t> order(top.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::sort(order, [&](size_t a, size_t b) {
    if (classes[a] != classes[b])
      return classes[a] < classes[b];
    return top[a].index < top[b].index;
  });
  std::vector<TopEntry> ranked;
  ranked.reserve(top.size());
  for (size_t i : order)
    ranked.push_back(std::move(top[i]));
  top = std::move(ranked);
}
} // namespace

llvm::Expected<std::vector<std::vector<int>>>
mlir::braid::plan::balanceRankLayers(const PlanCostModel &model,
                                     const Plan &plan, int limit) {
  llvm::Expected<std::vector<int>> start = balanceStageLayers(model, plan);
  if (!start)
    return start.takeError();
  if (start->size() < 2)
    return std::vector<std::vector<int>>{*start};
  int stages = start->size();
  const ModelCost &mc = model.getModel();
  int64_t layers = mc.getNumLayers();
  // Each layer's F, B, W alone, and the embedding's and the head's: a
  // stage's times are their sums (what getStageCosts adds up, but for the
  // fixed part of ZeRO-3's gathers), so a split costs O(stages) to score.
  Plan unit = perLayerPlan(plan, layers);
  llvm::Expected<std::vector<StageCost>> perLayer = model.getStageCosts(unit);
  if (!perLayer)
    return perLayer.takeError();
  auto timesOf = [](const StageCost &st) {
    return std::array<double, 3>{st.forward, st.backward, st.weight};
  };
  std::vector<std::array<double, 3>> layer;
  for (const StageCost &st : *perLayer)
    layer.push_back(timesOf(st));
  std::array<double, 3> pre = {0, 0, 0}, post = {0, 0, 0};
  bool emptyFirst = mc.pre.hasWork(), emptyLast = mc.post.hasWork();
  for (bool first : {true, false}) {
    if (!(first ? emptyFirst : emptyLast))
      continue;
    Plan alone = unit;
    alone.pp = 2;
    alone.stageLayers = first ? std::vector<int>{0, (int)layers}
                              : std::vector<int>{(int)layers, 0};
    llvm::Expected<std::vector<StageCost>> c = model.getStageCosts(alone);
    if (!c)
      return c.takeError();
    (first ? pre : post) = timesOf((*c)[first ? 0 : 1]);
  }
  for (int p = 0; p < 3; ++p) {
    layer.front()[p] -= pre[p];
    layer.back()[p] -= post[p];
  }
  // Prefix sums: a stage's layers cost O(1).
  std::vector<std::array<double, 3>> prefix(layers + 1, {0, 0, 0});
  for (int64_t i = 0; i < layers; ++i)
    for (int p = 0; p < 3; ++p)
      prefix[i + 1][p] = prefix[i][p] + layer[i][p];
  // The descent's score: (busiest rank's work, sum of squared rank work);
  // none for a split the cost model refuses (a middle stage of no layer,
  // or an edge stage with nothing outside layers to run).
  using Score = std::array<double, 2>;
  std::vector<StageCost> costs(stages);
  std::vector<double> work(plan.pp);
  auto score = [&](const std::vector<int> &sizes) -> std::optional<Score> {
    std::fill(work.begin(), work.end(), 0.0);
    int64_t next = 0;
    for (int s = 0; s < stages; ++s) {
      if (sizes[s] == 0 && !(s == 0 && emptyFirst) &&
          !(s == stages - 1 && emptyLast))
        return std::nullopt;
      std::array<double, 3> t;
      for (int p = 0; p < 3; ++p)
        t[p] = (s == 0 ? pre[p] : 0) + (s == stages - 1 ? post[p] : 0) +
               prefix[next + sizes[s]][p] - prefix[next][p];
      next += sizes[s];
      costs[s].forward = t[0];
      costs[s].backward = t[1];
      costs[s].weight = t[2];
      work[rankOfStage(plan, s)] += t[0] + t[1] + t[2];
    }
    double busiest = 0, squares = 0;
    for (double w : work) {
      busiest = std::max(busiest, w);
      squares += w * w;
    }
    return Score{busiest, squares};
  };
  auto same = [](double a, double b) {
    return std::fabs(a - b) <= kTie * std::max(std::fabs(a), std::fabs(b));
  };
  auto better = [&](const Score &a, const Score &b) {
    for (int i = 0; i < 2; ++i)
      if (!same(a[i], b[i]))
        return a[i] < b[i];
    return false;
  };
  // Calls `visit(from, to)` with one layer moved from stage `from` to
  // stage `to` in `sizes` (restored after): between any two stages where
  // there are at most 16 (ZB-V's rank 0 holds the first and the last, so
  // a layer moves between them without passing rank 1), between
  // neighbours beyond.
  auto forEachMove = [&](std::vector<int> &sizes, auto visit) {
    for (int from = 0; from < stages; ++from)
      for (int to = 0; to < stages; ++to) {
        if (from == to || sizes[from] == 0 ||
            (stages > 16 && std::abs(from - to) != 1))
          continue;
        --sizes[from];
        ++sizes[to];
        visit();
        ++sizes[from];
        --sizes[to];
      }
  };
  std::vector<int> sizes = *start;
  std::optional<Score> current = score(sizes);
  if (!current)
    return std::vector<std::vector<int>>{};
  double startBusiest = (*current)[0];
  // Steepest descent; each step strictly improves the score, so it ends
  // (the cap guards against tolerance cycles).
  for (int64_t step = 0; step < 4 * layers * stages; ++step) {
    std::optional<std::vector<int>> next;
    Score nextScore = *current;
    forEachMove(sizes, [&] {
      std::optional<Score> s = score(sizes);
      if (s && better(*s, nextScore)) {
        next = sizes;
        nextScore = *s;
      }
    });
    if (!next)
      break;
    sizes = std::move(*next);
    current = nextScore;
  }
  // Nothing new where balancing the stages balanced the ranks as well.
  if (!((*current)[0] < startBusiest) || same((*current)[0], startBusiest))
    return std::vector<std::vector<int>>{};
  // Splits whose busiest rank is as busy, reached by such moves: where the
  // head runs last or with a layer changes the V's critical path, which
  // the schedule's simulation sees. Ordered by the pipeline bound (a
  // smaller first stage lets the later ranks start sooner), then the
  // spread of the ranks' work.
  std::vector<std::vector<int>> plateau = {sizes};
  for (size_t i = 0; i < plateau.size() && (int)plateau.size() < limit; ++i) {
    std::vector<int> from = plateau[i];
    forEachMove(from, [&] {
      if ((int)plateau.size() >= limit || llvm::is_contained(plateau, from))
        return;
      std::optional<Score> s = score(from);
      if (s && same((*s)[0], (*current)[0]))
        plateau.push_back(from);
    });
  }
  // Ranked by score, ties (within kTie, as `better`) in plateau order: by
  // each key's tie class, then the position (the stable sort's order,
  // without libstdc++ 12's deprecated get_temporary_buffer that
  // std::stable_sort uses).
  std::vector<double> bounds, spreads;
  for (const std::vector<int> &split : plateau) {
    // score() fills `costs`, which the bound reads.
    spreads.push_back((*score(split))[1]);
    Plan q = plan;
    q.stageLayers = split;
    bounds.push_back(getPipelineBound(q, costs));
  }
  std::vector<int> boundClass = getTieClasses(bounds);
  std::vector<int> spreadClass = getTieClasses(spreads);
  std::vector<size_t> ranked(plateau.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  llvm::sort(ranked, [&](size_t x, size_t y) {
    if (boundClass[x] != boundClass[y])
      return boundClass[x] < boundClass[y];
    if (spreadClass[x] != spreadClass[y])
      return spreadClass[x] < spreadClass[y];
    return x < y;
  });
  std::vector<std::vector<int>> result;
  for (size_t i : ranked)
    result.push_back(std::move(plateau[i]));
  return result;
}

bool mlir::braid::plan::isAlikePlan(const PlanCost &a, const PlanCost &b) {
  const Plan &p = a.plan, &q = b.plan;
  double scale = std::max(a.stepTime, b.stepTime);
  return p.dp == q.dp && p.tp == q.tp && p.pp == q.pp &&
         p.microBatchSize == q.microBatchSize &&
         p.microbatches == q.microbatches &&
         p.sequenceParallel == q.sequenceParallel &&
         p.recompute == q.recompute && p.stageLayers == q.stageLayers &&
         std::fabs(a.stepTime - b.stepTime) <= kTie * scale;
}

llvm::Expected<SearchResult>
mlir::braid::plan::searchPlans(PlanCostModel &costModel,
                               const SearchOptions &o) {
  auto start = std::chrono::steady_clock::now();
  const ModelCost &model = costModel.getModel();
  const Hardware &hw = costModel.getHardware();
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(msg.str());
  };
  if (o.devices < 1)
    return error(
        llvm::formatv("--devices must be positive, got {0}", o.devices));
  // A hardware description without the model's element type prices no
  // plan: say so once rather than once per mesh.
  if (llvm::Expected<double> peak = hw.getPeakFlops(model.dtype); !peak)
    return peak.takeError();
  int64_t layers = model.getNumLayers();
  int64_t batch = o.globalBatch > 0 ? o.globalBatch : model.batch;
  if (o.microBatchSamples > 0 && batch % o.microBatchSamples != 0)
    return error(llvm::formatv("the global batch {0} is not a multiple of "
                               "the program's batch {1} (one micro-batch "
                               "over all dp ranks)",
                               batch, o.microBatchSamples));
  if (o.microbatches && o.microBatchSamples > 0 &&
      *o.microbatches * o.microBatchSamples != batch)
    return error(llvm::formatv("{0} micro-batches of the program's batch {1} "
                               "make {2} samples, not the global batch {3}",
                               *o.microbatches, o.microBatchSamples,
                               *o.microbatches * o.microBatchSamples, batch));
  SearchResult result;
  result.globalBatch = batch;
  result.memoryBudget = o.memoryBudget > 0 ? o.memoryBudget : hw.deviceMemory;
  double budget = result.memoryBudget;
  std::vector<int64_t> mbsChoices = o.microBatchSizes;
  if (mbsChoices.empty())
    mbsChoices = {1, 2, 4, 8};
  std::vector<Recompute> recomputes = {Recompute::None, Recompute::Selective,
                                       Recompute::Full};
  if (o.recompute)
    recomputes = {*o.recompute};
  auto contains = [](const std::optional<std::vector<int>> &list, int x) {
    return !list || llvm::is_contained(*list, x);
  };

  std::vector<Candidate> candidates;
  std::map<std::tuple<int, int, int, int, int, int, int>, std::vector<int>>
      balanced;
  std::map<std::tuple<int, int, int, int, int, int, int, int>,
           std::vector<std::vector<int>>>
      rankBalanced;
  double inf = std::numeric_limits<double>::infinity();
  result.minMemory = inf;
  // Meshes: fewer pipeline stages first, then less tensor parallelism (so
  // that among equal times the simpler plan wins).
  for (int pp : divisors(o.devices)) {
    for (int tp : divisors(o.devices / pp)) {
      int dp = o.devices / pp / tp;
      if ((o.dp && *o.dp != dp) || (o.tp && *o.tp != tp) ||
          (o.pp && *o.pp != pp))
        continue;
      int meshIndex = result.meshes.size();
      MeshSummary &mesh = result.meshes.emplace_back();
      mesh.dp = dp;
      mesh.tp = tp;
      mesh.pp = pp;
      mesh.minMemory = inf;
      mesh.bestTime = inf;
      if (!contains(o.tpDegrees, tp)) {
        mesh.reason = llvm::formatv("tp={0}: the model's dimensions do not "
                                    "divide",
                                    tp);
        for (auto &[degree, why] : o.illegalTp)
          if (degree == tp)
            mesh.reason = why;
        continue;
      }
      if (pp > layers) {
        mesh.reason =
            llvm::formatv("pp={0}: the model has {1} layers", pp, layers);
        continue;
      }
      if (batch % dp != 0) {
        mesh.reason = llvm::formatv("dp={0} does not divide the global batch "
                                    "{1}",
                                    dp, batch);
        continue;
      }
      std::vector<int64_t> sizes;
      if (o.microBatchSamples > 0) {
        if (o.microBatchSamples % dp != 0) {
          mesh.reason = llvm::formatv("dp={0} does not divide the program's "
                                      "batch {1}",
                                      dp, o.microBatchSamples);
          continue;
        }
        sizes = {o.microBatchSamples / dp};
      } else {
        for (int64_t mbs : mbsChoices)
          if ((batch / dp) % mbs == 0)
            sizes.push_back(mbs);
      }
      std::string lastWhy;
      size_t before = candidates.size();
      for (int64_t mbs : sizes) {
        int m = batch / dp / mbs;
        if (o.microbatches && *o.microbatches != m)
          continue;
        // (schedule, chunks) pairs.
        std::vector<std::pair<ScheduleKind, int>> schedules;
        if (pp == 1) {
          schedules.push_back({ScheduleKind::OneFOneB, 0});
        } else {
          std::vector<ScheduleKind> kinds = o.schedules;
          if (o.schedule)
            kinds = {*o.schedule};
          for (ScheduleKind kind : kinds) {
            std::vector<int> vs;
            if (kind == ScheduleKind::Interleaved1F1B) {
              if (m % pp != 0) {
                lastWhy = llvm::formatv("interleaved-1f1b needs micro-batches "
                                        "({0}) to be a multiple of pp ({1})",
                                        m, pp);
                continue;
              }
              for (int v = 2; v <= std::max(o.maxChunks, 2); ++v)
                vs.push_back(v);
            } else if (kind == ScheduleKind::ZBV) {
              vs.push_back(2);
            } else {
              vs.push_back(1);
            }
            for (int v : vs) {
              if (o.chunks && *o.chunks != v)
                continue;
              if (int64_t(pp) * v > layers) {
                lastWhy = llvm::formatv("{0} x {1} chunks need {2} layers; "
                                        "the model has {3}",
                                        pp, v, pp * v, layers);
                continue;
              }
              int64_t built =
                  kind == ScheduleKind::ZBV ? std::max(m, 2 * pp - 1) : m;
              if (int64_t(pp) * v * built > sched::kMaxSchedulePairs) {
                lastWhy = llvm::formatv("pp x chunks x micro-batches = {0} is "
                                        "more than the schedule library "
                                        "simulates ({1})",
                                        int64_t(pp) * v * built,
                                        sched::kMaxSchedulePairs);
                continue;
              }
              if (kind == ScheduleKind::Auto &&
                  int64_t(pp) * m > o.maxAutoPairs)
                continue;
              schedules.push_back(
                  {kind, kind == ScheduleKind::Interleaved1F1B ? v : 0});
            }
          }
        }
        std::vector<int> zeros = {0};
        if (dp > 1)
          zeros = {0, 1, 2, 3};
        if (o.zero)
          zeros = {*o.zero};
        std::vector<bool> sps = {false};
        if (tp > 1 && contains(o.sequenceParallelTpDegrees, tp))
          sps = {false, true};
        if (o.sequenceParallel)
          sps = {*o.sequenceParallel};
        for (auto [kind, chunks] : schedules) {
          for (Recompute rc : recomputes) {
            for (bool sp : sps) {
              for (int zero : zeros) {
                Plan plan;
                plan.dp = dp;
                plan.tp = tp;
                plan.pp = pp;
                plan.chunks = chunks;
                plan.schedule = kind;
                plan.microBatchSize = mbs;
                plan.microbatches = m;
                plan.zero = zero;
                plan.sequenceParallel = sp;
                plan.recompute = rc;
                std::vector<std::vector<int>> layouts;
                int stages = pp * chunksOf(plan);
                if (o.stageLayers) {
                  layouts.push_back(*o.stageLayers);
                } else {
                  // Explicit even sizes (the first stages take the
                  // remainder): the compiled split is then the one costed.
                  std::vector<int> even;
                  if (stages > 1) {
                    even.assign(stages, layers / stages);
                    for (int64_t i = 0; i < layers % stages; ++i)
                      ++even[i];
                  }
                  layouts.push_back(even);
                  if (o.balanceStages && stages > 1) {
                    auto key = std::make_tuple(tp, (int)sp, (int)rc, (int)mbs,
                                               dp, zero, stages);
                    auto it = balanced.find(key);
                    if (it == balanced.end()) {
                      llvm::Expected<std::vector<int>> b =
                          balanceStageLayers(costModel, plan);
                      std::vector<int> sizes;
                      if (b)
                        sizes = *b;
                      else
                        llvm::consumeError(b.takeError());
                      it = balanced.emplace(key, sizes).first;
                    }
                    // Only where it differs from the even split.
                    if (!it->second.empty() && it->second != even)
                      layouts.push_back(it->second);
                    // Balanced per rank: differs where a rank runs
                    // several stages or a stage may hold the embedding or
                    // the head alone; it depends on the placement. With
                    // several chunks, the splits as balanced that the
                    // bound cannot rank go to the simulation too.
                    int chunksPerRank = stages / pp;
                    auto rankKey = std::make_tuple(
                        tp, (int)sp, (int)rc, (int)mbs, zero == 3 ? dp : 0, pp,
                        stages, (int)(kind == ScheduleKind::ZBV));
                    auto rt = rankBalanced.find(rankKey);
                    if (rt == rankBalanced.end()) {
                      llvm::Expected<std::vector<std::vector<int>>> b =
                          balanceRankLayers(costModel, plan,
                                            chunksPerRank > 1 ? 4 : 1);
                      std::vector<std::vector<int>> splits;
                      if (b)
                        splits = std::move(*b);
                      else
                        llvm::consumeError(b.takeError());
                      rt = rankBalanced.emplace(rankKey, splits).first;
                    }
                    for (const std::vector<int> &split : rt->second)
                      if (!llvm::is_contained(layouts, split))
                        layouts.push_back(split);
                  }
                }
                for (std::vector<int> &layout : layouts) {
                  plan.stageLayers = layout;
                  ++result.candidates;
                  llvm::Expected<std::vector<StageCost>> stageCosts =
                      costModel.getStageCosts(plan);
                  if (!stageCosts) {
                    lastWhy = llvm::toString(stageCosts.takeError());
                    ++result.invalid;
                    continue;
                  }
                  // Memory before activations: every plan over the budget
                  // here is over it whatever its schedule.
                  std::vector<RankMemory> memory = costModel.getMemory(
                      plan, *stageCosts, std::vector<double>(pp, 0.0));
                  double staticMemory = 0;
                  for (const RankMemory &r : memory)
                    staticMemory = std::max(staticMemory, r.getTotal());
                  Candidate c;
                  c.plan = plan;
                  c.bound = getPipelineBound(plan, *stageCosts);
                  c.staticMemory = staticMemory;
                  c.overStatic = staticMemory > budget;
                  c.index = candidates.size();
                  c.mesh = meshIndex;
                  candidates.push_back(std::move(c));
                }
              }
            }
          }
        }
      }
      if (candidates.size() == before)
        mesh.reason = lastWhy.empty()
                          ? llvm::formatv("no micro-batch size divides the "
                                          "{0} samples per dp rank",
                                          batch / dp)
                                .str()
                          : lastWhy;
    }
  }

  if (candidates.empty()) {
    std::string why;
    llvm::raw_string_ostream os(why);
    os << llvm::formatv("no plan can split the model ({0} layers, batch "
                        "{1}) over {2} devices:",
                        layers, batch, o.devices);
    for (const MeshSummary &m : result.meshes)
      os << llvm::formatv("\n  dp={0},tp={1},pp={2}: {3}", m.dp, m.tp, m.pp,
                          m.reason);
    if (result.meshes.empty())
      os << " no dp x tp x pp of it matches the fixed degrees";
    return error(why);
  }

  // Cheapest first; simulate until the bound passes the k-th best.
  llvm::sort(candidates, [](const Candidate &a, const Candidate &b) {
    if (a.bound != b.bound)
      return a.bound < b.bound;
    return a.index < b.index;
  });
  PeakCache peaks;
  std::vector<TopEntry> top;
  int k = std::max(1, o.topK);
  // Per candidate (in sorted order): its memory with the schedule's peak
  // from the cache (`checked`), and the smallest budget the search accepts
  // it under (`required`: the larger of that and the simulated peak, which
  // buffers held between B and W raise and the automatic scheduler may
  // lower); -1 not computed, NaN could not be costed.
  std::vector<double> checked(candidates.size(), -1);
  std::vector<double> required(candidates.size(), -1);
  double nan = std::numeric_limits<double>::quiet_NaN();
  auto checkMemory = [&](const Candidate &c) -> llvm::Expected<double> {
    llvm::Expected<std::vector<double>> peak = peaks.get(c.plan);
    if (!peak)
      return peak.takeError();
    llvm::Expected<std::vector<StageCost>> stageCosts =
        costModel.getStageCosts(c.plan);
    if (!stageCosts)
      return stageCosts.takeError();
    double total = 0;
    for (const RankMemory &r : costModel.getMemory(c.plan, *stageCosts, *peak))
      total = std::max(total, r.getTotal());
    return total;
  };
  // Two passes: the automatic scheduler searches per plan, so its plans go
  // after the others have set a k-th best that prunes most of them.
  for (int pass = 0; pass < 2; ++pass) {
    bool autoPass = pass == 1;
    size_t i = 0;
    for (; i < candidates.size(); ++i) {
      const Candidate &c = candidates[i];
      if ((c.plan.schedule == ScheduleKind::Auto && c.plan.pp > 1) != autoPass)
        continue;
      MeshSummary &mesh = result.meshes[c.mesh];
      if (c.overStatic) {
        ++result.overMemory;
        continue;
      }
      if ((int)top.size() == k &&
          c.bound > top.back().cost.stepTime * (1 + kTie))
        break;
      llvm::Expected<double> memory = checkMemory(c);
      if (!memory) {
        llvm::consumeError(memory.takeError());
        ++result.invalid;
        checked[i] = required[i] = nan;
        continue;
      }
      checked[i] = *memory;
      if (*memory > budget) {
        ++result.overMemory;
        continue;
      }
      llvm::Expected<PlanCost> cost = costModel.evaluate(c.plan);
      if (!cost) {
        llvm::consumeError(cost.takeError());
        ++result.invalid;
        required[i] = nan;
        continue;
      }
      // The simulated schedule's memory decides (the automatic scheduler's
      // may be below the limit assumed above, buffers held between B and W
      // above it). Each candidate is counted once: simulated means it fit.
      double peak = cost->getPeakMemory();
      required[i] = std::max(*memory, peak);
      if (peak > budget) {
        ++result.overMemory;
        continue;
      }
      ++result.simulated;
      if (peak < result.minMemory) {
        result.minMemory = peak;
        result.minMemoryPlan = c.plan;
      }
      if (cost->stepTime < mesh.bestTime) {
        mesh.bestTime = cost->stepTime;
        mesh.bounded = false;
        mesh.plan = c.plan;
      }
      // A plan alike to one of the top k is folded into it (the first of
      // the kind in enumeration order stays the entry).
      auto same = llvm::find_if(
          top, [&](const TopEntry &t) { return isAlikePlan(*cost, t.cost); });
      if (same != top.end()) {
        if (c.index < same->index) {
          same->alike.push_back({same->cost.plan, same->index});
          same->cost = std::move(*cost);
          same->index = c.index;
        } else {
          same->alike.push_back({c.plan, c.index});
        }
        llvm::sort(same->alike, [](const auto &a, const auto &b) {
          return a.second < b.second;
        });
        rankTop(top);
        continue;
      }
      top.push_back(TopEntry{std::move(*cost), c.index, {}});
      rankTop(top);
      if ((int)top.size() > k)
        top.pop_back();
    }
    for (; i < candidates.size(); ++i) {
      const Candidate &c = candidates[i];
      if ((c.plan.schedule == ScheduleKind::Auto && c.plan.pp > 1) != autoPass)
        continue;
      if (c.overStatic) {
        ++result.overMemory;
        continue;
      }
      ++result.pruned;
      MeshSummary &mesh = result.meshes[c.mesh];
      if (mesh.plan == std::nullopt ||
          (mesh.bounded && c.bound < mesh.bestTime)) {
        mesh.bestTime = c.bound;
        mesh.bounded = true;
        mesh.plan = c.plan;
      }
    }
  }
  // A mesh none of whose plans fits (none was pruned either): its smallest
  // requirement, exactly. Its plans in the order of a lower bound on their
  // requirement (the memory before activations, or with the cached peak),
  // until that bound reaches the smallest found; a plan is simulated only
  // where its cached peak's memory is below it (most meshes stop after a
  // few). Nothing fits anywhere: the meshes' smallest is the search's.
  // Without exactMeshMemory and with a plan found, the smallest lower bound.
  bool exact = o.exactMeshMemory || top.empty();
  if (top.empty())
    result.minMemory = inf;
  std::vector<std::vector<size_t>> byMesh(result.meshes.size());
  for (size_t j = 0; j < candidates.size(); ++j)
    byMesh[candidates[j].mesh].push_back(j);
  for (size_t mi = 0; mi < result.meshes.size(); ++mi) {
    MeshSummary &mesh = result.meshes[mi];
    if (mesh.bestTime < inf || !mesh.reason.empty())
      continue;
    auto lower = [&](size_t j) {
      return checked[j] >= 0 ? checked[j] : candidates[j].staticMemory;
    };
    std::vector<size_t> order;
    for (size_t j : byMesh[mi]) {
      if (required[j] >= 0 && required[j] < mesh.minMemory) {
        mesh.minMemory = required[j];
        mesh.plan = candidates[j].plan;
      }
      if (required[j] < 0)
        order.push_back(j);
    }
    llvm::sort(order, [&](size_t a, size_t b) {
      if (lower(a) != lower(b))
        return lower(a) < lower(b);
      return candidates[a].index < candidates[b].index;
    });
    std::string refusal;
    for (size_t j : order) {
      if (lower(j) >= mesh.minMemory)
        break;
      if (!exact) {
        mesh.minMemory = lower(j);
        mesh.plan = candidates[j].plan;
        break;
      }
      if (checked[j] < 0) {
        llvm::Expected<double> memory = checkMemory(candidates[j]);
        if (!memory) {
          llvm::consumeError(memory.takeError());
          continue;
        }
        checked[j] = *memory;
        if (*memory >= mesh.minMemory)
          continue;
      }
      llvm::Expected<PlanCost> cost = costModel.evaluate(candidates[j].plan);
      if (!cost) {
        std::string why = llvm::toString(cost.takeError());
        if (refusal.empty())
          refusal = why;
        continue;
      }
      required[j] = std::max(checked[j], cost->getPeakMemory());
      if (required[j] < mesh.minMemory) {
        mesh.minMemory = required[j];
        mesh.plan = candidates[j].plan;
      }
    }
    if (mesh.minMemory == inf) {
      mesh.status = MeshSummary::Status::Uncosted;
      mesh.reason =
          refusal.empty() ? "none of its plans could be costed" : refusal;
      continue;
    }
    if (top.empty() && mesh.minMemory < result.minMemory) {
      result.minMemory = mesh.minMemory;
      result.minMemoryPlan = mesh.plan;
    }
  }
  for (size_t t = 0; t < top.size(); ++t) {
    const Plan &p = top[t].cost.plan;
    for (MeshSummary &mesh : result.meshes)
      if (mesh.dp == p.dp && mesh.tp == p.tp && mesh.pp == p.pp &&
          mesh.status == MeshSummary::Status::Illegal)
        mesh.status =
            t == 0 ? MeshSummary::Status::Chosen : MeshSummary::Status::Ranked;
  }
  for (MeshSummary &mesh : result.meshes) {
    if (mesh.status != MeshSummary::Status::Illegal || !mesh.reason.empty())
      continue;
    if (mesh.bestTime < inf)
      mesh.status = MeshSummary::Status::Slower;
    else
      mesh.status = MeshSummary::Status::Memory;
  }
  for (TopEntry &t : top) {
    result.top.push_back(std::move(t.cost));
    std::vector<Plan> &alike = result.alike.emplace_back();
    for (auto &[plan, index] : t.alike)
      alike.push_back(std::move(plan));
  }
  if (result.minMemory == inf)
    result.minMemory = 0;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

//===----------------------------------------------------------------------===//
// Flags and printing
//===----------------------------------------------------------------------===//

std::string mlir::braid::plan::getPlanFlags(const Plan &plan) {
  std::string s =
      llvm::formatv("--mesh dp={0},tp={1},pp={2}", plan.dp, plan.tp, plan.pp)
          .str();
  if (plan.pp > 1) {
    s += " --schedule " + sched::getScheduleKindName(plan.schedule).str();
    if (plan.schedule == ScheduleKind::Interleaved1F1B)
      s += " --chunks " + std::to_string(chunksOf(plan));
  }
  s += " --microbatches " + std::to_string(plan.microbatches);
  if (plan.zero)
    s += " --zero " + std::to_string(plan.zero);
  if (plan.sequenceParallel)
    s += " --sp";
  if (plan.recompute != Recompute::None)
    s += " --recompute " + getRecomputeName(plan.recompute).str();
  if (plan.pp > 1 && !plan.stageLayers.empty()) {
    s += " --stage-layers ";
    for (size_t i = 0; i < plan.stageLayers.size(); ++i)
      s += (i ? "," : "") + std::to_string(plan.stageLayers[i]);
  }
  return s;
}

/// Layer instances per stage as the cost model places them.
static std::string stageSizes(const PlanCost &cost) {
  std::string s;
  for (size_t i = 0; i < cost.stages.size(); ++i)
    s += (i ? "," : "") + std::to_string(cost.stages[i].numLayers);
  return s;
}

/// --explain's list: every mesh and why it was or was not chosen.
static void printMeshes(llvm::raw_ostream &os, const SearchResult &result) {
  os << "meshes (dp x tp x pp) and why each was or was not chosen:\n";
  for (const MeshSummary &m : result.meshes) {
    os << llvm::formatv("  dp={0,-4} tp={1,-3} pp={2,-4} ", m.dp, m.tp, m.pp);
    switch (m.status) {
    case MeshSummary::Status::Chosen:
      os << "chosen";
      break;
    case MeshSummary::Status::Ranked:
      os << llvm::formatv("ranked, best {0}", formatSeconds(m.bestTime));
      break;
    case MeshSummary::Status::Slower: {
      double first = result.top.front().stepTime;
      os << llvm::formatv("time: {0}{1} ({2:F1}% slower than #1)",
                          m.bounded ? ">= " : "", formatSeconds(m.bestTime),
                          100 * (m.bestTime - first) / first);
      break;
    }
    case MeshSummary::Status::Memory: {
      auto [need, budget] =
          formatNeedAndBudget(m.minMemory, result.memoryBudget);
      os << "memory: needs " << need << ", budget " << budget;
      break;
    }
    case MeshSummary::Status::Illegal:
      os << "divisibility: " << m.reason;
      break;
    case MeshSummary::Status::Uncosted:
      os << "not costed: " << m.reason;
      break;
    }
    os << "\n";
  }
}

void mlir::braid::plan::printSearchResult(llvm::raw_ostream &os,
                                          const SearchResult &result,
                                          const PlanCostModel &model,
                                          bool explain,
                                          double tokensPerSample) {
  const Hardware &hw = model.getHardware();
  const ModelCost &mc = model.getModel();
  os << llvm::formatv("searched {0} candidates in {1:F2} s: {2} over the "
                      "memory budget ({3}), {4} invalid, {5} simulated, {6} "
                      "pruned by the time bound\n",
                      result.candidates, result.seconds, result.overMemory,
                      formatMemory(result.memoryBudget), result.invalid,
                      result.simulated, result.pruned);
  // Nothing fits: with --explain, why each mesh was rejected (the caller
  // then reports the smallest requirement).
  if (result.top.empty()) {
    if (explain)
      printMeshes(os, result);
    return;
  }
  os << llvm::formatv("{0,-3} {1,-46} {2,11} {3,11} {4,6} {5,11} {6,6} {7,10} "
                      "{8,10} {9,10}\n",
                      "#", "plan", "step",
                      tokensPerSample > 0 ? "tokens/s" : "samples/s", "MFU",
                      "memory", "bubble", "tp comm", "pp comm", "dp comm");
  if (tokensPerSample <= 0)
    tokensPerSample = 1;
  (void)mc;
  for (size_t i = 0; i < result.top.size(); ++i) {
    const PlanCost &c = result.top[i];
    const Plan &p = c.plan;
    std::string name =
        llvm::formatv("dp{0} tp{1} pp{2} {3}{4} mbs{5} m{6}", p.dp, p.tp, p.pp,
                      p.pp > 1 ? sched::getScheduleKindName(p.schedule).str()
                               : std::string("-"),
                      p.pp > 1 && chunksOf(p) > 1
                          ? llvm::formatv("/v{0}", chunksOf(p)).str()
                          : std::string(),
                      p.microBatchSize, p.microbatches)
            .str();
    if (p.zero)
      name += " z" + std::to_string(p.zero);
    if (p.sequenceParallel)
      name += " sp";
    if (p.recompute != Recompute::None)
      name += " rc=" + getRecomputeName(p.recompute).str();
    if (p.pp > 1)
      name += " [" + stageSizes(c) + "]";
    os << llvm::formatv("{0,-3} {1,-46} {2,11} {3,11:F1} {4,5:F1}% {5,11} "
                        "{6,6:F3} {7,10} {8,10} {9,10}\n",
                        i + 1, name, formatSeconds(c.stepTime),
                        c.samplesPerSecond * tokensPerSample, 100 * c.mfu,
                        formatMemory(c.getPeakMemory()), c.bubbleRate,
                        formatMemory(c.tpCommBytes),
                        formatMemory(c.ppCommBytes),
                        formatMemory(c.dpCommBytes));
    if (i < result.alike.size() && !result.alike[i].empty()) {
      // What the folded plans change: the schedule, the ZeRO stage.
      os << "      same time:";
      const char *sep = " ";
      for (const Plan &q : result.alike[i]) {
        std::string d;
        if (q.schedule != p.schedule || chunksOf(q) != chunksOf(p))
          d += sched::getScheduleKindName(q.schedule).str() +
               (chunksOf(q) > 1 ? llvm::formatv("/v{0}", chunksOf(q)).str()
                                : std::string());
        if (q.zero != p.zero)
          d += (d.empty() ? "z" : " z") + std::to_string(q.zero);
        os << sep << d;
        sep = ", ";
      }
      os << "\n";
    }
  }
  os << "(step: predicted on " << hw.name
     << "; memory: the largest rank's; comm: bytes per rank per step; "
        "[layers per stage]; same time: plans predicted alike but for the "
        "schedule or ZeRO stage, folded into the row above)\n";
  // Why the winner wins: the parts of the step against the best plan of
  // another mesh or schedule (or else the runner-up).
  if (result.top.size() >= 2) {
    const PlanCost &a = result.top[0];
    size_t other = 1;
    auto shape = [](const Plan &p) {
      return std::make_tuple(p.dp, p.tp, p.pp, (int)p.schedule, chunksOf(p));
    };
    for (size_t i = 1; i < result.top.size(); ++i)
      if (shape(result.top[i].plan) != shape(a.plan)) {
        other = i;
        break;
      }
    const PlanCost &b = result.top[other];
    double gain = b.stepTime > 0 ? (b.stepTime - a.stepTime) / b.stepTime : 0;
    if (gain > kTie)
      os << llvm::formatv("why #1: {0:F1}% faster than #{1}", 100 * gain,
                          other + 1);
    else
      os << llvm::formatv("why #1: as fast as #{0}", other + 1);
    struct Part {
      const char *name;
      double a, b;
    } parts[] = {{"compute", a.computeTime, b.computeTime},
                 {"tp comm", a.tpCommTime, b.tpCommTime},
                 {"bubble", a.bubbleTime, b.bubbleTime},
                 {"dp comm", a.dpCommTime, b.dpCommTime},
                 {"optimizer", a.optimizerTime, b.optimizerTime}};
    const char *sep = ": ";
    for (const Part &part : parts) {
      double d = part.a - part.b;
      if (std::fabs(d) <= 1e-6 * std::max(a.stepTime, b.stepTime))
        continue;
      os << sep << part.name << " " << (d < 0 ? "-" : "+")
         << formatSeconds(std::fabs(d));
      sep = ", ";
    }
    if (std::string(sep) == ": ")
      os << ", listed first (ties go to fewer stages, less tp, then less "
            "ZeRO/sp/recomputation)";
    if (a.getPeakMemory() != b.getPeakMemory())
      os << llvm::formatv("; memory {0} against {1}",
                          formatMemory(a.getPeakMemory()),
                          formatMemory(b.getPeakMemory()));
    os << "\n";
  }
  if (explain)
    printMeshes(os, result);
}

//===----------------------------------------------------------------------===//
// What the model's dimensions allow
//===----------------------------------------------------------------------===//

ParallelismLimits mlir::braid::plan::getParallelismLimits(ModuleOp module,
                                                          StringRef entry,
                                                          int maxDegree) {
  ParallelismLimits limits;
  if (auto fn = module.lookupSymbol<func::FuncOp>(entry))
    if (fn.getNumArguments() > 0)
      if (auto t = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[0]))
        if (t.getRank() > 0)
          limits.batch = t.getDimSize(0);
  // Every split the structural planner decides, attention heads and the
  // residual stream's sequence.
  struct Split {
    int64_t size;
    std::string what;
  };
  std::vector<Split> splits, sequence;
  TensorParallelPlan tpPlan(module);
  llvm::StringSet<> seen;
  module.walk([&](ParamOp param) {
    if (param.getState())
      return;
    const TensorParallelDecision &d = tpPlan.lookup(param);
    auto type = dyn_cast<RankedTensorType>(param.getType());
    if (!type || d.role == TensorParallelDecision::Role::None || d.dim < 0 ||
        d.dim >= type.getRank() || d.optional)
      return;
    std::string name = tpPlan.fullNames(param).front();
    if (!seen.insert(name).second)
      return;
    splits.push_back(
        {type.getDimSize(d.dim) / d.blocks,
         llvm::formatv("parameter '{0}' dimension {1} ({2})", name, d.dim,
                       d.blocks > 1
                           ? llvm::formatv("{0} blocks of {1}", d.blocks,
                                           type.getDimSize(d.dim) / d.blocks)
                                 .str()
                           : std::to_string(type.getDimSize(d.dim)))
             .str()});
  });
  module.walk([&](AttentionOp op) {
    auto q = cast<RankedTensorType>(op.getQuery().getType());
    auto k = cast<RankedTensorType>(op.getKey().getType());
    splits.push_back(
        {q.getDimSize(2),
         llvm::formatv("attention heads ({0})", q.getDimSize(2)).str()});
    splits.push_back(
        {k.getDimSize(2),
         llvm::formatv("key/value heads ({0})", k.getDimSize(2)).str()});
  });
  for (auto layer : module.getOps<LayerOp>()) {
    Block &body = layer.getBody().front();
    if (body.getNumArguments() == 0)
      continue;
    auto type = dyn_cast<RankedTensorType>(body.getArgument(0).getType());
    if (!type || type.getRank() != 3)
      continue;
    limits.sequence = type.getDimSize(1);
    sequence.push_back({type.getDimSize(1),
                        llvm::formatv("sequence length {0} of layer @{1}",
                                      type.getDimSize(1), layer.getSymName())
                            .str()});
  }
  for (int tp = 1; tp <= maxDegree; ++tp) {
    const Split *bad = nullptr;
    for (const Split &s : splits)
      if (s.size % tp != 0) {
        bad = &s;
        break;
      }
    if (bad) {
      limits.illegalTp.push_back(
          {tp, llvm::formatv("tp={0} does not divide {1}", tp, bad->what)});
      continue;
    }
    limits.tpDegrees.push_back(tp);
    if (llvm::all_of(sequence,
                     [&](const Split &s) { return s.size % tp == 0; }))
      limits.sequenceParallelTpDegrees.push_back(tp);
  }
  return limits;
}
