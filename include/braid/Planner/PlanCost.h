//===- PlanCost.h - Step time and memory of a parallel plan -----*- C++ -*-===//
//
// Predicts what one training step of a plan costs on a hardware
// description: per pipeline stage and micro-batch, F, B and W times (each
// op class's FLOPs over its achieved peak, memory-bound ops' bytes over
// memory bandwidth, plus the stage's tensor-parallel collectives); the
// pipeline's time from the schedule library's simulator; the data-parallel
// gradient reduction and ZeRO traffic after it; and memory per rank.
//
// Devices are numbered tp fastest, then dp, then pp (Megatron-LM's order):
// a group whose devices are not all in one node uses the inter-node link.
//
// Evaluating a plan touches only ModelCost's per-segment numbers (no IR),
// so a search can call it many thousands of times; generated schedules are
// cached per (schedule, p, m, v).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PLANNER_PLANCOST_H
#define BRAID_PLANNER_PLANCOST_H

#include "braid/Planner/Hardware.h"
#include "braid/Planner/ModelCost.h"
#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Schedule.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mlir::braid::plan {

/// A parallel plan: everything braidc's training options decide.
struct Plan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  /// Model chunks per pipeline rank (interleaved 1F1B: >= 2; ZB-V: 2); 0:
  /// the schedule's default.
  int chunks = 0;
  /// Samples per micro-batch, and micro-batches per step on each dp rank:
  /// the global batch is dp * microBatchSize * microbatches.
  int64_t microBatchSize = 1;
  int microbatches = 1;
  sched::ScheduleKind schedule = sched::ScheduleKind::OneFOneB;
  /// ZeRO stage 0-3 over dp.
  int zero = 0;
  bool sequenceParallel = false;
  Recompute recompute = Recompute::None;
  /// Layer instances per model stage (pp * chunks entries, summing to the
  /// model's layers); empty: as even as possible (the first stages take the
  /// remainder). The ops before the layers go with stage 0, those after with
  /// the last stage; either of these two may have 0 layers where the model
  /// has such ops (the embedding or the head alone).
  std::vector<int> stageLayers;

  int getNumDevices() const { return dp * tp * pp; }
  int64_t getGlobalBatch() const { return dp * microBatchSize * microbatches; }
  /// "dp=2,tp=2,pp=2 schedule=zb-h1 chunks=1 mbs=1 m=8 zero=1 sp
  /// recompute=full"
  std::string str() const;
};

/// braidc's --precision.
enum class Precision {
  F32,
  /// bf16-mixed: braidc stores the saved activations (and a pipeline's
  /// hand-offs within a chunk) in bf16, 2 bytes an element; cross-stage
  /// transfers, gradients, master weights and optimizer state stay f32.
  BF16Mixed,
};

/// What the model's training keeps per parameter, beyond the parameter.
struct TrainingConfig {
  /// With BF16Mixed, saved activations count 2 bytes an element where the
  /// model's are wider (PlanCostModel::getSavedBytes).
  Precision precision = Precision::F32;
  /// Bytes per gradient element (0: the parameter's element bytes).
  double gradBytes = 0;
  /// Bytes of optimizer state per parameter: AdamW's two moments in f32 (8),
  /// plus an f32 master copy when parameters are 16-bit (Megatron's mixed
  /// precision: 12).
  double optimizerBytes = 8;
  /// Data-parallel gradient reduction overlapped with the backward: its time
  /// is hidden except what exceeds the last stage's backward. Off: after the
  /// pipeline flush, as Megatron-LM (2021) does.
  bool overlapGradientReduce = false;
  /// A tied parameter's gradient (GPT's wte, on the first and the last
  /// stage) summed after the pipeline, as Megatron-LM and Braid's compiled
  /// pipelines do (braid-pipeline-outline moves the sum out of the W
  /// pieces): the first stage's W runs in the schedule and one exchange of
  /// the tied gradient between the two stages follows it. Off: the first
  /// stage's whole W after the schedule, as a compiled pipeline runs it
  /// when the sum stays in a W piece (ModelCost::tiedParams).
  bool tiedGradientAtStepEnd = true;
  /// Without a pipeline, the data-parallel gradient reduction in every
  /// micro-batch's W, one bucket per layer instance and one of all the
  /// gradients of the ops around them (all_reduces, under ZeRO
  /// reduce_scatters), as braidc's programs run it (since bc9f928). Off: once
  /// per step after the accumulation, one all_reduce bucket, as Megatron-LM
  /// does.
  bool gradientReductionPerMicrobatch = true;
  /// braidc's bucket cap (--bucket-mb, 25 MiB), in bytes of the
  /// gradients' f32 elements, as braid-bucket-collectives counts them: with
  /// gradientReductionPerMicrobatch a bucket larger than it (a layer
  /// instance's gradients, the ops around the layers') is
  /// ceil(bytes / cap) reductions (getGradientBuckets). 0: no cap.
  double bucketCapBytes = 25.0 * (1 << 20);
  /// ZeRO-3's parameter gathers bucketed as braidc's default does
  /// (braid-bucket-gathers at the same cap, of the gathered bytes): per
  /// layer instance and pass the gathers of the first op that reads
  /// parameters alone when `zero3Prefetch` > 0 and the precision is f32
  /// (braid-zero3-prefetch starts those in the instance before; under
  /// bf16-mixed the working copies do not cross), the rest in buckets; the
  /// ops before the layers and those after a bucket each. Off: one gather
  /// per tensor (braidc --bucket-mb 0).
  bool gatherBuckets = true;
  /// braidc's --zero3-prefetch (1): only whether it is 0 counts here (a
  /// depth N > 1 leaves N groups alone, priced as one).
  int zero3Prefetch = 1;
  /// Also count the buffers braidc's compiled program holds beyond the
  /// model's state and the schedule's saved activations
  /// (RankMemory::buffers): what `bench/plan_ranking.py` sets against each
  /// rank's resident set. Off by default: the gradient means on every
  /// pipeline stage are braidc's today, not a pipeline's necessity, and
  /// would bar large models from pipelines.
  bool compiledBuffers = false;
  /// With compiledBuffers: the arenas of one micro-batch's layer and
  /// pipeline piece calls (their intermediates, their gradients, and what B
  /// hands to W), in units of the largest layer's activations without
  /// recomputation for one micro-batch (until 2026-12-03 the largest
  /// segment's, the head's logits included: docs/planner.md, "Large
  /// vocabularies"). Fitted to braidc's memory plan
  /// (`braidc --memory-report`) of 16 plans of a small GPT on 4 ranks
  /// (docs/planner.md): what it holds beyond the other terms is 3.3-9.5
  /// such units, about 5 in the middle. Used without a pipeline only: a
  /// pipeline's arenas are derived from its layer functions (since
  /// 2026-12-03). 0 leaves out the arenas and the head's B working
  /// gradient (the unit tests isolate the other terms so).
  double workingActivationCopies = 5;
  /// With compiledBuffers: what the layers hold between their B and their
  /// W beyond the saved activations (SegmentCost::getHeldBytes); false
  /// leaves it out (the unit tests isolate the other terms so).
  bool backwardHold = true;
};

/// One model stage (a chunk of one pipeline rank), per micro-batch.
struct StageCost {
  int firstLayer = 0;
  int numLayers = 0;
  /// Seconds per micro-batch, including tensor-parallel collectives.
  double forward = 0;
  double backward = 0;
  double weight = 0;
  /// The collectives' part of the three.
  double tpComm = 0;
  /// Of the collectives (tp, and ZeRO-3's gathers), the waits for
  /// descheduled peers (PlanCostModel::getDescheduledWait).
  double wait = 0;
  /// Points per micro-batch (F + B + W) where this stage's ranks block:
  /// its tp collectives (with sp, a reduce_scatter and the all_gather
  /// after it one point), ZeRO-3's gathers, and its pipeline receives. Where
  /// ranks share cores, a rank of another group gives its core back at
  /// each of them.
  double blockingPoints = 0;
  /// Of F, B and W, the time in collectives (tp, and ZeRO-3's gathers):
  /// a rank waiting in one occupies no core where ranks share cores.
  double comm[kNumPassKinds] = {};
  /// Matmul / attention / memory-bound / row-wise compute seconds of F + B
  /// + W.
  double compute[kNumOpClasses] = {};
  /// The kernels' fixed costs (Hardware::kernelOverhead) in F + B + W.
  double overhead = 0;
  /// Of W, what adding the micro-batch's gradients into the step's sums
  /// costs as braidc's programs do it (PlanCostModel::getStageCosts).
  double accumulation = 0;
  /// Activation bytes F keeps per micro-batch.
  double activationBytes = 0;
  /// Parameters this stage holds on one rank (elements).
  double params = 0;
  /// Parameter tensors this stage holds (ZeRO-1/2 gather each one after
  /// the optimizer step).
  double paramTensors = 0;
  /// Of those, the tensors B reads and their elements on one rank
  /// (ZeRO-3 gathers these before B).
  double backwardParamTensors = 0;
  double backwardParams = 0;
  /// With TrainingConfig::gatherBuckets: ZeRO-3's gathers of the stage's
  /// layer instances in F and in B (getZeroThreeGathers).
  double layerForwardGathers = 0;
  double layerBackwardGathers = 0;
};

/// Memory of one pipeline rank, bytes.
struct RankMemory {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double workspace = 0;
  /// With TrainingConfig::compiledBuffers, what braidc's program holds
  /// besides: gradient buffers ZeRO does not shrink there, receive buffers,
  /// the layers' and pieces' working arenas, and the step arena sized for
  /// the busiest pipeline rank (PlanCostModel::getMemory).
  double buffers = 0;
  double getTotal() const {
    return params + grads + optimizer + activations + workspace + buffers;
  }
};

/// Calls of one collective of one size that every device of one pipeline
/// rank makes in a step, as the model costs them
/// (PlanCostModel::getCollectives): what `braid-plan --json` lists under
/// "collectives" and python/tests/test_plan_collectives.py checks against
/// the compiled program's trace.
struct CollectiveCount {
  /// Pipeline rank.
  int rank = 0;
  /// "tp", "dp" or "pp".
  std::string axis;
  /// "all_reduce", "all_gather", "reduce_scatter", "broadcast" (over the
  /// axis' group), "send", "recv" (pp: to or from one other pipeline
  /// rank).
  std::string kind;
  /// What it is for: "layers", "grad-norm", "loss", "grad-bucket", ...
  std::string what;
  /// Calls per step, and the bytes of each one's message per device (an
  /// all_gather's result, a reduce_scatter's input, the whole of the
  /// others).
  double count = 0;
  double bytes = 0;
};

/// ZeRO-3's all_gathers over dp of one model stage per micro-batch, bytes
/// the whole messages' in all (PlanCostModel::getZeroThreeGathers).
struct ZeroThreeGathers {
  /// Parameter tensors gathered for F, and again for B.
  double forward = 0;
  double forwardBytes = 0;
  double backward = 0;
  double backwardBytes = 0;
  /// Values of no parameter gathered in F (a lookup's ids, a
  /// vocabulary-parallel head's input rows, labels, per-row statistics and
  /// logits).
  double values = 0;
  double valueBytes = 0;
};

struct PlanCost {
  Plan plan;
  /// Seconds per step: pipeline time plus what is not overlapped of the
  /// data-parallel reduction and the optimizer step.
  double stepTime = 0;
  /// The pipeline's time (the simulator's cost) and its parts on the
  /// busiest rank: compute, tensor-parallel collectives, pipeline bubble
  /// (stepTime's pipeline part minus the busiest rank's work).
  double pipelineTime = 0;
  double computeTime = 0;
  /// computeTime by op class (Matmul, Attention, Memory, RowWise), and the
  /// kernels' fixed costs (the rest of computeTime).
  double computeByClass[kNumOpClasses] = {};
  double overheadTime = 0;
  double tpCommTime = 0;
  double bubbleTime = 0;
  double bubbleRate = 0;
  /// Data-parallel gradient reduction and ZeRO gathers not overlapped.
  double dpCommTime = 0;
  /// The optimizer step (memory bound: parameters, gradients and state
  /// read and written once).
  double optimizerTime = 0;
  /// Pipeline transfers: the time of one, and bytes per rank per step.
  double ppTransferTime = 0;
  /// The step's collectives beside the layers', the pipeline's and the dp
  /// reduction: the gradient norm's tp sums (and dp sum, of ZeRO's shares)
  /// and its pieces sent to the rank that computes it, the loss's dp sums,
  /// and the pp broadcasts of the update's scale, the returned loss and
  /// norm and the updated tied parameter (the slowest pipeline rank's).
  double stepEndCommTime = 0;
  /// Every collective of the step, per pipeline rank (getCollectives).
  std::vector<CollectiveCount> collectives;
  /// Bytes per rank per step sent by each axis' collectives.
  double tpCommBytes = 0;
  double ppCommBytes = 0;
  double dpCommBytes = 0;
  /// Model FLOPs of the step over all devices (F + B + W without
  /// recomputation), and FLOPs actually executed (with it).
  double modelFlops = 0;
  double executedFlops = 0;
  /// modelFlops / stepTime / devices, and that over the device's peak.
  double flopsPerDevice = 0;
  double mfu = 0;
  /// Samples (sequences) per second.
  double samplesPerSecond = 0;
  std::vector<StageCost> stages;
  /// Per pipeline rank.
  std::vector<RankMemory> memory;
  double getPeakMemory() const;
  /// True if every rank fits the device memory.
  bool fits = false;
};

/// Evaluates plans of one model on one hardware description. Not
/// thread-safe (the schedule cache).
/// Whether ZeRO-3 over plan.dp divides `table` along its vocabulary: the
/// first dimension dp divides that tp does not (tp divides a vocabulary
/// table along its vocabulary where it can). Mirrors braid-shard's choice
/// (ShardPass::runOnOperation's zeroSplit, lib/Dialect/Braid/Transforms/
/// Shard.cpp), which is inline there, not a function both could call;
/// ZeroShardTest.ZeroThreeDividesTheDimensionBraidShardDoes fails if the
/// two disagree.
bool isDividedAlongVocab(const VocabTable &table, const Plan &plan);

class PlanCostModel {
public:
  PlanCostModel(const ModelCost &model, const Hardware &hardware,
                TrainingConfig config = {});
  ~PlanCostModel();

  /// Checks that `plan` can run the model: degrees >= 1, tp dividing the
  /// divided dimensions is not checked here (the IR decides), layers
  /// dividing into stages, the schedule's constraints (interleaved: m a
  /// multiple of p), ZeRO 0-3. Errors say what to change.
  llvm::Error validate(const Plan &plan) const;

  /// The predicted cost of `plan`; fails as validate does, or if the
  /// schedule cannot be generated.
  llvm::Expected<PlanCost> evaluate(const Plan &plan);

  /// Seconds a blocking collective of `groupSize` of the plan's devices
  /// waits, on average, for a member the operating system has descheduled
  /// (0 unless the plan's devices share cores). Only where the node's
  /// devices outside the group can hold every core is a member kept from
  /// one: a member that waits yields its core, and if the others are all in
  /// the group (tp4 or dp4 on 4 ranks) a member takes it. A member then
  /// waits until a rank holding a core blocks itself (every
  /// `competitorInterval` seconds of its compute, at a uniformly random
  /// point of it; behind outside / cores such ranks where more queue for a
  /// core) or the system preempts it (Hardware::descheduledWait, measured
  /// against ranks that never block), whichever comes first:
  /// expectedDescheduledWait.
  double getDescheduledWait(const Plan &plan, int groupSize,
                            double competitorInterval) const;

  /// The collectives a step of `plan` runs on each pipeline rank, as the
  /// model costs them: tp sums of the layers (reduce_scatters and
  /// all_gathers with sequence parallelism) and of the gradient norm, the
  /// dp gradient reduction, the loss's dp sum, the gradient norm's dp sum
  /// under ZeRO and ZeRO's gathers, pipeline transfers, the tied gradient's
  /// send from the first stage to the last, the gradient norm's pieces sent
  /// to the last stage and the broadcasts from it (the update's scale, the
  /// returned loss and norm, the updated tied parameter).
  std::vector<CollectiveCount>
  getCollectives(const Plan &plan, const std::vector<StageCost> &stages) const;
  /// ZeRO-3's gathers of stage `s` (of `numStages`, costed as `st`) per
  /// micro-batch: its parameter tensors before F (not a vocabulary table
  /// ZeRO-3 divides along its vocabulary, ModelCost's VocabTable, where a
  /// lookup reads it as stored and gathers its ids instead, and without a
  /// pipeline a head too, gathering the values it needs; in a pipeline the
  /// last stage's F gathers a tied table as well) and the ones B reads
  /// before B (of the ops around the layers, whose B reads what their F
  /// gathered, only such a table without a pipeline).
  ZeroThreeGathers getZeroThreeGathers(const Plan &plan, const StageCost &st,
                                       int s, int numStages) const;
  /// The same, one gather per parameter tensor (braidc --bucket-mb 0);
  /// getZeroThreeGathers counts braid-bucket-gathers' buckets instead with
  /// TrainingConfig::gatherBuckets, the bytes alike.
  ZeroThreeGathers getZeroThreeTensorGathers(const Plan &plan,
                                             const StageCost &st, int s,
                                             int numStages) const;
  /// ZeRO-3's reduce_scatters of stage s's embedding lookups in a divided
  /// table per micro-batch: calls, and their bytes in all.
  std::pair<double, double> getZeroThreeLookups(const Plan &plan, int s,
                                                int numStages) const;

  /// With sequence parallelism, the all_reduces over tp by which stage `s`
  /// sums in W the gradients of the ops around the layers it holds that
  /// each rank computes over its block of the sequence
  /// (SegmentCost::sequencePartialParamTensors): calls and their bytes in
  /// all, one micro-batch. braidc's programs sum them in one bucket, and a
  /// layer instance's in one call.
  std::pair<double, double> getSequenceGradSums(int s, int numStages) const;
  /// Whether the loss's dp sum of each micro-batch goes in the bucket of
  /// the gradients of the ops around the layers (no pipeline, no ZeRO).
  bool isLossInGradientBucket(const Plan &plan) const;

  /// Per-stage costs alone (no schedule, no simulation): the cheap part a
  /// search can use to prune.
  llvm::Expected<std::vector<StageCost>> getStageCosts(const Plan &plan) const;

  /// Memory of every pipeline rank for `plan`, with `peakInFlight[r]` the
  /// peak micro-batch activations (in units of a whole rank's activation
  /// of one micro-batch) the schedule keeps on rank r; `heldInFlight` as
  /// addCompiledBuffers takes it.
  std::vector<RankMemory>
  getMemory(const Plan &plan, const std::vector<StageCost> &stages,
            const std::vector<double> &peakInFlight,
            const std::vector<double> &heldInFlight = {}) const;

  /// With TrainingConfig::compiledBuffers and no pipeline: the gradient
  /// accumulation loop's buffers beyond the rank's gradients.
  double getAccumulationBytes(const Plan &plan) const;
  /// With TrainingConfig::compiledBuffers and sequence parallelism: the
  /// runtime's staging buffers of the collectives pipeline rank `rank` runs.
  double getStagingBytes(const Plan &plan, const std::vector<StageCost> &stages,
                         int rank) const;
  /// With TrainingConfig::compiledBuffers, ZeRO and no pipeline: the
  /// runtime's staging buffers of the gradients' reduce_scatter sites.
  double getZeroStagingBytes(const Plan &plan) const;
  /// With TrainingConfig::compiledBuffers, ZeRO and no pipeline: MPI's
  /// temporary buffers of the largest gradient reduce_scatter on the dp
  /// group's first device (the largest of the group).
  double getReduceScatterTemporaryBytes(const Plan &plan) const;
  /// Without a pipeline, with gradientReductionPerMicrobatch: the dp
  /// buckets of one micro-batch's gradients on a rank that holds `share` of
  /// each parameter (1 / tp of the divided ones, about): each layer
  /// instance's, and the one of the ops around the layers, each split at
  /// TrainingConfig::bucketCapBytes.
  double getGradientBuckets(double share) const;
  /// The gathers braid-bucket-gathers makes of `tensors` parameter gathers
  /// of one block that gather `bytes` in all (TrainingConfig::gatherBuckets).
  double getGatherBuckets(double tensors, double bytes) const;
  /// The gradient elements of the ops around the layers, which braidc's
  /// programs reduce over dp in one bucket (bc9f928), the head's partial of
  /// a tied parameter included.
  double getOutsideBucketParams() const;
  /// With TrainingConfig::compiledBuffers and a pipeline: the results of
  /// one micro-batch's W (its chunk's gradients) before they join the means.
  double getPipelineResultBytes(const Plan &plan,
                                const std::vector<StageCost> &stages,
                                int rank) const;
  /// With TrainingConfig::compiledBuffers: sets each rank's buffers;
  /// `heldInFlight`, where not empty, is the schedule's peak with a
  /// micro-batch between its B and its W counted at its activations without
  /// recomputation (in units of the rank's activation with it).
  void addCompiledBuffers(const Plan &plan,
                          const std::vector<StageCost> &stages,
                          std::vector<RankMemory> &memory,
                          const std::vector<double> &peakInFlight,
                          const std::vector<double> &heldInFlight) const;

  /// Activation bytes counted at the source's element size (ModelCost) as
  /// braidc stores them under the configured precision: bf16-mixed keeps
  /// saved values at 2 bytes an element.
  double getStoredBytes(double bytes) const;
  /// `seg`'s saved activation bytes for one of the model's micro-batches
  /// (SegmentCost::getSavedBytes), stored (getStoredBytes).
  double getSavedBytes(const SegmentCost &seg, Recompute recompute, int tp,
                       bool sequenceParallel) const;
  /// SegmentCost::getHeldBytes, stored (getStoredBytes).
  double getHeldBytes(const SegmentCost &seg, Recompute recompute, int tp,
                      bool sequenceParallel) const;

  const ModelCost &getModel() const { return model; }
  const Hardware &getHardware() const { return hardware; }

private:
  ModelCost model;
  Hardware hardware;
  TrainingConfig config;
  double peak = 0;
  struct ScheduleCache;
  std::unique_ptr<ScheduleCache> cache;
};

/// The expected wait of a rank that needs a core held by a rank blocking
/// every `interval` seconds (at a uniformly random point of it), with
/// `ahead` such ranks queued for that core before it (each runs to its
/// next blocking point), or preempted after `limit`:
/// E[min((ahead - 1 + U) interval, limit)], U uniform on [0, 1].
/// `interval` <= 0: no blocking point known, `limit`.
double expectedDescheduledWait(double limit, double interval, int ahead = 1);

/// Prints the prediction: step time, its breakdown, TFLOP/s per device,
/// MFU, per-stage F/B/W and per-rank memory.
void printPlanCost(llvm::raw_ostream &os, const PlanCost &cost,
                   const Hardware &hardware);

/// "1.50 GiB", "12.00 KiB": bytes for reports and errors.
std::string formatMemory(double bytes);
/// A need over a budget as formatMemory prints them, or both in bytes
/// where two decimals would print the need as the budget ("1446912 B",
/// "1446911 B").
std::pair<std::string, std::string> formatNeedAndBudget(double need,
                                                        double budget);
/// "1.234 s", "12.345 ms", "5.000 us".
std::string formatSeconds(double seconds);

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_PLANCOST_H
