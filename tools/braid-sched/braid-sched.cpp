//===- braid-sched.cpp - Generate, verify, simulate and draw schedules ----===//
//
// braid-sched --schedule NAME -p P -m M [--chunks V]
//             [--tf T --tb T --tw T --tcomm T | --profile CSV [--model NAME]]
//             [--mem-limit K] [--w-mem-fraction X | --paper-memory]
//             [--svg FILE] [--trace FILE] [--csv] [--dump]
//
// Generates the schedule, verifies it (dependencies, send/recv matching,
// deadlock freedom, memory), simulates it and prints one table row:
// makespan, largest stage time, bubble rate and peak memory per rank.
// Exits non-zero with a message on bad arguments or a failed verification.
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Profile.h"
#include "braid/Schedule/Render.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir::braid::sched;

namespace {
llvm::cl::OptionCategory category("braid-sched options");

llvm::cl::opt<std::string>
    scheduleName("schedule", llvm::cl::desc("Schedule to generate (see below)"),
                 llvm::cl::value_desc("name"), llvm::cl::cat(category));
llvm::cl::opt<int> numRanks("p", llvm::cl::desc("Pipeline ranks (stages)"),
                            llvm::cl::value_desc("P"), llvm::cl::init(0),
                            llvm::cl::cat(category));
llvm::cl::opt<int> numMicrobatches("m", llvm::cl::desc("Micro-batches"),
                                   llvm::cl::value_desc("M"), llvm::cl::init(0),
                                   llvm::cl::cat(category));
llvm::cl::opt<int> numChunks(
    "chunks",
    llvm::cl::desc("Model chunks per rank (interleaved-1f1b: >= 2, default "
                   "2; zb-v: 2; others: 1)"),
    llvm::cl::value_desc("V"), llvm::cl::init(0), llvm::cl::cat(category));

llvm::cl::opt<double> tf("tf",
                         llvm::cl::desc("Forward time of one micro-batch on "
                                        "one rank, all its chunks (default 1)"),
                         llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<double>
    tb("tb", llvm::cl::desc("Input-gradient backward (B) time (default 1)"),
       llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<double>
    tw("tw", llvm::cl::desc("Weight-gradient backward (W) time (default 1)"),
       llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<double>
    tcomm("tcomm",
          llvm::cl::desc("Latency of one transfer between neighbouring stages "
                         "(default 0)"),
          llvm::cl::init(0), llvm::cl::cat(category));
llvm::cl::opt<std::string> profilePath(
    "profile",
    llvm::cl::desc("CSV of times instead of --tf/--tb/--tw/--tcomm: one row "
                   "per setting (Table 9 layout: stages_p, microbatches_m, "
                   "t_f, t_b, t_w, t_comm) or one row per stage (stage, t_f, "
                   "t_b, t_w[, t_comm])"),
    llvm::cl::value_desc("file"), llvm::cl::cat(category));
llvm::cl::opt<std::string>
    modelName("model",
              llvm::cl::desc("With --profile: the 'model' of the row to use "
                             "when several rows have this p and m"),
              llvm::cl::value_desc("name"), llvm::cl::cat(category));

llvm::cl::opt<double> memLimit(
    "mem-limit",
    llvm::cl::desc("Peak activation memory per rank, in micro-batch "
                   "activations: the automatic scheduler's limit (default "
                   "p), a check for the others"),
    llvm::cl::value_desc("K"), llvm::cl::init(0), llvm::cl::cat(category));
llvm::cl::opt<double> wMemFraction(
    "w-mem-fraction",
    llvm::cl::desc("Share of an activation still held between B and W "
                   "(default 1: B frees nothing, W frees all)"),
    llvm::cl::value_desc("X"), llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<bool> paperMemory(
    "paper-memory",
    llvm::cl::desc("Take --w-mem-fraction from the profile row's heads and "
                   "hidden as the zero-bubble paper does: 32h / (34h + 5as)"),
    llvm::cl::cat(category));
llvm::cl::opt<double>
    seqLength("seq",
              llvm::cl::desc("Sequence length for --paper-memory when the "
                             "profile has no 'seq' column (default 1024)"),
              llvm::cl::init(1024), llvm::cl::cat(category));

llvm::cl::opt<std::string> svgPath("svg",
                                   llvm::cl::desc("Write an SVG timeline"),
                                   llvm::cl::value_desc("file"),
                                   llvm::cl::cat(category));
llvm::cl::opt<std::string>
    tracePath("trace",
              llvm::cl::desc("Write Chrome trace JSON (open in Perfetto)"),
              llvm::cl::value_desc("file"), llvm::cl::cat(category));
llvm::cl::opt<bool> csv("csv", llvm::cl::desc("Print CSV instead of a table"),
                        llvm::cl::cat(category));
llvm::cl::opt<bool> dump("dump",
                         llvm::cl::desc("Print every rank's action list"),
                         llvm::cl::cat(category));
} // namespace

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "braid-sched") << message << '\n';
  return 1;
}

static int fail(llvm::Error err) {
  std::string message = llvm::toString(std::move(err));
  return fail(message);
}

/// Writes `write`'s output to `path` atomically-enough for a tool: only kept
/// if writing succeeded.
template <typename Fn>
static llvm::Error writeFile(llvm::StringRef path, Fn write) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(
        ec, llvm::formatv("cannot write {0}: {1}", path, ec.message()));
  write(out.os());
  out.keep();
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(category);
  std::string overview =
      "braid-sched: generate, verify, simulate and draw pipeline-parallel "
      "schedules\n\n"
      "Prints makespan, the largest stage execution time (cost), the bubble "
      "rate\n(cost - m(T_F+T_B+T_W)) / cost and the peak activation memory of "
      "each rank.\n\nSchedules:\n";
  for (ScheduleKind kind : getAllScheduleKinds())
    overview += llvm::formatv("  {0,-17} {1}\n", getScheduleKindName(kind),
                              getScheduleKindSummary(kind))
                    .str();
  overview += "\nExample:\n  braid-sched --schedule zb-h1 -p 4 -m 8 --svg "
              "zb-h1.svg\n  braid-sched --schedule auto -p 8 -m 24 --profile "
              "zero_bubble_profile.csv --model 1.5B --mem-limit 16 --paper-memory\n";
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);

  if (scheduleName.empty())
    return fail(
        "--schedule is required; one of: " +
        llvm::join(llvm::map_range(getAllScheduleKinds(), getScheduleKindName),
                   ", "));
  std::optional<ScheduleKind> kind = parseScheduleKind(scheduleName);
  if (!kind)
    return fail(
        "unknown schedule '" + scheduleName + "'; expected one of: " +
        llvm::join(llvm::map_range(getAllScheduleKinds(), getScheduleKindName),
                   ", "));
  if (numRanks.getNumOccurrences() == 0 || numRanks < 1)
    return fail(llvm::formatv("-p (pipeline ranks) must be at least 1 (got "
                              "{0})",
                              numRanks.getNumOccurrences() ? numRanks : 0));
  if (numMicrobatches.getNumOccurrences() == 0 || numMicrobatches < 1)
    return fail(llvm::formatv(
        "-m (micro-batches) must be at least 1 (got {0})",
        numMicrobatches.getNumOccurrences() ? numMicrobatches : 0));
  llvm::Expected<int> chunks = resolveNumChunks(*kind, numChunks);
  if (!chunks)
    return fail(chunks.takeError());

  bool timesGiven = tf.getNumOccurrences() || tb.getNumOccurrences() ||
                    tw.getNumOccurrences() || tcomm.getNumOccurrences();
  if (timesGiven && !profilePath.empty())
    return fail("give either --profile or --tf/--tb/--tw/--tcomm, not both");
  if (!modelName.empty() && profilePath.empty())
    return fail("--model selects a row of --profile, which is missing");
  if (paperMemory && wMemFraction.getNumOccurrences())
    return fail("give either --paper-memory or --w-mem-fraction, not both");
  // Written so that NaN fails too.
  if (!(wMemFraction >= 0 && wMemFraction <= 1))
    return fail(llvm::formatv("--w-mem-fraction must be in [0, 1] (got {0})",
                              formatNumber(wMemFraction)));
  if (memLimit.getNumOccurrences() && !(memLimit > 0))
    return fail(llvm::formatv("--mem-limit must be positive (got {0})",
                              formatNumber(memLimit)));
  for (auto [name, value] : {std::pair<const char *, double>{"--tf", tf},
                             {"--tb", tb},
                             {"--tw", tw},
                             {"--tcomm", tcomm}})
    if (!(value >= 0) || !std::isfinite(value))
      return fail(llvm::formatv("{0} must be a finite time >= 0 (got {1})",
                                name, formatNumber(value)));

  ScheduleRequest request;
  request.kind = *kind;
  request.numRanks = numRanks;
  request.numMicrobatches = numMicrobatches;
  request.numChunks = *chunks;
  request.memory.weightFraction = wMemFraction;
  if (!profilePath.empty()) {
    llvm::Expected<CsvTable> table = readCsv(profilePath);
    if (!table)
      return fail(table.takeError());
    std::optional<double> fraction;
    llvm::Expected<CostModel> costs =
        getCostModelFromProfile(*table, numRanks, numMicrobatches, *chunks,
                                modelName, &fraction, seqLength);
    if (!costs)
      return fail(costs.takeError());
    request.costs = std::move(*costs);
    if (paperMemory) {
      if (!fraction)
        return fail("--paper-memory needs a per-setting profile with 'heads' "
                    "and 'hidden' columns");
      request.memory.weightFraction = *fraction;
    }
  } else {
    if (paperMemory)
      return fail("--paper-memory needs --profile");
    request.costs = CostModel::uniform(numRanks, *chunks, tf, tb, tw, tcomm);
  }
  if (memLimit.getNumOccurrences())
    request.memoryLimit = memLimit.getValue();

  llvm::Expected<Schedule> schedule = generateSchedule(request);
  if (!schedule)
    return fail(schedule.takeError());

  VerifyOptions verifyOptions;
  verifyOptions.memory = request.memory;
  verifyOptions.memoryLimit = request.memoryLimit;
  if (llvm::Error err = verifySchedule(*schedule, verifyOptions))
    return fail("schedule '" + schedule->name +
                "' fails verification: " + llvm::toString(std::move(err)));

  llvm::Expected<SimulationResult> result =
      simulate(*schedule, *request.costs, request.memory);
  if (!result)
    return fail(result.takeError());

  if (dump)
    printSchedule(llvm::outs(), *schedule);

  std::vector<std::string> peaks;
  for (double peak : result->peakMemory)
    peaks.push_back(formatNumber(peak, 4));
  if (csv) {
    llvm::outs() << "schedule,p,m,chunks,makespan,cost,bubble_rate,"
                    "peak_memory_per_rank\n";
    llvm::outs() << llvm::formatv(
        "{0},{1},{2},{3},{4},{5},{6},{7}\n", schedule->name,
        numRanks.getValue(), numMicrobatches.getValue(), *chunks,
        formatNumber(result->makespan), formatNumber(result->cost),
        formatNumber(result->bubbleRate, 4), llvm::join(peaks, ";"));
  } else {
    llvm::outs() << llvm::formatv(
        "{0,-17} {1,3} {2,4} {3,2} {4,10} {5,10} {6,8}  {7}\n", "schedule", "p",
        "m", "v", "makespan", "cost", "bubble", "peak memory per rank (M_B)");
    llvm::outs() << llvm::formatv(
        "{0,-17} {1,3} {2,4} {3,2} {4,10} {5,10} {6,8}  {7}\n", schedule->name,
        numRanks.getValue(), numMicrobatches.getValue(), *chunks,
        formatNumber(result->makespan), formatNumber(result->cost),
        llvm::formatv("{0:f4}", result->bubbleRate).str(),
        llvm::join(peaks, " "));
  }

  if (!svgPath.empty())
    if (llvm::Error err = writeFile(svgPath, [&](llvm::raw_ostream &os) {
          writeSvgTimeline(os, *schedule, *result);
        }))
      return fail(std::move(err));
  if (!tracePath.empty())
    if (llvm::Error err = writeFile(tracePath, [&](llvm::raw_ostream &os) {
          writeChromeTrace(os, *schedule, *result);
        }))
      return fail(std::move(err));
  return 0;
}
