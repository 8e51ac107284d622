//===- Profile.cpp - Pass-time profiles from CSV files --------------------===//

#include "braid/Schedule/Profile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir::braid::sched;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::optional<int> CsvTable::getColumn(llvm::StringRef name) const {
  for (auto [i, column] : llvm::enumerate(header))
    if (llvm::StringRef(column).equals_insensitive(name))
      return i;
  return std::nullopt;
}

llvm::StringRef CsvTable::getText(int row, llvm::StringRef name) const {
  std::optional<int> column = getColumn(name);
  if (!column)
    return "";
  return rows[row][*column];
}

llvm::Expected<double> CsvTable::getNumber(int row,
                                           llvm::StringRef name) const {
  std::optional<int> column = getColumn(name);
  if (!column)
    return makeError(llvm::formatv("{0}: no column '{1}' (columns: {2})", path,
                                   name, llvm::join(header, ", ")));
  llvm::StringRef cell = rows[row][*column];
  double value;
  if (cell.getAsDouble(value) || !std::isfinite(value))
    return makeError(llvm::formatv("{0}:{1}: column '{2}' is '{3}', not a "
                                   "number",
                                   path, lines[row], name, cell));
  return value;
}

llvm::Expected<CsvTable> mlir::braid::sched::parseCsv(llvm::StringRef text,
                                                      llvm::StringRef path) {
  CsvTable table;
  table.path = path.str();
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (auto [i, rawLine] : llvm::enumerate(lines)) {
    llvm::StringRef line = rawLine.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    llvm::SmallVector<llvm::StringRef> cells;
    line.split(cells, ',');
    std::vector<std::string> row;
    for (llvm::StringRef cell : cells)
      row.push_back(cell.trim().str());
    if (table.header.empty()) {
      table.header = std::move(row);
      continue;
    }
    if (row.size() != table.header.size())
      return makeError(llvm::formatv("{0}:{1}: {2} cells, but the header has "
                                     "{3} columns",
                                     path, i + 1, row.size(),
                                     table.header.size()));
    table.rows.push_back(std::move(row));
    table.lines.push_back(i + 1);
  }
  if (table.header.empty())
    return makeError(llvm::formatv("{0}: no header line", path));
  return table;
}

llvm::Expected<CsvTable> mlir::braid::sched::readCsv(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError(llvm::formatv("cannot read {0}: {1}", path,
                                   buffer.getError().message()));
  return parseCsv((*buffer)->getBuffer(), path);
}

llvm::Expected<std::vector<ProfileSetting>>
mlir::braid::sched::getProfileSettings(const CsvTable &table, double seq) {
  std::vector<ProfileSetting> settings;
  for (int row = 0, e = table.rows.size(); row < e; ++row) {
    ProfileSetting setting;
    setting.model = table.getText(row, "model").str();
    double values[6];
    const char *names[6] = {"stages_p", "microbatches_m", "t_f", "t_b",
                            "t_w",      "t_comm"};
    for (int k = 0; k < 6; ++k) {
      llvm::Expected<double> value = table.getNumber(row, names[k]);
      if (!value)
        return value.takeError();
      values[k] = *value;
    }
    setting.numRanks = static_cast<int>(values[0]);
    setting.numMicrobatches = static_cast<int>(values[1]);
    setting.tf = values[2];
    setting.tb = values[3];
    setting.tw = values[4];
    setting.tcomm = values[5];
    if (setting.numRanks < 1 || setting.numMicrobatches < 1 ||
        setting.numRanks != values[0] || setting.numMicrobatches != values[1])
      return makeError(llvm::formatv("{0}:{1}: stages_p and microbatches_m "
                                     "must be positive integers",
                                     table.path, table.lines[row]));
    if (table.getColumn("heads") && table.getColumn("hidden")) {
      llvm::Expected<double> heads = table.getNumber(row, "heads");
      if (!heads)
        return heads.takeError();
      llvm::Expected<double> hidden = table.getNumber(row, "hidden");
      if (!hidden)
        return hidden.takeError();
      double rowSeq = seq;
      if (table.getColumn("seq")) {
        llvm::Expected<double> value = table.getNumber(row, "seq");
        if (!value)
          return value.takeError();
        rowSeq = *value;
      }
      setting.weightFraction =
          MemoryModel::transformerWeightFraction(*hidden, *heads, rowSeq);
    }
    settings.push_back(setting);
  }
  return settings;
}

llvm::Expected<CostModel> mlir::braid::sched::getCostModelFromProfile(
    const CsvTable &table, int numRanks, int numMicrobatches, int numChunks,
    llvm::StringRef model, std::optional<double> *weightFraction, double seq) {
  int numStages = numRanks * numChunks;
  // Per-stage layout.
  if (table.getColumn("stage")) {
    if (static_cast<int>(table.rows.size()) != numStages)
      return makeError(llvm::formatv("{0} has {1} stage rows; p = {2} ranks "
                                     "with {3} chunks need {4}",
                                     table.path, table.rows.size(), numRanks,
                                     numChunks, numStages));
    CostModel costs;
    costs.forward.assign(numStages, 0);
    costs.backward.assign(numStages, 0);
    costs.weight.assign(numStages, 0);
    costs.comm.assign(numStages - 1, 0);
    std::vector<bool> seen(numStages, false);
    bool hasComm = table.getColumn("t_comm").has_value();
    for (int row = 0; row < numStages; ++row) {
      llvm::Expected<double> stage = table.getNumber(row, "stage");
      if (!stage)
        return stage.takeError();
      int s = static_cast<int>(*stage);
      if (s != *stage || s < 0 || s >= numStages || seen[s])
        return makeError(llvm::formatv("{0}:{1}: stage {2} is not a new stage "
                                       "in [0, {3})",
                                       table.path, table.lines[row], *stage,
                                       numStages));
      seen[s] = true;
      for (auto [name, times] : {std::pair<const char *, std::vector<double> *>{
                                     "t_f", &costs.forward},
                                 {"t_b", &costs.backward},
                                 {"t_w", &costs.weight}}) {
        llvm::Expected<double> value = table.getNumber(row, name);
        if (!value)
          return value.takeError();
        (*times)[s] = *value;
      }
      if (hasComm && s + 1 < numStages) {
        llvm::Expected<double> value = table.getNumber(row, "t_comm");
        if (!value)
          return value.takeError();
        costs.comm[s] = *value;
      }
    }
    if (llvm::Error err = costs.validate(numStages))
      return std::move(err);
    return costs;
  }

  // Per-setting layout: find the row for (p, m).
  bool keyed = table.getColumn("stages_p") && table.getColumn("microbatches_m");
  if (!keyed) {
    if (table.rows.size() != 1)
      return makeError(llvm::formatv(
          "{0}: without a 'stage' column or 'stages_p'/'microbatches_m' "
          "columns the profile must have exactly one row",
          table.path));
    double t[4] = {0, 0, 0, 0};
    const char *names[4] = {"t_f", "t_b", "t_w", "t_comm"};
    for (int k = 0; k < 4; ++k) {
      if (k == 3 && !table.getColumn("t_comm"))
        break;
      llvm::Expected<double> value = table.getNumber(0, names[k]);
      if (!value)
        return value.takeError();
      t[k] = *value;
    }
    CostModel costs =
        CostModel::uniform(numRanks, numChunks, t[0], t[1], t[2], t[3]);
    if (llvm::Error err = costs.validate(numStages))
      return std::move(err);
    return costs;
  }

  llvm::Expected<std::vector<ProfileSetting>> settings =
      getProfileSettings(table, seq);
  if (!settings)
    return settings.takeError();
  std::vector<const ProfileSetting *> matches;
  std::vector<std::string> available, models;
  for (const ProfileSetting &s : *settings) {
    available.push_back(llvm::formatv("{0} p={1} m={2}", s.model, s.numRanks,
                                      s.numMicrobatches));
    if (s.numRanks != numRanks || s.numMicrobatches != numMicrobatches)
      continue;
    models.push_back(s.model);
    if (model.empty() || model == s.model)
      matches.push_back(&s);
  }
  if (matches.empty())
    return makeError(llvm::formatv(
        "{0} has no row for {1}p = {2}, m = {3} (rows: {4})", table.path,
        model.empty() ? std::string() : ("model " + model + ", ").str(),
        numRanks, numMicrobatches, llvm::join(available, "; ")));
  if (matches.size() > 1)
    return makeError(llvm::formatv("{0} has {1} rows for p = {2}, m = {3}; "
                                   "choose one with --model ({4})",
                                   table.path, matches.size(), numRanks,
                                   numMicrobatches, llvm::join(models, ", ")));
  const ProfileSetting &s = *matches.front();
  if (weightFraction)
    *weightFraction = s.weightFraction;
  CostModel costs =
      CostModel::uniform(numRanks, numChunks, s.tf, s.tb, s.tw, s.tcomm);
  if (llvm::Error err = costs.validate(numStages))
    return std::move(err);
  return costs;
}
