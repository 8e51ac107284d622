//===- PlanCost.cpp - Step time and memory of a parallel plan -------------===//

#include "braid/Planner/PlanCost.h"

#include "braid/Schedule/Simulator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

using namespace mlir::braid;
using namespace mlir::braid::plan;

std::string Plan::str() const {
  std::string s = llvm::formatv("dp={0},tp={1},pp={2} schedule={3}", dp, tp, pp,
                                sched::getScheduleKindName(schedule))
                      .str();
  if (chunks)
    s += llvm::formatv(" chunks={0}", chunks).str();
  s += llvm::formatv(" mbs={0} microbatches={1} zero={2}", microBatchSize,
                     microbatches, zero)
           .str();
  if (sequenceParallel)
    s += " sp";
  s += " recompute=" + getRecomputeName(recompute).str();
  if (!stageLayers.empty()) {
    s += " stages=";
    for (size_t i = 0; i < stageLayers.size(); ++i)
      s += (i ? ":" : "") + std::to_string(stageLayers[i]);
  }
  return s;
}

double PlanCost::getPeakMemory() const {
  double m = 0;
  for (const RankMemory &r : memory)
    m = std::max(m, r.getTotal());
  return m;
}

struct PlanCostModel::ScheduleCache {
  std::map<std::tuple<int, int, int, int>, sched::Schedule> schedules;
};

PlanCostModel::PlanCostModel(const ModelCost &model, const Hardware &hardware,
                             TrainingConfig config)
    : model(model), hardware(hardware), config(config),
      cache(std::make_unique<ScheduleCache>()) {
  llvm::Expected<double> p = hardware.getPeakFlops(model.dtype);
  if (p)
    peak = *p;
  else
    llvm::consumeError(p.takeError());
  if (this->config.gradBytes <= 0)
    this->config.gradBytes = model.elementBytes;
}

PlanCostModel::~PlanCostModel() = default;

double PlanCostModel::getStoredBytes(double bytes) const {
  // ModelCost counts the source's element size (the input module, before
  // braid-mixed-precision); bf16-mixed stores saved values, the f32 ones
  // holding bf16 values included, in 2 bytes (docs/training.md).
  if (config.precision == Precision::BF16Mixed && model.elementBytes > 2)
    bytes *= 2 / model.elementBytes;
  return bytes;
}

double PlanCostModel::getHeldBytes(const SegmentCost &seg, Recompute recompute,
                                   int tp, bool sequenceParallel) const {
  return getStoredBytes(seg.getHeldBytes(recompute, tp, sequenceParallel));
}

double PlanCostModel::getSavedBytes(const SegmentCost &seg, Recompute recompute,
                                    int tp, bool sequenceParallel) const {
  return getStoredBytes(seg.getSavedBytes(recompute, tp, sequenceParallel));
}

static int resolveChunks(const Plan &plan) {
  if (plan.pp == 1)
    return plan.chunks > 0 ? plan.chunks : 1;
  llvm::Expected<int> v = sched::resolveNumChunks(plan.schedule, plan.chunks);
  if (!v) {
    llvm::consumeError(v.takeError());
    return -1;
  }
  return *v;
}

llvm::Error PlanCostModel::validate(const Plan &plan) const {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError((plan.str() + ": " + msg).str());
  };
  if (peak <= 0) {
    llvm::Expected<double> p = hardware.getPeakFlops(model.dtype);
    if (!p)
      return p.takeError();
  }
  if (plan.dp < 1 || plan.tp < 1 || plan.pp < 1)
    return fail("every degree must be at least 1");
  if (plan.microBatchSize < 1 || plan.microbatches < 1)
    return fail("micro-batch size and count must be at least 1");
  if (plan.zero < 0 || plan.zero > 3)
    return fail("ZeRO stage must be 0-3");
  if (plan.pp == 1 && plan.chunks > 1)
    return fail("chunks > 1 needs a pipeline (pp > 1)");
  if (plan.pp > 1) {
    llvm::Expected<int> v = sched::resolveNumChunks(plan.schedule, plan.chunks);
    if (!v)
      return fail(llvm::toString(v.takeError()));
    if (plan.schedule == sched::ScheduleKind::Interleaved1F1B &&
        plan.microbatches % plan.pp != 0)
      return fail(llvm::formatv("interleaved-1f1b needs micro-batches ({0}) "
                                "to be a multiple of pp ({1})",
                                plan.microbatches, plan.pp));
    if (int64_t(plan.pp) * *v * plan.microbatches > sched::kMaxSchedulePairs)
      return fail(llvm::formatv("pp * chunks * micro-batches = {0} is more "
                                "than the schedule library simulates ({1})",
                                int64_t(plan.pp) * *v * plan.microbatches,
                                sched::kMaxSchedulePairs));
  }
  int stages = plan.pp * resolveChunks(plan);
  int64_t layers = model.getNumLayers();
  if (!plan.stageLayers.empty()) {
    if ((int)plan.stageLayers.size() != stages)
      return fail(llvm::formatv("{0} stage sizes given for {1} stages (pp * "
                                "chunks)",
                                plan.stageLayers.size(), stages));
    int64_t sum = 0;
    for (int s = 0; s < stages; ++s) {
      int n = plan.stageLayers[s];
      if (n < 0)
        return fail(
            llvm::formatv("stage {0} has a negative layer count {1}", s, n));
      // A stage of no layer runs the ops before the layers (stage 0) or
      // after them (the last), as braid-pipeline-split places them.
      bool edge = (s == 0 && model.pre.hasWork()) ||
                  (s == stages - 1 && model.post.hasWork());
      if (n == 0 && !edge)
        return fail(llvm::formatv(
            "stage {0} would run nothing: only the first stage (the ops "
            "before the layers) and the last (the ops after them) can have "
            "0 layers, where there are such ops",
            s));
      sum += n;
    }
    if (sum != layers)
      return fail(llvm::formatv("stage sizes sum to {0}, the model has {1} "
                                "layers",
                                sum, layers));
  } else if (stages > 1 && layers < stages) {
    return fail(llvm::formatv("{0} layers cannot fill {1} stages (pp * "
                              "chunks)",
                              layers, stages));
  }
  return llvm::Error::success();
}

/// Layer instances per stage.
static std::vector<int> stageSizes(const Plan &plan, int stages,
                                   int64_t layers) {
  if (!plan.stageLayers.empty())
    return plan.stageLayers;
  std::vector<int> sizes(stages, layers / stages);
  for (int64_t i = 0; i < layers % stages; ++i)
    ++sizes[i];
  return sizes;
}

/// Whether the pipeline is V-shaped (ZB-V): rank r holds stages r and
/// 2 pp - 1 - r.
static bool isVShape(const Plan &plan) {
  return plan.schedule == sched::ScheduleKind::ZBV && plan.pp > 1;
}

/// The model stage of chunk `chunk` on pipeline rank `rank`: chunk x pp +
/// rank, or along ZB-V's V.
static int getStageOf(const Plan &plan, int rank, int chunk) {
  if (isVShape(plan))
    return chunk == 0 ? rank : 2 * plan.pp - 1 - rank;
  return chunk * plan.pp + rank;
}

/// The pipeline rank that runs model stage `stage` (getStageOf's inverse).
static int getRankOf(const Plan &plan, int stage) {
  if (isVShape(plan))
    return stage < plan.pp ? stage : 2 * plan.pp - 1 - stage;
  return stage % plan.pp;
}

/// The model stages of pipeline rank `rank`, one per chunk.
static llvm::SmallVector<int, 2> getRankStages(const Plan &plan, int numStages,
                                               int rank) {
  llvm::SmallVector<int, 2> out;
  for (int c = 0, chunks = std::max(1, numStages / plan.pp); c < chunks; ++c)
    out.push_back(getStageOf(plan, rank, c));
  return out;
}

namespace {
/// What the stages of one pipeline rank hold together.
struct RankSums {
  double params = 0;
  double paramTensors = 0;
  double layers = 0;
  double activationBytes = 0;
  double backwardParams = 0;
  /// B + W seconds per micro-batch.
  double backwardTime = 0;
};
} // namespace

/// The share of each parameter a rank that holds `params` of them holds,
/// as getGradientBuckets takes it (1 / tp of the divided ones, about).
static double getRankShare(const ModelCost &model, double params) {
  double all = model.getParams();
  return all > 0 ? params / all : 1;
}

static RankSums sumRank(const Plan &plan, const std::vector<StageCost> &stages,
                        int rank) {
  RankSums sum;
  for (int s : getRankStages(plan, stages.size(), rank)) {
    const StageCost &st = stages[s];
    sum.params += st.params;
    sum.paramTensors += st.paramTensors;
    sum.layers += st.numLayers;
    sum.activationBytes += st.activationBytes;
    sum.backwardParams += st.backwardParams;
    sum.backwardTime += st.backward + st.weight;
  }
  return sum;
}

llvm::Expected<std::vector<StageCost>>
PlanCostModel::getStageCosts(const Plan &plan) const {
  if (llvm::Error e = validate(plan))
    return std::move(e);
  int numStages = plan.pp * resolveChunks(plan);
  std::vector<int> sizes = stageSizes(plan, numStages, model.getNumLayers());
  double scale = double(plan.microBatchSize) / model.batch;
  int r = (int)plan.recompute;
  int tp = plan.tp;
  bool sp = plan.sequenceParallel && tp > 1;
  const LinkLevel &tpLevel = hardware.getLevel(tp > hardware.devicesPerNode);
  const LinkLevel &dpLevel =
      hardware.getLevel(tp * plan.dp > hardware.devicesPerNode);
  double rate[kNumOpClasses];
  for (int c = 0; c < kNumOpClasses; ++c)
    rate[c] = isBytesBound(OpClass(c))
                  ? hardware.memoryBandwidth * hardware.efficiency[c]
                  : peak * hardware.efficiency[c];
  // The attention kernels' per-row streaming beside their products.
  double streamRate[kNumOpClasses] = {};
  streamRate[(int)OpClass::Attention] = hardware.attentionBandwidth;
  streamRate[(int)OpClass::AttentionBackward] =
      hardware.attentionBackwardBandwidth;
  std::vector<StageCost> stages(numStages);
  // Blocking collectives per pass and micro-batch of each stage: tp's and
  // ZeRO-3's; their waits for descheduled peers are added once every
  // stage's compute is known (getDescheduledWait).
  std::vector<std::array<double, kNumPassKinds>> tpCalls(numStages),
      gathers(numStages);
  int first = 0;
  for (int s = 0; s < numStages; ++s) {
    StageCost &st = stages[s];
    double paramTensors = 0, gradientTensors = 0;
    st.firstLayer = first;
    st.numLayers = sizes[s];
    // W's all_reduces over tp of `calls` sums of sequence-partial
    // gradients, of `bytes` each.
    auto addSequenceSums = [&](double calls, double bytes) {
      double t =
          calls * getCollectiveTime(tpLevel.get(CollectiveKind::AllReduce),
                                    CollectiveKind::AllReduce, bytes, tp);
      st.weight += t;
      st.tpComm += t;
      st.comm[(int)PassKind::Weight] += t;
      tpCalls[s][(int)PassKind::Weight] += calls;
    };
    auto addSegment = [&](const SegmentCost &seg, double instances) {
      double *times[kNumPassKinds] = {&st.forward, &st.backward, &st.weight};
      for (int p = 0; p < kNumPassKinds; ++p) {
        const PassWork &w = seg.passes[r][p];
        for (int c = 0; c < kNumOpClasses; ++c) {
          Work rw = w.getRankWork(OpClass(c), tp, sp);
          double t = (isBytesBound(OpClass(c)) ? rw.bytes : rw.flops) / rate[c];
          if (streamRate[c] > 0)
            t += rw.bytes / streamRate[c];
          t *= scale * instances;
          *times[p] += t;
          st.compute[c] += t;
        }
        // A fixed cost per kernel, whatever the micro-batch size.
        double overhead = w.kernels * hardware.kernelOverhead * instances;
        *times[p] += overhead;
        st.overhead += overhead;
        int n = seg.tpAllReduces[r][p];
        // With sequence parallelism each all_reduce is a reduce_scatter
        // plus an all_gather (B's sum of q, k and v's input gradients
        // reduce-scattered once), and a layer's W gathers each
        // column-parallel product's sequence-divided input again (a repeat
        // saves its activations divided; the ops around the layers keep
        // F's gathered input for W).
        int scatters = sp ? n : 0, gatherCalls = sp ? n : 0;
        int reduces = sp ? 0 : n;
        bool layer = &seg != &model.pre && &seg != &model.post;
        if (sp && layer && p == (int)PassKind::Weight)
          gatherCalls += seg.tpColumnProducts;
        if (tp > 1 && scatters + gatherCalls + reduces > 0) {
          double bytes = seg.tpCollectiveBytes * scale;
          auto time = [&](CollectiveKind k) {
            return getCollectiveTime(tpLevel.get(k), k, bytes, tp);
          };
          double t = scatters * time(CollectiveKind::ReduceScatter) +
                     gatherCalls * time(CollectiveKind::AllGather) +
                     reduces * time(CollectiveKind::AllReduce);
          t *= instances;
          *times[p] += t;
          st.tpComm += t;
          st.comm[p] += t;
          // Blocking points: with sp, each reduce_scatter's all_gather
          // follows it across a norm (or its gradient) and a residual add
          // of a sequence block, the group just released together: it
          // waits for no descheduled peer (measured: docs/planner.md, run
          // s).
          int afterScatter = sp ? n : 0;
          tpCalls[s][p] +=
              (scatters + gatherCalls + reduces - afterScatter) * instances;
          // Not priced: the runtime's staging copies of sequence-split
          // blocks (runtime/src/program/collectives.c). At memcpy's rate
          // over arrays far larger than caches they ranked the stored
          // held-out runs worse; an activation this size stays in cache.
        }
      }
      // With sequence parallelism, W sums over tp the gradients of the
      // replicated tensors applied along the sequence without a sequence
      // dimension (each rank's covers its block of the sequence): a layer
      // instance's as one all_reduce (those of the ops around the layers:
      // getSequenceGradSums, below).
      bool layer = &seg != &model.pre && &seg != &model.post;
      if (sp && layer && seg.sequencePartialParamTensors > 0)
        addSequenceSums(instances,
                        seg.sequencePartialParams * config.gradBytes);
      // A vocabulary-parallel cross-entropy's per-row statistics, gathered
      // over tp between F and B (counted in F).
      if (tp > 1 && seg.tpRowGathers > 0) {
        double t = seg.tpRowGathers * instances *
                   getCollectiveTime(tpLevel.get(CollectiveKind::AllGather),
                                     CollectiveKind::AllGather,
                                     seg.tpRowGatherBytes * scale * tp, tp);
        st.forward += t;
        st.tpComm += t;
        st.comm[(int)PassKind::Forward] += t;
        tpCalls[s][(int)PassKind::Forward] += seg.tpRowGathers * instances;
      }
      double saved = getSavedBytes(seg, plan.recompute, tp, sp) * scale;
      // A repeat's saved activations are copied into its stack in F and
      // out in B, each copy reading and writing them at memcpy's bandwidth.
      double copies = hardware.savedActivationCopies;
      if (copies > 0 && seg.savedTensors[r] > 0) {
        double t = 2 * saved / hardware.memoryBandwidth * instances;
        double o = seg.savedTensors[r] * hardware.kernelOverhead * instances;
        double first = std::min(1.0, copies);
        st.forward += first * (t + o);
        st.backward += (copies - first) * (t + o);
        st.compute[(int)OpClass::Memory] += copies * t;
        st.overhead += copies * o;
      }
      st.params += seg.getRankParams(tp) * instances;
      paramTensors += seg.paramTensors * instances;
      // A repeat's instances' gradients are stacked: one tensor each.
      gradientTensors += seg.paramTensors;
      // B's parameters, divided over tp in the segment's proportion. The
      // B of the ops around the layers reads the parameters their F
      // gathered under ZeRO-3, held from F to B: without a pipeline F and B
      // are one function, and a pipeline's last stage passes its F's
      // gathered head table and final norm weight to its B
      // (getZeroThreeGathers).
      double all = seg.getParams();
      bool around = &seg == &model.pre || &seg == &model.post;
      if (!around) {
        // braid-bucket-gathers: the first op's alone (leave-first), the
        // rest in buckets of the gathered bytes; under bf16-mixed none
        // alone (a working copy does not cross instances), a bucket per
        // element type (the working copies, the norms' f32 parameters).
        double share = all > 0 ? seg.getRankParams(tp) / all : 1;
        double eb = model.elementBytes;
        bool bf16 = config.precision == Precision::BF16Mixed;
        // (tensors, elements): all, the first op's, the working copies and
        // the first op's working copies.
        using Count = std::pair<double, double>;
        auto calls = [&](Count all, Count lead, Count copies,
                         Count leadCopies) {
          if (!bf16)
            copies = leadCopies = {0, 0};
          // Alone: the first op's that are no working copies.
          Count alone = {lead.first - leadCopies.first,
                         lead.second - leadCopies.second};
          if (config.zero3Prefetch <= 0)
            alone = {0, 0};
          return alone.first +
                 getGatherBuckets(copies.first,
                                  copies.second * share * eb / 2) +
                 getGatherBuckets(all.first - copies.first - alone.first,
                                  (all.second - copies.second - alone.second) *
                                      share * eb);
        };
        st.layerForwardGathers +=
            instances *
            calls({seg.paramTensors, all},
                  {seg.forwardLeadParamTensors, seg.forwardLeadParams},
                  {seg.forwardWorkingCopyTensors, seg.forwardWorkingCopyParams},
                  {seg.forwardLeadWorkingCopyTensors,
                   seg.forwardLeadWorkingCopyParams});
        st.layerBackwardGathers +=
            instances *
            calls({seg.backwardParamTensors[r], seg.backwardParams[r]},
                  {seg.backwardLeadParamTensors[r], seg.backwardLeadParams[r]},
                  {seg.backwardWorkingCopyTensors[r],
                   seg.backwardWorkingCopyParams[r]},
                  {seg.backwardLeadWorkingCopyTensors[r],
                   seg.backwardLeadWorkingCopyParams[r]});
        st.backwardParamTensors += seg.backwardParamTensors[r] * instances;
        if (all > 0)
          st.backwardParams +=
              seg.backwardParams[r] * seg.getRankParams(tp) / all * instances;
      }
      st.activationBytes += saved * instances;
    };
    if (s == 0)
      addSegment(model.pre, 1);
    for (int i = first; i < first + sizes[s];) {
      // Consecutive instances of one repeat at once.
      const SegmentCost &seg = model.getLayer(i);
      int n = 1;
      while (i + n < first + sizes[s] && &model.getLayer(i + n) == &seg)
        ++n;
      addSegment(seg, n);
      i += n;
    }
    if (s == numStages - 1)
      addSegment(model.post, 1);
    if (sp) {
      auto [calls, bytes] = getSequenceGradSums(s, numStages);
      if (calls > 0)
        addSequenceSums(calls, bytes);
    }
    st.paramTensors = paramTensors;
    // Gradient accumulation as braidc's programs run it, each micro-batch
    // in W at memcpy's bandwidth: a pipeline's W piece copies its
    // gradients out (read and write) and the driver adds them into the
    // stage's sums (accumulate_mean: two reads, a write), 5 passes over
    // the stage's gradients; without a pipeline the accumulation loop's
    // body adds them to the carried sums (3) and copies the sums out of the
    // body into the loop's other buffer (2), 5 passes over the rank's share
    // (divided over dp under ZeRO, whose reduce_scatter comes first), and
    // after an odd count the loop copies the last sums back (2 passes once
    // a step); one micro-batch has no loop.
    int m = plan.microbatches;
    double passes = plan.pp > 1 ? 5 : m > 1 ? 5 + (m % 2 ? 2.0 / m : 0) : 0;
    if (passes > 0) {
      double grads = st.params * config.gradBytes /
                     (plan.pp == 1 && plan.zero >= 1 ? plan.dp : 1);
      double t = passes * grads / hardware.memoryBandwidth;
      double o = (plan.pp > 1 ? 2 : 2 + (m % 2 ? 1.0 / m : 0)) *
                 gradientTensors * hardware.kernelOverhead;
      st.weight += t + o;
      st.compute[(int)OpClass::Memory] += t;
      st.overhead += o;
      st.accumulation = t + o;
    }
    // Without a pipeline, ZeRO reduce_scatters each micro-batch's
    // gradients bucket by bucket: braid-bucket-collectives packs a bucket's
    // gradients into one buffer (a concat) and the runtime copies the
    // bucket again into the reduce_scatter's staging buffer
    // (runtime/src/program/collectives.c), 4 passes over the whole
    // gradients and 2 kernels a bucket in each micro-batch's W. Without
    // ZeRO, W writes the gradients into the all_reduce's bucket in place.
    // dp4 ZeRO-1 against no ZeRO, run q's GPT: 5% faster measured, 18%
    // predicted without these copies.
    if (plan.pp == 1 && plan.zero >= 1 && plan.dp > 1 &&
        config.gradientReductionPerMicrobatch) {
      double t = 4 * st.params * config.gradBytes / hardware.memoryBandwidth;
      double o = 2 * getGradientBuckets(getRankShare(model, st.params)) *
                 hardware.kernelOverhead;
      st.weight += t + o;
      st.compute[(int)OpClass::Memory] += t;
      st.overhead += o;
    }
    // ZeRO-3 gathers the stage's parameters before their use in F, and
    // again the ones B reads before B, one collective per tensor, and in F
    // what computing on a vocabulary table as stored needs
    // (getZeroThreeGathers).
    if (plan.zero == 3 && plan.dp > 1) {
      ZeroThreeGathers g = getZeroThreeGathers(plan, st, s, numStages);
      auto gather = [&](double calls, double bytes) {
        return calls > 0 ? calls * getCollectiveTime(
                                       dpLevel.get(CollectiveKind::AllGather),
                                       CollectiveKind::AllGather, bytes / calls,
                                       plan.dp)
                         : 0.0;
      };
      double t =
          gather(g.forward, g.forwardBytes) + gather(g.values, g.valueBytes);
      double tb = gather(g.backward, g.backwardBytes);
      st.forward += t;
      st.backward += tb;
      st.comm[(int)PassKind::Forward] += t;
      st.comm[(int)PassKind::Backward] += tb;
      gathers[s][(int)PassKind::Forward] += g.forward + g.values;
      gathers[s][(int)PassKind::Backward] += g.backward;
      // braid-bucket-gathers packs a bucket's shares into one buffer (a
      // read and a write of the share) and slices each member out of the
      // gathered bucket before its use (a read and a write of the whole):
      // 2 (1 + 1/dp) passes over the gathered bytes at memcpy's bandwidth,
      // a kernel per bucket and per member. dp2 x pp2 ZB-V ZeRO-3 of run
      // o's GPT: 46 MB gathered a step per rank, braid_rt_slice_f32 3.1%
      // of the step's samples in perf (1.6% under ZeRO-1).
      if (config.gatherBuckets) {
        auto copies = [&](double buckets, double tensors, double bytes) {
          double t = 2 * (1 + 1.0 / plan.dp) * bytes / hardware.memoryBandwidth;
          double o = (buckets + tensors) * hardware.kernelOverhead;
          st.compute[(int)OpClass::Memory] += t;
          st.overhead += o;
          return t + o;
        };
        st.forward += copies(g.forward, st.paramTensors, g.forwardBytes);
        st.backward +=
            copies(g.backward, st.backwardParamTensors, g.backwardBytes);
      }
      // And F sums its lookups in a divided table (getZeroThreeLookups).
      auto [lookups, lookupBytes] = getZeroThreeLookups(plan, s, numStages);
      if (lookups > 0) {
        double l = lookups *
                   getCollectiveTime(dpLevel.get(CollectiveKind::ReduceScatter),
                                     CollectiveKind::ReduceScatter,
                                     lookupBytes / lookups, plan.dp);
        st.forward += l;
        st.comm[(int)PassKind::Forward] += l;
        gathers[s][(int)PassKind::Forward] += lookups;
      }
    }
    first += sizes[s];
  }
  // Where ranks share cores, a member of a collective waits for a core
  // until the rank holding it blocks; every rank blocks at its stage's
  // collectives and pipeline receives.
  double compute = 0, points = 0;
  for (int s = 0; s < numStages; ++s) {
    StageCost &st = stages[s];
    for (int p = 0; p < kNumPassKinds; ++p)
      st.blockingPoints += tpCalls[s][p] + gathers[s][p];
    st.blockingPoints += (s > 0) + (s + 1 < numStages);
    compute += st.forward + st.backward + st.weight;
    for (int p = 0; p < kNumPassKinds; ++p)
      compute -= st.comm[p];
    points += st.blockingPoints;
  }
  double interval = points > 0 ? compute / points : 0;
  double tpWait = getDescheduledWait(plan, tp, interval);
  double dpWait = getDescheduledWait(plan, plan.dp, interval);
  for (int s = 0; s < numStages; ++s) {
    StageCost &st = stages[s];
    double *times[kNumPassKinds] = {&st.forward, &st.backward, &st.weight};
    for (int p = 0; p < kNumPassKinds; ++p) {
      double tpT = tpCalls[s][p] * tpWait, dpT = gathers[s][p] * dpWait;
      *times[p] += tpT + dpT;
      st.comm[p] += tpT + dpT;
      st.tpComm += tpT;
      st.wait += tpT + dpT;
    }
  }
  return stages;
}

double mlir::braid::plan::expectedDescheduledWait(double limit, double interval,
                                                  int ahead) {
  if (limit <= 0)
    return 0;
  if (interval <= 0)
    return limit;
  // E[min(a + U g, L)] with a = (ahead - 1) g: the first holder's rest of
  // its interval, then each one's whole interval.
  double a = std::max(0, ahead - 1) * interval;
  if (a >= limit)
    return limit;
  if (a + interval <= limit)
    return a + interval / 2;
  double t = (limit - a) / interval; // the share of U below the cap
  return a * t + interval * t * t / 2 + (1 - t) * limit;
}

double PlanCostModel::getDescheduledWait(const Plan &plan, int groupSize,
                                         double competitorInterval) const {
  int devices = plan.getNumDevices();
  if (groupSize < 2 || !hardware.sharesCores(devices))
    return 0;
  int nodeDevices = std::min(hardware.devicesPerNode, devices);
  int slots = std::min(hardware.concurrentDevicesPerNode, nodeDevices);
  // The group's members on one node, and the devices beside them there.
  int outside = nodeDevices - std::min(groupSize, nodeDevices);
  if (outside < slots)
    return 0;
  // The devices outside queue for the cores alike: a member waits behind
  // outside / cores of them (8 ranks on 2 cores, groups of 2: 3).
  int ahead = (outside + slots - 1) / slots;
  return expectedDescheduledWait(hardware.descheduledWait, competitorInterval,
                                 ahead);
}

std::vector<RankMemory>
PlanCostModel::getMemory(const Plan &plan, const std::vector<StageCost> &stages,
                         const std::vector<double> &peakInFlight,
                         const std::vector<double> &heldInFlight) const {
  double scale = double(plan.microBatchSize) / model.batch;
  bool sp = plan.sequenceParallel && plan.tp > 1;
  std::vector<RankMemory> memory(plan.pp);
  for (int rank = 0; rank < plan.pp; ++rank) {
    RankMemory &m = memory[rank];
    RankSums sum = sumRank(plan, stages, rank);
    double params = sum.params, activation = sum.activationBytes;
    double dp = plan.dp;
    m.params = params * model.elementBytes / (plan.zero >= 3 ? dp : 1);
    m.grads = params * config.gradBytes / (plan.zero >= 2 ? dp : 1);
    m.optimizer = params * config.optimizerBytes / (plan.zero >= 1 ? dp : 1);
    double inFlight = rank < (int)peakInFlight.size() ? peakInFlight[rank] : 1;
    m.activations = inFlight * activation;
    // Recomputation re-materialises one layer's activations during its B.
    if (plan.recompute != Recompute::None && model.getNumLayers() > 0) {
      const SegmentCost &layer = model.getLayer(0);
      m.activations += (getSavedBytes(layer, Recompute::None, plan.tp, sp) -
                        getSavedBytes(layer, plan.recompute, plan.tp, sp)) *
                       scale;
    }
    m.workspace = hardware.workspaceBytes;
    // ZeRO-3 with gather buckets (braid-bucket-gathers): a layer
    // instance's gathered parameters are held at once, from its bucket's
    // gather to their last use (one tensor at a time before, not counted):
    // the largest layer's, at most a bucket. braidc --memory-report of the
    // dp4 ZeRO-3 GPT (4 layers, hidden 32): 45,824 bytes more workspace
    // than with --bucket-mb 0, against a layer's 50,560.
    if (plan.zero >= 3 && plan.dp > 1 && config.gatherBuckets) {
      double largest = 0;
      for (const SegmentCost &l : model.layers)
        largest = std::max(largest, l.getRankParams(plan.tp));
      double bytes = largest * model.elementBytes;
      if (config.bucketCapBytes > 0)
        bytes = std::min(bytes, config.bucketCapBytes);
      m.workspace += bytes;
    }
  }
  if (config.compiledBuffers)
    addCompiledBuffers(plan, stages, memory, peakInFlight, heldInFlight);
  return memory;
}

void PlanCostModel::addCompiledBuffers(
    const Plan &plan, const std::vector<StageCost> &stages,
    std::vector<RankMemory> &memory, const std::vector<double> &peakInFlight,
    const std::vector<double> &heldInFlight) const {
  // What braidc's memory plan allocates (docs/codegen.md, "Memory plan").
  int numStages = stages.size();
  double scale = double(plan.microBatchSize) / model.batch;
  bool sp = plan.sequenceParallel && plan.tp > 1;
  double gradBytes = config.gradBytes;
  // A tied parameter's gradient (GPT's wte, counted with the first stage):
  // the last stage computes its own partial too. The first stage's partial
  // goes to the last alone, point to point, after the pipeline
  // (StagePlacement), into a buffer live only at the sum, past the peak:
  // the middle stages hold none of it.
  int lastRank = getRankOf(plan, numStages - 1);
  double tiedGrad = model.tiedParams / plan.tp * gradBytes;
  // Without a pipeline, the arenas (the layers' and the micro-batch
  // function's): fitted working copies of the widest layer's
  // intermediates of one micro-batch (at the source's element size under
  // either precision: the arenas are fitted to f32 plans); in a pipeline
  // derived (layersArena, piecesArena below). Only the layers run in the
  // layers' arena: the ops
  // before and after them run in the step function (without a pipeline)
  // or the pipeline's pieces, whose buffers are counted below (headWork).
  // Until 2026-12-03 the ops around the layers were in the widest too,
  // so a large vocabulary's logits counted 5 times (GPT, vocabulary 8192,
  // hidden 64, batch 4: 40.3 MiB of buffers against a 1 MiB layers'
  // arena; docs/planner.md, "Large vocabularies").
  double widest = 0;
  for (const SegmentCost &l : model.layers)
    widest = std::max(widest, l.getSavedBytes(Recompute::None, plan.tp, sp));
  double working = config.workingActivationCopies * widest * scale;
  // The ops after the layers (the head): their B forms the gradient of
  // what F saved (the logits' gradient beside the logits) while those are
  // live, in the step's arena without a pipeline and in the pieces' arena,
  // every rank's, in one (braidc's memory plan; the step arena's peak of
  // the GPT above is there: its saved values plus 8 MiB, the logits').
  double headWork =
      config.workingActivationCopies <= 0
          ? 0
          : model.post.getSavedBytes(Recompute::None, plan.tp, sp) * scale;
  double noRecompute = getSavedBytes(model.pre, Recompute::None, plan.tp, sp) +
                       getSavedBytes(model.post, Recompute::None, plan.tp, sp);
  for (const SegmentCost &l : model.layers)
    noRecompute += getSavedBytes(l, Recompute::None, plan.tp, sp) * l.count;
  // What stage s hands on per micro-batch (and receives back as gradient).
  auto handed = [&](int s) {
    const StageCost &st = stages[s];
    const SegmentCost &last =
        st.numLayers > 0 ? model.getLayer(st.firstLayer + st.numLayers - 1)
                         : model.pre;
    return last.outputBytes * scale / plan.tp;
  };
  // In a pipeline, the layers' arena (one for every layer function) and
  // the pieces' arena (one for every piece of every stage, braidc sizing
  // each arena once, not per stage: GPT, vocabulary 32768, pp=2 1F1B:
  // both stages' pieces' arenas are 40 MiB, the head's B's), derived from
  // the layer functions' bodies (SegmentCost::arena). A piece holds what
  // the layers it calls yield (F: their saved values and the carried
  // output, B: the input gradient and what W reads, W: the weight
  // gradients, the chunk's) beside its input and output, the first
  // stage's embedding output and the last stage's head (its saved values,
  // the logits' gradient in B). braidc's memory plan of the GPT of run l
  // (hidden 160, pp4 and dp2 x pp2, each recomputation mode): the pieces'
  // arena within 0.2 MiB of this.
  double layersArena = 0, piecesArena = 0;
  if (plan.pp > 1) {
    for (const SegmentCost &l : model.layers)
      for (int p = 0; p < kNumPassKinds; ++p)
        layersArena =
            std::max(layersArena, l.getArenaBytes(plan.recompute, PassKind(p),
                                                  scale, plan.tp, sp));
    for (int s = 0; s < numStages; ++s) {
      const StageCost &st = stages[s];
      // The carried activation as the layers yield it (replicated over tp,
      // divided along the sequence with sp).
      const SegmentCost &last =
          st.numLayers > 0 ? model.getLayer(st.firstLayer + st.numLayers - 1)
                           : model.pre;
      double carried = last.outputBytes * scale / (sp ? plan.tp : 1);
      double piece[kNumPassKinds] = {2 * carried, 2 * carried,
                                     st.params * gradBytes};
      for (int i = st.firstLayer; i < st.firstLayer + st.numLayers; ++i)
        for (int p = 0; p < 2; ++p)
          piece[p] += model.getLayer(i).getYieldedBytes(
                          plan.recompute, PassKind(p), scale, plan.tp, sp) -
                      carried;
      if (s == 0)
        piece[0] += carried;
      if (s == numStages - 1) {
        piece[0] += headWork;
        piece[1] += headWork + carried;
      }
      for (double bytes : piece)
        piecesArena = std::max(piecesArena, bytes);
    }
  }
  for (int rank = 0; rank < plan.pp; ++rank) {
    RankMemory &m = memory[rank];
    double params = sumRank(plan, stages, rank).params, receives = 0;
    for (int s : getRankStages(plan, numStages, rank)) {
      // Every micro-batch's receives are started at once: the input of a
      // stage after the first, the output's gradient before the last.
      if (s > 0)
        receives += plan.microbatches * handed(s - 1);
      if (s < numStages - 1)
        receives += plan.microbatches * handed(s);
    }
    // Each stage holds the means of its own gradients, whole under
    // ZeRO-2/3 (the program shards them after), and the last rank its
    // partial of the tied one (under ZB-V rank 0, holding both ends).
    double grads = params * gradBytes;
    if (plan.pp > 1 && rank == lastRank)
      grads += tiedGrad;
    // Without a pipeline the arenas (`working` stands in for them) hold at
    // least what W writes there: a layer's weight gradients. In a pipeline
    // the derived arenas hold them and the W piece's results, the rank's
    // largest chunk's gradients (braidc's dp4 x pp2 of the hidden-224 GPT
    // at micro-batch 1: 2.50 and 4.98 MiB, against 2.31 and 4.98 MiB of
    // gradients). (workingActivationCopies 0 leaves the arenas out: the
    // unit tests isolate the other terms so.)
    double layerGrads = 0;
    for (int s : getRankStages(plan, numStages, rank))
      for (int i = stages[s].firstLayer;
           i < stages[s].firstLayer + stages[s].numLayers; ++i)
        layerGrads =
            std::max(layerGrads, model.getLayer(i).getRankParams(plan.tp));
    double results = getPipelineResultBytes(plan, stages, rank);
    double arenas = 0;
    if (config.workingActivationCopies > 0)
      arenas = plan.pp > 1
                   ? layersArena + piecesArena
                   : std::max(working, layerGrads * gradBytes + results);
    // And the last stage's step arena holds the logits and their gradient
    // at once at the head's B, once whatever the schedule (braidc's pp=2
    // of the GPT above at vocabulary 32768: the last stage's report is one
    // logits' gradient, 32 MiB, above the planner's under 1F1B, ZB-H1 and
    // ZB-H2 alike, the deferred W's holds counted).
    if (plan.pp > 1 && rank == lastRank)
      arenas += headWork;
    m.buffers = std::max(0.0, grads - m.grads) + receives + arenas;
    // Without a pipeline the step runs every layer's B, then every
    // layer's W: between them each instance holds what its W reads (F's
    // saved values the weight gradients need and B's results: the output
    // gradients, the inputs B re-materialised), where B's results take
    // the buffers of the saved values only B read. braidc's peak is there
    // where that is more than the saved activations (the GPT of
    // test/Planner/precision.test: 20.13 MiB reported, 16.25 saved; with
    // recomputation at least the activations without it, the same plan:
    // dp4, tp4 and dp2 x tp2 of docs/planner.md). The ops before the
    // layers count their saved values; the ops after them not: none of
    // their saved values is live there (the logits end with the head's B,
    // the final norm's output with the head's weight gradient, which runs
    // before the layers' B: braidc's report of a GPT with a vocabulary of
    // 8192 and hidden 64 holds neither of them, 4 MiB of logits, at the
    // layers' B or W; counting them, from 3af1bb8 to 2026-12-03, put the
    // planner 0.12 MiB over the report in test/Planner/precision.test).
    if (plan.pp == 1) {
      double held = 0;
      if (config.backwardHold) {
        held = getSavedBytes(model.pre, plan.recompute, plan.tp, sp);
        for (const SegmentCost &l : model.layers)
          held += getHeldBytes(l, plan.recompute, plan.tp, sp) * l.count;
      }
      if (plan.recompute != Recompute::None)
        held = std::max(held, noRecompute);
      // The step's arena peaks at the layers' B and W (the hold) or at the
      // head's B (every saved value and the head's working gradient).
      m.buffers += std::max(headWork, held * scale - m.activations);
    }
    m.buffers +=
        getAccumulationBytes(plan) + getStagingBytes(plan, stages, rank) +
        getZeroStagingBytes(plan) + getReduceScatterTemporaryBytes(plan) +
        getPipelineResultBytes(plan, stages, rank);
  }
  // The tied parameter itself (counted with the first stage) is a slot of
  // the stages whose pieces read it, the first and the last, and no other:
  // the last stage updates it (it sums the partials) and sends the first
  // its new value, so the optimizer state is the last rank's alone.
  int firstRank = getRankOf(plan, 0);
  if (plan.pp > 1 && firstRank != lastRank && model.tiedParams > 0) {
    double tied = model.tiedParams / plan.tp;
    memory[lastRank].params +=
        tied * model.elementBytes / (plan.zero >= 3 ? plan.dp : 1);
    double state =
        tied * config.optimizerBytes / (plan.zero >= 1 ? plan.dp : 1);
    memory[firstRank].optimizer -= state;
    memory[lastRank].optimizer += state;
  }
  // With recomputation, what B hands a W it does not run with it (the
  // inputs of the weight gradients it re-materialised, and the output
  // gradients) stays until that W: as many bytes as the activations
  // without recomputation (braidc's memory report of pp4 ZB-H1, the last
  // stage: 13.9 MiB with full recomputation, 14.1 without, 4.8 under
  // 1F1B). heldInFlight is the schedule's peak counting a micro-batch
  // between its B and its W so. Each stage's step arena is its own
  // (braidc places every stage's buffers above those of all stages).
  for (int rank = 0; rank < plan.pp && rank < (int)heldInFlight.size();
       ++rank) {
    double activation = sumRank(plan, stages, rank).activationBytes;
    memory[rank].buffers +=
        std::max(0.0, (heldInFlight[rank] - peakInFlight[rank]) * activation);
  }
}

double PlanCostModel::getAccumulationBytes(const Plan &plan) const {
  // Without a pipeline, micro-batches run in braid-train-step's
  // accumulation loop (a braid.repeat carrying the gradient sums). Its
  // zero sums are filled whole, every parameter's gradient unsharded,
  // before the partitioner slices them to the rank's share; the loop then
  // holds three shares at once (the slice, the carried sum and its next
  // copy), and the micro-batch's function one more (its gradient results,
  // copied into the next sum). A share is the rank's gradient after the
  // micro-batch's reduction: divided over tp, and over dp with ZeRO.
  // braidc's memory report of dp4, tp4 and dp2 x tp2 with and without
  // ZeRO-1 (docs/planner.md). One micro-batch has no loop.
  if (plan.pp != 1 || plan.microbatches < 2)
    return 0;
  double gradBytes = config.gradBytes;
  double whole = model.getParams() * gradBytes;
  double share =
      model.pre.getRankParams(plan.tp) + model.post.getRankParams(plan.tp);
  for (const SegmentCost &l : model.layers)
    share += l.getRankParams(plan.tp) * l.count;
  share *= gradBytes / (plan.zero >= 1 ? plan.dp : 1);
  // What the memory already counts of them: the rank's gradients, whole
  // (addCompiledBuffers counts them whole under ZeRO-2/3 too).
  double counted = share * (plan.zero >= 1 ? plan.dp : 1);
  return std::max(0.0, std::max(whole, 3 * share) + share - counted);
}

double PlanCostModel::getStagingBytes(const Plan &plan,
                                      const std::vector<StageCost> &stages,
                                      int rank) const {
  // With sequence parallelism, every reduce_scatter and all_gather call
  // site of the program keeps a staging buffer in the runtime for the
  // whole run (runtime/src/program/collectives.c: the blocks of the split
  // sequence dimension moved to the front), a whole activation of one
  // micro-batch each. A layer body (one for all of a repeat's instances)
  // has 4 sites per tensor-parallel all_reduce of its F and B: a
  // reduce_scatter and an all_gather in F or B, and W gathering the input
  // of the weight gradient again (braidc's tp4 GPT: 16 per block, 2 for the
  // embedding, 2 for the head); the ops before and after the layers 2.
  // Not braidc's memory plan: beside it in the resident set.
  if (!plan.sequenceParallel || plan.tp < 2)
    return 0;
  double scale = double(plan.microBatchSize) / model.batch;
  auto sites = [](const SegmentCost &s) {
    return s.tpAllReduces[(int)Recompute::None][(int)PassKind::Forward] +
           s.tpAllReduces[(int)Recompute::None][(int)PassKind::Backward];
  };
  std::set<const SegmentCost *> bodies;
  double bytes = 0;
  for (int s : getRankStages(plan, stages.size(), rank)) {
    const StageCost &st = stages[s];
    for (int i = st.firstLayer; i < st.firstLayer + st.numLayers; ++i)
      bodies.insert(&model.getLayer(i));
    if (s == 0)
      bytes += 2 * sites(model.pre) * model.pre.tpCollectiveBytes;
    if (s == (int)stages.size() - 1)
      bytes += 2 * sites(model.post) * model.post.tpCollectiveBytes;
  }
  for (const SegmentCost *l : bodies)
    bytes += 4 * sites(*l) * l->tpCollectiveBytes;
  return bytes * scale;
}

double PlanCostModel::getZeroStagingBytes(const Plan &plan) const {
  // Under ZeRO without a pipeline, every parameter's gradient is
  // reduce_scattered over dp by a call site (a layer body's sites shared
  // by the repeat's instances; since bc9f928 the ops around the layers'
  // gradients, the head's partial of a tied wte included, one bucketed
  // site of the same bytes), and each reduce_scatter site keeps a staging
  // buffer of its whole input for the run (runtime/src/program/
  // collectives.c: the blocks packed to the front). Before bc9f928
  // braidc's dp4 ZeRO-1/2/3 GPT: 16 sites of one layer body, 5
  // around it. Not braidc's memory plan: beside it in the resident set.
  // A pipeline all_reduces the stage's gradients whole (no site); with tp
  // only the replicated parameters are sites (not counted).
  if (plan.pp != 1 || plan.zero < 1 || plan.dp < 2 || plan.tp != 1)
    return 0;
  double elements =
      model.pre.getParams() + model.post.getParams() + model.tiedParams;
  for (const SegmentCost &l : model.layers)
    elements += l.getParams();
  return elements * config.gradBytes;
}

/// Halves of libnbc's temporary buffer that the first device of a group of
/// `size` writes in a reduce_scatter (see getReduceScatterTemporaryBytes).
static int getReduceScatterRootHalves(int size) {
  return size >= 3 ? 2 : size == 2 ? 1 : 0;
}

double PlanCostModel::getReduceScatterTemporaryBytes(const Plan &plan) const {
  // MPI's (Open MPI's libnbc) MPI_Ireduce_scatter_block, which the runtime's
  // reduce_scatter calls (runtime/src/cpu/reduce_scatter.c), is a binomial
  // reduce to the group's first device and a scatter from it: every device
  // mallocs two buffers of the whole input, and a device writes one for
  // each round it receives in, up to the two it alternates between (of a
  // group of 4: the first device both, the third one, the others none;
  // freed when the call completes). So the group's first device holds,
  // during the largest reduce_scatter, twice its input (of 2 devices,
  // once). Under ZeRO without a pipeline that is the largest gradient
  // bucket over dp: a layer instance's gradients, or the bucket
  // of the ops around the layers (since bc9f928 one reduce_scatter of all
  // their gradients, the head's partial of a tied parameter included),
  // neither larger than braidc's bucket cap. Measured on 4 ranks, a 2.31
  // MiB input alone (mpicc, getrusage, glibc's mmap threshold fixed): 5.1,
  // 0.8, 3.0 and 0.8 MiB more on ranks 0-3 than before it; on 8 ranks 5.3
  // and 4.9 on ranks 0 and 4, 2.6-2.8 on ranks 2 and 6. The memory of a
  // pipeline rank is its dp group's first device's, the largest. Not
  // braidc's memory plan: beside it in the resident set. With tp a
  // device's buckets are its pieces of them (the divided parameters'
  // 1/tp), on the first devices of each dp group (held-out dp2 x tp2 of
  // docs/planner.md: ZeRO-1 sp ranks 0 and 1 51.0 and 51.2 MiB against
  // 50.4 and 50.6 on ranks 2 and 3; ZeRO-3 0.5-0.9 more).
  if (plan.pp != 1 || plan.zero < 1 || plan.dp < 2)
    return 0;
  double largest = model.pre.getRankParams(plan.tp) +
                   model.post.getRankParams(plan.tp) +
                   model.tiedParams / plan.tp;
  for (const SegmentCost &l : model.layers)
    largest = std::max(largest, l.getRankParams(plan.tp));
  // A bucket over the cap is split (braid-bucket-collectives: greedily,
  // each piece at most the cap unless one gradient alone is larger).
  if (config.bucketCapBytes > 0)
    largest = std::min(largest, config.bucketCapBytes / 4);
  return getReduceScatterRootHalves(plan.dp) * largest * config.gradBytes;
}

double PlanCostModel::getOutsideBucketParams() const {
  return model.pre.getParams() + model.post.getParams() + model.tiedParams;
}

double PlanCostModel::getGatherBuckets(double tensors, double bytes) const {
  // braid-bucket-gathers closes a bucket before a gather that would take it
  // over the cap: ceil(bytes / cap) buckets where the tensors are many and
  // small against the cap, at most one per tensor.
  if (tensors <= 0)
    return 0;
  if (config.bucketCapBytes <= 0)
    return 1;
  return std::min(tensors,
                  std::max(1.0, std::ceil(bytes / config.bucketCapBytes)));
}

double PlanCostModel::getGradientBuckets(double share) const {
  // braid-bucket-collectives closes a bucket before a gradient that would
  // take it over the cap (4 bytes an element): ceil(bytes / cap) buckets
  // where the gradients are many and small against the cap.
  auto split = [&](double elements) {
    if (elements <= 0)
      return 0.0;
    if (config.bucketCapBytes <= 0)
      return 1.0;
    return std::max(1.0,
                    std::ceil(4 * elements * share / config.bucketCapBytes));
  };
  double buckets = 0;
  for (const SegmentCost &l : model.layers)
    buckets += l.count * split(l.getParams());
  // The ops around the layers: one bucket (or one bucket's worth where
  // they have no parameters).
  return buckets + std::max(1.0, split(getOutsideBucketParams()));
}

double PlanCostModel::getPipelineResultBytes(
    const Plan &plan, const std::vector<StageCost> &stages, int rank) const {
  // A pipeline's W of a micro-batch writes the chunk's weight gradients
  // into that micro-batch's result buffers in the step's arena, which live
  // until they are added to their means right after
  // (lib/Conversion/BraidToEmitC/Pipelines.cpp: a buffer per (micro-batch,
  // result), micro-batch k added once it and those before it are
  // computed): one chunk's gradients beside the means, the largest of the
  // rank's chunks (braidc --memory-report of dp2 x pp2 1F1B: the step
  // arena holds 3.66 MiB more than the activations, receives and means).
  if (plan.pp < 2)
    return 0;
  double largest = 0;
  for (int s : getRankStages(plan, stages.size(), rank))
    largest = std::max(largest, stages[s].params);
  return largest * config.gradBytes;
}

std::pair<double, double>
PlanCostModel::getSequenceGradSums(int s, int numStages) const {
  double tensors = 0, elements = 0;
  for (const SegmentCost *seg : {s == 0 ? &model.pre : nullptr,
                                 s == numStages - 1 ? &model.post : nullptr})
    if (seg) {
      tensors += seg->sequencePartialParamTensors;
      elements += seg->sequencePartialParams;
    }
  return {tensors > 0 ? 1 : 0, elements * config.gradBytes};
}

namespace {
/// The gradients one pipeline rank reduces over dp once a step.
struct PipelineReduction {
  /// Reductions (braid-bucket-collectives' buckets), and the parameters
  /// and parameter tensors whose gradients they sum (one rank's, divided
  /// over tp), which the rank then updates.
  double calls = 0;
  double params = 0;
  double tensors = 0;
};
} // namespace

/// In a pipeline braidc's programs reduce a rank's gradients over dp once a
/// step, bucketed per chunk (braid-bucket-collectives: a bucket per group,
/// phase and chunk): one reduction for each chunk's layers and the ops
/// around them it holds, and a tied parameter's sum (its partials from the
/// first and the last stage) alone on the last stage's rank, which updates
/// it (dp2 x pp2 of the GPT: wte on the last rank, wpe with the first
/// rank's layers).
static PipelineReduction
getPipelineReduction(const ModelCost &model, const Plan &plan,
                     const std::vector<StageCost> &stages, int rank) {
  int numStages = stages.size();
  int first = getRankOf(plan, 0), last = getRankOf(plan, numStages - 1);
  bool tied = model.tiedParams > 0;
  PipelineReduction r;
  for (int s : getRankStages(plan, numStages, rank)) {
    const StageCost &st = stages[s];
    r.params += st.params;
    r.tensors += st.paramTensors;
    bool any = st.numLayers > 0;
    if (s == 0)
      any |= model.pre.paramTensors - (tied ? model.tiedParamTensors : 0) > 0;
    if (s == numStages - 1)
      any |= model.post.paramTensors > 0;
    r.calls += any;
  }
  if (tied) {
    double elements = model.tiedParams / plan.tp;
    if (rank == first) {
      r.params -= elements;
      r.tensors -= model.tiedParamTensors;
    }
    if (rank == last) {
      r.params += elements;
      r.tensors += model.tiedParamTensors;
      r.calls += 1;
    }
  }
  r.calls = std::max(1.0, r.calls);
  return r;
}

bool mlir::braid::plan::isDividedAlongVocab(const VocabTable &table,
                                            const Plan &plan) {
  for (int d = 0; d < (int)table.shape.size(); ++d) {
    if (plan.tp > 1 && d == table.vocabDim && table.shape[d] % plan.tp == 0)
      continue;
    if (table.shape[d] % plan.dp == 0)
      return d == table.vocabDim;
  }
  return false;
}

ZeroThreeGathers PlanCostModel::getZeroThreeGathers(const Plan &plan,
                                                    const StageCost &st, int s,
                                                    int numStages) const {
  ZeroThreeGathers g = getZeroThreeTensorGathers(plan, st, s, numStages);
  // (A stage without parameter tensors, of a model made up, gathers its
  // parameters once there.)
  if (!config.gatherBuckets || st.paramTensors <= 0)
    return g;
  // braid-bucket-gathers: the bytes stay, the calls are the layers'
  // (addSegment) and a bucket for each side of the layers that gathers
  // any in F: the ops before the layers (on the first stage) and those
  // after (on the last, a tied table too). Not across a repeat: it ends a
  // bucket. braidc's dp2 ZeRO-3 GPT: per micro-batch 3 gathers a layer
  // instance in F (its first layer norm's two alone), 2 in B, one of wpe,
  // one of ln_f's two and wte (test_plan_collectives.py).
  double eb = model.elementBytes;
  // The tables the first stage's lookups read as stored, and whether one
  // of them is a head's too (tied): its gather then goes with the ops after
  // the layers, as with a pipeline the last stage's.
  double lookupTables = 0;
  bool headGathersTied = numStages > 1;
  for (const VocabTable &t : model.vocabTables)
    if (t.lookups > 0 && isDividedAlongVocab(t, plan)) {
      lookupTables += 1;
      headGathersTied |= t.heads > 0;
    }
  auto side = [&](const SegmentCost &seg, double tensors, double extraBytes) {
    return getGatherBuckets(tensors,
                            seg.getRankParams(plan.tp) * eb + extraBytes);
  };
  g.forward = st.layerForwardGathers;
  if (s == 0)
    g.forward += side(model.pre, model.pre.paramTensors - lookupTables, 0);
  if (s == numStages - 1) {
    double tied = headGathersTied ? model.tiedParamTensors : 0;
    double tiedBytes = tied > 0 ? model.tiedParams / plan.tp * eb : 0;
    // Under bf16-mixed the head gathers the tied table's working copy, a
    // bucket of its own beside the norms' f32 parameters.
    if (config.precision == Precision::BF16Mixed && tied > 0 &&
        model.post.paramTensors > 0)
      g.forward += side(model.post, model.post.paramTensors, 0) +
                   getGatherBuckets(tied, tiedBytes / 2);
    else
      g.forward +=
          side(model.post, model.post.paramTensors + tied, tiedBytes);
  }
  g.backward = st.layerBackwardGathers;
  return g;
}

ZeroThreeGathers PlanCostModel::getZeroThreeTensorGathers(const Plan &plan,
                                                          const StageCost &st,
                                                          int s,
                                                          int numStages) const {
  ZeroThreeGathers g;
  double eb = model.elementBytes;
  g.forward = st.paramTensors > 0 ? st.paramTensors : 1;
  g.forwardBytes = st.params * eb;
  g.backward = st.backwardParamTensors;
  g.backwardBytes = st.backwardParams * eb;
  // A vocabulary table ZeRO-3 divides along its vocabulary is read as
  // stored by the first stage's lookups: F gathers the dp group's ids of
  // each lookup, not the table. A head gathers its table in F (a tied one
  // on the last stage, counted with the ops before the layers; without a
  // pipeline the one gather of the stage's tensors) and B reads that
  // gathered copy (addSegment). braidc's dp2 x pp2 ZeRO-3 GPT: per
  // micro-batch the first stage gathers 65 parameters and the group's ids,
  // the last 67 parameters (wte among them) in F and only the layers' 32 in
  // B; without a pipeline 68 and the group's ids in F, 32 in B
  // (test_plan_collectives.py).
  double group = double(plan.microBatchSize) / model.batch * plan.dp;
  if (s == 0)
    for (const VocabTable &t : model.vocabTables) {
      if (t.lookups == 0 || !isDividedAlongVocab(t, plan))
        continue;
      g.values += t.lookups;
      g.valueBytes += group * t.lookupIdBytes;
      if (numStages == 1 && t.heads > 0)
        continue;
      g.forward -= 1;
      g.forwardBytes -= t.getElements() * eb;
    }
  if (s == numStages - 1 && numStages > 1 && model.tiedParams > 0) {
    g.forward += model.tiedParamTensors;
    g.forwardBytes += model.tiedParams / plan.tp * eb;
  }
  return g;
}

bool PlanCostModel::isLossInGradientBucket(const Plan &plan) const {
  // Without a pipeline the loss's dp sum and the gradients' dp all_reduces
  // are collectives of one block over one group: braid-bucket-collectives
  // fuses the sum into the bucket of the gradients of the ops around the
  // layers (not under ZeRO: those are reduce_scatters). With one,
  // braid-pipeline-outline moves the sum after the schedule, once a step,
  // where it joins the last chunk's gradient bucket (all_reduces under
  // every ZeRO stage: braid-pipeline-outline hoists all_reduces only, and
  // braidc's dp2 x pp2 ZeRO-2 and ZeRO-3 programs all_reduce their
  // gradients after the schedule, test_plan_collectives.py).
  if (plan.pp > 1)
    return plan.dp > 1;
  return plan.dp > 1 && plan.zero == 0 &&
         config.gradientReductionPerMicrobatch;
}

/// With ZeRO-3 each device looks up the dp group's ids in its block of a
/// divided embedding table and a reduce_scatter sums the results (braidc's
/// GPT: one of wte per micro-batch, the dp group's embeddings). Calls per
/// micro-batch on stage s and their bytes in all.
std::pair<double, double>
PlanCostModel::getZeroThreeLookups(const Plan &plan, int s,
                                   int numStages) const {
  double scale = double(plan.microBatchSize) / model.batch;
  double lookups = 0, bytes = 0;
  for (const SegmentCost *seg : {s == 0 ? &model.pre : nullptr,
                                 s == numStages - 1 ? &model.post : nullptr}) {
    if (!seg)
      continue;
    lookups += seg->paramLookups;
    bytes += seg->paramLookupBytes * scale * plan.dp;
  }
  return {lookups, bytes};
}

llvm::Expected<PlanCost> PlanCostModel::evaluate(const Plan &plan) {
  llvm::Expected<std::vector<StageCost>> stagesOr = getStageCosts(plan);
  if (!stagesOr)
    return stagesOr.takeError();
  PlanCost cost;
  cost.plan = plan;
  cost.stages = std::move(*stagesOr);
  std::vector<StageCost> &stages = cost.stages;
  int numStages = stages.size();
  int chunks = numStages / plan.pp;
  int m = plan.microbatches;
  double scale = double(plan.microBatchSize) / model.batch;
  int dpn = hardware.devicesPerNode;
  // Waits for descheduled peers (getDescheduledWait): of a pipeline
  // transfer or tied exchange (2 devices), and of a dp collective.
  double compute = 0, points = 0;
  for (const StageCost &st : stages) {
    compute += st.forward + st.backward + st.weight;
    for (int p = 0; p < kNumPassKinds; ++p)
      compute -= st.comm[p];
    points += st.blockingPoints;
  }
  double interval = points > 0 ? compute / points : 0;
  double wait = getDescheduledWait(plan, 2, interval);
  double dpWait = getDescheduledWait(plan, plan.dp, interval);

  std::vector<double> peakInFlight(plan.pp, 1.0), heldInFlight;
  std::vector<double> rankWork(plan.pp, 0.0);
  int busiest = 0;
  // Devices sharing a node's cores (ranks on a CPU machine): at most
  // `slots` of a node's devices compute at once.
  int nodeDevices = std::min(dpn, plan.getNumDevices());
  int slots = hardware.concurrentDevicesPerNode > 0
                  ? std::min(hardware.concurrentDevicesPerNode, nodeDevices)
                  : nodeDevices;
  double share = double(nodeDevices) / slots;
  int nodes = (plan.getNumDevices() + nodeDevices - 1) / nodeDevices;
  if (plan.pp == 1) {
    double t = 0;
    for (const StageCost &s : stages)
      t += s.forward + s.backward + s.weight;
    cost.pipelineTime = m * t;
    rankWork[0] = m * t;
  } else {
    sched::CostModel costs;
    for (const StageCost &s : stages) {
      costs.forward.push_back(s.forward);
      costs.backward.push_back(s.backward);
      costs.weight.push_back(s.weight);
    }
    // Transfers: the last segment's output, divided over tp (Megatron's
    // scatter/gather: each tp rank sends its share, then all_gather within
    // the node), between the devices of neighbouring pipeline ranks.
    int64_t stride = int64_t(plan.tp) * plan.dp;
    for (int s = 0; s + 1 < numStages; ++s) {
      int a = getRankOf(plan, s), b = getRankOf(plan, s + 1);
      if (a == b) {
        costs.comm.push_back(0);
        continue;
      }
      // What the stage hands on: its last layer's output, or the
      // embedding's where stage 0 has no layer.
      const SegmentCost &last =
          stages[s].numLayers > 0
              ? model.getLayer(stages[s].firstLayer + stages[s].numLayers - 1)
              : model.pre;
      double bytes = last.outputBytes * scale / plan.tp;
      bool crosses = (a * stride) / dpn != (b * stride) / dpn;
      const LinkLevel &level = hardware.getLevel(crosses);
      double t = getCollectiveTime(level.get(CollectiveKind::SendRecv),
                                   CollectiveKind::SendRecv, bytes, 2) +
                 wait;
      costs.comm.push_back(t);
      cost.ppTransferTime = std::max(cost.ppTransferTime, t);
      cost.ppCommBytes = std::max(cost.ppCommBytes, 2.0 * m * bytes);
    }
    // A tied parameter (GPT's wte) whose first and last stage are on two
    // ranks: the program runs stage 0's weight-gradient pieces, all of
    // them, after the schedule, once the last rank has sent its partial
    // gradients (lib/Conversion/BraidToEmitC/Pipelines.cpp); out of the
    // schedule, they are costed after it. (ZB-V holds both on rank 0.)
    int firstRank = getRankOf(plan, 0),
        lastRank = getRankOf(plan, numStages - 1);
    bool tied = model.tiedParams > 0 && firstRank != lastRank;
    bool deferTied = tied && !config.tiedGradientAtStepEnd;
    double deferredWeight = 0, tiedTransfer = 0;
    // Each tp rank's partial (the table is divided over tp).
    double tiedBytes = model.tiedParams / plan.tp * model.elementBytes;
    bool tiedCrosses = (firstRank * stride) / dpn != (lastRank * stride) / dpn;
    const LinkLevel &tiedLevel = hardware.getLevel(tiedCrosses);
    if (deferTied) {
      deferredWeight = costs.weight[0];
      costs.weight[0] = 0;
      tiedTransfer = getCollectiveTime(tiedLevel.get(CollectiveKind::SendRecv),
                                       CollectiveKind::SendRecv, tiedBytes, 2) +
                     wait;
      cost.ppCommBytes += m * tiedBytes;
    } else if (tied) {
      // After the pipeline the first stage sends its partial gradient to
      // the last one, point to point (lib/Conversion/BraidToEmitC
      // Pipelines.cpp), which sums it (getCollectives).
      tiedTransfer = getCollectiveTime(tiedLevel.get(CollectiveKind::SendRecv),
                                       CollectiveKind::SendRecv, tiedBytes, 2) +
                     wait;
      cost.ppCommBytes += tiedBytes;
    }
    // The automatic schedule depends on the stage times; the others are
    // cached and simulated in place.
    sched::Schedule autoSchedule;
    const sched::Schedule *schedule = &autoSchedule;
    if (plan.schedule == sched::ScheduleKind::Auto) {
      sched::ScheduleRequest request;
      request.kind = plan.schedule;
      request.numRanks = plan.pp;
      request.numMicrobatches = m;
      request.numChunks = plan.chunks;
      request.costs = costs;
      llvm::Expected<sched::Schedule> s = sched::generateSchedule(request);
      if (!s)
        return s.takeError();
      autoSchedule = std::move(*s);
    } else {
      auto key = std::make_tuple((int)plan.schedule, plan.pp, m, chunks);
      auto it = cache->schedules.find(key);
      if (it == cache->schedules.end()) {
        sched::ScheduleRequest request;
        request.kind = plan.schedule;
        request.numRanks = plan.pp;
        request.numMicrobatches = m;
        request.numChunks = plan.chunks;
        llvm::Expected<sched::Schedule> s = sched::generateSchedule(request);
        if (!s)
          return s.takeError();
        it = cache->schedules.emplace(key, std::move(*s)).first;
      }
      schedule = &it->second;
    }
    // On shared cores the pipeline ranks of every dp x tp replica compute
    // at the share of the cores they get while they run: a schedule's
    // bubbles cost only while fewer ranks than cores compute (a rank
    // waiting for data, or in a collective, leaves its core to the others).
    sched::CoreSharing sharing;
    if (share > 1) {
      sharing.cores = double(nodes) * slots;
      sharing.replicas = plan.dp * plan.tp;
      for (const StageCost &st : stages) {
        sharing.forwardIdle.push_back(st.comm[(int)PassKind::Forward]);
        sharing.backwardIdle.push_back(st.comm[(int)PassKind::Backward]);
        sharing.weightIdle.push_back(st.comm[(int)PassKind::Weight]);
      }
    }
    llvm::Expected<sched::SimulationResult> sim =
        sched::simulate(*schedule, costs, {}, sharing);
    if (!sim)
      return sim.takeError();
    cost.pipelineTime = sim->makespan;
    rankWork = sim->rankWork;
    peakInFlight = sim->peakMemory;
    // A micro-batch between its B and its W holds what its W reads (F's
    // saved values and B's results, SegmentCost::getHeldBytes; with
    // recomputation at least what it would keep without it): each rank's
    // peak over its actions, in units of its activation.
    if (config.compiledBuffers &&
        (config.backwardHold || plan.recompute != Recompute::None)) {
      bool sp = plan.sequenceParallel && plan.tp > 1;
      std::vector<double> without(numStages, 0), held(numStages, 0);
      for (int s = 0; s < numStages; ++s) {
        const StageCost &st = stages[s];
        auto add = [&](const SegmentCost &seg, bool layer) {
          double saved =
              getSavedBytes(seg, Recompute::None, plan.tp, sp) * scale;
          without[s] += saved;
          held[s] +=
              layer ? getHeldBytes(seg, plan.recompute, plan.tp, sp) * scale
                    : saved;
        };
        if (s == 0)
          add(model.pre, false);
        for (int i = st.firstLayer; i < st.firstLayer + st.numLayers; ++i)
          add(model.getLayer(i), true);
        if (s == numStages - 1)
          add(model.post, false);
        if (!config.backwardHold)
          held[s] = 0;
        if (plan.recompute != Recompute::None)
          held[s] = std::max(held[s], without[s]);
        else
          held[s] = std::max(held[s], stages[s].activationBytes);
      }
      heldInFlight.assign(plan.pp, 0);
      for (int r = 0; r < plan.pp; ++r) {
        double activation = 0, now = 0, peak = 0;
        for (int c = 0; c < chunks; ++c)
          activation += stages[schedule->getStage(r, c)].activationBytes;
        for (const sched::Action &a : schedule->ranks[r]) {
          int s = schedule->getStage(r, a.chunk);
          double kept = stages[s].activationBytes;
          if (a.kind == sched::ActionKind::Forward)
            now += kept;
          else if (a.kind == sched::ActionKind::Backward)
            now += held[s] - kept;
          else if (a.kind == sched::ActionKind::Weight)
            now -= held[s];
          else if (a.kind == sched::ActionKind::FullBackward) {
            // B and W at once: the hold between them, without
            // recomputation (with it, the piece re-materialises and
            // frees within its own arena: 4.8 MiB under 1F1B above).
            if (config.backwardHold && plan.recompute == Recompute::None)
              peak = std::max(peak, now + held[s] - kept);
            now -= kept;
          }
          peak = std::max(peak, now);
        }
        heldInFlight[r] = activation > 0 ? peak / activation : 0;
      }
    }
    if (deferTied) {
      double start = std::max(sim->rankEnd[firstRank],
                              sim->rankEnd[lastRank] + m * tiedTransfer);
      cost.pipelineTime =
          std::max(cost.pipelineTime, start + m * deferredWeight);
      rankWork[firstRank] += m * deferredWeight;
    } else if (tied) {
      cost.pipelineTime += tiedTransfer;
    }
  }
  for (int r = 0; r < plan.pp; ++r)
    if (rankWork[r] > rankWork[busiest])
      busiest = r;
  // Without a pipeline, devices sharing a node's cores take the node's work
  // over the devices that compute at once (a pipeline's simulation above
  // shares the cores action by action).
  if (share > 1 && plan.pp == 1) {
    // Collectives and their waits for descheduled peers are not work
    // another device can fill: each rank's come on top of the shared work
    // (the links are calibrated on ranks sharing the cores, so a
    // collective's time already includes what sharing costs it).
    double work = 0, waits = 0;
    for (int r = 0; r < plan.pp; ++r) {
      double rankWaits = 0;
      for (const StageCost &st : stages)
        for (int p = 0; p < kNumPassKinds; ++p)
          rankWaits += m * st.comm[p];
      work += rankWork[r] - rankWaits;
      waits = std::max(waits, rankWaits);
    }
    work *= double(plan.dp) * plan.tp;
    cost.pipelineTime =
        std::max(cost.pipelineTime, work / (nodes * slots) + waits);
  }
  // The busiest rank's compute and collectives.
  for (int s : getRankStages(plan, numStages, busiest)) {
    for (int k = 0; k < kNumOpClasses; ++k) {
      cost.computeTime += m * stages[s].compute[k];
      cost.computeByClass[k] += m * stages[s].compute[k];
    }
    cost.computeTime += m * stages[s].overhead;
    cost.overheadTime += m * stages[s].overhead;
    cost.tpCommTime += m * stages[s].tpComm;
  }
  cost.bubbleTime = std::max(0.0, cost.pipelineTime - rankWork[busiest]);
  cost.bubbleRate =
      cost.pipelineTime > 0 ? cost.bubbleTime / cost.pipelineTime : 0;

  cost.memory = getMemory(plan, stages, peakInFlight, heldInFlight);

  // Data-parallel gradient reduction (and ZeRO's parameter all_gather after
  // the step), per pipeline rank; the slowest rank decides.
  const LinkLevel &dpLevel =
      hardware.getLevel(plan.tp * plan.dp > hardware.devicesPerNode);
  double optimizerBw =
      hardware.memoryBandwidth * hardware.efficiency[(int)OpClass::Optimizer];
  // The optimizer step on a rank holding `params`: the gradient norm reads
  // the gradients, AdamW reads them again and reads and writes parameters
  // and both moments; every device steps at once, on the node's shared
  // cores.
  auto optimizerTime = [&](double params) {
    double shard = plan.zero >= 1 ? plan.dp : 1;
    double optBytes = params / shard *
                      (2 * model.elementBytes + 2 * config.gradBytes +
                       2 * config.optimizerBytes);
    return optBytes / optimizerBw * share;
  };
  for (int rank = 0; rank < plan.pp; ++rank) {
    RankSums sum = sumRank(plan, stages, rank);
    double params = sum.params, tensors = sum.paramTensors,
           backward = m * sum.backwardTime;
    // The parameters the rank reduces and updates: in a pipeline those it
    // owns (a tied one on the last stage's rank).
    PipelineReduction owned{1, params, tensors};
    if (plan.pp > 1)
      owned = getPipelineReduction(model, plan, stages, rank);
    double t = 0, bytes = 0;
    if (plan.dp > 1) {
      // braidc's programs reduce the gradients bucketed
      // (braid-bucket-collectives): in a pipeline all_reduced whole once per
      // step, after the rank's last W, under every ZeRO stage
      // (getPipelineReduction); without one in every micro-batch's W, one
      // bucket per layer instance and one of all the gradients of the ops
      // around the layers (since bc9f928), each split at the bucket cap
      // (getGradientBuckets), all_reduces, or under ZeRO reduce_scatters
      // into each device's share. Each is a blocking collective of the dp
      // group.
      double grads = owned.params * config.gradBytes;
      bool perMicrobatch =
          plan.pp == 1 && config.gradientReductionPerMicrobatch;
      double reductions = perMicrobatch ? m : 1;
      double buckets =
          perMicrobatch ? getGradientBuckets(getRankShare(model, owned.params))
                        : owned.calls;
      CollectiveKind kind = perMicrobatch && plan.zero >= 1
                                ? CollectiveKind::ReduceScatter
                                : CollectiveKind::AllReduce;
      t = reductions * buckets *
          (getCollectiveTime(dpLevel.get(kind), kind, grads / buckets,
                             plan.dp) +
           dpWait);
      bytes = reductions * (kind == CollectiveKind::AllReduce ? 2.0 : 1.0) *
              (plan.dp - 1) / plan.dp * grads;
      if (plan.zero == 1 || plan.zero == 2) {
        // Each rank updates its share, then gathers every parameter
        // tensor back whole, one blocking all_gather per tensor. Between
        // two, a rank updates one tensor's share: where ranks share cores,
        // each gather waits for a descheduled peer as long as the ranks
        // holding the cores take to reach their next one.
        double k = std::max(1.0, owned.tensors);
        double p = owned.params * model.elementBytes;
        double gatherWait =
            getDescheduledWait(plan, plan.dp, optimizerTime(owned.params) / k);
        t += k * (getCollectiveTime(dpLevel.get(CollectiveKind::AllGather),
                                    CollectiveKind::AllGather, p / k, plan.dp) +
                  gatherWait);
        bytes += double(plan.dp - 1) / plan.dp * p;
      } else if (plan.zero == 3) {
        bytes += m * double(plan.dp - 1) / plan.dp *
                 (params + sum.backwardParams) * model.elementBytes;
      }
      if (config.overlapGradientReduce)
        t = std::max(0.0, t - backward);
    }
    cost.dpCommTime = std::max(cost.dpCommTime, t);
    cost.dpCommBytes = std::max(cost.dpCommBytes, bytes);
    cost.optimizerTime =
        std::max(cost.optimizerTime, optimizerTime(owned.params));
  }
  // Per rank per step, ring volume of the tp collectives.
  if (plan.tp > 1) {
    double perRank = 0;
    for (int s : getRankStages(plan, numStages, busiest)) {
      const StageCost &st = stages[s];
      for (int i = st.firstLayer; i < st.firstLayer + st.numLayers; ++i) {
        const SegmentCost &seg = model.getLayer(i);
        int n = 0;
        for (int p = 0; p < kNumPassKinds; ++p)
          n += seg.tpAllReduces[(int)plan.recompute][p];
        perRank +=
            n * 2.0 * (plan.tp - 1) / plan.tp * seg.tpCollectiveBytes * scale;
      }
    }
    cost.tpCommBytes = m * perRank;
  }

  // The step's collectives outside the layers, the pipeline and the dp
  // reduction, mostly of one element (the gradient norm's pieces, the
  // loss's dp sums, the update's scale and the returned values'
  // broadcasts), each at its latency;
  // the slowest rank decides. The norm's pieces and the returns run back
  // to back after the optimizer's reduction, so a rank waits for
  // descheduled peers once per axis there: after the first call its peers
  // are in the same chain (expectedDescheduledWait of a gap of one latency
  // is nothing). The loss's dp sums come one a micro-batch, between
  // computations: each waits.
  cost.collectives = getCollectives(plan, stages);
  {
    const LinkLevel &tpLevel =
        hardware.getLevel(plan.tp > hardware.devicesPerNode);
    double tpWait = getDescheduledWait(plan, plan.tp, interval);
    const LinkLevel &ppLevel =
        hardware.getLevel(plan.getNumDevices() > hardware.devicesPerNode);
    std::vector<double> stepEnd(plan.pp, 0.0);
    std::vector<llvm::StringSet<>> waited(plan.pp);
    // `w` once for the rank's first call on the axis, nothing after.
    auto once = [&](const CollectiveCount &c, double w) {
      return waited[c.rank].insert(c.axis).second ? w : 0.0;
    };
    for (const CollectiveCount &c : cost.collectives) {
      if (c.axis == "tp" && c.what == "grad-norm") {
        stepEnd[c.rank] +=
            c.count * (getCollectiveTime(tpLevel.get(CollectiveKind::AllReduce),
                                         CollectiveKind::AllReduce, c.bytes,
                                         plan.tp)) +
            once(c, tpWait);
      } else if (c.axis == "dp" && c.what == "grad-norm") {
        stepEnd[c.rank] +=
            c.count * getCollectiveTime(dpLevel.get(CollectiveKind::AllReduce),
                                        CollectiveKind::AllReduce, c.bytes,
                                        plan.dp) +
            once(c, dpWait);
      } else if (c.axis == "pp" &&
                 (c.what == "grad-norm" || c.what == "update-scale" ||
                  c.what == "returns" || c.what == "tied-param")) {
        // A receive waits for its send; a broadcast over the pp ranks is
        // pp - 1 steps of a transfer's latency.
        const LinkCost &link = ppLevel.get(CollectiveKind::SendRecv);
        double steps = c.kind == "broadcast" ? plan.pp - 1 : 1;
        stepEnd[c.rank] +=
            c.count * (steps * link.alpha + c.bytes / link.beta) +
            once(c, wait);
      } else if (c.axis == "dp" && c.what == "loss") {
        stepEnd[c.rank] +=
            c.count *
            (getCollectiveTime(dpLevel.get(CollectiveKind::AllReduce),
                               CollectiveKind::AllReduce, c.bytes, plan.dp) +
             dpWait);
      }
    }
    for (double t : stepEnd)
      cost.stepEndCommTime = std::max(cost.stepEndCommTime, t);
  }
  cost.stepTime = cost.pipelineTime + cost.dpCommTime + cost.optimizerTime +
                  cost.stepEndCommTime;
  double batches = double(plan.getGlobalBatch()) / model.batch;
  cost.modelFlops = model.getModelFlops() * batches;
  auto executed = [&](const SegmentCost &s) {
    double n = 0;
    for (int p = 0; p < kNumPassKinds; ++p)
      n += s.passes[(int)plan.recompute][p].getFlops();
    return n * s.count;
  };
  double perBatch = executed(model.pre) + executed(model.post);
  for (const SegmentCost &l : model.layers)
    perBatch += executed(l);
  cost.executedFlops = perBatch * batches;
  cost.flopsPerDevice = cost.modelFlops / cost.stepTime / plan.getNumDevices();
  cost.mfu = peak > 0 ? cost.flopsPerDevice / peak : 0;
  cost.samplesPerSecond = plan.getGlobalBatch() / cost.stepTime;
  cost.fits = cost.getPeakMemory() <= hardware.deviceMemory;
  return cost;
}

std::string mlir::braid::plan::formatMemory(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return llvm::formatv("{0:F2} {1}", b, units[u]).str();
}

std::pair<std::string, std::string>
mlir::braid::plan::formatNeedAndBudget(double need, double budget) {
  std::string n = formatMemory(need), b = formatMemory(budget);
  if (n != b)
    return {n, b};
  return {llvm::formatv("{0:F0} B", std::ceil(need)).str(),
          llvm::formatv("{0:F0} B", std::floor(budget)).str()};
}

std::string mlir::braid::plan::formatSeconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:F3} ms", s * 1e3).str();
  return llvm::formatv("{0:F3} us", s * 1e6).str();
}

void mlir::braid::plan::printPlanCost(llvm::raw_ostream &os,
                                      const PlanCost &cost,
                                      const Hardware &hardware) {
  const Plan &plan = cost.plan;
  auto pct = [&](double t) {
    return cost.stepTime > 0 ? 100.0 * t / cost.stepTime : 0.0;
  };
  os << "plan: " << plan.str() << "\n";
  os << llvm::formatv("devices: {0} ({1}), global batch {2}\n",
                      plan.getNumDevices(), hardware.name,
                      plan.getGlobalBatch());
  os << llvm::formatv("step time: {0}\n", formatSeconds(cost.stepTime));
  os << llvm::formatv("  compute      {0,12}  {1,5:F1}%  (busiest pipeline "
                      "rank)\n",
                      formatSeconds(cost.computeTime), pct(cost.computeTime));
  if (cost.overheadTime > 0)
    os << llvm::formatv("    of which kernel overhead {0} ({1:F1}%)\n",
                        formatSeconds(cost.overheadTime),
                        pct(cost.overheadTime));
  os << llvm::formatv("  tp comm      {0,12}  {1,5:F1}%\n",
                      formatSeconds(cost.tpCommTime), pct(cost.tpCommTime));
  os << llvm::formatv("  bubble       {0,12}  {1,5:F1}%  (bubble rate {2:F4}, "
                      "pp transfer {3} each)\n",
                      formatSeconds(cost.bubbleTime), pct(cost.bubbleTime),
                      cost.bubbleRate, formatSeconds(cost.ppTransferTime));
  os << llvm::formatv("  dp comm      {0,12}  {1,5:F1}%\n",
                      formatSeconds(cost.dpCommTime), pct(cost.dpCommTime));
  os << llvm::formatv("  optimizer    {0,12}  {1,5:F1}%\n",
                      formatSeconds(cost.optimizerTime),
                      pct(cost.optimizerTime));
  os << llvm::formatv("throughput: {0:F1} samples/s, {1:F2} TFLOP/s per "
                      "device (model FLOPs), MFU {2:F1}%\n",
                      cost.samplesPerSecond, cost.flopsPerDevice / 1e12,
                      100 * cost.mfu);
  os << llvm::formatv("FLOPs per step: {0:e} model, {1:e} executed (with "
                      "recomputation)\n",
                      cost.modelFlops, cost.executedFlops);
  os << llvm::formatv("communication per rank per step: tp {0}, pp {1}, dp "
                      "{2}\n",
                      formatMemory(cost.tpCommBytes),
                      formatMemory(cost.ppCommBytes),
                      formatMemory(cost.dpCommBytes));
  os << "stages (per micro-batch):\n";
  os << llvm::formatv("  {0,5} {1,9} {2,12} {3,12} {4,12} {5,12} {6,12}\n",
                      "stage", "layers", "F", "B", "W", "tp comm",
                      "activation");
  for (size_t s = 0; s < cost.stages.size(); ++s) {
    const StageCost &st = cost.stages[s];
    os << llvm::formatv("  {0,5} {1,9} {2,12} {3,12} {4,12} {5,12} {6,12}\n", s,
                        st.numLayers == 0
                            ? std::string("none")
                            : llvm::formatv("{0}-{1}", st.firstLayer,
                                            st.firstLayer + st.numLayers - 1)
                                  .str(),
                        formatSeconds(st.forward), formatSeconds(st.backward),
                        formatSeconds(st.weight), formatSeconds(st.tpComm),
                        formatMemory(st.activationBytes));
  }
  os << llvm::formatv("memory per rank (device: {0}):\n",
                      formatMemory(hardware.deviceMemory));
  // The compiled program's buffers, where counted (compiledBuffers).
  bool buffers = llvm::any_of(
      cost.memory, [](const RankMemory &m) { return m.buffers > 0; });
  os << llvm::formatv("  {0,4} {1,12} {2,12} {3,12} {4,12} {5,12} ", "rank",
                      "params", "grads", "optimizer", "activations",
                      "workspace");
  os << (buffers ? llvm::formatv("{0,12} ", "buffers").str() : "")
     << llvm::formatv("{0,12}\n", "total");
  for (size_t r = 0; r < cost.memory.size(); ++r) {
    const RankMemory &m = cost.memory[r];
    os << llvm::formatv("  {0,4} {1,12} {2,12} {3,12} {4,12} {5,12} ", r,
                        formatMemory(m.params), formatMemory(m.grads),
                        formatMemory(m.optimizer), formatMemory(m.activations),
                        formatMemory(m.workspace));
    os << (buffers ? llvm::formatv("{0,12} ", formatMemory(m.buffers)).str()
                   : "")
       << llvm::formatv("{0,12}\n", formatMemory(m.getTotal()));
  }
  os << (cost.fits ? "fits in device memory\n"
                   : "does NOT fit in device memory\n");
}

std::vector<CollectiveCount>
PlanCostModel::getCollectives(const Plan &plan,
                              const std::vector<StageCost> &stages) const {
  std::vector<CollectiveCount> out;
  auto add = [&](int rank, const char *axis, const char *kind, const char *what,
                 double count, double bytes) {
    if (count <= 0)
      return;
    for (CollectiveCount &c : out)
      if (c.rank == rank && c.axis == axis && c.kind == kind &&
          c.what == what && c.bytes == bytes) {
        c.count += count;
        return;
      }
    out.push_back({rank, axis, kind, what, count, bytes});
  };
  int numStages = stages.size();
  int m = plan.microbatches;
  double scale = double(plan.microBatchSize) / model.batch;
  int r = (int)plan.recompute;
  bool sp = plan.sequenceParallel && plan.tp > 1;
  // The segments of stage s, each with its instances (consecutive instances
  // of one repeat at once, as braidc stacks them).
  auto segmentsOf = [&](int s) {
    std::vector<std::pair<const SegmentCost *, int>> segs;
    const StageCost &st = stages[s];
    if (s == 0)
      segs.push_back({&model.pre, 1});
    for (int i = st.firstLayer; i < st.firstLayer + st.numLayers;) {
      const SegmentCost &seg = model.getLayer(i);
      int n = 1;
      while (i + n < st.firstLayer + st.numLayers &&
             &model.getLayer(i + n) == &seg)
        ++n;
      segs.push_back({&seg, n});
      i += n;
    }
    if (s == numStages - 1)
      segs.push_back({&model.post, 1});
    return segs;
  };
  for (int rank = 0; rank < plan.pp; ++rank) {
    RankSums sum = sumRank(plan, stages, rank);
    double params = sum.params, tensors = sum.paramTensors;
    PipelineReduction owned{1, params, tensors};
    if (plan.pp > 1)
      owned = getPipelineReduction(model, plan, stages, rank);
    double normPieces = 0;
    for (int s : getRankStages(plan, numStages, rank)) {
      for (auto [seg, n] : segmentsOf(s)) {
        if (plan.tp > 1) {
          double bytes = seg->tpCollectiveBytes * scale;
          for (int p = 0; p < kNumPassKinds; ++p) {
            int k = seg->tpAllReduces[r][p];
            if (!sp) {
              add(rank, "tp", "all_reduce", "layers", double(m) * n * k, bytes);
              continue;
            }
            int scatters = k, gathers = k;
            if (p == (int)PassKind::Weight && seg != &model.pre &&
                seg != &model.post)
              gathers += seg->tpColumnProducts;
            add(rank, "tp", "reduce_scatter", "layers",
                double(m) * n * scatters, bytes);
            add(rank, "tp", "all_gather", "layers", double(m) * n * gathers,
                bytes);
          }
          add(rank, "tp", "all_gather", "cross-entropy",
              double(m) * n * seg->tpRowGathers,
              seg->tpRowGatherBytes * scale * plan.tp);
          bool layer = seg != &model.pre && seg != &model.post;
          if (sp && layer && seg->sequencePartialParamTensors > 0)
            add(rank, "tp", "all_reduce", "sequence-grads", double(m) * n,
                seg->sequencePartialParams * config.gradBytes);
          // The gradient norm: each divided tensor's sum of squares (with
          // sequence parallelism also those divided along the sequence).
          normPieces += seg->splitParamTensors +
                        (sp ? seg->sequenceSplitParamTensors : 0);
        }
      }
      if (sp) {
        auto [calls, bytes] = getSequenceGradSums(s, numStages);
        if (calls > 0)
          add(rank, "tp", "all_reduce", "sequence-grads", m * calls, bytes);
      }
    }
    // The gradient norm's tp sums of the rank's pieces, one float each, in
    // one all_reduce (braid-bucket-collectives).
    if (normPieces > 0)
      add(rank, "tp", "all_reduce", "grad-norm", 1, 4 * normPieces);
    if (plan.dp > 1) {
      double grads = owned.params * config.gradBytes;
      if (plan.pp == 1 && config.gradientReductionPerMicrobatch) {
        double buckets = getGradientBuckets(getRankShare(model, owned.params));
        double loss = isLossInGradientBucket(plan) ? 4 : 0;
        add(rank, "dp", plan.zero >= 1 ? "reduce_scatter" : "all_reduce",
            "grad-bucket", m * buckets, (grads + loss) / buckets);
      } else {
        double loss = isLossInGradientBucket(plan) &&
                              rank == getRankOf(plan, numStages - 1)
                          ? 4
                          : 0;
        add(rank, "dp", "all_reduce", "grad-bucket", owned.calls,
            (grads + loss) / owned.calls);
      }
      // The loss's mean over the dp group, per micro-batch, where the loss
      // is computed, unless it is in the bucket. With ZeRO and no pipeline a device holds its share of the
      // reduce-scattered gradients: the gradient norm sums their squares
      // over dp, one all_reduce of one float a step; of one micro-batch
      // (no accumulation loop: one block) with the loss's sum in it.
      bool normSum = plan.pp == 1 && plan.zero >= 1;
      bool lossSum = rank == getRankOf(plan, numStages - 1) &&
                     !isLossInGradientBucket(plan);
      bool lossWithNorm = normSum && lossSum && m == 1;
      if (lossSum && !lossWithNorm)
        add(rank, "dp", "all_reduce", "loss", m, 4);
      if (normSum)
        add(rank, "dp", "all_reduce", "grad-norm", 1, lossWithNorm ? 8 : 4);
      if (plan.zero == 3)
        for (int s : getRankStages(plan, numStages, rank)) {
          auto [lookups, bytes] = getZeroThreeLookups(plan, s, numStages);
          if (lookups > 0)
            add(rank, "dp", "reduce_scatter", "lookup", m * lookups,
                bytes / lookups);
        }
      // ZeRO-1/2 gather what the rank updated; ZeRO-3 its stages' tensors.
      double k = std::max(1.0, owned.tensors);
      if (plan.zero == 1 || plan.zero == 2)
        add(rank, "dp", "all_gather", "zero-gather", k,
            owned.params * model.elementBytes / k);
      if (plan.zero == 3) {
        for (int s : getRankStages(plan, numStages, rank)) {
          ZeroThreeGathers g =
              getZeroThreeGathers(plan, stages[s], s, numStages);
          if (g.forward > 0)
            add(rank, "dp", "all_gather", "zero-gather", m * g.forward,
                g.forwardBytes / g.forward);
          if (g.backward > 0)
            add(rank, "dp", "all_gather", "zero-gather-b", m * g.backward,
                g.backwardBytes / g.backward);
          if (g.values > 0)
            add(rank, "dp", "all_gather", "zero-vocab", m * g.values,
                g.valueBytes / g.values);
        }
      }
    }
  }
  if (plan.pp > 1) {
    for (int s = 0; s + 1 < numStages; ++s) {
      int a = getRankOf(plan, s), b = getRankOf(plan, s + 1);
      if (a == b)
        continue;
      const SegmentCost &last =
          stages[s].numLayers > 0
              ? model.getLayer(stages[s].firstLayer + stages[s].numLayers - 1)
              : model.pre;
      double bytes = last.outputBytes * scale / plan.tp;
      add(a, "pp", "send", "activation", m, bytes);
      add(b, "pp", "recv", "activation", m, bytes);
      add(b, "pp", "send", "gradient", m, bytes);
      add(a, "pp", "recv", "gradient", m, bytes);
    }
    int first = getRankOf(plan, 0), last = getRankOf(plan, numStages - 1);
    if (model.tiedParams > 0 && first != last) {
      // The first stage's partial of the tied gradient, sent to the last
      // stage after the pipeline (each tp rank its share).
      double bytes = model.tiedParams / plan.tp * config.gradBytes;
      add(first, "pp", "send", "tied-gradient", 1, bytes);
      add(last, "pp", "recv", "tied-gradient", 1, bytes);
    }
    // The gradient norm is computed on the last stage's rank: every other
    // rank sends it each of its gradients' sum of squares (a repeat's
    // instances on a stage are one stacked tensor; the tied one is summed
    // there).
    for (int rank = 0; rank < plan.pp; ++rank) {
      if (rank == last)
        continue;
      double pieces = 0;
      for (int s : getRankStages(plan, numStages, rank)) {
        for (auto [seg, n] : segmentsOf(s)) {
          pieces += seg->paramTensors;
          if ((seg == &model.pre || seg == &model.post) && model.tiedParams > 0)
            pieces -= model.tiedParamTensors;
        }
      }
      add(rank, "pp", "send", "grad-norm", pieces, 4);
      add(last, "pp", "recv", "grad-norm", pieces, 4);
    }
    // The step's gradient scale, which the last stage computes with the
    // norm, to every rank before the first update of another stage's
    // parameters; the returned loss and gradient norm, from the last stage
    // to every rank; the tied parameter, updated there, back to the first
    // stage: broadcast whole, or under ZeRO-3 each device's share point to
    // point.
    double tiedBytes = model.tiedParams / plan.tp * model.elementBytes;
    bool tiedReturn = model.tiedParams > 0 && first != last;
    for (int rank = 0; rank < plan.pp; ++rank) {
      add(rank, "pp", "broadcast", "update-scale", 1, 4);
      add(rank, "pp", "broadcast", "returns", 2, 4);
      if (tiedReturn && plan.zero < 3)
        add(rank, "pp", "broadcast", "tied-param", 1, tiedBytes);
    }
    if (tiedReturn && plan.zero >= 3) {
      add(last, "pp", "send", "tied-param", 1, tiedBytes / plan.dp);
      add(first, "pp", "recv", "tied-param", 1, tiedBytes / plan.dp);
    }
  }
  return out;
}
