//===- Generators.cpp - GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V -----===//
//
// The handcrafted schedules. Each produces the compute order of every rank;
// generateSchedule() adds the sends and receives.
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Generators.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir::braid::sched;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

llvm::ArrayRef<ScheduleKind> mlir::braid::sched::getAllScheduleKinds() {
  static const ScheduleKind kinds[] = {ScheduleKind::GPipe,
                                       ScheduleKind::OneFOneB,
                                       ScheduleKind::Interleaved1F1B,
                                       ScheduleKind::ZBH1,
                                       ScheduleKind::ZBH2,
                                       ScheduleKind::ZBV,
                                       ScheduleKind::Auto};
  return kinds;
}

llvm::StringRef mlir::braid::sched::getScheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved1F1B:
    return "interleaved-1f1b";
  case ScheduleKind::ZBH1:
    return "zb-h1";
  case ScheduleKind::ZBH2:
    return "zb-h2";
  case ScheduleKind::ZBV:
    return "zb-v";
  case ScheduleKind::Auto:
    return "auto";
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::StringRef mlir::braid::sched::getScheduleKindSummary(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "all forwards, then all backwards; memory m";
  case ScheduleKind::OneFOneB:
    return "one forward, one backward; memory p, bubble (p-1)(F+B+W)";
  case ScheduleKind::Interleaved1F1B:
    return "Megatron's 1F1B over v chunks per rank (m multiple of p); "
           "bubble / v";
  case ScheduleKind::ZBH1:
    return "zero-bubble, W deferred; memory p, bubble (p-1)(F+B-W)";
  case ScheduleKind::ZBH2:
    return "zero-bubble, extra warm-up; memory 2p-1, bubble (p-1)(F+B-2W)";
  case ScheduleKind::ZBV:
    return "zero-bubble V over 2 chunks; memory p, no bubble if F=B=W";
  case ScheduleKind::Auto:
    return "searched zero-bubble schedule for the given times and "
           "--mem-limit";
  }
  llvm_unreachable("unknown schedule kind");
}

std::optional<ScheduleKind>
mlir::braid::sched::parseScheduleKind(llvm::StringRef name) {
  std::string lower = name.lower();
  for (ScheduleKind kind : getAllScheduleKinds())
    if (lower == getScheduleKindName(kind))
      return kind;
  if (lower == "1f1b-i" || lower == "interleaved" || lower == "i1f1b")
    return ScheduleKind::Interleaved1F1B;
  if (lower == "zbh1")
    return ScheduleKind::ZBH1;
  if (lower == "zbh2")
    return ScheduleKind::ZBH2;
  if (lower == "zbv")
    return ScheduleKind::ZBV;
  if (lower == "zb" || lower == "zb-auto" || lower == "automatic")
    return ScheduleKind::Auto;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

Schedule mlir::braid::sched::buildGPipe(int numRanks, int numMicrobatches) {
  Schedule schedule("gpipe", numRanks, numMicrobatches);
  for (std::vector<Action> &actions : schedule.ranks) {
    for (int mb = 0; mb < numMicrobatches; ++mb)
      actions.push_back(Action::forward(mb));
    for (int mb = 0; mb < numMicrobatches; ++mb)
      actions.push_back(Action::fullBackward(mb));
  }
  return schedule;
}

Schedule mlir::braid::sched::build1F1B(int numRanks, int numMicrobatches) {
  Schedule schedule("1f1b", numRanks, numMicrobatches);
  for (int r = 0; r < numRanks; ++r) {
    std::vector<Action> &actions = schedule.ranks[r];
    // Rank r's first backward can start once micro-batch 0 has gone down the
    // p - 1 - r later ranks and back; forwards fill that wait.
    int warmup = std::min(numRanks - 1 - r, numMicrobatches);
    int f = 0, b = 0;
    for (; f < warmup; ++f)
      actions.push_back(Action::forward(f));
    for (; f < numMicrobatches; ++f, ++b) {
      actions.push_back(Action::forward(f));
      actions.push_back(Action::fullBackward(b));
    }
    for (; b < numMicrobatches; ++b)
      actions.push_back(Action::fullBackward(b));
  }
  return schedule;
}

llvm::Expected<Schedule>
mlir::braid::sched::buildInterleaved1F1B(int numRanks, int numMicrobatches,
                                         int numChunks) {
  if (numChunks < 2)
    return makeError(llvm::formatv(
        "interleaved 1F1B needs at least 2 chunks per rank (got {0}); use "
        "1f1b for one",
        numChunks));
  if (numMicrobatches % numRanks != 0)
    return makeError(llvm::formatv(
        "interleaved 1F1B sends micro-batches round the ranks in groups of p, "
        "so m must be a multiple of p (got m = {0}, p = {1})",
        numMicrobatches, numRanks));
  Schedule schedule("interleaved-1f1b", numRanks, numMicrobatches, numChunks);
  int p = numRanks, v = numChunks;
  int total = numMicrobatches * v;
  // The k-th forward of a rank: groups of p micro-batches go through chunk
  // 0, then the same group through chunk 1, and so on (Megatron's order).
  auto forwardAt = [&](int k) {
    int group = k / (p * v), inGroup = k % (p * v);
    return Action::forward(group * p + inGroup % p, inGroup / p);
  };
  // Backwards visit the chunks in reverse.
  auto backwardAt = [&](int k) {
    int group = k / (p * v), inGroup = k % (p * v);
    return Action::fullBackward(group * p + inGroup % p, v - 1 - inGroup / p);
  };
  for (int r = 0; r < p; ++r) {
    std::vector<Action> &actions = schedule.ranks[r];
    // Megatron: with m == p there is no steady state, every forward first.
    int warmup = numMicrobatches == p
                     ? total
                     : std::min((p - r - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k)
      actions.push_back(forwardAt(k));
    for (int k = 0; k < total - warmup; ++k) {
      actions.push_back(forwardAt(warmup + k));
      actions.push_back(backwardAt(k));
    }
    for (int k = total - warmup; k < total; ++k)
      actions.push_back(backwardAt(k));
  }
  return schedule;
}

/// The cool-down of the single-chunk zero-bubble schedules: each remaining B
/// paired with a W, then the deferred W passes, which fill the bubble.
static void appendCooldown(std::vector<Action> &actions, int b, int w,
                           int m) {
  while (b < m) {
    actions.push_back(Action::backward(b++));
    actions.push_back(Action::weight(w++));
  }
  while (w < m)
    actions.push_back(Action::weight(w++));
}

Schedule mlir::braid::sched::buildZBH1(int numRanks, int numMicrobatches) {
  Schedule schedule("zb-h1", numRanks, numMicrobatches);
  int m = numMicrobatches;
  for (int r = 0; r < numRanks; ++r) {
    std::vector<Action> &actions = schedule.ranks[r];
    int f = 0, b = 0, w = 0;
    // Warm-up as in 1F1B.
    for (int i = 0; i < numRanks - 1 - r && f < m; ++i)
      actions.push_back(Action::forward(f++));
    // Rank r skips the W of its first r backwards: later ranks wait for
    // their next forward there, and the deferred W passes fill the
    // cool-down bubble instead. Memory grows from 1F1B's p - r to p, rank
    // 0's peak, so the schedule as a whole needs no more than 1F1B.
    for (int i = 0; i < r && f < m; ++i) {
      actions.push_back(Action::forward(f++));
      actions.push_back(Action::backward(b++));
    }
    while (f < m) {
      actions.push_back(Action::forward(f++));
      actions.push_back(Action::backward(b++));
      actions.push_back(Action::weight(w++));
    }
    appendCooldown(actions, b, w, m);
  }
  return schedule;
}

Schedule mlir::braid::sched::buildZBH2(int numRanks, int numMicrobatches) {
  Schedule schedule("zb-h2", numRanks, numMicrobatches);
  int m = numMicrobatches;
  // Every rank may hold 2p - 1 activations: what rank 0 accumulates while
  // micro-batch 0 makes its round trip.
  int limit = 2 * numRanks - 1;
  for (int r = 0; r < numRanks; ++r) {
    std::vector<Action> &actions = schedule.ranks[r];
    int f = 0, b = 0, w = 0;
    // Fill the whole wait for the first B with forwards: 2(p - r) - 1 fit
    // between micro-batch 0 arriving and its gradient coming back.
    for (int i = 0; i < 2 * (numRanks - r) - 1 && f < m; ++i)
      actions.push_back(Action::forward(f++));
    // Later ranks receive forwards faster than they can pair them with W;
    // they defer W while memory allows, so the schedule ends as a
    // parallelogram instead of 1F1B's trapezoid.
    while (f < m) {
      actions.push_back(Action::backward(b++));
      if (f - w >= limit)
        actions.push_back(Action::weight(w++));
      actions.push_back(Action::forward(f++));
    }
    appendCooldown(actions, b, w, m);
  }
  return schedule;
}

Schedule mlir::braid::sched::buildZBV(int numRanks, int numMicrobatches) {
  Schedule schedule("zb-v", numRanks, numMicrobatches, /*numChunks=*/2,
                    Placement::VShape);
  int p = numRanks;
  // The pattern is defined for at least 2p - 1 micro-batches; with fewer,
  // build it for 2p - 1 and drop the ones that do not exist. Dropping
  // actions keeps every remaining dependency satisfied in the same order.
  int n = std::max(2 * p - 1, numMicrobatches);
  for (int r = 0; r < p; ++r) {
    std::vector<Action> actions;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto add = [&](ActionKind kind, int mb, int chunk) {
      actions.push_back(Action{kind, mb, chunk});
    };
    // Warm-up: chunk 0 forwards until micro-batch 0 comes back up the V to
    // this rank's chunk 1 (2(p - r) - 1 of them), ...
    for (int i = 0; i < 2 * (p - r) - 1; ++i)
      add(ActionKind::Forward, f0++, 0);
    // ... then alternate chunk 1 and chunk 0 forwards while the first
    // gradients travel down from rank 0, ...
    for (int i = 0; i < r; ++i) {
      add(ActionKind::Forward, f1++, 1);
      add(ActionKind::Forward, f0++, 0);
    }
    // ... and start chunk 1's backwards with their W right away.
    for (int i = 0; i < p - r; ++i) {
      add(ActionKind::Forward, f1++, 1);
      add(ActionKind::Backward, b1, 1);
      add(ActionKind::Weight, b1++, 1);
    }
    // Steady state: F B W on chunk 0, then on chunk 1. Memory stays at 2p
    // half-size (one chunk) activations, i.e. p micro-batches.
    while (f1 < f0 || f0 < n) {
      if (f0 < n)
        add(ActionKind::Forward, f0++, 0);
      add(ActionKind::Backward, b0, 0);
      add(ActionKind::Weight, b0++, 0);
      add(ActionKind::Forward, f1++, 1);
      add(ActionKind::Backward, b1, 1);
      add(ActionKind::Weight, b1++, 1);
    }
    // Cool-down: the remaining backwards, W deferred where the gradients
    // still arrive slower than this rank can compute.
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; ++i) {
      add(ActionKind::Backward, b0++, 0);
      add(ActionKind::Backward, b1++, 1);
    }
    for (int i = 0; i < p - r; ++i) {
      add(ActionKind::Backward, b0++, 0);
      add(ActionKind::Weight, w0++, 0);
    }
    while (w1 < b1)
      add(ActionKind::Weight, w1++, 1);
    while (w0 < b0)
      add(ActionKind::Weight, w0++, 0);

    for (const Action &action : actions)
      if (action.microbatch < numMicrobatches)
        schedule.ranks[r].push_back(action);
  }
  return schedule;
}

//===----------------------------------------------------------------------===//
// generateSchedule
//===----------------------------------------------------------------------===//

llvm::Expected<int> mlir::braid::sched::resolveNumChunks(ScheduleKind kind,
                                                         int numChunks) {
  switch (kind) {
  case ScheduleKind::Interleaved1F1B:
    if (numChunks == 0)
      return 2;
    if (numChunks < 2)
      return makeError(llvm::formatv(
          "interleaved-1f1b needs at least 2 chunks per rank (got {0})",
          numChunks));
    return numChunks;
  case ScheduleKind::ZBV:
    if (numChunks == 0 || numChunks == 2)
      return 2;
    return makeError(llvm::formatv(
        "zb-v places exactly 2 chunks per rank in a V (got {0})", numChunks));
  default:
    if (numChunks == 0 || numChunks == 1)
      return 1;
    return makeError(llvm::formatv(
        "{0} runs one chunk per rank (got {1}); use interleaved-1f1b or zb-v "
        "for more",
        getScheduleKindName(kind), numChunks));
  }
}

/// The compute order of `request`, with `numChunks` resolved.
static llvm::Expected<Schedule>
buildComputeOrder(const ScheduleRequest &request, int numChunks,
                  const CostModel &costs) {
  int p = request.numRanks, m = request.numMicrobatches;
  switch (request.kind) {
  case ScheduleKind::GPipe:
    return buildGPipe(p, m);
  case ScheduleKind::OneFOneB:
    return build1F1B(p, m);
  case ScheduleKind::Interleaved1F1B:
    return buildInterleaved1F1B(p, m, numChunks);
  case ScheduleKind::ZBH1:
    return buildZBH1(p, m);
  case ScheduleKind::ZBH2:
    return buildZBH2(p, m);
  case ScheduleKind::ZBV:
    return buildZBV(p, m);
  case ScheduleKind::Auto: {
    AutoScheduleOptions options;
    options.memoryLimit = request.memoryLimit.value_or(p);
    options.memory = request.memory;
    return buildAutoZeroBubble(costs, m, options);
  }
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::Expected<Schedule>
mlir::braid::sched::generateSchedule(const ScheduleRequest &request) {
  int p = request.numRanks, m = request.numMicrobatches;
  if (p < 1)
    return makeError(
        llvm::formatv("the number of ranks p must be at least 1 (got {0})", p));
  if (m < 1)
    return makeError(llvm::formatv(
        "the number of micro-batches m must be at least 1 (got {0})", m));
  llvm::Expected<int> v = resolveNumChunks(request.kind, request.numChunks);
  if (!v)
    return v.takeError();
  // Refuse sizes that cannot be handled quickly instead of running for
  // minutes without a word. ZB-V builds its pattern for at least 2p - 1
  // micro-batches, whatever m.
  int64_t built = request.kind == ScheduleKind::ZBV
                      ? std::max<int64_t>(m, 2 * int64_t(p) - 1)
                      : m;
  int64_t pairs = int64_t(p) * built * *v;
  if (pairs > kMaxSchedulePairs)
    return makeError(llvm::formatv(
        "schedule too large: p x m x chunks = {0} x {1} x {2} = {3} (stage, "
        "micro-batch) pairs, above the {4} that are generated and checked "
        "in seconds{5}",
        p, built, *v, pairs, kMaxSchedulePairs,
        built != m ? " (zb-v builds its pattern for 2p - 1 micro-batches)"
                   : ""));

  CostModel costs =
      request.costs ? *request.costs : CostModel::uniform(p, *v, 1, 1, 1, 0);
  if (llvm::Error err = costs.validate(p * *v))
    return std::move(err);

  llvm::Expected<Schedule> schedule = buildComputeOrder(request, *v, costs);
  if (!schedule)
    return schedule.takeError();
  if (llvm::Error err = insertCommunication(*schedule, &costs))
    return std::move(err);
  return schedule;
}
