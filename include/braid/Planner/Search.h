//===- Search.h - Finding the fastest parallel plan that fits ---*- C++ -*-===//
//
// The planner's search: over the ways to split N devices into dp x tp x pp
// (and pipeline chunks), the micro-batch size and count of a global batch,
// the pipeline schedule, the ZeRO stage, sequence parallelism,
// recomputation and the stage boundaries, the plans that fit a per-device
// memory budget, ranked by the step time PlanCostModel predicts.
//
// It stays fast by doing the expensive part last: every candidate gets its
// per-stage costs (no schedule) and its memory (the schedule's peak
// in-flight micro-batches, from a cache of unit-time simulations), which
// prune the plans over budget; the rest are simulated in the order of a
// lower bound on their step time (the busiest pipeline rank's work), and
// the search stops when that bound reaches the k-th best step time found.
// Everything is deterministic: candidates are enumerated in a fixed order
// and ties keep it.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PLANNER_SEARCH_H
#define BRAID_PLANNER_SEARCH_H

#include "braid/Planner/PlanCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::braid::plan {

struct SearchOptions {
  /// Devices every plan uses (dp * tp * pp).
  int devices = 1;
  /// Samples per step; 0: the model's batch.
  int64_t globalBatch = 0;
  /// Samples of one micro-batch over all dp ranks (dp * micro-batch size)
  /// when the program fixes it (braidc compiles the model's batch as one
  /// micro-batch, divided over dp); 0: free, from `microBatchSizes`.
  int64_t microBatchSamples = 0;
  /// Micro-batch sizes (per dp rank) to try when free; empty: 1, 2, 4, 8.
  std::vector<int64_t> microBatchSizes;
  /// Legal tensor-parallel degrees (the model's dimensions divide them); and
  /// those where sequence parallelism is legal too. Unset: any.
  std::optional<std::vector<int>> tpDegrees;
  std::optional<std::vector<int>> sequenceParallelTpDegrees;
  /// Why the other degrees are not legal, for the messages.
  std::vector<std::pair<int, std::string>> illegalTp;
  /// Bytes per device; 0: the hardware's device memory.
  double memoryBudget = 0;
  /// Each mesh rejected for memory gets its exact smallest need (what
  /// --explain prints; a few more plans costed, some simulated). Off: a
  /// lower bound, unless no plan fits at all.
  bool exactMeshMemory = true;
  /// Schedules tried with pp > 1.
  std::vector<sched::ScheduleKind> schedules = {
      sched::ScheduleKind::OneFOneB, sched::ScheduleKind::Interleaved1F1B,
      sched::ScheduleKind::ZBH1,     sched::ScheduleKind::ZBH2,
      sched::ScheduleKind::ZBV,      sched::ScheduleKind::Auto};
  /// Largest chunk count tried with interleaved 1F1B.
  int maxChunks = 4;
  /// The automatic scheduler searches per plan (seconds at large sizes):
  /// tried only where pp * micro-batches is at most this.
  int64_t maxAutoPairs = 2048;
  /// Also try stage boundaries balanced by predicted time (layers moved off
  /// the stages that hold the embedding and the head: balanceStageLayers,
  /// and balanceRankLayers, which may leave the embedding or the head
  /// alone on a stage), besides the even split.
  bool balanceStages = true;
  /// Fixed choices (what the user gave): only plans with these.
  std::optional<int> dp, tp, pp;
  std::optional<int> zero;
  std::optional<bool> sequenceParallel;
  std::optional<Recompute> recompute;
  std::optional<sched::ScheduleKind> schedule;
  std::optional<int> chunks;
  std::optional<int> microbatches;
  std::optional<std::vector<int>> stageLayers;
  /// Plans returned, best first.
  int topK = 5;
};

/// Why a mesh (dp, tp, pp) was not chosen, for --explain.
struct MeshSummary {
  int dp = 1, tp = 1, pp = 1;
  enum class Status {
    /// The best plan of the search.
    Chosen,
    /// A plan of this mesh is among the top k (not the first).
    Ranked,
    /// Plans fit but are slower: `bestTime` is the fastest simulated one,
    /// or (`bounded`) a lower bound on all of them.
    Slower,
    /// No plan of this mesh fits: `minMemory` is the smallest budget one
    /// of its plans would fit (a lower bound without
    /// SearchOptions::exactMeshMemory).
    Memory,
    /// The model cannot be split so (the reason says why).
    Illegal,
    /// Its plans passed the checks but the cost model refused each (the
    /// reason is the first refusal).
    Uncosted,
  } status = Status::Illegal;
  std::string reason;
  double bestTime = 0;
  bool bounded = false;
  double minMemory = 0;
  /// The plan behind bestTime or minMemory.
  std::optional<Plan> plan;
};

struct SearchResult {
  /// The best plans, fastest first (ties: the order of enumeration), each
  /// one of a kind: plans alike to one of them (isAlikePlan) are folded into
  /// it, so the k plans differ in something the prediction sees.
  std::vector<PlanCost> top;
  /// Per entry of `top`, the plans folded into it, in the order of
  /// enumeration (the entry itself is the first of its kind).
  std::vector<std::vector<Plan>> alike;
  /// One row per dp x tp x pp factorisation of the devices.
  std::vector<MeshSummary> meshes;
  /// Over all candidates that could run: the smallest peak memory per
  /// device, and its plan (what "no plan fits" reports).
  double minMemory = 0;
  std::optional<Plan> minMemoryPlan;
  double memoryBudget = 0;
  int64_t globalBatch = 0;
  /// Counts: candidates enumerated and, each counted once, rejected as
  /// invalid, over the memory budget (before or after simulation),
  /// pruned by the bound, simulated and within the budget.
  int64_t candidates = 0;
  int64_t invalid = 0;
  int64_t overMemory = 0;
  int64_t pruned = 0;
  int64_t simulated = 0;
  double seconds = 0;
};

/// True if two predicted plans differ only in knobs the prediction does not
/// tell apart: the same dp, tp, pp, micro-batch size and count, sp,
/// recomputation and layers per stage, and step times equal within 1e-9
/// (relative); so only the ZeRO stage or the schedule and its chunks
/// differ (ZeRO-1 and ZeRO-2, or ZB-H1, ZB-H2 and the automatic schedule,
/// often cost the same).
bool isAlikePlan(const PlanCost &a, const PlanCost &b);

/// Searches plans of the model `costModel` holds on `options.devices`
/// devices of its hardware. Fails with a message when no plan can run at
/// all (the devices cannot be split for the model: which factorisation
/// failed and why); when plans run but none fits the budget, succeeds with
/// `top` empty and `minMemory` set.
llvm::Expected<SearchResult> searchPlans(PlanCostModel &costModel,
                                         const SearchOptions &options);

/// Layer instances per stage that minimise the largest stage time (F + B +
/// W per micro-batch, the embedding's ops on stage 0 and the head's on the
/// last), for `plan`'s degrees, micro-batch size, sp and recomputation.
/// Among equal splits, the earlier stages get fewer layers (they hold more
/// micro-batches' activations).
llvm::Expected<std::vector<int>> balanceStageLayers(const PlanCostModel &model,
                                                    const Plan &plan);

/// Layer instances per stage that balance the pipeline ranks rather than
/// the stages: a rank of a chunked schedule (ZB-V's V, interleaved 1F1B's
/// loop) runs several stages, so the sum over them is what must be even.
/// The first stage may hold no layer where the model has ops before its
/// layers (the embedding alone), the last where it has ops after them (the
/// head alone): with ZB-V, rank 0 then holds the embedding, the head and
/// few layers. A local search from balanceStageLayers' split (moves of one
/// layer between two stages, any two where there are at most 16) minimises
/// the busiest rank's F + B + W, then the pipeline's lower bound (the time
/// before the later ranks can start), then the spread of the ranks' work.
/// Returns it and up to `limit` - 1 others whose busiest rank is as busy,
/// reached by such moves, in that order (which of them is fastest the
/// schedule's simulation tells, not the bound); nothing where its busiest
/// rank is no less busy than balanceStageLayers' (the search then has
/// nothing to add).
llvm::Expected<std::vector<std::vector<int>>>
balanceRankLayers(const PlanCostModel &model, const Plan &plan,
                  int limit = 8);

/// What the model's dimensions allow, read from the program through the
/// structural tensor-parallel planner: tp must divide every dimension it
/// splits that is not optional (times its blocks: q, k and v of a fused
/// projection) and every attention's heads; sp also the sequence.
struct ParallelismLimits {
  int64_t batch = 0;
  int64_t sequence = 0;
  /// The legal degrees among 1 .. maxDegree, and for the others why not.
  std::vector<int> tpDegrees;
  std::vector<int> sequenceParallelTpDegrees;
  std::vector<std::pair<int, std::string>> illegalTp;
};
ParallelismLimits getParallelismLimits(ModuleOp module, llvm::StringRef entry,
                                       int maxDegree);

/// The braidc flags that compile `plan`:
/// "--mesh dp=2,tp=2,pp=2 --schedule zb-h1 --microbatches 4 --zero 1 ...".
std::string getPlanFlags(const Plan &plan);

/// Prints the ranked plans (step time, tokens and TFLOP/s, MFU, memory per
/// rank, bubble, communication per axis), why the first won over the
/// second, and with `explain`, the meshes not chosen and why. Throughput is
/// in tokens/s with `tokensPerSample` (the sequence length), else samples/s.
void printSearchResult(llvm::raw_ostream &os, const SearchResult &result,
                       const PlanCostModel &model, bool explain,
                       double tokensPerSample = 0);

} // namespace mlir::braid::plan

#endif // BRAID_PLANNER_SEARCH_H
