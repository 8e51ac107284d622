//===- ZeroBubbleTable5.cpp - Reproduce Table 5 of the zero-bubble paper --===//
//
// Workload: Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024). Its
// Table 9 profiles F, B, W and one transfer per stage for GPT-style models on
// A100s; its Table 5 gives the bubble rate each schedule reaches with those
// times. This benchmark rebuilds every schedule with Braid's generators,
// simulates it with the profiled times and prints Braid's bubble rate beside
// the paper's, with the difference and the ratio.
//
// Any profile in the Table 9 layout works (one row per model, p, m); the
// expected rates are optional and joined on (model, p, m).
//
// Targets (issue 5): 1F1B within 0.005 of the paper on every row, ZB-H1 and
// ZB-H2 within 0.01, the automatic scheduler with memory limit p (2p) no
// worse than the paper's ZB-1p (ZB-2p) + 0.005. The paper counts memory
// finely (after B only the M_W that W needs is kept), so ZB-1p and ZB-2p are
// compared under that accounting; Braid's default, stricter accounting (B
// frees nothing) is printed too, without a target. Interleaved 1F1B is
// printed for reference: the paper does not give its chunk count.
//
// --check exits with 1 if a target is missed (the ctest does this), and also
// if it could not check every target: no expected rates, a profile row
// without its expected row (or the reverse), a targeted column missing, or
// no memory model for ZB-1p/ZB-2p. A check that checked nothing fails.
//
// The default files are the repository's copies of the paper's tables,
// bench/data/zero_bubble_profile.csv and zero_bubble_bubble_rates.csv (their
// sources are cited in bench/data/README.md).
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Profile.h"
#include "braid/Schedule/Simulator.h"
#include "braid/Schedule/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>

using namespace mlir::braid::sched;

#ifndef BRAID_SOURCE_DIR
#define BRAID_SOURCE_DIR "."
#endif

/// The in-tree copy of one of the paper's tables.
static std::string getDataFile(llvm::StringRef file) {
  llvm::SmallString<256> path(BRAID_SOURCE_DIR);
  llvm::sys::path::append(path, "bench", "data", file);
  return std::string(path);
}

namespace {
llvm::cl::OptionCategory category("braid-bench-zero-bubble options");
llvm::cl::opt<std::string>
    profilePath("profile", llvm::cl::desc("Profile in the Table 9 layout"),
                llvm::cl::value_desc("file"),
                llvm::cl::init(getDataFile("zero_bubble_profile.csv")),
                llvm::cl::cat(category));
llvm::cl::opt<std::string> expectedPath(
    "expected",
    llvm::cl::desc("The paper's bubble rates (Table 5 layout); \"\" for none"),
    llvm::cl::value_desc("file"),
    llvm::cl::init(getDataFile("zero_bubble_bubble_rates.csv")),
    llvm::cl::cat(category));
llvm::cl::opt<double> seqLength(
    "seq",
    llvm::cl::desc("Sequence length for the paper's memory accounting when "
                   "the profile has no 'seq' column"),
    llvm::cl::init(1024), llvm::cl::cat(category));
llvm::cl::opt<int>
    interleavedChunks("chunks",
                      llvm::cl::desc("Chunks per rank for interleaved 1F1B"),
                      llvm::cl::init(2), llvm::cl::cat(category));
llvm::cl::opt<bool> csv("csv", llvm::cl::desc("Print CSV"),
                        llvm::cl::cat(category));
llvm::cl::opt<bool>
    check("check",
          llvm::cl::desc("Exit with 1 if a target is missed or cannot be "
                         "checked (missing rows, columns or data)"),
          llvm::cl::cat(category));

enum class Target { None, Within005, Within01, AtMost005 };

struct Column {
  /// Name in the expected-rates file.
  const char *key;
  /// Name printed.
  const char *label;
  Target target;
};

const Column kColumns[] = {
    {"1f1b", "1f1b", Target::Within005},
    {"1f1b_i", "1f1b-i", Target::None},
    {"zb_h1", "zb-h1", Target::Within01},
    {"zb_h2", "zb-h2", Target::Within01},
    {"zb_1p", "zb-1p", Target::AtMost005},
    {"zb_2p", "zb-2p", Target::AtMost005},
    {"", "zb-1p B-keeps-all", Target::None},
    {"", "zb-2p B-keeps-all", Target::None},
};

llvm::StringRef describe(Target target) {
  switch (target) {
  case Target::None:
    return "-";
  case Target::Within005:
    return "|diff|<=0.005";
  case Target::Within01:
    return "|diff|<=0.01";
  case Target::AtMost005:
    return "<=paper+0.005";
  }
  return "-";
}

bool isMet(Target target, double paper, double braid) {
  // Rates are printed and compared at the paper's four decimals.
  double diff = std::round((braid - paper) * 1e4) / 1e4;
  switch (target) {
  case Target::None:
    return true;
  case Target::Within005:
    return std::abs(diff) <= 0.005;
  case Target::Within01:
    return std::abs(diff) <= 0.01;
  case Target::AtMost005:
    return diff <= 0.005;
  }
  return true;
}
} // namespace

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "braid-bench-zero-bubble")
      << message << '\n';
  return 1;
}

/// Generates, verifies and simulates one schedule; returns its bubble rate.
static llvm::Expected<double> measure(const ScheduleRequest &request,
                                      std::optional<double> memoryLimit) {
  llvm::Expected<Schedule> schedule = generateSchedule(request);
  if (!schedule)
    return schedule.takeError();
  VerifyOptions options;
  options.memory = request.memory;
  options.memoryLimit = memoryLimit;
  if (llvm::Error err = verifySchedule(*schedule, options))
    return std::move(err);
  llvm::Expected<SimulationResult> result =
      simulate(*schedule, *request.costs, request.memory);
  if (!result)
    return result.takeError();
  return result->bubbleRate;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "Reproduces Table 5 (bubble rates) of Qi et al., \"Zero Bubble Pipeline "
      "Parallelism\", from its Table 9 profile, paper and Braid side by "
      "side\n");

  llvm::Expected<CsvTable> profile = readCsv(profilePath);
  if (!profile)
    return fail(llvm::toString(profile.takeError()));
  llvm::Expected<std::vector<ProfileSetting>> settings =
      getProfileSettings(*profile, seqLength);
  if (!settings)
    return fail(llvm::toString(settings.takeError()));
  std::optional<CsvTable> expected;
  if (!expectedPath.empty()) {
    llvm::Expected<CsvTable> table = readCsv(expectedPath);
    if (!table)
      return fail(llvm::toString(table.takeError()));
    expected = std::move(*table);
  }

  // Each profile row's row in the expected rates, joined on (model, p, m).
  std::vector<std::optional<int>> expectedRows(settings->size());
  llvm::SmallVector<std::string> problems;
  std::vector<bool> matched(expected ? expected->rows.size() : 0);
  for (auto [i, setting] : llvm::enumerate(*settings)) {
    if (!expected)
      break;
    for (int row = 0, e = expected->rows.size(); row < e; ++row) {
      if (expected->getText(row, "model") != setting.model ||
          expected->getText(row, "stages_p") !=
              std::to_string(setting.numRanks) ||
          expected->getText(row, "microbatches_m") !=
              std::to_string(setting.numMicrobatches))
        continue;
      if (expectedRows[i])
        problems.push_back(
            llvm::formatv("{0}:{1}: a second row for model {2} p={3} m={4}",
                          expectedPath, expected->lines[row], setting.model,
                          setting.numRanks, setting.numMicrobatches));
      expectedRows[i] = row;
      matched[row] = true;
    }
  }

  // With --check, every target must be checkable: a check that silently
  // checked less than the data promises would pass for the wrong reason.
  if (check) {
    llvm::StringRef profileFile = profile->path;
    if (settings->empty())
      problems.push_back(llvm::formatv("{0}: no rows", profileFile));
    if (!expected) {
      problems.push_back("--check needs the paper's rates (--expected)");
    } else {
      for (const Column &column : kColumns)
        if (*column.key && column.target != Target::None &&
            !expected->getColumn(column.key))
          problems.push_back(llvm::formatv("{0}: no column '{1}' (columns: "
                                           "{2})",
                                           expectedPath, column.key,
                                           llvm::join(expected->header, ", ")));
      for (auto [i, setting] : llvm::enumerate(*settings)) {
        if (!expectedRows[i])
          problems.push_back(llvm::formatv(
              "{0}:{1}: model {2} p={3} m={4} has no row in {5}", profileFile,
              profile->lines[i], setting.model, setting.numRanks,
              setting.numMicrobatches, expectedPath));
      }
      if (!profile->getColumn("heads") || !profile->getColumn("hidden"))
        problems.push_back(llvm::formatv(
            "{0}: no 'heads' and 'hidden' columns, so zb-1p and zb-2p cannot "
            "be compared in the paper's memory accounting",
            profileFile));
      for (int row = 0, e = matched.size(); row < e; ++row)
        if (!matched[row])
          problems.push_back(llvm::formatv(
              "{0}:{1}: model {2} p={3} m={4} has no row in {5}", expectedPath,
              expected->lines[row], expected->getText(row, "model"),
              expected->getText(row, "stages_p"),
              expected->getText(row, "microbatches_m"), profileFile));
    }
  }
  if (!problems.empty()) {
    for (const std::string &problem : problems)
      fail(problem);
    return 1;
  }

  llvm::raw_ostream &os = llvm::outs();
  if (csv) {
    os << "model,p,m,schedule,paper,braid,diff,ratio,target,met\n";
  } else {
    os << "Table 5 of Qi et al., \"Zero Bubble Pipeline Parallelism\" (ICLR "
          "2024), from its Table 9 profile\n";
    os << "  profile:  " << profilePath << "\n";
    os << "  expected: " << (expected ? expectedPath.getValue() : "(none)")
       << "\n";
    os << "  bubble rate = (cost - m(T_F+T_B+T_W)) / cost, cost = largest "
          "stage execution time\n";
    os << "  zb-1p/zb-2p: Braid's automatic scheduler, memory limit p/2p, "
          "counted as the paper does\n"
          "  (B frees M_B - M_W, M_W/M_B = 32h/(34h+5as), s = "
       << formatNumber(seqLength)
       << "); B-keeps-all: Braid's default\n"
          "  accounting (the activation stays until W), no target. 1f1b-i: v "
          "= "
       << interleavedChunks << ", no target.\n\n";
    os << llvm::formatv("{0,-6} {1,3} {2,4}  {3,-18} {4,7} {5,7} {6,8} {7,6}  "
                        "{8,-14} {9}\n",
                        "model", "p", "m", "schedule", "paper", "braid", "diff",
                        "ratio", "target", "met");
  }

  int met = 0, targets = 0;
  bool errors = false;
  for (auto [i, setting] : llvm::enumerate(*settings)) {
    int p = setting.numRanks, m = setting.numMicrobatches;
    std::optional<int> expectedRow = expectedRows[i];

    for (const Column &column : kColumns) {
      ScheduleRequest request;
      request.numRanks = p;
      request.numMicrobatches = m;
      std::optional<double> memoryLimit;
      llvm::StringRef label = column.label;
      if (label == "1f1b") {
        request.kind = ScheduleKind::OneFOneB;
      } else if (label == "1f1b-i") {
        request.kind = ScheduleKind::Interleaved1F1B;
        request.numChunks = interleavedChunks;
        if (m % p != 0)
          continue;
      } else if (label == "zb-h1") {
        request.kind = ScheduleKind::ZBH1;
      } else if (label == "zb-h2") {
        request.kind = ScheduleKind::ZBH2;
      } else {
        request.kind = ScheduleKind::Auto;
        memoryLimit = label.starts_with("zb-1p") ? p : 2 * p;
        request.memoryLimit = memoryLimit;
        if (!label.contains("keeps-all")) {
          if (!setting.weightFraction)
            continue;
          request.memory.weightFraction = *setting.weightFraction;
        }
      }
      int chunks = request.kind == ScheduleKind::Interleaved1F1B
                       ? interleavedChunks.getValue()
                       : 1;
      request.costs = CostModel::uniform(p, chunks, setting.tf, setting.tb,
                                         setting.tw, setting.tcomm);

      llvm::Expected<double> braid = measure(request, memoryLimit);
      if (!braid) {
        errors = true;
        fail(llvm::formatv("{0} p={1} m={2} {3}: {4}", setting.model, p, m,
                           label, llvm::toString(braid.takeError())));
        continue;
      }
      std::optional<double> paper;
      if (expectedRow && *column.key && expected->getColumn(column.key)) {
        llvm::Expected<double> value =
            expected->getNumber(*expectedRow, column.key);
        if (!value)
          return fail(llvm::toString(value.takeError()));
        paper = *value;
      }
      Target target = paper ? column.target : Target::None;
      bool ok = !paper || isMet(target, *paper, *braid);
      if (target != Target::None) {
        ++targets;
        met += ok;
      }
      std::string paperText =
          paper ? llvm::formatv("{0:f4}", *paper).str() : std::string("-");
      // Signed, at the paper's precision ("+0.0000", not "-0.0000").
      double diff = paper ? std::round((*braid - *paper) * 1e4) / 1e4 : 0;
      std::string diffText =
          paper ? llvm::formatv("{0}{1:f4}", diff >= 0 ? "+" : "-",
                                std::abs(diff))
                      .str()
                : std::string("-");
      std::string ratioText =
          paper && *paper > 0 ? llvm::formatv("{0:f3}", *braid / *paper).str()
                              : std::string("-");
      std::string metText = target == Target::None ? std::string("-")
                            : ok                   ? "yes"
                                                   : "NO";
      if (csv)
        os << llvm::formatv("{0},{1},{2},{3},{4},{5:f4},{6},{7},{8},{9}\n",
                            setting.model, p, m, label, paper ? paperText : "",
                            *braid, paper ? diffText : "",
                            paper ? ratioText : "", describe(target), metText);
      else
        os << llvm::formatv("{0,-6} {1,3} {2,4}  {3,-18} {4,7} {5,7:f4} "
                            "{6,8} {7,6}  {8,-14} {9}\n",
                            setting.model, p, m, label, paperText, *braid,
                            diffText, ratioText, describe(target), metText);
    }
  }
  if (!csv)
    os << llvm::formatv("\ntargets met: {0} of {1}\n", met, targets);
  if (errors)
    return 1;
  if (!check)
    return 0;
  if (targets == 0)
    return fail("--check checked no target");
  if (met != targets)
    return fail(
        llvm::formatv("{0} of {1} targets missed", targets - met, targets));
  return 0;
}
