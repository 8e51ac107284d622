//===- ProfileTest.cpp - Reading pass-time profiles -----------------------===//

#include "braid/Schedule/Profile.h"

#include "gtest/gtest.h"

using namespace mlir::braid::sched;

namespace {

const char *kTable9 = R"(# comment
model,stages_p,microbatches_m,layers,heads,hidden,microbatch_size,t_f,t_b,t_w,t_comm
1.5B,8,24,22,24,2304,6,18.522,18.086,9.337,0.601
6.2B,8,24,30,32,4096,3,29.718,29.444,19.927,0.527
6.2B,8,32,30,32,4096,3,29.802,29.428,19.530,0.577
)";

std::string errorOf(llvm::Error err) { return llvm::toString(std::move(err)); }

// Tests the per-setting layout: row selection by p, m and model, times per
// chunk, and the paper's memory fraction.
TEST(ProfileTest, PerSettingRows) {
  llvm::Expected<CsvTable> table = parseCsv(kTable9, "t9.csv");
  ASSERT_TRUE(static_cast<bool>(table));
  EXPECT_EQ(table->rows.size(), 3u);
  EXPECT_EQ(table->lines[0], 3);

  std::optional<double> fraction;
  llvm::Expected<CostModel> costs =
      getCostModelFromProfile(*table, 8, 32, 2, "", &fraction);
  ASSERT_TRUE(static_cast<bool>(costs)) << errorOf(costs.takeError());
  EXPECT_EQ(costs->getNumStages(), 16);
  EXPECT_DOUBLE_EQ(costs->forward[5], 29.802 / 2);
  EXPECT_DOUBLE_EQ(costs->comm[7], 0.577);
  ASSERT_TRUE(fraction.has_value());
  EXPECT_DOUBLE_EQ(*fraction, 32.0 * 4096 / (34.0 * 4096 + 5 * 32 * 1024));

  llvm::Expected<CostModel> ambiguous =
      getCostModelFromProfile(*table, 8, 24, 1);
  ASSERT_FALSE(static_cast<bool>(ambiguous));
  EXPECT_EQ(errorOf(ambiguous.takeError()),
            "t9.csv has 2 rows for p = 8, m = 24; choose one with --model "
            "(1.5B, 6.2B)");
  llvm::Expected<CostModel> chosen =
      getCostModelFromProfile(*table, 8, 24, 1, "1.5B");
  ASSERT_TRUE(static_cast<bool>(chosen));
  EXPECT_DOUBLE_EQ(chosen->weight[0], 9.337);

  llvm::Expected<CostModel> missing = getCostModelFromProfile(*table, 4, 8, 1);
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(errorOf(missing.takeError()).find("has no row for p = 4, m = 8"),
            std::string::npos);
}

// Tests the per-stage layout.
TEST(ProfileTest, PerStageRows) {
  llvm::Expected<CsvTable> table = parseCsv(
      "stage,t_f,t_b,t_w,t_comm\n1,2,2,1,0.5\n0,1,1,1,0.25\n", "s.csv");
  ASSERT_TRUE(static_cast<bool>(table));
  llvm::Expected<CostModel> costs = getCostModelFromProfile(*table, 2, 7, 1);
  ASSERT_TRUE(static_cast<bool>(costs)) << errorOf(costs.takeError());
  EXPECT_DOUBLE_EQ(costs->forward[1], 2);
  EXPECT_DOUBLE_EQ(costs->forward[0], 1);
  ASSERT_EQ(costs->comm.size(), 1u);
  EXPECT_DOUBLE_EQ(costs->comm[0], 0.25);
  llvm::Expected<CostModel> wrong = getCostModelFromProfile(*table, 3, 7, 1);
  ASSERT_FALSE(static_cast<bool>(wrong));
  EXPECT_EQ(errorOf(wrong.takeError()),
            "s.csv has 2 stage rows; p = 3 ranks with 1 chunks need 3");
}

// Tests the errors: bad cells, ragged rows, missing files and columns.
TEST(ProfileTest, Errors) {
  llvm::Expected<CsvTable> ragged = parseCsv("a,b\n1,2,3\n", "r.csv");
  ASSERT_FALSE(static_cast<bool>(ragged));
  EXPECT_EQ(errorOf(ragged.takeError()),
            "r.csv:2: 3 cells, but the header has 2 columns");

  llvm::Expected<CsvTable> bad =
      parseCsv("stage,t_f,t_b,t_w\n0,fast,1,1\n", "b.csv");
  ASSERT_TRUE(static_cast<bool>(bad));
  llvm::Expected<CostModel> costs = getCostModelFromProfile(*bad, 1, 1, 1);
  ASSERT_FALSE(static_cast<bool>(costs));
  EXPECT_EQ(errorOf(costs.takeError()),
            "b.csv:2: column 't_f' is 'fast', not a number");

  llvm::Expected<CsvTable> none = readCsv("/nonexistent/profile.csv");
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_NE(errorOf(none.takeError()).find("cannot read /nonexistent/"),
            std::string::npos);

  llvm::Expected<CsvTable> empty = parseCsv("# only a comment\n", "e.csv");
  ASSERT_FALSE(static_cast<bool>(empty));
  EXPECT_EQ(errorOf(empty.takeError()), "e.csv: no header line");

  llvm::Expected<CsvTable> negative =
      parseCsv("t_f,t_b,t_w\n1,-1,1\n", "n.csv");
  ASSERT_TRUE(static_cast<bool>(negative));
  llvm::Expected<CostModel> neg = getCostModelFromProfile(*negative, 2, 2, 1);
  ASSERT_FALSE(static_cast<bool>(neg));
  EXPECT_EQ(errorOf(neg.takeError()),
            "backward time of stage 0 is -1; times must be finite and not "
            "negative");
}

} // namespace
