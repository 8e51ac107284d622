//===- Profile.h - Pass-time profiles from CSV files ------------*- C++ -*-===//
//
// Profiles are small CSV files: '#' lines are comments, the first other line
// names the columns. Two layouts are understood:
//
//   - One row per setting, as Table 9 of the zero-bubble paper
//     (model,stages_p,microbatches_m,...,t_f,t_b,t_w,t_comm): times of one
//     micro-batch on one rank, every stage alike. Optional columns `heads`,
//     `hidden` (and `seq`) give the paper's memory model.
//   - One row per model stage (stage,t_f,t_b,t_w[,t_comm]): per-stage times;
//     t_comm on row s is the transfer between stage s and s + 1.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_PROFILE_H
#define BRAID_SCHEDULE_PROFILE_H

#include "braid/Schedule/CostModel.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::braid::sched {

/// A parsed CSV file.
struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  /// 1-based line number of each row in the file, for error messages.
  std::vector<int> lines;

  /// Index of the column named `name`, if any.
  std::optional<int> getColumn(llvm::StringRef name) const;
  /// The cell of `row` in column `name` parsed as a number; an error naming
  /// the file, line and column if it is missing or not a number.
  llvm::Expected<double> getNumber(int row, llvm::StringRef name) const;
  /// The cell as text; empty if the column does not exist.
  llvm::StringRef getText(int row, llvm::StringRef name) const;
};

/// Reads and splits `path`. Fails if the file cannot be read, has no header,
/// or a row has a different number of cells than the header.
llvm::Expected<CsvTable> readCsv(llvm::StringRef path);
/// Same, from text already in memory (`path` only names it in errors).
llvm::Expected<CsvTable> parseCsv(llvm::StringRef text, llvm::StringRef path);

/// One row of a per-setting profile (Table 9 layout).
struct ProfileSetting {
  std::string model;
  int numRanks = 0;
  int numMicrobatches = 0;
  double tf = 0, tb = 0, tw = 0, tcomm = 0;
  /// M_W / M_B from heads, hidden and seq, when the profile has them.
  std::optional<double> weightFraction;
};

/// Reads every row of a per-setting profile. `seq` is the sequence length
/// used for the memory model when the file has no `seq` column.
llvm::Expected<std::vector<ProfileSetting>>
getProfileSettings(const CsvTable &table, double seq = 1024);

/// Builds the cost model for p ranks, m micro-batches and v chunks from
/// either layout. A per-setting profile must have exactly one row for (p, m)
/// (after filtering by `model` when given); a per-stage profile must have one
/// row per stage, p*v of them. `weightFraction` receives the memory model of
/// the chosen setting (sequence length `seq` unless the file has a `seq`
/// column), if it has one.
llvm::Expected<CostModel> getCostModelFromProfile(
    const CsvTable &table, int numRanks, int numMicrobatches, int numChunks,
    llvm::StringRef model = "", std::optional<double> *weightFraction = nullptr,
    double seq = 1024);

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_PROFILE_H
